// Names the calling thread for the kernel (/proc/<pid>/task/<tid>/comm, top -H,
// gdb, perf): boostcomm's threads are called "bc-<role>", so per-thread CPU
// accounting (examples/python/ddp_benchmark.py) can tell them from the
// framework's and the backend's. Linux keeps 15 characters; longer names are cut.
#pragma once

#include <pthread.h>

#include <string>

namespace boostcomm::core {

inline void nameThisThread(const char* name) {
  std::string cut(name);
  if (cut.size() > 15) cut.resize(15);
  pthread_setname_np(pthread_self(), cut.c_str());
}

}  // namespace boostcomm::core
