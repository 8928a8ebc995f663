// boostcomm._boostcomm_torch: the c10d backend. boostcomm/torch.py registers
// it with torch.distributed under the name "boostcomm".
//
// The class is bound as a subclass of torch's own Backend Python type, which
// only works when this module and torch share pybind11's internals (torch's
// bundled pybind11, the same compiler and C++ ABI: python/CMakeLists.txt).
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/utils/pybind.h>

#include "core/tunables.h"
#include "torch/caller.h"
#include "torch/process_group.h"
#include "torch/store_adapter.h"

namespace py = pybind11;
using boostcomm::python::ProcessGroupBoostcomm;

PYBIND11_MODULE(_boostcomm_torch, m) {
  m.doc() = "boostcomm c10d backend (use `import boostcomm.torch`)";
  // torch registers ProcessGroup's Python type when torch.distributed loads.
  py::module_::import("torch.distributed");
  boostcomm::python::importCallerCapture();  // the flight recorder's Python stacks (torch/caller.h)

  m.def(
      "store_communicator",
      [](c10::intrusive_ptr<c10d::Store> store, std::string where, int rank, int size,
         std::chrono::milliseconds timeout) {
        auto kv = std::make_shared<boostcomm::python::C10dStore>(std::move(store), std::move(where));
        py::gil_scoped_release release;  // collective: waits on the other ranks through the store
        return boostcomm::Communicator::createFromStore(std::move(kv), rank, size, timeout);
      },
      py::arg("store"), py::arg("where"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
      "A communicator over `size` processes that rendezvous through a c10d Store (Gloo TCP transport).");
  m.def(
      "torch_transport", [] { return std::string(boostcomm::core::tunableEnum(boostcomm::core::kTunableTorchTransport)); },
      "BOOSTCOMM_TORCH_TRANSPORT, validated: auto, mpi or store.");

  py::class_<ProcessGroupBoostcomm, c10d::Backend, c10::intrusive_ptr<ProcessGroupBoostcomm>>(m, "ProcessGroupBoostcomm")
      .def(py::init([](std::shared_ptr<boostcomm::Communicator> comm, int rank, int size,
                       std::chrono::milliseconds timeout) {
             py::gil_scoped_release release;
             return c10::make_intrusive<ProcessGroupBoostcomm>(std::move(comm), rank, size, timeout);
           }),
           py::arg("comm"), py::arg("rank"), py::arg("size"), py::arg("timeout"))
      .def(
          "_configure_overlap",
          // stages bounds the OverlapEngine's buckets in flight; the process
          // group launches every op at once (the communicator caps in-flight
          // operations by its tag windows).
          [](ProcessGroupBoostcomm& pg, bool enable, int /*stages*/) { pg.setAsync(enable); },
          py::arg("enable"), py::arg("stages"))
      .def(
          "_set_wire",
          [](ProcessGroupBoostcomm& pg, const std::string& wire, bool errorFeedback) {
            const auto format = boostcomm::parseWireFormat(wire);
            TORCH_CHECK(format.has_value(), "boostcomm: set_wire: wire must be off, bf16, fp16 or auto, got '", wire,
                        "'");
            py::gil_scoped_release release;  // collective
            pg.setWire(*format, errorFeedback);
          },
          py::arg("wire"), py::arg("error_feedback"))
      .def("_wire", [](ProcessGroupBoostcomm& pg) {
        return py::make_tuple(std::string(boostcomm::toString(pg.wire())), pg.errorFeedback());
      })
      .def(
          "_wire_counts",
          [](ProcessGroupBoostcomm& pg, bool reset) {
            const auto c = pg.wireCounts(reset);
            py::dict d;
            d["off"] = c[0];
            d["bf16"] = c[1];
            d["fp16"] = c[2];
            return d;
          },
          py::arg("reset") = false)
      .def("_flight_record", [](const ProcessGroupBoostcomm& pg) { return pg.flightRecord(); },
           "The group's flight recorder as JSON text, with each op's Python stack (docs/RELIABILITY.md).")
      .def("_overlap_enabled", [](ProcessGroupBoostcomm& pg) { return pg.async(); })
      .def(
          "_overlap_counters",
          [](ProcessGroupBoostcomm& pg, bool reset) {
            const auto c = pg.overlapTotals(reset);
            py::dict d;
            d["comm_seconds"] = c.commSeconds;
            d["hidden_seconds"] = c.hiddenSeconds;
            d["exposed_seconds"] = c.exposedSeconds;
            d["ops"] = c.ops;
            d["busy_periods"] = c.busyPeriods;
            return d;
          },
          py::arg("reset") = false)
      .def("_abort", [](ProcessGroupBoostcomm& pg) {
        py::gil_scoped_release release;
        pg.abort();
      }, "Abandons this rank's ops in flight (they fail at once) and refuses new ones; local.")
      .def("_shutdown", [](ProcessGroupBoostcomm& pg) {
        py::gil_scoped_release release;
        pg.shutdown();
      });
}
