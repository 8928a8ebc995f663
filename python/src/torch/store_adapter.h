// torch's c10d::Store (TCPStore for env:// and torchrun, FileStore for
// file://, the PrefixStore torch wraps each group's store in) as boostcomm's
// KeyValueStore, for Communicator::createFromStore.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <string>
#include <utility>

#include "boostcomm/store.h"

namespace boostcomm::python {

class C10dStore final : public KeyValueStore {
 public:
  C10dStore(c10::intrusive_ptr<c10d::Store> store, std::string where)
      : store_(std::move(store)), where_(std::move(where)) {}

  void set(const std::string& key, const std::vector<std::uint8_t>& value) override { store_->set(key, value); }
  std::vector<std::uint8_t> get(const std::string& key) override { return store_->get(key); }
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    store_->wait(keys, timeout);
  }
  std::string describe() const override { return where_; }

 private:
  c10::intrusive_ptr<c10d::Store> store_;
  std::string where_;
};

}  // namespace boostcomm::python
