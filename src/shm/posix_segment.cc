#include "shm/posix_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <vector>

#include "core/check.h"

namespace boostcomm::shm {

namespace posix {

int createExclusive(const std::string& name, std::size_t bytes) {
  // O_EXCL with O_CREAT fails on any existing name, a symbolic link
  // included (it is never followed); O_NOFOLLOW says so once more.
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, S_IRUSR | S_IWUSR);
  if (fd < 0) return -1;
  // The umask can only clear bits of 0600, but make the mode exact anyway.
  if (fchmod(fd, S_IRUSR | S_IWUSR) != 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int err = errno;
    close(fd);
    shm_unlink(name.c_str());  // ours: created above
    errno = err;
    return -1;
  }
  return fd;
}

int openChecked(const std::string& name, std::size_t bytes) {
  const int fd = shm_open(name.c_str(), O_RDWR | O_NOFOLLOW, 0);
  if (fd < 0) return -1;
  struct stat st {};
  int err = 0;
  if (fstat(fd, &st) != 0) {
    err = errno;
  } else if (!S_ISREG(st.st_mode) || st.st_size != static_cast<off_t>(bytes)) {
    err = EINVAL;
  } else if (st.st_uid != geteuid() || (st.st_mode & 07777) != (S_IRUSR | S_IWUSR)) {
    err = EPERM;
  }
  if (err != 0) {
    close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

}  // namespace posix

namespace {

constexpr std::size_t kNameBytes = 120;
// Broadcast from rank 0: its errno (0: created) and the object's name.
struct Announcement {
  std::int32_t error = 0;
  char name[kNameBytes] = {};
};

std::size_t pageBytes() {
  const long page = sysconf(_SC_PAGESIZE);
  return page > 0 ? static_cast<std::size_t>(page) : 4096;
}

std::string errorText(int err) { return std::strerror(err); }

}  // namespace

std::string PosixSegment::uniqueName() {
  static std::atomic<std::uint64_t> counter{0};
  std::random_device random;
  const std::uint64_t bits = (static_cast<std::uint64_t>(random()) << 32) ^ random();
  std::ostringstream name;
  name << "/boostcomm-" << geteuid() << "-" << getpid() << "-" << std::hex << bits << "-" << std::dec
       << counter.fetch_add(1);
  return name.str();
}

PosixSegment::PosixSegment(transport::Transport& control, std::size_t bytesPerRank, const std::string& name)
    : SharedSegment(control.rank(), bytesPerRank) {
  const int size = control.size();
  const std::size_t page = pageBytes();
  const std::size_t stride = std::max<std::size_t>((bytesPerRank + page - 1) / page * page, page);
  BC_INVALID(bytesPerRank <= static_cast<std::size_t>(PTRDIFF_MAX) / static_cast<std::size_t>(size) / 2, rank_,
             "shared segment of " << bytesPerRank << " bytes per rank is too large");
  mapBytes_ = stride * static_cast<std::size_t>(size);

  Announcement note;
  int fd = -1;
  if (rank_ == 0) {
    const std::string chosen = name.empty() ? uniqueName() : name;
    if (chosen.size() >= kNameBytes || chosen[0] != '/') {
      note.error = EINVAL;  // raised on every rank below, like any other failure
      std::memcpy(note.name, chosen.c_str(), std::min(chosen.size(), kNameBytes - 1));
    } else {
      std::memcpy(note.name, chosen.c_str(), chosen.size());
      fd = posix::createExclusive(chosen, mapBytes_);
      if (fd < 0) note.error = errno;
    }
  }
  // Even a failed creation is announced: every rank raises together below.
  control.nativeBroadcast(&note, sizeof note, DataType::kUInt8, 0, nullptr);
  const std::string object(note.name, strnlen(note.name, kNameBytes));

  std::int64_t mine[2] = {0, 0};  // {errno, stage: 1 open, 2 map, 3 reserve}
  if (note.error == 0) {
    if (rank_ != 0) fd = posix::openChecked(object, mapBytes_);
    if (fd < 0) {
      mine[0] = errno;
      mine[1] = 1;
    } else {
      // Each rank reserves its own part's pages (placed on its NUMA node), so
      // a full /dev/shm is an error here, on every rank, instead of a SIGBUS
      // at the first touch of a page that cannot be backed. A filesystem that
      // cannot reserve (EOPNOTSUPP, EINVAL) leaves the pages to first touch.
      // tmpfs gives up with EINTR when a signal arrives (a DataLoader's
      // SIGCHLD) and starts over: a few tries, then it is this rank's error.
      int reserved = EINTR;
      for (int attempt = 0; attempt < 8 && reserved == EINTR; ++attempt) {
        reserved = posix_fallocate(fd, static_cast<off_t>(stride * static_cast<std::size_t>(rank_)),
                                   static_cast<off_t>(stride));
      }
      void* p = mmap(nullptr, mapBytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (reserved != 0 && reserved != EOPNOTSUPP && reserved != EINVAL) {
        mine[0] = reserved;
        mine[1] = 3;
      } else if (p == MAP_FAILED) {
        mine[0] = errno;
        mine[1] = 2;
      }
      if (p != MAP_FAILED) map_ = p;
      close(fd);  // the mapping keeps the object
    }
  }
  std::vector<std::int64_t> all(2 * static_cast<std::size_t>(size));
  std::vector<int> counts(static_cast<std::size_t>(size), 2);
  std::vector<int> displs(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) displs[static_cast<std::size_t>(r)] = 2 * r;
  try {
    control.nativeAllgatherv(mine, 2, all.data(), counts.data(), displs.data(), DataType::kInt64, nullptr);
  } catch (...) {
    if (rank_ == 0 && note.error == 0) shm_unlink(object.c_str());
    if (map_) munmap(map_, mapBytes_);
    throw;
  }
  // Every rank has mapped it (or given up): the name has served its purpose.
  if (rank_ == 0 && note.error == 0) shm_unlink(object.c_str());

  if (note.error != 0) {
    core::raise(ErrorCategory::kTransport, rank_,
                "shared memory: rank 0 could not create POSIX shared-memory object '" + object +
                    "' (shm_open O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600: " + errorText(note.error) +
                    "); an existing object or link of that name is never reused");
  }
  for (int r = 0; r < size; ++r) {
    const std::int64_t err = all[2 * static_cast<std::size_t>(r)];
    if (err == 0) continue;
    if (map_) munmap(map_, mapBytes_);
    map_ = nullptr;
    const std::int64_t stage = all[2 * static_cast<std::size_t>(r) + 1];
    const bool opening = stage == 1;
    core::raise(ErrorCategory::kTransport, rank_,
                "shared memory: rank " + std::to_string(r) + " could not " +
                    (opening ? "open" : stage == 2 ? "map" : "reserve its part of") +
                    " POSIX shared-memory object '" + object + "' of " + std::to_string(mapBytes_) +
                    " bytes (" + errorText(static_cast<int>(err)) +
                    (opening ? "; it must be this user's, mode 0600, not a link)" : ")"));
  }
  bases_.resize(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) {
    bases_[static_cast<std::size_t>(r)] = static_cast<char*>(map_) + stride * static_cast<std::size_t>(r);
  }
}

PosixSegment::~PosixSegment() {
  if (map_) munmap(map_, mapBytes_);
}

SegmentFactory PosixSegment::factory(transport::Transport& control) {
  return [&control](std::size_t bytesPerRank) -> std::unique_ptr<SharedSegment> {
    return std::make_unique<PosixSegment>(control, bytesPerRank);
  };
}

}  // namespace boostcomm::shm
