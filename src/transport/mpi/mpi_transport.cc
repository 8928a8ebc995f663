#include "transport/mpi/mpi_transport.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/tunables.h"
#include "transport/mpi/mpi_errors.h"
#include "transport/mpi/mpi_side_channel.h"
#include "transport/mpi/mpi_types.h"

namespace boostcomm::transport {

using mpi::checkMpi;

namespace {

// Request slots must read zero when inactive, but MPI_REQUEST_NULL need not be
// zero (Open MPI: the address of a sentinel object). Storing the handle's bits
// XOR MPI_REQUEST_NULL's bits maps "no request" to 0 and keeps every live
// request non-zero, whatever the handle representation.
static_assert(sizeof(MPI_Request) <= sizeof(std::uintptr_t), "MPI_Request must fit in a Request slot");

std::uintptr_t requestBits(MPI_Request r) {
  std::uintptr_t bits = 0;
  std::memcpy(&bits, &r, sizeof r);
  return bits;
}

std::uintptr_t encodeRequest(MPI_Request r) { return requestBits(r) ^ requestBits(MPI_REQUEST_NULL); }

MPI_Request decodeRequest(std::uintptr_t slot) {
  const std::uintptr_t bits = slot ^ requestBits(MPI_REQUEST_NULL);
  MPI_Request r;
  std::memcpy(&r, &bits, sizeof r);
  return r;
}

// A message sent as a stream of pieces: slot[0] points to it, slot[1] holds
// kStreamMark (never an encoded request: a whole message's second slot is
// a live request, non-zero, or 0).
struct PieceStream {
  std::vector<MPI_Request> requests;
  std::vector<int> bytes;  // receives: each piece's length, checked as it completes
  int peer = -1;
  std::size_t done = 0;  // requests[0, done) completed (tested in order)
};
constexpr std::uintptr_t kStreamMark = ~std::uintptr_t{0};

std::mutex g_initMutex;
bool g_weInitialized = false;  // guarded by g_initMutex

bool mpiFinalized() {
  int finalized = 0;
  checkMpi(MPI_Finalized(&finalized), "MPI_Finalized", -1);
  return finalized != 0;
}

// Posts a non-blocking collective when req is given, else runs the blocking one.
template <typename Blocking, typename NonBlocking>
void runCollective(Request* req, const char* blockingName, const char* nonBlockingName, int rank, Blocking blocking,
                   NonBlocking nonBlocking) {
  if (req == nullptr) {
    checkMpi(blocking(), blockingName, rank);
    return;
  }
  BC_INTERNAL(!req->active(), nonBlockingName << ": request is still active");
  MPI_Request r = MPI_REQUEST_NULL;
  checkMpi(nonBlocking(&r), nonBlockingName, rank);
  req->slot[0] = encodeRequest(r);
}

}  // namespace

MpiTransport::MpiTransport(MPI_Comm comm, bool ownsComm) : comm_(comm), ownsComm_(ownsComm) {
  BC_INVALID(comm != MPI_COMM_NULL, -1, "MpiTransport: comm is MPI_COMM_NULL");
  try {
    if (ownsComm_) checkMpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler", -1);
    checkMpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank", -1);
    checkMpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size", rank_);
    void* value = nullptr;
    int found = 0;
    // MPI_TAG_UB is a predefined attribute of MPI_COMM_WORLD only (dups copy
    // it, splits do not), and it holds for every communicator.
    checkMpi(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &value, &found), "MPI_Comm_get_attr(MPI_TAG_UB)", rank_);
    // The standard guarantees MPI_TAG_UB >= 32767 and that the attribute exists.
    maxTag_ = (found && value != nullptr) ? *static_cast<int*>(value) : 32767;
  } catch (...) {
    if (ownsComm_) MPI_Comm_free(&comm_);
    throw;
  }
}

MpiTransport::~MpiTransport() {
  sharedMemory_.reset();
  freeCheckedResources();
  if (!ownsComm_ || comm_ == MPI_COMM_NULL || keepComm_) return;
  int finalized = 0;
  // A destructor cannot report: a failed free only leaks a communicator.
  if (MPI_Finalized(&finalized) == MPI_SUCCESS && !finalized) MPI_Comm_free(&comm_);
}

