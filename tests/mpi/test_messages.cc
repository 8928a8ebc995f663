// Point-to-point messages (Communicator::enablePointToPoint / sendAsync /
// recvAsync) under mpirun: every ordered pair, every dtype, counts 0 to
// 65537, several tags in flight received in the other order, posting order
// within one (pair, tag), any-source receives naming the sender, messages
// interleaved with collectives in flight (their tag windows are apart), and
// bad arguments (peer out of range or this rank, tag out of range, null
// buffer, no enablePointToPoint) as kInvalidArgument on the calling rank.
// Own main; exits non-zero when any rank saw a failure.
#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "boostcomm/boostcomm.h"
#include "common/mpi_report.h"

namespace {

using namespace boostcomm;
using namespace boostcomm::testing;

MpiReport* gReport = nullptr;

void check(bool ok, const std::string& what) {
  if (!ok) gReport->fail(what);
}

// Bytes rank src sends rank dst for (count, salt): a pattern the receiver recomputes.
std::vector<std::uint8_t> pattern(int src, int dst, std::size_t bytes, int salt) {
  std::vector<std::uint8_t> v(bytes);
  for (std::size_t i = 0; i < bytes; ++i) v[i] = static_cast<std::uint8_t>(i * 31 + src * 7 + dst * 13 + salt);
  return v;
}

void pairs(Communicator& comm) {
  const int me = comm.rank(), n = comm.size();
  const DataType dtypes[] = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kInt64,
                             DataType::kUInt8};
  int salt = 0;
  for (DataType dtype : dtypes) {
    for (std::size_t count : {0, 1, 7, 1000, 65537}) {
      ++salt;
      const std::size_t bytes = count * dataTypeSize(dtype);
      std::vector<Work> works;
      std::vector<std::vector<std::uint8_t>> out, in;
      out.reserve(n);
      in.reserve(n);
      for (int peer = 0; peer < n; ++peer) {
        out.push_back(pattern(me, peer, bytes, salt));
        in.emplace_back(bytes, 0xEE);
        if (peer == me) continue;
        works.push_back(comm.recvAsync(View(in.back().data(), count, dtype), peer, salt));
        works.push_back(comm.sendAsync(ConstView(out.back().data(), count, dtype), peer, salt));
      }
      for (Work& w : works) w.wait();
      for (int peer = 0; peer < n; ++peer) {
        if (peer == me) continue;
        check(in[peer] == pattern(peer, me, bytes, salt),
              "message from " + std::to_string(peer) + " dtype " + std::string(toString(dtype)) + " count " +
                  std::to_string(count));
      }
    }
  }
}

void ordering(Communicator& comm) {
  // Rank 0 sends five messages on one tag and three on others; rank 1 posts
  // the other tags first: each (pair, tag) stream arrives in posting order.
  if (comm.size() < 2 || comm.rank() > 1) return;
  if (comm.rank() == 0) {
    std::vector<std::int64_t> vals(8);
    std::vector<Work> works;
    for (int i = 0; i < 5; ++i) {
      vals[i] = i;
      works.push_back(comm.sendAsync(ConstView(&vals[i], 1, DataType::kInt64), 1, 9));
    }
    for (int t = 0; t < 3; ++t) {
      vals[5 + t] = 100 + t;
      works.push_back(comm.sendAsync(ConstView(&vals[5 + t], 1, DataType::kInt64), 1, 20 + t));
    }
    for (Work& w : works) w.wait();
  } else {
    std::vector<std::int64_t> got(8, -1);
    std::vector<Work> works;
    for (int t = 2; t >= 0; --t) works.push_back(comm.recvAsync(View(&got[5 + t], 1, DataType::kInt64), 0, 20 + t));
    for (int i = 0; i < 5; ++i) works.push_back(comm.recvAsync(View(&got[i], 1, DataType::kInt64), 0, 9));
    for (Work& w : works) w.wait();
    for (int i = 0; i < 5; ++i) check(got[i] == i, "posting order on one tag: message " + std::to_string(i));
    for (int t = 0; t < 3; ++t) check(got[5 + t] == 100 + t, "tag " + std::to_string(20 + t));
  }
}

