// The library's way to the implementation behind a public handle.
//
// The public classes keep their implementation private and befriend
// detail::Access, so users see no impl() door; code inside the library (the
// tuner, topology_api, the overlap engine, the test-only in-process groups)
// reaches the implementation through implOf(). Internal: not installed.
#pragma once

#include "boostcomm/communicator.h"
#include "boostcomm/overlap.h"

namespace boostcomm::detail {

struct Access {
  static CommunicatorImpl& impl(Communicator& comm) { return *comm.impl_; }
  static OverlapEngine::Impl& impl(OverlapEngine& engine) { return *engine.impl_; }
};

inline CommunicatorImpl& implOf(Communicator& comm) { return Access::impl(comm); }
inline OverlapEngine::Impl& implOf(OverlapEngine& engine) { return Access::impl(engine); }

}  // namespace boostcomm::detail
