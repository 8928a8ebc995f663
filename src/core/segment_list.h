// SegmentList: one logical vector made of several caller buffers.
//
// Terms. A *list segment* is one caller buffer (pointer, bytes), e.g. one
// gradient tensor. The list is their concatenation in the order given,
// addressed by byte offset like a contiguous buffer: byte o of the list is
// byte o - begin(i) of the segment i that holds it. A *piece* is the part of
// an addressed range that lies inside one segment (contiguous memory). (Not
// to be confused with a ring algorithm's "segment" in executor/schedule.h,
// the part of the vector one ring step moves.)
//
// Why one type in core: the executor (send/recv/reduce/copy steps), the
// shared-memory engine (copy-in/copy-out) and the API (validation) all
// address list-bound calls through it, so no algorithm knows about lists:
// a schedule built for a count runs unchanged on a list of that many
// elements, with chunks that straddle segments split here into pieces.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace boostcomm::core {

struct Piece {
  char* data = nullptr;
  std::size_t bytes = 0;
};

class SegmentList {
 public:
  void clear() {
    data_.clear();
    begin_.assign(1, 0);
  }
  // Empty segments are skipped (they hold no byte of the list).
  void append(const void* data, std::size_t bytes) {
    if (bytes == 0) return;
    if (begin_.empty()) begin_.push_back(0);
    data_.push_back(static_cast<char*>(const_cast<void*>(data)));
    begin_.push_back(begin_.back() + bytes);
  }
  std::size_t segments() const { return data_.size(); }
  std::size_t totalBytes() const { return begin_.empty() ? 0 : begin_.back(); }
  char* segmentData(std::size_t i) const { return data_[i]; }
  std::size_t segmentBegin(std::size_t i) const { return begin_[i]; }
  std::size_t segmentBytes(std::size_t i) const { return begin_[i + 1] - begin_[i]; }
  // The storage, for a peer that reads this list's layout through CMA (shm/cma.h).
  char* const* dataArray() const { return data_.data(); }
  const std::size_t* beginArray() const { return begin_.data(); }

  // Index of the segment holding byte `offset` (offset < totalBytes()).
  std::size_t find(std::size_t offset) const {
    return static_cast<std::size_t>(std::upper_bound(begin_.begin() + 1, begin_.end(), offset) - begin_.begin()) - 1;
  }

  // fn(Piece) for each piece of [offset, offset + bytes), in order.
  template <typename Fn>
  void forEachPiece(std::size_t offset, std::size_t bytes, Fn&& fn) const {
    if (bytes == 0) return;
    std::size_t i = find(offset);
    std::size_t within = offset - begin_[i];
    while (bytes > 0) {
      const std::size_t n = std::min(bytes, segmentBytes(i) - within);
      fn(Piece{data_[i] + within, n});
      bytes -= n;
      within = 0;
      ++i;
    }
  }
  std::size_t pieceCount(std::size_t offset, std::size_t bytes) const;
  // The address of [offset, offset + bytes) when it lies in one segment, else null.
  char* contiguous(std::size_t offset, std::size_t bytes) const;
  // dst <- list[offset, offset + bytes)
  void gather(void* dst, std::size_t offset, std::size_t bytes) const;
  // list[offset, offset + bytes) <- src
  void scatter(std::size_t offset, const void* src, std::size_t bytes) const;

 private:
  std::vector<char*> data_;
  std::vector<std::size_t> begin_{0};  // begin_[i]: list offset of segment i; back(): total bytes
};

// One operand of a local step: a byte range that is either contiguous memory
// (list == nullptr: base) or a range of a segment list (offset into it).
struct Operand {
  const SegmentList* list = nullptr;
  char* base = nullptr;
  std::size_t offset = 0;
};

// Walks up to three operands of `bytes` each in lockstep, calling
// fn(char* const* ptrs, std::size_t n) for every run over which all of them
// are contiguous (n is cut at every segment boundary of a listed operand).
template <int N, typename Fn>
void forEachRun(const Operand (&ops)[N], std::size_t bytes, Fn&& fn) {
  char* ptr[N];
  std::size_t left[N];   // bytes contiguous from ptr (listed operands)
  std::size_t index[N];  // segment index (listed operands)
  for (int k = 0; k < N; ++k) {
    left[k] = bytes;
    index[k] = 0;
    if (ops[k].list == nullptr) {
      ptr[k] = ops[k].base;
    } else if (bytes > 0) {
      index[k] = ops[k].list->find(ops[k].offset);
      const std::size_t within = ops[k].offset - ops[k].list->segmentBegin(index[k]);
      ptr[k] = ops[k].list->segmentData(index[k]) + within;
      left[k] = ops[k].list->segmentBytes(index[k]) - within;
    }
  }
  while (bytes > 0) {
    std::size_t n = bytes;
    for (int k = 0; k < N; ++k) n = std::min(n, left[k]);
    fn(static_cast<char* const*>(ptr), n);
    bytes -= n;
    if (bytes == 0) break;
    for (int k = 0; k < N; ++k) {
      ptr[k] += n;
      left[k] -= n;
      if (ops[k].list != nullptr && left[k] == 0) {
        ++index[k];
        ptr[k] = ops[k].list->segmentData(index[k]);
        left[k] = ops[k].list->segmentBytes(index[k]);
      } else if (ops[k].list == nullptr) {
        left[k] = bytes;
      }
    }
  }
}

}  // namespace boostcomm::core