void anySource(Communicator& comm) {
  const int me = comm.rank(), n = comm.size();
  if (me == 0) {
    std::vector<int> seen(n, 0);
    for (int k = 1; k < n; ++k) {
      std::int32_t v = -1;
      Work w = comm.recvAsync(View(&v, 1, DataType::kInt32), Communicator::kAnySource, 33);
      w.wait();
      const int src = w.source();
      check(src >= 1 && src < n && v == 1000 + src, "any-source message " + std::to_string(v) + " from " +
                                                        std::to_string(src));
      if (src >= 1 && src < n) ++seen[src];
    }
    for (int r = 1; r < n; ++r) check(seen[r] == 1, "any-source: rank " + std::to_string(r) + " heard once");
  } else {
    std::int32_t v = 1000 + me;
    comm.sendAsync(ConstView(&v, 1, DataType::kInt32), 0, 33).wait();
  }
}

void besideCollectives(Communicator& comm) {
  // An allreduce in flight while a ring of messages moves: neither sees the other's traffic.
  const int me = comm.rank(), n = comm.size();
  std::vector<double> x(4099, me + 1.0);
  Work ar = comm.allreduceAsync(ConstView(x.data(), x.size(), DataType::kFloat64),
                                View(x.data(), x.size(), DataType::kFloat64), ReduceOp::kSum);
  std::vector<double> out(513, me * 2.0), in(513, -1);
  Work r = comm.recvAsync(View(in.data(), in.size(), DataType::kFloat64), (me + n - 1) % n, 0);
  Work s = comm.sendAsync(ConstView(out.data(), out.size(), DataType::kFloat64), (me + 1) % n, 0);
  ar.wait();
  r.wait();
  s.wait();
  const double sum = n * (n + 1) / 2.0;
  check(x.front() == sum && x.back() == sum, "allreduce beside messages");
  check(in.front() == ((me + n - 1) % n) * 2.0 && in.back() == in.front(), "ring message beside an allreduce");
}

template <typename F>
void expectInvalid(Communicator& comm, F&& f, const std::string& words) {
  try {
    f();
    gReport->fail("no error; expected one naming '" + words + "'");
  } catch (const Error& e) {
    check(e.category() == ErrorCategory::kInvalidArgument && std::string(e.what()).find(words) != std::string::npos,
          std::string("wrong error: ") + e.what());
  }
  (void)comm;
}

void badInput(Communicator& comm) {
  const int me = comm.rank(), n = comm.size();
  float v = 0;
  expectInvalid(comm, [&] { comm.sendAsync(ConstView(&v, 1, DataType::kFloat32), n, 0); }, "out of range");
  expectInvalid(comm, [&] { comm.sendAsync(ConstView(&v, 1, DataType::kFloat32), -1, 0); }, "out of range");
  expectInvalid(comm, [&] { comm.recvAsync(View(&v, 1, DataType::kFloat32), me, 0); }, "is this rank");
  expectInvalid(comm, [&] { comm.sendAsync(ConstView(&v, 1, DataType::kFloat32), (me + 1) % n, -3); }, "tag -3");
  expectInvalid(comm, [&] { comm.sendAsync(ConstView(&v, 1, DataType::kFloat32), (me + 1) % n,
                                           Communicator::kMaxMessageTag + 1); }, "outside");
  expectInvalid(comm, [&] { comm.recvAsync(View(nullptr, 4, DataType::kFloat32), (me + 1) % n, 0); }, "null buffer");
  // A fresh communicator without enablePointToPoint (its creation is
  // collective). Kept, not finalised: finalising a communicator that
  // boostcomm made finalises MPI, which the report still needs.
  static std::shared_ptr<Communicator> other = Communicator::createMpiWorld();
  expectInvalid(comm, [&] { other->sendAsync(ConstView(&v, 1, DataType::kFloat32), (me + 1) % n, 0); },
                "enablePointToPoint");
}

}  // namespace

int main() {
  auto comm = Communicator::createMpiWorld();
  MpiReport report(*comm);
  gReport = &report;
  comm->enablePointToPoint();
  comm->enablePointToPoint();  // a second call returns at once
  report.section("pairs", pairs);
  report.section("ordering", ordering);
  report.section("any source", anySource);
  report.section("beside collectives", besideCollectives);
  report.section("bad input", badInput);
  return report.finish();
}
