// Per-target SIMD kernels of the CPU tile interpreter: executes a list of KIR instructions over
// one tile (loads with dtype conversion, ALU ops, casts, gathers, random numbers, stores) and
// folds tiles into reduction lanes. Highway compiles this file once per enabled target
// (foreach_target) and picks the best one at run time; exp/log/tanh/sin/cos use Highway's
// contrib/math, erf the tier-1 prelude's polynomial in f32 and SLEEF in f64, and simple loops are
// left to GCC's vectorizer inside the per-target region. Results follow abi.h and the reference
// interpreter exactly; the vector transcendentals are within a few ulps, with lanes outside their
// valid range computed by the scalar C library the same way the reference does.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "backend/common/host_memory.h"
#include "backend/common/philox.h"
#include "backend/cpu/program.h"
#include "ember/dtype.h"

#ifndef EMBER_CPU_TILE_KERNELS_DECLS
#define EMBER_CPU_TILE_KERNELS_DECLS
#include <immintrin.h>
// SLEEF's own header declares these only when the whole file is compiled for AVX-512/AVX2;
// they are called from the per-target code below, which is.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
extern "C" {
__m512d Sleef_erfd8_u10avx512f(__m512d);
__m256d Sleef_erfd4_u10avx2(__m256d);
}
#pragma GCC diagnostic pop
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/tile_kernels.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace ember::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class T>
HWY_INLINE T* slot(const Tile& t, int32_t k) {
  return reinterpret_cast<T*>(t.regs + size_t(k) * kSlotBytes);
}
template <class T>
HWY_INLINE const T* val(const Tile& t, int32_t k) {
  return static_cast<const T*>(t.src[k]);
}

// ---- scalar semantics (abi.h / reference.cpp) ----------------------------------------------
template <class F>
HWY_INLINE int32_t to_i32(F x) {
  return (x >= F(-2147483648.0) && x < F(2147483648.0)) ? int32_t(x) : INT32_MIN;
}
template <class F>
HWY_INLINE int64_t to_i64(F x) {
  return (x >= F(-9223372036854775808.0) && x < F(9223372036854775808.0)) ? int64_t(x) : INT64_MIN;
}
// abi.h: values in (-2^63, 2^64) truncate (negative ones wrap modulo 2^64); NaN and the rest
// give 2^63.
template <class F>
HWY_INLINE uint64_t to_u64(F x) {
  if (x >= F(0) && x < F(18446744073709551616.0)) return uint64_t(x);
  if (x > F(-9223372036854775808.0) && x < F(0)) return uint64_t(int64_t(x));
  return uint64_t(1) << 63;
}
// Same rounding as ember::float_to_bf16 (nearest even, NaN stays a quiet NaN), inlined.
HWY_INLINE uint16_t to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40);
  return uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
HWY_INLINE float from_bf16(uint16_t h) {
  uint32_t x = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

template <class S, class D, class F>
HWY_INLINE void map1(const S* a, D* o, size_t n, F f) {
  for (size_t i = 0; i < n; ++i) o[i] = f(a[i]);
}
template <class S, class D, class F>
HWY_INLINE void map2(const S* a, const S* b, D* o, size_t n, F f) {
  for (size_t i = 0; i < n; ++i) o[i] = f(a[i], b[i]);
}
template <class T>
HWY_INLINE void fill(T* HWY_RESTRICT o, size_t n, T v) {
  for (size_t i = 0; i < n; ++i) o[i] = v;
}

// ---- vector math with a scalar fallback for lanes outside [lo, hi] (and NaN) ----------------
template <class T, class VecFn, class ScalarFn>
HWY_INLINE void map_math(const T* HWY_RESTRICT a, T* HWY_RESTRICT out, size_t n, T lo, T hi, VecFn vf,
                         ScalarFn sf) {
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  alignas(64) T bv[64 / sizeof(T)];
  alignas(64) T br[64 / sizeof(T)];
  const auto vlo = hn::Set(d, lo);
  const auto vhi = hn::Set(d, hi);
  for (size_t i = 0; i < n; i += N) {
    const size_t m = n - i < N ? n - i : N;
    if (m < N)
      for (size_t j = 0; j < N; ++j) bv[j] = j < m ? a[i + j] : T(1);
    const auto v = m == N ? hn::LoadU(d, a + i) : hn::Load(d, bv);
    auto r = vf(d, v);
    const auto ok = hn::And(hn::Ge(v, vlo), hn::Le(v, vhi));
    if (!hn::AllTrue(d, ok)) {
      hn::Store(v, d, bv);
      hn::Store(r, d, br);
      for (size_t j = 0; j < m; ++j)
        if (!(bv[j] >= lo && bv[j] <= hi)) br[j] = sf(bv[j]);
      r = hn::Load(d, br);
    }
    if (m == N) {
      hn::StoreU(r, d, out + i);
    } else {
      hn::Store(r, d, br);
      for (size_t j = 0; j < m; ++j) out[i + j] = br[j];
    }
  }
}

// f32 erf: the tier-1 prelude's e_erff (backend/common/emit_c.cpp, coefficients from
// tools/fit_erf.py) operation for operation, so the interpreter, the contraction epilogues and the
// compiled kernels give the same bits: at most 1 ulp over all 2^32 inputs, 5.9e-8 absolute where
// GELU's 1 + erf(x) cancels. Only on targets with FMA (MulAdd/MulSub fused, as the prelude's
// __builtin_fmaf); about 4x faster than SLEEF's erff16_u10 per vector.
//   |x| < 1:  x + x P(x^2)
//   |x| >= 1: sign(x) (1 - exp(-z^2 + S(z))), z = min(|x|, 4), exp inlined as 2^n (1 + r Q(r))
template <class D, class V>
HWY_INLINE V ErfF32Poly(D d, V x) {
  const hn::RebindToUnsigned<D> du;
  const V ax = hn::Abs(x);
  const V t = hn::Mul(x, x);
  V p = hn::Set(d, 0x1.4771fep-14f);
  for (float c : {-0x1.a3515ep-11f, 0x1.53f224p-8f, -0x1.b7f71ap-6f, 0x1.ce2ce6p-4f, -0x1.81273ep-2f,
                  0x1.06eba8p-3f})
    p = hn::MulAdd(p, t, hn::Set(d, c));
  const V lo = hn::MulAdd(x, p, x);
  const V four = hn::Set(d, 0x1p+2f);
  const V z = hn::IfThenElse(hn::Gt(ax, four), four, ax);  // NaN passes through
  V s = hn::Set(d, 0x1.852c82p-13f);
  for (float c : {-0x1.814ca6p-9f, 0x1.65421cp-6f, -0x1.a60a84p-4f, 0x1.7274f8p-2f, -0x1.2085b2p+0f,
                  -0x1.72e85p-12f})
    s = hn::MulAdd(s, z, hn::Set(d, c));
  const V zz = hn::Mul(z, z);
  const V zl = hn::MulSub(z, z, zz);  // the rounding error of z * z, exactly
  const V magic = hn::Set(d, 0x1.8p+23f);
  const V k = hn::MulAdd(hn::Sub(s, zz), hn::Set(d, 0x1.715476p+0f), magic);  // 1.5 * 2^23 + n
  const V n = hn::Sub(k, magic);
  V r = hn::Sub(s, hn::MulAdd(n, hn::Set(d, 0x1.62e4p-1f), zz));
  r = hn::MulAdd(n, hn::Set(d, -0x1.7f7d1cp-20f), hn::Sub(r, zl));
  V q = hn::Set(d, 0x1.37670ap-10f);
  for (float c : {0x1.12284cp-7f, 0x1.559c8ep-5f, 0x1.5554bp-3f, 0x1.ffffacp-2f, 0x1p+0f, 0x1p+0f})
    q = hn::MulAdd(q, r, hn::Set(d, c));
  const V scale = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(hn::BitCast(du, k), hn::Set(du, 127u))));
  const V e = hn::Mul(q, scale);
  const V hi = hn::CopySign(hn::Sub(hn::Set(d, 1.0f), e), x);
  return hn::IfThenElse(hn::Lt(ax, hn::Set(d, 1.0f)), lo, hi);
}

