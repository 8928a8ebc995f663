// CommunicatorImpl, wire formats (declared in communicator_impl.h).
//
// Which wire format a call runs with, highest first: CallOptions::wire, the
// communicator's (setWireFormat, else BOOSTCOMM_WIRE_DTYPE). The format
// applies only to float32 allreduce, allgather(v) and reduce_scatter
// (algorithms::wireCollective) under an algorithm that carries it (ring, rhd,
// hier: AlgorithmInfo::carriesWire); elsewhere the payload passes
// through as it is, except that an explicit per-call kBf16/kFp16 that cannot
// be honoured is an error (the caller asked for exactly that call). kAuto
// asks the cost model: 16-bit only on several nodes and only where halving
// the link bytes saves more than the conversions cost, so one host never
// compresses. setWireFormat compares the value across ranks (kMismatch on
// every rank). BOOSTCOMM_WIRE_DTYPE is not exchanged on its own: a blocking
// exchange at the first call would hang (not time out) a call that only some
// ranks make, and a communicator's first call may be any one. Like every
// collective argument, the resolved format of each call is compared by
// BOOSTCOMM_CHECK_CONSISTENCY=1.
#include <string>
#include <vector>

#include "api/agreement.h"
#include "api/communicator_impl.h"
#include "core/check.h"
#include "core/tunables.h"

namespace boostcomm::detail {

using algorithms::AlgorithmInfo;
using algorithms::CollectiveSpec;

namespace {
// "ring, rhd and hier": the algorithms of `coll` that carry a wire format.
std::string wireCarriers(Collective coll) {
  std::string names;
  for (const AlgorithmInfo& a : algorithms::allAlgorithms()) {
    if (a.collective != coll || !a.carriesWire) continue;
    names += names.empty() ? "" : ", ";
    names += a.name;
  }
  return names;
}

// kAuto compresses when the model predicts at least this saving: the model
// is coarse, and the float32 result is exact.
constexpr double kAutoWireMargin = 0.1;
}  // namespace

void CommunicatorImpl::agreeOnWire(WireFormat wire, const char* what) {
  const long long mine = static_cast<long long>(wire);
  const std::vector<long long> all = gatherWords(*transport_, &mine, 1);
  const int r = firstDifferentRank(all, &mine, 1);
  BC_CHECK(r < 0, ErrorCategory::kMismatch, rank_,
           what << ": ranks disagree on the wire format: rank " << rank_ << " has " << toString(wire) << ", rank " << r
                << " has " << toString(static_cast<WireFormat>(all[static_cast<std::size_t>(r)])));
}

void CommunicatorImpl::setWireFormat(WireFormat wire) {
  executor::EngineLock lock(*engine_);
  checkUsable();
  BC_INVALID(static_cast<unsigned>(wire) <= static_cast<unsigned>(WireFormat::kAuto), rank_,
             "setWireFormat: wire: unknown value " << static_cast<int>(wire));
  // Collective: finish our work in flight first (a peer inside the exchange
  // could not progress its part of it).
  engine_->drain(deadlineFor({}), "setWireFormat", rank_);
  agreeOnWire(wire, "setWireFormat");
  wire_ = wire;
}

WireFormat CommunicatorImpl::wireFormat() const {
  std::lock_guard lock(mutex_);
  return wire_;
}

WireFormat CommunicatorImpl::wireFormatOf(std::size_t bytes, DataType dtype, const CallOptions& options) const {
  std::lock_guard lock(mutex_);
  CollectiveSpec probe = describeSelf();
  probe.collective = Collective::kAllreduce;
  probe.dtype = dtype;
  probe.count = bytes / dataTypeSize(dtype);
  return resolveWire(probe, choose(probe, options), options);
}

WireFormat CommunicatorImpl::autoWire(const CollectiveSpec& spec, const AlgorithmInfo& algo) const {
  if (layout_.nodes() < 2) return WireFormat::kOff;
  const std::size_t bytes = spec.payloadBytes();
  const double plain = tuning::predictUs(modelParams_, spec.collective, algo.name, bytes);
  const double packed = tuning::predictUs(modelParams_, spec.collective, algo.name, bytes, WireFormat::kBf16);
  return packed < plain * (1.0 - kAutoWireMargin) ? WireFormat::kBf16 : WireFormat::kOff;
}

WireFormat CommunicatorImpl::resolveWire(const CollectiveSpec& spec, const AlgorithmInfo& algo,
                                         const CallOptions& options) const {
  const WireFormat wire = options.wire.value_or(wire_);
  if (wire == WireFormat::kOff) return WireFormat::kOff;
  const bool demanded = options.wire.has_value() && wire != WireFormat::kAuto;
  if (!algorithms::wireCollective(spec.collective) || spec.dtype != DataType::kFloat32) {
    BC_INVALID(!demanded, rank_,
               toString(spec.collective) << ": CallOptions::wire " << toString(wire)
                                         << " applies to float32 allreduce, allgather and reduce_scatter only; this "
                                            "call is "
                                         << toString(spec.dtype) << " " << toString(spec.collective)
                                         << " (leave wire unset: other payloads travel as they are)");
    return WireFormat::kOff;
  }
  if (!algo.carriesWire) {
    BC_INVALID(!demanded || options.algorithm.empty(), rank_,
               toString(spec.collective) << ": CallOptions::wire " << toString(wire) << " with algorithm '"
                                         << algo.name << "', which cannot carry it ("
                                         << wireCarriers(spec.collective) << " can)");
    return WireFormat::kOff;
  }
  if (wire == WireFormat::kAuto) return autoWire(spec, algo);
  return wire;
}

}  // namespace boostcomm::detail
