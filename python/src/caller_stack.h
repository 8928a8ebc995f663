// The Python stack of each collective, for the flight recorder
// (core/caller_stack.h: the core keeps opaque frame words per call; this
// layer makes and reads them).
//
// Cost per call (innermost BOOSTCOMM_PYTHON_STACK_FRAMES frames, default 8):
// per frame a PyFrame_GetBack/GetCode pair (reference counts, and a frame
// object the first time a frame is looked at), PyFrame_GetLasti (an
// instruction offset, not a line: the line table is walked only when a dump
// is written), and a lookup of the code object in a small direct-mapped
// cache. Code objects are interned once (file and qualified name as UTF-8,
// one reference kept for the life of the process) so that a dump needs no
// GIL: the watchdog thread writes it while Python may hold the GIL or be
// blocked in the collective. docs/RELIABILITY.md has the measured cost.
#pragma once

#include <pybind11/pybind11.h>

#include "core/caller_stack.h"

namespace boostcomm::python {

// Fills `out` with this thread's Python stack (GIL held). depth 0 when off.
void captureCallerStack(core::CallerStack& out);

// In a binding, GIL held, before it releases the GIL for a collective: the
// call's stack becomes this thread's pending caller stack, which the
// library binds to the call's flight entry; cleared when the scope ends
// (a call that never started leaves nothing behind for the next one).
class CallerScope {
 public:
  CallerScope() { captureCallerStack(core::pendingCallerStack()); }
  ~CallerScope() { core::pendingCallerStack().depth = 0; }
  CallerScope(const CallerScope&) = delete;
  CallerScope& operator=(const CallerScope&) = delete;
};

// Installs the formatter and publishes captureCallerStack as the capsule
// `_caller_capture` (for the c10d module, which must use the same interned
// code table).
void bindCallerStack(pybind11::module_& m);

}  // namespace boostcomm::python
