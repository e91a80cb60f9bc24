// The text every Vulkan compute shader starts with (emit_glsl.h glsl_header): the version and
// extensions the target needs, the workgroup size, the launch-word and error-word bindings, and
// the helper functions the KIR and library shaders call (e_maxf, e_f2h, e_fail, integer division
// with its errors, f64 math...). Each helper follows the interpreter (src/backend/reference/
// reference.cpp) where GLSL leaves a case undefined.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"  // GCC bug 105329 in std::string concatenation
#endif
#include <cctype>
#include <string>

#include "backend/common/emit_glsl.h"
#include "backend/common/glsl_f64_math.h"

namespace ember::emit {

namespace {

std::string S(int64_t v) { return std::to_string(v); }

// Helpers every shader gets. e_fail records the first kernel-side error in the error word.
// EW is the type of the values an error reports (int64_t, or int without shaderInt64) and EW_HI
// the shift that gives their high word (sign-filled for int).
const char* kPreludeCommon = R"(
layout(std430, binding = 1) buffer EmberErrorWord { uint E[]; };
#define F(bits) uintBitsToFloat(bits)
uint e_opaque = 0u;  // set from launch word kZero at the start of main()
float e_nanf() { return F(0x7fc00000u); }
float e_inff() { return F(0x7f800000u); }
void e_fail(uint code, EW value, EW extra) {
  if (atomicCompSwap(E[0], 0u, code) == 0u) {
    E[1] = uint(P[3]);
    E[2] = uint(value); E[3] = uint(value >> EW_HI);
    E[4] = uint(extra); E[5] = uint(extra >> EW_HI);
  }
}
float e_maxf(float x, float y) { return (isnan(x) || isnan(y)) ? e_nanf() : (x > y ? x : y); }
float e_minf(float x, float y) { return (isnan(x) || isnan(y)) ? e_nanf() : (x < y ? x : y); }
float e_logf(float x) {
  return (isnan(x) || x < 0.0) ? e_nanf() : x == 0.0 ? -e_inff() : isinf(x) ? x : log(x);
}
float e_expf(float x) { return isnan(x) ? x : x > 88.8 ? e_inff() : x < -104.0 ? 0.0 : exp(x); }
float e_sinf(float x) { return (isinf(x) || isnan(x)) ? e_nanf() : sin(x); }
float e_cosf(float x) { return (isinf(x) || isnan(x)) ? e_nanf() : cos(x); }
float e_sqrtf(float x) { return (isnan(x) || x < 0.0) ? e_nanf() : sqrt(x); }
// tanh: an odd Taylor polynomial near 0 (relative error < 3e-9 below 0.3, where 1 - 2/(e^2x + 1)
// cancels), saturated past 9 (tanh rounds to 1 there); -0 and NaN pass through.
float e_tanhf(float x) {
  precise float a = abs(x);
  precise float r;
  if (a < 0.3) {
    precise float t = x * x;
    return x + x * t * (-0.333333333 + t * (0.133333333 + t * (-0.053968254 + t * (0.021869489 + t * -0.008863236))));
  }
  if (a > 9.0) r = 1.0; else r = 1.0 - 2.0 / (exp(2.0 * a) + 1.0);
  return isnan(x) ? x : (x < 0.0 ? -r : r);
}
// erf as the CPU's tier-1 kernels compute it (emit_c.cpp, e_erff): at most 1 ulp in f32.
float e_erff(float x) {
  precise float ax = abs(x);
  precise float t = x * x;
  precise float p = F(0x38a3b8ffu);
  p = fma(p, t, F(0xba51a8afu)); p = fma(p, t, F(0x3ba9f912u)); p = fma(p, t, F(0xbcdbfb8du));
  p = fma(p, t, F(0x3de71673u)); p = fma(p, t, F(0xbec0939fu)); p = fma(p, t, F(0x3e0375d4u));
  precise float lo = fma(x, p, x);
  precise float z = ax > 4.0 ? 4.0 : ax;
  precise float s = F(0x39429641u);
  s = fma(s, z, F(0xbb40a653u)); s = fma(s, z, F(0x3cb2a10eu)); s = fma(s, z, F(0xbdd30542u));
  s = fma(s, z, F(0x3eb93a7cu)); s = fma(s, z, F(0xbf9042d9u)); s = fma(s, z, F(0xb9b97428u));
  precise float zz = z * z;
  precise float zl = fma(z, z, -zz);
  precise float k = fma(s - zz, F(0x3fb8aa3bu), F(0x4b400000u));
  precise float n = k - F(0x4b400000u);
  precise float r = s - fma(n, F(0x3f317200u), zz);
  r = fma(n, F(0xb5bfbe8eu), r - zl);
  precise float q = F(0x3a9bb385u);
  q = fma(q, r, F(0x3c091426u)); q = fma(q, r, F(0x3d2ace47u)); q = fma(q, r, F(0x3e2aaa58u));
  q = fma(q, r, F(0x3effffd6u)); q = fma(q, r, 1.0); q = fma(q, r, 1.0);
  precise float e = q * uintBitsToFloat((floatBitsToUint(k) + 127u) << 23);
  precise float hi = 1.0 - e;
  if (isnan(x)) return x;
  return ax < 1.0 ? lo : (x < 0.0 ? -hi : hi);
}
// pow with C's special cases (GLSL leaves x < 0 undefined); exp2(y log2 |x|) otherwise.
float e_powf(float x, float y) {
  if (y == 0.0 || x == 1.0) return 1.0;
  if (isnan(x) || isnan(y)) return e_nanf();
  float ax = abs(x), ay = abs(y);
  bool yint = floor(y) == y;
  bool yodd = yint && ay < 16777216.0 && mod(ay, 2.0) == 1.0;
  if (isinf(y)) return ax == 1.0 ? 1.0 : ((ax > 1.0) == (y > 0.0) ? e_inff() : 0.0);
  if (x == 0.0) return y < 0.0 ? (yodd ? ((floatBitsToUint(x) >> 31) != 0u ? -e_inff() : e_inff()) : e_inff()) : (yodd ? x : 0.0);
  if (isinf(x)) {
    if (x > 0.0) return y > 0.0 ? e_inff() : 0.0;
    return y > 0.0 ? (yodd ? -e_inff() : e_inff()) : (yodd ? -0.0 : 0.0);
  }
  if (x < 0.0 && !yint) return e_nanf();
  float r = exp2(y * log2(ax));
  return (x < 0.0 && yodd) ? -r : r;
}
int e_f2i(float x) { return (x >= -2147483648.0 && x < 2147483648.0) ? int(x) : int(0x80000000u); }
// f16/bf16 bits <-> f32, bit for bit as the core's conversions (src/core/dtype.cpp).
float e_h2f(uint h) {
  uint sign = (h & 0x8000u) << 16, em = h & 0x7fffu;
  if (em >= 0x7c00u) return uintBitsToFloat(sign | (em << 13) | 0x7f800000u);
  if (em >= 0x0400u) return uintBitsToFloat(sign | ((em << 13) + 0x38000000u));
  return uintBitsToFloat(sign | floatBitsToUint(float(int(em)) * F(0x33800000u)));
}
uint e_f2h(float f) {
  uint x = floatBitsToUint(f);
  uint sign = (x >> 16) & 0x8000u, absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) return sign | (absx > 0x7f800000u ? 0x7e00u : 0x7c00u);
  if (absx >= 0x477ff000u) return sign | 0x7c00u;
  if (absx < 0x38800000u) return sign | uint(roundEven(uintBitsToFloat(absx) * 16777216.0));
  uint mant = absx & 0x7fffffu;
  uint h = (((absx >> 23) - 112u) << 10) | (mant >> 13), rest = mant & 0x1fffu;
  uint up = rest > 0x1000u ? 1u : (rest == 0x1000u ? (h & 1u) : 0u);
  return sign | (h + up);
}
float e_b2f(uint b) { return uintBitsToFloat(b << 16); }
uint e_f2b(float f) {
  uint x = floatBitsToUint(f);
  return ((x & 0x7fffffffu) > 0x7f800000u ? (x >> 16) | 0x40u : (x + 0x7fffu + ((x >> 16) & 1u)) >> 16) & 0xffffu;
}
)";

