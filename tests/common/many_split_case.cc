#include "common/many_split_case.h"

#include <cstring>
#include <exception>

#include "common/test_data.h"

namespace boostcomm::testing {
namespace {

constexpr unsigned char kGuard = 0xA5;

struct Tensors {
  std::vector<std::vector<unsigned char>> memory;
  std::vector<View> views;
  std::vector<ConstView> constViews;

  Tensors(const std::vector<std::size_t>& counts, std::size_t factor, DataType dtype) {
    const std::size_t es = dataTypeSize(dtype);
    for (std::size_t n : counts) memory.emplace_back(n * factor * es + 1, kGuard);
    for (std::size_t i = 0; i < counts.size(); ++i) {
      void* data = counts[i] == 0 ? nullptr : memory[i].data();
      views.emplace_back(data, counts[i] * factor, dtype);
      constViews.emplace_back(data, counts[i] * factor, dtype);
    }
  }
  // Block r of every tensor, rank-major (the *PerRank forms' list).
  template <typename V>
  std::vector<V> blocks(const std::vector<std::size_t>& counts, std::size_t ranks, DataType dtype) {
    std::vector<V> out;
    const std::size_t es = dataTypeSize(dtype);
    for (std::size_t r = 0; r < ranks; ++r) {
      for (std::size_t i = 0; i < counts.size(); ++i) {
        out.emplace_back(counts[i] == 0 ? nullptr : memory[i].data() + r * counts[i] * es, counts[i], dtype);
      }
    }
    return out;
  }
  std::string guardsIntact() const {
    for (std::size_t i = 0; i < memory.size(); ++i)
      if (memory[i].back() != kGuard) return "guard byte after output tensor " + std::to_string(i) + " overwritten";
    return {};
  }
};

}  // namespace

std::string describe(const SplitCase& c, const char* collective) {
  return std::string(collective) + (c.perRank ? "PerRank " : " ") + std::string(toString(c.dtype)) + " " + std::string(toString(c.op)) +
         " algo '" + c.algorithm + "' " + std::to_string(c.counts.size()) + " tensors" + (c.async ? " async" : "");
}

std::string runAllgatherMany(Communicator& comm, const SplitCase& c, std::vector<unsigned char>* outputBytes) {
  const std::size_t ranks = static_cast<std::size_t>(comm.size());
  const std::size_t es = dataTypeSize(c.dtype);
  Tensors send(c.counts, 1, c.dtype);
  Tensors recv(c.counts, ranks, c.dtype);
  for (std::size_t i = 0; i < c.counts.size(); ++i)
    fillBytes(send.memory[i].data(), c.counts[i] * es, c.seed + i, comm.rank());
  CallOptions options;
  options.algorithm = c.algorithm;
  try {
    if (c.perRank) {
      const std::vector<View> byRank = recv.blocks<View>(c.counts, ranks, c.dtype);
      if (c.async) {
        comm.allgatherManyPerRankAsync(send.constViews, byRank, options).wait();
      } else {
        comm.allgatherManyPerRank(send.constViews, byRank, options);
      }
    } else if (c.async) {
      comm.allgatherManyAsync(send.constViews, recv.views, options).wait();
    } else {
      comm.allgatherMany(send.constViews, recv.views, options);
    }
  } catch (const std::exception& e) {
    return std::string("threw ") + e.what();
  }
  if (std::string bad = recv.guardsIntact(); !bad.empty()) return bad;
  std::vector<unsigned char> expected;
  for (std::size_t i = 0; i < c.counts.size(); ++i) {
    const std::size_t bytes = c.counts[i] * es;
    expected.resize(bytes);
    for (std::size_t r = 0; r < ranks; ++r) {
      fillBytes(expected.data(), bytes, c.seed + i, static_cast<int>(r));
      if (bytes > 0 && std::memcmp(recv.memory[i].data() + r * bytes, expected.data(), bytes) != 0)
        return "tensor " + std::to_string(i) + " block " + std::to_string(r) + " differs from rank " +
               std::to_string(r) + "'s input";
    }
    if (outputBytes != nullptr) outputBytes->insert(outputBytes->end(), recv.memory[i].begin(), recv.memory[i].end());
  }
  return {};
}

std::string runReduceScatterMany(Communicator& comm, const SplitCase& c) {
  const std::size_t ranks = static_cast<std::size_t>(comm.size());
  Tensors send(c.counts, ranks, c.dtype);
  Tensors recv(c.counts, 1, c.dtype);
  for (std::size_t i = 0; i < c.counts.size(); ++i)
    fillReduceInput(send.memory[i].data(), c.dtype, c.op, Pattern::kExact, c.seed + i, comm.rank(), 0,
                    c.counts[i] * ranks);
  CallOptions options;
  options.algorithm = c.algorithm;
  try {
    if (c.perRank) {
      const std::vector<ConstView> byRank = send.blocks<ConstView>(c.counts, ranks, c.dtype);
      if (c.async) {
        comm.reduceScatterManyPerRankAsync(byRank, recv.views, c.op, options).wait();
      } else {
        comm.reduceScatterManyPerRank(byRank, recv.views, c.op, options);
      }
    } else if (c.async) {
      comm.reduceScatterManyAsync(send.constViews, recv.views, c.op, options).wait();
    } else {
      comm.reduceScatterMany(send.constViews, recv.views, c.op, options);
    }
  } catch (const std::exception& e) {
    return std::string("threw ") + e.what();
  }
  if (std::string bad = recv.guardsIntact(); !bad.empty()) return bad;
  for (std::size_t i = 0; i < c.counts.size(); ++i) {
    const std::string wrong = checkReduction(recv.memory[i].data(), c.dtype, c.op, Pattern::kExact, c.seed + i,
                                             comm.size(), c.counts[i] * static_cast<std::size_t>(comm.rank()),
                                             c.counts[i]);
    if (!wrong.empty()) return "tensor " + std::to_string(i) + ": " + wrong;
  }
  return {};
}

}  // namespace boostcomm::testing
