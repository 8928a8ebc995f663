#include "shm/cma.h"

#include <sys/uio.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <vector>

#include "core/check.h"

namespace boostcomm::shm {
namespace {

// process_vm_readv takes at most IOV_MAX (1024 on Linux) iovecs per side.
constexpr std::size_t kMaxIov = 1024;

}  // namespace

bool cmaTryRead(pid_t pid, void* local, const void* remote, std::size_t bytes) {
  iovec l{local, bytes};
  iovec r{const_cast<void*>(remote), bytes};
  return process_vm_readv(pid, &l, 1, &r, 1, 0) == static_cast<ssize_t>(bytes);
}

void cmaRead(pid_t pid, const core::Operand& local, const core::Operand& remote, std::size_t bytes, int rank) {
  thread_local std::vector<iovec> l, r;
  l.clear();
  r.clear();
  std::size_t batchBytes = 0;
  auto flush = [&] {
    if (l.empty()) return;
    const ssize_t got = process_vm_readv(pid, l.data(), l.size(), r.data(), r.size(), 0);
    BC_CHECK(got == static_cast<ssize_t>(batchBytes), ErrorCategory::kTransport, rank,
             "shm: process_vm_readv from pid " << pid << " read " << got << " of " << batchBytes
                                               << " bytes: " << std::strerror(errno));
    l.clear();
    r.clear();
    batchBytes = 0;
  };
  const core::Operand ops[2] = {local, remote};
  core::forEachRun(ops, bytes, [&](char* const* p, std::size_t n) {
    l.push_back(iovec{p[0], n});
    r.push_back(iovec{p[1], n});
    batchBytes += n;
    if (l.size() == kMaxIov) flush();
  });
  flush();
}

}  // namespace boostcomm::shm
