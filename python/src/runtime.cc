#include "runtime.h"

#include <mpi.h>

#include <mutex>
#include <string>

#include "boostcomm/error.h"
#include "core/check.h"

namespace py = pybind11;

namespace boostcomm::python {
namespace {

std::mutex g_mutex;
bool g_initializedHere = false;
// The module's own control-plane communicator (a dup of MPI_COMM_WORLD, made
// on first use, which is collective anyway): argument agreement and
// rendezvous never match the application's own MPI_COMM_WORLD traffic.
MPI_Comm g_control = MPI_COMM_NULL;

void checkMpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  throw Error(ErrorCategory::kTransport, -1, std::string(what) + " failed: " + std::string(text, length));
}

bool isFinalized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

}  // namespace

int ensureMpi() {
  std::lock_guard lock(g_mutex);
  int initialized = 0;
  checkMpi(MPI_Initialized(&initialized), "MPI_Initialized");
  BC_CHECK(!isFinalized(), ErrorCategory::kFinalized, -1,
           "MPI was already finalized in this process (by boostcomm at exit, or by another MPI user)");
  if (!initialized) {
    int provided = MPI_THREAD_SINGLE;
    checkMpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
    g_initializedHere = true;
  }
  int level = MPI_THREAD_SINGLE;
  checkMpi(MPI_Query_thread(&level), "MPI_Query_thread");
  return level;
}

int launcherRank() {
  ensureMpi();
  int rank = 0;
  checkMpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
  return rank;
}

int launcherSize() {
  ensureMpi();
  int size = 0;
  checkMpi(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
  return size;
}

MPI_Comm controlComm() {
  ensureMpi();
  std::lock_guard lock(g_mutex);
  if (g_control == MPI_COMM_NULL) checkMpi(MPI_Comm_dup(MPI_COMM_WORLD, &g_control), "MPI_Comm_dup(control)");
  return g_control;
}

bool finalizeMpiIfOurs() {
  std::lock_guard lock(g_mutex);
  if (isFinalized()) return false;
  if (g_control != MPI_COMM_NULL) {
    MPI_Comm_free(&g_control);
    g_control = MPI_COMM_NULL;
  }
  if (!g_initializedHere) return false;
  checkMpi(MPI_Finalize(), "MPI_Finalize");
  return true;
}

bool mpiInitializedHere() {
  std::lock_guard lock(g_mutex);
  return g_initializedHere;
}

std::vector<int> ranksThatFailed(bool ok) {
  const int size = launcherSize();
  std::vector<int> flags(static_cast<std::size_t>(size), 0);
  int mine = ok ? 0 : 1;
  checkMpi(MPI_Allgather(&mine, 1, MPI_INT, flags.data(), 1, MPI_INT, controlComm()), "MPI_Allgather(argument check)");
  std::vector<int> failed;
  for (int r = 0; r < size; ++r) {
    if (flags[static_cast<std::size_t>(r)] != 0) failed.push_back(r);
  }
  return failed;
}

std::string broadcastText(const std::string& text) {
  MPI_Comm comm = controlComm();
  long long length = static_cast<long long>(text.size());
  checkMpi(MPI_Bcast(&length, 1, MPI_LONG_LONG, 0, comm), "MPI_Bcast(length)");
  std::string out = text;
  out.resize(static_cast<std::size_t>(length));
  checkMpi(MPI_Bcast(out.data(), static_cast<int>(length), MPI_CHAR, 0, comm), "MPI_Bcast(text)");
  return out;
}

void registerErrors(py::module_& m) {
  // boostcomm.Error is a RuntimeError; the categories that have a natural
  // builtin counterpart also derive from it, so `except ValueError` and
  // `except TimeoutError` work as Python users expect.
  // Leaked on purpose: a static py::object would be released after the
  // interpreter is gone.
  struct Types {
    py::object base, invalid, mismatch, timeout, finalized;
  };
  static Types& t = *new Types;
  py::object& base = t.base;
  py::object& invalid = t.invalid;
  py::object& mismatch = t.mismatch;
  py::object& timeout = t.timeout;
  py::object& finalized = t.finalized;
  base = py::reinterpret_steal<py::object>(
      PyErr_NewExceptionWithDoc("boostcomm.Error", "A boostcomm failure; .category and .rank say what and where.",
                                PyExc_RuntimeError, nullptr));
  auto sub = [&](const char* name, PyObject* builtin) {
    py::tuple bases = builtin ? py::tuple(py::make_tuple(base, py::handle(builtin))) : py::tuple(py::make_tuple(base));
    return py::reinterpret_steal<py::object>(PyErr_NewException(name, bases.ptr(), nullptr));
  };
  invalid = sub("boostcomm.InvalidArgumentError", PyExc_ValueError);
  mismatch = sub("boostcomm.MismatchError", nullptr);
  timeout = sub("boostcomm.TimeoutError", PyExc_TimeoutError);
  finalized = sub("boostcomm.FinalizedError", nullptr);
  m.attr("Error") = base;
  m.attr("InvalidArgumentError") = invalid;
  m.attr("MismatchError") = mismatch;
  m.attr("TimeoutError") = timeout;
  m.attr("FinalizedError") = finalized;

  py::register_exception_translator([](std::exception_ptr p) {
    const Types& types = t;
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      py::object type = types.base;
      switch (e.category()) {
        case ErrorCategory::kInvalidArgument: type = types.invalid; break;
        case ErrorCategory::kMismatch: type = types.mismatch; break;
        case ErrorCategory::kTimeout: type = types.timeout; break;
        case ErrorCategory::kFinalized: type = types.finalized; break;
        case ErrorCategory::kAborted: type = types.finalized; break;  // category "aborted" tells them apart
        default: break;
      }
      py::object instance = type(e.what());
      instance.attr("category") = std::string(toString(e.category()));
      instance.attr("rank") = e.rank();
      instance.attr("detail") = e.detail();
      PyErr_SetObject(type.ptr(), instance.ptr());
    }
  });
}

}  // namespace boostcomm::python
