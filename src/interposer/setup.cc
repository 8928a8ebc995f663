#include "interposer/setup.h"

#include <cstdio>
#include <exception>
#include <memory>

#include "api/mpi_comm.h"
#include "core/tunables.h"
#include "interposer/deferred_setup.h"

namespace boostcomm::interposer {

namespace {

CommEntry* unroutable(MPI_Comm comm, Reason reason, int rank, int size) {
  auto* entry = new CommEntry;
  entry->kind = CommKind::kUnroutable;
  entry->reason = reason;
  entry->rank = rank;
  entry->size = size;
  attach(comm, entry);
  return entry;
}

// The checks every set-up starts with, all local and alike on every rank:
// null when comm can be routed (rank and size filled in), else its entry.
CommEntry* unroutableEntry(MPI_Comm comm, int& rank, int& size) {
  int inter = 0;
  PMPI_Comm_test_inter(comm, &inter);
  if (inter) return unroutable(comm, Reason::kIntercomm, 0, 1);
  PMPI_Comm_rank(comm, &rank);
  PMPI_Comm_size(comm, &size);
  if (size == 1) return unroutable(comm, Reason::kSingleRank, rank, size);
  return nullptr;
}

}  // namespace

bool buildRouted(CommEntry& entry, MPI_Comm over, bool reserved) {
  std::shared_ptr<Communicator> created;
  int ok = 1;
  try {
    created = reserved ? boostcomm::detail::createCommunicatorOverReservedMpi(over)
                       : boostcomm::detail::createCommunicatorOverMpi(over);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "boostcomm_mpi: rank %d: no boostcomm communicator (calls go to PMPI): %s\n", entry.rank,
                 e.what());
    ok = 0;
  }
  int all = 0;
  PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, over);
  if (!all) {
    // Another rank failed: ours must not tear down collectively without it,
    // so it is left unfinalized (a leak on a path that should not happen).
    if (created) new std::shared_ptr<Communicator>(std::move(created));
    return false;
  }
  entry.comm = std::move(created);
  // The communicator's own route table: payloads its selection sends to
  // the backend's collective by default (a prefix of its map).
  for (Collective coll : {Collective::kAllreduce, Collective::kAllgather, Collective::kBroadcast,
                          Collective::kReduceScatter}) {
    entry.nativeUpTo[static_cast<std::size_t>(coll)] = boostcomm::detail::backendUpTo(*entry.comm, coll).value_or(0);
  }
  entry.nativeBarrier = boostcomm::detail::backendUpTo(*entry.comm, Collective::kBarrier).has_value();
  return true;
}

void reserve(MPI_Comm comm) {
  if (comm == MPI_COMM_NULL || !active() || !settings().nonblocking) return;
  Guard guard;
  int rank = 0, size = 1;
  if (unroutableEntry(comm, rank, size)) return;
  auto* entry = new CommEntry;
  entry->kind = CommKind::kFresh;
  entry->rank = rank;
  entry->size = size;
  // The conditions of a set-up that creates no communicator: shared memory
  // wanted (the same environment everywhere) and every rank on this node.
  bool wanted = false;
  try {
    wanted = core::tunableBool(core::kTunableShm);
  } catch (const std::exception&) {
    // A bad value: boostcomm reports it where it sets the communicator up.
  }
  if (wanted) {
    MPI_Comm node = MPI_COMM_NULL;
    int nodeSize = 0;
    PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    PMPI_Comm_size(node, &nodeSize);
    PMPI_Comm_free(&node);
    if (nodeSize == size && PMPI_Comm_dup(comm, &entry->reserved) == MPI_SUCCESS) {
      // boostcomm checks every return code on it (an MPI transport's own communicator).
      PMPI_Comm_set_errhandler(entry->reserved, MPI_ERRORS_RETURN);
    }
  }
  attach(comm, entry);
}

CommEntry& entryForBlocking(MPI_Comm comm) {
  CommEntry* entry = lookup(comm);
  if (entry != nullptr && entry->kind != CommKind::kFresh) return *entry;
  Guard guard;
  const bool fresh = entry != nullptr;
  if (fresh) {
    // Set up here instead: its reservation is not needed (every rank of comm is in this call).
    if (entry->reserved != MPI_COMM_NULL) PMPI_Comm_free(&entry->reserved);
  } else {
    int rank = 0, size = 1;
    if (CommEntry* other = unroutableEntry(comm, rank, size)) return *other;
    entry = new CommEntry;
    entry->rank = rank;
    entry->size = size;
  }
  if (!buildRouted(*entry, comm, false)) {
    entry->kind = CommKind::kUnroutable;
    entry->reason = Reason::kCreateFailed;
  } else {
    entry->kind = CommKind::kRouted;
    registerRouted(entry);
  }
  if (!fresh) attach(comm, entry);
  return *entry;
}

CommEntry* entryForNonblocking(MPI_Comm comm) {
  CommEntry* entry = lookup(comm);
  if (entry == nullptr) {
    // Never seen (MPI_COMM_SELF, an intercommunicator, a cartesian one ...):
    // what can be told locally is told now (INTERCOMM, SINGLE_RANK); the
    // rest waits for a blocking call.
    Guard guard;
    int rank = 0, size = 1;
    return unroutableEntry(comm, rank, size);
  }
  if (entry->kind != CommKind::kFresh) return entry;
  if (entry->reserved == MPI_COMM_NULL) return nullptr;
  entry->kind = CommKind::kRouted;
  entry->shortcut = false;
  entry->deferred = std::make_unique<DeferredSetup>(*entry);
  registerRouted(entry);
  return entry;
}

}  // namespace boostcomm::interposer
