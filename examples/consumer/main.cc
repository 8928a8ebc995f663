// The smallest useful boostcomm program: every rank contributes a "gradient"
// filled with rank + 1, sums it across ranks, and checks the result.
// Built by examples/consumer/check.sh against an installed boostcomm.
//
//   mpirun -np 2 ./consumer
#include <boostcomm/boostcomm.h>

#include <cstdio>
#include <span>
#include <vector>

int main() {
  try {
    auto comm = boostcomm::Communicator::createMpiWorld();
    const int rank = comm->rank();
    const int size = comm->size();

    // 1 Mi floats (4 MiB), large enough for the non-native algorithms.
    constexpr std::size_t kCount = std::size_t{1} << 20;
    std::vector<float> grad(kCount, static_cast<float>(rank + 1));
    // Integers this small sum exactly in float, so == is the right check.
    const float expected = static_cast<float>(size * (size + 1) / 2);

    // Blocking, in place (send and recv are the same memory).
    comm->allreduce(std::span(grad), std::span(grad), boostcomm::ReduceOp::kSum);
    std::size_t wrong = 0;
    for (float v : grad) wrong += (v != expected);

    // Asynchronous, out of place: the Work completes when wait() returns.
    std::vector<float> sum(kCount);
    std::vector<float> ones(kCount, 1.0f);
    boostcomm::Work work = comm->allreduceAsync(std::span(ones), std::span(sum), boostcomm::ReduceOp::kSum);
    work.wait();
    for (float v : sum) wrong += (v != static_cast<float>(size));

    std::printf("consumer: rank %d/%d boostcomm %s: allreduce %s (async algorithm: %s)\n", rank, size,
                boostcomm::versionString(), wrong == 0 ? "ok" : "WRONG", work.algorithm());
    comm->finalize();
    return wrong == 0 ? 0 : 1;
  } catch (const boostcomm::Error& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
}
