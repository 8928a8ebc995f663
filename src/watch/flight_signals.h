// Flight-recorder dumps on signals (docs/RELIABILITY.md).
//
//   SIGUSR1 (on demand; mpirun forwards it to every rank): the handler only
//     sets a flag; the watchdog's next tick (<= 0.5 s) writes every live
//     communicator's next dump (rank-N.json, rank-N.K.json) with reason "signal".
//   SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT (fatal): the handler writes the
//     dumps itself, async-signal-safely (StallInspector::dumpFlightFromSignal:
//     atomic loads, a static buffer, open/write/close), then restores the
//     handler that was there before and raises the signal again, so the
//     process ends as it would have (core dump, Open MPI's backtrace, ...).
// Installed at the first communicator, only when BOOSTCOMM_TRACE_DIR is set
// (a dump needs a place); SIGUSR1 only where its action is still the
// default (which would kill the process), so an application's own handler
// stays.
#pragma once

namespace boostcomm::detail {

class StallInspector;

void installFlightSignals();
// Inspectors the fatal handler dumps (lock-free slots; a handful per process).
void registerForSignals(StallInspector* inspector);
void unregisterForSignals(StallInspector* inspector);
// The watchdog: true once after each SIGUSR1.
bool takeDumpRequest();

}  // namespace boostcomm::detail
