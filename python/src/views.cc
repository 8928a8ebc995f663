#include "views.h"

#include <pybind11/buffer_info.h>

#include <sstream>
#include <string>

#include "core/check.h"

namespace py = pybind11;

namespace boostcomm::python {
namespace {

constexpr DataType kAllTypes[] = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16,
                                  DataType::kInt32,   DataType::kInt64,   DataType::kUInt8};

bool isTorchTensor(py::handle obj) {
  // torch.Tensor and its subclasses (nn.Parameter); checked by attributes so
  // this module does not import torch.
  return py::hasattr(obj, "data_ptr") && py::hasattr(obj, "is_contiguous") && py::hasattr(obj, "dtype") &&
         py::hasattr(obj, "device");
}

std::vector<std::int64_t> torchShape(py::handle tensor) {
  std::vector<std::int64_t> shape;
  for (py::handle d : tensor.attr("shape")) shape.push_back(d.cast<std::int64_t>());
  return shape;
}

ArrayRef fromTensor(py::handle tensor, const char* what, int rank) {
  const std::string device = py::str(tensor.attr("device").attr("type"));
  BC_INVALID(device == "cpu", rank,
             what << ": tensor is on device '" << device << "'; this build of boostcomm supports: cpu");
  BC_INVALID(tensor.attr("is_contiguous")().cast<bool>(), rank,
             what << ": tensor is not contiguous (strides " << std::string(py::str(tensor.attr("stride")()))
                  << "); call .contiguous() first (boostcomm works on the tensor's memory in place)");
  const std::string dtypeName = py::str(tensor.attr("dtype"));
  ArrayRef ref;
  ref.view.dtype = dataTypeFromName(dtypeName, what, rank);
  ref.view.count = tensor.attr("numel")().cast<std::size_t>();
  ref.view.data = reinterpret_cast<void*>(tensor.attr("data_ptr")().cast<std::uintptr_t>());
  ref.shape = torchShape(tensor);
  ref.owner = py::reinterpret_borrow<py::object>(tensor);
  return ref;
}

// Buffer-protocol format -> DataType by kind and item size ('l' is 8 bytes
// on LP64, 4 on Windows; the size decides).
std::optional<DataType> fromFormat(std::string format, std::size_t itemBytes) {
  while (!format.empty() && (format[0] == '@' || format[0] == '=' || format[0] == '<' || format[0] == '!')) {
    format.erase(0, 1);
  }
  if (format.size() != 1) return std::nullopt;
  switch (format[0]) {
    case 'f': return itemBytes == 4 ? std::optional(DataType::kFloat32) : std::nullopt;
    case 'd': return itemBytes == 8 ? std::optional(DataType::kFloat64) : std::nullopt;
    case 'e': return itemBytes == 2 ? std::optional(DataType::kFloat16) : std::nullopt;
    case 'i': case 'l': case 'q':
      if (itemBytes == 4) return DataType::kInt32;
      if (itemBytes == 8) return DataType::kInt64;
      return std::nullopt;
    case 'B': return itemBytes == 1 ? std::optional(DataType::kUInt8) : std::nullopt;
    default: return std::nullopt;
  }
}

ArrayRef fromBuffer(py::handle obj, const char* what, int rank, bool writable) {
  // buffer_info takes ownership: it releases the buffer and deletes the Py_buffer.
  auto* view = new Py_buffer;
  const int flags = PyBUF_FORMAT | PyBUF_STRIDES | (writable ? PyBUF_WRITABLE : 0);
  if (PyObject_GetBuffer(obj.ptr(), view, flags) != 0) {
    delete view;
    PyErr_Clear();
    const std::string type = py::str(py::type::handle_of(obj).attr("__name__"));
    BC_INVALID(!writable || PyObject_CheckBuffer(obj.ptr()) == 0, rank,
               what << ": the " << type << " is read-only, and this call writes into it");
    BC_INVALID(false, rank,
               what << ": expected a numpy array, a CPU torch tensor or another buffer-protocol object, got "
                    << type);
  }
  py::buffer_info info(view);
  BC_INVALID(!writable || !info.readonly, rank, what << ": the array is read-only, and this call writes into it");
  const auto dtype = fromFormat(info.format, static_cast<std::size_t>(info.itemsize));
  BC_INVALID(dtype.has_value(), rank,
             what << ": unsupported element type (buffer format '" << info.format << "', " << info.itemsize
                  << " bytes); supported: " << supportedDataTypes());
  // C-contiguous: the innermost stride is the item size, each outer one the
  // product of the inner extents (extents of 1 may carry any stride).
  py::ssize_t expected = info.itemsize;
  for (py::ssize_t d = info.ndim - 1; d >= 0; --d) {
    const auto i = static_cast<std::size_t>(d);
    BC_INVALID(info.shape[i] <= 1 || info.strides[i] == expected, rank,
               what << ": the array is not C-contiguous; use numpy.ascontiguousarray() first");
    expected *= info.shape[i];
  }
  ArrayRef ref;
  ref.view = View(info.ptr, static_cast<std::size_t>(info.size), *dtype);
  ref.shape.assign(info.shape.begin(), info.shape.end());
  ref.owner = py::reinterpret_borrow<py::object>(obj);
  return ref;
}

}  // namespace

std::string supportedDataTypes() {
  std::ostringstream os;
  for (std::size_t i = 0; i < std::size(kAllTypes); ++i) os << (i ? ", " : "") << toString(kAllTypes[i]);
  return os.str();
}

DataType dataTypeFromName(const std::string& name, const char* what, int rank) {
  std::string_view bare = name;
  if (bare.starts_with("torch.")) bare.remove_prefix(6);
  if (bare.starts_with("numpy.")) bare.remove_prefix(6);
  const auto dtype = parseDataType(bare);
  BC_INVALID(dtype.has_value(), rank,
             what << ": unsupported dtype '" << name << "'; supported: " << supportedDataTypes());
  return *dtype;
}

ArrayRef toArray(py::handle obj, const char* what, int rank, bool writable) {
  BC_INVALID(!obj.is_none(), rank, what << ": expected an array or tensor, got None");
  if (isTorchTensor(obj)) return fromTensor(obj, what, rank);
  return fromBuffer(obj, what, rank, writable);
}

}  // namespace boostcomm::python
