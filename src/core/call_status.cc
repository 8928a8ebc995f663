#include "core/call_status.h"

#include <sstream>

namespace boostcomm::core {

Fingerprint Fingerprint::of(Collective collective, DataType dtype, ReduceOp op, int root, std::uint64_t count) {
  // Only the fields that the collective reads take part, so that ranks which
  // leave an unused field at different values still match.
  Fingerprint f;
  f.collective = collective;
  if (collective == Collective::kBarrier) return f;
  f.dtype = dtype;
  f.count = count;
  if (collective == Collective::kAllreduce || collective == Collective::kReduceScatter) f.op = op;
  if (collective == Collective::kBroadcast) f.root = root;
  return f;
}

Fingerprint Fingerprint::fromWord(std::uint64_t word, std::uint64_t count) {
  Fingerprint f;
  f.collective = static_cast<Collective>(word & 0xff);
  f.dtype = static_cast<DataType>((word >> 8) & 0xff);
  f.op = static_cast<ReduceOp>((word >> 16) & 0xff);
  f.root = static_cast<int>(static_cast<std::uint32_t>(word >> 24));
  f.count = count;
  return f;
}

namespace {
template <typename E>
std::string_view nameOr(E value, int limit) {
  return static_cast<int>(value) < limit ? toString(value) : std::string_view("?");
}
}  // namespace

std::string describe(const Fingerprint& f) {
  std::ostringstream os;
  os << nameOr(f.collective, kNumCollectives);
  if (f.collective == Collective::kBarrier) return os.str();
  os << ' ' << nameOr(f.dtype, kNumDataTypes) << " x" << f.count;
  if (f.collective == Collective::kAllreduce || f.collective == Collective::kReduceScatter)
    os << ' ' << nameOr(f.op, kNumReduceOps);
  if (f.collective == Collective::kBroadcast) os << " root " << f.root;
  return os.str();
}

std::string describeMismatch(int rankA, const Fingerprint& a, int rankB, const Fingerprint& b, std::uint64_t seq) {
  std::ostringstream os;
  os << "collective mismatch: rank " << rankA << ": " << describe(a) << ", seq " << seq << "; rank " << rankB
     << ": " << describe(b) << ", seq " << seq;
  return os.str();
}

bool CallStatus::read(std::uint64_t seq, Fingerprint& out) const {
  const FlightEntry& e = ring[seq % kFlightRingEntries];
  const std::uint64_t before = e.tag.load(std::memory_order_acquire);
  if (before != seq + 1) return false;
  const std::uint64_t word = e.word.load(std::memory_order_relaxed);
  const std::uint64_t count = e.count.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (e.tag.load(std::memory_order_relaxed) != before) return false;
  out = Fingerprint::fromWord(word, count);
  return true;
}

}  // namespace boostcomm::core
