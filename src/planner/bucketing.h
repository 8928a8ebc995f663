// Bucketing: which fusion bucket each tensor goes to, and where in it.
//
// Terms. A *tensor* is one caller buffer (count elements of one dtype). A
// *bucket* is one contiguous buffer synchronised by one collective; it holds
// the tensors of a single dtype, each starting at an offset aligned to
// alignBytes. A *slot* is one tensor's place in its bucket.
//
// Rules (a pure function of the inputs, so every rank that passes the same
// tensors gets the same plan, and so the same summation order):
// - tensors are taken in the order given (the caller passes them in the
//   order their data becomes ready, e.g. reverse declaration order for
//   gradients, as DDP does);
// - each dtype has one open bucket; a tensor joins the open bucket of its
//   dtype unless that would take the bucket past its byte limit, in which case
//   the open bucket is closed and a new one opened; a tensor larger than the
//   limit gets a bucket of its own (tensors are never split);
// - the first bucket of the plan may have a smaller limit (firstBucketBytes),
//   so that the first collective can start early in an overlapped backward;
// - buckets are numbered in the order they were opened;
// - empty tensors get a slot of count 0 in the open bucket of their dtype.
// Rejected alternative: sorting tensors by dtype or size to pack tighter; it
// changes the order in which buckets become ready and defeats overlap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "boostcomm/types.h"

namespace boostcomm::planner {

struct TensorInfo {
  std::size_t count = 0;  // elements
  DataType dtype = DataType::kFloat32;
};

struct BucketOptions {
  std::size_t bucketBytes = 25u << 20;  // byte limit of a bucket (payload + alignment padding)
  std::size_t firstBucketBytes = 0;     // limit of the first bucket; 0 = bucketBytes
  std::size_t alignBytes = 64;          // slot offsets are multiples of this (a power of two)
};

struct BucketSlot {
  std::size_t tensor = 0;  // index into the tensors passed to planBuckets
  std::size_t offset = 0;  // elements from the start of the bucket
  std::size_t count = 0;   // elements
};

struct Bucket {
  DataType dtype = DataType::kFloat32;
  std::size_t count = 0;  // elements, including alignment gaps
  std::vector<BucketSlot> slots;
  std::size_t bytes() const { return count * dataTypeSize(dtype); }
};

struct TensorPlace {
  std::size_t bucket = 0;
  std::size_t slot = 0;
};

struct BucketPlan {
  std::vector<Bucket> buckets;
  std::vector<TensorPlace> placeOf;  // per tensor
  std::size_t payloadBytes = 0;      // sum of tensor bytes
  std::size_t bucketBytes = 0;       // sum of bucket bytes (payload + gaps)
};

// Throws Error{kInvalidArgument} for a zero bucketBytes or a bad alignBytes.
BucketPlan planBuckets(std::span<const TensorInfo> tensors, const BucketOptions& options);

// A 64-bit fingerprint of the tensor list (counts and dtypes in order), for
// checking that every rank passes the same tensors before any data moves.
std::uint64_t tensorListSignature(std::span<const TensorInfo> tensors);

// One line per bucket: "bucket 3: float32, 1048576 elements (4.0 MiB), tensors 12-17".
std::string describePlan(const BucketPlan& plan);

}  // namespace boostcomm::planner
