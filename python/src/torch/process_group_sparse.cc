// ProcessGroupBoostcomm::allreduce of a sparse COO tensor (SUM), as gloo
// offers it (torch's DistributedTest: test_sparse_all_reduce_sum), on the
// communicator's collectives:
//   1. a small blocking allgather of every rank's layout (whether its call is
//      one this supports: SUM, CPU, at most kMaxDims dimensions; nnz, sparse
//      and dense dimensions, sizes, dtype): a rank whose call is refused or
//      whose tensor differs is reported on every rank, naming it, before any
//      index or value moves (agreement before error, as alltoall_base);
//   2. a blocking allgatherv of every rank's indices, then an asynchronous one
//      of its values (both as bytes: any dtype);
//   3. every rank builds the same sparse tensor from all the entries, in rank
//      order, and coalesces it (duplicates summed in the order of coalesce's
//      sort, the same on every rank), so all ranks end with the same bits,
//      written into the caller's tensor.
// Each rank receives every rank's entries (nnz x (sparse_dim x 8 + value
// bytes) per rank), as with gloo's sparse allreduce.
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

// [refusal, reduce op, nnz, sparse_dim, dim, dtype, sizes (kMaxDims, padded with -1)]
constexpr std::int64_t kMaxDims = 8;
constexpr std::size_t kRecord = 6 + kMaxDims;
enum Refusal : std::int64_t { kAccepted = 0, kNotSum = 1, kNotCpu = 2, kTooManyDims = 3 };

std::string layoutText(const std::int64_t* r) {
  std::ostringstream os;
  os << "sizes [";
  for (std::int64_t d = 0; d < r[4]; ++d) os << (d ? ", " : "") << r[6 + d];
  os << "], " << r[3] << " sparse dimension(s), dtype " << static_cast<at::ScalarType>(r[5]);
  return os.str();
}

std::string refusalText(const std::int64_t* r) {
  std::ostringstream os;
  switch (r[0]) {
    case kNotSum: os << "passed reduce op " << r[1] << " (c10d::ReduceOp); a sparse allreduce supports SUM only"; break;
    case kNotCpu: os << "passed a tensor that is not on the CPU; this build of boostcomm supports: cpu"; break;
    default: os << "passed a tensor of " << r[4] << " dimensions; a sparse allreduce takes at most " << kMaxDims; break;
  }
  return os.str();
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupBoostcomm::allreduceSparse(at::Tensor& t, const c10d::AllreduceOptions& opts) {
  // What this rank can take part in is checked on every rank, after the
  // exchange: a rank that raised here alone would leave the others waiting.
  std::int64_t refusal = kAccepted;
  if (opts.reduceOp.op_ != c10d::ReduceOp::SUM) refusal = kNotSum;
  if (!t.device().is_cpu()) refusal = kNotCpu;
  if (t.dim() > kMaxDims) refusal = kTooManyDims;
  at::Tensor in = refusal == kAccepted ? t.coalesce() : t;
  at::Tensor mine = at::full({static_cast<std::int64_t>(kRecord)}, -1, at::kLong);
  mine[0] = refusal;
  mine[1] = static_cast<std::int64_t>(opts.reduceOp.op_);
  mine[2] = refusal == kAccepted ? in._nnz() : 0;
  mine[3] = in.sparse_dim();
  mine[4] = in.dim();
  mine[5] = static_cast<std::int64_t>(in.scalar_type());
  for (std::int64_t d = 0; d < std::min(in.dim(), kMaxDims); ++d) mine[6 + d] = in.size(d);
  const int n = size_;
  at::Tensor all = at::empty({static_cast<std::int64_t>(kRecord) * n}, at::kLong);
  comm_->allgather(viewOf(mine, "sparse allreduce layout", rank_), viewOf(all, "sparse allreduce layout", rank_));
  const std::int64_t* rec = all.data_ptr<std::int64_t>();
  auto of = [&](int r) { return rec + static_cast<std::size_t>(r) * kRecord; };
  for (int r = 0; r < n; ++r) {
    TORCH_CHECK(of(r)[0] == kAccepted, "boostcomm: allreduce of a sparse tensor: rank ", r, " ", refusalText(of(r)),
                " (rank ", rank_, " reports)");
  }
  std::int64_t total = 0;
  for (int r = 0; r < n; ++r) {
    TORCH_CHECK(std::equal(of(r) + 3, of(r) + kRecord, of(rank_) + 3), "boostcomm: allreduce of a sparse tensor: rank ",
                r, " has ", layoutText(of(r)), ", rank ", rank_, " has ", layoutText(of(rank_)));
    total += of(r)[2];
  }
  const at::Tensor indices = in._indices().t().contiguous();  // [nnz, sparse_dim]: one rank's block is contiguous
  const at::Tensor values = in._values().contiguous();        // [nnz, dense sizes...]
  std::int64_t denseElems = 1;
  for (std::int64_t d = in.sparse_dim(); d < in.dim(); ++d) denseElems *= in.size(d);
  const std::size_t indexBytes = static_cast<std::size_t>(in.sparse_dim()) * sizeof(std::int64_t);
  const std::size_t valueBytes = static_cast<std::size_t>(denseElems) * values.element_size();
  std::vector<std::size_t> indexCounts(static_cast<std::size_t>(n));
  auto valueCounts = std::make_shared<std::vector<std::size_t>>(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    const auto nnz = static_cast<std::size_t>(of(r)[2]);
    indexCounts[static_cast<std::size_t>(r)] = nnz * indexBytes;
    (*valueCounts)[static_cast<std::size_t>(r)] = nnz * valueBytes;
  }
  at::Tensor allIndices = at::empty({total, in.sparse_dim()}, at::kLong);
  std::vector<std::int64_t> valueShape{total};
  for (std::int64_t d = in.sparse_dim(); d < in.dim(); ++d) valueShape.push_back(in.size(d));
  at::Tensor allValues = at::empty(valueShape, values.options().requires_grad(false));
  comm_->allgatherv(rawBytesOf(indices, "sparse allreduce indices", rank_),
                    rawBytesOf(allIndices, "sparse allreduce indices", rank_), indexCounts, exactValues());
  const View sendValues = rawBytesOf(values, "sparse allreduce values", rank_);
  const View recvValues = rawBytesOf(allValues, "sparse allreduce values", rank_);
  return enqueue(
      c10d::OpType::ALLREDUCE, {t},
      [sendValues, recvValues, valueCounts, values, allValues](Communicator& c) {
        return c.allgathervAsync(sendValues, recvValues, *valueCounts, exactValues());
      },
      [t, allIndices, allValues] {
        // On the progress thread, as the dense path writes its result: not
        // an autograd operation (a leaf that requires grad may be written).
        const at::NoGradGuard noGrad;
        at::Tensor sum = at::sparse_coo_tensor(allIndices.t(), allValues, t.sizes()).coalesce();
        at::Tensor out = t;
        out.copy_(sum);
      });
}

}  // namespace boostcomm::python
