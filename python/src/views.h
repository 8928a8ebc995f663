// Python objects -> boostcomm views, without copying.
//
// Accepted: anything with the buffer protocol (numpy arrays, bytearray,
// memoryview) and CPU torch tensors (read through data_ptr(); torch tensors
// have no buffer protocol, and torch is not linked into this module, so the
// tensor is inspected through its Python attributes). The memory must be
// C-contiguous; the element type one of boostcomm's DataTypes. Anything else
// is Error{kInvalidArgument} naming the argument, what it got and what is
// supported.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <vector>

#include "boostcomm/buffer.h"

namespace boostcomm::python {

struct ArrayRef {
  View view;
  std::vector<std::int64_t> shape;
  pybind11::object owner;  // keeps the memory alive (buffer exporter or tensor)
};

// `what` names the argument in error messages; `rank` is this process's rank
// (-1 when unknown). writable: the call writes into the memory.
ArrayRef toArray(pybind11::handle obj, const char* what, int rank, bool writable);

// "float32", "torch.float32", "float" ... -> DataType; error listing the names otherwise.
DataType dataTypeFromName(const std::string& name, const char* what, int rank);
// The supported dtype names, for messages: "float32, float64, ...".
std::string supportedDataTypes();

}  // namespace boostcomm::python