// What needs shaderInt64: int -> i64 casts, gathers (i64 indices), random numbers (i64 counters).
const char* kPreludeInt64 = R"(
// int -> int64_t without the sign-extension instruction: lavapipe (Mesa 22.3) miscompiles a
// comparison of a sign-extended value (int64_t(i) < 3 was false for i = 0, 1, 2).
int64_t e_i2l(int x) { return (int64_t(uint64_t(uint(x))) ^ int64_t(0x80000000UL)) - int64_t(0x80000000UL); }
int64_t e_i2l(int64_t x) { return x; }
int64_t e_gather(int64_t base, int64_t index, int64_t stride, int64_t size) {
  if (index < 0 || index >= size) { e_fail(1u, index, size); return base; }
  return base + index * stride;
}
int64_t e_f2l(float x) {
  return (x >= -9223372036854775808.0 && x < 9223372036854775808.0) ? int64_t(x) : int64_t(0x8000000000000000UL);
}
uvec4 e_philox(uint64_t counter, uint64_t key) {
  uint c0 = uint(counter), c1 = uint(counter >> 32), c2 = 0u, c3 = 0u;
  uint k0 = uint(key), k1 = uint(key >> 32);
  for (int round = 0; round < 10; ++round) {
    uint hi0, lo0, hi1, lo1;
    umulExtended(0xD2511F53u, c0, hi0, lo0);
    umulExtended(0xCD9E8D57u, c2, hi1, lo1);
    uint n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c1 = lo1; c3 = lo0; c0 = n0; c2 = n2;
    k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
  }
  return uvec4(c0, c1, c2, c3);
}
float e_uniform_f32(int64_t c, uint s, uint64_t k) { return float(e_philox(uint64_t(c), k)[s & 3u] >> 8) * F(0x33800000u); }
)";

