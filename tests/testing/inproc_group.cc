#include "testing/inproc_group.h"

#include <exception>
#include <thread>

#include "api/communicator_impl.h"
#include "testing/inproc_transport.h"

namespace boostcomm::detail {

std::vector<std::shared_ptr<Communicator>> createInProcessGroup(int worldSize, int maxTag) {
  std::vector<std::shared_ptr<Communicator>> group;
  for (auto& t : transport::InProcFabric::create(worldSize, maxTag)) {
    group.push_back(std::make_shared<Communicator>(std::make_unique<CommunicatorImpl>(std::move(t), nullptr)));
  }
  return group;
}

void runInProcess(int worldSize, const std::function<void(Communicator&)>& fn, int maxTag) {
  auto group = createInProcessGroup(worldSize, maxTag);
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(worldSize));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(worldSize));
  for (int r = 0; r < worldSize; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(*group[static_cast<std::size_t>(r)]);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace boostcomm::detail