std::unique_ptr<MpiTransport> MpiTransport::createWorld() {
  {
    std::lock_guard lock(g_initMutex);
    int initialized = 0;
    checkMpi(MPI_Initialized(&initialized), "MPI_Initialized", -1);
    if (!initialized) {
      BC_CHECK(!mpiFinalized(), ErrorCategory::kFinalized, -1, "createWorld: MPI was already finalized");
      int provided = MPI_THREAD_SINGLE;
      checkMpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread", -1);
      g_weInitialized = true;
    }
  }
  MPI_Comm dup = MPI_COMM_NULL;
  checkMpi(MPI_Comm_dup(MPI_COMM_WORLD, &dup), "MPI_Comm_dup(MPI_COMM_WORLD)", -1);
  return std::make_unique<MpiTransport>(dup, true);
}

void MpiTransport::postBytes(bool isSend, void* buf, std::size_t bytes, int peer, int tag, Request& req) {
  const char* what = isSend ? "isend" : "irecv";
  BC_INTERNAL(!req.active(), what << ": request is still active");
  BC_INVALID(peer >= 0 && peer < size_, rank_, what << ": peer " << peer << " outside [0, " << size_ << ")");
  BC_INVALID(tag >= 0 && tag <= maxTag_, rank_, what << ": tag " << tag << " outside [0, " << maxTag_ << "]");
  BC_INVALID(buf != nullptr || bytes == 0, rank_, what << ": buf is null for " << bytes << " bytes");
  if (streams(bytes, peer)) {
    postStream(isSend, buf, bytes, peer, tag, req);
    return;
  }
  auto post = [&](void* data, int count, MPI_Datatype type, std::uintptr_t& slot) {
    MPI_Request r = MPI_REQUEST_NULL;
    if (isSend) {
      checkMpi(MPI_Isend(data, count, type, peer, tag, comm_, &r), "MPI_Isend", rank_);
    } else {
      checkMpi(MPI_Irecv(data, count, type, peer, tag, comm_, &r), "MPI_Irecv", rank_);
    }
    slot = encodeRequest(r);
  };
  if (bytes <= static_cast<std::size_t>(INT_MAX)) {
    post(buf, static_cast<int>(bytes), MPI_BYTE, req.slot[0]);
    return;
  }
  const std::size_t blocks = bytes / mpi::kBlockBytes;
  const std::size_t remainderBytes = bytes % mpi::kBlockBytes;
  BC_INVALID(blocks <= static_cast<std::size_t>(INT_MAX), rank_, what << ": " << bytes << " bytes is too large");
  post(buf, static_cast<int>(blocks), mpi::mpiBlockType(), req.slot[0]);
  if (remainderBytes > 0) {
    post(static_cast<char*>(buf) + blocks * mpi::kBlockBytes, static_cast<int>(remainderBytes), MPI_BYTE,
         req.slot[1]);
  }
}

void MpiTransport::postStream(bool isSend, void* buf, std::size_t bytes, int peer, int tag, Request& req) {
  auto stream = std::make_unique<PieceStream>();
  const std::size_t pieces = (bytes + pieceBytes_ - 1) / pieceBytes_;
  stream->requests.assign(pieces, MPI_REQUEST_NULL);
  stream->peer = peer;
  char* at = static_cast<char*>(buf);
  for (std::size_t i = 0; i < pieces; ++i) {
    const int n = static_cast<int>(std::min(pieceBytes_, bytes - i * pieceBytes_));
    if (!isSend) stream->bytes.push_back(n);
    MPI_Request& r = stream->requests[i];
    const int rc = isSend ? MPI_Isend(at, n, MPI_BYTE, peer, tag, comm_, &r)
                          : MPI_Irecv(at, n, MPI_BYTE, peer, tag, comm_, &r);
    if (rc != MPI_SUCCESS) {
      // The pieces already posted stay in flight: their stream (holding
      // their requests) is leaked with them; the engine fails.
      static_cast<void>(stream.release());
      checkMpi(rc, isSend ? "MPI_Isend" : "MPI_Irecv", rank_);
    }
    at += n;
  }
  req.slot[0] = reinterpret_cast<std::uintptr_t>(stream.release());
  req.slot[1] = kStreamMark;
}

