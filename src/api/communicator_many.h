// Segment-list collectives inside the library: the entry for drivers that
// agreed on their lists once, at construction (the bucket component:
// GradientGroup, OverlapEngine), so no per-call exchange is needed.
// Communicator::allreduceMany (validated and agreed on every call) ends here too.
#pragma once

#include <span>
#include <string>

#include "boostcomm/communicator.h"
#include "core/segment_list.h"

namespace boostcomm::detail {

// Fills `list` from `segments` and returns "" or the first local error
// (null data, mixed or invalid dtypes, overlapping segments), naming `what`'s argument.
std::string describeSegments(std::span<const View> segments, core::SegmentList& list, DataType& dtype);

// One allreduce over `list` (count = its bytes / dtype size), in place.
// No validation beyond the usual per-call checks and no agreement: the caller
// guarantees every rank passes the same shape.
Work allreduceListAsync(Communicator& comm, const core::SegmentList& list, DataType dtype, ReduceOp op,
                        const CallOptions& options);

}  // namespace boostcomm::detail