// f64 erf: SLEEF (1 ulp). Its AVX entry points take raw vector registers; clang 14 does not give
// the lambdas below Highway's per-target attributes, so under clang erf takes the scalar path (g++
// builds, the default, use the vector paths).
template <class T>
HWY_INLINE void erf_tile(const T* HWY_RESTRICT a, T* HWY_RESTRICT o, size_t n) {
  constexpr T inf = std::numeric_limits<T>::infinity();
  auto sf = [](T x) { return T(std::erf(double(x))); };
#if (HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX2) && !defined(__clang__)
  if constexpr (sizeof(T) == 4) {
    map_math<T>(a, o, n, -inf, inf, [](auto d, auto v) { return ErfF32Poly(d, v); }, sf);
  } else {
#if HWY_TARGET == HWY_AVX3
    map_math<T>(a, o, n, -inf, inf, [](auto, auto v) { return decltype(v){Sleef_erfd8_u10avx512f(v.raw)}; }, sf);
#else
    map_math<T>(a, o, n, -inf, inf, [](auto, auto v) { return decltype(v){Sleef_erfd4_u10avx2(v.raw)}; }, sf);
#endif
  }
#else
  (void)inf;
  map1(a, o, n, sf);
#endif
}

template <class T>
HWY_INLINE void float_unary(uint16_t op, const T* HWY_RESTRICT a, T* HWY_RESTRICT o, size_t n) {
  constexpr bool f32 = sizeof(T) == 4;
  constexpr T inf = std::numeric_limits<T>::infinity();
  switch (op) {
    case EMBER_KIR_NEG: map1(a, o, n, [](T x) { return -x; }); break;
    case EMBER_KIR_ABS: map1(a, o, n, [](T x) { return std::fabs(x); }); break;
    case EMBER_KIR_FLOOR: map1(a, o, n, [](T x) { return std::floor(x); }); break;
    case EMBER_KIR_CEIL: map1(a, o, n, [](T x) { return std::ceil(x); }); break;
    case EMBER_KIR_SQRT:
      map_math<T>(a, o, n, T(0), inf, [](auto, auto v) { return hn::Sqrt(v); },
                  [](T x) { return T(std::sqrt(double(x))); });
      break;
    case EMBER_KIR_EXP:
      map_math<T>(a, o, n, f32 ? T(-87.0) : T(-707.0), f32 ? T(88.0) : T(709.0),
                  [](auto d, auto v) { return hn::Exp(d, v); }, [](T x) { return T(std::exp(double(x))); });
      break;
    case EMBER_KIR_LOG:
      map_math<T>(a, o, n, std::numeric_limits<T>::min(), std::numeric_limits<T>::max(),
                  [](auto d, auto v) { return hn::Log(d, v); }, [](T x) { return T(std::log(double(x))); });
      break;
    case EMBER_KIR_TANH:
      map_math<T>(a, o, n, -inf, inf, [](auto d, auto v) { return hn::Tanh(d, v); },
                  [](T x) { return T(std::tanh(double(x))); });
      break;
    case EMBER_KIR_SIN:
      map_math<T>(a, o, n, T(-10000), T(10000), [](auto d, auto v) { return hn::Sin(d, v); },
                  [](T x) { return T(std::sin(double(x))); });
      break;
    case EMBER_KIR_COS:
      map_math<T>(a, o, n, T(-10000), T(10000), [](auto d, auto v) { return hn::Cos(d, v); },
                  [](T x) { return T(std::cos(double(x))); });
      break;
    case EMBER_KIR_ERF: erf_tile(a, o, n); break;
    default: break;
  }
}