bool MpiTransport::testStream(Request& req) {
  auto* stream = reinterpret_cast<PieceStream*>(req.slot[0]);
  while (stream->done < stream->requests.size()) {
    int done = 0;
    MPI_Status status;
    const int rc = MPI_Test(&stream->requests[stream->done], &done, &status);
    if (rc != MPI_SUCCESS) {
      // The request stays failed; the stream is leaked with the pieces in flight.
      req.slot[0] = req.slot[1] = 0;
      checkMpi(rc, "MPI_Test", rank_);
    }
    if (!done) return false;
    if (!stream->bytes.empty()) {
      int got = 0;
      MPI_Get_count(&status, MPI_BYTE, &got);
      const int want = stream->bytes[stream->done];
      if (got != want) {
        req.slot[0] = req.slot[1] = 0;  // the rest of the stream is leaked in flight
        throw Error(ErrorCategory::kMismatch, rank_,
                    "a message from rank " + std::to_string(stream->peer) + " arrived in pieces of another size (piece " +
                        std::to_string(stream->done) + ": " + std::to_string(got) + " bytes, this rank expected " +
                        std::to_string(want) + "): the ranks disagree on the message's length or on " +
                        core::kTunableMpiPieceBytes.env);
      }
    }
    ++stream->done;
  }
  delete stream;
  req.slot[0] = req.slot[1] = 0;
  return true;
}

void MpiTransport::isend(const void* buf, std::size_t bytes, int peer, int tag, Request& req) {
  postBytes(true, const_cast<void*>(buf), bytes, peer, tag, req);
}

void MpiTransport::irecv(void* buf, std::size_t bytes, int peer, int tag, Request& req) {
  postBytes(false, buf, bytes, peer, tag, req);
}

void MpiTransport::postPieces(bool isSend, const core::Piece* pieces, std::size_t count, int peer, int tag,
                              Request& req) {
  // One message through an hindexed MPI_BYTE datatype over the pieces'
  // absolute addresses (MPI_BOTTOM): MPI gathers/scatters it itself, so the
  // peer sees one message of the total size whatever its own layout. The
  // type is freed right after posting (MPI keeps it until completion).
  // Blocks are cut at 1 GiB so each length fits an int. To a rank on
  // another node above the piece size, the same bytes go as a stream of
  // messages cut at the same offsets as postStream's, so a peer that
  // posts the message whole (or in other pieces) matches it.
  const char* what = isSend ? "isend" : "irecv";
  BC_INTERNAL(!req.active(), what << ": request is still active");
  BC_INVALID(peer >= 0 && peer < size_, rank_, what << ": peer " << peer << " outside [0, " << size_ << ")");
  BC_INVALID(tag >= 0 && tag <= maxTag_, rank_, what << ": tag " << tag << " outside [0, " << maxTag_ << "]");
  constexpr std::size_t kMaxBlockBytes = std::size_t{1} << 30;
  std::size_t total = 0;
  for (std::size_t i = 0; i < count; ++i) total += pieces[i].bytes;
  const bool stream = streams(total, peer);
  const std::size_t messageBytes = stream ? pieceBytes_ : static_cast<std::size_t>(-1);
  thread_local std::vector<int> lengths;
  thread_local std::vector<MPI_Aint> displs;
  lengths.clear();
  displs.clear();
  auto streamed = stream ? std::make_unique<PieceStream>() : nullptr;
  if (streamed) streamed->peer = peer;
  MPI_Request whole = MPI_REQUEST_NULL;
  bool posted = false;
  auto post = [&](std::size_t messageLength) {
    BC_INVALID(lengths.size() <= static_cast<std::size_t>(INT_MAX), rank_, what << ": too many pieces");
    MPI_Datatype type = MPI_DATATYPE_NULL;
    checkMpi(MPI_Type_create_hindexed(static_cast<int>(lengths.size()), lengths.data(), displs.data(), MPI_BYTE, &type),
             "MPI_Type_create_hindexed", rank_);
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = MPI_Type_commit(&type);
    if (rc == MPI_SUCCESS) {
      rc = isSend ? MPI_Isend(MPI_BOTTOM, 1, type, peer, tag, comm_, &r) : MPI_Irecv(MPI_BOTTOM, 1, type, peer, tag, comm_, &r);
    }
    MPI_Type_free(&type);
    if (rc != MPI_SUCCESS) {
      static_cast<void>(streamed.release());  // the messages already posted stay in flight: leaked with them
      checkMpi(rc, isSend ? "MPI_Isend(pieces)" : "MPI_Irecv(pieces)", rank_);
    }
    if (streamed) {
      streamed->requests.push_back(r);
      if (!isSend) streamed->bytes.push_back(static_cast<int>(messageLength));
    } else {
      whole = r;
    }
    posted = true;
    lengths.clear();
    displs.clear();
  };
  std::size_t inMessage = 0;
  for (std::size_t i = 0; i < count; ++i) {
    for (std::size_t done = 0; done < pieces[i].bytes;) {
      const std::size_t take = std::min({kMaxBlockBytes, pieces[i].bytes - done, messageBytes - inMessage});
      MPI_Aint address = 0;
      checkMpi(MPI_Get_address(pieces[i].data + done, &address), "MPI_Get_address", rank_);
      displs.push_back(address);
      lengths.push_back(static_cast<int>(take));
      done += take;
      inMessage += take;
      if (inMessage == messageBytes) {
        post(inMessage);
        inMessage = 0;
      }
    }
  }
  if (!lengths.empty() || !posted) post(inMessage);
  if (streamed) {
    req.slot[0] = reinterpret_cast<std::uintptr_t>(streamed.release());
    req.slot[1] = kStreamMark;
  } else {
    req.slot[0] = encodeRequest(whole);
  }
}

