#include "interposer/state.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <sstream>
#include <string>
#include <string_view>

#include "api/mpi_comm.h"
#include "boostcomm/error.h"
#include "core/tunables.h"

namespace boostcomm::interposer {

thread_local int Guard::depth_ = 0;

namespace detail {
std::atomic<bool> g_active{false};
Settings g_settings;
std::atomic<std::uint64_t> g_epoch{1};
thread_local CacheLine t_cache;
}  // namespace detail

namespace {

using detail::g_active;
using detail::g_epoch;
using detail::g_settings;

std::mutex g_initMutex;
bool g_initDone = false;  // guarded by g_initMutex: settings read, keyvals made
int g_commKeyval = MPI_KEYVAL_INVALID;
int g_selfKeyval = MPI_KEYVAL_INVALID;
CommEntry g_internal{CommKind::kInternal, Reason::kRouted, nullptr, 0, 1, false};

// Routed entries in creation order: finalized in reverse at MPI_Finalize.
std::mutex g_routedMutex;
std::vector<CommEntry*> g_routed;

// BOOSTCOMM_MPI_INTERPOSE: "all", "none", names, "-name" removes.
std::array<bool, kNumCalls> parseEnabled(const std::string& text) {
  std::array<bool, kNumCalls> on{};
  std::stringstream in(text);
  std::string word;
  while (std::getline(in, word, ',')) {
    while (!word.empty() && word.front() == ' ') word.erase(word.begin());
    while (!word.empty() && word.back() == ' ') word.pop_back();
    if (word.empty()) continue;
    const bool remove = word.front() == '-';
    const std::string_view name = remove ? std::string_view(word).substr(1) : std::string_view(word);
    if (name == "all" || name == "none") {
      on.fill(name == "all" ? !remove : remove);
      continue;
    }
    bool known = false;
    for (int c = 0; c < kNumCalls; ++c) {
      if (callName(static_cast<Call>(c)) == name) {
        on[static_cast<std::size_t>(c)] = !remove;
        known = true;
      }
    }
    if (!known) {
      std::string names = "all, none";
      for (int c = 0; c < kNumCalls; ++c) names += ", " + std::string(callName(static_cast<Call>(c)));
      throw std::invalid_argument("BOOSTCOMM_MPI_INTERPOSE='" + text + "': unknown collective '" +
                                  std::string(name) + "' (accepted: " + names + ", each optionally prefixed by '-')");
    }
  }
  return on;
}

void finalizeEntry(CommEntry& entry) {
  if (!entry.comm) return;
  Guard guard;
  try {
    entry.comm->finalize();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "boostcomm_mpi: rank %d: finalizing a communicator failed: %s\n", entry.rank, e.what());
  }
  entry.comm.reset();
}

int deleteCommAttr(MPI_Comm, int, void* value, void*) {
  auto* entry = static_cast<CommEntry*>(value);
  g_epoch.fetch_add(1, std::memory_order_acq_rel);
  if (entry == &g_internal) return MPI_SUCCESS;
  if (entry->kind == CommKind::kRouted) {
    std::lock_guard lock(g_routedMutex);
    std::erase(g_routed, entry);
  }
  // MPI_Comm_free is collective, so every rank of the communicator is here
  // and boostcomm's collective teardown (the shared window) can run.
  finalizeEntry(*entry);
  delete entry;
  return MPI_SUCCESS;
}

// MPI_COMM_SELF's attributes are deleted first in MPI_Finalize, while MPI is
// still fully usable (MPI-3.1 8.7.1): the hook for our teardown, which also
// catches programs that finalize through PMPI_Finalize (Fortran's mpi_finalize).
int deleteSelfAttr(MPI_Comm, int, void*, void*) {
  g_active.store(false, std::memory_order_release);
  if (g_settings.stats) stats().reduceAndPrint();
  std::vector<CommEntry*> routed;
  {
    std::lock_guard lock(g_routedMutex);
    routed.swap(g_routed);
  }
  // Reverse creation order: ranks created them in one global order, so the
  // collective teardowns meet.
  for (auto it = routed.rbegin(); it != routed.rend(); ++it) {
    finalizeEntry(**it);
    (*it)->kind = CommKind::kUnroutable;  // its attribute is deleted later, by MPI
    (*it)->reason = Reason::kNotActive;
  }
  return MPI_SUCCESS;
}

}  // namespace

bool detail::initialize() {
  std::lock_guard lock(g_initMutex);
  if (g_initDone) return g_active.load(std::memory_order_acquire);
  int initialized = 0, finalized = 0;
  PMPI_Initialized(&initialized);
  PMPI_Finalized(&finalized);
  if (!initialized || finalized) return false;
  try {
    g_settings.enabled = parseEnabled(core::tunableString(core::kTunableMpiInterpose));
    g_settings.minBytes = core::tunableBytes(core::kTunableMpiMinBytes);
    g_settings.stats = core::tunableBool(core::kTunableMpiStats);
  } catch (const std::exception& e) {
    // Same environment on every rank: every rank stops here alike.
    std::fprintf(stderr, "boostcomm_mpi: %s\n", e.what());
    PMPI_Abort(MPI_COMM_WORLD, 1);
  }
  int level = MPI_THREAD_SINGLE;
  PMPI_Query_thread(&level);
  g_settings.threadMultiple = level == MPI_THREAD_MULTIPLE;
  // Dups do not inherit the attribute: a duplicate is set up at its own first blocking call.
  PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, deleteCommAttr, &g_commKeyval, nullptr);
  PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, deleteSelfAttr, &g_selfKeyval, nullptr);
  PMPI_Comm_set_attr(MPI_COMM_SELF, g_selfKeyval, nullptr);
  g_initDone = true;
  g_active.store(true, std::memory_order_release);
  return true;
}

