// A rendezvous key-value store: how processes that are not one MPI job find
// each other (torch's c10d Store -- TCPStore for env:// and torchrun,
// FileStore for file:// -- adapts to it in python/src/torch/store_adapter.h).
//
// Communicator::createFromStore builds a communicator over Gloo's TCP
// transport (src/transport/gloo/) whose addresses and node names travel
// through the store. Keys are written once; get waits for its key.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace boostcomm {

class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;
  virtual void set(const std::string& key, const std::vector<std::uint8_t>& value) = 0;
  // Waits for the key (up to the store's own timeout), then returns its value.
  virtual std::vector<std::uint8_t> get(const std::string& key) = 0;
  // Waits until every key exists; throws when `timeout` passes first.
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  // For error messages: where the store lives ("tcp 10.0.0.1:29500", "file /tmp/x").
  virtual std::string describe() const { return "store"; }
};

}  // namespace boostcomm
