#include "transport/gloo/gloo_transport.h"

#include <gloo/transport/tcp/attr.h>
#include <gloo/transport/tcp/device.h>
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/check.h"
#include "core/thread_name.h"
#include "core/tunables.h"
#include "transport/gloo/gloo_link.h"
#include "transport/gloo/gloo_waiters.h"

namespace boostcomm::transport {

namespace {

// Gloo's own collectives use slot prefixes 0x01-0x08 (gloo/types.h).
constexpr std::uint64_t kP2pSlotPrefix = 0x62;  // 'b'

std::uint64_t slotOf(int tag) { return (kP2pSlotPrefix << 56) | static_cast<std::uint32_t>(tag); }

std::string hostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  return buf;
}

bool resolves(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0) return false;
  freeaddrinfo(res);
  return true;
}

// The local address of the route to `host`: a UDP socket's connect() picks
// the route and source address without sending anything. Empty when `host`
// does not resolve or no route reaches it.
std::string localAddressTowards(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), "9", &hints, &res) != 0) return {};
  std::string out;
  for (addrinfo* a = res; a != nullptr && out.empty(); a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    char text[INET6_ADDRSTRLEN] = {};
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 && getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      const void* addr = local.ss_family == AF_INET6
                             ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr)
                             : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr);
      if (inet_ntop(local.ss_family, addr, text, sizeof text) != nullptr) out = text;
    }
    close(fd);
  }
  freeaddrinfo(res);
  return out;
}

// Ranks on one node share a host name and a network namespace (the emulated
// cluster, scripts/emucluster.sh, gives each "node" its own namespace).
std::string nodeKey() {
  std::error_code ec;
  const std::string ns = std::filesystem::read_symlink("/proc/self/ns/net", ec).string();
  return hostName() + "|" + ns;
}

// Which shared object Gloo's functions bind to in this process. The torch
// wheel compiles its own Gloo (another version) into libtorch_cpu and exports
// its symbols; should ours ever bind there (libtorch_cpu in the global
// scope, loaded RTLD_GLOBAL before us), every call would run that version's
// code on our version's objects. Measured: with the package's import order
// (_boostcomm, hence libboostcomm and libgloo, before _boostcomm_torch) every
// Gloo symbol binds to libgloo (LD_DEBUG=bindings); this keeps it a checked
// fact instead of an assumption.
void checkGlooBinding(int rank) {
  Dl_info info{};
  const auto create = &gloo::transport::tcp::CreateDevice;  // resolved through the GOT: the bound definition
  if (dladdr(reinterpret_cast<void*>(create), &info) == 0 || info.dli_fname == nullptr) return;
  const std::string file = info.dli_fname;
  Dl_info self{};  // a Gloo linked statically into libboostcomm is ours too
  const bool inSelf = dladdr(reinterpret_cast<void*>(&checkGlooBinding), &self) != 0 && self.dli_fname != nullptr &&
                      file == self.dli_fname;
  if (inSelf || file.find("libgloo") != std::string::npos) return;
  throw Error(ErrorCategory::kTransport, rank,
              "Gloo's functions bind to " + file + ", not to the libgloo boostcomm was built against (another "
              "Gloo, e.g. torch's, was loaded into the global symbol scope first); import boostcomm before "
              "loading that library with RTLD_GLOBAL");
}

}  // namespace


std::shared_ptr<gloo::transport::Device> GlooTransport::createDevice(int rank) {
  checkGlooBinding(rank);
  gloo::transport::tcp::attr attr;
  std::string host = core::tunableString(core::kTunableGlooHostname);
  // torch's rendezvous address (torchrun, env://): the address peers reach
  // the store by is on the network they reach us by. The host name usually
  // resolves to 127.0.0.1 (Debian's /etc/hosts), which peers in another
  // network namespace or on another host cannot connect to.
  if (const char* master = std::getenv("MASTER_ADDR"); host.empty() && master != nullptr && *master != '\0') {
    host = localAddressTowards(master);
  }
  if (host.empty()) {
    host = hostName();
    if (!resolves(host)) host = "127.0.0.1";
  }
  attr.hostname = host;
  try {
    return gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw Error(ErrorCategory::kTransport, rank,
                "cannot create Gloo's TCP device on '" + host + "' (" + core::kTunableGlooHostname.env +
                    " sets the address): " + e.what());
  }
}

