// Wire codecs: float32 payloads carried as 16-bit floats on a link.
//
// Terms. A *wire message* is what one send step puts on the link for `count`
// float32 elements:
//   bf16: count bfloat16 values (2 * count bytes);
//   fp16: a 4-byte header (int32 k, the scale exponent) then count float16
//         values of x * 2^k (4 + 2 * count bytes; 0 bytes when count is 0).
// Decoding is exact (widening, then a multiplication by 2^-k); all the error
// is the one rounding of encoding, to nearest even.
//
// fp16 scale. k is chosen per message from its largest magnitude m (rounded
// to float16 precision first): 2^k * m lands in [2^14, 2^15], so nothing
// overflows (float16's largest finite is 65504) and small payloads keep
// float16's 11 significand bits instead of sinking into its subnormals. k is
// clamped to [-114, 100] so 2^k and 2^-k are normal float32 numbers. Inf/NaN
// in the message give k = 0 (they travel as inf/NaN).
//
// Idempotence, what bitwise agreement rests on: re-encoding decoded values
// over the same element range gives the same message (same k, same bits).
// So the owner of a reduced chunk rounds it in place (roundThroughWire) and
// keeps exactly the value every receiver decodes, and forwarding a decoded
// chunk adds no error.
#pragma once

#include <cstddef>
#include <cstdint>

#include "boostcomm/types.h"

namespace boostcomm::core {

// Bytes of one wire message of `count` float32 elements (format kBf16/kFp16).
std::size_t wireBytes(WireFormat format, std::size_t count);
// Bytes before the 16-bit values (fp16: the scale header).
std::size_t wireHeaderBytes(WireFormat format);

// Largest magnitude of a run, as float32 bits with the sign cleared (NaN
// sorts above inf). Fold runs of one message with std::max.
std::uint32_t maxMagnitudeBits(const float* x, std::size_t count);
// The fp16 scale exponent k for a message whose maxMagnitudeBits is `maxBits`.
int fp16ScaleExponent(std::uint32_t maxBits);

// One run of a message: values [0, count) of `src` into 16-bit `dst`, and back.
// k is the message's scale exponent (ignored for bf16).
void encodeRun(WireFormat format, int k, const float* src, std::size_t count, std::uint16_t* dst);
void decodeRun(WireFormat format, int k, const std::uint16_t* src, std::size_t count, float* dst);

// One run of a message rounded in place: x = decode(encode(x)) with scale k.
void roundRun(WireFormat format, int k, float* buf, std::size_t count);
// Both at once, in one pass: dst = encode(buf), buf = decode(dst). What the
// owner of a reduced chunk needs when it then sends that chunk: the send's
// message is ready and the chunk is not read a second time.
void encodeRoundRun(WireFormat format, int k, float* buf, std::size_t count, std::uint16_t* dst);

// Whole contiguous messages.
void encodeWire(WireFormat format, const float* src, std::size_t count, void* wire);
void decodeWire(WireFormat format, const void* wire, std::size_t count, float* dst);
// buf = decode(encode(buf)), in place: what a receiver of this message decodes.
void roundThroughWire(WireFormat format, float* buf, std::size_t count);

// The fp16 header: k as stored at the start of a message.
void writeWireHeader(WireFormat format, int k, void* wire);
int readWireHeader(WireFormat format, const void* wire);

}  // namespace boostcomm::core