template <class T>
HWY_INLINE void float_binary(uint16_t op, const T* HWY_RESTRICT a, const T* HWY_RESTRICT b, T* HWY_RESTRICT o,
                             size_t n) {
  switch (op) {
    case EMBER_KIR_ADD: map2(a, b, o, n, [](T x, T y) { return x + y; }); break;
    case EMBER_KIR_SUB: map2(a, b, o, n, [](T x, T y) { return x - y; }); break;
    case EMBER_KIR_MUL: map2(a, b, o, n, [](T x, T y) { return x * y; }); break;
    case EMBER_KIR_DIV: map2(a, b, o, n, [](T x, T y) { return x / y; }); break;
    // floor, fmod and pow are evaluated in double and rounded once, as the reference does.
    case EMBER_KIR_FLOORDIV:
      map2(a, b, o, n, [](T x, T y) { return T(std::floor(double(x) / double(y))); });
      break;
    case EMBER_KIR_REM:
      map2(a, b, o, n, [](T x, T y) {
        double m = std::fmod(double(x), double(y));
        if (m != 0 && ((m < 0) != (y < 0))) m += double(y);
        return T(m);
      });
      break;
    case EMBER_KIR_FMOD: map2(a, b, o, n, [](T x, T y) { return T(std::fmod(double(x), double(y))); }); break;
    case EMBER_KIR_POW: map2(a, b, o, n, [](T x, T y) { return T(std::pow(double(x), double(y))); }); break;
    case EMBER_KIR_MAX:
      map2(a, b, o, n, [](T x, T y) {
        return (x != x || y != y) ? std::numeric_limits<T>::quiet_NaN() : (x > y ? x : y);
      });
      break;
    case EMBER_KIR_MIN:
      map2(a, b, o, n, [](T x, T y) {
        return (x != x || y != y) ? std::numeric_limits<T>::quiet_NaN() : (x < y ? x : y);
      });
      break;
    default: break;
  }
}

template <class T>
HWY_INLINE void compare(uint16_t op, const T* HWY_RESTRICT a, const T* HWY_RESTRICT b, int32_t* HWY_RESTRICT o,
                        size_t n) {
  switch (op) {
    case EMBER_KIR_LT: map2(a, b, o, n, [](T x, T y) { return int32_t(x < y); }); break;
    case EMBER_KIR_LE: map2(a, b, o, n, [](T x, T y) { return int32_t(x <= y); }); break;
    case EMBER_KIR_GT: map2(a, b, o, n, [](T x, T y) { return int32_t(x > y); }); break;
    case EMBER_KIR_GE: map2(a, b, o, n, [](T x, T y) { return int32_t(x >= y); }); break;
    case EMBER_KIR_EQ: map2(a, b, o, n, [](T x, T y) { return int32_t(x == y); }); break;
    default: map2(a, b, o, n, [](T x, T y) { return int32_t(x != y); }); break;
  }
}

template <class T>
HWY_INLINE bool any_zero(const T* HWY_RESTRICT b, size_t n) {
  bool z = false;
  for (size_t i = 0; i < n; ++i) z |= b[i] == 0;
  return z;
}

