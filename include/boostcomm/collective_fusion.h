// CollectiveFusion: a batch of mixed collective requests, planned and run
// together.
//
// Callers register allreduce / allgather / broadcast / reduce-scatter requests
// with their buffers (same meaning as the Communicator calls) and, where one
// request reads what another writes, a dependency. execute() then
//   1. plans (src/planner/fusion_plan.h, a pure function): builds the
//      dependency graph, rejects cycles, overlapping writers, races and
//      too-small buffers, and coalesces compatible independent requests
//      (same kind, dtype, op, root) into one packed collective;
//   2. checks that every rank registered the same requests (kMismatch on
//      every rank otherwise; a local error on one rank is reported on all),
//      before any data moves;
//   3. launches the groups in plan order as *Async collectives, so independent
//      groups are in flight together (an allgather receives while an allreduce
//      sends), waiting for a group's dependencies before packing it;
//   4. unpacks the results into the callers' buffers.
// A group of one request runs on the caller's buffers directly (no copy).
// The plan is kept while no request is added, so a batch can run every step.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "boostcomm/buffer.h"
#include "boostcomm/communicator.h"

namespace boostcomm {

struct CollectiveFusionOptions {
  bool fuse = true;              // false: one collective per request (for comparison)
  std::size_t maxGroupBytes = 0;  // payload limit of one fused collective per rank; 0 = none
  CallOptions call;               // algorithm / timeout of the collectives
};

struct CollectiveFusionStats {
  std::size_t requests = 0;
  std::size_t launchesBefore = 0;  // one per request
  std::size_t launchesAfter = 0;   // one per group
  std::size_t packedBytes = 0;     // bytes copied into and out of packed buffers per execute
};

namespace detail {
class CollectiveFusionImpl;
}

class CollectiveFusion {
 public:
  using RequestId = std::size_t;

  explicit CollectiveFusion(Communicator& comm, CollectiveFusionOptions options = {});
  ~CollectiveFusion();  // releases the registered packed buffers (collective, like freeBuffer)
  CollectiveFusion(const CollectiveFusion&) = delete;
  CollectiveFusion& operator=(const CollectiveFusion&) = delete;

  RequestId allreduce(ConstView send, View recv, ReduceOp op);
  RequestId allgather(ConstView send, View recv);
  RequestId broadcast(View buffer, int root);
  RequestId reduceScatter(ConstView send, View recv, ReduceOp op);
  // `later` starts only after `earlier` completed.
  void dependsOn(RequestId later, RequestId earlier);

  // Collective: every rank registered the same requests in the same order.
  void execute();
  // The plan (planned locally, no communication): launches before and after,
  // groups, order and dependencies.
  std::string describePlan();
  CollectiveFusionStats stats();
  // Forget every request.
  void clear();

 private:
  std::unique_ptr<detail::CollectiveFusionImpl> impl_;
};

}  // namespace boostcomm
