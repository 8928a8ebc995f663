// Typed views of user memory passed to collectives. A view does not own memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

#include "boostcomm/types.h"

namespace boostcomm {

// IEEE binary16 and bfloat16 stored as their bit patterns.
struct Float16 {
  std::uint16_t bits;
};
struct BFloat16 {
  std::uint16_t bits;
};

template <typename T>
constexpr DataType dataTypeOf();
template <> constexpr DataType dataTypeOf<float>() { return DataType::kFloat32; }
template <> constexpr DataType dataTypeOf<double>() { return DataType::kFloat64; }
template <> constexpr DataType dataTypeOf<Float16>() { return DataType::kFloat16; }
template <> constexpr DataType dataTypeOf<BFloat16>() { return DataType::kBFloat16; }
template <> constexpr DataType dataTypeOf<std::int32_t>() { return DataType::kInt32; }
template <> constexpr DataType dataTypeOf<std::int64_t>() { return DataType::kInt64; }
template <> constexpr DataType dataTypeOf<std::uint8_t>() { return DataType::kUInt8; }

struct ConstView {
  const void* data = nullptr;
  std::size_t count = 0;  // elements
  DataType dtype = DataType::kFloat32;

  ConstView() = default;
  ConstView(const void* d, std::size_t n, DataType t) : data(d), count(n), dtype(t) {}
  template <typename T>
  ConstView(std::span<T> s) : data(s.data()), count(s.size()), dtype(dataTypeOf<std::remove_const_t<T>>()) {}
};

struct View {
  void* data = nullptr;
  std::size_t count = 0;  // elements
  DataType dtype = DataType::kFloat32;

  View() = default;
  View(void* d, std::size_t n, DataType t) : data(d), count(n), dtype(t) {}
  template <typename T>
    requires(!std::is_const_v<T>)
  View(std::span<T> s) : data(s.data()), count(s.size()), dtype(dataTypeOf<T>()) {}
  operator ConstView() const { return ConstView(data, count, dtype); }
};

}  // namespace boostcomm
