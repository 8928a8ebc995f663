#include "interposer/state.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <sstream>
#include <string>
#include <string_view>

#include <thread>

#include "boostcomm/error.h"
#include "core/tunables.h"
#include "interposer/deferred_setup.h"

namespace boostcomm::interposer {

thread_local int Guard::depth_ = 0;

CommEntry::CommEntry() = default;
CommEntry::~CommEntry() = default;

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
CommEntry& internalEntry() {
  static CommEntry* entry = [] {
    auto* e = new CommEntry;  // never freed: every internal communicator points at it
    e->kind = CommKind::kInternal;
    return e;
  }();
  return *entry;
}

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

// The collective teardown of one entry: its background set-up ended, its
// boostcomm Communicator finalized, then the communicator reserved for it
// freed (boostcomm ran over it). Once MPI_Finalize began (g_active false),
// MPI frees what is left itself: the reservations of communicators never
// set up are not freed here then.
void finalizeEntry(CommEntry& entry) {
  Guard guard;
  if (entry.deferred) entry.deferred->join();
  if (entry.comm) {
    try {
      entry.comm->finalize();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "boostcomm_mpi: rank %d: finalizing a communicator failed: %s\n", entry.rank, e.what());
    }
    entry.comm.reset();
  }
  if (entry.deferred) entry.deferred->freeReserved();
  if (entry.reserved != MPI_COMM_NULL && g_active.load(std::memory_order_acquire)) PMPI_Comm_free(&entry.reserved);
}

int deleteCommAttr(MPI_Comm, int, void* value, void*) {
  auto* entry = static_cast<CommEntry*>(value);
  g_epoch.fetch_add(1, std::memory_order_acq_rel);
  if (entry == &internalEntry()) return MPI_SUCCESS;
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
  // Communicators set up in the background were first used in orders that may
  // differ across ranks (nonblocking calls), so no order of their collective
  // teardowns is sure to meet: each gets a thread of its own (they exist only
  // under MPI_THREAD_MULTIPLE). The others: reverse creation order, on this
  // thread; ranks created them in one global order (blocking calls), so the
  // teardowns meet.
  std::vector<std::thread> teardowns;
  for (CommEntry* entry : routed) {
    if (entry->deferred) teardowns.emplace_back([entry] { finalizeEntry(*entry); });
  }
  for (auto it = routed.rbegin(); it != routed.rend(); ++it) {
    if (!(*it)->deferred) finalizeEntry(**it);
  }
  for (std::thread& t : teardowns) t.join();
  for (CommEntry* entry : routed) {
    entry->kind = CommKind::kUnroutable;  // its attribute is deleted later, by MPI
    entry->reason = Reason::kNotActive;
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
  g_settings.nonblocking =
      g_settings.threadMultiple && core::tunableEnum(core::kTunableProgress) != std::string_view("caller");
  // Dups do not inherit the attribute: a duplicate is set up at its own first call.
  PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, deleteCommAttr, &g_commKeyval, nullptr);
  PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, deleteSelfAttr, &g_selfKeyval, nullptr);
  PMPI_Comm_set_attr(MPI_COMM_SELF, g_selfKeyval, nullptr);
  g_initDone = true;
  g_active.store(true, std::memory_order_release);
  return true;
}

CommEntry* detail::lookupSlow(MPI_Comm comm, std::uint64_t epoch) {
  void* value = nullptr;
  int found = 0;
  if (PMPI_Comm_get_attr(comm, g_commKeyval, &value, &found) != MPI_SUCCESS) return nullptr;
  CommEntry* entry = found ? static_cast<CommEntry*>(value) : nullptr;
  if (entry != nullptr) detail::t_cache = detail::CacheLine{comm, entry, epoch};
  return entry;
}

void attach(MPI_Comm comm, CommEntry* entry) {
  PMPI_Comm_set_attr(comm, g_commKeyval, entry);
  g_epoch.fetch_add(1, std::memory_order_acq_rel);
}

void registerRouted(CommEntry* entry) {
  std::lock_guard lock(g_routedMutex);
  g_routed.push_back(entry);
}

void markInternal(MPI_Comm comm) {
  if (comm == MPI_COMM_NULL || !active()) return;
  attach(comm, &internalEntry());
}

int reportError(MPI_Comm comm, const char* call, const std::exception& e) {
  int rank = -1;
  PMPI_Comm_rank(comm, &rank);
  std::fprintf(stderr, "boostcomm_mpi: rank %d: %s through boostcomm failed: %s\n", rank, call, e.what());
  PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);
  return MPI_ERR_OTHER;
}

}  // namespace boostcomm::interposer
