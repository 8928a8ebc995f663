#include "interposer/plan.h"

#include <cstring>

#include "interposer/datatypes.h"
#include "interposer/state.h"

namespace boostcomm::interposer {

namespace {

constexpr DataType kBytes = DataType::kUInt8;

// Element offsets of derived types may be zero or negative (an extent of 0 or < 0).
unsigned char* byteAt(void* base, std::ptrdiff_t offset) { return static_cast<unsigned char*>(base) + offset; }

// The checks every reduction makes (type, op, the pair, count), in the order
// that names the first failing one.
Reason reductionArgs(MPI_Datatype type, MPI_Op mpiOp, int count, DataType& dtype, ReduceOp& op) {
  const auto t = reductionType(type);
  if (!t) return Reason::kDatatype;
  const auto o = reductionOp(mpiOp);
  if (!o) return Reason::kOp;
  if (!reducesAlike(*t, *o)) return Reason::kDatatype;
  if (count < 0) return Reason::kArguments;
  dtype = *t;
  op = *o;
  return Reason::kRouted;
}

}  // namespace

Reason Plan::allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op mpiOp) {
  DataType dtype{};
  if (const Reason r = reductionArgs(type, mpiOp, count, dtype, op); r != Reason::kRouted) return r;
  finish = Finish::kNone;
  collective = Collective::kAllreduce;
  const std::size_t n = static_cast<std::size_t>(count);
  recv = View(recvbuf, n, dtype);
  send = ConstView(sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf, n, dtype);
  return Reason::kRouted;
}

Reason Plan::bcast(void* buf, int count, MPI_Datatype type, int rootRank, const CommEntry& entry) {
  ByteLayout layout;
  if (!byteLayout(type, count, layout) || rootRank < 0 || rootRank >= entry.size) return Reason::kArguments;
  finish = Finish::kNone;
  collective = Collective::kBroadcast;
  root = rootRank;
  if (layout.bytes == 0) return empty();
  if (layout.direct) {
    recv = View(buf, layout.bytes, kBytes);
  } else {
    stage.resize(layout.bytes);
    if (entry.rank == root) {
      packBytes(buf, count, type, stage.data(), layout.bytes, comm);
    } else {
      finish = Finish::kUnpack;
      out = buf;
      outCount = count;
      outType = type;
    }
    recv = View(stage.data(), layout.bytes, kBytes);
  }
  send = recv;
  return Reason::kRouted;
}

Reason Plan::allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                       MPI_Datatype recvtype, const CommEntry& entry) {
  ByteLayout block;
  if (!byteLayout(recvtype, recvcount, block)) return Reason::kArguments;
  ByteLayout mine;
  const bool inPlace = sendbuf == MPI_IN_PLACE;
  if (!inPlace && (!byteLayout(sendtype, sendcount, mine) || mine.bytes != block.bytes)) return Reason::kArguments;
  finish = Finish::kNone;
  collective = Collective::kAllgather;
  varying = false;
  if (block.bytes == 0) return empty();
  const std::size_t total = block.bytes * static_cast<std::size_t>(entry.size);
  const std::size_t ownOffset = block.bytes * static_cast<std::size_t>(entry.rank);
  unsigned char* base = nullptr;
  if (block.direct) {
    base = static_cast<unsigned char*>(recvbuf);
  } else {
    stage.resize(total);
    base = stage.data();
    finish = Finish::kUnpack;
    out = recvbuf;
    outCount = recvcount * entry.size;
    outType = recvtype;
  }
  recv = View(base, total, kBytes);
  if (inPlace) {
    // This rank's block already sits in recvbuf at rank * recvcount elements.
    if (!block.direct) {
      packBytes(byteAt(recvbuf, block.extent * recvcount * entry.rank), recvcount, recvtype,
                base + ownOffset, block.bytes, comm);
    }
    send = ConstView(base + ownOffset, block.bytes, kBytes);
  } else if (mine.direct) {
    send = ConstView(sendbuf, block.bytes, kBytes);
  } else {
    packBytes(sendbuf, sendcount, sendtype, base + ownOffset, block.bytes, comm);  // then in place
    send = ConstView(base + ownOffset, block.bytes, kBytes);
  }
  return Reason::kRouted;
}

