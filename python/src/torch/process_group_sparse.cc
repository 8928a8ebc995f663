// ProcessGroupBoostcomm::allreduce of a sparse COO tensor (SUM), as gloo
// offers it (torch's DistributedTest: test_sparse_all_reduce_sum), on the
// communicator's collectives:
//   1. a small blocking allgather of every rank's layout (nnz, sparse and
//      dense dimensions, sizes, dtype): a rank whose tensor differs is
//      reported on every rank, naming it, before any data moves;
//   2. allgatherv of every rank's indices, then of its values (as bytes);
//   3. every rank builds the same sparse tensor from the gathered entries in
//      rank order and coalesces it (duplicates summed), so all ranks end with
//      the same bits, written into the caller's tensor.
// Each rank receives every rank's entries: nnz x (sparse_dim x 8 + value
// bytes) per rank, as gloo's sparse allreduce moves.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <memory>
#include <sstream>
#include <vector>

#include "torch/process_group.h"
#include "torch/tensor_view.h"

namespace boostcomm::python {

namespace {

// [nnz, sparse_dim, dim, dtype, sizes (kMaxDims, padded with -1)]
constexpr int kMaxDims = 8;
constexpr std::size_t kRecord = 4 + kMaxDims;

std::string layoutText(const std::int64_t* r) {
  std::ostringstream os;
  os << "sizes [";
  for (std::int64_t d = 0; d < r[2]; ++d) os << (d ? ", " : "") << r[4 + d];
  os << "], " << r[1] << " sparse dimension(s), dtype " << static_cast<at::ScalarType>(r[3]);
  return os.str();
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupBoostcomm::allreduceSparse(at::Tensor& t, const c10d::AllreduceOptions& opts) {
  TORCH_CHECK(opts.reduceOp.op_ == c10d::ReduceOp::SUM, "boostcomm: allreduce of a sparse tensor supports SUM only, got ",
              opts.reduceOp.op_, " (rank ", rank_, ")");
  TORCH_CHECK(t.layout() == at::kSparse, "boostcomm: allreduce tensor has layout ", t.layout(), " (rank ", rank_,
              "); boostcomm supports dense (strided) and sparse COO tensors");
  TORCH_CHECK(t.device().is_cpu(), "boostcomm: allreduce tensor is on device ", t.device(), " (rank ", rank_,
              "); this build of boostcomm supports: cpu");
  TORCH_CHECK(t.dim() <= kMaxDims, "boostcomm: allreduce of a sparse tensor of ", t.dim(),
              " dimensions: at most ", kMaxDims, " (rank ", rank_, ")");
  const at::Tensor in = t.coalesce();
  const at::Tensor indices = in._indices().t().contiguous();  // [nnz, sparse_dim]: one rank's block is contiguous
  const at::Tensor values = in._values().contiguous();        // [nnz, dense sizes...]
  at::Tensor mine = at::full({static_cast<std::int64_t>(kRecord)}, -1, at::kLong);
  mine[0] = in._nnz();
  mine[1] = in.sparse_dim();
  mine[2] = in.dim();
  mine[3] = static_cast<std::int64_t>(in.scalar_type());
  for (std::int64_t d = 0; d < in.dim(); ++d) mine[4 + d] = in.size(d);
  const int n = size_;
  at::Tensor all = at::empty({static_cast<std::int64_t>(kRecord) * n}, at::kLong);
  comm_->allgather(viewOf(mine, "sparse allreduce layout", rank_), viewOf(all, "sparse allreduce layout", rank_));
  const std::int64_t* rec = all.data_ptr<std::int64_t>();
  const std::int64_t* own = rec + static_cast<std::size_t>(rank_) * kRecord;
  std::int64_t total = 0;
  for (int r = 0; r < n; ++r) {
    const std::int64_t* other = rec + static_cast<std::size_t>(r) * kRecord;
    TORCH_CHECK(std::equal(other + 1, other + kRecord, own + 1), "boostcomm: allreduce of a sparse tensor: rank ", r,
                " has ", layoutText(other), ", rank ", rank_, " has ", layoutText(own));
    total += other[0];
  }
  const std::size_t indexBytes = static_cast<std::size_t>(in.sparse_dim()) * sizeof(std::int64_t);
  // Bytes of one entry's value: the dense part's elements.
  const std::int64_t denseElems = [&] {
    std::int64_t e = 1;
    for (std::int64_t d = in.sparse_dim(); d < in.dim(); ++d) e *= in.size(d);
    return e;
  }();
  const std::size_t entryValueBytes = static_cast<std::size_t>(denseElems) * values.element_size();
  auto indexCounts = std::make_shared<std::vector<std::size_t>>(static_cast<std::size_t>(n));
  auto valueCounts = std::make_shared<std::vector<std::size_t>>(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    const auto nnz = static_cast<std::size_t>(rec[static_cast<std::size_t>(r) * kRecord]);
    (*indexCounts)[static_cast<std::size_t>(r)] = nnz * indexBytes;
    (*valueCounts)[static_cast<std::size_t>(r)] = nnz * entryValueBytes;
  }
  at::Tensor allIndices = at::empty({total, in.sparse_dim()}, at::kLong);
  std::vector<std::int64_t> valueShape{total};
  for (std::int64_t d = in.sparse_dim(); d < in.dim(); ++d) valueShape.push_back(in.size(d));
  at::Tensor allValues = at::empty(valueShape, values.options());
  comm_->allgatherv(rawBytesOf(indices, "sparse allreduce indices", rank_),
                    rawBytesOf(allIndices, "sparse allreduce indices", rank_), *indexCounts, exactValues());
  const View sendValues = rawBytesOf(values, "sparse allreduce values", rank_);
  const View recvValues = rawBytesOf(allValues, "sparse allreduce values", rank_);
  return enqueue(
      c10d::OpType::ALLREDUCE, {t},
      [sendValues, recvValues, valueCounts, values, allValues](Communicator& c) {
        return c.allgathervAsync(sendValues, recvValues, *valueCounts, exactValues());
      },
      [t, allIndices, allValues] {
        at::Tensor sum = at::sparse_coo_tensor(allIndices.t(), allValues, t.sizes()).coalesce();
        at::Tensor out = t;
        out.copy_(sum);
      });
}

}  // namespace boostcomm::python