namespace {

void attach(MPI_Comm comm, CommEntry* entry) {
  PMPI_Comm_set_attr(comm, g_commKeyval, entry);
  g_epoch.fetch_add(1, std::memory_order_acq_rel);
}

CommEntry* unroutable(MPI_Comm comm, Reason reason, int rank, int size) {
  auto* entry = new CommEntry;
  entry->kind = CommKind::kUnroutable;
  entry->reason = reason;
  entry->rank = rank;
  entry->size = size;
  attach(comm, entry);
  return entry;
}

// Largest payload below which the selection picks "native" throughout,
// assuming (as every built-in table does) that native is the small-size
// prefix of the range map: powers of two first, then a binary search
// between the last native power and the first other one. A size inside that
// prefix that the table sends elsewhere would still get a correct result
// (MPI's); only the acceleration would be missed.
std::size_t nativePrefix(const Communicator& comm, Collective coll) {
  try {
    auto native = [&](std::size_t bytes) { return comm.selectedAlgorithm(coll, bytes) == "native"; };
    if (!native(0)) return 0;
    std::size_t lo = 0;  // native
    std::size_t hi = 1;
    while (hi <= (std::size_t{1} << 40) && native(hi)) {
      lo = hi;
      hi *= 2;
    }
    if (hi > (std::size_t{1} << 40)) return lo;
    while (hi - lo > 1) {  // native(lo), !native(hi)
      const std::size_t mid = lo + (hi - lo) / 2;
      (native(mid) ? lo : hi) = mid;
    }
    return lo;
  } catch (const std::exception&) {
    return 0;  // a forced algorithm that cannot run: the boostcomm path reports it on the call
  }
}

CommEntry* create(MPI_Comm comm) {
  Guard guard;
  int inter = 0, rank = 0, size = 1;
  PMPI_Comm_test_inter(comm, &inter);
  if (inter) return unroutable(comm, Reason::kIntercomm, 0, 1);
  PMPI_Comm_rank(comm, &rank);
  PMPI_Comm_size(comm, &size);
  if (size == 1) return unroutable(comm, Reason::kSingleRank, rank, size);
  std::shared_ptr<Communicator> created;
  int ok = 1;
  try {
    created = boostcomm::detail::createCommunicatorOverMpi(comm);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "boostcomm_mpi: rank %d: no boostcomm communicator (calls go to PMPI): %s\n", rank,
                 e.what());
    ok = 0;
  }
  int all = 0;
  PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
  if (!all) {
    // Another rank failed: ours must not tear down collectively without it,
    // so it is left unfinalized (a leak on a path that should not happen).
    if (created) new std::shared_ptr<Communicator>(std::move(created));
    return unroutable(comm, Reason::kCreateFailed, rank, size);
  }
  auto* entry = new CommEntry;
  entry->kind = CommKind::kRouted;
  entry->comm = std::move(created);
  entry->rank = rank;
  entry->size = size;
  for (Collective coll : {Collective::kAllreduce, Collective::kAllgather, Collective::kBroadcast,
                          Collective::kReduceScatter}) {
    entry->nativeUpTo[static_cast<std::size_t>(coll)] = nativePrefix(*entry->comm, coll);
  }
  try {
    entry->nativeBarrier = entry->comm->selectedAlgorithm(Collective::kBarrier, 0) == "native";
  } catch (const std::exception&) {
    entry->nativeBarrier = false;
  }
  {
    std::lock_guard lock(g_routedMutex);
    g_routed.push_back(entry);
  }
  attach(comm, entry);
  return entry;
}

}  // namespace

CommEntry* detail::lookupSlow(MPI_Comm comm, std::uint64_t epoch) {
  void* value = nullptr;
  int found = 0;
  if (PMPI_Comm_get_attr(comm, g_commKeyval, &value, &found) != MPI_SUCCESS) return nullptr;
  CommEntry* entry = found ? static_cast<CommEntry*>(value) : nullptr;
  if (entry != nullptr) detail::t_cache = detail::CacheLine{comm, entry, epoch};
  return entry;
}

CommEntry& entryForBlocking(MPI_Comm comm) {
  if (CommEntry* entry = lookup(comm)) return *entry;
  return *create(comm);
}

void markInternal(MPI_Comm comm) {
  if (comm == MPI_COMM_NULL || !active()) return;
  attach(comm, &g_internal);
}

int reportError(MPI_Comm comm, const char* call, const std::exception& e) {
  int rank = -1;
  PMPI_Comm_rank(comm, &rank);
  std::fprintf(stderr, "boostcomm_mpi: rank %d: %s through boostcomm failed: %s\n", rank, call, e.what());
  PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);
  return MPI_ERR_OTHER;
}

}  // namespace boostcomm::interposer
