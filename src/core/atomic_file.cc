#include "core/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/check.h"

namespace boostcomm::core {
namespace {

std::string directoryOf(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

bool writeAll(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

void writeFileAtomically(const std::string& path, const std::string& text, const char* what) {
  BC_INVALID(!path.empty(), -1, what << ": empty file name");
  std::string pattern = path + ".tmp.XXXXXX";
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  const int fd = ::mkstemp(name.data());
  BC_INVALID(fd >= 0, -1, what << ": cannot create a temporary file next to '" << path << "': " << std::strerror(errno));
  // mkstemp creates 0600; make it readable as a file written with the usual
  // umask 022 would be (umask itself cannot be read without setting it, which
  // races with other threads creating files).
  (void)::fchmod(fd, 0644);
  const bool written = writeAll(fd, text) && ::fsync(fd) == 0;
  const int savedErrno = errno;
  const bool closed = ::close(fd) == 0;
  if (!written || !closed) {
    ::unlink(name.data());
    BC_INVALID(false, -1, what << ": writing '" << name.data() << "' failed: " << std::strerror(written ? errno : savedErrno));
  }
  if (::rename(name.data(), path.c_str()) != 0) {
    const int renameErrno = errno;
    ::unlink(name.data());
    BC_INVALID(false, -1, what << ": cannot rename '" << name.data() << "' to '" << path << "': " << std::strerror(renameErrno));
  }
  // Best effort: some file systems refuse to open or sync a directory.
  const int dir = ::open(directoryOf(path).c_str(), O_RDONLY | O_DIRECTORY);
  if (dir >= 0) {
    (void)::fsync(dir);
    ::close(dir);
  }
}

}  // namespace boostcomm::core
