// SharedSegment over one POSIX shared-memory object (shm_open), for node
// groups that are not an MPI communicator: the store transport (torchrun,
// env://, file://). Gloo's TCP pairs carry the few control words.
//
// Lifecycle, collective over the control transport (every rank on one node):
//   1. rank 0 creates the object under a fresh name (uid, pid, 64 random
//      bits, a counter): O_CREAT | O_EXCL | O_NOFOLLOW, mode 0600 — an
//      existing object or link of that name is refused, never opened or
//      followed — sizes it (zero-filled) and maps it;
//   2. rank 0 broadcasts the name (or its error) over the transport;
//   3. the others open it without O_CREAT, with O_NOFOLLOW, and map it only
//      if it is a regular file of this user, mode 0600, of the agreed size;
//   4. every rank's outcome is allgathered (so a failure is an error on every
//      rank), and rank 0 unlinks the name: from then on only the mappings
//      keep the memory, and nothing is left in /dev/shm when the job ends,
//      however it ends.
// Each rank's part starts on its own page (its first toucher, the owner,
// places it on its NUMA node).
//
// Rejected: memfd_create shared by SCM_RIGHTS over a Unix socket (needs a
// socket rendezvous of its own); pidfd_getfd (needs ptrace rights that
// Yama may deny between torchrun's sibling processes).
#pragma once

#include <string>

#include "shm/segment.h"
#include "transport/transport.h"

namespace boostcomm::shm {

class PosixSegment final : public SharedSegment {
 public:
  // Collective over `control`. name: "/..." to use (tests); empty: a fresh one.
  PosixSegment(transport::Transport& control, std::size_t bytesPerRank, const std::string& name = {});
  ~PosixSegment() override;  // local: unmaps

  // A factory making segments over `control` (which must outlive them).
  static SegmentFactory factory(transport::Transport& control);
  // A fresh object name: unique per user, process and call.
  static std::string uniqueName();

 private:
  void* map_ = nullptr;
  std::size_t mapBytes_ = 0;
};

namespace posix {
// The two halves of the lifecycle above, each returning a descriptor or -1
// with errno set (tests check their refusals directly).
// Creates `name` exclusively, mode 0600, sized to `bytes`.
int createExclusive(const std::string& name, std::size_t bytes);
// Opens an existing `name` only if it is this user's regular file of mode
// 0600 and `bytes` long (EPERM / EINVAL otherwise); never follows a link.
int openChecked(const std::string& name, std::size_t bytes);
}  // namespace posix

}  // namespace boostcomm::shm