// Integer ops wrap (unsigned arithmetic); division-like ops report a zero divisor.
template <class T>
HWY_INLINE bool int_binary(uint16_t op, const T* HWY_RESTRICT a, const T* HWY_RESTRICT b, T* HWY_RESTRICT o,
                           size_t n, TileError* err) {
  using U = std::make_unsigned_t<T>;
  switch (op) {
    case EMBER_KIR_ADD: map2(a, b, o, n, [](T x, T y) { return T(U(x) + U(y)); }); break;
    case EMBER_KIR_SUB: map2(a, b, o, n, [](T x, T y) { return T(U(x) - U(y)); }); break;
    case EMBER_KIR_MUL: map2(a, b, o, n, [](T x, T y) { return T(U(x) * U(y)); }); break;
    case EMBER_KIR_DIV:
    case EMBER_KIR_FLOORDIV:
    case EMBER_KIR_REM:
    case EMBER_KIR_FMOD:
      if (any_zero(b, n)) {
        for (size_t i = 0; i < n; ++i)
          if (b[i] == 0) {
            *err = {EMBER_ERR_INVALID,
                    op != EMBER_KIR_DIV && op != EMBER_KIR_FLOORDIV ? "integer remainder by zero" : "integer division by zero", (long long)a[i], 0};
            break;
          }
        return false;
      }
      if constexpr (std::is_unsigned_v<T>) {  // u64: every division-like op is C's
        if (op == EMBER_KIR_DIV || op == EMBER_KIR_FLOORDIV) map2(a, b, o, n, [](T x, T y) { return T(x / y); });
        else map2(a, b, o, n, [](T x, T y) { return T(x % y); });
      } else if (op == EMBER_KIR_DIV) {
        map2(a, b, o, n, [](T x, T y) { return y == -1 ? T(U(0) - U(x)) : T(x / y); });
      } else if (op == EMBER_KIR_FLOORDIV) {
        map2(a, b, o, n, [](T x, T y) {
          if (y == -1) return T(U(0) - U(x));
          T q = x / y;
          if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
          return q;
        });
      } else if (op == EMBER_KIR_FMOD) {
        map2(a, b, o, n, [](T x, T y) { return y == -1 ? T(0) : T(x % y); });
      } else {
        map2(a, b, o, n, [](T x, T y) {
          if (y == -1) return T(0);
          T m = x % y;
          if (m != 0 && ((m < 0) != (y < 0))) m = T(m + y);
          return m;
        });
      }
      break;
    case EMBER_KIR_POW:
      if constexpr (std::is_signed_v<T>)
        for (size_t i = 0; i < n; ++i)
          if (b[i] < 0) {
            *err = {EMBER_ERR_INVALID, "integer raised to a negative power", (long long)b[i], 0};
            return false;
          }
      map2(a, b, o, n, [](T x, T e) {
        U r = 1, base = U(x);
        while (e > 0) {
          if (e & 1) r = U(r * base);
          base = U(base * base);
          e = T(e >> 1);
        }
        return T(r);
      });
      break;
    case EMBER_KIR_MAX: map2(a, b, o, n, [](T x, T y) { return x > y ? x : y; }); break;
    case EMBER_KIR_MIN: map2(a, b, o, n, [](T x, T y) { return x < y ? x : y; }); break;
    case EMBER_KIR_AND: map2(a, b, o, n, [](T x, T y) { return T((x != 0) & (y != 0)); }); break;
    case EMBER_KIR_OR: map2(a, b, o, n, [](T x, T y) { return T((x != 0) | (y != 0)); }); break;
    default: break;
  }
  return true;
}

template <class T>
HWY_INLINE void int_unary(uint16_t op, const T* HWY_RESTRICT a, T* HWY_RESTRICT o, size_t n) {
  using U = std::make_unsigned_t<T>;
  switch (op) {
    case EMBER_KIR_NEG: map1(a, o, n, [](T x) { return T(U(0) - U(x)); }); break;
    case EMBER_KIR_ABS:
      if constexpr (std::is_signed_v<T>) map1(a, o, n, [](T x) { return x < 0 ? T(U(0) - U(x)) : x; });
      else map1(a, o, n, [](T x) { return x; });
      break;
    case EMBER_KIR_NOT: map1(a, o, n, [](T x) { return T(x == 0); }); break;
    default: map1(a, o, n, [](T x) { return x; }); break;  // floor/ceil of an integer
  }
}

// ---- casts ----------------------------------------------------------------------------------
template <class S>
HWY_INLINE void cast_from(uint8_t to, const S* HWY_RESTRICT s, void* dst, size_t n) {
  constexpr bool sf = std::is_floating_point_v<S>;
  if (to == EMBER_BOOL) {
    map1(s, static_cast<int32_t*>(dst), n, [](S x) { return int32_t(!(x == S(0))); });
  } else if (to == EMBER_F64) {
    map1(s, static_cast<double*>(dst), n, [](S x) { return double(x); });
  } else if (is_float_dtype(to)) {
    float* o = static_cast<float*>(dst);
    // float(double(x)): i64 -> f32 rounds through double, as the reference does.
    map1(s, o, n, [](S x) { return float(double(x)); });
    if (to == EMBER_F16) map1(o, o, n, [](float x) { return ember::half_to_float(ember::float_to_half(x)); });
    if (to == EMBER_BF16) map1(o, o, n, [](float x) { return from_bf16(to_bf16(x)); });
  } else if (to == EMBER_I64) {
    if constexpr (sf) map1(s, static_cast<int64_t*>(dst), n, [](S x) { return to_i64(x); });
    else map1(s, static_cast<int64_t*>(dst), n, [](S x) { return int64_t(x); });
  } else if (to == EMBER_U64) {
    if constexpr (sf) map1(s, static_cast<uint64_t*>(dst), n, [](S x) { return to_u64(x); });
    else map1(s, static_cast<uint64_t*>(dst), n, [](S x) { return uint64_t(x); });
  } else if (to == EMBER_U32) {  // held in i64, wrapped to 0..2^32-1; floats through i64
    if constexpr (sf) map1(s, static_cast<int64_t*>(dst), n, [](S x) { return int64_t(uint32_t(uint64_t(to_i64(x)))); });
    else map1(s, static_cast<int64_t*>(dst), n, [](S x) { return int64_t(uint32_t(uint64_t(x))); });
  } else {
    // i32 and the types held in i32 (wrapped to their width; floats through i32)
    int32_t* o = static_cast<int32_t*>(dst);
    auto wrap = [to](uint32_t v) {
      switch (to) {
        case EMBER_U8: return int32_t(uint8_t(v));
        case EMBER_I8: return int32_t(int8_t(uint8_t(v)));
        case EMBER_U16: return int32_t(uint16_t(v));
        case EMBER_I16: return int32_t(int16_t(uint16_t(v)));
        default: return int32_t(v);
      }
    };
    if constexpr (sf) map1(s, o, n, [wrap](S x) { return wrap(uint32_t(to_i32(x))); });
    else map1(s, o, n, [wrap](S x) { return wrap(uint32_t(uint64_t(x))); });
  }
}