// Integer division, remainder and power of one register type (int or int64_t); they report
// division by zero and negative exponents as the interpreter does.
std::string int_helpers(const char* T, const char* sfx) {
  std::string s = R"(
T e_div_SFX(T a, T b) { if (b == T(0)) { e_fail(2u, EW(a), EW(0)); return T(0); } return b == T(-1) ? -a : a / b; }
T e_floordiv_SFX(T a, T b) {
  if (b == T(0)) { e_fail(2u, EW(a), EW(0)); return T(0); }
  if (b == T(-1)) return -a;
  T q = a / b;
  if (a - q * b != T(0) && ((a < T(0)) != (b < T(0)))) q -= T(1);
  return q;
}
T e_rem_SFX(T a, T b) {
  if (b == T(0)) { e_fail(3u, EW(a), EW(0)); return T(0); }
  if (b == T(-1)) return T(0);
  T m = a - (a / b) * b;
  if (m != T(0) && ((m < T(0)) != (b < T(0)))) m += b;
  return m;
}
T e_fmod_SFX(T a, T b) {
  if (b == T(0)) { e_fail(3u, EW(a), EW(0)); return T(0); }
  return b == T(-1) ? T(0) : a - (a / b) * b;
}
T e_pow_SFX(T a, T b) {
  if (b < T(0)) { e_fail(4u, EW(b), EW(0)); return T(0); }
  T r = T(1), x = a;
  for (T e = b; e > T(0); e >>= 1) { if ((e & T(1)) != T(0)) r *= x; x *= x; }
  return r;
}
)";
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.compare(i, 3, "SFX") == 0) { out += sfx; i += 2; }
    else if (s[i] == 'T' && (i + 1 == s.size() || !std::isalnum((unsigned char)s[i + 1])) &&
             (i == 0 || !std::isalnum((unsigned char)s[i - 1])))
      out += T;
    else out += s[i];
  }
  return out;
}

