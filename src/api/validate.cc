// Argument checks for every collective. Each failure names the collective,
// the argument and the rank, so a user of a 512-rank job knows where to look.
#include <cstdint>
#include <limits>
#include <ostream>

#include "api/call.h"
#include "core/check.h"

namespace boostcomm::detail {
namespace {

constexpr std::size_t kMaxSize = std::numeric_limits<std::size_t>::max();

// The call's name in messages, formatted only when one is raised (the
// checks run on every call; a name looked up each time cost ~40
// instructions of an 8-byte allreduce's ~4,000).
struct CallName {
  Collective collective;
  bool varying;
};

std::ostream& operator<<(std::ostream& os, CallName name) {
  return os << (name.varying ? std::string_view("allgatherv") : toString(name.collective));
}

std::size_t bytesOrThrow(CallName coll, const char* what, std::size_t count, std::size_t elementSize,
                         int rank) {
  BC_INVALID(count <= kMaxSize / elementSize, rank,
             coll << ": " << what << " = " << count << " elements overflows the address space");
  return count * elementSize;
}

void checkEnum(CallName coll, DataType dtype, ReduceOp op, int rank) {
  BC_INVALID(static_cast<int>(dtype) < kNumDataTypes, rank,
             coll << ": dtype has invalid value " << static_cast<int>(dtype));
  BC_INVALID(static_cast<int>(op) < kNumReduceOps, rank,
             coll << ": op has invalid value " << static_cast<int>(op));
}

void checkPointer(CallName coll, const char* name, const void* data, std::size_t count, int rank) {
  BC_INVALID(data != nullptr || count == 0, rank, coll << ": " << name << ".data is null but " << name
                                                       << ".count is " << count);
}

bool overlaps(const void* a, std::size_t aBytes, const void* b, std::size_t bBytes) {
  if (aBytes == 0 || bBytes == 0) return false;
  const auto x = reinterpret_cast<std::uintptr_t>(a);
  const auto y = reinterpret_cast<std::uintptr_t>(b);
  return x < y + bBytes && y < x + aBytes;
}

// An allgather's counts (equal blocks, or allgatherv's recvCounts, which
// it copies into spec.counts): checked; returns the elements before this
// rank's block in recv.
std::size_t allgatherOwnOffset(const CallArgs& args, CallName coll, int rank, int size,
                               algorithms::CollectiveSpec& spec) {
  const ConstView& send = args.send;
  const View& recv = args.recv;
  std::size_t ownOffset = 0;
  if (args.varying) {
    BC_INVALID(args.recvCounts.size() == static_cast<std::size_t>(size), rank,
               coll << ": recvCounts has " << args.recvCounts.size() << " entries, expected one per rank ("
                    << size << ")");
    std::size_t total = 0;
    for (std::size_t i = 0; i < args.recvCounts.size(); ++i) {
      BC_INVALID(args.recvCounts[i] <= kMaxSize - total, rank, coll << ": recvCounts sum overflows");
      if (static_cast<int>(i) == rank) ownOffset = total;
      total += args.recvCounts[i];
    }
    BC_INVALID(total == recv.count, rank,
               coll << ": recv.count " << recv.count << " differs from the sum of recvCounts " << total);
    BC_INVALID(send.count == args.recvCounts[static_cast<std::size_t>(rank)], rank,
               coll << ": send.count " << send.count << " differs from recvCounts[" << rank
                    << "] = " << args.recvCounts[static_cast<std::size_t>(rank)]);
    spec.counts.assign(args.recvCounts.begin(), args.recvCounts.end());
  } else {
    const std::size_t total = bytesOrThrow(coll, "send.count * size", send.count,
                                           static_cast<std::size_t>(size), rank);
    BC_INVALID(recv.count == total, rank,
               coll << ": recv.count " << recv.count << " must be size (" << size << ") * send.count ("
                    << send.count << ") = " << total);
    ownOffset = send.count * static_cast<std::size_t>(rank);
  }
  return ownOffset;
}

}  // namespace

std::size_t validateAndDescribe(const CallArgs& args, int rank, int size, algorithms::CollectiveSpec& spec) {
  const CallName coll{args.collective, args.varying};
  spec.collective = args.collective;
  spec.rank = rank;
  spec.size = size;
  spec.root = 0;
  spec.counts.clear();
  if (args.collective == Collective::kBarrier) {
    spec.count = 0;
    return 0;
  }
  const ConstView& send = args.send;
  const View& recv = args.recv;
  checkEnum(coll, recv.dtype, args.op, rank);
  checkEnum(coll, send.dtype, args.op, rank);
  spec.dtype = recv.dtype;
  spec.op = args.op;
  const std::size_t es = dataTypeSize(recv.dtype);
  // A segment-list call's send/recv are placeholders carrying counts; the
  // list entry (communicator_many.cc) checked its segments for overlap.
  auto clash = [&](const void* a, std::size_t aBytes, const void* b, std::size_t bBytes) {
    return !args.listed() && overlaps(a, aBytes, b, bBytes);
  };
  const std::size_t sendBytes = bytesOrThrow(coll, "send.count", send.count, es, rank);
  const std::size_t recvBytes = bytesOrThrow(coll, "recv.count", recv.count, es, rank);
  if (args.collective != Collective::kBroadcast) {
    BC_INVALID(send.dtype == recv.dtype, rank,
               coll << ": send.dtype " << toString(send.dtype) << " differs from recv.dtype " << toString(recv.dtype));
    checkPointer(coll, "send", send.data, send.count, rank);
  }
  checkPointer(coll, args.collective == Collective::kBroadcast ? "buffer" : "recv", recv.data, recv.count, rank);
  const bool reduces = args.collective == Collective::kAllreduce || args.collective == Collective::kReduceScatter;
  if (reduces) {
    BC_INVALID(args.op != ReduceOp::kAvg || isFloatingPoint(recv.dtype), rank,
               coll << ": op avg is not supported for dtype " << toString(recv.dtype)
                    << " (an integer average would truncate; use sum and divide)");
  }

  switch (args.collective) {
    case Collective::kAllreduce:
      BC_INVALID(send.count == recv.count, rank,
                 coll << ": send.count " << send.count << " differs from recv.count " << recv.count);
      BC_INVALID(send.data == recv.data || !clash(send.data, sendBytes, recv.data, recvBytes), rank,
                 coll << ": send and recv overlap without being the same buffer (in place needs send.data == recv.data)");
      spec.count = recv.count;
      return recvBytes;
    case Collective::kBroadcast:
      BC_INVALID(args.root >= 0 && args.root < size, rank,
                 coll << ": root " << args.root << " is out of range [0, " << size << ")");
      spec.root = args.root;
      spec.count = recv.count;
      return recvBytes;
    case Collective::kReduceScatter: {
      const std::size_t total = bytesOrThrow(coll, "recv.count * size", recv.count, static_cast<std::size_t>(size),
                                             rank);
      BC_INVALID(send.count == total, rank,
                 coll << ": send.count " << send.count << " must be size (" << size << ") * recv.count ("
                      << recv.count << ") = " << total);
      BC_INVALID(!clash(send.data, sendBytes, recv.data, recvBytes), rank,
                 coll << ": send and recv overlap (reduce_scatter cannot run in place)");
      spec.count = recv.count;
      return sendBytes;
    }
    case Collective::kAllgather: {
      const std::size_t ownOffset = allgatherOwnOffset(args, coll, rank, size, spec);
      const void* inPlace = static_cast<const char*>(recv.data) + ownOffset * es;
      BC_INVALID(send.data == inPlace || !clash(send.data, sendBytes, recv.data, recvBytes), rank,
                 coll << ": send overlaps recv without being this rank's block of it (in place needs send.data == "
                         "recv.data + offset of block "
                      << rank << ")");
      spec.count = send.count;
      return recvBytes;
    }
    case Collective::kBarrier: return 0;
  }
  return 0;
}

core::Fingerprint fingerprintOf(const algorithms::CollectiveSpec& spec) {
  std::uint64_t count = spec.count;
  if (spec.collective == Collective::kAllgather) {
    if (spec.counts.empty()) {
      count *= static_cast<std::uint64_t>(spec.size);
    } else {
      count = 0;
      for (std::size_t c : spec.counts) count += c;
    }
  }
  return core::Fingerprint::of(spec.collective, spec.dtype, spec.op, spec.root, count);
}

}  // namespace boostcomm::detail
