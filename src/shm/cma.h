// Cross-memory attach (CMA): reading a peer process's memory with
// process_vm_readv (Linux >= 3.2; the single-copy mechanism Open MPI's vader
// uses). The shm engine uses it for segment lists: the caller's tensors are
// ordinary memory that peers cannot map, and CMA lets each rank read the
// peers' parts it needs straight out of their tensors — one copy, instead of
// a copy into the shared slot ring by the owner plus a copy out of it.
// Needs ptrace permission over the peers (same user; Yama ptrace_scope 0 or
// a common ancestor): probed once when the engine starts, agreed by all ranks.
#pragma once

#include <sys/types.h>

#include <cstddef>

#include "core/segment_list.h"

namespace boostcomm::shm {

// local <- remote (in `pid`'s address space), `bytes` bytes. `remote` lists
// addresses of the peer (never dereferenced here). Throws kTransport on failure.
void cmaRead(pid_t pid, const core::Operand& local, const core::Operand& remote, std::size_t bytes, int rank);
// One read of `bytes` from `pid`'s address `remote` into `local`; false on any failure.
bool cmaTryRead(pid_t pid, void* local, const void* remote, std::size_t bytes);

}  // namespace boostcomm::shm
