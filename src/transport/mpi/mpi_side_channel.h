// The MPI transport's side channel (transport/side_channel.h): a duplicate of
// its communicator, MPI_ERRORS_RETURN, one posted any-source receive of the
// message size, nonblocking sends. Needs MPI_THREAD_MULTIPLE (the watchdog
// calls MPI next to the caller's thread); without it there is none.
// Messages are small (< 4 KiB for the control channel: one eager message over
// shared memory and TCP), so one posted receive takes any of them.
#pragma once

#include "transport/mpi/mpi_c.h"

#include <cstddef>
#include <deque>
#include <memory>
#include <vector>

#include "transport/side_channel.h"

namespace boostcomm::transport {

class MpiSideChannel final : public SideChannel {
 public:
  // Collective over `comm` (MPI_Comm_dup). Null without MPI_THREAD_MULTIPLE
  // or when the dup fails.
  static std::unique_ptr<MpiSideChannel> open(MPI_Comm comm, std::size_t messageBytes);
  ~MpiSideChannel() override;
  MpiSideChannel(const MpiSideChannel&) = delete;
  MpiSideChannel& operator=(const MpiSideChannel&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void send(int peer, const void* message) override;
  bool poll(void* out) override;
  void flush(int waitMs) override;

 private:
  // How long closing waits for every rank to close too (see the destructor).
  static constexpr int kCloseWaitMs = 2000;
  MpiSideChannel(MPI_Comm comm, std::size_t messageBytes);
  void postReceive();

  MPI_Comm comm_;
  std::size_t bytes_;
  int rank_ = 0;
  int size_ = 0;
  MPI_Request recvRequest_ = MPI_REQUEST_NULL;
  std::vector<unsigned char> incoming_;
  struct Outgoing {
    std::vector<unsigned char> message;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  std::deque<Outgoing> outgoing_;  // deque: a message's address stays valid while others are added
};

}  // namespace boostcomm::transport
