// Communicator::allreduceMany / broadcastMany / allgatherMany /
// reduceScatterMany and the internal segment-list entry.
//
// A list call is an ordinary collective of the lists' total counts whose
// send and recv buffers are segment lists (CallArgs::sendList / recvList):
// it goes through the same validation, selection map (by total bytes),
// schedule cache and progress engine; only the execution's binding differs
// (executor/executor.h). allreduce and broadcast run in place on one list.
// allgather and reduce_scatter address their per-tensor outputs (inputs)
// through a list laid out in the collective's rank-major order: block r of
// the gathered vector is [tensor 0's block r, tensor 1's block r, ...], so
// the recv (send) list names size x n pieces of the caller's n tensors.
#include <algorithm>
#include <limits>
#include <sstream>
#include <vector>

#include "api/access.h"
#include "api/agreement.h"
#include "api/call.h"
#include "api/communicator_impl.h"
#include "api/communicator_many.h"
#include "core/check.h"
#include "core/hash.h"
#include "planner/bucketing.h"

namespace boostcomm {
namespace detail {

namespace {

CallArgs listArgs(Collective collective, const core::SegmentList& send, const core::SegmentList& recv,
                  DataType dtype, ReduceOp op, int root) {
  CallArgs a;
  a.collective = collective;
  a.root = root;
  const std::size_t es = dataTypeSize(dtype);
  const std::size_t sendCount = send.totalBytes() / es;
  const std::size_t recvCount = recv.totalBytes() / es;
  // send/recv carry only counts and dtype; the lists stand in as non-null
  // placeholder addresses for the argument checks (never dereferenced).
  a.send = ConstView(sendCount > 0 ? &send : nullptr, sendCount, dtype);
  a.recv = View(recvCount > 0 ? const_cast<core::SegmentList*>(&recv) : nullptr, recvCount, dtype);
  a.op = op;
  a.sendList = &send;
  a.recvList = &recv;
  return a;
}

CallArgs listArgs(Collective collective, const core::SegmentList& list, DataType dtype, ReduceOp op, int root) {
  return listArgs(collective, list, list, dtype, op, root);
}

// Views of either constness, read alike.
template <typename V>
std::string describeViews(std::span<const V> segments, const char* name, core::SegmentList& list, DataType& dtype) {
  list.clear();
  if (segments.empty()) return {};
  std::ostringstream os;
  if (static_cast<unsigned>(dtype) >= static_cast<unsigned>(kNumDataTypes)) {
    os << name << "[0].dtype has invalid value " << static_cast<int>(dtype);
    return os.str();
  }
  const std::size_t es = dataTypeSize(dtype);
  std::size_t total = 0;
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const V& v = segments[i];
    if (v.dtype != dtype) {
      os << name << "[" << i << "].dtype is " << toString(v.dtype) << " but " << name << "[0].dtype is "
         << toString(dtype) << " (one dtype per list)";
      return os.str();
    }
    if (v.data == nullptr && v.count > 0) {
      os << name << "[" << i << "].data is null but its count is " << v.count;
      return os.str();
    }
    if (v.count > (std::numeric_limits<std::size_t>::max() - total) / es) {
      os << name << "[" << i << "]: the list's total bytes overflow the address space";
      return os.str();
    }
    total += v.count * es;
    list.append(v.data, v.count * es);
  }
  return {};
}

// A named byte range of a caller's segment, for the overlap check.
struct NamedRange {
  std::uintptr_t begin;
  std::size_t bytes;
  const char* name;
  std::size_t index;
};

// Sorted by address, a range that starts before its predecessor ends
// overlaps it (the results would depend on the order the library writes
// them in, or a segment would be read after being overwritten).
std::string firstOverlap(std::vector<NamedRange> ranges) {
  std::sort(ranges.begin(), ranges.end(), [](const NamedRange& a, const NamedRange& b) { return a.begin < b.begin; });
  for (std::size_t k = 1; k < ranges.size(); ++k) {
    const NamedRange& prev = ranges[k - 1];
    const NamedRange& cur = ranges[k];
    if (cur.begin < prev.begin + prev.bytes) {
      std::ostringstream os;
      const bool ordered = std::string_view(prev.name) < std::string_view(cur.name) ||
                           (std::string_view(prev.name) == cur.name && prev.index < cur.index);
      const NamedRange& a = ordered ? prev : cur;
      const NamedRange& b = ordered ? cur : prev;
      os << a.name << "[" << a.index << "] and " << b.name << "[" << b.index << "] overlap";
      return os.str();
    }
  }
  return {};
}

template <typename V>
void addRanges(std::span<const V> segments, const char* name, std::vector<NamedRange>& out) {
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const V& v = segments[i];
    if (v.count == 0) continue;
    out.push_back({reinterpret_cast<std::uintptr_t>(v.data), v.count * dataTypeSize(v.dtype), name, i});
  }
}

}  // namespace

