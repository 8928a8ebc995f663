// The c10d backend's side of the flight recorder's Python stacks
// (python/src/caller_stack.h): the capture of the boostcomm module, reached
// through its capsule so that both modules share one table of code objects.
#pragma once

#include "core/caller_stack.h"

namespace boostcomm::python {

// At module import, GIL held: fetches boostcomm._boostcomm._caller_capture.
void importCallerCapture();

// torch calls a process group with the GIL released. In a thread that runs
// Python (it has a thread state), this takes the GIL for the capture, a few
// hundred ns when no other Python thread holds it; then as CallerScope: the
// stack is bound to the calls started in the scope, and cleared at its end.
// Threads without Python (the progress thread's callbacks) capture nothing.
class C10dCallerScope {
 public:
  C10dCallerScope();
  ~C10dCallerScope() { core::pendingCallerStack().depth = 0; }
  C10dCallerScope(const C10dCallerScope&) = delete;
  C10dCallerScope& operator=(const C10dCallerScope&) = delete;
};

}  // namespace boostcomm::python
