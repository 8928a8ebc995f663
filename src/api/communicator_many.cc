// Communicator::allreduceMany and the internal segment-list entry.
//
// A list call is an ordinary allreduce of the list's total count whose send
// and recv buffers are the list (CallArgs::list): it goes through the same
// validation, selection map (by total bytes), schedule cache and progress
// engine; only the execution's binding differs (executor/executor.h).
#include <algorithm>
#include <limits>
#include <sstream>
#include <vector>

#include "api/access.h"
#include "api/call.h"
#include "api/communicator_impl.h"
#include "api/communicator_many.h"
#include "core/check.h"
#include "fusion/fusion_common.h"
#include "planner/bucketing.h"

namespace boostcomm {
namespace detail {

namespace {

CallArgs listArgs(Collective collective, const core::SegmentList& list, DataType dtype, ReduceOp op, int root) {
  CallArgs a;
  a.collective = collective;
  a.root = root;
  const std::size_t count = list.totalBytes() / dataTypeSize(dtype);
  // send/recv carry only count and dtype; the list stands in as a non-null
  // placeholder address for the argument checks (never dereferenced).
  void* placeholder = count > 0 ? const_cast<core::SegmentList*>(&list) : nullptr;
  a.send = ConstView(placeholder, count, dtype);
  a.recv = View(placeholder, count, dtype);
  a.op = op;
  a.list = &list;
  return a;
}

}  // namespace

std::string describeSegments(std::span<const View> segments, core::SegmentList& list, DataType& dtype) {
  list.clear();
  dtype = segments.empty() ? DataType::kFloat32 : segments.front().dtype;
  std::ostringstream os;
  if (static_cast<unsigned>(dtype) >= static_cast<unsigned>(kNumDataTypes)) {
    os << "segments[0].dtype has invalid value " << static_cast<int>(dtype);
    return os.str();
  }
  const std::size_t es = dataTypeSize(dtype);
  std::size_t total = 0;
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const View& v = segments[i];
    if (v.dtype != dtype) {
      os << "segments[" << i << "].dtype is " << toString(v.dtype) << " but segments[0].dtype is " << toString(dtype)
         << " (one dtype per list)";
      return os.str();
    }
    if (v.data == nullptr && v.count > 0) {
      os << "segments[" << i << "].data is null but its count is " << v.count;
      return os.str();
    }
    if (v.count > (std::numeric_limits<std::size_t>::max() - total) / es) {
      os << "segments[" << i << "]: the list's total bytes overflow the address space";
      return os.str();
    }
    total += v.count * es;
    list.append(v.data, v.count * es);
  }
  // Overlap: sort the non-empty segments by address; a segment that starts
  // before its predecessor ends overlaps it (the results would depend on
  // the order the library writes them in).
  std::vector<std::size_t> order;
  order.reserve(segments.size());
  for (std::size_t i = 0; i < segments.size(); ++i)
    if (segments[i].count > 0) order.push_back(i);
  auto addr = [&](std::size_t i) { return reinterpret_cast<std::uintptr_t>(segments[i].data); };
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return addr(a) < addr(b); });
  for (std::size_t k = 1; k < order.size(); ++k) {
    const std::size_t prev = order[k - 1];
    const std::size_t cur = order[k];
    if (addr(cur) < addr(prev) + segments[prev].count * es) {
      os << "segments[" << std::min(prev, cur) << "] and segments[" << std::max(prev, cur) << "] overlap";
      return os.str();
    }
  }
  return {};
}

Work allreduceListAsync(Communicator& comm, const core::SegmentList& list, DataType dtype, ReduceOp op,
                        const CallOptions& options) {
  return implOf(comm).submit(listArgs(Collective::kAllreduce, list, dtype, op, 0), options);
}

namespace {

// The agreed shape: the counts and dtype in order (empty segments too), the
// collective, and its op or root.
std::uint64_t listSignature(std::span<const View> segments, Collective collective, std::uint64_t opOrRoot) {
  std::vector<planner::TensorInfo> infos;
  infos.reserve(segments.size());
  for (const View& v : segments) infos.push_back({v.count, v.dtype});
  const std::uint64_t h = mixSignature(planner::tensorListSignature(infos), static_cast<std::uint64_t>(collective));
  return mixSignature(h, opOrRoot);
}

std::string localError(std::span<const View> segments, ReduceOp op, core::SegmentList& list, DataType& dtype) {
  std::string error = describeSegments(segments, list, dtype);
  if (!error.empty()) return error;
  if (static_cast<unsigned>(op) >= static_cast<unsigned>(kNumReduceOps))
    return "op has invalid value " + std::to_string(static_cast<int>(op));
  if (op == ReduceOp::kAvg && !isFloatingPoint(dtype))
    return std::string("op avg is not supported for dtype ") + std::string(toString(dtype)) +
           " (an integer average would truncate; use sum and divide)";
  return {};
}

}  // namespace
}  // namespace detail

void Communicator::allreduceMany(std::span<const View> segments, ReduceOp op, const CallOptions& options) {
  allreduceManyAsync(segments, op, options).wait(options.timeout);
}

Work Communicator::allreduceManyAsync(std::span<const View> segments, ReduceOp op, const CallOptions& options) {
  core::SegmentList list;
  DataType dtype = DataType::kFloat32;
  const std::string error = detail::localError(segments, op, list, dtype);
  detail::agreeAcrossRanks(*this, detail::listSignature(segments, Collective::kAllreduce, static_cast<std::uint64_t>(op)),
                           error, "allreduceMany");
  return detail::allreduceListAsync(*this, list, dtype, op, options);
}

void Communicator::broadcastMany(std::span<const View> segments, int root, const CallOptions& options) {
  broadcastManyAsync(segments, root, options).wait(options.timeout);
}

Work Communicator::broadcastManyAsync(std::span<const View> segments, int root, const CallOptions& options) {
  core::SegmentList list;
  DataType dtype = DataType::kFloat32;
  std::string error = detail::describeSegments(segments, list, dtype);
  if (error.empty() && (root < 0 || root >= size()))
    error = "root " + std::to_string(root) + " is out of range [0, " + std::to_string(size()) + ")";
  detail::agreeAcrossRanks(*this, detail::listSignature(segments, Collective::kBroadcast, static_cast<std::uint64_t>(root)),
                           error, "broadcastMany");
  return detail::implOf(*this).submit(detail::listArgs(Collective::kBroadcast, list, dtype, ReduceOp::kSum, root),
                                      options);
}

}  // namespace boostcomm
