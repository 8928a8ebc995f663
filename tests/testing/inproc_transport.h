// In-process transport: N ranks as threads of one process, for unit tests of
// world sizes 1-16 without mpirun.
//
// Point-to-point is a rendezvous: a send and a receive with the same (group,
// source, destination, tag) match in posting order and the bytes are copied
// straight from the sender's buffer into the receiver's. Native collectives
// use an arrival protocol: each rank deposits its arguments for collective #k
// of its group; the last to arrive checks that they agree, computes every
// rank's result (reducing in rank order, so all ranks get identical bits) and
// completes all requests. Disagreeing arguments complete every rank's request
// with Error{kMismatch} naming the ranks, instead of hanging.
//
// Request: slot[0] holds an id into the fabric's table of pending requests.
// One mutex guards the fabric; this transport is for tests, not for speed.
#pragma once

#include <climits>
#include <cstdint>
#include <memory>
#include <vector>

#include "transport/transport.h"

namespace boostcomm::transport {

namespace inproc {
struct FabricState;
}

class InProcFabric {
 public:
  // One transport per rank (element i is rank i), sharing one new fabric.
  // maxTag: what maxTag() reports, and the largest tag isend/irecv accept
  // (32767, the MPI standard's minimum MPI_TAG_UB, tests the tag windows).
  static std::vector<std::unique_ptr<Transport>> create(int worldSize, int maxTag = INT_MAX);
};

class InProcTransport final : public Transport {
 public:
  InProcTransport(std::shared_ptr<inproc::FabricState> fabric, std::uint64_t groupId, int rank, int size);
  ~InProcTransport() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "inproc"; }
  int maxTag() const override;

  // As MPI: a receive may be larger than its message (the inline fingerprint header relies on it).
  bool acceptsShorterMessages() const override { return true; }
  // What runsNativesInTurn() reports (false unless set): the share clock's
  // tests drive the natives' completions in call order themselves.
  void setNativesInTurn(bool inTurn) { nativesInTurn_ = inTurn; }
  bool runsNativesInTurn() const override { return nativesInTurn_; }
  void isend(const void* buf, std::size_t bytes, int peer, int tag, Request& req) override;
  void irecv(void* buf, std::size_t bytes, int peer, int tag, Request& req) override;
  void isendPieces(const core::Piece* pieces, std::size_t count, int peer, int tag, Request& req) override;
  void irecvPieces(const core::Piece* pieces, std::size_t count, int peer, int tag, Request& req) override;
  bool test(Request& req) override;

  void nativeAllreduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
                       Request* req) override;
  void nativeAllgatherv(const void* send, std::size_t sendCount, void* recv, const int* recvCounts,
                        const int* displs, DataType dtype, Request* req) override;
  void nativeBroadcast(void* buf, std::size_t count, DataType dtype, int root, Request* req) override;
  void nativeReduceScatter(const void* send, void* recv, std::size_t recvCount, DataType dtype, ReduceOp op,
                           Request* req) override;
  void nativeBarrier(Request* req) override;

  std::unique_ptr<Transport> split(int color, int key) override;

 private:
  std::shared_ptr<inproc::FabricState> fabric_;
  std::uint64_t groupId_;
  int rank_;
  int size_;
  bool nativesInTurn_ = false;
  std::uint64_t collectiveSeq_ = 0;  // next collective number of this rank in its group; fabric mutex
};

}  // namespace boostcomm::transport