std::string describeSegments(std::span<const View> segments, core::SegmentList& list, DataType& dtype) {
  dtype = segments.empty() ? DataType::kFloat32 : segments.front().dtype;
  std::string error = describeViews(segments, "segments", list, dtype);
  if (!error.empty()) return error;
  std::vector<NamedRange> ranges;
  addRanges(segments, "segments", ranges);
  return firstOverlap(std::move(ranges));
}

Work allreduceListAsync(Communicator& comm, const core::SegmentList& list, DataType dtype, ReduceOp op,
                        const CallOptions& options) {
  return implOf(comm).submit(listArgs(Collective::kAllreduce, list, dtype, op, 0), options);
}

namespace {

// The agreed shape: the counts and dtype in order (empty segments too), the
// collective, and its op or root.
template <typename V>
std::uint64_t listSignature(std::span<const V> segments, Collective collective, std::uint64_t opOrRoot) {
  std::vector<planner::TensorInfo> infos;
  infos.reserve(segments.size());
  for (const V& v : segments) infos.push_back({v.count, v.dtype});
  const std::uint64_t h = core::fnvWord(planner::tensorListSignature(infos), static_cast<std::uint64_t>(collective));
  return core::fnvWord(h, opOrRoot);
}

std::string opError(ReduceOp op, DataType dtype) {
  if (static_cast<unsigned>(op) >= static_cast<unsigned>(kNumReduceOps))
    return "op has invalid value " + std::to_string(static_cast<int>(op));
  if (op == ReduceOp::kAvg && !isFloatingPoint(dtype))
    return std::string("op avg is not supported for dtype ") + std::string(toString(dtype)) +
           " (an integer average would truncate; use sum and divide)";
  return {};
}

std::string localError(std::span<const View> segments, ReduceOp op, core::SegmentList& list, DataType& dtype) {
  std::string error = describeSegments(segments, list, dtype);
  return error.empty() ? opError(op, dtype) : error;
}

// allgatherMany / reduceScatterMany: `whole` holds the per-tensor vectors of
// size x the count of `part` (recv of an allgather, send of a
// reduce_scatter). Checks both lists and fills `partList` (in order) and
// `wholeList` (rank-major: for each rank r, each tensor's block r).
// perRank (the *PerRank forms): `whole` already names the blocks, rank-major
// (whole[r * n + i] is block r of tensor i, as torch's per-rank output lists),
// each of part[i]'s count; they are listed as given.
template <typename P, typename W>
std::string describeSplit(std::span<const P> part, const char* partName, std::span<const W> whole,
                          const char* wholeName, int size, bool perRank, core::SegmentList& partList,
                          core::SegmentList& wholeList, DataType& dtype) {
  std::ostringstream os;
  const std::size_t ranks = static_cast<std::size_t>(size);
  const std::size_t wanted = perRank ? ranks * part.size() : part.size();
  if (whole.size() != wanted) {
    os << partName << " has " << part.size() << " tensors but " << wholeName << " has " << whole.size();
    if (perRank) os << " (must be size (" << size << ") * " << part.size() << ", rank-major)";
    return os.str();
  }
  dtype = part.empty() ? DataType::kFloat32 : part.front().dtype;
  std::string error = describeViews(part, partName, partList, dtype);
  if (error.empty()) error = describeViews(whole, wholeName, wholeList, dtype);
  if (!error.empty()) return error;
  for (std::size_t k = 0; k < whole.size(); ++k) {
    const std::size_t i = perRank ? k % part.size() : k;
    const bool ok = perRank ? whole[k].count == part[i].count
                            : part[i].count <= std::numeric_limits<std::size_t>::max() / ranks &&
                                  whole[k].count == ranks * part[i].count;
    if (ok) continue;
    os << wholeName << "[" << k << "].count is " << whole[k].count << " but must be ";
    if (!perRank) os << "size (" << size << ") * ";
    os << partName << "[" << i << "].count (" << part[i].count << ")";
    return os.str();
  }
  std::vector<NamedRange> ranges;
  addRanges(part, partName, ranges);
  addRanges(whole, wholeName, ranges);
  error = firstOverlap(std::move(ranges));
  if (!error.empty() || perRank) return error;  // perRank: wholeList is already rank-major
  wholeList.clear();
  const std::size_t es = dataTypeSize(dtype);
  for (std::size_t r = 0; r < ranks; ++r) {
    for (std::size_t i = 0; i < part.size(); ++i) {
      const std::size_t bytes = part[i].count * es;
      wholeList.append(static_cast<const char*>(whole[i].data) + r * bytes, bytes);
    }
  }
  return {};
}

Work allgatherSplit(Communicator& comm, std::span<const ConstView> send, std::span<const View> recv, bool perRank,
                    const CallOptions& options) {
  core::SegmentList sendList;
  core::SegmentList recvList;
  DataType dtype = DataType::kFloat32;
  const char* name = perRank ? "allgatherManyPerRank" : "allgatherMany";
  const std::string error = describeSplit(send, "send", recv, "recv", comm.size(), perRank, sendList, recvList, dtype);
  agreeAcrossRanks(comm, listSignature(send, Collective::kAllgather, perRank ? 1 : 0), error, name);
  return implOf(comm).submit(listArgs(Collective::kAllgather, sendList, recvList, dtype, ReduceOp::kSum, 0), options);
}

Work reduceScatterSplit(Communicator& comm, std::span<const ConstView> send, std::span<const View> recv, ReduceOp op,
                        bool perRank, const CallOptions& options) {
  core::SegmentList sendList;
  core::SegmentList recvList;
  DataType dtype = DataType::kFloat32;
  const char* name = perRank ? "reduceScatterManyPerRank" : "reduceScatterMany";
  std::string error = describeSplit(recv, "recv", send, "send", comm.size(), perRank, recvList, sendList, dtype);
  if (error.empty()) error = opError(op, dtype);
  // The op in the low bits, the form above them: a per-rank call on one rank
  // against a plain one on another is a mismatch, not a different layout.
  const std::uint64_t opAndForm = static_cast<std::uint64_t>(op) | (perRank ? 1u << 8 : 0u);
  agreeAcrossRanks(comm, listSignature(recv, Collective::kReduceScatter, opAndForm), error, name);
  return implOf(comm).submit(listArgs(Collective::kReduceScatter, sendList, recvList, dtype, op, 0), options);
}

}  // namespace
}  // namespace detail

