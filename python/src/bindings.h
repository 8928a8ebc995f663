// The pieces of the _boostcomm module, one registration function per file.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "boostcomm/types.h"

namespace boostcomm::python {

void bindCore(pybind11::module_& m);    // bind_core.cc: runtime, Communicator, Work, topology, strategy
void bindExtras(pybind11::module_& m);  // bind_extras.cc: GradientGroup, CollectiveFusion, overlap, tuning

// "sum", "avg" ... -> ReduceOp; error listing the names otherwise.
ReduceOp reduceOpFromName(const std::string& name, int rank);

}  // namespace boostcomm::python