GlooTransport::GlooTransport(StoreBridge store, std::shared_ptr<gloo::transport::Device> device, int rank, int size,
                             std::vector<long long> nodeIds)
    : store_(std::move(store)), device_(std::move(device)), rank_(rank), size_(size), nodeIds_(std::move(nodeIds)) {
  BC_INVALID(size_ >= 1, rank_, "store transport: world size " << size_ << " must be at least 1");
  BC_INVALID(rank_ >= 0 && rank_ < size_, rank_, "store transport: rank " << rank_ << " out of range for world size "
                                                                          << size_);
  if (nodeIds_.empty()) exchangeJoin();
  auto connect = [&](const char* sub) {
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank_, size_);
    ctx->setTimeout(store_.timeout());
    StoreBridge bridge = store_.child(sub);
    try {
      ctx->connectFullMesh(bridge, device_);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      raiseGlooError(e, "connectFullMesh", rank_);
    }
    return ctx;
  };
  signal_ = std::make_unique<CompletionSignal>();
  p2p_ = connect("p2p");
  native_ = connect("native");
  waiters_ = std::make_unique<GlooWaiters>(rank_, "gloo " + store_.prefix() + ", rank " + std::to_string(rank_) +
                                                      " of " + std::to_string(size_), *signal_);
  worker_ = std::thread([this] {
    core::nameThisThread("bc-gloo-native");
    workerLoop();
  });
}

GlooTransport::~GlooTransport() {
  sharedMemory_.reset();  // unmaps; needs nothing from the peers
  {
    std::lock_guard<std::mutex> lock(queueMutex_);
    stopping_ = true;
  }
  queueCv_.notify_all();
  if (worker_.joinable()) worker_.join();
  waiters_.reset();  // before the contexts its buffers belong to
}

// join/<rank> = "<size>\n<node key>": every rank checks every other's size
// (a disagreement is kMismatch naming both) and numbers nodes by their lowest rank.
void GlooTransport::exchangeJoin() {
  StoreBridge join = store_.child("join");
  const std::string mine = std::to_string(size_) + "\n" + nodeKey();
  join.set(std::to_string(rank_), std::vector<char>(mine.begin(), mine.end()));
  std::vector<std::string> keys(static_cast<std::size_t>(size_));
  std::vector<long long> ids(keys.size());
  for (int r = 0; r < size_; ++r) {
    std::vector<char> v;
    try {
      v = join.get(std::to_string(r));
    } catch (const Error& e) {
      throw Error(e.category(), rank_,
                  "store rendezvous on " + store_.describe() + ": rank " + std::to_string(r) + " of " +
                      std::to_string(size_) + " did not join within " + std::to_string(store_.timeout().count()) +
                      " ms (" + e.what() + ")");
    }
    const std::string text(v.begin(), v.end());
    const std::size_t nl = text.find('\n');
    const std::string theirSize = text.substr(0, nl);
    BC_CHECK(theirSize == std::to_string(size_), ErrorCategory::kMismatch, rank_,
             "store rendezvous: this rank was given world size " << size_ << " but rank " << r << " was given "
                                                                 << theirSize);
    keys[static_cast<std::size_t>(r)] = nl == std::string::npos ? "" : text.substr(nl + 1);
  }
  for (int r = 0; r < size_; ++r) {
    const auto first = std::find(keys.begin(), keys.end(), keys[static_cast<std::size_t>(r)]);
    ids[static_cast<std::size_t>(r)] = first - keys.begin();
  }
  nodeIds_ = std::move(ids);
}

int GlooTransport::maxTag() const { return INT_MAX; }

bool GlooTransport::signalCompletions(std::function<void()> signal) {
  signal_->set(std::move(signal));
  return true;
}

void GlooTransport::checkPeer(int peer, int tag, const char* what) const {
  BC_INVALID(peer >= 0 && peer < size_ && peer != rank_, rank_,
             what << ": peer " << peer << " out of range for " << size_ << " ranks (or this rank)");
  BC_INVALID(tag >= 0, rank_, what << ": negative tag " << tag);
}

void GlooTransport::post(bool isSend, void* buf, std::size_t bytes, int peer, int tag, Request& req, Pending* p) {
  p->isSend = isSend;
  p->peer = peer;
  p->tag = tag;
  p->bytes = bytes;
  p->postedAt = std::chrono::steady_clock::now();
  if (bytes == 0) {
    p->staging.assign(1, 0);  // an empty message travels as one byte on both sides
    buf = p->staging.data();
    bytes = 1;
  }
  try {
    p->buffer = p2p_->createUnboundBuffer(buf, bytes);
    if (isSend) {
      p->buffer->send(peer, slotOf(tag), 0, bytes);
    } else if (peer >= 0) {
      p->buffer->recv(peer, slotOf(tag), 0, bytes);
    } else {
      std::vector<int> others;
      for (int r = 0; r < size_; ++r) {
        if (r != rank_) others.push_back(r);
      }
      p->buffer->recv(others, slotOf(tag), 0, bytes);
    }
  } catch (const std::exception& e) {
    delete p;
    raiseGlooError(e, isSend ? "send" : "recv", rank_);
  }
  req.slot[0] = reinterpret_cast<std::uintptr_t>(p);
  req.slot[1] = 0;
  waiters_->watch(p);
}

