// boostcomm._boostcomm: the compiled half of the `boostcomm` Python package
// (the documented API is boostcomm/__init__.py, which wraps this module).
#include <pybind11/pybind11.h>

#include "bindings.h"
#include "boostcomm/version.h"
#include "caller_stack.h"
#include "runtime.h"

PYBIND11_MODULE(_boostcomm, m) {
  m.doc() = "boostcomm native module (use the `boostcomm` package instead)";
  boostcomm::python::registerErrors(m);
  boostcomm::python::bindCore(m);
  boostcomm::python::bindExtras(m);
  boostcomm::python::bindCallerStack(m);
}