void MpiTransport::isendPieces(const core::Piece* pieces, std::size_t count, int peer, int tag, Request& req) {
  postPieces(true, pieces, count, peer, tag, req);
}

void MpiTransport::irecvPieces(const core::Piece* pieces, std::size_t count, int peer, int tag, Request& req) {
  postPieces(false, pieces, count, peer, tag, req);
}

bool MpiTransport::test(Request& req) {
  if (req.slot[1] == kStreamMark) return testStream(req);
  for (std::uintptr_t& slot : req.slot) {
    if (slot == 0) continue;
    MPI_Request r = decodeRequest(slot);
    int done = 0;
    const int rc = MPI_Test(&r, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS || done) {
      // A failed request is complete too: never test it again.
      slot = 0;
    } else {
      slot = encodeRequest(r);
    }
    checkMpi(rc, "MPI_Test", rank_);
  }
  return !req.active();
}

// One MPI_Irecv from MPI_ANY_SOURCE (messages over INT_MAX bytes are not
// supported here: their two-part form could match two different senders).
void MpiTransport::irecvAnySource(void* buf, std::size_t bytes, int tag, Request& req) {
  BC_INTERNAL(!req.active(), "irecvAnySource: request is still active");
  BC_INVALID(tag >= 0 && tag <= maxTag_, rank_, "irecvAnySource: tag " << tag << " outside [0, " << maxTag_ << "]");
  BC_INVALID(buf != nullptr || bytes == 0, rank_, "irecvAnySource: buf is null for " << bytes << " bytes");
  BC_INVALID(bytes <= static_cast<std::size_t>(INT_MAX), rank_,
             "irecvAnySource: " << bytes << " bytes exceeds INT_MAX; receive from a named peer instead");
  MPI_Request r = MPI_REQUEST_NULL;
  checkMpi(MPI_Irecv(buf, static_cast<int>(bytes), MPI_BYTE, MPI_ANY_SOURCE, tag, comm_, &r), "MPI_Irecv", rank_);
  req.slot[0] = encodeRequest(r);
  req.slot[1] = 0;
}

bool MpiTransport::testAnySource(Request& req, int* source) {
  if (!req.active()) return true;
  MPI_Request r = decodeRequest(req.slot[0]);
  int done = 0;
  MPI_Status status;
  const int rc = MPI_Test(&r, &done, &status);
  req.slot[0] = (rc != MPI_SUCCESS || done) ? 0 : encodeRequest(r);
  checkMpi(rc, "MPI_Test", rank_);
  if (done && source != nullptr) *source = status.MPI_SOURCE;
  return done != 0;
}

int MpiTransport::checkedCount(std::size_t count, const char* what) const {
  BC_INVALID(count <= static_cast<std::size_t>(INT_MAX), rank_,
             what << " = " << count << " exceeds INT_MAX elements; split the payload into chunks");
  return static_cast<int>(count);
}

