// Process-wide state of the MPI interposer: settings, the reentrancy guard and
// the boostcomm Communicator cached on each MPI communicator.
//
// Recursion. boostcomm's own MPI transport calls MPI_Allreduce, MPI_Comm_dup
// ... by their MPI_ names, and under LD_PRELOAD those resolve here too. Two
// rules keep them out of the routing, without changing the transport:
//  - Guard: while the interposer runs boostcomm on a thread, every MPI_* call
//    on that thread goes straight to PMPI (a thread-local depth counter).
//  - Internal communicators: every communicator created while the guard is
//    active (boostcomm's duplicates and splits: the interposer wraps
//    MPI_Comm_dup/split/split_type/create) carries the interposer's attribute
//    marked internal, so a call on it from a thread without the guard (the
//    boostcomm progress thread) goes to PMPI as well.
//
// When a communicator gets its boostcomm Communicator: at the first
// intercepted collective on it (one not disabled by BOOSTCOMM_MPI_INTERPOSE),
// whatever its datatype or op. MPI orders the collectives of a communicator
// alike on every rank, blocking and nonblocking together, so that first call
// is the same call on every rank, and so is its kind:
//  - blocking: the set-up (itself collective: a duplicate, the node split,
//    the shared segment) runs inline, inside a call that may synchronise
//    anyway, and ends in an agreement (one PMPI_Allreduce) so that all ranks
//    route or none does (setup.cc);
//  - nonblocking: it must not block (ranks may legally start nonblocking
//    collectives on two communicators in opposite orders), so it runs in the
//    background and the calls queue behind it (deferred_setup.h). It must
//    not create an MPI communicator either (Open MPI serialises those per
//    process), so it runs over one reserved when the application created the
//    communicator (MPI_Init for MPI_COMM_WORLD, MPI_Comm_dup/split/create...),
//    where every rank of it is; without a reservation (created by a call not
//    intercepted, on several nodes, BOOSTCOMM_SHM=0) the nonblocking calls
//    fall through until a blocking one sets the communicator up (NOT_SEEN).
#pragma once

#include "transport/mpi/mpi_c.h"

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "boostcomm/communicator.h"
#include "boostcomm/types.h"
#include "interposer/stats.h"

namespace boostcomm::interposer {

class DeferredSetup;

class Guard {
 public:
  Guard() { ++depth_; }
  ~Guard() { --depth_; }
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;
  static bool active() { return depth_ > 0; }

 private:
  static thread_local int depth_;
};

// kFresh: created by the application, not set up yet (see `reserved`).
enum class CommKind : unsigned char { kRouted, kInternal, kUnroutable, kFresh };

// The attribute value on an MPI communicator the interposer has seen.
struct CommEntry {
  CommEntry();
  ~CommEntry();
  CommEntry(const CommEntry&) = delete;
  CommEntry& operator=(const CommEntry&) = delete;

  CommKind kind = CommKind::kUnroutable;
  Reason reason = Reason::kRouted;  // kUnroutable: why
  std::shared_ptr<Communicator> comm;
  int rank = 0;
  int size = 1;
  bool progressThread = false;  // started for nonblocking calls
  // Per boostcomm Collective: payloads up to this many bytes are ones
  // boostcomm's selection sends to MPI's own algorithm ("native"), so the
  // interposer calls PMPI on the application's communicator directly
  // instead of taking boostcomm's native path on its duplicate: the same
  // algorithm and result, ~400 fewer instructions per call (callgrind). Read once at
  // setup from its route table (detail::backendUpTo); 0: only empty calls.
  std::array<std::size_t, kNumCollectives> nativeUpTo{};
  bool nativeBarrier = false;
  // Whether that shortcut may be taken. Set up inline: from the start. Set up
  // in the background: only from the first blocking call on it, where every
  // rank has seen the set-up end (before, ranks would switch at different calls).
  bool shortcut = true;
  // Set up in the background: its thread, the calls queued behind it, and
  // the outcome; null when set up inline.
  std::unique_ptr<DeferredSetup> deferred;
  // kFresh: the communicator reserved at creation for a set-up in the
  // background (a duplicate, every rank on one node), or MPI_COMM_NULL.
  MPI_Comm reserved = MPI_COMM_NULL;
};

struct Settings {
  std::array<bool, kNumCalls> enabled{};
  std::size_t minBytes = 0;
  bool stats = false;
  bool threadMultiple = false;
  // Nonblocking calls can be routed: they need boostcomm's progress thread
  // (MPI_THREAD_MULTIPLE, BOOSTCOMM_PROGRESS not "caller"), and so does a
  // set-up in the background.
  bool nonblocking = false;
};

namespace detail {
// Defined in state.cc; here so that the per-call checks inline.
extern std::atomic<bool> g_active;
extern Settings g_settings;
extern std::atomic<std::uint64_t> g_epoch;
struct CacheLine {
  MPI_Comm comm = MPI_COMM_NULL;
  CommEntry* entry = nullptr;
  std::uint64_t epoch = 0;
};
extern thread_local CacheLine t_cache;
bool initialize();
CommEntry* lookupSlow(MPI_Comm comm, std::uint64_t epoch);
}  // namespace detail

// True between MPI_Init and the start of MPI_Finalize, with the settings read
// (on the first call that finds MPI initialized).
inline bool active() {
  return detail::g_active.load(std::memory_order_acquire) || detail::initialize();
}
inline const Settings& settings() { return detail::g_settings; }

// The entry of comm, or null when the interposer never saw it. Cheap: a
// per-thread cache, valid while no attribute of ours was set or deleted since
// it was filled (a freed communicator's handle can be reused), in front of
// MPI_Comm_get_attr.
inline CommEntry* lookup(MPI_Comm comm) {
  const std::uint64_t epoch = detail::g_epoch.load(std::memory_order_acquire);
  const detail::CacheLine& line = detail::t_cache;
  if (line.comm == comm && line.epoch == epoch) return line.entry;
  return detail::lookupSlow(comm, epoch);
}
// The entry of comm, set up collectively on first use (see above): inline
// for a blocking call (never null), in the background for a nonblocking one
// on a communicator reserved at creation (null: none reserved, not set up).
CommEntry& entryForBlocking(MPI_Comm comm);
CommEntry* entryForNonblocking(MPI_Comm comm);
// Inside the blocking call that created comm, on every rank of it: its
// entry, with a reservation where a set-up in the background could run.
void reserve(MPI_Comm comm);
// Marks a communicator created under the guard as boostcomm's own.
void markInternal(MPI_Comm comm);
// The attribute of comm (epoch bumped: per-thread caches refill).
void attach(MPI_Comm comm, CommEntry* entry);
// A routed entry, finalized at MPI_Finalize unless its communicator is freed first.
void registerRouted(CommEntry* entry);

// Reports a boostcomm failure in a routed call the MPI way: prints it and
// calls the communicator's error handler (MPI_ERRORS_ARE_FATAL aborts).
int reportError(MPI_Comm comm, const char* call, const std::exception& e);

}  // namespace boostcomm::interposer
