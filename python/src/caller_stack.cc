#include "caller_stack.h"

#include <Python.h>
#include <frameobject.h>

#include <array>
#include <chrono>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "core/tunables.h"

namespace py = pybind11;

namespace boostcomm::python {

namespace {

// An interned code object: id i (1-based) is gCodes[i - 1]. Written once
// (GIL held), published by gCodeCount (release); read without the GIL.
struct CodeInfo {
  PyCodeObject* code = nullptr;  // one reference, never released
  std::string file;
  std::string name;
};
// Distinct code objects that issue collectives: a handful of call sites in
// a training script; beyond this many (exec'd code in a loop), frames are "?".
constexpr std::uint32_t kMaxCodes = 1 << 14;
std::unique_ptr<CodeInfo[]> gCodes{new CodeInfo[kMaxCodes]};
std::atomic<std::uint32_t> gCodeCount{0};
std::unordered_map<const PyCodeObject*, std::uint32_t> gCodeIds;  // GIL held
// In front of gCodeIds: the same code objects come back call after call.
struct CacheSlot {
  const PyCodeObject* code = nullptr;
  std::uint32_t id = 0;
};
std::array<CacheSlot, 256> gCache;  // GIL held

std::string utf8(PyObject* text) {
  if (text == nullptr || !PyUnicode_Check(text)) return "?";
  const char* s = PyUnicode_AsUTF8(text);
  if (s == nullptr) {
    PyErr_Clear();
    return "?";
  }
  return s;
}

std::uint32_t codeId(PyCodeObject* code) {
  CacheSlot& slot = gCache[(reinterpret_cast<std::uintptr_t>(code) >> 4) % gCache.size()];
  if (slot.code == code) return slot.id;
  std::uint32_t id = 0;
  auto it = gCodeIds.find(code);
  if (it != gCodeIds.end()) {
    id = it->second;
  } else {
    const std::uint32_t n = gCodeCount.load(std::memory_order_relaxed);
    if (n == kMaxCodes) return 0;
    Py_INCREF(code);  // kept: its pointer is the key, and a dump reads its line table
    gCodes[n] = CodeInfo{code, utf8(code->co_filename), utf8(code->co_qualname)};
    gCodeCount.store(n + 1, std::memory_order_release);
    id = n + 1;
    gCodeIds.emplace(code, id);
  }
  slot = CacheSlot{code, id};
  return id;
}

std::uint32_t configuredDepth() {
  static const std::uint32_t depth =
      static_cast<std::uint32_t>(core::tunableInt(core::kTunablePythonStackFrames));
  return depth;
}

// Text of each frame: "path/file.py:12 in train_step". Not async-signal-safe
// (allocates); no GIL: the interned strings and the code's line table
// (PyCode_Addr2Line walks immutable bytes) are all it reads.
void formatStack(const core::CallerStack& stack, std::vector<std::string>& out) {
  const std::uint32_t known = gCodeCount.load(std::memory_order_acquire);
  for (std::uint32_t i = 0; i < stack.depth; ++i) {
    const auto id = static_cast<std::uint32_t>(stack.frames[i] >> 32);
    const auto offset = static_cast<int>(static_cast<std::uint32_t>(stack.frames[i]));
    if (id == 0 || id > known) {
      out.emplace_back("?");
      continue;
    }
    const CodeInfo& c = gCodes[id - 1];
    out.push_back(c.file + ":" + std::to_string(PyCode_Addr2Line(c.code, offset)) + " in " + c.name);
  }
}

}  // namespace

void captureCallerStack(core::CallerStack& out) {
  out.depth = 0;
  const std::uint32_t depth = configuredDepth();
  if (depth == 0) return;
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed; null outside Python code
  Py_XINCREF(frame);
  while (frame != nullptr && out.depth < depth) {
    PyCodeObject* code = PyFrame_GetCode(frame);  // new reference
    const std::uint32_t id = codeId(code);
    Py_DECREF(code);
    const int lasti = PyFrame_GetLasti(frame);
    out.frames[out.depth++] = static_cast<std::uint64_t>(id) << 32 | static_cast<std::uint32_t>(lasti < 0 ? 0 : lasti);
    PyFrameObject* back = PyFrame_GetBack(frame);  // new reference
    Py_DECREF(frame);
    frame = back;
  }
  Py_XDECREF(frame);
}

void bindCallerStack(py::module_& m) {
  core::setCallerFormatter(&formatStack);
  using Capture = void (*)(core::CallerStack&);
  static Capture capture = &captureCallerStack;
  m.attr("_caller_capture") = py::capsule(reinterpret_cast<void*>(&capture), "boostcomm._caller_capture");
  // scripts/python_stack_cost.py: ns per capture of the caller's stack, alone.
  m.def("_caller_capture_ns", [](int calls) {
    core::CallerStack stack;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) captureCallerStack(stack);
    const std::chrono::duration<double, std::nano> took = std::chrono::steady_clock::now() - start;
    return calls > 0 ? took.count() / calls : 0.0;
  });
}

}  // namespace boostcomm::python
