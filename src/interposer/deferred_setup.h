// A communicator set up for boostcomm at its first intercepted collective
// when that call is nonblocking: without blocking it, and so that every rank
// still routes every call alike.
//
// Why in the background. Ranks may legally start nonblocking collectives on
// two communicators in opposite orders (or a nonblocking one here, a
// blocking one there); a set-up that blocked inside the first call (it is
// collective) would wait for a rank that waits elsewhere. So the first call
// starts a thread for it and returns. That thread's collectives run over a
// communicator of boostcomm's own, which no application call can match.
//
// Why over a communicator reserved at creation. The set-up must create no
// MPI communicator: Open MPI 4.1 allocates context ids one at a time per
// process (comm_cid.c: the pending allocation with the lowest parent id goes
// first, the others wait until it completes), so a creation waiting for
// peers that have not made their first call yet blocks this rank's own
// MPI_Comm_dup / split on a newer communicator, and a peer may be waiting
// in exactly that for us (an MPI_Comm_idup at the first call hung
// test_nonblocking_first's mixed orders so). Hence (setup.cc, reserve):
//  1. inside the blocking call that created the communicator (MPI_Init for
//     MPI_COMM_WORLD, MPI_Comm_dup / split / create ...), where every rank of
//     it is: a duplicate, reserved, if every rank is on this node and
//     BOOSTCOMM_SHM is on;
//  2. at the first call, on a thread of its own: the boostcomm Communicator
//     over the reserved duplicate itself, shared memory on a POSIX segment
//     (createCommunicatorOverReservedMpi), and the agreement (buildRouted).
//     One thread per communicator: set-ups never wait for each other, and
//     no rank's application thread waits for any of them outside a call
//     that needs every rank of that communicator anyway.
//
// Routing meanwhile. Every call decides from its arguments alone, as
// always, whether it is routable; a routable call made while the set-up runs
// gets its request at once and queues; the set-up's thread launches the
// queue in call order once it is done, and later calls launch directly.
// Every rank therefore sends the same calls to boostcomm in the same order,
// whenever its own set-up ends. Two things could differ across ranks and
// are kept out:
//  - the native shortcut (PMPI on the application's communicator for sizes
//    boostcomm's selection gives to MPI): it applies only from the first
//    blocking call on the communicator, which waits for the set-up, so every
//    rank turns it on at the same call. Until then those sizes go through
//    boostcomm, whose selection runs MPI's algorithm on its own duplicate.
//  - a failed set-up (the agreement says some rank could not): the queued
//    calls run as their PMPI call on the reserved duplicate, and so does
//    every later routable call (reason CREATE_FAILED), because a rank that
//    queued more calls than another must find them matched there.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "interposer/requests.h"
#include "interposer/state.h"

namespace boostcomm::interposer {

class DeferredSetup {
 public:
  enum class State : unsigned char { kRunning, kReady, kFailed };

  // Takes the entry's reserved communicator and starts step 2.
  explicit DeferredSetup(CommEntry& entry);
  ~DeferredSetup();
  DeferredSetup(const DeferredSetup&) = delete;
  DeferredSetup& operator=(const DeferredSetup&) = delete;

  bool ready() const { return state_.load(std::memory_order_acquire) == State::kReady; }
  // A routable nonblocking call. While the set-up runs, starts its request
  // and queues it (kRunning); otherwise leaves it to the caller: kReady,
  // launch it; kFailed, run pending.pmpi on fallbackComm().
  State enqueue(const std::shared_ptr<Pending>& pending);
  // For a blocking call: waits until the set-up ended.
  State wait();
  // The reserved communicator, once the set-up failed.
  MPI_Comm fallbackComm() const { return reserved_; }
  // The entry's teardown: join() before finalizing its Communicator (which
  // runs over the reserved communicator), freeReserved() after.
  void join();
  void freeReserved();

 private:
  void run(CommEntry* entry);

  std::mutex mutex_;  // queue_ and the end of the set-up
  std::condition_variable ended_;
  std::atomic<State> state_{State::kRunning};
  std::vector<std::shared_ptr<Pending>> queue_;
  MPI_Comm reserved_ = MPI_COMM_NULL;
  std::thread thread_;
};

// For a blocking call on an entry set up in the background: waits for the
// set-up; if it succeeded, turns the native shortcut on (every rank does so
// at this same call) and returns MPI_COMM_NULL; if it failed, returns the
// reserved communicator that routable calls go to.
MPI_Comm settleForBlocking(CommEntry& entry);

}  // namespace boostcomm::interposer
