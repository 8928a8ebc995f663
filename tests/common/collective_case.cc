#include "common/collective_case.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "boostcomm/error.h"

namespace boostcomm::testing {
namespace {

constexpr std::size_t kGuardBytes = 64;  // also keeps data 64-byte aligned within the allocation
constexpr unsigned char kGuardFill = 0xcd;
constexpr unsigned char kRecvFill = 0xab;  // initial recv contents: a result that is never written shows up

// A byte buffer with guard zones on both sides.
class GuardedBuffer {
 public:
  explicit GuardedBuffer(std::size_t bytes, unsigned char fill = kRecvFill)
      : storage_(bytes + 2 * kGuardBytes, kGuardFill), bytes_(bytes) {
    std::memset(data(), fill, bytes);
  }
  unsigned char* data() { return storage_.data() + kGuardBytes; }
  std::size_t bytes() const { return bytes_; }
  bool guardsIntact() const {
    for (std::size_t i = 0; i < kGuardBytes; ++i) {
      if (storage_[i] != kGuardFill || storage_[kGuardBytes + bytes_ + i] != kGuardFill) return false;
    }
    return true;
  }
  std::vector<unsigned char> contents() { return {data(), data() + bytes_}; }

 private:
  std::vector<unsigned char> storage_;
  std::size_t bytes_;
};

void appendError(std::string& error, const std::string& more) {
  if (more.empty()) return;
  if (!error.empty()) error += "; ";
  error += more;
}

}  // namespace

std::string_view toString(TestCollective coll) {
  switch (coll) {
    case TestCollective::kAllreduce: return "allreduce";
    case TestCollective::kAllgather: return "allgather";
    case TestCollective::kAllgatherv: return "allgatherv";
    case TestCollective::kBroadcast: return "broadcast";
    case TestCollective::kReduceScatter: return "reduce_scatter";
    case TestCollective::kBarrier: return "barrier";
  }
  return "unknown";
}

void PrintTo(TestCollective coll, std::ostream* os) { *os << toString(coll); }

Collective baseCollective(TestCollective coll) {
  switch (coll) {
    case TestCollective::kAllreduce: return Collective::kAllreduce;
    case TestCollective::kAllgather:
    case TestCollective::kAllgatherv: return Collective::kAllgather;
    case TestCollective::kBroadcast: return Collective::kBroadcast;
    case TestCollective::kReduceScatter: return Collective::kReduceScatter;
    case TestCollective::kBarrier: return Collective::kBarrier;
  }
  return Collective::kAllreduce;
}

bool isReducing(TestCollective coll) {
  return coll == TestCollective::kAllreduce || coll == TestCollective::kReduceScatter;
}

std::string describe(const CaseSpec& spec, int worldSize) {
  std::ostringstream out;
  out << toString(spec.coll);
  if (spec.coll != TestCollective::kBarrier) out << " dtype=" << toString(spec.dtype);
  if (isReducing(spec.coll)) out << " op=" << toString(spec.op);
  out << " algo=" << (spec.algorithm.empty() ? "<default>" : spec.algorithm);
  if (spec.coll != TestCollective::kBarrier) out << " count=" << spec.count;
  if (spec.coll == TestCollective::kBroadcast) out << " root=" << spec.root;
  out << " ws=" << worldSize;
  if (spec.pattern == Pattern::kRandom) out << " pattern=random";
  if (spec.inPlace) out << " in-place";
  if (spec.async) out << " async";
  return out.str();
}

std::vector<std::size_t> allgathervCounts(std::size_t base, int worldSize) {
  std::vector<std::size_t> counts(static_cast<std::size_t>(worldSize));
  for (int r = 0; r < worldSize; ++r) counts[static_cast<std::size_t>(r)] = r % 3 == 2 ? 0 : base + static_cast<std::size_t>(r);
  return counts;
}

bool expectsInvalidArgument(const CaseSpec& spec) {
  return isReducing(spec.coll) && spec.op == ReduceOp::kAvg && !isFloatingPoint(spec.dtype);
}

bool resultsReplicated(const CaseSpec& spec) {
  return spec.coll != TestCollective::kReduceScatter && spec.coll != TestCollective::kBarrier;
}

CaseOutcome runCase(Communicator& comm, const CaseSpec& spec, bool checkReference) {
  CaseOutcome outcome;
  const int rank = comm.rank();
  const int size = comm.size();
  const std::size_t elem = dataTypeSize(spec.dtype);
  CallOptions options;
  options.algorithm = spec.algorithm;

  // Runs either the blocking call or the async one followed by wait().
  auto run = [&](auto blocking, auto async) {
    if (spec.async) {
      Work work = async();
      work.wait();
      outcome.algorithmUsed = work.algorithm() != nullptr ? work.algorithm() : "";
    } else {
      blocking();
    }
  };

  if (expectsInvalidArgument(spec)) {
    GuardedBuffer send(spec.count * elem * static_cast<std::size_t>(size)), recv(spec.count * elem * static_cast<std::size_t>(size));
    try {
      if (spec.coll == TestCollective::kAllreduce) {
        comm.allreduce(ConstView(send.data(), spec.count, spec.dtype), View(recv.data(), spec.count, spec.dtype), spec.op, options);
      } else {
        comm.reduceScatter(ConstView(send.data(), spec.count * static_cast<std::size_t>(size), spec.dtype),
                           View(recv.data(), spec.count, spec.dtype), spec.op, options);
      }
      outcome.error = "expected Error{kInvalidArgument} for op avg on an integer dtype, but the call succeeded";
    } catch (const Error& e) {
      if (e.category() != ErrorCategory::kInvalidArgument) {
        outcome.error = std::string("expected kInvalidArgument, got: ") + e.what();
      } else if (std::string(e.what()).find("avg") == std::string::npos ||
                 std::string(e.what()).find(std::string(toString(spec.dtype))) == std::string::npos) {
        outcome.error = std::string("error should name the op (avg) and the dtype: ") + e.what();
      }
    }
    return outcome;
  }

  switch (spec.coll) {
    case TestCollective::kAllreduce: {
      GuardedBuffer recv(spec.count * elem);
      GuardedBuffer sendStorage(spec.inPlace ? 0 : spec.count * elem);
      unsigned char* send = spec.inPlace ? recv.data() : sendStorage.data();
      fillReduceInput(send, spec.dtype, spec.op, spec.pattern, spec.seed, rank, 0, spec.count);
      const ConstView sendView(send, spec.count, spec.dtype);
      const View recvView(recv.data(), spec.count, spec.dtype);
      run([&] { comm.allreduce(sendView, recvView, spec.op, options); },
          [&] { return comm.allreduceAsync(sendView, recvView, spec.op, options); });
      if (checkReference) {
        appendError(outcome.error, checkReduction(recv.data(), spec.dtype, spec.op, spec.pattern, spec.seed, size, 0, spec.count));
      }
      if (!spec.inPlace) {
        // The send buffer is const: it must be unchanged.
        std::vector<unsigned char> original(spec.count * elem);
        fillReduceInput(original.data(), spec.dtype, spec.op, spec.pattern, spec.seed, rank, 0, spec.count);
        std::string changed = compareBytes(send, original.data(), original.size(), elem);
        if (!changed.empty()) appendError(outcome.error, "send buffer was modified: " + changed);
        if (!sendStorage.guardsIntact()) appendError(outcome.error, "write outside the send buffer");
      }
      if (!recv.guardsIntact()) appendError(outcome.error, "write outside the recv buffer");
      outcome.result = recv.contents();
      break;
    }
    case TestCollective::kReduceScatter: {
      const std::size_t sendCount = spec.count * static_cast<std::size_t>(size);
      GuardedBuffer send(sendCount * elem), recv(spec.count * elem);
      fillReduceInput(send.data(), spec.dtype, spec.op, spec.pattern, spec.seed, rank, 0, sendCount);
      const ConstView sendView(send.data(), sendCount, spec.dtype);
      const View recvView(recv.data(), spec.count, spec.dtype);
      run([&] { comm.reduceScatter(sendView, recvView, spec.op, options); },
          [&] { return comm.reduceScatterAsync(sendView, recvView, spec.op, options); });
      appendError(outcome.error, checkReduction(recv.data(), spec.dtype, spec.op, spec.pattern, spec.seed, size,
                                                static_cast<std::size_t>(rank) * spec.count, spec.count));
      if (!recv.guardsIntact() || !send.guardsIntact()) appendError(outcome.error, "write outside a buffer");
      outcome.result = recv.contents();
      break;
    }
    case TestCollective::kAllgather:
    case TestCollective::kAllgatherv: {
      std::vector<std::size_t> counts(static_cast<std::size_t>(size), spec.count);
      if (spec.coll == TestCollective::kAllgatherv) counts = allgathervCounts(spec.count, size);
      std::size_t total = 0, offset = 0;
      for (int r = 0; r < size; ++r) {
        if (r == rank) offset = total;
        total += counts[static_cast<std::size_t>(r)];
      }
      const std::size_t myCount = counts[static_cast<std::size_t>(rank)];
      GuardedBuffer recv(total * elem);
      GuardedBuffer sendStorage(spec.inPlace ? 0 : myCount * elem);
      unsigned char* send = spec.inPlace ? recv.data() + offset * elem : sendStorage.data();
      fillBytes(send, myCount * elem, spec.seed, rank);
      const ConstView sendView(send, myCount, spec.dtype);
      const View recvView(recv.data(), total, spec.dtype);
      if (spec.coll == TestCollective::kAllgather) {
        run([&] { comm.allgather(sendView, recvView, options); },
            [&] { return comm.allgatherAsync(sendView, recvView, options); });
      } else {
        run([&] { comm.allgatherv(sendView, recvView, counts, options); },
            [&] { return comm.allgathervAsync(sendView, recvView, counts, options); });
      }
      if (checkReference) {
        std::vector<unsigned char> expected(total * elem);
        std::size_t at = 0;
        for (int r = 0; r < size; ++r) {
          const std::size_t bytes = counts[static_cast<std::size_t>(r)] * elem;
          fillBytes(expected.data() + at, bytes, spec.seed, r);
          at += bytes;
        }
        appendError(outcome.error, compareBytes(recv.data(), expected.data(), expected.size(), elem));
      }
      if (!recv.guardsIntact() || !sendStorage.guardsIntact()) appendError(outcome.error, "write outside a buffer");
      outcome.result = recv.contents();
      break;
    }
    case TestCollective::kBroadcast: {
      GuardedBuffer buffer(spec.count * elem);
      // Non-roots start with different bytes, so a no-op broadcast fails.
      if (rank == spec.root) {
        fillBytes(buffer.data(), buffer.bytes(), spec.seed, spec.root);
      } else {
        fillBytes(buffer.data(), buffer.bytes(), spec.seed + 1, rank);
      }
      const View view(buffer.data(), spec.count, spec.dtype);
      run([&] { comm.broadcast(view, spec.root, options); },
          [&] { return comm.broadcastAsync(view, spec.root, options); });
      if (checkReference) {
        std::vector<unsigned char> expected(buffer.bytes());
        fillBytes(expected.data(), expected.size(), spec.seed, spec.root);
        appendError(outcome.error, compareBytes(buffer.data(), expected.data(), expected.size(), elem));
      }
      if (!buffer.guardsIntact()) appendError(outcome.error, "write outside the buffer");
      outcome.result = buffer.contents();
      break;
    }
    case TestCollective::kBarrier:
      run([&] { comm.barrier(options); }, [&] { return comm.barrierAsync(options); });
      break;
  }
  if (spec.async && !spec.algorithm.empty() && outcome.algorithmUsed != spec.algorithm) {
    appendError(outcome.error, "Work::algorithm() is '" + outcome.algorithmUsed + "' but CallOptions asked for '" +
                                   spec.algorithm + "'");
  }
  return outcome;
}

std::vector<std::string> withDefault(const std::vector<std::string>& algorithms) {
  std::vector<std::string> out{""};
  for (const auto& name : algorithms) {
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  }
  return out;
}

std::vector<CaseSpec> sweepCases(TestCollective coll, DataType dtype, const std::vector<std::string>& algorithms,
                                 const std::vector<ReduceOp>& ops, const std::vector<std::size_t>& counts,
                                 int worldSize, bool everyRoot) {
  std::vector<CaseSpec> cases;
  std::uint64_t seed = 1000;
  const std::vector<ReduceOp> noOp{ReduceOp::kSum};
  for (const auto& algorithm : withDefault(algorithms)) {
    for (ReduceOp op : isReducing(coll) ? ops : noOp) {
      for (std::size_t count : counts) {
        std::vector<int> roots{0};
        if (coll == TestCollective::kBroadcast) {
          roots.clear();
          for (int r = 0; r < worldSize; ++r) {
            if (everyRoot || r == 0 || r == worldSize - 1) roots.push_back(r);
          }
        }
        for (int root : roots) {
          CaseSpec spec;
          spec.coll = coll;
          spec.dtype = dtype;
          spec.op = op;
          spec.algorithm = algorithm;
          spec.count = count;
          spec.root = root;
          spec.seed = ++seed;
          cases.push_back(spec);
        }
      }
    }
  }
  return cases;
}

}  // namespace boostcomm::testing

namespace boostcomm {
void PrintTo(DataType dtype, std::ostream* os) { *os << toString(dtype); }
void PrintTo(ReduceOp op, std::ostream* os) { *os << toString(op); }
}  // namespace boostcomm
