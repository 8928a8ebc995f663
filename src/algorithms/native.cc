// native: the backend's own collective as a one-step schedule.
//
// Backends take int counts; larger allreduce/broadcast payloads are cut into
// sequential chunks of kMaxNativeCount elements. Allgather and reduce_scatter
// cannot be cut that way (the layout interleaves ranks), so they report
// "unsupported" beyond int range and the selection falls back to ring.
#include <climits>

#include "algorithms/registry.h"

namespace boostcomm::algorithms {
namespace {

constexpr std::size_t kMaxNativeCount = std::size_t{1} << 30;

}  // namespace

std::string nativeUnsupported(const CollectiveSpec& spec) {
  if (spec.collective == Collective::kAllgather) {
    const std::size_t total = spec.payloadBytes() / spec.elementSize();
    if (total > static_cast<std::size_t>(INT_MAX)) return "allgather of more than INT_MAX elements";
  }
  if (spec.collective == Collective::kReduceScatter &&
      spec.count * static_cast<std::size_t>(spec.size) > static_cast<std::size_t>(INT_MAX)) {
    return "reduce_scatter of more than INT_MAX elements";
  }
  return {};
}

void buildNative(const CollectiveSpec& spec, executor::Schedule& schedule) {
  executor::NativeCall call;
  call.collective = spec.collective;
  call.root = spec.root;
  switch (spec.collective) {
    case Collective::kAllreduce:
    case Collective::kBroadcast: {
      // Chunks of at most kMaxNativeCount; Schedule::native chains them in order.
      std::size_t offset = 0;
      do {
        call.elementOffset = offset;
        call.count = std::min(kMaxNativeCount, spec.count - offset);
        schedule.native(call);
        offset += call.count;
      } while (offset < spec.count);
      if (spec.collective == Collective::kAllreduce && spec.op == ReduceOp::kAvg) {
        schedule.divide(executor::BufRef{executor::BufferId::kRecv, 0}, spec.count, spec.divisor(),
                        {static_cast<executor::Schedule::StepId>(schedule.steps().size() - 1)});
      }
      return;
    }
    case Collective::kAllgather:
      call.count = spec.counts.empty() ? spec.count : spec.counts[static_cast<std::size_t>(spec.rank)];
      schedule.native(call);
      return;
    case Collective::kReduceScatter:
      call.count = spec.count;
      schedule.native(call);
      if (spec.op == ReduceOp::kAvg) {
        schedule.divide(executor::BufRef{executor::BufferId::kRecv, 0}, spec.count, spec.divisor(), {0});
      }
      return;
    case Collective::kBarrier:
      schedule.native(call);
      return;
  }
}

}  // namespace boostcomm::algorithms
