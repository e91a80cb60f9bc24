// DType properties, promotion and f16/bf16 conversions.
#include "ember/dtype.h"

#include <cmath>
#include <ostream>
#include <string>

#include "ember/error.h"

namespace ember {

std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "float32";
    case DType::F64: return "float64";
    case DType::F16: return "float16";
    case DType::BF16: return "bfloat16";
    case DType::I32: return "int32";
    case DType::I64: return "int64";
    case DType::U8: return "uint8";
    case DType::Bool: return "bool";
    case DType::I8: return "int8";
    case DType::I16: return "int16";
    case DType::U16: return "uint16";
    case DType::U32: return "uint32";
    case DType::U64: return "uint64";
  }
  return "?";
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F64: case DType::I64: case DType::U64: return 8;
    case DType::F32: case DType::I32: case DType::U32: return 4;
    case DType::F16: case DType::BF16: case DType::I16: case DType::U16: return 2;
    case DType::U8: case DType::Bool: case DType::I8: return 1;
  }
  return 0;
}

DTypeCategory dtype_category(DType t) {
  switch (t) {
    case DType::F32: case DType::F64: case DType::F16: case DType::BF16:
      return DTypeCategory::Floating;
    case DType::Bool: return DTypeCategory::Bool;
    default: return DTypeCategory::Integral;
  }
}

// Floating types: a wider type wins (f16 and bf16 have no common 16-bit type).
static int float_rank(DType t) {
  switch (t) {
    case DType::F16: case DType::BF16: return 1;
    case DType::F32: return 2;
    default: return 3;  // f64
  }
}

static DType signed_int_of_bytes(size_t bytes) {
  switch (bytes) {
    case 1: return DType::I8;
    case 2: return DType::I16;
    case 4: return DType::I32;
    default: return DType::I64;
  }
}

// Integers: of one signedness the wider wins; mixed, the signed type if it is wider, else the
// signed type twice the unsigned one's width (u8 with i8 is i16, as in PyTorch).
static DType promote_integers(DType a, DType b) {
  if (is_unsigned(a) == is_unsigned(b)) return dtype_size(a) >= dtype_size(b) ? a : b;
  DType u = is_unsigned(a) ? a : b, s = is_unsigned(a) ? b : a;
  if (dtype_size(s) > dtype_size(u)) return s;
  if (u == DType::U64)
    throw Error("promote_types: no integer dtype holds every value of both uint64 and " +
                std::string(dtype_name(s)) + "; cast one operand explicitly");
  return signed_int_of_bytes(2 * dtype_size(u));
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  DTypeCategory ca = dtype_category(a), cb = dtype_category(b);
  if (ca != cb) return ca > cb ? a : b;  // bool < integral < floating: the higher category wins
  if (ca == DTypeCategory::Integral) return promote_integers(a, b);
  if ((a == DType::F16 && b == DType::BF16) || (a == DType::BF16 && b == DType::F16)) return DType::F32;
  return float_rank(a) >= float_rank(b) ? a : b;
}

DType promote_with_scalar(DType tensor, DTypeCategory scalar) {
  if (scalar <= dtype_category(tensor)) return tensor;
  return scalar == DTypeCategory::Floating ? kDefaultFloat : kDefaultInt;
}

float half_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      float f = std::ldexp(float(mant), -24);
      std::memcpy(&bits, &f, 4);
      bits |= sign;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint16_t sign = uint16_t((x >> 16) & 0x8000);
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u)  // inf or NaN
    return uint16_t(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0));
  if (absx >= 0x477ff000u) return uint16_t(sign | 0x7c00);  // rounds to >= 65520: overflow
  if (absx < 0x38800000u) {  // below the smallest normal half: subnormal or zero
    float a;
    std::memcpy(&a, &absx, 4);
    // Scale so that the half subnormal unit (2^-24) becomes 1, then round to nearest even.
    float scaled = a * 16777216.0f;
    auto m = uint32_t(std::nearbyint(scaled));
    return uint16_t(sign | m);
  }
  uint32_t mant = absx & 0x7fffff;
  uint32_t exp = (absx >> 23) - 112;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;  // round to nearest even
  return uint16_t(sign | h);
}

uint16_t float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40);  // quiet NaN
  uint32_t rounding = 0x7fff + ((x >> 16) & 1);
  return uint16_t((x + rounding) >> 16);
}

}  // namespace ember
