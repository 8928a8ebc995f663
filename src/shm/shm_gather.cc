// Shared-memory allgather(v) and broadcast: the chunk steps.
//
// allgather: chunk c is elements [c*K, c*K + K) of every rank's block (K =
// chunk elements; blocks may differ in length, a short block simply has
// empty pieces in its last chunks). Each rank copies its piece into its slot
// (or leaves it in its registered send buffer), then every rank copies every
// peer's piece to its place in recv. A rank copies its own block straight
// from send to recv, never through the slot.
//
// broadcast: chunk c is elements [c*K, c*K + K) of the vector; the root copies
// it in (or leaves it in place if registered) and the others copy it out.
//
// Segment lists (SharedMemoryCall::list / sendList): the same chunks, with
// the copy-in reading the caller's segments and the copy-out writing them
// (a piece that straddles segments is split there), so a list call makes
// exactly the copies a contiguous one makes, and no staging copy.
#include <algorithm>
#include <cstring>

#include "shm/engine.h"

namespace boostcomm::shm {
namespace {

bool isBroadcast(const ShmOp& op) { return op.call.collective == Collective::kBroadcast; }

std::size_t blockCount(const ShmOp& op, int rank) {
  return op.call.counts != nullptr ? static_cast<std::size_t>(op.call.counts[rank]) : op.call.count;
}

std::size_t blockStart(const ShmOp& op, int rank) {
  return op.call.displs != nullptr ? static_cast<std::size_t>(op.call.displs[rank])
                                   : static_cast<std::size_t>(rank) * op.call.count;
}

// Elements of piece `chunk` of a block of `total` elements.
std::size_t pieceLength(const ShmOp& op, std::size_t total, std::uint64_t chunk) {
  const std::size_t begin = static_cast<std::size_t>(chunk) * op.chunkCount;
  return begin >= total ? 0 : std::min(op.chunkCount, total - begin);
}

// The call's input (allgather: send; broadcast: the buffer at the root) at
// byte `at`, `bytes` long, copied to dst.
void readInput(const ShmOp& op, std::size_t at, char* dst, std::size_t bytes) {
  const transport::SharedMemoryCall& c = op.call;
  const core::SegmentList* list = isBroadcast(op) ? c.list : c.sendList;
  if (list != nullptr) {
    list->gather(dst, (isBroadcast(op) ? c.listOffsetBytes : c.sendListOffsetBytes) + at, bytes);
    return;
  }
  std::memcpy(dst, static_cast<const char*>(isBroadcast(op) ? c.recv : c.send) + at, bytes);
}

// The call's result at byte `at` <- src (bytes long).
void writeResult(const ShmOp& op, std::size_t at, const char* src, std::size_t bytes) {
  const transport::SharedMemoryCall& c = op.call;
  if (c.list != nullptr) {
    c.list->scatter(c.listOffsetBytes + at, src, bytes);
    return;
  }
  char* dst = static_cast<char*>(c.recv) + at;
  if (src != dst) std::memcpy(dst, src, bytes);
}

// allgather, this rank's own block: send bytes [from, + bytes) -> result byte `at`
// (straight, never through the slot).
void copyOwnPiece(const ShmOp& op, std::size_t from, std::size_t at, std::size_t bytes) {
  const transport::SharedMemoryCall& c = op.call;
  if (c.sendList == nullptr) {
    writeResult(op, at, static_cast<const char*>(c.send) + from, bytes);
    return;
  }
  c.sendList->forEachPiece(c.sendListOffsetBytes + from, bytes, [&](core::Piece p) {
    writeResult(op, at, p.data, p.bytes);
    at += p.bytes;
  });
}

}  // namespace

std::uint64_t gatherChunks(const ShmEngine& e, ShmOp& op) {
  const std::size_t es = dataTypeSize(op.call.dtype);
  const std::size_t unit = std::max<std::size_t>(1, kLineBytes / es);
  op.chunkCount = std::max(unit, e.chunkBytes() / es / unit * unit);
  std::size_t longest = op.call.count;
  if (!isBroadcast(op) && op.call.counts != nullptr) {
    longest = 0;
    for (int r = 0; r < e.size(); ++r) longest = std::max(longest, blockCount(op, r));
  }
  return (longest + op.chunkCount - 1) / op.chunkCount;
}

bool copyInGatherInput(ShmEngine& e, ShmOp& op) {
  if (op.inNext == op.chunks) return false;
  const bool hasInput = !isBroadcast(op) || e.rank() == op.call.root;
  if (op.zeroCopyIn || !hasInput) {
    op.inNext = op.chunks;  // inputReady was published with the descriptor
    return true;
  }
  if (op.inNext >= op.outNext + 2) return false;  // stay just ahead of the copy-out
  const std::uint64_t chunk = op.firstChunk + op.inNext;
  if (!e.slotFree(chunk)) return false;
  const std::size_t es = dataTypeSize(op.call.dtype);
  const std::size_t total = isBroadcast(op) ? op.call.count : blockCount(op, e.rank());
  const std::size_t len = pieceLength(op, total, op.inNext);
  if (len > 0) readInput(op, static_cast<std::size_t>(op.inNext) * op.chunkCount * es, e.slot(e.rank(), chunk), len * es);
  ++op.inNext;
  e.control(e.rank()).inputReady.value.store(chunk + 1, std::memory_order_release);
  return true;
}

bool copyOutGathered(ShmEngine& e, ShmOp& op) {
  if (op.outNext == op.chunks || op.outNext >= op.inNext) return false;
  const std::uint64_t c = op.outNext;
  const std::uint64_t chunk = op.firstChunk + c;
  const std::size_t es = dataTypeSize(op.call.dtype);
  const std::size_t offset = static_cast<std::size_t>(c) * op.chunkCount;
  const int me = e.rank();
  auto sourceOf = [&](int r) -> const char* {
    return e.peerInput(r) != nullptr ? e.peerInput(r) + offset * es : e.slot(r, chunk);
  };
  if (isBroadcast(op)) {
    const int root = op.call.root;
    if (me != root) {
      if (e.control(root).inputReady.value.load(std::memory_order_acquire) < chunk + 1) return false;
      const std::size_t len = pieceLength(op, op.call.count, c);
      if (len > 0) writeResult(op, offset * es, sourceOf(root), len * es);
    }
  } else {
    if (!e.allReached(&RankControl::inputReady, chunk + 1)) return false;
    for (int i = 0; i < e.size(); ++i) {
      const int r = (me + i) % e.size();
      const std::size_t len = pieceLength(op, blockCount(op, r), c);
      if (len == 0) continue;
      const std::size_t at = (blockStart(op, r) + offset) * es;
      if (r == me) {
        copyOwnPiece(op, offset * es, at, len * es);
      } else {
        writeResult(op, at, sourceOf(r), len * es);
      }
    }
  }
  ++op.outNext;
  e.control(me).consumed.value.store(chunk + 1, std::memory_order_release);
  return true;
}

}  // namespace boostcomm::shm