// u64 (uint64_t registers, with shaderInt64): unsigned division, remainder and power as the
// interpreter's (division by zero reported with the dividend's bits), and float -> u64 as the
// CPU's e_to_u64 (negative values through i64, out of range 2^63).
const char* kPreludeU64 = R"(
uint64_t e_div_ul(uint64_t a, uint64_t b) { if (b == 0UL) { e_fail(2u, EW(int64_t(a)), EW(0)); return 0UL; } return a / b; }
uint64_t e_rem_ul(uint64_t a, uint64_t b) { if (b == 0UL) { e_fail(3u, EW(int64_t(a)), EW(0)); return 0UL; } return a % b; }
uint64_t e_pow_ul(uint64_t a, uint64_t b) {
  uint64_t r = 1UL, x = a;
  for (uint64_t e = b; e > 0UL; e >>= 1) { if ((e & 1UL) != 0UL) r *= x; x *= x; }
  return r;
}
uint64_t e_f2ul(float x) {
  if (x >= 0.0 && x < 18446744073709551616.0) return uint64_t(x);
  if (x > -9223372036854775808.0 && x < 0.0) return uint64_t(int64_t(x));
  return 0x8000000000000000UL;
}
)";
const char* kPreludeU64F64 = R"(
uint64_t e_d2ul(double x) {
  if (x >= 0.0LF && x < 18446744073709551616.0LF) return uint64_t(x);
  if (x > -9223372036854775808.0LF && x < 0.0LF) return uint64_t(int64_t(x));
  return 0x8000000000000000UL;
}
)";

const char* kPreludeF64 = R"(
double e_nand() { return packDouble2x32(uvec2(0u, 0x7ff80000u)); }
double e_infd() { return packDouble2x32(uvec2(0u, 0x7ff00000u)); }
double e_maxd(double x, double y) { return (isnan(x) || isnan(y)) ? e_nand() : (x > y ? x : y); }
double e_mind(double x, double y) { return (isnan(x) || isnan(y)) ? e_nand() : (x < y ? x : y); }
double e_sqrtd(double x) { return (isnan(x) || x < 0.0LF) ? e_nand() : sqrt(x); }
int e_d2i(double x) { return (x >= -2147483648.0LF && x < 2147483648.0LF) ? int(x) : int(0x80000000u); }
int64_t e_d2l(double x) {
  return (x >= -9223372036854775808.0LF && x < 9223372036854775808.0LF) ? int64_t(x) : int64_t(0x8000000000000000UL);
}
// fmod through a truncated quotient (exact while |x / y| < 2^29 for f32 operands), then the sign
// of the divisor as the interpreter's remainder.
double e_remd(double x, double y) {
  double m;
  if (isnan(x) || isnan(y) || isinf(x) || y == 0.0LF) m = e_nand();
  else if (isinf(y) || x == 0.0LF) m = x;
  else { precise double q = trunc(x / y); precise double t = x - q * y; m = t; if (abs(m) >= abs(y)) m = 0.0LF; }
  if (m != 0.0LF && ((m < 0.0LF) != (y < 0.0LF))) m += y;
  // A zero remainder has the sign of x (C's fmod), whatever the subtraction gave.
  if (m == 0.0LF) m = packDouble2x32(uvec2(0u, unpackDouble2x32(x).y & 0x80000000u));
  return m;
}
float e_remf(float x, float y) { return float(e_remd(double(x), double(y))); }
// C's fmod (the sign of x), exact while the truncated quotient q is (|x / y| < 2^53): q y is
// formed exactly as hi + lo (Dekker's product; drivers may not fuse fma for doubles), x - hi is
// exact (Sterbenz) and so is the one rounding of (x - hi) - lo, the representable remainder. The
// steps after it correct a quotient that x / y rounded across an integer.
double e_fmodd(double x, double y) {
  if (isnan(x) || isnan(y) || isinf(x) || y == 0.0LF) return e_nand();
  if (isinf(y) || x == 0.0LF) return x;
  precise double q = trunc(x / y), hi = q * y;
  precise double cq = 134217729.0LF * q, qh = cq - (cq - q), ql = q - qh;
  precise double cy = 134217729.0LF * y, yh = cy - (cy - y), yl = y - yh;
  precise double lo = ((qh * yh - hi) + qh * yl + ql * yh) + ql * yl;
  precise double m = q == 0.0LF ? x : (x - hi) - lo;
  if (abs(m) >= abs(y)) m = 0.0LF;
  if (m != 0.0LF && ((m < 0.0LF) != (x < 0.0LF))) m += x < 0.0LF ? -abs(y) : abs(y);
  if (m == 0.0LF) m = packDouble2x32(uvec2(0u, unpackDouble2x32(x).y & 0x80000000u));
  return m;
}
float e_fmodf(float x, float y) { return float(e_fmodd(double(x), double(y))); }
double e_uniform_f64(int64_t c, uint s, uint64_t k) {
  uvec4 w = e_philox(uint64_t(c), k);
  return double(((uint64_t(w[(2u * s) & 3u]) << 32) | uint64_t(w[(2u * s + 1u) & 3u])) >> 11) * packDouble2x32(uvec2(0u, 0x3ca00000u));
}
)";

