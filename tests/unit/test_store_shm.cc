// Shared memory under the store transport: the POSIX segment
// (shm/posix_segment.h) — exclusive creation, mode 0600, refusal of an
// existing name or link, unlinked once mapped, nothing left in /dev/shm —
// and the shm engine on it: attached by default on one host, the `shm` and
// `hier` (shm intra-node phase) collectives against a float64 reference at
// 1-4 ranks (threads; hier at 2 x 2 and 2 x 3), odd counts.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "boostcomm/communicator.h"
#include "boostcomm/error.h"
#include "common/store_threads.h"
#include "common/tunable_override.h"
#include "shm/attach.h"
#include "shm/posix_segment.h"
#include "transport/shared_memory.h"

namespace boostcomm::shm {
namespace {

using namespace std::chrono_literals;
using testing::onThreads;

// This process's objects in /dev/shm (their names carry uid and pid).
std::vector<std::string> leftovers() {
  const std::string prefix = "boostcomm-" + std::to_string(geteuid()) + "-" + std::to_string(getpid()) + "-";
  std::vector<std::string> found;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) {
      if (std::string(e->d_name).rfind(prefix, 0) == 0) found.push_back(e->d_name);
    }
    closedir(d);
  }
  return found;
}

bool exists(const std::string& name) {
  struct stat st {};
  return lstat(("/dev/shm" + name).c_str(), &st) == 0;
}

TEST(PosixObject, CreatedExclusivelyWithMode0600AndCheckedOnOpen) {
  const std::string name = PosixSegment::uniqueName();
  const int fd = posix::createExclusive(name, 8192);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  struct stat st {};
  ASSERT_EQ(fstat(fd, &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_uid, geteuid());
  EXPECT_EQ(st.st_size, 8192);
  // A second exclusive creation of the same name is refused.
  errno = 0;
  EXPECT_EQ(posix::createExclusive(name, 8192), -1);
  EXPECT_EQ(errno, EEXIST);
  // Opening checks size and mode.
  const int ok = posix::openChecked(name, 8192);
  EXPECT_GE(ok, 0) << std::strerror(errno);
  if (ok >= 0) close(ok);
  errno = 0;
  EXPECT_EQ(posix::openChecked(name, 4096), -1);
  EXPECT_EQ(errno, EINVAL);
  ASSERT_EQ(fchmod(fd, 0644), 0);
  errno = 0;
  EXPECT_EQ(posix::openChecked(name, 8192), -1);
  EXPECT_EQ(errno, EPERM);
  close(fd);
  ASSERT_EQ(shm_unlink(name.c_str()), 0);
}

TEST(PosixObject, NeverFollowsALink) {
  // A link planted under the name a segment would use: creation refuses it
  // (and leaves its target alone), opening refuses it too.
  const std::string target = PosixSegment::uniqueName();
  const std::string name = PosixSegment::uniqueName();
  const int t = posix::createExclusive(target, 4096);
  ASSERT_GE(t, 0);
  ASSERT_EQ(symlink(("/dev/shm" + target).c_str(), ("/dev/shm" + name).c_str()), 0) << std::strerror(errno);
  errno = 0;
  EXPECT_EQ(posix::createExclusive(name, 1 << 20), -1);
  EXPECT_EQ(errno, EEXIST);
  errno = 0;
  EXPECT_EQ(posix::openChecked(name, 4096), -1);
  EXPECT_EQ(errno, ELOOP);
  struct stat st {};
  ASSERT_EQ(fstat(t, &st), 0);
  EXPECT_EQ(st.st_size, 4096);  // the target was not resized
  close(t);
  unlink(("/dev/shm" + name).c_str());
  shm_unlink(target.c_str());
}

TEST(PosixSegment, EveryRankMapsEveryPartAndTheNameIsGone) {
  for (int n : {1, 2, 3, 4}) {
    auto ts = testing::makeGlooTransports(n);
    const std::string name = PosixSegment::uniqueName();
    const std::size_t bytes = 10000;  // not a multiple of the page
    onThreads(n, [&](int r) {
      transport::Transport& t = *ts[static_cast<std::size_t>(r)];
      PosixSegment seg(t, bytes, name);
      // Unlinked by rank 0 once every rank mapped it (after the
      // constructor's last exchange): gone once every constructor returned.
      t.nativeBarrier(nullptr);
      EXPECT_FALSE(exists(name)) << name;
      for (int q = 0; q < n; ++q) {
        EXPECT_EQ(reinterpret_cast<std::uintptr_t>(seg.base(q)) % kLineBytes, 0u);
        if (q > 0) {
          EXPECT_GE(static_cast<std::size_t>(seg.base(q) - seg.base(q - 1)), bytes);
        }
      }
      for (std::size_t i = 0; i < bytes; ++i) ASSERT_EQ(seg.mine()[i], 0) << "not zero-filled at " << i;
      for (std::size_t i = 0; i < bytes; ++i) seg.mine()[i] = static_cast<char>(r * 37 + i);
      t.nativeBarrier(nullptr);
      for (int q = 0; q < n; ++q) {
        for (std::size_t i = 0; i < bytes; ++i) ASSERT_EQ(seg.base(q)[i], static_cast<char>(q * 37 + i)) << q;
      }
      t.nativeBarrier(nullptr);  // nobody unmaps while a peer still reads
    });
  }
  EXPECT_TRUE(leftovers().empty());
}

TEST(PosixSegment, ExistingNameIsRefusedOnEveryRankAndLeftAlone) {
  const int n = 3;
  auto ts = testing::makeGlooTransports(n);
  const std::string name = PosixSegment::uniqueName();
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "mine", 4), 4);
  std::vector<std::string> errors(n);
  onThreads(n, [&](int r) {
    try {
      PosixSegment seg(*ts[static_cast<std::size_t>(r)], 4096, name);
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::kTransport);
      errors[static_cast<std::size_t>(r)] = e.what();
    }
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_NE(errors[static_cast<std::size_t>(r)].find("could not create POSIX shared-memory object '" + name),
              std::string::npos)
        << "rank " << r << ": " << errors[static_cast<std::size_t>(r)];
    EXPECT_NE(errors[static_cast<std::size_t>(r)].find("File exists"), std::string::npos);
  }
  // Somebody else's object: still there, untouched.
  struct stat st {};
  ASSERT_EQ(fstat(fd, &st), 0);
  EXPECT_EQ(st.st_size, 4);
  EXPECT_TRUE(exists(name));
  close(fd);
  shm_unlink(name.c_str());
}