Reason Plan::allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                        const int* recvcounts, const int* displs, MPI_Datatype recvtype, const CommEntry& entry) {
  if (recvcounts == nullptr || displs == nullptr) return Reason::kArguments;
  ByteLayout unit;
  if (!byteLayout(recvtype, 1, unit)) return Reason::kArguments;
  const std::size_t n = static_cast<std::size_t>(entry.size);
  counts.resize(n);
  std::size_t total = 0;
  bool packed = unit.direct && unit.extent == static_cast<std::ptrdiff_t>(unit.bytes);
  for (std::size_t i = 0; i < n; ++i) {
    if (recvcounts[i] < 0) return Reason::kArguments;
    counts[i] = static_cast<std::size_t>(recvcounts[i]) * unit.bytes;
    // Blocks back to back in rank order: boostcomm's layout, no staging. An
    // empty block's displacement is never used, so it may be anything.
    if (counts[i] > 0 && (displs[i] < 0 || static_cast<std::size_t>(displs[i]) * unit.bytes != total)) packed = false;
    total += counts[i];
  }
  const std::size_t me = static_cast<std::size_t>(entry.rank);
  const bool inPlace = sendbuf == MPI_IN_PLACE;
  ByteLayout mine;
  if (!inPlace && (!byteLayout(sendtype, sendcount, mine) || mine.bytes != counts[me])) return Reason::kArguments;
  std::size_t ownOffset = 0;
  for (std::size_t i = 0; i < me; ++i) ownOffset += counts[i];
  finish = Finish::kNone;
  collective = Collective::kAllgather;
  varying = true;
  if (total == 0) return empty();
  unsigned char* base = nullptr;
  if (packed) {
    base = static_cast<unsigned char*>(recvbuf);
  } else {
    stage.resize(total);
    base = stage.data();
    finish = Finish::kBlocks;
    out = recvbuf;
    outType = recvtype;
    outDirect = unit.direct;
    outExtent = unit.extent;
    outCounts.assign(recvcounts, recvcounts + n);
    outDispls.assign(displs, displs + n);
  }
  recv = View(base, total, kBytes);
  if (inPlace) {
    if (!packed) {
      void* own = byteAt(recvbuf, unit.extent * displs[me]);
      if (unit.direct) {
        std::memcpy(base + ownOffset, own, counts[me]);
      } else {
        packBytes(own, recvcounts[me], recvtype, base + ownOffset, counts[me], comm);
      }
    }
    send = ConstView(base + ownOffset, counts[me], kBytes);
  } else if (mine.direct) {
    send = ConstView(sendbuf, counts[me], kBytes);
  } else {
    packBytes(sendbuf, sendcount, sendtype, base + ownOffset, counts[me], comm);
    send = ConstView(base + ownOffset, counts[me], kBytes);
  }
  return Reason::kRouted;
}

Reason Plan::reduceScatterBlock(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype type, MPI_Op mpiOp,
                                const CommEntry& entry) {
  DataType dtype{};
  if (const Reason r = reductionArgs(type, mpiOp, recvcount, dtype, op); r != Reason::kRouted) return r;
  finish = Finish::kNone;
  collective = Collective::kReduceScatter;
  const std::size_t n = static_cast<std::size_t>(recvcount);
  const std::size_t total = n * static_cast<std::size_t>(entry.size);
  recv = View(recvbuf, n, dtype);
  if (sendbuf == MPI_IN_PLACE) {
    // The input is all of recvbuf; boostcomm's reduce_scatter reads and
    // writes separate buffers, so the input is copied aside first.
    const std::size_t bytes = total * dataTypeSize(dtype);
    input.resize(bytes);
    if (bytes > 0) std::memcpy(input.data(), recvbuf, bytes);
    send = ConstView(input.data(), total, dtype);
  } else {
    send = ConstView(sendbuf, total, dtype);
  }
  return Reason::kRouted;
}

