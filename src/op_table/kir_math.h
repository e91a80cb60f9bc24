// Math functions written as KIR expressions over the existing primitives (backend/abi.h), for
// the expression column of src/op_table/ops.def. No backend implements them: they are formulas.
//
// Accuracy (measured by tests/ops/elementwise_math_test.cpp against <cmath> in f64):
//   expm1, log1p   Kahan's / Goldberg's tricks: exp(x)-1 and log(1+x) corrected by the ratio of
//                  the rounded argument, within a few ulp of the exact value everywhere, exact 0 → 0.
//   atan2 (atan, asin, acos)  a rough rational start (error < 2e-3) refined by two Newton steps
//                  of tan(a - a*) (cubic convergence: 1e-9, then below the rounding error), then
//                  the octant; a few ulp.
//   sinh, cosh, asinh, acosh, atanh  the standard cancellation-free formulas over expm1/log1p;
//                  a few ulp (cosh/sinh overflow to inf for |x| within ln 2 of the largest finite
//                  result, where exp(|x|) itself overflows).
//   log2, log10    log(x) times a constant: within 2 ulp (log2(8) may differ from 3 by 1 ulp).
//   round          half to even, exact.
#pragma once

#include <cmath>
#include <cstdint>

#include "kir/builder.h"

namespace ember::kir {

// A constant of x's dtype.
inline Val c(Val x, double v) { return x.b->constant(v, x.dtype); }

inline Val expm1_k(Val x) {
  Val u = exp(x);
  Val um1 = u - 1.0;
  Val r = select(eq(u, c(x, 1)), x, um1 * x / log(u));
  r = select(eq(um1, c(x, -1)), um1, r);
  return select(eq(u, c(x, INFINITY)), u, r);
}

inline Val log1p_k(Val x) {
  Val u = x + 1.0;
  Val r = select(eq(u, c(x, 1)), x, log(u) * x / (u - 1.0));
  return select(eq(u, c(x, INFINITY)), u, r);
}

// atan2(y, x) for floating y, x of one dtype (C semantics, including signed zeros and infinities).
inline Val atan2_k(Val y, Val x) {
  const double pi = 3.14159265358979323846, half_pi = 1.57079632679489661923;
  Val ax = abs(x), ay = abs(y);
  Val swap = gt(ay, ax);
  Val num = select(swap, ax, ay), den = select(swap, ay, ax);  // 0 <= num <= den
  Val t = num / den;
  // Start: pi/4 t - t (t - 1)(0.2447 + 0.0663 t), error below 2e-3 on [0, 1].
  Val a = t * 0.78539816339744830962 - t * (t - 1.0) * (t * 0.0663 + 0.2447);
  for (int step = 0; step < 2; ++step) {  // a -= tan(a - atan(num / den))
    Val s = sin(a), co = cos(a);
    a = a - (s * den - num * co) / (co * den + num * s);
  }
  Val inf = c(x, INFINITY);
  a = select(eq(den, inf), select(eq(num, inf), c(x, pi / 4), c(x, 0)), a);
  a = select(eq(den, c(x, 0)), c(x, 0), a);
  Val r = select(swap, half_pi - a, a);
  Val x_negative = logical_or(lt(x, c(x, 0)), lt(1.0 / x, c(x, 0)));  // -0 included
  r = select(x_negative, pi - r, r);
  Val y_negative = logical_or(lt(y, c(y, 0)), lt(1.0 / y, c(y, 0)));
  r = select(y_negative, -r, r);
  return select(logical_or(ne(x, x), ne(y, y)), x + y, r);
}

// sinh |x| = (E + E / (E + 1)) / 2 with E = expm1(|x|) >= 0 (no cancellation), then the sign.
inline Val sinh_k(Val x) {
  Val ax = abs(x);
  Val e = expm1_k(ax);
  Val r = 0.5 * (e + e / (e + 1.0));
  r = select(lt(x, c(x, 0)), -r, r);
  return select(logical_or(eq(ax, c(x, INFINITY)), eq(x, c(x, 0))), x, r);
}

inline Val cosh_k(Val x) {
  Val e = exp(abs(x));
  return 0.5 * (e + 1.0 / e);
}

inline Val asinh_k(Val x) {
  Val ax = abs(x);
  Val small = log1p_k(ax + ax * ax / (1.0 + sqrt(1.0 + ax * ax)));
  Val big = log(ax) + 0.69314718055994530942;
  Val r = select(gt(ax, c(x, 268435456.0)), big, small);
  return select(lt(x, c(x, 0)), -r, r);
}

inline Val acosh_k(Val x) {
  Val t = x - 1.0;
  Val small = log1p_k(t + sqrt(2.0 * t + t * t));
  Val big = log(x) + 0.69314718055994530942;
  return select(gt(x, c(x, 268435456.0)), big, small);
}

inline Val atanh_k(Val x) { return 0.5 * log1p_k(2.0 * x / (1.0 - x)); }

// Round half to even: floor, then the exact remainder decides.
inline Val round_k(Val x) {
  Val f = floor(x);
  Val d = x - f;  // exact
  Val odd = eq(rem(f, c(x, 2)), c(x, 1));
  Val up = logical_or(gt(d, c(x, 0.5)), logical_and(eq(d, c(x, 0.5)), odd));
  Val r = select(up, f + 1.0, f);
  return select(eq(r, c(x, 0)), x * 0.0, r);  // keeps the sign of zero (round(-0.3) = -0)
}

inline Val trunc_k(Val x) { return select(lt(x, c(x, 0)), ceil(x), floor(x)); }

inline Val softplus_k(Val x, double beta, double threshold) {
  Val bx = x * beta;
  return select(gt(bx, c(x, threshold)), x, log1p_k(exp(bx)) / beta);
}

// ---- integer bit operations from wrapping arithmetic ------------------------------------------
inline int bit_width(DType dt) { return int(dtype_size(dt)) * 8; }

// a & b, one bit at a time: rem(v, 2) is the low bit (0 or 1, also for negative v) and
// floor_div(v, 2) the arithmetic shift right; the sign bit's weight wraps to the minimum.
inline Val bit_and_k(Val x, Val y) {
  if (x.dtype == DType::Bool) return logical_and(x, y);
  Val two = c(x, 2);
  Val acc = c(x, 0), a = x, b = y;
  for (int k = 0; k < bit_width(x.dtype); ++k) {
    Val bit = rem(a, two) * rem(b, two);
    acc = acc + bit * x.b->constant_int(int64_t(uint64_t(1) << k), x.dtype);
    if (k + 1 < bit_width(x.dtype)) {
      a = floor_div(a, two);
      b = floor_div(b, two);
    }
  }
  return acc;
}
inline Val bit_or_k(Val x, Val y) {
  if (x.dtype == DType::Bool) return logical_or(x, y);
  return x + y - bit_and_k(x, y);
}
inline Val bit_xor_k(Val x, Val y) {
  if (x.dtype == DType::Bool) return ne(x, y);
  return x + y - 2.0 * bit_and_k(x, y);
}
inline Val bit_not_k(Val x) {
  if (x.dtype == DType::Bool) return logical_not(x);
  return -x - 1.0;  // two's complement (unsigned: the maximum - x after wrapping)
}
// Shift counts outside [0, width) give 0 (left) or the sign fill (right; 0 for u8).
inline Val shift_left_k(Val x, Val n) {
  int w = bit_width(x.dtype);
  Val e = max(min(n, c(n, w - 1)), c(n, 0));
  Val r = x * pow(c(x, 2), e);
  return select(logical_and(ge(n, c(n, 0)), lt(n, c(n, w))), r, c(x, 0));
}
inline Val shift_right_k(Val x, Val n) {
  int w = bit_width(x.dtype);
  bool is_unsigned = ember::is_unsigned(x.dtype);
  int top = is_unsigned ? w - 1 : w - 2;  // largest count whose power of two is positive
  Val e = max(min(n, c(n, top)), c(n, 0));
  Val r = floor_div(x, pow(c(x, 2), e));
  Val fill = is_unsigned ? c(x, 0) : select(lt(x, c(x, 0)), c(x, -1), c(x, 0));
  Val in_range = logical_and(ge(n, c(n, 0)), le(n, c(n, top)));
  return select(in_range, r, fill);
}

}  // namespace ember::kir