HWY_INLINE void cast_tile(uint8_t from, uint8_t to, const void* s, void* d, size_t n) {
  switch (reg_kind(from)) {
    case kF32: cast_from(to, static_cast<const float*>(s), d, n); break;
    case kF64: cast_from(to, static_cast<const double*>(s), d, n); break;
    case kI32: cast_from(to, static_cast<const int32_t*>(s), d, n); break;
    case kU64: cast_from(to, static_cast<const uint64_t*>(s), d, n); break;
    default: cast_from(to, static_cast<const int64_t*>(s), d, n); break;
  }
}

// ---- memory access --------------------------------------------------------------------------
template <class R, class Get>
HWY_INLINE void load_points(const ArgAddr& a, size_t n, R* HWY_RESTRICT out, Get get) {
  const int64_t base = a.base;
  if (a.offs) {
    for (size_t i = 0; i < n; ++i) out[i] = get(base + a.offs[i]);
  } else if (a.step == 1) {
    for (size_t i = 0; i < n; ++i) out[i] = get(base + int64_t(i));
  } else if (a.step == 0) {
    fill(out, n, R(get(base)));
  } else {
    for (size_t i = 0; i < n; ++i) out[i] = get(base + int64_t(i) * a.step);
  }
}

template <class R, class Put>
HWY_INLINE void store_points(const ArgAddr& a, size_t n, const R* HWY_RESTRICT v, Put put) {
  const int64_t base = a.base;
  if (a.offs) {
    for (size_t i = 0; i < n; ++i) put(base + a.offs[i], v[i]);
  } else if (a.step == 1) {
    for (size_t i = 0; i < n; ++i) put(base + int64_t(i), v[i]);
  } else if (a.step == 0) {
    if (n) put(base, v[n - 1]);  // every point writes the same element: the last one wins
  } else {
    for (size_t i = 0; i < n; ++i) put(base + int64_t(i) * a.step, v[i]);
  }
}

// Loads argument values (storage dtype dt) at the given points into register format.
HWY_INLINE void load_any(uint8_t dt, const void* data, size_t n, void* out, const ArgAddr& a) {
  switch (dt) {
    case EMBER_F32: {
      auto p = static_cast<const float*>(data);
      load_points(a, n, static_cast<float*>(out), [p](int64_t o) { return p[o]; });
      break;
    }
    case EMBER_F64: {
      auto p = static_cast<const double*>(data);
      load_points(a, n, static_cast<double*>(out), [p](int64_t o) { return p[o]; });
      break;
    }
    case EMBER_F16: {
      auto p = static_cast<const uint16_t*>(data);
      load_points(a, n, static_cast<float*>(out), [p](int64_t o) { return ember::half_to_float(p[o]); });
      break;
    }
    case EMBER_BF16: {
      auto p = static_cast<const uint16_t*>(data);
      load_points(a, n, static_cast<float*>(out), [p](int64_t o) { return from_bf16(p[o]); });
      break;
    }
    case EMBER_I32: {
      auto p = static_cast<const int32_t*>(data);
      load_points(a, n, static_cast<int32_t*>(out), [p](int64_t o) { return p[o]; });
      break;
    }
    case EMBER_I64: {
      auto p = static_cast<const int64_t*>(data);
      load_points(a, n, static_cast<int64_t*>(out), [p](int64_t o) { return p[o]; });
      break;
    }
    case EMBER_U8: {
      auto p = static_cast<const uint8_t*>(data);
      load_points(a, n, static_cast<int32_t*>(out), [p](int64_t o) { return int32_t(p[o]); });
      break;
    }
    case EMBER_I8: {
      auto p = static_cast<const int8_t*>(data);
      load_points(a, n, static_cast<int32_t*>(out), [p](int64_t o) { return int32_t(p[o]); });
      break;
    }
    case EMBER_I16: {
      auto p = static_cast<const int16_t*>(data);
      load_points(a, n, static_cast<int32_t*>(out), [p](int64_t o) { return int32_t(p[o]); });
      break;
    }
    case EMBER_U16: {
      auto p = static_cast<const uint16_t*>(data);
      load_points(a, n, static_cast<int32_t*>(out), [p](int64_t o) { return int32_t(p[o]); });
      break;
    }
    case EMBER_U32: {
      auto p = static_cast<const uint32_t*>(data);
      load_points(a, n, static_cast<int64_t*>(out), [p](int64_t o) { return int64_t(p[o]); });
      break;
    }
    case EMBER_U64: {
      auto p = static_cast<const uint64_t*>(data);
      load_points(a, n, static_cast<uint64_t*>(out), [p](int64_t o) { return p[o]; });
      break;
    }
    default: {
      auto p = static_cast<const uint8_t*>(data);
      load_points(a, n, static_cast<int32_t*>(out), [p](int64_t o) { return int32_t(p[o] != 0); });
      break;
    }
  }
}