void MpiTransport::nativeAllreduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
                                   Request* req) {
  const int n = checkedCount(count, "nativeAllreduce: count");
  BC_INVALID((send != nullptr && recv != nullptr) || n == 0, rank_, "nativeAllreduce: null buffer for count " << n);
  const MPI_Datatype type = mpi::mpiDataType(dtype);
  const MPI_Op mpiOp = mpi::mpiOp(dtype, op);
  // MPI forbids aliased send/recv buffers; identical pointers mean in place.
  const void* in = (send == recv) ? MPI_IN_PLACE : send;
  runCollective(
      req, "MPI_Allreduce", "MPI_Iallreduce", rank_,
      [&] { return MPI_Allreduce(in, recv, n, type, mpiOp, comm_); },
      [&](MPI_Request* r) { return MPI_Iallreduce(in, recv, n, type, mpiOp, comm_, r); });
}

void MpiTransport::nativeAllgatherv(const void* send, std::size_t sendCount, void* recv, const int* recvCounts,
                                    const int* displs, DataType dtype, Request* req) {
  const int n = checkedCount(sendCount, "nativeAllgatherv: sendCount");
  BC_INVALID(recvCounts != nullptr && displs != nullptr, rank_, "nativeAllgatherv: recvCounts/displs is null");
  BC_INVALID(recvCounts[rank_] == n, rank_,
             "nativeAllgatherv: sendCount " << n << " differs from recvCounts[" << rank_ << "] = " << recvCounts[rank_]);
  BC_INVALID(send != nullptr || n == 0, rank_, "nativeAllgatherv: send is null for count " << n);
  const MPI_Datatype type = mpi::mpiDataType(dtype);
  const void* in = send;
  if (recv != nullptr && send == static_cast<const char*>(recv) + std::size_t(displs[rank_]) * dataTypeSize(dtype)) {
    in = MPI_IN_PLACE;
  }
  runCollective(
      req, "MPI_Allgatherv", "MPI_Iallgatherv", rank_,
      [&] { return MPI_Allgatherv(in, n, type, recv, recvCounts, displs, type, comm_); },
      [&](MPI_Request* r) { return MPI_Iallgatherv(in, n, type, recv, recvCounts, displs, type, comm_, r); });
}

void MpiTransport::nativeBroadcast(void* buf, std::size_t count, DataType dtype, int root, Request* req) {
  const int n = checkedCount(count, "nativeBroadcast: count");
  BC_INVALID(root >= 0 && root < size_, rank_, "nativeBroadcast: root " << root << " outside [0, " << size_ << ")");
  BC_INVALID(buf != nullptr || n == 0, rank_, "nativeBroadcast: buf is null for count " << n);
  const MPI_Datatype type = mpi::mpiDataType(dtype);
  runCollective(
      req, "MPI_Bcast", "MPI_Ibcast", rank_, [&] { return MPI_Bcast(buf, n, type, root, comm_); },
      [&](MPI_Request* r) { return MPI_Ibcast(buf, n, type, root, comm_, r); });
}

void MpiTransport::nativeReduceScatter(const void* send, void* recv, std::size_t recvCount, DataType dtype,
                                       ReduceOp op, Request* req) {
  const int n = checkedCount(recvCount, "nativeReduceScatter: recvCount");
  BC_INVALID((send != nullptr && recv != nullptr) || n == 0, rank_,
             "nativeReduceScatter: null buffer for recvCount " << n);
  const MPI_Datatype type = mpi::mpiDataType(dtype);
  const MPI_Op mpiOp = mpi::mpiOp(dtype, op);
  // In place (send == recv): MPI then reads size()*n elements from recv and
  // leaves this rank's block at its start, which is our contract too.
  const void* in = (send == recv) ? MPI_IN_PLACE : send;
  runCollective(
      req, "MPI_Reduce_scatter_block", "MPI_Ireduce_scatter_block", rank_,
      [&] { return MPI_Reduce_scatter_block(in, recv, n, type, mpiOp, comm_); },
      [&](MPI_Request* r) { return MPI_Ireduce_scatter_block(in, recv, n, type, mpiOp, comm_, r); });
}

void MpiTransport::nativeBarrier(Request* req) {
  runCollective(
      req, "MPI_Barrier", "MPI_Ibarrier", rank_, [&] { return MPI_Barrier(comm_); },
      [&](MPI_Request* r) { return MPI_Ibarrier(comm_, r); });
}