Reason Plan::reduceScatter(const void* sendbuf, void* recvbuf, const int* recvcounts, MPI_Datatype type, MPI_Op mpiOp,
                           const CommEntry& entry) {
  if (recvcounts == nullptr) return Reason::kArguments;
  // recvcounts is the same array on every rank: equal blocks or not, alike.
  for (int i = 1; i < entry.size; ++i) {
    if (recvcounts[i] != recvcounts[0]) return Reason::kCounts;
  }
  return reduceScatterBlock(sendbuf, recvbuf, recvcounts[0], type, mpiOp, entry);
}

Reason sizeRules(Reason planned, const CommEntry& entry, const Plan& plan) {
  if (planned != Reason::kRouted) return planned;
  // The native shortcut only where it is on (CommEntry::shortcut): its range is not known, or not yet
  // known alike on every rank, while a background set-up may still run.
  if (plan.collective == Collective::kBarrier) {
    return entry.shortcut && entry.nativeBarrier ? Reason::kNative : Reason::kRouted;
  }
  const std::size_t bytes = plan.payloadBytes();
  if (bytes < settings().minBytes) return Reason::kSmall;
  // An empty payload (count 0, a zero-size type, an allgatherv of zero
  // counts) moves nothing: MPI's own call keeps exactly MPI's semantics
  // (its argument checks, no synchronisation it would not do), and every rank
  // agrees because payload bytes agree (equal type signatures).
  if (bytes == 0) return Reason::kNative;
  if (plan.varying) return Reason::kRouted;  // allgatherv: boostcomm's allgatherv path decides
  if (!entry.shortcut) return Reason::kRouted;
  return bytes <= entry.nativeUpTo[static_cast<std::size_t>(plan.collective)] ? Reason::kNative : Reason::kRouted;
}

Reason Plan::empty() {
  recv = View(nullptr, 0, kBytes);
  send = ConstView(nullptr, 0, kBytes);
  return Reason::kRouted;  // sizeRules makes it kNative
}

Reason Plan::barrier() {
  finish = Finish::kNone;
  collective = Collective::kBarrier;
  return Reason::kRouted;
}

std::size_t Plan::payloadBytes() const {
  if (collective == Collective::kBarrier) return 0;
  // boostcomm's element sizes, without a call into libboostcomm on every call.
  static constexpr std::size_t kSizes[kNumDataTypes] = {4, 8, 2, 2, 4, 8, 1};
  const std::size_t es = kSizes[static_cast<std::size_t>(recv.dtype)];
  if (collective == Collective::kReduceScatter) return send.count * es;
  return recv.count * es;
}

void Plan::run(Communicator& c) const {
  switch (collective) {
    case Collective::kAllreduce: c.allreduce(send, recv, op); return;
    case Collective::kBroadcast: c.broadcast(recv, root); return;
    case Collective::kAllgather:
      if (varying) {
        c.allgatherv(send, recv, counts);
      } else {
        c.allgather(send, recv);
      }
      return;
    case Collective::kReduceScatter: c.reduceScatter(send, recv, op); return;
    case Collective::kBarrier: c.barrier(); return;
  }
}

Work Plan::submit(Communicator& c) const {
  switch (collective) {
    case Collective::kAllreduce: return c.allreduceAsync(send, recv, op);
    case Collective::kBroadcast: return c.broadcastAsync(recv, root);
    case Collective::kAllgather: return varying ? c.allgathervAsync(send, recv, counts) : c.allgatherAsync(send, recv);
    case Collective::kReduceScatter: return c.reduceScatterAsync(send, recv, op);
    case Collective::kBarrier: return c.barrierAsync();
  }
  return {};
}

void Plan::complete() {
  if (finish == Finish::kUnpack) {
    unpackBytes(stage.data(), stage.size(), out, outCount, outType, comm);
  } else if (finish == Finish::kBlocks) {
    std::size_t offset = 0;
    for (std::size_t i = 0; i < outCounts.size(); ++i) {
      const std::size_t bytes = counts[i];
      void* dst = byteAt(out, outExtent * outDispls[i]);
      if (outDirect) {
        if (bytes > 0) std::memmove(dst, stage.data() + offset, bytes);
      } else {
        unpackBytes(stage.data() + offset, bytes, dst, outCounts[i], outType, comm);
      }
      offset += bytes;
    }
  }
  finish = Finish::kNone;
}

}  // namespace boostcomm::interposer
