// float16 / bfloat16 <-> float32 conversions (round to nearest even, NaN kept).
#pragma once

#include <cstdint>

namespace boostcomm::core {

float halfToFloat(std::uint16_t h);
std::uint16_t floatToHalf(float f);
float bfloat16ToFloat(std::uint16_t b);
std::uint16_t floatToBFloat16(float f);

}  // namespace boostcomm::core
