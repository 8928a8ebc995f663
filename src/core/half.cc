// The exported 16-bit float conversions; the bit manipulation lives inline in
// half_bits.h so the reduction kernels can inline it as well.
#include "core/half.h"

#include "core/half_bits.h"

namespace boostcomm::core {

float halfToFloat(std::uint16_t h) { return halfbits::halfToFloat(h); }
std::uint16_t floatToHalf(float f) { return halfbits::floatToHalf(f); }
float bfloat16ToFloat(std::uint16_t b) { return halfbits::bfloat16ToFloat(b); }
std::uint16_t floatToBFloat16(float f) { return halfbits::floatToBFloat16(f); }

}  // namespace boostcomm::core
