// GradientGroup, CollectiveFusion, OverlapEngine and autotuning bindings.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "bindings.h"
#include "caller_stack.h"
#include "boostcomm/collective_fusion.h"
#include "boostcomm/communicator.h"
#include "boostcomm/gradient_group.h"
#include "boostcomm/overlap.h"
#include "boostcomm/autotune.h"
#include "core/check.h"
#include "views.h"

namespace py = pybind11;

namespace boostcomm::python {
namespace {

std::optional<std::chrono::milliseconds> toTimeout(std::optional<double> seconds) {
  if (!seconds) return std::nullopt;
  return std::chrono::milliseconds(static_cast<long long>(*seconds * 1e3));
}

// The group plus the Python objects whose memory it reads and writes.
struct PyGradientGroup {
  std::unique_ptr<GradientGroup> group;
  std::vector<py::object> owners;
  std::vector<std::vector<std::int64_t>> shapes;
};

// A numpy array over `v` with `owner` (the group's or engine's Python
// object) as its base, so the array keeps it, and the memory, alive. numpy
// has no bfloat16: a bfloat16 tensor shows as its raw uint16 bits (the
// Python layer gives torch callers a bfloat16 tensor over the same memory).
py::array viewArray(py::object owner, const View& v, const std::vector<std::int64_t>& shape) {
  const py::dtype dtype(v.dtype == DataType::kBFloat16 ? std::string("uint16") : std::string(toString(v.dtype)));
  return py::array(dtype, shape, {}, v.data, owner);
}

void bindGradientGroup(py::module_& m) {
  py::class_<PyGradientGroup>(m, "GradientGroup")
      .def(py::init([](Communicator& comm, py::sequence tensors, std::size_t bucketBytes,
                       std::size_t firstBucketBytes, bool average, std::optional<std::string> algorithm,
                       bool bucketView, bool packBuckets) {
             auto out = std::make_unique<PyGradientGroup>();
             std::vector<View> views;
             for (py::handle t : tensors) {
               ArrayRef ref = toArray(t, "tensors[i]", comm.rank(), true);
               views.push_back(ref.view);
               out->shapes.push_back(ref.shape);
               // Bucket view copies the contents once and keeps nothing of the caller's memory.
               if (!bucketView) out->owners.push_back(ref.owner);
             }
             GradientGroupOptions options;
             options.bucketBytes = bucketBytes;
             options.firstBucketBytes = firstBucketBytes;
             options.average = average;
             options.bucketView = bucketView;
             options.packBuckets = packBuckets;
             if (algorithm) options.call.algorithm = *algorithm;
             py::gil_scoped_release release;  // collective (registered buckets)
             out->group = std::make_unique<GradientGroup>(comm, std::move(views), options);
             return out;
           }),
           py::arg("comm"), py::arg("tensors"), py::arg("bucket_bytes") = 0, py::arg("first_bucket_bytes") = 0,
           py::arg("average") = false, py::arg("algorithm") = py::none(), py::arg("bucket_view") = false,
           py::arg("pack_buckets") = false)
      .def(
          "tensor_view",
          [](py::object self, std::size_t i) {
            PyGradientGroup& g = self.cast<PyGradientGroup&>();
            const View v = g.group->tensorView(i);  // checks the index
            return viewArray(self, v, g.shapes[i]);
          },
          py::arg("index"), "Where tensor `index` lives (its bucket slot in bucket-view mode), as a numpy array.")
      .def("all_reduce",
           [](PyGradientGroup& g) {
             const CallerScope caller;  // flight recorder
             py::gil_scoped_release release;
             g.group->allreduce();
           })
      .def("describe", [](PyGradientGroup& g) { return g.group->describe(); })
      .def("__len__", [](PyGradientGroup& g) { return g.group->tensorCount(); })
      .def("stats", [](PyGradientGroup& g) {
        const GradientGroupStats s = g.group->stats();
        py::dict d;
        d["tensors"] = s.tensors;
        d["buckets"] = s.buckets;
        d["collectives_per_step"] = s.collectivesPerStep;
        d["per_tensor_collectives"] = s.perTensorCollectives;
        d["payload_bytes"] = s.payloadBytes;
        d["bucket_bytes"] = s.bucketBytes;
        d["steps"] = s.steps;
        d["collectives_launched"] = s.collectivesLaunched;
        d["bucket_limit_bytes"] = s.bucketLimitBytes;
        return d;
      });
}

struct PyFusion {
  std::unique_ptr<CollectiveFusion> fusion;
  std::vector<py::object> owners;
  int rank = -1;