HWY_INLINE void store_any(uint8_t dt, void* data, size_t n, const void* v, const ArgAddr& a) {
  switch (dt) {
    case EMBER_F32: {
      auto p = static_cast<float*>(data);
      store_points(a, n, static_cast<const float*>(v), [p](int64_t o, float x) { p[o] = x; });
      break;
    }
    case EMBER_F64: {
      auto p = static_cast<double*>(data);
      store_points(a, n, static_cast<const double*>(v), [p](int64_t o, double x) { p[o] = x; });
      break;
    }
    case EMBER_F16: {
      auto p = static_cast<uint16_t*>(data);
      store_points(a, n, static_cast<const float*>(v), [p](int64_t o, float x) { p[o] = ember::float_to_half(x); });
      break;
    }
    case EMBER_BF16: {
      auto p = static_cast<uint16_t*>(data);
      store_points(a, n, static_cast<const float*>(v), [p](int64_t o, float x) { p[o] = to_bf16(x); });
      break;
    }
    case EMBER_I32: {
      auto p = static_cast<int32_t*>(data);
      store_points(a, n, static_cast<const int32_t*>(v), [p](int64_t o, int32_t x) { p[o] = x; });
      break;
    }
    case EMBER_I64: {
      auto p = static_cast<int64_t*>(data);
      store_points(a, n, static_cast<const int64_t*>(v), [p](int64_t o, int64_t x) { p[o] = x; });
      break;
    }
    case EMBER_U8: case EMBER_I8: {
      auto p = static_cast<uint8_t*>(data);
      store_points(a, n, static_cast<const int32_t*>(v), [p](int64_t o, int32_t x) { p[o] = uint8_t(uint32_t(x)); });
      break;
    }
    case EMBER_U16: case EMBER_I16: {
      auto p = static_cast<uint16_t*>(data);
      store_points(a, n, static_cast<const int32_t*>(v), [p](int64_t o, int32_t x) { p[o] = uint16_t(uint32_t(x)); });
      break;
    }
    case EMBER_U32: {
      auto p = static_cast<uint32_t*>(data);
      store_points(a, n, static_cast<const int64_t*>(v), [p](int64_t o, int64_t x) { p[o] = uint32_t(uint64_t(x)); });
      break;
    }
    case EMBER_U64: {
      auto p = static_cast<uint64_t*>(data);
      store_points(a, n, static_cast<const uint64_t*>(v), [p](int64_t o, uint64_t x) { p[o] = x; });
      break;
    }
    default: {
      auto p = static_cast<uint8_t*>(data);
      store_points(a, n, static_cast<const int32_t*>(v), [p](int64_t o, int32_t x) { p[o] = x != 0; });
      break;
    }
  }
}

