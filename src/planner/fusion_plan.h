// Collective fusion planning: a batch of collective requests with
// dependencies -> groups of requests that run as one packed collective, and
// the order in which the groups launch.
//
// Terms. A *request* is one collective a caller registered (allreduce,
// allgather, broadcast or reduce-scatter on its own buffers). A *dependency*
// (before, after) says request `after` reads memory that `before` writes, so
// `after` may start only once `before` completed. A *group* is a set of
// requests that run as a single collective on one packed buffer. The *level*
// of a request is the length of the longest dependency chain that ends at it.
//
// Rules (a pure function of its inputs: every rank that passes the same
// requests gets the same groups and launch order):
// - requests are compatible when kind, dtype, op and root are equal (op only
//   matters for the reducing kinds, root only for broadcast);
// - only compatible requests on the same level are merged. Two requests on the
//   same level never depend on each other (a path between them would put them
//   on different levels), and a group's dependencies all sit on lower levels,
//   so the group graph stays acyclic. Rejected alternative: merging any two
//   requests without a path between them packs tighter but can close a cycle
//   through a third request and needs a global search to avoid it;
// - within a level, a request joins the first open group of its class in
//   request order; a group closes when the next request would take it past
//   maxGroupBytes (0 = no limit);
// - groups are numbered by (level, first request): that numbering is the
//   launch order, a topological order of the group graph.
// Validation happens here too, before any data moves: a dependency cycle, a
// request whose result does not fit its receive buffer, two requests that
// write overlapping memory, and a request reading memory another one writes
// without a dependency path between them (a race) are kInvalidArgument.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "boostcomm/types.h"

namespace boostcomm::planner {

// One request, as the planner sees it. Addresses only serve the overlap
// checks (they are never dereferenced); counts are elements.
struct RequestInfo {
  Collective kind = Collective::kAllreduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;  // allreduce, reduce-scatter
  int root = 0;                  // broadcast
  // Elements this rank contributes: allreduce and allgather its input, reduce-
  // scatter its whole input (worldSize blocks), broadcast the buffer.
  std::size_t sendCount = 0;
  std::size_t recvCapacity = 0;  // elements the receive buffer holds (broadcast: the buffer)
  std::uintptr_t sendAddress = 0;
  std::uintptr_t recvAddress = 0;
};

struct Dependency {
  std::size_t before = 0;
  std::size_t after = 0;
};

struct FusionOptions {
  bool fuse = true;              // false: one group per request (the unfused baseline)
  std::size_t maxGroupBytes = 0;  // payload limit of one group per rank; 0 = none
};

struct FusionGroup {
  Collective kind = Collective::kAllreduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
  int level = 0;
  std::vector<std::size_t> requests;   // in request order
  std::vector<std::size_t> offsets;    // per member: elements from the start of the packed unit (see below)
  std::size_t unitCount = 0;           // elements of the packed unit
  std::vector<std::size_t> dependsOn;  // groups that must complete first (ascending)
};
// The packed unit of a group is what one rank contributes to one "slot" of the
// collective: allreduce and broadcast the whole packed buffer; allgather this
// rank's part (the result is worldSize units, rank-major); reduce-scatter one
// block (the input is worldSize units, block-major). Member i sits at offsets[i]
// inside every unit.

struct FusionPlan {
  std::vector<FusionGroup> groups;  // in launch order
  std::vector<std::size_t> groupOf;  // per request
  std::size_t launchesBefore = 0;    // collectives without fusion (one per request)
  std::size_t launchesAfter = 0;     // collectives of the plan (one per group)
  int levels = 0;
};

// Elements of one request's result on this rank (allgather: worldSize * send;
// reduce-scatter: one block). Throws kInvalidArgument on counts that do not fit.
std::size_t resultCount(const RequestInfo& request, int worldSize);
// Elements of one request inside the packed unit (see FusionGroup).
std::size_t unitCountOf(const RequestInfo& request, int worldSize);

// Throws Error{kInvalidArgument} (rank `rank`) naming the bad request.
FusionPlan planFusion(std::span<const RequestInfo> requests, std::span<const Dependency> dependencies,
                      int worldSize, const FusionOptions& options, int rank = -1);

// Fingerprint of what every rank must agree on (kinds, dtypes, ops, roots,
// counts, dependencies; not addresses).
std::uint64_t requestListSignature(std::span<const RequestInfo> requests, std::span<const Dependency> dependencies);

// Human-readable plan: launches before / after, then one line per group.
std::string describeFusionPlan(const FusionPlan& plan, std::span<const RequestInfo> requests);

}  // namespace boostcomm::planner
