#include "testing/inproc_transport.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <unordered_map>
#include <utility>

#include "core/check.h"
#include "core/reduce.h"
#include "core/tunables.h"

namespace boostcomm::transport {
namespace inproc {

struct RequestState {
  bool done = false;
  bool failed = false;
  ErrorCategory category = ErrorCategory::kInternal;
  std::string error;
  // split() result: the new group of this rank (newRank < 0: none).
  std::uint64_t newGroup = 0;
  int newRank = -1;
  int newSize = 0;
};

struct PendingMessage {
  void* buf;  // const for sends; the receiver writes only through its own
  std::size_t bytes;
  std::uint64_t requestId;
  core::SegmentList pieces;  // isendPieces/irecvPieces: the message's pieces (buf unused)
  bool scattered = false;
};

// Messages match within one (group, source, destination, tag) channel, FIFO.
struct ChannelKey {
  std::uint64_t group;
  int source;
  int destination;
  int tag;
  bool operator==(const ChannelKey&) const = default;
};

struct ChannelKeyHash {
  std::size_t operator()(const ChannelKey& k) const {
    std::size_t h = std::hash<std::uint64_t>()(k.group);
    for (int v : {k.source, k.destination, k.tag}) h = h * 1000003u ^ std::hash<int>()(v);
    return h;
  }
};

struct Channel {
  std::deque<PendingMessage> sends;
  std::deque<PendingMessage> recvs;
};

enum class Kind { kAllreduce, kAllgatherv, kBroadcast, kReduceScatter, kBarrier, kSplit };

const char* kindName(Kind kind) {
  switch (kind) {
    case Kind::kAllreduce: return "allreduce";
    case Kind::kAllgatherv: return "allgatherv";
    case Kind::kBroadcast: return "broadcast";
    case Kind::kReduceScatter: return "reduce_scatter";
    case Kind::kBarrier: return "barrier";
    case Kind::kSplit: return "split";
  }
  return "unknown";
}

// One rank's arguments to one collective.
struct Arrival {
  Kind kind = Kind::kBarrier;
  const void* send = nullptr;
  void* recv = nullptr;  // broadcast: the buffer
  std::size_t count = 0;
  DataType dtype = DataType::kUInt8;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
  std::vector<int> recvCounts;
  std::vector<int> displs;
  int color = 0;
  int key = 0;
  std::uint64_t requestId = 0;
};

struct PendingCollective {
  std::vector<Arrival> arrivals;  // indexed by group rank
  int arrivedCount = 0;
};

struct Group {
  int size = 0;
  std::map<std::uint64_t, PendingCollective> pending;  // by collective number
};

struct FabricState {
  int maxTag = INT_MAX;  // fixed at creation
  std::mutex mutex;
  std::condition_variable completed;
  std::uint64_t nextRequestId = 1;  // 0 means "no request" in a Request slot
  std::uint64_t nextGroupId = 0;
  std::unordered_map<std::uint64_t, RequestState> requests;
  std::unordered_map<ChannelKey, Channel, ChannelKeyHash> channels;
  std::unordered_map<std::uint64_t, Group> groups;