// ---- one instruction --------------------------------------------------------------------------
HWY_INLINE bool exec(const Tile& t, int32_t k, TileError* err) {
  const Program& p = *t.prog;
  const ember_kir_inst& in = p.insts[size_t(k)];
  const size_t n = t.len;
  const uint8_t kind = p.kind[size_t(k)];
  const uint8_t akind = in.a >= 0 ? p.kind[size_t(in.a)] : kind;
  switch (in.op) {
    case EMBER_KIR_CONST:
      switch (kind) {
        case kF32: fill(slot<float>(t, k), n, float(in.fimm)); break;
        case kF64: fill(slot<double>(t, k), n, in.fimm); break;
        case kI32: fill(slot<int32_t>(t, k), n, int32_t(uint32_t(uint64_t(in.iimm)))); break;
        case kU64: fill(slot<uint64_t>(t, k), n, uint64_t(in.iimm)); break;
        default: fill(slot<int64_t>(t, k), n, in.iimm); break;
      }
      return true;
    case EMBER_KIR_LOAD: {
      const ArgAddr& a = t.addr[in.arg];
      const uint8_t dt = p.arg_dtypes[size_t(in.arg)];
      const void* data = t.launch->args[in.arg].buffer->data;
      const bool direct_format =
          dt == EMBER_F32 || dt == EMBER_F64 || dt == EMBER_I32 || dt == EMBER_I64 || dt == EMBER_U64;
      if (!a.offs && a.step == 1 && direct_format && p.zero_copy[size_t(k)]) {
        // Zero copy: the register is the argument's memory itself.
        const size_t es = ember_dtype_bytes(dt);
        t.src[k] = static_cast<const char*>(data) + a.base * int64_t(es);
      } else {
        t.src[k] = slot<char>(t, k);
        load_any(dt, data, n, slot<char>(t, k), a);
      }
      return true;
    }
    case EMBER_KIR_LOAD_UNIFORM: {
      // The element at the argument's offset in every lane (a step-0 load).
      const ember_kir_arg& la = t.launch->args[in.arg];
      t.src[k] = slot<char>(t, k);
      load_any(p.arg_dtypes[size_t(in.arg)], la.buffer->data, n, slot<char>(t, k), ArgAddr{la.offset, 0, nullptr});
      return true;
    }
    case EMBER_KIR_LOAD_SCALAR:  // the launch's value in every lane
      fill(slot<int64_t>(t, k), n, t.launch->args[in.arg].offset);
      return true;
    case EMBER_KIR_LOAD_GATHER: {
      const ember_kir_arg& la = t.launch->args[in.arg];
      const ArgAddr& a = t.addr[in.arg];
      const int64_t* g = val<int64_t>(t, in.a);
      for (size_t i = 0; i < n; ++i)
        if (g[i] < 0 || g[i] >= la.gather_size) {
          *err = {EMBER_ERR_INVALID, "index out of range", g[i], la.gather_size};
          return false;
        }
      // Per-point offsets: the view's offset plus the gathered index along the gather axis.
      int64_t* offs = reinterpret_cast<int64_t*>(t.tmp);
      const int64_t gs = la.gather_stride;
      if (a.offs) {
        for (size_t i = 0; i < n; ++i) offs[i] = a.offs[i] + g[i] * gs;
      } else {
        for (size_t i = 0; i < n; ++i) offs[i] = int64_t(i) * a.step + g[i] * gs;
      }
      ArgAddr ga{a.base, 0, offs};
      t.src[k] = slot<char>(t, k);
      load_any(p.arg_dtypes[size_t(in.arg)], la.buffer->data, n, slot<char>(t, k), ga);
      return true;
    }
    case EMBER_KIR_IOTA: {
      const ArgAddr& a = t.addr[in.arg];
      int64_t* o = slot<int64_t>(t, k);
      if (a.offs) {
        for (size_t i = 0; i < n; ++i) o[i] = a.base + a.offs[i];
      } else {
        for (size_t i = 0; i < n; ++i) o[i] = a.base + int64_t(i) * a.step;
      }
      return true;
    }
    case EMBER_KIR_STORE: {
      const uint8_t dt = p.arg_dtypes[size_t(in.arg)];
      const uint8_t vdt = p.insts[size_t(in.a)].dtype;
      const void* v = t.src[in.a];
      if (vdt != dt) {  // store converts as CAST does
        cast_tile(vdt, dt, v, t.tmp, n);
        v = t.tmp;
      }
      store_any(dt, t.launch->args[in.arg].buffer->data, n, v, t.addr[in.arg]);
      return true;
    }
    case EMBER_KIR_CAST:
      cast_tile(p.insts[size_t(in.a)].dtype, in.dtype, t.src[in.a], slot<char>(t, k), n);
      return true;
    case EMBER_KIR_RAND_UNIFORM: {
      const int64_t* c = val<int64_t>(t, in.a);
      const uint32_t stream = uint32_t(in.aux);
      const int64_t* keys = in.b >= 0 ? val<int64_t>(t, in.b) : nullptr;  // per point, else iimm
      const uint64_t key = uint64_t(in.iimm);
      if (kind == kF64) {
        double* o = slot<double>(t, k);
        for (size_t i = 0; i < n; ++i)
          o[i] = ember::philox::uniform_f64(uint64_t(c[i]), stream, keys ? uint64_t(keys[i]) : key);
      } else {
        float* o = slot<float>(t, k);
        for (size_t i = 0; i < n; ++i)
          o[i] = ember::philox::uniform_f32(uint64_t(c[i]), stream, keys ? uint64_t(keys[i]) : key);
      }
      return true;
    }
    case EMBER_KIR_SELECT: {
      const bool wide = is_wide_kind(kind);
      if (akind == kI64) {
        const int64_t* c = val<int64_t>(t, in.a);
        if (wide) {
          const uint64_t *b = val<uint64_t>(t, in.b), *e = val<uint64_t>(t, in.c);
          uint64_t* o = slot<uint64_t>(t, k);
          for (size_t i = 0; i < n; ++i) o[i] = c[i] ? b[i] : e[i];
        } else {
          const uint32_t *b = val<uint32_t>(t, in.b), *e = val<uint32_t>(t, in.c);
          uint32_t* o = slot<uint32_t>(t, k);
          for (size_t i = 0; i < n; ++i) o[i] = c[i] ? b[i] : e[i];
        }
      } else {
        const int32_t* c = val<int32_t>(t, in.a);
        if (wide) {
          const uint64_t *b = val<uint64_t>(t, in.b), *e = val<uint64_t>(t, in.c);
          uint64_t* o = slot<uint64_t>(t, k);
          for (size_t i = 0; i < n; ++i) o[i] = c[i] ? b[i] : e[i];
        } else {
          const uint32_t *b = val<uint32_t>(t, in.b), *e = val<uint32_t>(t, in.c);
          uint32_t* o = slot<uint32_t>(t, k);
          for (size_t i = 0; i < n; ++i) o[i] = c[i] ? b[i] : e[i];
        }
      }
      return true;
    }
    case EMBER_KIR_LT: case EMBER_KIR_LE: case EMBER_KIR_GT: case EMBER_KIR_GE: case EMBER_KIR_EQ:
    case EMBER_KIR_NE: {
      int32_t* o = slot<int32_t>(t, k);
      switch (akind) {
        case kF32: compare(in.op, val<float>(t, in.a), val<float>(t, in.b), o, n); break;
        case kF64: compare(in.op, val<double>(t, in.a), val<double>(t, in.b), o, n); break;
        case kI32: compare(in.op, val<int32_t>(t, in.a), val<int32_t>(t, in.b), o, n); break;
        case kU64: compare(in.op, val<uint64_t>(t, in.a), val<uint64_t>(t, in.b), o, n); break;
        default: compare(in.op, val<int64_t>(t, in.a), val<int64_t>(t, in.b), o, n); break;
      }
      return true;
    }
    default: break;
  }
  // Arithmetic on the result's register kind (operands share it; program.cpp checks).
  const bool binary = in.op >= EMBER_KIR_ADD && in.op <= EMBER_KIR_OR;
  switch (kind) {
    case kF32:
      if (binary) float_binary(in.op, val<float>(t, in.a), val<float>(t, in.b), slot<float>(t, k), n);
      else float_unary(in.op, val<float>(t, in.a), slot<float>(t, k), n);
      return true;
    case kF64:
      if (binary) float_binary(in.op, val<double>(t, in.a), val<double>(t, in.b), slot<double>(t, k), n);
      else float_unary(in.op, val<double>(t, in.a), slot<double>(t, k), n);
      return true;
    case kI32:
      if (binary) return int_binary(in.op, val<int32_t>(t, in.a), val<int32_t>(t, in.b), slot<int32_t>(t, k), n, err);
      int_unary(in.op, val<int32_t>(t, in.a), slot<int32_t>(t, k), n);
      return true;
    case kU64:
      if (binary) return int_binary(in.op, val<uint64_t>(t, in.a), val<uint64_t>(t, in.b), slot<uint64_t>(t, k), n, err);
      int_unary(in.op, val<uint64_t>(t, in.a), slot<uint64_t>(t, k), n);
      return true;
    default:
      if (binary) return int_binary(in.op, val<int64_t>(t, in.a), val<int64_t>(t, in.b), slot<int64_t>(t, k), n, err);
      int_unary(in.op, val<int64_t>(t, in.a), slot<int64_t>(t, k), n);
      return true;
  }
}