TEST(StoreShm, AttachedToSplitsOfOneHost) {
  // What ensureSubCommunicators does for hier's intra-node level.
  const int n = 4;
  auto ts = testing::makeGlooTransports(n);
  onThreads(n, [&](int r) {
    auto sub = ts[static_cast<std::size_t>(r)]->split(r / 2, r);
    ASSERT_NE(sub, nullptr);
    attachSharedMemory(*sub);
    EXPECT_NE(sub->sharedMemory(), nullptr) << "rank " << r;
  });
  EXPECT_TRUE(leftovers().empty());
}

// The engine's doorbell (core/doorbell.h): a rank asleep on its bell while
// it waits on a peer is woken by that peer's progress, not by a timeout.
// Deterministic: rank 1 starts only after rank 0 read its bell.
TEST(StoreShm, APeersProgressRingsTheBellOfARankWaitingOnIt) {
  const int n = 2;
  auto ts = testing::makeGlooTransports(n);
  std::mutex m;
  std::condition_variable cv;
  bool asleep = false;
  onThreads(n, [&](int r) {
    transport::Transport& t = *ts[static_cast<std::size_t>(r)];
    attachSharedMemory(t);
    transport::SharedMemoryEngine* engine = t.sharedMemory();
    ASSERT_NE(engine, nullptr);
    ASSERT_NE(engine->doorbell(), nullptr);
    std::vector<float> x(100000, static_cast<float>(r + 1));
    transport::SharedMemoryCall call;
    call.send = x.data();
    call.recv = x.data();
    call.count = x.size();
    transport::Request req;
    if (r == 0) {
      core::Doorbell& bell = *engine->doorbell();
      const std::uint32_t seen = bell.value();
      engine->start(call, req);
      EXPECT_FALSE(engine->test(req)) << "rank 1 has not started";
      {
        std::lock_guard<std::mutex> lock(m);
        asleep = true;
      }
      cv.notify_all();
      const auto start = std::chrono::steady_clock::now();
      bell.sleep(seen, std::chrono::seconds(60));
      EXPECT_LT(std::chrono::steady_clock::now() - start, 30s) << "slept to the timeout: nobody rang";
      EXPECT_NE(bell.value(), seen);
    } else {
      std::unique_lock<std::mutex> lock(m);
      ASSERT_TRUE(cv.wait_for(lock, 30s, [&] { return asleep; }));
      lock.unlock();
      engine->start(call, req);
    }
    while (!engine->test(req)) std::this_thread::yield();
    for (float v : x) ASSERT_EQ(v, 3.0f);
  });
  EXPECT_TRUE(leftovers().empty());
}

