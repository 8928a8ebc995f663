// Shared-memory allreduce and reduce_scatter: the chunk steps.
//
// allreduce: chunk c is elements [c*K, c*K + K) of the vector (K = chunk
// elements). Rank r owns slice r of every chunk — the chunk cut into size()
// line-aligned parts — reduces it from every rank's input (its slot copy, or
// its registered send buffer in place) and writes it into slice r of its slot
// or into its registered recv buffer. Everyone then copies the slices out.
// Only rank r ever reads slice r of an input, so a rank with an unregistered
// send copies in every slice but its own, reads its own slice straight from
// its send buffer, and writes that slice's result to its recv buffer as it
// reduces it: copy-out then moves only the peers' slices.
//
// reduce_scatter: chunk c is elements [c*K', c*K' + K') of every rank's
// block (K' = chunk elements / size()), so one slot chunk holds one piece per
// block. Rank r reduces piece r straight into its recv buffer: no copy-out.
//
// Segment lists through CMA (ShmOp::cmaList): no slot ring. Rank r reduces
// slice r of chunk c reading every peer's input straight out of the peer's
// tensors (process_vm_readv into its slice scratch) and its own in place,
// writes the result into its own tensors, and bumps reduced; then it copies
// every other slice of the chunk out of the owner's tensors into its own
// (one process_vm_readv) and bumps consumed. A rank's slice-s input is read
// only by rank s, and overwritten by its owner only after rank s published
// that slice's result, so the in-place writes never race a reader.
//
// Inputs are combined in rank order 0, 1, ..., n-1, and each element by one
// rank only, so every rank ends with the same bits. kAvg is divided once,
// by the rank that reduced the slice, before anyone copies it.
#include <algorithm>
#include <cstring>

#include "core/reduce.h"
#include "shm/cma.h"
#include "shm/engine.h"