bool RunList(const Tile& t, const int32_t* list, size_t count, TileError* err) {
  for (size_t q = 0; q < count; ++q) {
    const int32_t k = list[q];
    if (t.prog->insts[size_t(k)].op != EMBER_KIR_LOAD) t.src[k] = t.regs + size_t(k) * kSlotBytes;
    if (!exec(t, k, err)) return false;
  }
  return true;
}

// Arithmetic type of an accumulation: the float itself, or the unsigned twin of an integer.
template <class T, bool = std::is_floating_point_v<T>>
struct Wrap { using type = T; };
template <class T>
struct Wrap<T, false> { using type = std::make_unsigned_t<T>; };

// ---- reduction lanes ------------------------------------------------------------------------
template <class T>
HWY_INLINE void acc_lanes(uint16_t op, T* v, int64_t* HWY_RESTRICT idx, const T* x,
                          size_t n, int64_t idx0, int64_t step) {
  constexpr bool fl = std::is_floating_point_v<T>;
  using U = typename Wrap<T>::type;
  switch (op) {
    case EMBER_KIR_ACC_SUM: map2(v, x, v, n, [](T a, T b) { return T(U(a) + U(b)); }); break;
    case EMBER_KIR_ACC_PROD: map2(v, x, v, n, [](T a, T b) { return T(U(a) * U(b)); }); break;
    case EMBER_KIR_ACC_MAX:
      if constexpr (fl)
        map2(v, x, v, n, [](T a, T b) { return (a != a || b != b) ? std::numeric_limits<T>::quiet_NaN() : (a > b ? a : b); });
      else map2(v, x, v, n, [](T a, T b) { return a > b ? a : b; });
      break;
    case EMBER_KIR_ACC_MIN:
      if constexpr (fl)
        map2(v, x, v, n, [](T a, T b) { return (a != a || b != b) ? std::numeric_limits<T>::quiet_NaN() : (a < b ? a : b); });
      else map2(v, x, v, n, [](T a, T b) { return a < b ? a : b; });
      break;
    default: {  // argmax / argmin: first extreme value per lane; the first NaN wins for good
      const bool is_max = op == EMBER_KIR_ACC_ARGMAX;
      for (size_t i = 0; i < n; ++i) {
        const T cur = v[i], xi = x[i];
        const int64_t id = idx0 + int64_t(i) * step;
        if constexpr (fl) {
          if (cur != cur) continue;
          if (xi != xi) {
            v[i] = xi;
            idx[i] = id;
            continue;
          }
        }
        const bool better = is_max ? xi > cur : xi < cur;
        if (better || idx[i] < 0) {
          v[i] = xi;
          idx[i] = id;
        }
      }
      break;
    }
  }
}

void AccUpdate(uint16_t op, uint8_t kind, void* val, int64_t* idx, const void* x, size_t n, int64_t idx0,
               int64_t step) {
  switch (kind) {
    case kF32: acc_lanes(op, static_cast<float*>(val), idx, static_cast<const float*>(x), n, idx0, step); break;
    case kF64: acc_lanes(op, static_cast<double*>(val), idx, static_cast<const double*>(x), n, idx0, step); break;
    case kI32: acc_lanes(op, static_cast<int32_t*>(val), idx, static_cast<const int32_t*>(x), n, idx0, step); break;
    case kU64: acc_lanes(op, static_cast<uint64_t*>(val), idx, static_cast<const uint64_t*>(x), n, idx0, step); break;
    default: acc_lanes(op, static_cast<int64_t*>(val), idx, static_cast<const int64_t*>(x), n, idx0, step); break;
  }
}

const char* TargetName() { return hwy::TargetName(HWY_TARGET); }

void ErfF32(const float* HWY_RESTRICT a, float* HWY_RESTRICT o, size_t n) { erf_tile(a, o, n); }
void ErfF64(const double* HWY_RESTRICT a, double* HWY_RESTRICT o, size_t n) { erf_tile(a, o, n); }

}  // namespace ember::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ember::cpu {

HWY_EXPORT(RunList);
HWY_EXPORT(AccUpdate);
HWY_EXPORT(TargetName);
HWY_EXPORT(ErfF32);
HWY_EXPORT(ErfF64);

bool run_list(const Tile& t, const int32_t* list, size_t n, TileError* err) {
  return HWY_DYNAMIC_DISPATCH(RunList)(t, list, n, err);
}
void acc_update(uint16_t op, uint8_t kind, void* val, int64_t* idx, const void* x, size_t n, int64_t idx0,
                int64_t idx_step) {
  HWY_DYNAMIC_DISPATCH(AccUpdate)(op, kind, val, idx, x, n, idx0, idx_step);
}
const char* simd_target_name() { return HWY_DYNAMIC_DISPATCH(TargetName)(); }
void erf_array(const float* a, float* out, size_t n) { HWY_DYNAMIC_DISPATCH(ErfF32)(a, out, n); }
void erf_array(const double* a, double* out, size_t n) { HWY_DYNAMIC_DISPATCH(ErfF64)(a, out, n); }

}  // namespace ember::cpu
#endif
