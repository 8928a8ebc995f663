// Link probes: ping-pong between two ranks, fitted to t = alpha + bytes/beta.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "boostcomm/topology.h"
#include "transport/transport.h"

namespace boostcomm::topology {

using ProbePoint = ProbeSample;

// The default sweep: 8 B, 4 KiB, 64 KiB, 1 MiB, 4 MiB. The largest size makes
// bytes/beta dominate even on fast shared memory; the smallest is pure alpha.
std::vector<std::size_t> defaultProbeSizes();

// Least-squares fit of t = alpha + bytes/beta, weighted by 1/t^2 (relative
// error): unweighted, the multi-millisecond large messages would swamp the
// microsecond latency term. Needs >= 2 distinct sizes; alpha is clamped at 0.
// Returns measured = true and the points as samples; hops is left 0.
LinkModel fitLinkModel(std::span<const ProbePoint> points);

// Ping-pong between this rank and `peer` of t; both call it with the same
// sizes. The initiator (initiator = true) returns the points (half the
// fastest round trip per size); the other an
// empty vector. Repetitions per size shrink with size (50 .. 4) to bound time.
std::vector<ProbePoint> pingPong(transport::Transport& t, int peer, bool initiator, std::span<const std::size_t> sizes);
// The same with `fixedReps` timed repetitions per size (after one warm-up):
// a short probe with a known cost (the communicator's link facts).
std::vector<ProbePoint> pingPong(transport::Transport& t, int peer, bool initiator, std::span<const std::size_t> sizes,
                                 int fixedReps);

// Waits for req, sleeping between polls: for ranks that only wait while
// others measure, so they do not steal the measuring pair's cores.
void waitQuietly(transport::Transport& t, transport::Request& req);

}  // namespace boostcomm::topology