namespace boostcomm::shm {
namespace {

struct Slice {
  std::size_t offset = 0;  // elements from the chunk start
  std::size_t count = 0;
};

// Block of the own-slice reduction written on to the recv buffer at once.
constexpr std::size_t kOwnBlockBytes = 16 << 10;

std::size_t lineElements(std::size_t es) { return std::max<std::size_t>(1, kLineBytes / es); }

// Slice `part` of a chunk of `total` elements in `parts` line-aligned pieces
// whose sizes differ by at most one line.
Slice slice(std::size_t total, int parts, int part, std::size_t es) {
  const std::size_t unit = lineElements(es);
  const std::size_t units = (total + unit - 1) / unit;
  const std::size_t p = static_cast<std::size_t>(parts);
  const std::size_t i = static_cast<std::size_t>(part);
  const std::size_t first = i * (units / p) + std::min(i, units % p);
  const std::size_t count = units / p + (i < units % p ? 1 : 0);
  const std::size_t begin = std::min(total, first * unit);
  return Slice{begin, std::min(total, (first + count) * unit) - begin};
}

std::size_t chunkLength(const ShmOp& op, std::size_t total, std::uint64_t chunk) {
  const std::size_t begin = static_cast<std::size_t>(chunk) * op.chunkCount;
  return std::min(op.chunkCount, total - begin);
}

// out = inputs[0] op inputs[1] op ... op inputs[n-1], in that order. out may
// be exactly one of the inputs: more than two inputs are accumulated in small
// blocks of scratch and written out once, so no input is overwritten before
// it was read.
void reduceInto(ShmEngine& e, char* out, std::size_t count, DataType dtype, ReduceOp op) {
  const std::vector<const char*>& in = e.inputs();
  const int n = e.size();
  const std::size_t es = dataTypeSize(dtype);
  if (count == 0) return;
  if (n == 1) {
    if (out != in[0]) std::memcpy(out, in[0], count * es);
    return;
  }
  if (n == 2) {
    core::reduce(out, in[0], in[1], count, dtype, op);
    return;
  }
  const std::size_t block = std::max<std::size_t>(1, e.reduceScratchBytes() / es / 2);
  char* acc = e.reduceScratch();
  for (std::size_t done = 0; done < count; done += block) {
    const std::size_t len = std::min(block, count - done);
    const std::size_t at = done * es;
    core::reduce(acc, in[0] + at, in[1] + at, len, dtype, op);
    for (int r = 2; r < n; ++r) core::reduce(acc, acc, in[static_cast<std::size_t>(r)] + at, len, dtype, op);
    std::memcpy(out + at, acc, len * es);
  }
}

void finishAverage(const ShmEngine& e, const ShmOp& op, char* out, std::size_t count) {
  if (op.call.op != ReduceOp::kAvg || count == 0) return;
  core::divideBy(out, count, op.call.dtype, op.call.avgDivisor > 0 ? op.call.avgDivisor : e.size());
}

bool isReduceScatter(const ShmOp& op) { return op.call.collective == Collective::kReduceScatter; }

// Rank r's input for chunk c: the chunk start (allreduce) or the start of
// piece `block` (reduce_scatter).
const char* inputOf(const ShmEngine& e, const ShmOp& op, int r, std::uint64_t c, int block) {
  const std::size_t es = dataTypeSize(op.call.dtype);
  const std::size_t b = static_cast<std::size_t>(block);
  if (const char* base = e.peerInput(r)) {
    const std::size_t blockStart = isReduceScatter(op) ? b * op.call.count : 0;
    return base + (blockStart + static_cast<std::size_t>(c) * op.chunkCount) * es;
  }
  return e.slot(r, op.firstChunk + c) + (isReduceScatter(op) ? b * op.chunkCount * es : 0);
}

// Elements [first, first + count) of an allreduce's input into `dst`: from
// its segment list or its send buffer.
void readInput(const ShmOp& op, std::size_t first, std::size_t count, char* dst) {
  const std::size_t es = dataTypeSize(op.call.dtype);
  if (op.call.list != nullptr) {
    op.call.list->gather(dst, op.call.listOffsetBytes + first * es, count * es);
  } else {
    std::memcpy(dst, static_cast<const char*>(op.call.send) + first * es, count * es);
  }
}

// Elements [first, first + count) of the result from `src` into the segment
// list or the recv buffer (nothing to do where src is already there).
void writeResult(const ShmOp& op, std::size_t first, std::size_t count, const char* src) {
  const std::size_t es = dataTypeSize(op.call.dtype);
  if (count == 0) return;
  if (op.call.list != nullptr) {
    op.call.list->scatter(op.call.listOffsetBytes + first * es, src, count * es);
    return;
  }
  char* dst = static_cast<char*>(op.call.recv) + first * es;
  if (dst != src) std::memcpy(dst, src, count * es);
}

// Where this rank's own slice of the input is read from when its send buffer
// is not registered (copy-in skips that slice): the send buffer in place, or,
// for a list whose slice straddles tensors, `staging` (its own slot slice,
// also the reduction's output, which reduceInto allows) gathered from it.
const char* ownSliceInput(const ShmOp& op, std::size_t first, std::size_t count, char* staging) {
  const std::size_t es = dataTypeSize(op.call.dtype);
  if (op.call.list == nullptr) return static_cast<const char*>(op.call.send) + first * es;
  if (const char* direct = op.call.list->contiguous(op.call.listOffsetBytes + first * es, count * es)) return direct;
  readInput(op, first, count, staging);
  return staging;
}

}  // namespace

std::uint64_t reduceChunks(const ShmEngine& e, ShmOp& op) {
  const std::size_t es = dataTypeSize(op.call.dtype);
  const std::size_t unit = lineElements(es);
  // reduce_scatter: one piece per block in each slot chunk.
  const std::size_t perChunk = e.chunkBytes() / es / (isReduceScatter(op) ? static_cast<std::size_t>(e.size()) : 1);
  op.chunkCount = std::max(unit, perChunk / unit * unit);
  return (op.call.count + op.chunkCount - 1) / op.chunkCount;
}

bool copyInReduceInput(ShmEngine& e, ShmOp& op) {
  if (op.inNext == op.chunks) return false;
  if (op.zeroCopyIn) {
    op.inNext = op.chunks;  // inputReady was published with the descriptor
    return true;
  }
  // Stay at most two chunks ahead of the reduction: what is copied in is
  // reduced while still in cache.
  if (op.inNext >= op.reduceNext + 2) return false;
  const std::uint64_t chunk = op.firstChunk + op.inNext;
  if (!e.slotFree(chunk)) return false;
  const std::size_t es = dataTypeSize(op.call.dtype);
  const char* send = static_cast<const char*>(op.call.send);
  char* slot = e.slot(e.rank(), chunk);
  const std::size_t len = chunkLength(op, op.call.count, op.inNext);
  const std::size_t start = static_cast<std::size_t>(op.inNext) * op.chunkCount;
  if (isReduceScatter(op)) {
    for (int b = 0; b < e.size(); ++b) {
      const std::size_t bs = static_cast<std::size_t>(b);
      std::memcpy(slot + bs * op.chunkCount * es, send + (bs * op.call.count + start) * es, len * es);
    }
  } else {
    // Every slice but this rank's own: peers read those from the slot, and
    // this rank reads its own slice straight from its send buffer.
    const Slice own = slice(len, e.size(), e.rank(), es);
    const std::size_t ranges[2][2] = {{0, own.offset}, {own.offset + own.count, len}};
    for (const auto& r : ranges) {
      if (r[1] > r[0]) readInput(op, start + r[0], r[1] - r[0], slot + r[0] * es);
    }
  }
  ++op.inNext;
  e.control(e.rank()).inputReady.value.store(chunk + 1, std::memory_order_release);
  return true;
}

bool reduceChunk(ShmEngine& e, ShmOp& op) {
  if (op.reduceNext == op.chunks || op.reduceNext >= op.inNext) return false;
  const std::uint64_t c = op.reduceNext;
  const std::uint64_t chunk = op.firstChunk + c;
  if (!e.allReached(&RankControl::inputReady, chunk + 1)) return false;
  const std::size_t es = dataTypeSize(op.call.dtype);
  const int me = e.rank();
  const std::size_t len = chunkLength(op, op.call.count, c);
  const std::size_t start = static_cast<std::size_t>(c) * op.chunkCount;
  char* out = nullptr;
  std::size_t count = 0;
  std::size_t first = 0;  // allreduce: this rank's slice, from the vector's start
  if (isReduceScatter(op)) {
    for (int r = 0; r < e.size(); ++r) e.inputs()[static_cast<std::size_t>(r)] = inputOf(e, op, r, c, me);
    out = static_cast<char*>(op.call.recv) + start * es;
    count = len;
  } else {
    // The result goes to this rank's slot unless its recv is registered; with
    // a registered send the slot held no input, so it must be free first.
    if (op.zeroCopyIn && !op.zeroCopyOut && !e.slotFree(chunk)) return false;
    const Slice s = slice(len, e.size(), me, es);
    for (int r = 0; r < e.size(); ++r) {
      e.inputs()[static_cast<std::size_t>(r)] = inputOf(e, op, r, c, 0) + s.offset * es;
    }
    out = op.zeroCopyOut ? static_cast<char*>(op.call.recv) + (start + s.offset) * es
                         : e.slot(me, chunk) + s.offset * es;
    first = start + s.offset;
    if (!op.zeroCopyIn) e.inputs()[static_cast<std::size_t>(me)] = ownSliceInput(op, first, s.count, out);
    count = s.count;
  }
  if (!isReduceScatter(op) && !op.zeroCopyIn && !op.zeroCopyOut) {
    // This rank's slice of the result goes to its recv too, block by block
    // while the block is in L1; copy-out then moves only the peers' slices.
    const std::size_t block = std::max<std::size_t>(1, kOwnBlockBytes / es);
    for (std::size_t done = 0; done < count; done += block) {
      const std::size_t n = std::min(block, count - done);
      reduceInto(e, out + done * es, n, op.call.dtype, op.call.op);
      finishAverage(e, op, out + done * es, n);
      writeResult(op, first + done, n, out + done * es);
      for (const char*& in : e.inputs()) in += n * es;
    }
  } else {
    reduceInto(e, out, count, op.call.dtype, op.call.op);
    finishAverage(e, op, out, count);
  }
  ++op.reduceNext;
  if (isReduceScatter(op)) {
    // Nothing to copy out: this rank is done with every input of the chunk.
    ++op.outNext;
    e.control(me).consumed.value.store(chunk + 1, std::memory_order_release);
  } else {
    e.control(me).reduced.value.store(chunk + 1, std::memory_order_release);
  }
  return true;
}

namespace {

// The next chunk to copy out, once this rank reduced it and every rank
// published its slice of it; false when there is none yet.
struct OutChunk {
  std::uint64_t index = 0;  // relative to the collective's first chunk
  std::uint64_t chunk = 0;  // engine-wide
  std::size_t es = 0, len = 0, start = 0;
};
bool nextOutChunk(const ShmEngine& e, const ShmOp& op, OutChunk& out) {
  if (op.outNext >= op.reduceNext) return false;
  out.index = op.outNext;
  out.chunk = op.firstChunk + out.index;
  if (!e.allReached(&RankControl::reduced, out.chunk + 1)) return false;
  out.es = dataTypeSize(op.call.dtype);
  out.len = chunkLength(op, op.call.count, out.index);
  out.start = static_cast<std::size_t>(out.index) * op.chunkCount;
  return true;
}

}  // namespace

bool copyOutReduced(ShmEngine& e, ShmOp& op) {
  OutChunk o;
  if (isReduceScatter(op) || !nextOutChunk(e, op, o)) return false;
  const std::uint64_t chunk = o.chunk;
  const std::size_t es = o.es, len = o.len, start = o.start;
  // With an unregistered send the reduction already wrote this rank's own
  // slice to its recv.
  const int slices = op.zeroCopyIn || op.zeroCopyOut ? e.size() : e.size() - 1;
  for (int i = 0; i < slices; ++i) {
    // Start after this rank, so ranks do not all read the same peer at once.
    const int r = (e.rank() + 1 + i) % e.size();
    const Slice s = slice(len, e.size(), r, es);
    if (s.count == 0) continue;
    const char* src = e.peerResult(r) != nullptr ? e.peerResult(r) + (start + s.offset) * es
                                                 : e.slot(r, chunk) + s.offset * es;
    writeResult(op, start + s.offset, s.count, src);
  }
  ++op.outNext;
  e.control(e.rank()).consumed.value.store(chunk + 1, std::memory_order_release);
  return true;
}

bool cmaReduceChunk(ShmEngine& e, ShmOp& op) {
  if (op.reduceNext == op.chunks) return false;
  const std::uint64_t c = op.reduceNext;
  const std::uint64_t chunk = op.firstChunk + c;
  const std::size_t es = dataTypeSize(op.call.dtype);
  const int me = e.rank();
  const std::size_t len = chunkLength(op, op.call.count, c);
  const std::size_t start = static_cast<std::size_t>(c) * op.chunkCount;
  const Slice s = slice(len, e.size(), me, es);
  if (s.count > 0) {
    const core::SegmentList& mine = *op.call.list;
    const std::size_t at = (start + s.offset) * es;
    const std::size_t bytes = s.count * es;
    // Own input in place when it is contiguous there (then also the output:
    // reduceInto allows out == one input), else gathered into scratch.
    char* own = mine.contiguous(op.call.listOffsetBytes + at, bytes);
    if (own == nullptr) {
      own = e.cmaScratch(e.size());
      mine.gather(own, op.call.listOffsetBytes + at, bytes);
    }
    for (int r = 0; r < e.size(); ++r) {
      if (r == me) {
        e.inputs()[static_cast<std::size_t>(r)] = own;
        continue;
      }
      char* buffer = e.cmaScratch(r);
      cmaRead(e.pid(r), core::Operand{nullptr, buffer, 0},
              core::Operand{&e.peerList(r), nullptr, e.peerListOffset(r) + at}, bytes, me);
      e.inputs()[static_cast<std::size_t>(r)] = buffer;
    }
    reduceInto(e, own, s.count, op.call.dtype, op.call.op);
    finishAverage(e, op, own, s.count);
    if (own == e.cmaScratch(e.size())) mine.scatter(op.call.listOffsetBytes + at, own, bytes);
  }
  ++op.reduceNext;
  e.control(me).reduced.value.store(chunk + 1, std::memory_order_release);
  return true;
}

bool cmaCopyOut(ShmEngine& e, ShmOp& op) {
  OutChunk o;
  if (!nextOutChunk(e, op, o)) return false;
  const std::uint64_t chunk = o.chunk;
  const std::size_t es = o.es, len = o.len, start = o.start;
  for (int i = 1; i < e.size(); ++i) {
    // Start after this rank, so ranks do not all read the same peer at once.
    const int r = (e.rank() + i) % e.size();
    const Slice s = slice(len, e.size(), r, es);
    if (s.count == 0) continue;
    const std::size_t at = (start + s.offset) * es;
    cmaRead(e.pid(r), core::Operand{op.call.list, nullptr, op.call.listOffsetBytes + at},
            core::Operand{&e.peerList(r), nullptr, e.peerListOffset(r) + at}, s.count * es, e.rank());
  }
  ++op.outNext;
  e.control(e.rank()).consumed.value.store(chunk + 1, std::memory_order_release);
  return true;
}

}  // namespace boostcomm::shm
