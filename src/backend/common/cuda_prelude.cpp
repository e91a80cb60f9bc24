// The text every generated CUDA kernel starts with (emit_cuda.h): fixed-width integer types (NVRTC
// compiles without the system headers), the error word, and the helpers the expression table
// calls: NaN-propagating max/min, float-to-int conversions and f16/bf16 rounding as the core's,
// Philox random numbers, and integer division, remainder and power with the interpreter's errors.
// Each follows the interpreter (src/backend/reference/reference.cpp) and the C++ table
// (emit_c.cpp) where C++ leaves a case undefined.
#include <string>

#include "backend/common/emit_cuda.h"

namespace ember::emit {

namespace {

const char* kCudaPrelude = R"(typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
#define UINT64_C(c) c##ULL
#define INT32_MIN (-2147483647 - 1)
#define INT64_MIN (-9223372036854775807LL - 1)
// The error word (emit_gpu.h kErr*): [0] code, [1] launch id, [2..3] value, [4..5] extra; the first
// failing point wins.
struct EmberErr { unsigned int* E; int64_t id; };
__device__ __noinline__ void e_fail(EmberErr er, unsigned int code, int64_t value, int64_t extra) {
  if (atomicCAS(er.E, 0u, code) == 0u) {
    er.E[1] = (unsigned int)er.id;
    er.E[2] = (unsigned int)(uint64_t)value; er.E[3] = (unsigned int)((uint64_t)value >> 32);
    er.E[4] = (unsigned int)(uint64_t)extra; er.E[5] = (unsigned int)((uint64_t)extra >> 32);
  }
}
__device__ __forceinline__ float e_nan(float) { return __int_as_float(0x7fc00000); }
__device__ __forceinline__ double e_nan(double) { return __longlong_as_double(0x7ff8000000000000LL); }
template <class T> __device__ __forceinline__ T e_max(T x, T y) { return (x != x || y != y) ? e_nan(x) : (x > y ? x : y); }
template <class T> __device__ __forceinline__ T e_min(T x, T y) { return (x != x || y != y) ? e_nan(x) : (x < y ? x : y); }
template <class T> __device__ __forceinline__ T e_rem(T x, T y) {
  double m = fmod(double(x), double(y));
  if (m != 0 && ((m < 0) != (y < 0))) m += double(y);
  return T(m);
}
template <class F> __device__ __forceinline__ int32_t e_to_i32(F x) {
  return (x >= F(-2147483648.0) && x < F(2147483648.0)) ? int32_t(x) : INT32_MIN;
}
template <class F> __device__ __forceinline__ int64_t e_to_i64(F x) {
  return (x >= F(-9223372036854775808.0) && x < F(9223372036854775808.0)) ? int64_t(x) : INT64_MIN;
}
template <class F> __device__ __forceinline__ uint64_t e_to_u64(F x) {
  if (x >= F(0) && x < F(18446744073709551616.0)) return uint64_t(x);
  if (x > F(-9223372036854775808.0) && x < F(0)) return uint64_t(int64_t(x));
  return uint64_t(1) << 63;
}
// f16/bf16 bits <-> f32, bit for bit as the core's conversions (src/core/dtype.cpp).
__device__ __forceinline__ float e_h2f(uint32_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, em = h & 0x7fffu;
  if (em >= 0x7c00u) return __uint_as_float(sign | (em << 13) | 0x7f800000u);
  if (em >= 0x0400u) return __uint_as_float(sign | ((em << 13) + 0x38000000u));
  return __uint_as_float(sign | __float_as_uint(float(int32_t(em)) * 5.9604644775390625e-08f));  // exact
}
__device__ __forceinline__ uint16_t e_f2h(float f) {
  const uint32_t x = __float_as_uint(f);
  const uint32_t sign = (x >> 16) & 0x8000u, absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) return uint16_t(sign | (absx > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (absx >= 0x477ff000u) return uint16_t(sign | 0x7c00u);
  if (absx < 0x38800000u) return uint16_t(sign | uint32_t(rintf(__uint_as_float(absx) * 16777216.0f)));
  const uint32_t mant = absx & 0x7fffffu;
  const uint32_t h = (((absx >> 23) - 112u) << 10) | (mant >> 13), rest = mant & 0x1fffu;
  const uint32_t up = rest > 0x1000u ? 1u : (rest == 0x1000u ? (h & 1u) : 0u);
  return uint16_t(sign | (h + up));
}
__device__ __forceinline__ float e_b2f(uint32_t b) { return __uint_as_float(b << 16); }
__device__ __forceinline__ uint16_t e_f2b(float f) {
  const uint32_t x = __float_as_uint(f);
  return uint16_t((x & 0x7fffffffu) > 0x7f800000u ? (x >> 16) | 0x40u : (x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
// Philox4x32-10 (src/backend/common/philox.h); a stream is a word of the block (f64: a pair).
__device__ __forceinline__ void e_philox(uint64_t counter, uint64_t key, uint32_t* w) {
  uint32_t c0 = uint32_t(counter), c1 = uint32_t(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = uint32_t(key), k1 = uint32_t(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint32_t hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const uint32_t hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c1 = lo1; c3 = lo0; c0 = n0; c2 = n2;
    k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
  }
  w[0] = c0; w[1] = c1; w[2] = c2; w[3] = c3;
}
__device__ __forceinline__ float e_uniform_f32(int64_t c, uint32_t s, uint64_t k) {
  uint32_t w[4]; e_philox(uint64_t(c), k, w);
  return float(w[s & 3u] >> 8) * (1.0f / 16777216.0f);
}
__device__ __forceinline__ double e_uniform_f64(int64_t c, uint32_t s, uint64_t k) {
  uint32_t w[4]; e_philox(uint64_t(c), k, w);
  return double(((uint64_t(w[(2u * s) & 3u]) << 32) | w[(2u * s + 1u) & 3u]) >> 11) * (1.0 / 9007199254740992.0);
}
__device__ __forceinline__ int64_t e_gather(EmberErr er, int64_t base, int64_t index, int64_t stride, int64_t size) {
  if (index < 0 || index >= size) { e_fail(er, 1u, index, size); return base; }
  return base + index * stride;
}
// Integer division, remainder and power in the register type T (int32_t or int64_t) with its
// unsigned twin U for wrapping arithmetic; division by zero and negative exponents are reported
// as the interpreter reports them.
template <class T, class U> __device__ __forceinline__ T e_div(EmberErr er, T a, T b) {
  if (b == T(0)) { e_fail(er, 2u, int64_t(a), 0); return T(0); }
  return b == T(-1) ? T(U(0) - U(a)) : a / b;
}
template <class T, class U> __device__ __forceinline__ T e_floordiv(EmberErr er, T a, T b) {
  if (b == T(0)) { e_fail(er, 2u, int64_t(a), 0); return T(0); }
  if (b == T(-1)) return T(U(0) - U(a));
  T q = a / b;
  if (a - q * b != T(0) && ((a < T(0)) != (b < T(0)))) q -= T(1);
  return q;
}
template <class T> __device__ __forceinline__ T e_irem(EmberErr er, T a, T b) {
  if (b == T(0)) { e_fail(er, 3u, int64_t(a), 0); return T(0); }
  if (b == T(-1)) return T(0);
  T m = a - (a / b) * b;
  if (m != T(0) && ((m < T(0)) != (b < T(0)))) m += b;
  return m;
}
template <class T> __device__ __forceinline__ T e_ifmod(EmberErr er, T a, T b) {
  if (b == T(0)) { e_fail(er, 3u, int64_t(a), 0); return T(0); }
  return b == T(-1) ? T(0) : a - (a / b) * b;
}
template <class T, class U> __device__ __forceinline__ T e_ipow(EmberErr er, T a, T b) {
  if (b < T(0)) { e_fail(er, 4u, int64_t(b), 0); return T(0); }
  U r = 1, x = U(a);
  for (T e = b; e > T(0); e >>= 1) { if ((e & T(1)) != T(0)) r *= x; x *= x; }
  return T(r);
}
// u64: unsigned division and remainder (division by zero reported with the dividend's bits).
__device__ __forceinline__ uint64_t e_div_ul(EmberErr er, uint64_t a, uint64_t b) {
  if (b == 0ULL) { e_fail(er, 2u, int64_t(a), 0); return 0ULL; }
  return a / b;
}
__device__ __forceinline__ uint64_t e_rem_ul(EmberErr er, uint64_t a, uint64_t b) {
  if (b == 0ULL) { e_fail(er, 3u, int64_t(a), 0); return 0ULL; }
  return a % b;
}
__device__ __forceinline__ uint64_t e_pow_ul(uint64_t a, uint64_t b) {
  uint64_t r = 1ULL, x = a;
  for (uint64_t e = b; e > 0ULL; e >>= 1) { if ((e & 1ULL) != 0ULL) r *= x; x *= x; }
  return r;
}
)";

}  // namespace

std::string cuda_prelude(const CudaTarget& target) {
  std::string s = kCudaPrelude;
  s += target.index32 ? "typedef int IX;\n" : "typedef long long IX;\n";
  return s;
}

}  // namespace ember::emit
