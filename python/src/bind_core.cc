// Communicator, Work, topology and strategy bindings.
//
// Every collective takes Python objects, turns them into views (views.h,
// no copy) with the GIL held, then releases the GIL for the call itself so
// other Python threads (and the c10d backend's callbacks) keep running.
#include <pybind11/chrono.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "bindings.h"
#include "caller_stack.h"
#include "boostcomm/communicator.h"
#include "boostcomm/topology.h"
#include "boostcomm/version.h"
#include "core/check.h"
#include "core/wire.h"
#include "runtime.h"
#include "views.h"

namespace py = pybind11;

namespace boostcomm::python {

ReduceOp reduceOpFromName(const std::string& name, int rank) {
  const auto op = parseReduceOp(name);
  BC_INVALID(op.has_value(), rank, "op: unknown reduce op '" << name << "'; valid: sum, avg, min, max, prod");
  return *op;
}

namespace {

using CommPtr = std::shared_ptr<Communicator>;

// An asynchronous collective: the boostcomm Work plus the Python objects
// whose memory it reads and writes, kept alive until it completes.
struct PyWork {
  Work work;
  std::vector<py::object> keepAlive;

  bool test() {
    const bool done = work.test();
    if (done) keepAlive.clear();
    return done;
  }
  void wait(std::optional<double> timeoutSeconds) {
    std::optional<std::chrono::milliseconds> timeout;
    if (timeoutSeconds) timeout = std::chrono::milliseconds(static_cast<long long>(*timeoutSeconds * 1e3));
    {
      py::gil_scoped_release release;
      work.wait(timeout);
    }
    keepAlive.clear();
  }
};

py::dict linkLevelDict(const LinkLevelStats& l) {
  py::dict d;
  d["bytes"] = l.bytes;
  d["observed_bytes"] = l.observedBytes;
  d["modelled_bytes"] = l.modelledBytes;
  d["messages"] = l.messages;
  d["collectives"] = l.collectives;
  d["busy_seconds"] = l.busySeconds;
  return d;
}

CallOptions callOptions(const std::optional<std::string>& algorithm) {
  CallOptions options;
  if (algorithm) options.algorithm = *algorithm;
  return options;
}

WireFormat wireFromName(const std::string& wire, int rank) {
  const auto parsed = parseWireFormat(wire);
  BC_INVALID(parsed.has_value(), rank, "wire: unknown '" << wire << "'; valid: off, bf16, fp16, auto");
  return *parsed;
}

// Options of a call that may carry a wire (allreduce, allgather,
// reduce_scatter): algorithm and, when given, the per-call wire format.
CallOptions wireOptions(const std::optional<std::string>& algorithm, const std::optional<std::string>& wire,
                             int rank) {
  CallOptions options = callOptions(algorithm);
  if (wire) options.wire = wireFromName(*wire, rank);
  return options;
}

// A Python list of tensors as segment views, and the objects owning their memory.
struct ListRef {
  std::vector<View> views;
  std::vector<py::object> owners;
};
ListRef listOf(Communicator& c, py::sequence tensors, const char* name = "tensors", bool writable = true) {
  ListRef out;
  std::size_t i = 0;
  for (py::handle t : tensors) {
    const std::string what = std::string(name) + "[" + std::to_string(i++) + "]";
    ArrayRef ref = toArray(t, what.c_str(), c.rank(), writable);
    out.views.push_back(ref.view);
    out.owners.push_back(ref.owner);
  }
  return out;
}

// Runs `blocking` without the GIL, or starts `async` and wraps its Work.
template <typename Blocking, typename Async>
py::object dispatch(bool asyncOp, std::vector<py::object> keepAlive, Blocking blocking, Async async) {
  const CallerScope caller;  // the flight recorder's Python stack of the call
  if (!asyncOp) {
    py::gil_scoped_release release;
    blocking();
    return py::none();
  }
  Work work;
  {
    py::gil_scoped_release release;
    work = async();
  }
  return py::cast(PyWork{std::move(work), std::move(keepAlive)});
}

// send and recv as views; recv aliases send when both are the same object.
struct SendRecv {
  ArrayRef send;
  ArrayRef recv;
};
SendRecv sendRecv(Communicator& comm, py::handle send, py::handle recv) {
  SendRecv io;
  const bool inPlace = send.is(recv);
  io.send = toArray(send, inPlace ? "tensor" : "input", comm.rank(), inPlace);
  io.recv = inPlace ? io.send : toArray(recv, "output", comm.rank(), true);
  return io;
}

void bindCommunicator(py::module_& m) {
  py::class_<PyWork>(m, "Work", "Handle of an asynchronous collective (async_op=True).")
      .def("test", &PyWork::test, "Progress; True when complete (raises the operation's error).")
      .def("wait", &PyWork::wait, py::arg("timeout") = py::none(),
           "Block until complete; timeout in seconds (raises boostcomm.TimeoutError).")
      .def_property_readonly("algorithm", [](const PyWork& w) { return std::string(w.work.algorithm()); })
      .def_property_readonly("wire_format", [](const PyWork& w) { return std::string(toString(w.work.wireFormat())); },
                             "How the float32 payload travelled: 'off', 'bf16' or 'fp16'.")
      .def(
          "on_complete",
          [](PyWork& w, py::function callback) {
            // The callback runs on the thread that retires the operation
            // (the progress thread, or a caller inside the communicator),
            // which holds no GIL: take it there. It gets None or the error
            // message. The Python objects the call uses stay alive until then.
            auto state = std::make_shared<std::pair<py::function, std::vector<py::object>>>(
                std::move(callback), std::move(w.keepAlive));
            w.keepAlive.clear();
            py::gil_scoped_release release;  // the callback may run at once, on this thread
            w.work.onComplete([state](std::exception_ptr error) {
              py::gil_scoped_acquire acquire;
              py::object message = py::none();
              if (error) {
                try {
                  std::rethrow_exception(error);
                } catch (const std::exception& e) {
                  message = py::str(e.what());
                } catch (...) {
                  message = py::str("unknown error");
                }
              }
              try {
                state->first(message);
              } catch (py::error_already_set& e) {
                e.discard_as_unraisable("boostcomm Work.on_complete callback");
              }
              state->first = py::function();  // release the Python objects with the GIL held
              state->second.clear();
            });
          },
          py::arg("callback"),
          "Call callback(error) once when the operation completes: error is None, or its message. Runs on the "
          "thread that completes it (see Communicator.use_progress_thread); keep it short.");

  py::class_<Communicator, CommPtr>(m, "Communicator")
      .def_static(
          "world",
          [] {
            ensureMpi();
            py::gil_scoped_release release;  // collective: MPI_Comm_dup, shared-memory attach
            return Communicator::createMpiWorld();
          },
          "A communicator over MPI_COMM_WORLD (collective).")
      .def_property_readonly("rank", &Communicator::rank)
      .def_property_readonly("size", &Communicator::size)
      .def(
          "all_reduce",
          [](Communicator& c, py::handle send, py::handle recv, const std::string& op,
             std::optional<std::string> algorithm, bool asyncOp, std::optional<std::string> wire) {
            SendRecv io = sendRecv(c, send, recv);
            const ReduceOp rop = reduceOpFromName(op, c.rank());
            const CallOptions o = wireOptions(algorithm, wire, c.rank());
            return dispatch(
                asyncOp, {io.send.owner, io.recv.owner}, [&] { c.allreduce(io.send.view, io.recv.view, rop, o); },
                [&] { return c.allreduceAsync(io.send.view, io.recv.view, rop, o); });
          },
          py::arg("input"), py::arg("output"), py::arg("op") = "sum", py::arg("algorithm") = py::none(),
          py::arg("async_op") = false, py::arg("wire") = py::none(),
          "wire: this call's wire format (off, bf16, fp16, auto; None: the communicator's).")
      .def(
          "all_reduce_many",
          [](Communicator& c, py::sequence tensors, const std::string& op, std::optional<std::string> algorithm,
             bool asyncOp, std::optional<std::string> wire) {
            ListRef l = listOf(c, tensors);
            const ReduceOp rop = reduceOpFromName(op, c.rank());
            const CallOptions o = wireOptions(algorithm, wire, c.rank());
            return dispatch(
                asyncOp, std::move(l.owners), [&] { c.allreduceMany(l.views, rop, o); },
                [&] { return c.allreduceManyAsync(l.views, rop, o); });
          },
          py::arg("tensors"), py::arg("op") = "sum", py::arg("algorithm") = py::none(), py::arg("async_op") = false,
          py::arg("wire") = py::none(),
          "One allreduce over a list of tensors, in place, without packing them (one dtype).")
      .def(
          "broadcast_many",
          [](Communicator& c, py::sequence tensors, int root, std::optional<std::string> algorithm, bool asyncOp) {
            ListRef l = listOf(c, tensors);
            const CallOptions o = callOptions(algorithm);
            return dispatch(
                asyncOp, std::move(l.owners), [&] { c.broadcastMany(l.views, root, o); },
                [&] { return c.broadcastManyAsync(l.views, root, o); });
          },
          py::arg("tensors"), py::arg("root") = 0, py::arg("algorithm") = py::none(), py::arg("async_op") = false,
          "One broadcast of a list of tensors from root, in place (one dtype).")
      .def(
          "all_gather_many",
          [](Communicator& c, py::sequence inputs, py::sequence outputs, std::optional<std::string> algorithm,
             bool asyncOp, std::optional<std::string> wire) {
            ListRef in = listOf(c, inputs, "inputs", false);
            ListRef out = listOf(c, outputs, "outputs");
            const std::vector<ConstView> send(in.views.begin(), in.views.end());
            const CallOptions o = wireOptions(algorithm, wire, c.rank());
            in.owners.insert(in.owners.end(), out.owners.begin(), out.owners.end());
            return dispatch(
                asyncOp, std::move(in.owners), [&] { c.allgatherMany(send, out.views, o); },
                [&] { return c.allgatherManyAsync(send, out.views, o); });
          },
          py::arg("inputs"), py::arg("outputs"), py::arg("algorithm") = py::none(), py::arg("async_op") = false,
          py::arg("wire") = py::none(),
          "outputs[i] (world_size x inputs[i]) = every rank's inputs[i] in rank order, as one allgather of the lists.")
      .def(
          "reduce_scatter_many",
          [](Communicator& c, py::sequence inputs, py::sequence outputs, const std::string& op,
             std::optional<std::string> algorithm, bool asyncOp, std::optional<std::string> wire) {
            ListRef in = listOf(c, inputs, "inputs", false);
            ListRef out = listOf(c, outputs, "outputs");
            const std::vector<ConstView> send(in.views.begin(), in.views.end());
            const ReduceOp rop = reduceOpFromName(op, c.rank());
            const CallOptions o = wireOptions(algorithm, wire, c.rank());
            in.owners.insert(in.owners.end(), out.owners.begin(), out.owners.end());
            return dispatch(
                asyncOp, std::move(in.owners), [&] { c.reduceScatterMany(send, out.views, rop, o); },
                [&] { return c.reduceScatterManyAsync(send, out.views, rop, o); });
          },
          py::arg("inputs"), py::arg("outputs"), py::arg("op") = "sum", py::arg("algorithm") = py::none(),
          py::arg("async_op") = false, py::arg("wire") = py::none(),
          "outputs[i] = block `rank` of op over ranks of inputs[i] (world_size x outputs[i]), as one reduce_scatter.")
      .def(
          "all_gather",
          [](Communicator& c, py::handle send, py::handle recv, std::optional<std::string> algorithm, bool asyncOp,
             std::optional<std::string> wire) {
            SendRecv io = sendRecv(c, send, recv);
            const CallOptions o = wireOptions(algorithm, wire, c.rank());
            return dispatch(
                asyncOp, {io.send.owner, io.recv.owner}, [&] { c.allgather(io.send.view, io.recv.view, o); },
                [&] { return c.allgatherAsync(io.send.view, io.recv.view, o); });
          },
          py::arg("input"), py::arg("output"), py::arg("algorithm") = py::none(), py::arg("async_op") = false,
          py::arg("wire") = py::none())
      .def(
          "broadcast",
          [](Communicator& c, py::handle buffer, int root, std::optional<std::string> algorithm, bool asyncOp) {
            ArrayRef b = toArray(buffer, "tensor", c.rank(), true);
            const CallOptions o = callOptions(algorithm);
            return dispatch(
                asyncOp, {b.owner}, [&] { c.broadcast(b.view, root, o); },
                [&] { return c.broadcastAsync(b.view, root, o); });
          },
          py::arg("tensor"), py::arg("root") = 0, py::arg("algorithm") = py::none(), py::arg("async_op") = false)
      .def(
          "reduce_scatter",
          [](Communicator& c, py::handle send, py::handle recv, const std::string& op,
             std::optional<std::string> algorithm, bool asyncOp, std::optional<std::string> wire) {
            SendRecv io = sendRecv(c, send, recv);
            const ReduceOp rop = reduceOpFromName(op, c.rank());
            const CallOptions o = wireOptions(algorithm, wire, c.rank());
            return dispatch(
                asyncOp, {io.send.owner, io.recv.owner},
                [&] { c.reduceScatter(io.send.view, io.recv.view, rop, o); },
                [&] { return c.reduceScatterAsync(io.send.view, io.recv.view, rop, o); });
          },
          py::arg("input"), py::arg("output"), py::arg("op") = "sum", py::arg("algorithm") = py::none(),
          py::arg("async_op") = false, py::arg("wire") = py::none())
      .def(
          "barrier",
          [](Communicator& c, bool asyncOp) {
            return dispatch(
                asyncOp, {}, [&] { c.barrier(); }, [&] { return c.barrierAsync(); });
          },
          py::arg("async_op") = false)
      .def(
          "configure_comm_strategy",
          [](Communicator& c, const std::string& strategy, const std::string& intra, const std::string& inter,
             const std::string& algorithm) {
            const auto parsed = parseStrategy(strategy);
            BC_INVALID(parsed.has_value(), c.rank(),
                       "strategy: unknown strategy '" << strategy << "'; valid: flat, topology_aware, auto");
            CommStrategy s;
            s.strategy = *parsed;
            s.intraAlgorithm = intra;
            s.interAlgorithm = inter;
            s.collectiveAlgorithm = algorithm;
            py::gil_scoped_release release;
            c.configureCommStrategy(s);
          },
          py::arg("strategy"), py::arg("intra_algorithm"), py::arg("inter_algorithm"),
          py::arg("collective_algorithm"))
      .def_property_readonly("node_layout", &Communicator::nodeLayout)
      .def_property_readonly("has_shared_memory", &Communicator::hasSharedMemory)
      .def(
          "link_stats",
          [](Communicator& c, bool reset) {
            const LinkStats s = c.linkStats(reset);
            return py::dict(py::arg("enabled") = s.enabled, py::arg("node") = s.node,
                            py::arg("intra_node") = linkLevelDict(s.intraNode),
                            py::arg("inter_node") = linkLevelDict(s.interNode),
                            py::arg("inter_node_intervals") = s.interNodeIntervalsNs.size(),
                            py::arg("dropped_intervals") = s.droppedIntervals);
          },
          py::arg("reset") = false)
      .def(
          "node_link_stats",
          [](Communicator& c, bool reset) {
            std::vector<NodeLinkStats> nodes;
            {
              py::gil_scoped_release release;
              nodes = nodeLinkStats(c, reset);
            }
            py::list out;
            for (const NodeLinkStats& n : nodes) {
              py::dict inter = linkLevelDict(n.interNode);
              inter["congested_seconds"] = n.interCongestedSeconds;
              out.append(py::dict(py::arg("node") = n.node, py::arg("ranks") = n.ranks,
                                  py::arg("intra_node") = linkLevelDict(n.intraNode), py::arg("inter_node") = inter));
            }
            return out;
          },
          py::arg("reset") = false)
      .def(
          "algorithms",
          [](const Communicator& c, const std::string& coll) {
            const auto parsed = parseCollective(coll);
            BC_INVALID(parsed.has_value(), c.rank(),
                       "collective: unknown '" << coll
                                               << "'; valid: allreduce, allgather, broadcast, reduce_scatter, barrier");
            return c.algorithms(*parsed);
          },
          py::arg("collective"))
      .def(
          "selected_algorithm",
          [](const Communicator& c, const std::string& coll, std::size_t bytes) {
            const auto parsed = parseCollective(coll);
            BC_INVALID(parsed.has_value(), c.rank(), "collective: unknown '" << coll << "'");
            return c.selectedAlgorithm(*parsed, bytes);
          },
          py::arg("collective"), py::arg("bytes"))
      .def(
          "set_wire_format",
          [](Communicator& c, const std::string& wire) {
            const WireFormat parsed = wireFromName(wire, c.rank());
            py::gil_scoped_release release;  // collective: the ranks compare their values
            c.setWireFormat(parsed);
          },
          py::arg("wire"),
          "Wire format of float32 allreduce, allgather and reduce_scatter (collective; docs/ALGORITHMS.md 'Wire "
          "formats'): off, bf16, fp16, auto.")
      .def_property_readonly("wire_format", [](const Communicator& c) { return std::string(toString(c.wireFormat())); })
      .def("flight_record", [](const Communicator& c) { return c.flightRecord(); },
           "This rank's flight recorder as JSON text (docs/RELIABILITY.md): its recent collectives, each with "
           "the Python stack that called it (\"python_stack\", innermost frame first).")
      .def(
          "wire_format_of",
          [](const Communicator& c, std::size_t bytes, std::optional<std::string> wire,
             std::optional<std::string> algorithm) {
            const CallOptions o = wireOptions(algorithm, wire, c.rank());
            return std::string(toString(c.wireFormatOf(bytes, DataType::kFloat32, o)));
          },
          py::arg("bytes"), py::arg("wire") = py::none(), py::arg("algorithm") = py::none(),
          "How a float32 allreduce of `bytes` travels ('off', 'bf16' or 'fp16'), with these call options.")
      .def(
          "use_progress_thread",
          [](Communicator& c) {
            py::gil_scoped_release release;
            c.useProgressThread();
          },
          "Progress asynchronous calls in the background (BOOSTCOMM_PROGRESS=auto starts the thread now), so "
          "on_complete callbacks run without test()/wait().")
      .def("finalize",
           [](Communicator& c) {
             py::gil_scoped_release release;
             c.finalize();
           })
      .def_property_readonly("finalized", &Communicator::finalized);
}

void bindTopology(py::module_& m) {
  py::class_<LinkModel>(m, "LinkModel")
      .def_readonly("latency_us", &LinkModel::latencyUs)
      .def_readonly("bandwidth_gbps", &LinkModel::bandwidthGBps)
      .def_readonly("hops", &LinkModel::hops)
      .def_readonly("measured", &LinkModel::measured);
  py::class_<Topology>(m, "Topology")
      .def_readonly("world_size", &Topology::worldSize)
      .def_readonly("nodes", &Topology::nodes)
      .def_readonly("ranks_per_node", &Topology::ranksPerNode)
      .def_readonly("node_of_rank", &Topology::nodeOfRank)
      .def_readonly("local_rank_of_rank", &Topology::localRankOfRank)
      .def_readonly("hostnames", &Topology::hostnames)
      .def_readonly("sockets", &Topology::sockets)
      .def_readonly("numa_nodes", &Topology::numaNodes)
      .def_readonly("cores", &Topology::cores)
      .def_readonly("intra_node", &Topology::intraNode)
      .def_readonly("inter_node", &Topology::interNode)
      .def_readonly("layout_source", &Topology::layoutSource)
      .def("to_json", [](const Topology& t) { return topologyToJson(t); });
  m.def(
      "detect_topology",
      [](Communicator& c, bool probe) {
        DetectOptions options;
        options.probe = probe;
        py::gil_scoped_release release;
        return detectTopology(c, options);
      },
      py::arg("comm"), py::arg("probe") = true);
}

}  // namespace

void bindCore(py::module_& m) {
  m.attr("__version__") = versionString();
  m.def("ensure_mpi", &ensureMpi, "Initialise MPI unless already initialised; returns the thread level.");
  m.def("launcher_rank", &launcherRank);
  m.def("launcher_size", &launcherSize);
  m.def("finalize_mpi_if_ours", &finalizeMpiIfOurs);
  m.def("mpi_initialized_here", &mpiInitializedHere);
  m.def(
      "ranks_that_failed",
      [](bool ok) {
        py::gil_scoped_release release;
        return ranksThatFailed(ok);
      },
      py::arg("ok"), "Collective over MPI_COMM_WORLD: the ranks that passed ok=False.");
  m.def(
      "broadcast_text",
      [](const std::string& text) {
        py::gil_scoped_release release;
        return broadcastText(text);
      },
      py::arg("text"), "Collective over MPI_COMM_WORLD: rank 0's text on every rank.");
  m.def("supported_dtypes", &supportedDataTypes);
  m.def(
      "round_through_wire",
      [](py::handle array, const std::string& wire) {
        // What error feedback needs: the array as one wire message decodes
        // (one fp16 scale for the whole array; bf16 is elementwise).
        const WireFormat format = wireFromName(wire, launcherRank());
        BC_INVALID(format != WireFormat::kAuto, launcherRank(), "round_through_wire: wire must be off, bf16 or fp16");
        ArrayRef a = toArray(array, "array", launcherRank(), true);
        BC_INVALID(a.view.dtype == DataType::kFloat32, launcherRank(),
                   "round_through_wire: array must be float32, got " << toString(a.view.dtype));
        if (format == WireFormat::kOff) return;
        py::gil_scoped_release release;
        core::roundThroughWire(format, static_cast<float*>(a.view.data), a.view.count);
      },
      py::arg("array"), py::arg("wire"),
      "array = decode(encode(array)) in place, as one wire message (float32; wire off, bf16 or fp16).");
  bindCommunicator(m);
  bindTopology(m);
}

}  // namespace boostcomm::python
