// The executor's side of wire formats (core/wire.h): encoding a send's
// float32 source into its staging area, decoding a receive's staging area
// into its float32 destination, and rounding an owned chunk in place.
// Operands may address a segment list: a message then spans several runs,
// and fp16's scale is taken over the whole message first.
#pragma once

#include "core/segment_list.h"
#include "executor/schedule.h"

namespace boostcomm::executor {

void encodeWireStep(const Step& step, const core::Operand& src, char* staging);
void decodeWireStep(const Step& step, const char* staging, const core::Operand& dst);
// With `staging`, also leaves buf's message there (the send of it will not encode).
void roundWireStep(const Step& step, const core::Operand& buf, char* staging);
// A fused kReduce (Schedule::reduceReceived): dst = src op decode(message),
// a block at a time, the decoded block in a buffer that stays in L1. With
// `round` (bf16 only) each block is then rounded through the wire format in
// place and, given `staging`, encoded there as well (the message a send of
// dst takes): one pass over dst where decode, reduce and round took three.
void reduceWireStep(const Step& step, DataType dtype, ReduceOp op, const core::Operand& dst, const core::Operand& src,
                    const char* message, bool round, char* staging);

}  // namespace boostcomm::executor