  std::uint64_t newRequest() {
    const std::uint64_t id = nextRequestId++;
    requests.emplace(id, RequestState{});
    return id;
  }
  std::uint64_t newGroup(int size) {
    const std::uint64_t id = nextGroupId++;
    groups[id].size = size;
    return id;
  }
};

namespace {

// Waits for request id and removes it; rethrows its error as raised by `rank`.
RequestState waitAndConsume(FabricState& f, std::uint64_t id, int rank, const char* what) {
  const std::int64_t timeoutMs = core::tunableInt(core::kTunableTimeoutMs);
  std::unique_lock lock(f.mutex);
  auto isDone = [&] { return f.requests.at(id).done; };
  if (timeoutMs > 0) {
    BC_CHECK(f.completed.wait_for(lock, std::chrono::milliseconds(timeoutMs), isDone), ErrorCategory::kTimeout,
             rank, what << " did not complete within " << timeoutMs << " ms (BOOSTCOMM_TIMEOUT_MS)");
  } else {
    f.completed.wait(lock, isDone);
  }
  RequestState state = std::move(f.requests.at(id));
  f.requests.erase(id);
  lock.unlock();
  if (state.failed) core::raise(state.category, rank, state.error);
  return state;
}

std::string describe(DataType v) { return std::string(toString(v)); }
std::string describe(ReduceOp v) { return std::string(toString(v)); }
template <typename T>
std::string describe(const T& v) {
  std::ostringstream os;
  if constexpr (std::is_same_v<T, std::vector<int>>) {
    os << "[";
    for (std::size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
    os << "]";
  } else {
    os << v;
  }
  return os.str();
}

// Throws Error{kMismatch} when ranks disagree on the collective or its arguments.
void checkAgreement(const std::vector<Arrival>& a, std::uint64_t seq) {
  auto field = [&](const char* name, auto get) {
    for (std::size_t r = 1; r < a.size(); ++r) {
      if (get(a[r]) != get(a[0])) {
        core::raise(ErrorCategory::kMismatch, -1,
                    std::string("native ") + kindName(a[0].kind) + " #" + std::to_string(seq) + ": " + name +
                        " differs across ranks: rank 0 passed " + describe(get(a[0])) + ", rank " +
                        std::to_string(r) + " passed " + describe(get(a[r])));
      }
    }
  };
  for (std::size_t r = 1; r < a.size(); ++r) {
    BC_CHECK(a[r].kind == a[0].kind, ErrorCategory::kMismatch, -1,
             "collective #" << seq << ": rank 0 called " << kindName(a[0].kind) << " but rank " << r << " called "
                            << kindName(a[r].kind));
  }
  const Kind kind = a[0].kind;
  if (kind == Kind::kBarrier || kind == Kind::kSplit) return;
  field("dtype", [](const Arrival& x) { return x.dtype; });
  if (kind == Kind::kAllgatherv) {
    field("recvCounts", [](const Arrival& x) { return x.recvCounts; });
    field("displs", [](const Arrival& x) { return x.displs; });
    return;
  }
  field(kind == Kind::kReduceScatter ? "recvCount" : "count", [](const Arrival& x) { return x.count; });
  if (kind == Kind::kAllreduce || kind == Kind::kReduceScatter) field("op", [](const Arrival& x) { return x.op; });
  if (kind == Kind::kBroadcast) field("root", [](const Arrival& x) { return x.root; });
}

// Computes every rank's result; reductions run in rank order 0..n-1 into one
// temporary, then the same bytes are copied to every rank (in-place safe).
void execute(const std::vector<Arrival>& a) {
  const int n = static_cast<int>(a.size());
  const Arrival& first = a[0];
  const std::size_t elemBytes = dataTypeSize(first.dtype);
  switch (first.kind) {
    case Kind::kAllreduce:
    case Kind::kReduceScatter: {
      const std::size_t total = first.kind == Kind::kAllreduce ? first.count : first.count * std::size_t(n);
      if (total == 0) return;
      std::vector<unsigned char> acc(total * elemBytes);
      std::memcpy(acc.data(), a[0].send, acc.size());
      for (int r = 1; r < n; ++r) core::reduce(acc.data(), acc.data(), a[r].send, total, first.dtype, first.op);
      const std::size_t blockBytes = first.count * elemBytes;
      for (int r = 0; r < n; ++r) {
        const std::size_t offset = first.kind == Kind::kAllreduce ? 0 : std::size_t(r) * blockBytes;
        std::memcpy(a[r].recv, acc.data() + offset, blockBytes);
      }
      return;
    }
    case Kind::kAllgatherv:
      for (int d = 0; d < n; ++d) {
        for (int s = 0; s < n; ++s) {
          const std::size_t blockBytes = std::size_t(first.recvCounts[s]) * elemBytes;
          // memmove: an in-place rank's send block is its own recv block.
          if (blockBytes > 0) {
            std::memmove(static_cast<char*>(a[d].recv) + std::size_t(first.displs[s]) * elemBytes, a[s].send,
                         blockBytes);
          }
        }
      }
      return;
    case Kind::kBroadcast:
      if (first.count == 0) return;
      for (int r = 0; r < n; ++r) {
        if (r != first.root) std::memcpy(a[r].recv, a[first.root].recv, first.count * elemBytes);
      }
      return;
    case Kind::kBarrier:
    case Kind::kSplit:
      return;
  }
}

// Split bookkeeping; runs under the fabric mutex because it creates groups.
void executeSplit(FabricState& f, const std::vector<Arrival>& a) {
  std::map<int, std::vector<std::pair<int, int>>> byColor;  // color -> (key, old rank)
  for (int r = 0; r < static_cast<int>(a.size()); ++r) {
    if (a[r].color >= 0) byColor[a[r].color].emplace_back(a[r].key, r);
  }
  for (auto& [color, members] : byColor) {
    std::sort(members.begin(), members.end());
    const int size = static_cast<int>(members.size());
    const std::uint64_t group = f.newGroup(size);
    for (int i = 0; i < size; ++i) {
      RequestState& s = f.requests.at(a[members[i].second].requestId);
      s.newGroup = group;
      s.newRank = i;
      s.newSize = size;
    }
  }
}

// Deposits this rank's arrival for its next collective; the last rank to
// arrive runs it and completes everyone. Returns this rank's request id.
std::uint64_t arrive(FabricState& f, std::uint64_t groupId, int rank, std::uint64_t& seq, Arrival arrival) {
  std::unique_lock lock(f.mutex);
  const std::uint64_t id = f.newRequest();
  arrival.requestId = id;
  Group& group = f.groups.at(groupId);
  const std::uint64_t mySeq = seq++;
  PendingCollective& pending = group.pending[mySeq];
  if (pending.arrivals.empty()) pending.arrivals.resize(static_cast<std::size_t>(group.size));
  pending.arrivals[static_cast<std::size_t>(rank)] = std::move(arrival);
  if (++pending.arrivedCount < group.size) return id;

  std::vector<Arrival> all = std::move(pending.arrivals);
  group.pending.erase(mySeq);
  bool failed = false;
  ErrorCategory category = ErrorCategory::kInternal;
  std::string error;
  try {
    checkAgreement(all, mySeq);
    if (all[0].kind == Kind::kSplit) {
      executeSplit(f, all);
    } else {
      // Every other rank is parked on its request, so its buffers are ours until we complete it.
      lock.unlock();
      execute(all);
      lock.lock();
    }
  } catch (const Error& e) {
    failed = true;
    category = e.category();
    error = e.detail();
  } catch (const std::exception& e) {
    failed = true;
    error = e.what();
  }
  if (!lock.owns_lock()) lock.lock();
  for (const Arrival& x : all) {
    RequestState& s = f.requests.at(x.requestId);
    s.done = true;
    s.failed = failed;
    s.category = category;
    s.error = error;
  }
  f.completed.notify_all();
  return id;
}

int checkedCount(std::size_t count, int rank, const char* what) {
  BC_INVALID(count <= static_cast<std::size_t>(INT_MAX), rank,
             what << " = " << count << " exceeds INT_MAX elements; split the payload into chunks");
  return static_cast<int>(count);
}

}  // namespace
}  // namespace inproc

using inproc::Arrival;
using inproc::Kind;

std::vector<std::unique_ptr<Transport>> InProcFabric::create(int worldSize, int maxTag) {
  BC_INVALID(worldSize >= 1, -1, "InProcFabric::create: worldSize " << worldSize << " must be >= 1");
  BC_INVALID(maxTag >= 0, -1, "InProcFabric::create: maxTag " << maxTag << " is negative");
  auto fabric = std::make_shared<inproc::FabricState>();
  fabric->maxTag = maxTag;
  const std::uint64_t group = fabric->newGroup(worldSize);
  std::vector<std::unique_ptr<Transport>> out;
  for (int r = 0; r < worldSize; ++r) out.push_back(std::make_unique<InProcTransport>(fabric, group, r, worldSize));
  return out;
}

InProcTransport::InProcTransport(std::shared_ptr<inproc::FabricState> fabric, std::uint64_t groupId, int rank,
                                 int size)
    : fabric_(std::move(fabric)), groupId_(groupId), rank_(rank), size_(size) {}

InProcTransport::~InProcTransport() = default;

int InProcTransport::maxTag() const { return fabric_->maxTag; }

namespace {

void checkPointToPoint(const char* what, const void* buf, std::size_t bytes, int peer, int tag, int maxTag, int rank,
                       int size, const Request& req) {
  BC_INTERNAL(!req.active(), what << ": request is still active");
  BC_INVALID(peer >= 0 && peer < size, rank, what << ": peer " << peer << " outside [0, " << size << ")");
  BC_INVALID(tag >= 0 && tag <= maxTag, rank, what << ": tag " << tag << " outside [0, " << maxTag << "] (maxTag)");
  BC_INVALID(buf != nullptr || bytes == 0, rank, what << ": buf is null for " << bytes << " bytes");
}

// Pairs a send with a receive: copies outside the lock (both requests stay
// pending meanwhile, so nobody else touches the buffers), then completes both.
void matchAndComplete(inproc::FabricState& f, std::unique_lock<std::mutex>& lock, const inproc::PendingMessage& send,
                      const inproc::PendingMessage& recv, const inproc::ChannelKey& key) {
  std::string error;
  // MPI's rule: a receive takes a message of at most its size.
  if (send.bytes > recv.bytes) {
    std::ostringstream os;
    os << "message size mismatch: rank " << key.source << " sent " << send.bytes << " bytes to rank "
       << key.destination << " with tag " << key.tag << ", but the matching receive takes at most " << recv.bytes
       << " bytes";
    error = os.str();
  } else if (send.bytes > 0) {
    lock.unlock();
    if (!send.scattered && !recv.scattered) {
      std::memcpy(recv.buf, send.buf, send.bytes);
    } else {
      const core::Operand ops[2] = {{recv.scattered ? &recv.pieces : nullptr, static_cast<char*>(recv.buf), 0},
                                    {send.scattered ? &send.pieces : nullptr, static_cast<char*>(send.buf), 0}};
      core::forEachRun(ops, send.bytes, [](char* const* p, std::size_t n) { std::memcpy(p[0], p[1], n); });
    }
    lock.lock();
  }
  for (std::uint64_t id : {send.requestId, recv.requestId}) {
    inproc::RequestState& s = f.requests.at(id);
    s.done = true;
    if (!error.empty()) {
      s.failed = true;
      s.category = ErrorCategory::kMismatch;
      s.error = error;
    }
  }
  f.completed.notify_all();
}

void post(inproc::FabricState& f, bool isSend, void* buf, std::size_t bytes, const inproc::ChannelKey& key,
          Request& req, const core::Piece* pieces = nullptr, std::size_t pieceCount = 0) {
  inproc::PendingMessage mine{buf, bytes, 0, {}, pieces != nullptr};
  if (pieces != nullptr) {
    mine.bytes = 0;
    for (std::size_t i = 0; i < pieceCount; ++i) {
      mine.pieces.append(pieces[i].data, pieces[i].bytes);
      mine.bytes += pieces[i].bytes;
    }
  }
  std::unique_lock lock(f.mutex);
  const std::uint64_t id = f.newRequest();
  req.slot[0] = id;
  mine.requestId = id;
  inproc::Channel& channel = f.channels[key];
  std::deque<inproc::PendingMessage>& peers = isSend ? channel.recvs : channel.sends;
  if (peers.empty()) {
    (isSend ? channel.sends : channel.recvs).push_back(std::move(mine));
    return;
  }
  const inproc::PendingMessage other = std::move(peers.front());
  peers.pop_front();
  if (channel.sends.empty() && channel.recvs.empty()) f.channels.erase(key);
  matchAndComplete(f, lock, isSend ? mine : other, isSend ? other : mine, key);
}

}  // namespace

void InProcTransport::isend(const void* buf, std::size_t bytes, int peer, int tag, Request& req) {
  checkPointToPoint("isend", buf, bytes, peer, tag, fabric_->maxTag, rank_, size_, req);
  post(*fabric_, true, const_cast<void*>(buf), bytes, {groupId_, rank_, peer, tag}, req);
}

void InProcTransport::irecv(void* buf, std::size_t bytes, int peer, int tag, Request& req) {
  checkPointToPoint("irecv", buf, bytes, peer, tag, fabric_->maxTag, rank_, size_, req);
  post(*fabric_, false, buf, bytes, {groupId_, peer, rank_, tag}, req);
}

void InProcTransport::isendPieces(const core::Piece* pieces, std::size_t count, int peer, int tag, Request& req) {
  checkPointToPoint("isend", pieces, count, peer, tag, fabric_->maxTag, rank_, size_, req);
  post(*fabric_, true, nullptr, 0, {groupId_, rank_, peer, tag}, req, pieces, count);
}

void InProcTransport::irecvPieces(const core::Piece* pieces, std::size_t count, int peer, int tag, Request& req) {
  checkPointToPoint("irecv", pieces, count, peer, tag, fabric_->maxTag, rank_, size_, req);
  post(*fabric_, false, nullptr, 0, {groupId_, peer, rank_, tag}, req, pieces, count);
}

bool InProcTransport::test(Request& req) {
  if (!req.active()) return true;
  std::unique_lock lock(fabric_->mutex);
  auto it = fabric_->requests.find(req.slot[0]);
  BC_INTERNAL(it != fabric_->requests.end(), "inproc test: unknown request id " << req.slot[0]);
  if (!it->second.done) return false;
  inproc::RequestState state = std::move(it->second);
  fabric_->requests.erase(it);
  lock.unlock();
  req.slot[0] = 0;
  req.slot[1] = 0;
  if (state.failed) core::raise(state.category, rank_, state.error);
  return true;
}

namespace {

// Posts the arrival; blocking callers wait for completion, others get the id in req.
inproc::RequestState runCollective(inproc::FabricState& f, std::uint64_t group, int rank, std::uint64_t& seq,
                                   Arrival arrival, Request* req) {
  const char* what = inproc::kindName(arrival.kind);
  if (req != nullptr) BC_INTERNAL(!req->active(), "native " << what << ": request is still active");
  const std::uint64_t id = inproc::arrive(f, group, rank, seq, std::move(arrival));
  if (req != nullptr) {
    req->slot[0] = id;
    return {};
  }
  return inproc::waitAndConsume(f, id, rank, what);
}

}  // namespace

void InProcTransport::nativeAllreduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
                                      Request* req) {
  inproc::checkedCount(count, rank_, "nativeAllreduce: count");
  BC_INTERNAL(op != ReduceOp::kAvg, "nativeAllreduce: kAvg must be reduced as kSum and divided by the caller");
  BC_INVALID((send != nullptr && recv != nullptr) || count == 0, rank_, "nativeAllreduce: null buffer");
  (void)dataTypeSize(dtype);  // rejects an invalid dtype here, on the caller's rank
  Arrival a;
  a.kind = Kind::kAllreduce;
  a.send = send;
  a.recv = recv;
  a.count = count;
  a.dtype = dtype;
  a.op = op;
  runCollective(*fabric_, groupId_, rank_, collectiveSeq_, std::move(a), req);
}

void InProcTransport::nativeAllgatherv(const void* send, std::size_t sendCount, void* recv, const int* recvCounts,
                                       const int* displs, DataType dtype, Request* req) {
  const int n = inproc::checkedCount(sendCount, rank_, "nativeAllgatherv: sendCount");
  BC_INVALID(recvCounts != nullptr && displs != nullptr, rank_, "nativeAllgatherv: recvCounts/displs is null");
  BC_INVALID(recvCounts[rank_] == n, rank_,
             "nativeAllgatherv: sendCount " << n << " differs from recvCounts[" << rank_ << "] = " << recvCounts[rank_]);
  BC_INVALID(send != nullptr || n == 0, rank_, "nativeAllgatherv: send is null for count " << n);
  std::size_t totalCount = 0;
  for (int r = 0; r < size_; ++r) {
    BC_INVALID(recvCounts[r] >= 0 && displs[r] >= 0, rank_,
               "nativeAllgatherv: negative recvCounts/displs entry for rank " << r);
    totalCount += static_cast<std::size_t>(recvCounts[r]);
  }
  BC_INVALID(recv != nullptr || totalCount == 0, rank_, "nativeAllgatherv: recv is null");
  (void)dataTypeSize(dtype);
  Arrival a;
  a.kind = Kind::kAllgatherv;
  a.send = send;
  a.recv = recv;
  a.count = sendCount;
  a.dtype = dtype;
  a.recvCounts.assign(recvCounts, recvCounts + size_);
  a.displs.assign(displs, displs + size_);
  runCollective(*fabric_, groupId_, rank_, collectiveSeq_, std::move(a), req);
}

void InProcTransport::nativeBroadcast(void* buf, std::size_t count, DataType dtype, int root, Request* req) {
  inproc::checkedCount(count, rank_, "nativeBroadcast: count");
  BC_INVALID(root >= 0 && root < size_, rank_, "nativeBroadcast: root " << root << " outside [0, " << size_ << ")");
  BC_INVALID(buf != nullptr || count == 0, rank_, "nativeBroadcast: buf is null for count " << count);
  (void)dataTypeSize(dtype);
  Arrival a;
  a.kind = Kind::kBroadcast;
  a.send = buf;
  a.recv = buf;
  a.count = count;
  a.dtype = dtype;
  a.root = root;
  runCollective(*fabric_, groupId_, rank_, collectiveSeq_, std::move(a), req);
}

void InProcTransport::nativeReduceScatter(const void* send, void* recv, std::size_t recvCount, DataType dtype,
                                          ReduceOp op, Request* req) {
  inproc::checkedCount(recvCount, rank_, "nativeReduceScatter: recvCount");
  BC_INTERNAL(op != ReduceOp::kAvg, "nativeReduceScatter: kAvg must be reduced as kSum and divided by the caller");
  BC_INVALID((send != nullptr && recv != nullptr) || recvCount == 0, rank_, "nativeReduceScatter: null buffer");
  (void)dataTypeSize(dtype);
  Arrival a;
  a.kind = Kind::kReduceScatter;
  a.send = send;
  a.recv = recv;
  a.count = recvCount;
  a.dtype = dtype;
  a.op = op;
  runCollective(*fabric_, groupId_, rank_, collectiveSeq_, std::move(a), req);
}

void InProcTransport::nativeBarrier(Request* req) {
  Arrival a;
  a.kind = Kind::kBarrier;
  runCollective(*fabric_, groupId_, rank_, collectiveSeq_, std::move(a), req);
}

std::unique_ptr<Transport> InProcTransport::split(int color, int key) {
  Arrival a;
  a.kind = Kind::kSplit;
  a.color = color;
  a.key = key;
  const inproc::RequestState result = runCollective(*fabric_, groupId_, rank_, collectiveSeq_, std::move(a), nullptr);
  if (result.newRank < 0) return nullptr;
  return std::make_unique<InProcTransport>(fabric_, result.newGroup, result.newRank, result.newSize);
}

}  // namespace boostcomm::transport
