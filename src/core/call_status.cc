#include "core/call_status.h"

#include <time.h>

#include <sstream>

namespace boostcomm::core {

std::uint64_t coarseWallNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(ts.tv_nsec);
}

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
  f.rejected = (word >> 63) != 0;
  f.count = count;
  return f;
}

namespace {
template <typename E>
std::string_view nameOr(E value, int limit) {
  return static_cast<int>(value) < limit ? toString(value) : std::string_view("?");
}
}  // namespace

void putJsonText(FixedWriter& w, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::size_t plain = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c != '"' && c != '\\' && c >= 0x20) continue;
    w.put(text.substr(plain, i - plain));
    const char escaped[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15], '\0'};
    w.put(c == '"' ? "\\\"" : c == '\\' ? "\\\\" : escaped);
    plain = i + 1;
  }
  w.put(text.substr(plain));
}

FixedWriter& FixedWriter::put(std::string_view text) {
  const std::size_t room = capacity_ - size_;
  const std::size_t n = text.size() < room ? text.size() : room;
  for (std::size_t i = 0; i < n; ++i) data_[size_ + i] = text[i];
  size_ += n;
  if (n < text.size()) overflowed_ = true;
  return *this;
}

FixedWriter& FixedWriter::put(std::uint64_t value) {
  char digits[20];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value != 0);
  char text[20];
  for (int i = 0; i < n; ++i) text[i] = digits[n - 1 - i];
  return put(std::string_view(text, static_cast<std::size_t>(n)));
}

void describeTo(FixedWriter& out, const Fingerprint& f) {
  out.put(nameOr(f.collective, kNumCollectives));
  if (f.collective != Collective::kBarrier) {
    out.put(" ").put(nameOr(f.dtype, kNumDataTypes)).put(" x").put(f.count);
    if (f.collective == Collective::kAllreduce || f.collective == Collective::kReduceScatter)
      out.put(" ").put(nameOr(f.op, kNumReduceOps));
    if (f.collective == Collective::kBroadcast) out.put(" root ").put(static_cast<std::uint64_t>(f.root));
  }
  if (f.rejected) out.put(" REJECTED by that rank's argument checks (invalid arguments there: see its own error)");
}

std::string describe(const Fingerprint& f) {
  char buffer[128];
  FixedWriter out(buffer, sizeof buffer);
  describeTo(out, f);
  return std::string(buffer, out.size());
}

std::string describeMismatch(int rankA, const Fingerprint& a, int rankB, const Fingerprint& b, std::uint64_t seq) {
  return describeMismatch(rankA, a, seq, rankB, b, seq);
}

std::string describeMismatch(int rankA, const Fingerprint& a, std::uint64_t seqA, int rankB, const Fingerprint& b,
                             std::uint64_t seqB) {
  std::ostringstream os;
  os << "collective mismatch: rank " << rankA << ": " << describe(a) << ", seq " << seqA << "; rank " << rankB
     << ": " << describe(b) << ", seq " << seqB;
  return os.str();
}

constexpr int kWireFormats = 4;  // kOff, kBf16, kFp16, kAuto (boostcomm/types.h)

std::string compareHeaders(const CallHeader& mine, const CallHeader& theirs) {
  if (theirs.magic != CallHeader::kMagic) {
    std::ostringstream os;
    os << "collective mismatch: rank " << mine.rank << " (seq " << mine.sequence << ", "
       << describe(Fingerprint::fromWord(mine.word, mine.count))
       << ") received a message that is not a call header from a peer (another rank runs a different collective "
          "or algorithm, or sets BOOSTCOMM_FINGERPRINTS differently)";
    return os.str();
  }
  if (sameCall(mine, theirs)) return {};
  const Fingerprint a = Fingerprint::fromWord(mine.word, mine.count);
  const Fingerprint b = Fingerprint::fromWord(theirs.word, theirs.count);
  std::ostringstream os;
  os << "collective mismatch: rank " << mine.rank << ": " << describe(a);
  if (theirs.wire != mine.wire) os << " wire " << nameOr(static_cast<WireFormat>(mine.wire), kWireFormats);
  os << ", seq " << mine.sequence << "; rank " << theirs.rank << ": " << describe(b);
  if (theirs.wire != mine.wire) os << " wire " << nameOr(static_cast<WireFormat>(theirs.wire), kWireFormats);
  os << ", seq " << theirs.sequence;
  return os.str();
}

CallStatus::Read CallStatus::readHeader(std::uint64_t seq, int rank, CallHeader& out) const {
  const FlightEntry& e = ring[seq % kFlightRingEntries];
  const std::uint64_t before = e.tag.load(std::memory_order_acquire);
  if (before != seq + 1) {
    return before > seq + 1 || started.load(std::memory_order_acquire) > seq + kFlightRingEntries ? Read::kGone
                                                                                                 : Read::kNotYet;
  }
  CallHeader h;
  h.rank = rank;
  h.sequence = seq;
  h.word = e.word.load(std::memory_order_relaxed);
  h.count = e.count.load(std::memory_order_relaxed);
  h.wire = static_cast<std::uint32_t>(e.wire.load(std::memory_order_relaxed));
  // A call the owner rejected (recordRejected) is not the header it would
  // send: its retry will overwrite the entry; the stall inspector reports a
  // rejection that stands (kRejectedGraceNs).
  if ((h.word >> 63) != 0) return Read::kNotYet;
  std::atomic_thread_fence(std::memory_order_acquire);
  if (e.tag.load(std::memory_order_relaxed) != before) return Read::kNotYet;  // being rewritten: look again
  out = h;
  return Read::kRead;
}

bool CallStatus::read(std::uint64_t seq, Fingerprint& out, std::uint64_t* startNs) const {
  const FlightEntry& e = ring[seq % kFlightRingEntries];
  const std::uint64_t before = e.tag.load(std::memory_order_acquire);
  if (before != seq + 1) return false;
  const std::uint64_t word = e.word.load(std::memory_order_relaxed);
  const std::uint64_t count = e.count.load(std::memory_order_relaxed);
  const std::uint64_t at = e.startNs.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (e.tag.load(std::memory_order_relaxed) != before) return false;
  out = Fingerprint::fromWord(word, count);
  if (startNs != nullptr) *startNs = at;
  return true;
}

}  // namespace boostcomm::core