void GlooTransport::isend(const void* buf, std::size_t bytes, int peer, int tag, Request& req) {
  checkPeer(peer, tag, "isend");
  post(true, const_cast<void*>(buf), bytes, peer, tag, req, new Pending);
}

void GlooTransport::irecv(void* buf, std::size_t bytes, int peer, int tag, Request& req) {
  checkPeer(peer, tag, "irecv");
  post(false, buf, bytes, peer, tag, req, new Pending);
}

void GlooTransport::isendPieces(const core::Piece* pieces, std::size_t count, int peer, int tag, Request& req) {
  checkPeer(peer, tag, "isendPieces");
  auto* p = new Pending;
  std::size_t total = 0;
  for (std::size_t i = 0; i < count; ++i) total += pieces[i].bytes;
  p->staging.resize(total);
  std::size_t at = 0;
  for (std::size_t i = 0; i < count; ++i) {
    if (pieces[i].bytes) std::memcpy(p->staging.data() + at, pieces[i].data, pieces[i].bytes);
    at += pieces[i].bytes;
  }
  post(true, p->staging.data(), total, peer, tag, req, p);
}

void GlooTransport::irecvPieces(const core::Piece* pieces, std::size_t count, int peer, int tag, Request& req) {
  checkPeer(peer, tag, "irecvPieces");
  auto* p = new Pending;
  std::size_t total = 0;
  for (std::size_t i = 0; i < count; ++i) total += pieces[i].bytes;
  p->staging.resize(total);
  p->scatter.assign(pieces, pieces + count);
  post(false, p->staging.data(), total, peer, tag, req, p);
}

void GlooTransport::irecvAnySource(void* buf, std::size_t bytes, int tag, Request& req) {
  BC_INVALID(size_ > 1, rank_, "irecvAnySource: no other rank in a group of one");
  BC_INVALID(tag >= 0, rank_, "irecvAnySource: negative tag " << tag);
  post(false, buf, bytes, -1, tag, req, new Pending);
}

bool GlooTransport::testAnySource(Request& req, int* source) {
  if (!req.active()) return true;
  const auto* p = reinterpret_cast<const Pending*>(req.slot[0]);
  if (!p->done.load(std::memory_order_acquire)) return false;
  const int sender = p->source;  // written before done (release)
  test(req);  // frees the Pending; throws its error
  if (source != nullptr) *source = sender;
  return true;
}

bool GlooTransport::test(Request& req) {
  if (!req.active()) return true;
  auto* p = reinterpret_cast<Pending*>(req.slot[0]);
  std::exception_ptr error;
  if (p->job) {
    if (!p->job->done.load(std::memory_order_acquire)) return false;
    error = p->job->error;
  } else {
    if (!p->done.load(std::memory_order_acquire)) return false;
    error = p->error;
  }
  if (error) {
    delete p;
    req = Request{};
    std::rethrow_exception(error);
  }
  if (!p->scatter.empty()) {
    std::size_t at = 0;
    for (const core::Piece& piece : p->scatter) {
      if (piece.bytes) std::memcpy(piece.data, p->staging.data() + at, piece.bytes);
      at += piece.bytes;
    }
  }
  delete p;
  req = Request{};
  return true;
}

std::unique_ptr<Transport> GlooTransport::split(int color, int key) {
  // Every rank's (color, key), through Gloo's allgather on the native context.
  std::vector<std::int64_t> mine{color, key};
  std::vector<std::int64_t> all(2 * static_cast<std::size_t>(size_));
  std::vector<int> counts(static_cast<std::size_t>(size_), 2);
  std::vector<int> displs(static_cast<std::size_t>(size_));
  for (int r = 0; r < size_; ++r) displs[static_cast<std::size_t>(r)] = 2 * r;
  nativeAllgatherv(mine.data(), 2, all.data(), counts.data(), displs.data(), DataType::kInt64, nullptr);
  const int n = splits_++;
  if (color < 0) return nullptr;
  std::vector<int> members;
  for (int r = 0; r < size_; ++r) {
    if (all[2 * static_cast<std::size_t>(r)] == color) members.push_back(r);
  }
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
    return all[2 * static_cast<std::size_t>(a) + 1] < all[2 * static_cast<std::size_t>(b) + 1];
  });
  const int newRank = static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
  std::vector<long long> ids;
  for (int r : members) ids.push_back(nodeIds_[static_cast<std::size_t>(r)]);
  StoreBridge sub = store_.child("split" + std::to_string(n) + "/" + std::to_string(color));
  return std::make_unique<GlooTransport>(std::move(sub), device_, newRank, static_cast<int>(members.size()),
                                         std::move(ids));
}

}  // namespace boostcomm::transport