std::unique_ptr<Transport> MpiTransport::split(int color, int key) {
  MPI_Comm out = MPI_COMM_NULL;
  checkMpi(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &out), "MPI_Comm_split", rank_);
  if (out == MPI_COMM_NULL) return nullptr;
  auto child = std::make_unique<MpiTransport>(out, true);
  if (wholeMessages_) child->keepMessagesWhole();
  if (!nodeIds_.empty()) {
    // The child's ranks keep their nodes (a local translation, no message):
    // hier's inter-node level streams too (the point-to-point split keeps
    // messages whole, see keepMessagesWhole).
    MPI_Group parent = MPI_GROUP_NULL;
    MPI_Group group = MPI_GROUP_NULL;
    checkMpi(MPI_Comm_group(comm_, &parent), "MPI_Comm_group", rank_);
    checkMpi(MPI_Comm_group(out, &group), "MPI_Comm_group", rank_);
    std::vector<int> mine(static_cast<std::size_t>(child->size()));
    std::vector<int> theirs(mine.size());
    for (std::size_t r = 0; r < mine.size(); ++r) mine[r] = static_cast<int>(r);
    const int rc = MPI_Group_translate_ranks(group, child->size(), mine.data(), parent, theirs.data());
    MPI_Group_free(&group);
    MPI_Group_free(&parent);
    checkMpi(rc, "MPI_Group_translate_ranks", rank_);
    std::vector<long long> ids(mine.size());
    for (std::size_t r = 0; r < ids.size(); ++r) ids[r] = nodeIds_[static_cast<std::size_t>(theirs[r])];
    child->learnNodes(std::move(ids));
  }
  return child;
}

void MpiTransport::abortJob() {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, 1);
}

std::unique_ptr<SideChannel> MpiTransport::openSideChannel(std::size_t messageBytes) {
  return MpiSideChannel::open(comm_, messageBytes);
}

void MpiTransport::attachSharedMemory(std::unique_ptr<SharedMemoryEngine> engine) {
  sharedMemory_ = std::move(engine);
}

std::unique_ptr<MpiTransport> MpiTransport::splitSharedMemory() {
  MPI_Comm out = MPI_COMM_NULL;
  checkMpi(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &out),
           "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)", rank_);
  BC_INTERNAL(out != MPI_COMM_NULL, "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) returned MPI_COMM_NULL");
  return std::make_unique<MpiTransport>(out, true);
}

std::vector<long long> MpiTransport::nodeIdOfEachRank() {
  std::vector<long long> ids = nodeIds();
  learnNodes(ids);
  return ids;
}

bool MpiTransport::streams(std::size_t bytes, int peer) const {
  return pieceBytes_ > 0 && bytes > pieceBytes_ &&
         nodeIds_[static_cast<std::size_t>(peer)] != nodeIds_[static_cast<std::size_t>(rank_)];
}

void MpiTransport::learnNodes(std::vector<long long> ids) {
  nodeIds_ = std::move(ids);
  pieceBytes_ = wholeMessages_ ? 0 : static_cast<std::size_t>(core::tunableInt(core::kTunableMpiPieceBytes));
}

std::vector<long long> MpiTransport::nodeIds() {
  // Leader = lowest rank of this communicator on my node; everyone learns everyone's.
  std::unique_ptr<MpiTransport> node = splitSharedMemory();
  long long leader = rank_;
  checkMpi(MPI_Allreduce(MPI_IN_PLACE, &leader, 1, MPI_LONG_LONG, MPI_MIN, node->comm_), "MPI_Allreduce(node leader)",
           rank_);
  std::vector<long long> ids(static_cast<std::size_t>(size_));
  checkMpi(MPI_Allgather(&leader, 1, MPI_LONG_LONG, ids.data(), 1, MPI_LONG_LONG, comm_), "MPI_Allgather(node ids)",
           rank_);
  return ids;
}

void finalizeMpiIfOwned() {
  std::lock_guard lock(g_initMutex);
  if (!g_weInitialized || mpiFinalized()) return;
  // Our datatypes and ops are freed inside MPI_Finalize (see mpi_types.h).
  checkMpi(MPI_Finalize(), "MPI_Finalize", -1);
}

bool mpiInitializedByBoostcomm() {
  std::lock_guard lock(g_initMutex);
  return g_weInitialized;
}

int mpiThreadLevel() {
  int level = MPI_THREAD_SINGLE;
  checkMpi(MPI_Query_thread(&level), "MPI_Query_thread", -1);
  return level;
}

bool MpiTransport::callableFromAnyThread() const { return mpiThreadLevel() >= MPI_THREAD_MULTIPLE; }

}  // namespace boostcomm::transport
