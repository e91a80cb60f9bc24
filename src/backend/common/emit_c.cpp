// The C-like KIR emitter (see emit_c.h): the C++ expression table, the per-point body and the
// CPU loop structure. The formulas mirror src/backend/cpu/tile_kernels.cpp (tier 0).
// GCC 12 reports a false -Wrestrict inside std::string concatenation (GCC bug 105329).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif
#include "backend/common/emit_c.h"

#include <cinttypes>
#include <cstdarg>
#include <cmath>
#include <cstdio>
#include <vector>

namespace ember::emit {

namespace {

bool is_float(uint8_t dt) { return dt == EMBER_F32 || dt == EMBER_F64; }
bool is_half(uint8_t dt) { return dt == EMBER_F16 || dt == EMBER_BF16; }

std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char* f, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}

std::string double_literal(double v) {
  if (std::isnan(v)) return "__builtin_nan(\"\")";
  if (std::isinf(v)) return v > 0 ? "__builtin_inf()" : "(-__builtin_inf())";
  return fmt("%a", v);
}

const char* math_name(uint16_t op) {
  switch (op) {
    case EMBER_KIR_EXP: return "exp";
    case EMBER_KIR_LOG: return "log";
    case EMBER_KIR_TANH: return "tanh";
    case EMBER_KIR_ERF: return "erf";
    case EMBER_KIR_SIN: return "sin";
    case EMBER_KIR_COS: return "cos";
    default: return nullptr;
  }
}

// Helpers of the C++ table. The math functions are declared with the `simd` attribute (as glibc
// does under -ffast-math) so GCC calls libmvec's vector variants; the kernels are built without
// -ffast-math, so all other arithmetic keeps IEEE semantics.
const char* kCppPrelude = R"(#include <stdint.h>
extern "C" {
#define EMBER_SIMD __attribute__((simd("notinbranch")))
EMBER_SIMD float expf(float) noexcept; EMBER_SIMD double exp(double) noexcept;
EMBER_SIMD float logf(float) noexcept; EMBER_SIMD double log(double) noexcept;
EMBER_SIMD float tanhf(float) noexcept; EMBER_SIMD double tanh(double) noexcept;
EMBER_SIMD float erff(float) noexcept; EMBER_SIMD double erf(double) noexcept;
EMBER_SIMD float sinf(float) noexcept; EMBER_SIMD double sin(double) noexcept;
EMBER_SIMD float cosf(float) noexcept; EMBER_SIMD double cos(double) noexcept;
EMBER_SIMD double pow(double, double) noexcept;
double fmod(double, double) noexcept;
}
namespace {
template <class F> inline int32_t e_to_i32(F x) {
  return (x >= F(-2147483648.0) && x < F(2147483648.0)) ? int32_t(x) : INT32_MIN;
}
template <class F> inline int64_t e_to_i64(F x) {
  return (x >= F(-9223372036854775808.0) && x < F(9223372036854775808.0)) ? int64_t(x) : INT64_MIN;
}
template <class F> inline uint64_t e_to_u64(F x) {
  if (x >= F(0) && x < F(18446744073709551616.0)) return uint64_t(x);
  if (x > F(-9223372036854775808.0) && x < F(0)) return uint64_t(int64_t(x));
  return uint64_t(1) << 63;
}
template <class T> inline T e_max(T x, T y) { return (x != x || y != y) ? T(__builtin_nan("")) : (x > y ? x : y); }
template <class T> inline T e_min(T x, T y) { return (x != x || y != y) ? T(__builtin_nan("")) : (x < y ? x : y); }
template <class T> inline T e_rem(T x, T y) {
  double m = fmod(double(x), double(y));
  if (m != 0 && ((m < 0) != (y < 0))) m += double(y);
  return T(m);
}
// erf for f32 (coefficients from tools/fit_erf.py): branch-free and call-free, so it vectorizes
// inside `#pragma omp simd` (a libmvec call spills the vector registers around it). At most
// 1 ulp from the correctly rounded result over all 2^32 inputs (checked exhaustively), absolute
// error <= 5.9e-8 where 1 + erf(x) cancels (GELU's tail); twice as fast as erf in f64.
//   |x| < 1:  x + x P(x^2)
//   |x| >= 1: sign(x) (1 - exp(-z^2 + S(z))), z = min(|x|, 4) (erf rounds to 1 past 3.92), with
//             exp inlined as 2^n (1 + r Q(r)) and z^2 split exactly (fma) so -z^2 + S(z) is never
//             rounded as a whole.
inline float e_erff(float x) {
  const float ax = __builtin_fabsf(x);
  const float t = x * x;
  float p = 0x1.4771fep-14f;
  p = __builtin_fmaf(p, t, -0x1.a3515ep-11f);
  p = __builtin_fmaf(p, t, 0x1.53f224p-8f);
  p = __builtin_fmaf(p, t, -0x1.b7f71ap-6f);
  p = __builtin_fmaf(p, t, 0x1.ce2ce6p-4f);
  p = __builtin_fmaf(p, t, -0x1.81273ep-2f);
  p = __builtin_fmaf(p, t, 0x1.06eba8p-3f);
  const float lo = __builtin_fmaf(x, p, x);
  const float z = ax > 0x1p+2f ? 0x1p+2f : ax;  // NaN passes through
  float s = 0x1.852c82p-13f;
  s = __builtin_fmaf(s, z, -0x1.814ca6p-9f);
  s = __builtin_fmaf(s, z, 0x1.65421cp-6f);
  s = __builtin_fmaf(s, z, -0x1.a60a84p-4f);
  s = __builtin_fmaf(s, z, 0x1.7274f8p-2f);
  s = __builtin_fmaf(s, z, -0x1.2085b2p+0f);
  s = __builtin_fmaf(s, z, -0x1.72e85p-12f);
  const float zz = z * z;
  const float zl = __builtin_fmaf(z, z, -zz);
  const float k = __builtin_fmaf(s - zz, 0x1.715476p+0f, 0x1.8p+23f);  // 1.5*2^23 + n
  const float n = k - 0x1.8p+23f;
  float r = s - __builtin_fmaf(n, 0x1.62e4p-1f, zz);
  r = __builtin_fmaf(n, -0x1.7f7d1cp-20f, r - zl);
  float q = 0x1.37670ap-10f;
  q = __builtin_fmaf(q, r, 0x1.12284cp-7f);
  q = __builtin_fmaf(q, r, 0x1.559c8ep-5f);
  q = __builtin_fmaf(q, r, 0x1.5554bp-3f);
  q = __builtin_fmaf(q, r, 0x1.ffffacp-2f);
  q = __builtin_fmaf(q, r, 0x1p+0f);
  q = __builtin_fmaf(q, r, 0x1p+0f);
  const float e = q * __builtin_bit_cast(float, (__builtin_bit_cast(uint32_t, k) + 127u) << 23);
  const float hi = __builtin_copysignf(1.0f - e, x);
  return ax < 0x1p+0f ? lo : hi;
}
// exp for f32: exp(x) = 2^n exp(r), n = round(x / ln 2), r = x - n ln 2 in two FMA steps
// (Cody-Waite), exp(r) on |r| <= ln 2 / 2 by its degree-7 Taylor polynomial, 2^n applied as two
// factors so that subnormal results are rounded once. At most 1 ulp from the correctly rounded
// result over all 2^32 inputs (checked exhaustively); branch-free, so it vectorizes.
inline float e_expf(float x) {
  const float k = __builtin_fmaf(x, 0x1.715476p+0f, 0x1.8p+23f);  // 1.5 * 2^23 + round(x / ln 2)
  const float n = k - 0x1.8p+23f;
  float r = __builtin_fmaf(-n, 0x1.62e4p-1f, x);
  r = __builtin_fmaf(-n, 0x1.7f7d1cp-20f, r);
  float p = 1.0f / 5040.0f;
  p = __builtin_fmaf(p, r, 1.0f / 720.0f);
  p = __builtin_fmaf(p, r, 1.0f / 120.0f);
  p = __builtin_fmaf(p, r, 1.0f / 24.0f);
  p = __builtin_fmaf(p, r, 1.0f / 6.0f);
  p = __builtin_fmaf(p, r, 0.5f);
  p = __builtin_fmaf(p, r, 1.0f);
  p = __builtin_fmaf(p, r, 1.0f);
  const int32_t ni = __builtin_bit_cast(int32_t, k) - 0x4b400000;
  const int32_t n1 = ni >> 1, n2 = ni - n1;
  const float y = (p * __builtin_bit_cast(float, (n1 + 127) << 23)) * __builtin_bit_cast(float, (n2 + 127) << 23);
  // Beyond 89 the result overflows (and the scale's bits would wrap), below -104 it underflows;
  // NaN stays NaN. Bitwise selects: GCC turns ternaries on constants into branches here.
  const uint32_t over = 0u - uint32_t(x > 0x1.64p+6f), under = 0u - uint32_t(x < -0x1.ap+6f), nan = 0u - uint32_t(x != x);
  uint32_t bits = (__builtin_bit_cast(uint32_t, y) & ~over & ~under) | (0x7f800000u & over);
  bits = (bits & ~nan) | (__builtin_bit_cast(uint32_t, x + x) & nan);
  return __builtin_bit_cast(float, bits);
}
// f16/bf16 storage <-> the f32 registers that hold their values; bit for bit as the core's
// half_to_float / float_to_half / float_to_bf16 (src/core/dtype.cpp): round to nearest even,
// overflow to inf, subnormals, NaN kept as a NaN with its sign. Branch-free, so they vectorize.
inline float e_h2f(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16, em = h & 0x7fffu;
  const uint32_t normal = (em << 13) + 0x38000000u;  // exponent rebiased by 127 - 15
  const uint32_t infnan = (em << 13) | 0x7f800000u;
  const uint32_t sub = __builtin_bit_cast(uint32_t, float(int32_t(em)) * 0x1p-24f);  // exact
  // Masks, not nested ternaries: GCC does not if-convert those here (checked with -fopt-info-vec).
  const uint32_t inf_mask = 0u - uint32_t(em >= 0x7c00u), normal_mask = 0u - uint32_t(em >= 0x0400u);
  const uint32_t bits = (infnan & inf_mask) | (normal & normal_mask & ~inf_mask) | (sub & ~normal_mask);
  return __builtin_bit_cast(float, sign | bits);
}
inline uint16_t e_f2h(float f) {
  const uint32_t x = __builtin_bit_cast(uint32_t, f);
  const uint32_t sign = (x >> 16) & 0x8000u, absx = x & 0x7fffffffu;
  const uint32_t infnan = absx > 0x7f800000u ? 0x7e00u : 0x7c00u;
  // Below the smallest normal half: the half subnormal unit 2^-24 scaled to 1, rounded to nearest
  // even by adding and subtracting 2^23 (exact: the scaled value is below 2^10).
  // (Clamped so the conversion to int is defined for every lane; only small values are used.)
  const float scaled_raw = __builtin_bit_cast(float, absx) * 16777216.0f;
  const float scaled = scaled_raw < 2048.0f ? scaled_raw : 2048.0f;
  const uint32_t sub = uint32_t(int32_t((scaled + 0x1p23f) - 0x1p23f));
  const uint32_t mant = absx & 0x7fffffu;
  const uint32_t h = (((absx >> 23) - 112u) << 10) | (mant >> 13), rest = mant & 0x1fffu;
  // Ternaries without || or &&: those become branches and the loop is not vectorized.
  const uint32_t up = rest > 0x1000u ? 1u : (rest == 0x1000u ? (h & 1u) : 0u);
  const uint32_t r = absx >= 0x7f800000u ? infnan
                   : absx >= 0x477ff000u ? 0x7c00u  // rounds to 65520 or more: overflow
                   : absx < 0x38800000u ? sub : h + up;
  return uint16_t(sign | r);
}
inline float e_b2f(uint16_t b) { return __builtin_bit_cast(float, uint32_t(b) << 16); }
inline uint16_t e_f2b(float f) {
  const uint32_t x = __builtin_bit_cast(uint32_t, f);
  return uint16_t((x & 0x7fffffffu) > 0x7f800000u ? (x >> 16) | 0x40u : (x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
// Philox4x32-10 (src/backend/common/philox.h); a stream is a word of the block (f64: a pair), so
// a normal's two uniforms come from one block (GCC computes it once for both).
inline void e_philox(uint64_t counter, uint64_t key, uint32_t* w) {
  uint32_t c0 = uint32_t(counter), c1 = uint32_t(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = uint32_t(key), k1 = uint32_t(key >> 32);
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = uint64_t(0xD2511F53u) * c0, p1 = uint64_t(0xCD9E8D57u) * c2;
    uint32_t n0 = uint32_t(p1 >> 32) ^ c1 ^ k0, n2 = uint32_t(p0 >> 32) ^ c3 ^ k1;
    c1 = uint32_t(p1); c3 = uint32_t(p0); c0 = n0; c2 = n2;
    k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
  }
  w[0] = c0; w[1] = c1; w[2] = c2; w[3] = c3;
}
inline float e_uniform_f32(int64_t c, uint32_t s, uint64_t k) {
  uint32_t w[4]; e_philox(uint64_t(c), k, w);
  return float(w[s & 3u] >> 8) * (1.0f / 16777216.0f);
}
inline double e_uniform_f64(int64_t c, uint32_t s, uint64_t k) {
  uint32_t w[4]; e_philox(uint64_t(c), k, w);
  return double((((uint64_t)w[(2u * s) & 3u] << 32) | w[(2u * s + 1u) & 3u]) >> 11) * (1.0 / 9007199254740992.0);
}
// Copies n bytes to dst with non-temporal (streaming) stores where the target has them: used for
// outputs far larger than the cache (emit_c.h, "Streaming stores"), whose lines a plain store
// would first read from memory. A kernel that streams calls e_stream_fence before it returns:
// x86 orders non-temporal stores only by a fence, and the thread pool's completion flag that
// follows is a plain store.
inline void e_stream(void* dst, const void* src, int64_t n) {
#if defined(__AVX__) && defined(__GNUC__)
#if defined(__AVX512F__)
  enum { W = 64 };
  typedef long long e_line __attribute__((vector_size(W)));
#define E_STREAM_STORE __builtin_ia32_movntdq512
#else
  enum { W = 32 };
  typedef long long e_line __attribute__((vector_size(W)));
#define E_STREAM_STORE __builtin_ia32_movntdq256
#endif
  char* d = (char*)dst;
  const char* s = (const char*)src;
  int64_t head = int64_t((0u - uintptr_t(d)) & (W - 1));
  if (head > n) head = n;
  if (head) __builtin_memcpy(d, s, (unsigned long)head);
  d += head, s += head, n -= head;
  for (; n >= W; n -= W, d += W, s += W) {
    e_line v;
    __builtin_memcpy(&v, s, W);
    E_STREAM_STORE((e_line*)d, v);
  }
#undef E_STREAM_STORE
  if (n) __builtin_memcpy(d, s, (unsigned long)n);
#else
  __builtin_memcpy(dst, src, (unsigned long)n);
#endif
}
inline void e_stream_fence() {
#if defined(__AVX__) && defined(__GNUC__)
  __builtin_ia32_sfence();
#endif
}
}  // namespace
)";

}  // namespace

std::string ExprTable::prelude() const { return kCppPrelude; }

const char* ExprTable::reg_type(uint8_t dt) const {
  switch (dt) {
    case EMBER_F32: return "float";
    case EMBER_F64: return "double";
    case EMBER_I64: case EMBER_U32: return "int64_t";
    case EMBER_U64: return "uint64_t";
    case EMBER_I32: case EMBER_U8: case EMBER_BOOL: case EMBER_I8: case EMBER_I16: case EMBER_U16: return "int32_t";
    case EMBER_F16: case EMBER_BF16: return "float";  // values rounded to the half's precision
    default: return nullptr;
  }
}

const char* ExprTable::storage_type(uint8_t dt) const {
  switch (dt) {
    case EMBER_F32: return "float";
    case EMBER_F64: return "double";
    case EMBER_I64: return "int64_t";
    case EMBER_I32: return "int32_t";
    case EMBER_U8: case EMBER_BOOL: return "uint8_t";
    case EMBER_F16: case EMBER_BF16: return "uint16_t";
    case EMBER_I8: return "int8_t";
    case EMBER_I16: return "int16_t";
    case EMBER_U16: return "uint16_t";
    case EMBER_U32: return "uint32_t";
    case EMBER_U64: return "uint64_t";
    default: return nullptr;
  }
}

std::string ExprTable::constant(const ember_kir_inst& in) const {
  switch (in.dtype) {
    case EMBER_F32: case EMBER_F16: case EMBER_BF16: return "float(" + double_literal(in.fimm) + ")";
    case EMBER_F64: return double_literal(in.fimm);
    case EMBER_I64: case EMBER_U32: return fmt("int64_t(UINT64_C(0x%" PRIx64 "))", uint64_t(in.iimm));
    case EMBER_U64: return fmt("UINT64_C(0x%" PRIx64 ")", uint64_t(in.iimm));
    case EMBER_I32: case EMBER_U8: case EMBER_BOOL: case EMBER_I8: case EMBER_I16: case EMBER_U16:
      return fmt("int32_t(uint32_t(UINT64_C(0x%" PRIx64 ")))", uint64_t(in.iimm));
    default: return "";
  }
}

// f16/bf16 values live in f32 registers and their arithmetic is f32 arithmetic (a CAST to the
// half dtype rounds, as in the interpreter and the reference backend).
static uint8_t arithmetic_dtype(uint8_t dt) { return is_half(dt) ? uint8_t(EMBER_F32) : dt; }

std::string ExprTable::unary(uint16_t op, uint8_t dt, const std::string& a) const {
  dt = arithmetic_dtype(dt);
  const char* T = reg_type(dt);
  if (!T) return "";
  if (is_float(dt)) {
    const char* f = dt == EMBER_F32 ? "f" : "";
    switch (op) {
      case EMBER_KIR_NEG: return "-" + a;
      case EMBER_KIR_ABS: return fmt("__builtin_fabs%s(%s)", f, a.c_str());
      case EMBER_KIR_FLOOR: return fmt("__builtin_floor%s(%s)", f, a.c_str());
      case EMBER_KIR_CEIL: return fmt("__builtin_ceil%s(%s)", f, a.c_str());
      case EMBER_KIR_SQRT: return fmt("__builtin_sqrt%s(%s)", f, a.c_str());
      // f32: the prelude's e_erff (1 ulp; tier 0 computes the same polynomial, tile_kernels.cpp;
      // libmvec's erff is off by up to ~2 ulp next to +-1, where 1 + erf(x), GELU's tail, cancels).
      case EMBER_KIR_ERF: return dt == EMBER_F32 ? fmt("e_erff(%s)", a.c_str()) : fmt("erf(%s)", a.c_str());
      // f32: the prelude's e_expf (1 ulp over all inputs; libmvec's expf is off by up to 3, and
      // its call spills the vector registers of the loop around it).
      case EMBER_KIR_EXP: return dt == EMBER_F32 ? fmt("e_expf(%s)", a.c_str()) : fmt("exp(%s)", a.c_str());
      default:
        if (const char* m = math_name(op)) return fmt("%s%s(%s)", m, f, a.c_str());
        return "";
    }
  }
  const char* U = wrap_type(dt);
  switch (op) {
    case EMBER_KIR_NEG: return fmt("%s(%s(0) - %s(%s))", T, U, U, a.c_str());
    case EMBER_KIR_ABS:
      if (dt == EMBER_U64) return a;
      return fmt("(%s < 0 ? %s(%s(0) - %s(%s)) : %s)", a.c_str(), T, U, U, a.c_str(), a.c_str());
    case EMBER_KIR_NOT: return fmt("%s(%s == 0)", T, a.c_str());
    case EMBER_KIR_FLOOR: case EMBER_KIR_CEIL: return a;
    default: return "";
  }
}

std::string ExprTable::binary(uint16_t op, uint8_t dt, const std::string& a, const std::string& b) const {
  dt = arithmetic_dtype(dt);
  const char* T = reg_type(dt);
  if (!T) return "";
  const char *x = a.c_str(), *y = b.c_str();
  if (is_float(dt)) {
    switch (op) {
      case EMBER_KIR_ADD: return fmt("%s + %s", x, y);
      case EMBER_KIR_SUB: return fmt("%s - %s", x, y);
      case EMBER_KIR_MUL: return fmt("%s * %s", x, y);
      case EMBER_KIR_DIV: return fmt("%s / %s", x, y);
      case EMBER_KIR_FLOORDIV: return fmt("%s(__builtin_floor(double(%s) / double(%s)))", T, x, y);
      case EMBER_KIR_REM: return fmt("e_rem(%s, %s)", x, y);
      case EMBER_KIR_FMOD: return fmt("%s(fmod(double(%s), double(%s)))", T, x, y);
      case EMBER_KIR_POW: return fmt("%s(pow(double(%s), double(%s)))", T, x, y);
      case EMBER_KIR_MAX: return fmt("e_max(%s, %s)", x, y);
      case EMBER_KIR_MIN: return fmt("e_min(%s, %s)", x, y);
      default: return "";
    }
  }
  const char* U = wrap_type(dt);
  switch (op) {
    case EMBER_KIR_ADD: return fmt("%s(%s(%s) + %s(%s))", T, U, x, U, y);
    case EMBER_KIR_SUB: return fmt("%s(%s(%s) - %s(%s))", T, U, x, U, y);
    case EMBER_KIR_MUL: return fmt("%s(%s(%s) * %s(%s))", T, U, x, U, y);
    case EMBER_KIR_MAX: return fmt("(%s > %s ? %s : %s)", x, y, x, y);
    case EMBER_KIR_MIN: return fmt("(%s < %s ? %s : %s)", x, y, x, y);
    case EMBER_KIR_AND: return fmt("%s((%s != 0) & (%s != 0))", T, x, y);
    case EMBER_KIR_OR: return fmt("%s((%s != 0) | (%s != 0))", T, x, y);
    default: return "";  // integer division, remainder and power can fail: interpreter only
  }
}

std::string ExprTable::compare(uint16_t op, uint8_t operand_dt, const std::string& a, const std::string& b) const {
  operand_dt = arithmetic_dtype(operand_dt);
  if (!reg_type(operand_dt)) return "";
  const char* c = nullptr;
  switch (op) {
    case EMBER_KIR_LT: c = "<"; break;
    case EMBER_KIR_LE: c = "<="; break;
    case EMBER_KIR_GT: c = ">"; break;
    case EMBER_KIR_GE: c = ">="; break;
    case EMBER_KIR_EQ: c = "=="; break;
    case EMBER_KIR_NE: c = "!="; break;
    default: return "";
  }
  return fmt("int32_t(%s %s %s)", a.c_str(), c, b.c_str());
}

std::string ExprTable::cast(uint8_t from, uint8_t to, const std::string& a) const {
  const char* S = reg_type(from);
  if (!S || !reg_type(to)) return "";
  const char* x = a.c_str();
  const bool sf = is_float(from) || is_half(from);
  switch (to) {
    case EMBER_F16: return fmt("e_h2f(e_f2h(float(%s)))", x);  // through f32, as the reference does
    case EMBER_BF16: return fmt("e_b2f(e_f2b(float(%s)))", x);
    case EMBER_BOOL: return fmt("int32_t(!(%s == %s(0)))", x, S);
    case EMBER_F64: return fmt("double(%s)", x);
    case EMBER_F32: return fmt("float(double(%s))", x);
    case EMBER_I64: return sf ? fmt("e_to_i64(%s)", x) : fmt("int64_t(%s)", x);
    case EMBER_U64: return sf ? fmt("e_to_u64(%s)", x) : fmt("uint64_t(%s)", x);
    case EMBER_U32:  // held in i64; floats convert through i64
      return sf ? fmt("int64_t(uint32_t(uint64_t(e_to_i64(%s))))", x) : fmt("int64_t(uint32_t(uint64_t(%s)))", x);
    case EMBER_U8: case EMBER_I8: case EMBER_U16: case EMBER_I16: {  // held in i32; floats through i32
      const char* W = to == EMBER_U8 ? "uint8_t" : to == EMBER_I8 ? "int8_t" : to == EMBER_U16 ? "uint16_t" : "int16_t";
      return sf ? fmt("int32_t(%s(uint32_t(e_to_i32(%s))))", W, x) : fmt("int32_t(%s(uint64_t(%s)))", W, x);
    }
    default:  // i32
      return sf ? fmt("e_to_i32(%s)", x) : fmt("int32_t(uint32_t(uint64_t(%s)))", x);
  }
}

std::string ExprTable::select(const std::string& c, const std::string& a, const std::string& b) const {
  return fmt("(%s ? %s : %s)", c.c_str(), a.c_str(), b.c_str());
}

std::string ExprTable::rand_uniform(uint8_t dt, const std::string& counter, uint32_t stream,
                                    const std::string& key) const {
  if (dt == EMBER_F32) return fmt("e_uniform_f32(%s, %uu, %s)", counter.c_str(), stream, key.c_str());
  if (dt == EMBER_F64) return fmt("e_uniform_f64(%s, %uu, %s)", counter.c_str(), stream, key.c_str());
  return "";
}

std::string ExprTable::load(uint8_t dt, const std::string& ref) const {
  switch (dt) {
    case EMBER_U8: case EMBER_I8: case EMBER_I16: case EMBER_U16: return "int32_t(" + ref + ")";
    case EMBER_U32: return "int64_t(" + ref + ")";
    case EMBER_BOOL: return "int32_t(" + ref + " != 0)";
    case EMBER_F16: return "e_h2f(" + ref + ")";
    case EMBER_BF16: return "e_b2f(" + ref + ")";
    default: return storage_type(dt) ? ref : "";
  }
}

std::string ExprTable::store_value(uint8_t dt, uint8_t value_dt, const std::string& v) const {
  std::string x = v;
  if (value_dt != dt) {  // a store converts as CAST does
    x = cast(value_dt, dt, v);
    if (x.empty()) return "";
  }
  switch (dt) {
    case EMBER_U8: return "uint8_t(uint32_t(" + x + "))";
    case EMBER_I8: return "int8_t(" + x + ")";
    case EMBER_U16: return "uint16_t(uint32_t(" + x + "))";
    case EMBER_I16: return "int16_t(" + x + ")";
    case EMBER_U32: return "uint32_t(uint64_t(" + x + "))";
    case EMBER_BOOL: return "uint8_t(" + x + " != 0)";
    case EMBER_F16: return "e_f2h(" + x + ")";  // x holds a value rounded to f16 (CAST above)
    case EMBER_BF16: return "e_f2b(" + x + ")";
    default: return storage_type(dt) ? x : "";
  }
}

const char* wrap_type(uint8_t dt) {
  return dt == EMBER_I64 || dt == EMBER_U32 || dt == EMBER_U64 ? "uint64_t" : "uint32_t";
}

const ExprTable& cpp_table() {
  static const ExprTable table;
  return table;
}

std::string render_inst(const ember_kir_program& p, const ExprTable& t, const ArgRefs& refs, int32_t k,
                        const std::function<std::string(int32_t)>& name) {
  const ember_kir_inst& in = p.insts[k];
  const auto& v = name;
  auto dt = [&](int32_t i) { return p.insts[i].dtype; };
  std::string e;
  switch (in.op) {
    case EMBER_KIR_CONST: e = t.constant(in); break;
    case EMBER_KIR_LOAD:
      if (p.arg_dtypes[in.arg] != in.dtype) return "";
      e = t.load(p.arg_dtypes[in.arg], refs.ref(in.arg));
      break;
    case EMBER_KIR_IOTA: e = "int64_t(" + refs.index(in.arg) + ")"; break;
    case EMBER_KIR_LOAD_UNIFORM: {  // self-contained: needs only the launch `L` in scope
      const char* S = t.storage_type(p.arg_dtypes[in.arg]);
      if (p.arg_dtypes[in.arg] != in.dtype || !S) return "";
      const std::string A = std::to_string(in.arg);
      e = t.load(p.arg_dtypes[in.arg], std::string("((const ") + S + "*)L->data[" + A + "])[L->offset[" + A + "]]");
      break;
    }
    case EMBER_KIR_LOAD_SCALAR:  // the launch's value: needs only `L` in scope, as LOAD_UNIFORM
      if (p.arg_dtypes[in.arg] != EMBER_I64 || in.dtype != EMBER_I64) return "";
      e = "int64_t(L->offset[" + std::to_string(in.arg) + "])";
      break;
    case EMBER_KIR_STORE: {
      std::string x = t.store_value(p.arg_dtypes[in.arg], dt(in.a), v(in.a));
      if (x.empty()) return "";
      return refs.ref(in.arg) + " = " + x + ";";
    }
    case EMBER_KIR_CAST: e = t.cast(dt(in.a), in.dtype, v(in.a)); break;
    case EMBER_KIR_SELECT: e = t.select(v(in.a), v(in.b), v(in.c)); break;
    case EMBER_KIR_RAND_UNIFORM: {
      char lit[40];
      std::snprintf(lit, sizeof lit, "UINT64_C(0x%" PRIx64 ")", uint64_t(in.iimm));
      e = t.rand_uniform(in.dtype, v(in.a), uint32_t(in.aux), in.b >= 0 ? "uint64_t(" + v(in.b) + ")" : std::string(lit));
      break;
    }
    case EMBER_KIR_LT: case EMBER_KIR_LE: case EMBER_KIR_GT: case EMBER_KIR_GE: case EMBER_KIR_EQ:
    case EMBER_KIR_NE:
      e = t.compare(in.op, dt(in.a), v(in.a), v(in.b));
      break;
    default:
      if (in.op >= EMBER_KIR_ADD && in.op <= EMBER_KIR_OR) e = t.binary(in.op, in.dtype, v(in.a), v(in.b));
      else if (in.op >= EMBER_KIR_NEG && in.op <= EMBER_KIR_NOT) e = t.unary(in.op, in.dtype, v(in.a));
      break;
  }
  if (e.empty() || !t.reg_type(in.dtype)) return "";
  return e;
}

namespace {

std::string var(int32_t i) { return "v" + std::to_string(i); }

// Renders instruction k as `const T vk = expr;` (or the store statement); "" if unsupported.
std::string render(const ember_kir_program& p, const ExprTable& t, const ArgRefs& refs, int32_t k) {
  std::string e = render_inst(p, t, refs, k, var);
  if (e.empty() || p.insts[k].op == EMBER_KIR_STORE) return e;
  return std::string("const ") + t.reg_type(p.insts[k].dtype) + " " + var(k) + " = " + e + ";";
}

}  // namespace

std::string unsupported_reason(const ember_kir_program& p, const ExprTable& t) {
  if (p.has_reduction) return "has a reduction";
  for (int32_t a = 0; a < p.n_args; ++a)
    if (!t.storage_type(p.arg_dtypes[a])) return "argument " + std::to_string(a) + " has no storage type";
  ArgRefs dummy{[](int a) { return "p" + std::to_string(a) + "[0]"; }, [](int) { return std::string("0"); }};
  for (int32_t k = 0; k < p.n_insts; ++k) {
    const ember_kir_inst& in = p.insts[k];
    if (in.phase != 0) return "multi-phase program";
    if (in.op >= EMBER_KIR_ACC_SUM && in.op <= EMBER_KIR_ACC_ARGMIN) return "has a reduction";
    if (in.op == EMBER_KIR_LOAD_GATHER) return "has a gather";
    if (in.op >= EMBER_KIR_NUM_OPS) return "unknown op";
    if (render(p, t, dummy, k).empty()) return "instruction " + std::to_string(k) + " (op " + std::to_string(in.op) +
                                                ") has no expression";
  }
  return "";
}

bool emit_body(const ember_kir_program& p, const ExprTable& t, const ArgRefs& refs, const std::string& indent,
               std::string& out, std::string* why) {
  std::string reason = unsupported_reason(p, t);
  if (!reason.empty()) {
    if (why) *why = reason;
    return false;
  }
  for (int32_t k = 0; k < p.n_insts; ++k) out += indent + render(p, t, refs, k) + "\n";
  return true;
}

ArgUse arg_use(const ember_kir_program& p) {
  ArgUse u;
  for (auto* v : {&u.stored, &u.stored_even, &u.read, &u.loaded_even}) v->assign(size_t(p.n_args), 0);
  for (int32_t k = 0; k < p.n_insts; ++k) {
    const ember_kir_inst& in = p.insts[k];
    const size_t a = size_t(in.arg);
    if (in.op == EMBER_KIR_STORE) {
      u.stored[a] = 1;
      if (in.phase % 2 == 0) u.stored_even[a] = 1;
    } else if (in.op == EMBER_KIR_LOAD || in.op == EMBER_KIR_LOAD_GATHER) {
      u.read[a] = 1;
      if (in.op == EMBER_KIR_LOAD && in.phase % 2 == 0) u.loaded_even[a] = 1;
    }
  }
  return u;
}

bool ArgUse::stored_and_read() const {
  for (size_t a = 0; a < stored.size(); ++a)
    if (stored[a] && read[a]) return true;
  return false;
}

bool emit_cpu_kernel(const ember_kir_program& p, std::string& src, std::string* why) {
  const ExprTable& t = cpp_table();
  const ArgUse use = arg_use(p);
  const std::vector<uint8_t>& stored = use.stored;
  std::vector<uint8_t> used(size_t(p.n_args), 0), iota(size_t(p.n_args), 0);
  for (int32_t k = 0; k < p.n_insts; ++k) {
    const ember_kir_inst& in = p.insts[k];
    if (in.op == EMBER_KIR_LOAD || in.op == EMBER_KIR_STORE) used[size_t(in.arg)] = 1;
    if (in.op == EMBER_KIR_IOTA) iota[size_t(in.arg)] = 1;
  }
  // Rows with per-row values (contiguous == 2): a loaded argument of stride 0 along the row (a
  // per-channel scale over NCHW pixels) is read from a splat of its value, so that the loop stays
  // vectorized: the strided loop below took 3x the contiguous one's time for x * scale + shift.
  auto read_only = [&](int a) { return !stored[size_t(a)]; };
  ArgRefs row{[&](int a) { return read_only(a) ? "q" + std::to_string(a) + "[j - c0]" : "p" + std::to_string(a) + "[j]"; },
              [](int a) { return "b" + std::to_string(a) + " + j * s" + std::to_string(a); }};
  ArgRefs row2{[&](int a) {
                 return read_only(a) ? "q" + std::to_string(a) + "[j + h - c0]" : "p" + std::to_string(a) + "[j + h]";
               },
               [](int a) { return "b" + std::to_string(a) + " + (j + h) * s" + std::to_string(a); }};
  std::string contig, contig2, strided, rowwise, rowwise2;
  ArgRefs c{[](int a) { return "p" + std::to_string(a) + "[j]"; },
            [](int a) { return "b" + std::to_string(a) + " + j * s" + std::to_string(a); }};
  ArgRefs c2{[](int a) { return "p" + std::to_string(a) + "[j + h]"; },
             [](int a) { return "b" + std::to_string(a) + " + (j + h) * s" + std::to_string(a); }};
  ArgRefs s{[](int a) { return "p" + std::to_string(a) + "[j * s" + std::to_string(a) + "]"; },
            [](int a) { return "b" + std::to_string(a) + " + j * s" + std::to_string(a); }};
  if (!emit_body(p, t, c, "          ", contig, why)) return false;
  if (!emit_body(p, t, c2, "          ", contig2, why)) return false;
  if (!emit_body(p, t, s, "        ", strided, why)) return false;
  if (!emit_body(p, t, row, "          ", rowwise, why)) return false;
  if (!emit_body(p, t, row2, "          ", rowwise2, why)) return false;
  // contiguous == 3 (streaming stores): as 1, with stores into chunk buffers w<a> that e_stream
  // writes out; only where no stored argument is also loaded (a load after the store of the same
  // point would read memory the buffer has not reached yet). Otherwise 3 runs as 1.
  // Nor where the body is bound by its math (exp, erf, tanh...): there the chunked loop costs
  // more than the stores save (tanh over 16M floats: 10.2 -> 15.1 ms at 1 thread).
  bool streamable = !use.stored_and_read();
  for (int32_t k = 0; k < p.n_insts; ++k)
    if (math_name(p.insts[k].op) || p.insts[k].op == EMBER_KIR_POW) streamable = false;
  const std::string kStreamChunk = "512";
  std::string streamed, streamed2, stream_bufs, stream_out;
  if (streamable) {
    ArgRefs w{[&](int a) { return stored[size_t(a)] ? "w" + std::to_string(a) + "[j - c0]" : "p" + std::to_string(a) + "[j]"; },
              c.index};
    ArgRefs w2{[&](int a) {
                 return stored[size_t(a)] ? "w" + std::to_string(a) + "[j + h - c0]" : "p" + std::to_string(a) + "[j + h]";
               },
               c2.index};
    if (!emit_body(p, t, w, "          ", streamed, why)) return false;
    if (!emit_body(p, t, w2, "          ", streamed2, why)) return false;
    for (int32_t a = 0; a < p.n_args; ++a) {
      if (!stored[size_t(a)]) continue;
      const std::string A = std::to_string(a), T = t.storage_type(p.arg_dtypes[a]);
      stream_bufs += "      alignas(64) " + T + " w" + A + "[" + kStreamChunk + "];\n";
      stream_out += "        e_stream(p" + A + " + c0, w" + A + ", (c1 - c0) * int64_t(sizeof(" + T + ")));\n";
    }
  }
  // contiguous == 2: the row in chunks of kChunk points; each read-only argument is read from
  // its row (stride 1) or from a splat of its one value (stride 0), filled once per row.
  const std::string kChunk = "128";
  std::string splats, chunk_rows;
  for (int32_t a = 0; a < p.n_args; ++a) {
    if (!used[size_t(a)] || stored[size_t(a)]) continue;
    const std::string A = std::to_string(a), T = t.storage_type(p.arg_dtypes[a]);
    splats += "      " + T + " splat" + A + "[" + kChunk + "];\n";
    splats += "      if (s" + A + " == 0)\n        for (int64_t j = 0; j < " + kChunk + "; ++j) splat" + A + "[j] = p" + A +
              "[0];\n";
    chunk_rows += "        const " + T + "* const q" + A + " = s" + A + " == 0 ? splat" + A + " : p" + A + " + c0;\n";
  }
  src = "// Tier-1 CPU kernel for KIR program '" + std::string(p.name ? p.name : "kernel") +
        "', generated by ember (src/backend/common/emit_c.cpp).\n";
  src += t.prelude();
  src += R"(typedef struct ember_c_launch {
  int32_t rank, contiguous;
  int64_t block, nblk;
  const int64_t* shape;
  void* const* data;
  const int64_t* offset;
  const int64_t* strides;
} ember_c_launch;
extern "C" __attribute__((visibility("default"))) void ember_kernel(const ember_c_launch* L, int64_t t0, int64_t t1) {
  const int r = L->rank;
  const int64_t inner = L->shape[r - 1];
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t row = t / L->nblk, j0 = (t % L->nblk) * L->block;
    const int64_t j1 = j0 + L->block < inner ? j0 + L->block : inner;
)";
  for (int32_t a = 0; a < p.n_args; ++a) {
    if (!used[size_t(a)] && !iota[size_t(a)]) continue;
    const std::string A = std::to_string(a);
    src += "    int64_t b" + A + " = L->offset[" + A + "];\n";
    src += "    const int64_t s" + A + " = L->strides[" + A + " * r + r - 1];\n";
  }
  src += "    for (int64_t rem = row, d = r - 2; d >= 0; --d) {\n"
         "      const int64_t i = rem % L->shape[d];\n      rem /= L->shape[d];\n";
  for (int32_t a = 0; a < p.n_args; ++a)
    if (used[size_t(a)] || iota[size_t(a)])
      src += "      b" + std::to_string(a) + " += i * L->strides[" + std::to_string(a) + " * r + d];\n";
  src += "    }\n";
  for (int32_t a = 0; a < p.n_args; ++a) {
    if (!used[size_t(a)]) continue;
    const std::string A = std::to_string(a);
    src += std::string("    ") + t.storage_type(p.arg_dtypes[a]) + "* const p" + A + " = (" +
           t.storage_type(p.arg_dtypes[a]) + "*)L->data[" + A + "] + b" + A + ";\n";
  }
  // Contiguous rows: every point is independent (stores of one point never feed another's
  // loads except at the same element), so the loop is vectorized unconditionally. Each iteration
  // computes two points half a block apart: math-heavy bodies (erf, exp: Horner chains in series)
  // are bound by latency, not throughput, and the second independent chain fills the pipes
  // (GELU over 16M floats: 20.6 -> 13.8 ms at 1 thread; unrolling does not do this). Strided
  // views may write one element from several points (stride 0): run those in order.
  auto halves = [](const std::string& lo, const std::string& hi, const std::string& a, const std::string& b) {
    return "      const int64_t h = (" + hi + " - " + lo + ") / 2;\n#pragma omp simd\n"
           "        for (int64_t j = " + lo + "; j < " + lo + " + h; ++j) {\n          {\n" + a + "          }\n          {\n" +
           b + "          }\n        }\n"
           "      if ((" + hi + " - " + lo + ") % 2 != 0) {\n        const int64_t j = " + hi + " - 1;\n" + a + "      }\n";
  };
  if (streamable)
    src += "    if (L->contiguous == 3) {\n" + stream_bufs + "      for (int64_t c0 = j0; c0 < j1; c0 += " + kStreamChunk +
           ") {\n        const int64_t c1 = c0 + " + kStreamChunk + " < j1 ? c0 + " + kStreamChunk + " : j1;\n" +
           halves("c0", "c1", streamed, streamed2) + stream_out + "      }\n    } else ";
  else
    src += "    ";
  src += "if (L->contiguous == 1 || L->contiguous == 3) {\n" + halves("j0", "j1", contig, contig2) + "    } else if (L->contiguous == 2) {\n" +
         splats + "      for (int64_t c0 = j0; c0 < j1; c0 += " + kChunk + ") {\n        const int64_t c1 = c0 + " +
         kChunk + " < j1 ? c0 + " + kChunk + " : j1;\n" + chunk_rows + halves("c0", "c1", rowwise, rowwise2) + "      }\n" +
         "    } else {\n      for (int64_t j = j0; j < j1; ++j) {\n" + strided + "      }\n    }\n";
  src += std::string("  }\n") + (streamable ? "  if (L->contiguous == 3) e_stream_fence();\n" : "") + "}\n";
  return true;
}

}  // namespace ember::emit
