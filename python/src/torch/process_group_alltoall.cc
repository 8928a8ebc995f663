// ProcessGroupBoostcomm::alltoall_base (dist.all_to_all_single), on the
// communicator's collectives:
//   1. a small blocking allgather of every rank's (input splits, output
//      splits), so every rank sees the whole split matrix: a rank whose
//      output splits disagree with what the others send it, or whose tensor
//      sizes disagree with its splits, is reported on every rank, naming it,
//      before any data moves (agreement before error);
//   2. an allgatherv of every rank's whole input, from which each rank copies
//      the blocks addressed to it.
// Step 2 moves size x the data a pairwise exchange would: correct, not yet
// economical (a pairwise schedule is future work, issue 14 note).
#include <c10/util/Exception.h>

#include <memory>
#include <sstream>

#include "torch/process_group.h"
#include "torch/tensor_view.h"

namespace boostcomm::python {

namespace {

std::vector<std::int64_t> splitsOrEqual(const std::vector<std::int64_t>& splits, const at::Tensor& t, int size,
                                        const char* which) {
  if (!splits.empty()) return splits;
  const std::int64_t rows = t.dim() == 0 ? t.numel() : t.size(0);
  TORCH_CHECK(rows % size == 0, "boostcomm: alltoall_base ", which, " has ", rows,
              " rows, not divisible by the group size ", size, " (pass split sizes)");
  return std::vector<std::int64_t>(static_cast<std::size_t>(size), rows / size);
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupBoostcomm::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                    std::vector<std::int64_t>& outputSplitSizes,
                                                                    std::vector<std::int64_t>& inputSplitSizes,
                                                                    const c10d::AllToAllOptions& opts) {
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "boostcomm: alltoall_base output and input dtypes differ");
  viewOf(input, "alltoall_base input", rank_);
  viewOf(output, "alltoall_base output", rank_);
  const int n = size_;
  const std::vector<std::int64_t> in = splitsOrEqual(inputSplitSizes, input, n, "input");
  const std::vector<std::int64_t> out = splitsOrEqual(outputSplitSizes, output, n, "output");
  const std::int64_t inRows = input.dim() == 0 ? input.numel() : input.size(0);
  const std::int64_t outRows = output.dim() == 0 ? output.numel() : output.size(0);
  const std::int64_t rowElems = inRows ? input.numel() / inRows : (outRows ? output.numel() / outRows : 1);
  // Local facts, checked after the exchange so every rank raises together.
  std::int64_t inSum = 0, outSum = 0;
  for (int j = 0; j < n; ++j) {
    inSum += j < static_cast<int>(in.size()) ? in[static_cast<std::size_t>(j)] : -1;
    outSum += j < static_cast<int>(out.size()) ? out[static_cast<std::size_t>(j)] : -1;
  }
  const bool localOk = static_cast<int>(in.size()) == n && static_cast<int>(out.size()) == n && inSum == inRows &&
                       outSum == outRows && (outRows == 0 || output.numel() / outRows == rowElems);
  // [in splits..., out splits..., localOk]
  const std::size_t w = 2 * static_cast<std::size_t>(n) + 1;
  at::Tensor mine = at::zeros({static_cast<std::int64_t>(w)}, at::kLong);
  for (int j = 0; j < n && localOk; ++j) {
    mine[j] = in[static_cast<std::size_t>(j)];
    mine[n + j] = out[static_cast<std::size_t>(j)];
  }
  mine[2 * n] = localOk ? 1 : 0;
  at::Tensor all = at::empty({static_cast<std::int64_t>(w) * n}, at::kLong);
  comm_->allgather(viewOf(mine, "alltoall splits", rank_), viewOf(all, "alltoall splits", rank_));
  const std::int64_t* m = all.data_ptr<std::int64_t>();
  auto at2 = [&](int r, int k) { return m[static_cast<std::size_t>(r) * w + static_cast<std::size_t>(k)]; };
  for (int r = 0; r < n; ++r) {
    TORCH_CHECK(at2(r, 2 * n) == 1, "boostcomm: alltoall_base on rank ", r,
                ": split sizes must have one entry per rank and sum to the tensor's rows (rank ", rank_, " reports)");
  }
  for (int r = 0; r < n; ++r) {
    for (int j = 0; j < n; ++j) {
      TORCH_CHECK(at2(r, j) == at2(j, n + r), "boostcomm: alltoall_base split sizes disagree: rank ", r, " sends ",
                  at2(r, j), " rows to rank ", j, ", which expects ", at2(j, n + r), " (rank ", rank_, " reports)");
    }
  }
  auto counts = std::make_shared<std::vector<std::size_t>>(static_cast<std::size_t>(n));
  std::size_t total = 0;
  for (int r = 0; r < n; ++r) {
    std::int64_t rows = 0;
    for (int j = 0; j < n; ++j) rows += at2(r, j);
    (*counts)[static_cast<std::size_t>(r)] = static_cast<std::size_t>(rows * rowElems);
    total += (*counts)[static_cast<std::size_t>(r)];
  }
  // Where each block addressed to this rank starts in the gathered buffer.
  std::vector<std::int64_t> from(static_cast<std::size_t>(n)), len(static_cast<std::size_t>(n));
  std::int64_t base = 0;
  for (int r = 0; r < n; ++r) {
    std::int64_t before = 0;
    for (int j = 0; j < rank_; ++j) before += at2(r, j);
    from[static_cast<std::size_t>(r)] = base + before * rowElems;
    len[static_cast<std::size_t>(r)] = at2(r, rank_) * rowElems;
    base += static_cast<std::int64_t>((*counts)[static_cast<std::size_t>(r)]);
  }
  at::Tensor flatIn = input.reshape({-1});
  at::Tensor gathered = at::empty({static_cast<std::int64_t>(total)}, input.options());
  const View send = viewOf(flatIn, "alltoall_base input", rank_);
  const View recv = viewOf(gathered, "alltoall_base buffer", rank_);
  at::Tensor flatOut = output.view({-1});
  return enqueue(
      c10d::OpType::ALLTOALL_BASE, {output},
      [send, recv, counts, flatIn, gathered](Communicator& c) {
        return c.allgathervAsync(send, recv, *counts, exactValues());
      },
      [gathered, flatOut, from, len] {
        std::int64_t at = 0;
        for (std::size_t r = 0; r < from.size(); ++r) {
          if (len[r]) flatOut.narrow(0, at, len[r]).copy_(gathered.narrow(0, from[r], len[r]));
          at += len[r];
        }
      });
}

}  // namespace boostcomm::python
