// StoreBridge: boostcomm's KeyValueStore (include/boostcomm/store.h) seen as
// Gloo's rendezvous store, under a key prefix, with store failures turned
// into boostcomm errors that name the store and the keys waited for.
#pragma once

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "boostcomm/store.h"

namespace boostcomm::transport {

class StoreBridge final : public gloo::rendezvous::Store {
 public:
  StoreBridge(std::shared_ptr<KeyValueStore> store, std::string prefix, std::chrono::milliseconds timeout,
              int rank);

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

  // The same store seen under `prefix` + "/" + sub.
  StoreBridge child(const std::string& sub) const { return StoreBridge(store_, prefix_ + "/" + sub, timeout_, rank_); }
  const std::string& prefix() const { return prefix_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  const std::shared_ptr<KeyValueStore>& store() const { return store_; }
  std::string describe() const { return store_->describe(); }

 private:
  std::string full(const std::string& key) const { return prefix_ + "/" + key; }

  std::shared_ptr<KeyValueStore> store_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
  int rank_;
};

}  // namespace boostcomm::transport