void Communicator::allreduceMany(std::span<const View> segments, ReduceOp op, const CallOptions& options) {
  allreduceManyAsync(segments, op, options).wait(options.timeout);
}

Work Communicator::allreduceManyAsync(std::span<const View> segments, ReduceOp op, const CallOptions& options) {
  core::SegmentList list;
  DataType dtype = DataType::kFloat32;
  const std::string error = detail::localError(segments, op, list, dtype);
  detail::agreeAcrossRanks(*this, detail::listSignature(segments, Collective::kAllreduce, static_cast<std::uint64_t>(op)),
                           error, "allreduceMany");
  return detail::allreduceListAsync(*this, list, dtype, op, options);
}

void Communicator::broadcastMany(std::span<const View> segments, int root, const CallOptions& options) {
  broadcastManyAsync(segments, root, options).wait(options.timeout);
}

Work Communicator::broadcastManyAsync(std::span<const View> segments, int root, const CallOptions& options) {
  core::SegmentList list;
  DataType dtype = DataType::kFloat32;
  std::string error = detail::describeSegments(segments, list, dtype);
  if (error.empty() && (root < 0 || root >= size()))
    error = "root " + std::to_string(root) + " is out of range [0, " + std::to_string(size()) + ")";
  detail::agreeAcrossRanks(*this, detail::listSignature(segments, Collective::kBroadcast, static_cast<std::uint64_t>(root)),
                           error, "broadcastMany");
  return detail::implOf(*this).submit(detail::listArgs(Collective::kBroadcast, list, dtype, ReduceOp::kSum, root),
                                      options);
}

void Communicator::allgatherMany(std::span<const ConstView> send, std::span<const View> recv,
                                 const CallOptions& options) {
  allgatherManyAsync(send, recv, options).wait(options.timeout);
}

Work Communicator::allgatherManyAsync(std::span<const ConstView> send, std::span<const View> recv,
                                      const CallOptions& options) {
  return detail::allgatherSplit(*this, send, recv, false, options);
}

void Communicator::allgatherManyPerRank(std::span<const ConstView> send, std::span<const View> recvByRank,
                                        const CallOptions& options) {
  allgatherManyPerRankAsync(send, recvByRank, options).wait(options.timeout);
}

Work Communicator::allgatherManyPerRankAsync(std::span<const ConstView> send, std::span<const View> recvByRank,
                                             const CallOptions& options) {
  return detail::allgatherSplit(*this, send, recvByRank, true, options);
}

void Communicator::reduceScatterMany(std::span<const ConstView> send, std::span<const View> recv, ReduceOp op,
                                     const CallOptions& options) {
  reduceScatterManyAsync(send, recv, op, options).wait(options.timeout);
}

Work Communicator::reduceScatterManyAsync(std::span<const ConstView> send, std::span<const View> recv, ReduceOp op,
                                          const CallOptions& options) {
  return detail::reduceScatterSplit(*this, send, recv, op, false, options);
}

void Communicator::reduceScatterManyPerRank(std::span<const ConstView> sendByRank, std::span<const View> recv,
                                            ReduceOp op, const CallOptions& options) {
  reduceScatterManyPerRankAsync(sendByRank, recv, op, options).wait(options.timeout);
}

Work Communicator::reduceScatterManyPerRankAsync(std::span<const ConstView> sendByRank, std::span<const View> recv,
                                                 ReduceOp op, const CallOptions& options) {
  return detail::reduceScatterSplit(*this, sendByRank, recv, op, true, options);
}

}  // namespace boostcomm
