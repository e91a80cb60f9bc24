// Element types (DType), their properties and the type-promotion rules.
// The rules are written out in docs/semantics.md; tests/core/dtype_test.cpp checks them.
#pragma once

#include <cstdint>
#include <cstring>
#include <iosfwd>
#include <string_view>
#include <type_traits>

namespace ember {

// The numbering is the plugin ABI's (src/backend/abi.h): new dtypes are appended.
enum class DType : uint8_t { F32, F64, F16, BF16, I32, I64, U8, Bool, I8, I16, U16, U32, U64 };
inline constexpr int kNumDTypes = 13;

// Coarse category used by promotion: Bool < Integral < Floating.
enum class DTypeCategory : uint8_t { Bool, Integral, Floating };

// "float32", "int64", ...: a view of a string literal, so dtype_name(t).data() is null-terminated
// and fits C-style formatting: std::printf("%s\n", dtype_name(t).data()).
std::string_view dtype_name(DType t);
// Prints dtype_name: std::cout << x.dtype() shows float32.
std::ostream& operator<<(std::ostream& os, DType t);
size_t dtype_size(DType t);
DTypeCategory dtype_category(DType t);
inline bool is_floating(DType t) { return dtype_category(t) == DTypeCategory::Floating; }
inline bool is_integral(DType t) { return dtype_category(t) == DTypeCategory::Integral; }
// u8, u16, u32, u64.
inline bool is_unsigned(DType t) {
  return t == DType::U8 || t == DType::U16 || t == DType::U32 || t == DType::U64;
}

// The type both operands of a binary op are converted to (PyTorch's promote_types; for the
// unsigned types PyTorch leaves undefined, the smallest signed type that holds both, as NumPy).
// uint64 with a signed integer type has no such type: that throws ember::Error.
DType promote_types(DType a, DType b);

// Result type of a tensor op with a weakly typed C++ scalar: the tensor's type wins unless the
// scalar belongs to a higher category, in which case that category's default type is used
// (int scalar with a bool tensor -> i64, float scalar with an integer tensor -> f32).
DType promote_with_scalar(DType tensor, DTypeCategory scalar);

// Default dtype of each category (f32 for floats, i64 for integers).
inline constexpr DType kDefaultFloat = DType::F32;
inline constexpr DType kDefaultInt = DType::I64;

// Kind of a C++ number used as a scalar operand.
template <class T>
constexpr DTypeCategory scalar_category() {
  if constexpr (std::is_same_v<T, bool>) return DTypeCategory::Bool;
  else if constexpr (std::is_integral_v<T>) return DTypeCategory::Integral;
  else return DTypeCategory::Floating;
}

// The C++ type that stores one element of a dtype (f16/bf16 use the wrappers below).
struct Half {
  uint16_t bits = 0;
  Half() = default;
  explicit Half(float f);
  explicit operator float() const;
};
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float f);
  explicit operator float() const;
};

float half_to_float(uint16_t h);
uint16_t float_to_half(float f);  // round to nearest even
inline float bf16_to_float(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t float_to_bf16(float f);  // round to nearest even, NaN stays NaN

inline Half::Half(float f) : bits(float_to_half(f)) {}
inline Half::operator float() const { return half_to_float(bits); }
inline BFloat16::BFloat16(float f) : bits(float_to_bf16(f)) {}
inline BFloat16::operator float() const { return bf16_to_float(bits); }

template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::F32;
  else if constexpr (std::is_same_v<T, double>) return DType::F64;
  else if constexpr (std::is_same_v<T, Half>) return DType::F16;
  else if constexpr (std::is_same_v<T, BFloat16>) return DType::BF16;
  else if constexpr (std::is_same_v<T, int32_t>) return DType::I32;
  else if constexpr (std::is_same_v<T, int64_t>) return DType::I64;
  else if constexpr (std::is_same_v<T, uint8_t>) return DType::U8;
  else if constexpr (std::is_same_v<T, bool>) return DType::Bool;
  else if constexpr (std::is_same_v<T, int8_t>) return DType::I8;
  else if constexpr (std::is_same_v<T, int16_t>) return DType::I16;
  else if constexpr (std::is_same_v<T, uint16_t>) return DType::U16;
  else if constexpr (std::is_same_v<T, uint32_t>) return DType::U32;
  else if constexpr (std::is_same_v<T, uint64_t>) return DType::U64;
  else static_assert(sizeof(T) == 0, "no ember dtype for this C++ type");
}

}  // namespace ember