  std::pair<View, View> io(py::handle send, py::handle recv) {
    const bool inPlace = send.is(recv);
    ArrayRef s = toArray(send, inPlace ? "tensor" : "input", rank, inPlace);
    ArrayRef r = inPlace ? s : toArray(recv, "output", rank, true);
    owners.push_back(s.owner);
    owners.push_back(r.owner);
    return {s.view, r.view};
  }
};

void bindFusion(py::module_& m) {
  py::class_<PyFusion>(m, "CollectiveFusion")
      .def(py::init([](Communicator& comm, bool fuse, std::size_t maxGroupBytes, std::optional<std::string> algorithm) {
             auto out = std::make_unique<PyFusion>();
             CollectiveFusionOptions options;
             options.fuse = fuse;
             options.maxGroupBytes = maxGroupBytes;
             if (algorithm) options.call.algorithm = *algorithm;
             out->fusion = std::make_unique<CollectiveFusion>(comm, options);
             out->rank = comm.rank();
             return out;
           }),
           py::arg("comm"), py::arg("fuse") = true, py::arg("max_group_bytes") = 0, py::arg("algorithm") = py::none())
      .def(
          "allreduce",
          [](PyFusion& f, py::handle send, py::handle recv, const std::string& op) {
            auto [s, r] = f.io(send, recv);
            return f.fusion->allreduce(s, r, reduceOpFromName(op, f.rank));
          },
          py::arg("input"), py::arg("output"), py::arg("op") = "sum")
      .def(
          "allgather",
          [](PyFusion& f, py::handle send, py::handle recv) {
            auto [s, r] = f.io(send, recv);
            return f.fusion->allgather(s, r);
          },
          py::arg("input"), py::arg("output"))
      .def(
          "broadcast",
          [](PyFusion& f, py::handle buffer, int root) {
            ArrayRef b = toArray(buffer, "buffer", f.rank, true);
            f.owners.push_back(b.owner);
            return f.fusion->broadcast(b.view, root);
          },
          py::arg("buffer"), py::arg("root") = 0)
      .def(
          "reduce_scatter",
          [](PyFusion& f, py::handle send, py::handle recv, const std::string& op) {
            auto [s, r] = f.io(send, recv);
            return f.fusion->reduceScatter(s, r, reduceOpFromName(op, f.rank));
          },
          py::arg("input"), py::arg("output"), py::arg("op") = "sum")
      .def("depends_on", [](PyFusion& f, std::size_t later, std::size_t earlier) { f.fusion->dependsOn(later, earlier); },
           py::arg("later"), py::arg("earlier"))
      .def("execute",
           [](PyFusion& f) {
             const CallerScope caller;  // flight recorder
             py::gil_scoped_release release;
             f.fusion->execute();
           })
      .def("describe_plan", [](PyFusion& f) { return f.fusion->describePlan(); })
      .def("stats",
           [](PyFusion& f) {
             const CollectiveFusionStats s = f.fusion->stats();
             py::dict d;
             d["requests"] = s.requests;
             d["launches_before"] = s.launchesBefore;
             d["launches_after"] = s.launchesAfter;
             d["packed_bytes"] = s.packedBytes;
             return d;
           })
      .def("clear", [](PyFusion& f) {
        f.fusion->clear();
        f.owners.clear();
      });
}

struct PyOverlapEngine {
  std::unique_ptr<OverlapEngine> engine;
  std::vector<py::object> owners;
  std::vector<std::vector<std::int64_t>> shapes;  // of the tensors passed in (tensor_view's shape)
};

// tensor_view(i): the slot in bucket-view mode, else the caller's array.
py::array tensorViewArray(py::object self, std::size_t index) {
  auto& e = self.cast<PyOverlapEngine&>();
  const View v = e.engine->tensorView(index);  // checks the index
  return viewArray(self, v, e.shapes[index]);
}

py::dict stepStats(const OverlapStepStats& s) {
  py::dict d;
  d["step_seconds"] = s.stepSeconds;
  d["compute_seconds"] = s.computeSeconds;
  d["comm_seconds"] = s.commSeconds;
  d["exposed_seconds"] = s.exposedSeconds;
  d["hidden_seconds"] = s.hiddenSeconds;
  d["efficiency"] = s.efficiency;
  d["buckets"] = s.buckets;
  d["bytes"] = s.bytes;
  return d;
}

void bindOverlap(py::module_& m) {
  py::class_<PyOverlapEngine>(m, "OverlapEngine")
      .def(py::init([](Communicator& comm, py::sequence names, py::sequence tensors, bool enable, int stages,
                       const std::string& bufferStrategy, std::size_t bucketBytes, std::size_t firstBucketBytes,
                       bool average, std::optional<double> timeoutSeconds, bool bucketView) {
             BC_INVALID(py::len(names) == py::len(tensors), comm.rank(),
                        "names: " << py::len(names) << " names for " << py::len(tensors) << " tensors");
             BC_INVALID(stages >= 1, comm.rank(), "overlap_stages: must be >= 1, got " << stages);
             OverlapOptions options = OverlapOptions::fromEnvironment();
             options.enable = enable;
             options.stages = stages;
             if (bufferStrategy == "segment_list" || bufferStrategy == "list") {
               options.bufferStrategy = BufferStrategy::kSegmentList;
             } else if (bufferStrategy == "ping_pong" || bufferStrategy == "double") {
               options.bufferStrategy = BufferStrategy::kPingPong;
             } else if (bufferStrategy == "single") {
               options.bufferStrategy = BufferStrategy::kSingle;
             } else {
               BC_INVALID(false, comm.rank(),
                          "buffer_strategy: unknown '" << bufferStrategy
                                                             << "'; valid: segment_list (or list), ping_pong (or double), single");
             }
             if (bucketBytes) options.bucketBytes = bucketBytes;
             if (firstBucketBytes) options.firstBucketBytes = firstBucketBytes;
             options.average = average;
             options.timeout = toTimeout(timeoutSeconds);
             options.bucketView = bucketView;
             auto out = std::make_unique<PyOverlapEngine>();
             std::vector<GradientTensor> list;
             for (std::size_t i = 0; i < py::len(tensors); ++i) {
               ArrayRef ref = toArray(tensors[i], "tensors[i]", comm.rank(), true);
               list.push_back(GradientTensor{py::str(names[i]), ref.view});
               out->owners.push_back(ref.owner);
               out->shapes.push_back(ref.shape);
             }
             py::gil_scoped_release release;  // collective
             out->engine = std::make_unique<OverlapEngine>(comm, std::move(list), options);
             return out;
           }),
           py::arg("comm"), py::arg("names"), py::arg("tensors"), py::arg("enable") = true, py::arg("stages") = 2,
           py::arg("buffer_strategy") = "ping_pong", py::arg("bucket_bytes") = 0, py::arg("first_bucket_bytes") = 0,
           py::arg("average") = false, py::arg("timeout") = py::none(), py::arg("bucket_view") = false,
           // The engine refers to the communicator, and tensor_view arrays
           // can keep the engine alive past the caller's own references.
           py::keep_alive<1, 2>())
      .def("tensor_view", &tensorViewArray, py::arg("index"))
      .def("begin_backward", [](PyOverlapEngine& e) { e.engine->beginBackward(); })
      .def("mark_ready", [](PyOverlapEngine& e, std::size_t i) { e.engine->markReady(i); }, py::arg("index"))
      .def("finish_backward",
           [](PyOverlapEngine& e) {
             const CallerScope caller;  // flight recorder
             py::gil_scoped_release release;
             e.engine->finishBackward();
           })
      .def("bucket_count", [](PyOverlapEngine& e) { return e.engine->bucketCount(); })
      .def("describe_buckets", [](PyOverlapEngine& e) { return e.engine->describeBuckets(); })
      .def("stats", [](PyOverlapEngine& e) {
        const OverlapStats s = e.engine->getOverlapStats();
        py::dict d;
        d["steps"] = s.steps;
        d["last"] = stepStats(s.last);
        d["mean"] = stepStats(s.mean);
        return d;
      });
}

void bindTuning(py::module_& m) {
  m.def(
      "reduce_scatter_autotune",
      [](Communicator& comm, py::handle input, py::handle output, const std::string& op, bool autoStrategy) {
        ArrayRef in = toArray(input, "input_tensor", comm.rank(), false);
        ArrayRef out = toArray(output, "output", comm.rank(), true);
        const ReduceOp rop = reduceOpFromName(op, comm.rank());
        AutotuneResult r;
        {
          py::gil_scoped_release release;
          r = reduceScatterAutotune(comm, in.view, out.view, rop, autoStrategy);
        }
        py::dict d;
        d["selected_algorithm"] = r.selectedAlgorithm;
        d["default_algorithm"] = r.defaultAlgorithm;
        d["speedup"] = r.speedup;
        d["from_cache"] = r.fromCache;
        py::list candidates;
        for (const CandidateTime& c : r.entry.candidates) {
          candidates.append(py::make_tuple(c.algorithm, c.timeUs));
        }
        d["candidates_us"] = candidates;
        return d;
      },
      py::arg("comm"), py::arg("input"), py::arg("output"), py::arg("op") = "sum", py::arg("auto_strategy") = true);
}

}  // namespace

void bindExtras(py::module_& m) {
  bindGradientGroup(m);
  bindFusion(m);
  bindOverlap(m);
  bindTuning(m);
}

}  // namespace boostcomm::python