// Without f64: the remainder in f32 (exact while |x / y| < 2^24).
const char* kPreludeNoF64 = R"(
float e_remf(float x, float y) {
  float m;
  if (isnan(x) || isnan(y) || isinf(x) || y == 0.0) m = e_nanf();
  else if (isinf(y) || x == 0.0) m = x;
  else { precise float q = trunc(x / y); precise float t = x - q * y; m = t; if (abs(m) >= abs(y)) m = 0.0; }
  if (m != 0.0 && ((m < 0.0) != (y < 0.0))) m += y;
  if (m == 0.0) m = uintBitsToFloat(floatBitsToUint(x) & 0x80000000u);
  return m;
}
float e_fmodf(float x, float y) {
  if (isnan(x) || isnan(y) || isinf(x) || y == 0.0) return e_nanf();
  if (isinf(y) || x == 0.0) return x;
  precise float q = trunc(x / y); precise float m = fma(-q, y, x);
  if (abs(m) >= abs(y)) m = 0.0;
  if (m != 0.0 && ((m < 0.0) != (x < 0.0))) m += x < 0.0 ? -abs(y) : abs(y);
  if (m == 0.0) m = uintBitsToFloat(floatBitsToUint(x) & 0x80000000u);
  return m;
}
)";

}  // namespace

std::string glsl_header(const std::string& what, const GlslTarget& target, bool need8, bool need16) {
  std::string src = "#version 450\n// Vulkan compute shader for " + what + ", generated by ember (src/backend/common/emit_glsl*.cpp).\n";
  if (target.int64) src += "#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require\n";
  if (target.preserve_inf_nan32 || target.preserve_inf_nan64) {
    // ExecutionMode SignedZeroInfNanPreserve (4461) with capability 4466, per float width.
    src += "#extension GL_EXT_spirv_intrinsics : require\n";
    if (target.preserve_inf_nan32)
      src += "spirv_execution_mode(extensions = [\"SPV_KHR_float_controls\"], capabilities = [4466], 4461, 32);\n";
    if (target.preserve_inf_nan64 && target.float64)
      src += "spirv_execution_mode(extensions = [\"SPV_KHR_float_controls\"], capabilities = [4466], 4461, 64);\n";
  }
  if (need8) src += "#extension GL_EXT_shader_8bit_storage : require\n#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require\n";
  if (need16) src += "#extension GL_EXT_shader_16bit_storage : require\n#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require\n";
  src += "layout(local_size_x = " + S(target.workgroup) + ") in;\n";
  // Index arithmetic in 32 bits where every offset of the launch fits (the plugin checks; 64-bit
  // division is many times slower on most devices), else in 64 bits.
  src += target.index32 || !target.int64 ? "#define IX int\n" : "#define IX int64_t\n";
  // The launch words are int64; without shaderInt64 each is read as an ivec2, whose int() is
  // its low half (the plugin checks that every word fits in 31 bits).
  if (target.int64)
    src += "layout(std430, binding = 0) readonly buffer EmberLaunch { int64_t P[]; };\n#define EW int64_t\n#define EW_HI 32\n";
  else
    src += "layout(std430, binding = 0) readonly buffer EmberLaunch { ivec2 P[]; };\n#define EW int\n#define EW_HI 31\n";
  src += kPreludeCommon;
  if (target.int64) src += kPreludeInt64;
  src += target.float64 ? kPreludeF64 : kPreludeNoF64;
  if (target.float64) src += kGlslF64Math;
  src += int_helpers("int", "i");
  if (target.int64) src += int_helpers("int64_t", "l") + kPreludeU64 + (target.float64 ? kPreludeU64F64 : "");
  return src;
}

}  // namespace ember::emit