TEST(StoreShm, OffWhenDisabled) {
  const testing::TunableOverride off(core::kTunableShm, "0");
  const int n = 2;
  auto store = std::make_shared<testing::MemoryStore>();
  onThreads(n, [&](int r) {
    auto comm = Communicator::createFromStore(store, r, n, 30s);
    EXPECT_NE(comm->selectedAlgorithm(Collective::kAllreduce, 1 << 20), "shm");
    comm->finalize();
  });
}

// Inputs whose float32 sum is exact (small integers), so the float64
// reference must match bit for bit on every rank.
float valueOf(int rank, std::size_t i) { return static_cast<float>((i * 13 + static_cast<std::size_t>(rank) * 5) % 17); }

void checkCollectives(Communicator& comm, int r, int n, const char* algo) {
  for (std::size_t count : {1, 7, 1001, 65537, 300001}) {
    CallOptions o;
    o.algorithm = algo;
    std::vector<float> x(count);
    for (std::size_t i = 0; i < count; ++i) x[i] = valueOf(r, i);
    comm.allreduce(View(x.data(), count, DataType::kFloat32), View(x.data(), count, DataType::kFloat32),
                   ReduceOp::kSum, o);
    for (std::size_t i = 0; i < count; ++i) {
      double ref = 0;
      for (int q = 0; q < n; ++q) ref += static_cast<double>(valueOf(q, i));
      ASSERT_EQ(static_cast<double>(x[i]), ref) << "allreduce " << algo << " n " << n << " count " << count << " i " << i;
    }
    std::vector<float> all(count * static_cast<std::size_t>(n), -1.0f);
    std::vector<float> mine(count);
    for (std::size_t i = 0; i < count; ++i) mine[i] = valueOf(r, i);
    comm.allgather(ConstView(mine.data(), count, DataType::kFloat32), View(all.data(), all.size(), DataType::kFloat32),
                   o);
    for (int q = 0; q < n; ++q) {
      for (std::size_t i = 0; i < count; ++i) {
        ASSERT_EQ(all[static_cast<std::size_t>(q) * count + i], valueOf(q, i)) << "allgather " << algo << " n " << n;
      }
    }
    const int root = n - 1;
    std::vector<double> b(count);
    for (std::size_t i = 0; i < count; ++i) b[i] = r == root ? 0.5 * static_cast<double>(i) : -1.0;
    comm.broadcast(View(b.data(), count, DataType::kFloat64), root, o);
    for (std::size_t i = 0; i < count; ++i) ASSERT_EQ(b[i], 0.5 * static_cast<double>(i)) << "broadcast " << algo;
    std::vector<float> send(count * static_cast<std::size_t>(n)), recv(count, -1.0f);
    for (std::size_t i = 0; i < send.size(); ++i) send[i] = valueOf(r, i);
    comm.reduceScatter(ConstView(send.data(), send.size(), DataType::kFloat32),
                       View(recv.data(), count, DataType::kFloat32), ReduceOp::kSum, o);
    for (std::size_t i = 0; i < count; ++i) {
      double ref = 0;
      for (int q = 0; q < n; ++q) ref += static_cast<double>(valueOf(q, static_cast<std::size_t>(r) * count + i));
      ASSERT_EQ(static_cast<double>(recv[i]), ref) << "reduce_scatter " << algo << " n " << n << " count " << count;
    }
  }
}

