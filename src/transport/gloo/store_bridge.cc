#include "transport/gloo/store_bridge.h"

#include <exception>
#include <sstream>

#include "boostcomm/error.h"

namespace boostcomm::transport {

StoreBridge::StoreBridge(std::shared_ptr<KeyValueStore> store, std::string prefix, std::chrono::milliseconds timeout,
                         int rank)
    : store_(std::move(store)), prefix_(std::move(prefix)), timeout_(timeout), rank_(rank) {}

void StoreBridge::set(const std::string& key, const std::vector<char>& data) {
  try {
    store_->set(full(key), std::vector<std::uint8_t>(data.begin(), data.end()));
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(ErrorCategory::kTransport, rank_,
                "store rendezvous: setting key '" + full(key) + "' on " + describe() + " failed: " + e.what());
  }
}

std::vector<char> StoreBridge::get(const std::string& key) {
  wait({key}, timeout_);
  try {
    const std::vector<std::uint8_t> v = store_->get(full(key));
    return std::vector<char>(v.begin(), v.end());
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(ErrorCategory::kTransport, rank_,
                "store rendezvous: reading key '" + full(key) + "' from " + describe() + " failed: " + e.what());
  }
}

void StoreBridge::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  std::vector<std::string> prefixed;
  prefixed.reserve(keys.size());
  for (const std::string& k : keys) prefixed.push_back(full(k));
  try {
    store_->wait(prefixed, timeout);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    std::ostringstream os;
    os << "store rendezvous: waiting " << timeout.count() << " ms on " << describe() << " for";
    for (const std::string& k : prefixed) os << " '" << k << "'";
    os << " failed (a rank did not join, or the store is unreachable): " << e.what();
    throw Error(ErrorCategory::kTimeout, rank_, os.str());
  }
}

}  // namespace boostcomm::transport
