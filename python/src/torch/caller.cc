#include "torch/caller.h"

#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace boostcomm::python {

namespace {
using Capture = void (*)(core::CallerStack&);
Capture gCapture = nullptr;
}  // namespace

void importCallerCapture() {
  py::object capsule = py::module_::import("boostcomm._boostcomm").attr("_caller_capture");
  auto* capture = static_cast<Capture*>(PyCapsule_GetPointer(capsule.ptr(), "boostcomm._caller_capture"));
  if (capture == nullptr) throw py::error_already_set();
  gCapture = *capture;
}

C10dCallerScope::C10dCallerScope() {
  core::CallerStack& pending = core::pendingCallerStack();
  pending.depth = 0;
  if (gCapture == nullptr || !Py_IsInitialized() || PyGILState_GetThisThreadState() == nullptr) return;
  const PyGILState_STATE gil = PyGILState_Ensure();  // no-op where this thread holds it
  gCapture(pending);
  PyGILState_Release(gil);
}

}  // namespace boostcomm::python