// The progress thread alone completes shared-memory work whose peer comes
// late: nobody waits in a call (completion is seen through onComplete), so
// rank 0's thread sleeps on its doorbell until rank 1's engine rings it.
// A lost ring would still end each sleep at its 2 ms bound; the 60 s bound
// below catches a thread that stopped progressing altogether.
TEST(StoreShm, TheProgressThreadAloneCompletesWorkOfAPeerThatComesLate) {
  const int n = 2;
  auto store = std::make_shared<testing::MemoryStore>();
  onThreads(n, [&](int r) {
    auto comm = Communicator::createFromStore(store, r, n, 30s);
    comm->setProgressThread(true);
    for (int round = 0; round < 3; ++round) {
      if (r == 1) std::this_thread::sleep_for(50ms);  // rank 0's thread waits on its bell meanwhile
      const std::size_t count = 300001;
      std::vector<float> x(count);
      for (std::size_t i = 0; i < count; ++i) x[i] = valueOf(r, i + static_cast<std::size_t>(round));
      CallOptions o;
      o.algorithm = "shm";
      std::promise<std::exception_ptr> done;
      Work w = comm->allreduceAsync(ConstView(x.data(), count, DataType::kFloat32),
                                    View(x.data(), count, DataType::kFloat32), ReduceOp::kSum, o);
      w.onComplete([&done](std::exception_ptr e) { done.set_value(e); });
      auto result = done.get_future();
      ASSERT_EQ(result.wait_for(60s), std::future_status::ready) << "rank " << r << " round " << round;
      ASSERT_EQ(result.get(), nullptr);
      for (std::size_t i = 0; i < count; ++i) {
        double ref = 0;
        for (int q = 0; q < n; ++q) ref += static_cast<double>(valueOf(q, i + static_cast<std::size_t>(round)));
        ASSERT_EQ(static_cast<double>(x[i]), ref) << "rank " << r << " round " << round << " i " << i;
      }
    }
    comm->finalize();
  });
  EXPECT_TRUE(leftovers().empty());
}

TEST(StoreShm, ShmIsTheDefaultAndMatchesFloat64Reference) {
  for (int n : {1, 2, 3, 4}) {
    auto store = std::make_shared<testing::MemoryStore>();
    onThreads(n, [&](int r) {
      auto comm = Communicator::createFromStore(store, r, n, 30s);
      for (Collective c : {Collective::kAllreduce, Collective::kAllgather, Collective::kBroadcast,
                           Collective::kReduceScatter}) {
        for (std::size_t bytes : {8u, 1u << 20}) EXPECT_EQ(comm->selectedAlgorithm(c, bytes), "shm") << toString(c);
      }
      checkCollectives(*comm, r, n, "shm");
      checkCollectives(*comm, r, n, "");  // the default
      comm->finalize();
    });
  }
  EXPECT_TRUE(leftovers().empty());
}

TEST(StoreShm, HierWithSharedMemoryIntraPhaseMatchesFloat64Reference) {
  // Two declared nodes on one host: hier's intra-node level is a split of
  // the store transport, with its own POSIX segment.
  // hier needs equal nodes of several ranks: 2 x 2 and 2 x 3.
  for (int n : {4, 6}) {
    const testing::TunableOverride layout(core::kTunableNodeLayout, std::to_string(n / 2) + "," + std::to_string(n / 2));
    const testing::TunableOverride intra(core::kTunableHierIntraAlgo, "shm");
    auto store = std::make_shared<testing::MemoryStore>();
    onThreads(n, [&](int r) {
      auto comm = Communicator::createFromStore(store, r, n, 30s);
      checkCollectives(*comm, r, n, "hier");
      comm->finalize();
    });
  }
  EXPECT_TRUE(leftovers().empty());
}

}  // namespace
}  // namespace boostcomm::shm
