#include "shm/attach.h"

#include <cstdio>
#include <exception>
#include <functional>
#include <memory>

#include "core/check.h"
#include "core/tunables.h"
#include "shm/engine.h"
#include "shm/posix_segment.h"
#include "shm/window_segment.h"

namespace boostcomm::shm {

namespace {

// The engine's tunables, read before the agreement step so that a bad value
// can travel through it (see decide).
struct Wanted {
  bool enable = false;
  EngineConfig config;
};

Wanted readTunables(int rank) {
  Wanted w;
  w.enable = core::tunableBool(core::kTunableShm);
  w.config.chunkBytes = core::tunableBytes(core::kTunableShmChunkBytes);
  w.config.slotBytes = core::tunableBytes(core::kTunableShmSlotBytes);
  w.config.cma = core::tunableBool(core::kTunableShmCma);
  // The staging ring pipelines chunks: one is copied in while another is read.
  BC_INVALID(w.config.slotBytes >= 2 * w.config.chunkBytes, rank,
             core::kTunableShmSlotBytes << "=" << w.config.slotBytes << " holds fewer than two chunks of "
                                        << core::kTunableShmChunkBytes << "=" << w.config.chunkBytes);
  return w;
}

// Collective: whether every rank wants an engine (and may have one: the
// group is on this node). A rank with a bad tunable votes -1, so every rank
// raises together instead of the others creating a segment without it.
bool decide(transport::Transport& t, bool onThisNode, Wanted& local) {
  constexpr int kInvalid = -1;
  std::exception_ptr localError;
  try {
    local = readTunables(t.rank());
  } catch (const Error&) {
    localError = std::current_exception();
  }
  int wanted = localError ? kInvalid : (local.enable && onThisNode ? 1 : 0);
  int all = 0;
  t.nativeAllreduce(&wanted, &all, 1, DataType::kInt32, ReduceOp::kMin, nullptr);
  if (localError) std::rethrow_exception(localError);
  BC_INVALID(all != kInvalid, t.rank(),
             "another rank has an invalid shared-memory tunable (" << core::kTunableShm << ", "
                 << core::kTunableShmChunkBytes << ", " << core::kTunableShmSlotBytes << "); see its error");
  return all == 1;
}

// An engine on a POSIX segment, or null when the segment failed: its
// failures are agreed (posix_segment.h: every rank raises the same one), so
// every rank falls back together and the job still runs, on the transport's
// point-to-point algorithms (e.g. /dev/shm not shared between containers
// that share a host name).
std::unique_ptr<ShmEngine> posixEngine(transport::Transport& transport, const Wanted& local, const char* what) {
  try {
    return std::make_unique<ShmEngine>(transport, PosixSegment::factory(transport), local.config);
  } catch (const Error& e) {
    if (e.category() != ErrorCategory::kTransport) throw;
    if (transport.rank() == 0) {
      std::fprintf(stderr, "boostcomm: warning: no shared-memory engine on %s: %s\n", what, e.what());
    }
    return nullptr;
  }
}

}  // namespace

void attachSharedMemory(transport::Transport& transport) {
  if (!transport.takesSharedMemory()) return;
  Wanted local;
  if (!decide(transport, transport.groupOnThisNode(), local)) return;
  if (transport.offersSharedWindows()) {  // MPI: the backend's window
    transport.attachSharedMemory(
        std::make_unique<ShmEngine>(transport, WindowSegment::factory(transport), local.config));
    return;
  }
  // The store transport: node ids came through the store (host name and
  // network namespace), the same list on every rank.
  if (auto engine = posixEngine(transport, local, "the store transport")) transport.attachSharedMemory(std::move(engine));
}

bool attachPosixSharedMemory(transport::Transport& transport) {
  Wanted local;
  if (!transport.takesSharedMemory() || !decide(transport, true, local)) return false;
  auto engine = posixEngine(transport, local, "a reserved MPI communicator");
  if (!engine) return false;
  transport.attachSharedMemory(std::move(engine));
  return true;
}

}  // namespace boostcomm::shm
