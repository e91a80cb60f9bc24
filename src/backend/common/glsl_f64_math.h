// f64 math functions for the GLSL target (emit_glsl.cpp): GLSL has no double-precision exp, log,
// sin, cos, tanh, erf or pow, so the KIR shaders get their own (e_expd, e_logd, e_sind, e_cosd,
// e_tanhd, e_erfd, e_powd), included in every shader of a device with shaderFloat64, after
// kPreludeF64 (e_nand, e_infd). e_powf_d is f32 pow through e_powd, rounded once to float (what
// the reference backend computes: std::pow in double, then the rounding to f32).
//
// Measured on lavapipe (dense random sweeps, 1-4 million points per range; errors against the
// exact value from mpmath at 200+ bits; "glibc" is the CPU reference's std:: function):
//   exp   <= 0.54 ulp for normal results, <= 0.76 ulp for subnormal ones   (glibc <= 0.51)
//   log   <= 0.50 ulp, over the whole positive range, subnormals included   (glibc <= 0.52)
//   sin,  <= 0.73 ulp over the whole double range, near multiples of pi/2 included
//   cos                                                                      (glibc <= 0.52; 8 seen)
//   tanh  <= 0.61 ulp                                                        (glibc <= 2.0)
//   erf   <= 0.84 ulp                                                        (glibc <= 1.04)
//   pow   <= 0.55 ulp for normal results (0.76 subnormal), |y log x| up to 745, x near 1 with
//         |y| up to 7e4, negative x with integer y; exact where the result is (integer powers,
//         sqrt of squares, 2^k)                                              (glibc <= 0.51)
// so every function is within one ulp of glibc everywhere (tanh within two: glibc's own error).
// e_powf_d matched float(glibc pow(double, double)) bit for bit on 2.5 million f32 pairs.
//
//   exp   argument reduction x = n*ln2 + r (a 32-bit ln2_hi, so n*ln2_hi and x - n*ln2_hi are
//         exact), exp(r) - 1 = r + r^2/2 + r^3*P(r) with minimax P, |r| <= ln2/2, summed as
//         1 + (r + r^2/2) with the rounding errors carried; the scaling by 2^n rounds once.
//         Overflows to inf above 709.78, underflows gradually: subnormal results are produced
//         (one rounding of a value already rounded to 53 bits, hence the 0.76 ulp), 0 below
//         -745.13.
//   log   x = 2^e*m, m in [sqrt(1/2), sqrt(2)) (subnormal x scaled by 2^54 first), m = c*(1+s)/(1-s)
//         around the nearest c = j/32: log x = e*ln2 + log(c) + 2*atanh(s), |s| <= 0.0112, all
//         in double-double (log(j/32) tabled as double-double); ~2^-70 relative before the
//         final rounding. Also the core of pow.
//   sin,  Cody-Waite reduction by pi/2 in four pieces (three of 33 bits, exact products) for
//   cos   |x| < 2^20*pi/2 ~ 1.6e6, Payne-Hanek with 192 bits of 2/pi (integer arithmetic) above,
//         so the reduced argument is a double-double accurate to ~2^-120 absolute over the whole
//         double range (the closest doubles to multiples of pi/2 are ~2^-61 away); then minimax
//         polynomials on |r| <= pi/4.
//   tanh  E = expm1(2|x|) as a double-double, tanh = E/(E + 2) with one Newton correction of
//         the quotient (relative accuracy near 0); x itself below 2^-28, +-1 above 22.
//   erf   |x| < 0.75: x + x*E(x^2); 0.75 <= |x| < 1.25: erf(1) + t*Q(t), t = |x| - 1;
//         1.25 <= |x| < 6: 1 - exp(-x^2)*G(|x|) with G on four intervals (exp(-x^2) from the
//         exact square x*x = h + l and the exp above); +-1 from 6 on (erf rounds to 1 above 5.93).
//         E, Q, G minimax polynomials.
//   pow   exp(y*log|x|) with log in double-double and y*log|x| formed exactly (Dekker product)
//         before the exp, so large results keep their accuracy; C99 Annex F special cases.
// Special values follow C: NaN in, NaN out (except pow(x, +-0) = pow(1, y) = 1); exp(+inf) = inf,
// exp(-inf) = 0; log(+-0) = -inf, log(x < 0) = NaN, log(inf) = inf; sin/cos(+-inf) = NaN; sin,
// tanh and erf keep the sign of zero; tanh(+-inf) = erf(+-inf) = +-1.
//
// Everything that depends on exact error terms is `precise` (SPIR-V NoContraction: no fusing
// into fma, no reassociation) and uses Veltkamp/Dekker splitting rather than fma(): lavapipe
// lowers fma() to a multiply and an add, so fma(a, b, -a*b) is 0 there. fma() only evaluates
// polynomials, where fused or not makes no difference worth counting.
//
// The constants (polynomial coefficients, splittings of ln2 and pi/2, the bits of 2/pi, the log
// table) come from tools/fit_glsl_f64.py, which documents how each is fitted.
#pragma once

namespace ember::emit {

inline constexpr const char* kGlslF64Math = R"(
// f64 exp, log, sin, cos, tanh, erf, pow (glsl_f64_math.h; constants from tools/fit_glsl_f64.py).
// Double-double helpers; each is exact as written, hence precise throughout.
dvec2 e_m_sum(double a, double b) {  // s + e == a + b
  precise double s = a + b;
  precise double v = s - a;
  precise double e = (a - (s - v)) + (b - v);
  return dvec2(s, e);
}
dvec2 e_m_fsum(double a, double b) {  // s + e == a + b, for |a| >= |b| (or a == 0)
  precise double s = a + b;
  precise double e = b - (s - a);
  return dvec2(s, e);
}
dvec2 e_m_split(double a) {  // a == h + l, 26 and 27 significant bits (|a| < 2^995)
  precise double c = 134217729.0LF * a;
  precise double h = c - (c - a);
  precise double l = a - h;
  return dvec2(h, l);
}
dvec2 e_m_prod(double a, double b) {  // p + e == a * b (Dekker), barring underflow
  dvec2 x = e_m_split(a), y = e_m_split(b);
  precise double p = a * b;
  precise double e = (((x.x * y.x - p) + x.x * y.y) + x.y * y.x) + x.y * y.y;
  return dvec2(p, e);
}
double e_m_pow2(int k) { return packDouble2x32(uvec2(0u, uint(k + 1023) << 20)); }  // -1022 <= k <= 1023
double e_m_scale(double v, int n) {  // v * 2^n rounded once, for v in [0.5, 2] and |n| <= 1100
  precise double w;
  if (n > 1000) { w = v * e_m_pow2(1000); w = w * e_m_pow2(n - 1000); }
  else if (n < -1000) { w = v * e_m_pow2(n + 600); w = w * e_m_pow2(-600); }
  else w = v * e_m_pow2(n);
  return w;
}

// e^(h + l) = 2^n * (1 + m), m = e^r - 1 a double-double of |m| <= 0.42, for |h| <= 746 and
// |l| <= 2^-40 |h|:
// h - n*LN2_HI is exact (LN2_HI has 32 bits), exp(r) - 1 = r + r^2/2 + r^3*P(r).
dvec2 e_m_expm1_red(double h, double l, out int n) {
  precise double k = roundEven(h * 1.4426950408889634LF);
  n = int(k);
  precise double rh = h - k * 0.6931471803691238LF;
  precise double rl = l - k * 1.9082149292705877e-10LF;
  dvec2 r = e_m_sum(rh, rl);
  precise double p = 2.08372330497849e-09LF;
  p = fma(p, r.x, 2.511084657907912e-08LF); p = fma(p, r.x, 2.755752915000285e-07LF);
  p = fma(p, r.x, 2.7557238763343103e-06LF); p = fma(p, r.x, 2.4801587023804215e-05LF);
  p = fma(p, r.x, 0.00019841269891809912LF); p = fma(p, r.x, 0.0013888888889032924LF);
  p = fma(p, r.x, 0.008333333333319277LF); p = fma(p, r.x, 0.041666666666666415LF);
  p = fma(p, r.x, 0.1666666666666668LF);
  precise double z = r.x * r.x;
  dvec2 s = e_m_sum(r.x, 0.5LF * z);
  precise double lo = s.y + (z * r.x * p + r.y * (1.0LF + r.x));
  return e_m_fsum(s.x, lo);
}
double e_m_exp(double h, double l) {  // e^(h + l) for -745.2 <= h <= 709.8
  int n;
  dvec2 m = e_m_expm1_red(h, l, n);
  dvec2 a = e_m_fsum(1.0LF, m.x);
  precise double v = a.x + (a.y + m.y);
  return e_m_scale(v, n);
}
double e_expd(double x) {
  if (isnan(x)) return x;
  if (x > 709.79LF) return e_infd();
  if (x < -745.14LF) return 0.0LF;
  return e_m_exp(x, 0.0LF);
}

// log(x) as a double-double for finite x > 0: x = 2^e * m, m in [sqrt(1/2), sqrt(2)], c = j/32
// the nearest anchor, s = (m - c)/(m + c) (|s| <= 0.0112) as a double-double, and
// log x = e*ln2 + log(c) + 2s(1 + s^2/3 + ... + s^10/11).
const double kLogCHi[23] = double[](
  -0.33024168687057687LF, -0.2876820724517809LF, -0.24686007793152578LF, -0.2076393647782445LF,
  -0.16989903679539747LF, -0.13353139262452263LF, -0.09844007281325252LF, -0.06453852113757118LF,
  -0.0317486983145803LF, 0.0LF, 0.030771658666753687LF, 0.06062462181643484LF, 0.08961215868968714LF,
  0.11778303565638346LF, 0.1451820098444979LF, 0.17185025692665923LF, 0.19782574332991987LF,
  0.22314355131420976LF, 0.24783616390458127LF, 0.27193371548364176LF, 0.2954642128938359LF,
  0.3184537311185346LF, 0.3409265869705932LF);
const double kLogCLo[23] = double[](
  1.0828321637483858e-17LF, -2.607160616442564e-17LF, -1.361743371748368e-17LF, -1.2053243216686129e-17LF,
  4.868008764439071e-19LF, 3.664457663660085e-18LF, 4.439009633675136e-18LF, 6.470486661692933e-18LF,
  -3.0382263084680858e-18LF, 0.0LF, 1.0431732029005968e-18LF, 2.6424025938726934e-18LF,
  -5.4268129336647135e-18LF, -1.1971685747593677e-18LF, 8.242418783022475e-18LF,
  -6.0224538210113705e-18LF, 1.2821194372980142e-17LF, -9.091270597324799e-18LF,
  -1.2432209578702523e-17LF, 7.83319637697442e-19LF, -2.16461086040599e-17LF, 2.7114779367326236e-17LF,
  1.7467136443544747e-17LF);
dvec2 e_m_log(double x) {
  int e = 0;
  precise double xx = x;
  if (xx < 2.2250738585072014e-308LF) { xx = xx * 18014398509481984.0LF; e = -54; }  // subnormal: * 2^54
  uvec2 b = unpackDouble2x32(xx);
  e += int(b.y >> 20) - 1023;
  precise double m = packDouble2x32(uvec2(b.x, (b.y & 0x000fffffu) | 0x3ff00000u));
  if (m > 1.4142135623730951LF) { m = 0.5LF * m; e += 1; }
  int j = int(roundEven(32.0LF * m));
  precise double c = double(j) * 0.03125LF;
  precise double num = m - c;  // exact
  dvec2 den = e_m_sum(m, c);
  precise double s = num / den.x;
  dvec2 sd = e_m_prod(s, den.x);
  precise double sl = (((num - sd.x) - sd.y) - s * den.y) / den.x;
  precise double z = s * s;
  precise double p = 0.09090909090909091LF;
  p = fma(p, z, 0.1111111111111111LF); p = fma(p, z, 0.14285714285714285LF);
  p = fma(p, z, 0.2LF); p = fma(p, z, 0.3333333333333333LF);
  precise double t = 2.0LF * s * z * p;
  precise double fe = double(e);
  dvec2 a = e_m_sum(fe * 0.6931471803691238LF, kLogCHi[j - 23]);
  dvec2 h = e_m_sum(a.x, 2.0LF * s);
  precise double lo = (a.y + h.y) + (((fe * 1.9082149292705877e-10LF + kLogCLo[j - 23]) + 2.0LF * sl) + t);
  return e_m_fsum(h.x, lo);
}
double e_logd(double x) {
  if (isnan(x) || x < 0.0LF) return e_nand();
  if (x == 0.0LF) return -e_infd();
  if (isinf(x)) return x;
  return e_m_log(x).x;
}

// pow with C99 Annex F's special cases; otherwise exp(y*log|x|) with y*log|x| = ph + pl exact to
// ~2^-70 relative, and the sign of x^y for a negative x and odd integer y.
double e_powd(double x, double y) {
  if (y == 0.0LF || x == 1.0LF) return 1.0LF;
  if (isnan(x) || isnan(y)) return e_nand();
  double ax = abs(x), ay = abs(y);
  if (isinf(y)) return ax == 1.0LF ? 1.0LF : ((ax > 1.0LF) == (y > 0.0LF) ? e_infd() : 0.0LF);
  bool yint = floor(y) == y;
  bool yodd = yint && ay < 9007199254740992.0LF && floor(0.5LF * ay) * 2.0LF != ay;
  bool xneg = (unpackDouble2x32(x).y >> 31) != 0u;
  double nzero = packDouble2x32(uvec2(0u, 0x80000000u));
  if (x == 0.0LF || isinf(x)) {
    bool big = (x == 0.0LF) == (y < 0.0LF);  // |x^y| is inf rather than 0
    bool neg = xneg && yodd;
    return big ? (neg ? -e_infd() : e_infd()) : (neg ? nzero : 0.0LF);
  }
  if (x < 0.0LF && !yint) return e_nand();
  dvec2 L = e_m_log(ax);
  precise double ph = y * L.x;
  double v;
  if (ph > 709.8LF) v = e_infd();
  else if (ph < -745.2LF) v = 0.0LF;
  else {
    dvec2 pp = e_m_prod(y, L.x);
    precise double pl = pp.y + y * L.y;
    v = e_m_exp(pp.x, pl);
  }
  return (xneg && yodd) ? -v : v;
}
float e_powf_d(float x, float y) { return float(e_powd(double(x), double(y))); }

// |x| = (4N + q + f)*pi/2, |f| <= 1/2 (a hair more where the quotient's rounding ties): returns
// f*pi/2 as a double-double. Cody-Waite below 2^20*pi/2 (k*PIO2_1..3 exact, 33-bit pieces);
// above, Payne-Hanek: |x| = M*2^E with a 53-bit integer M, and the 192 bits of 2/pi from bit
// E - 1 on (the earlier ones only add multiples of 4 to x*2/pi) times M give x*2/pi mod 4 with
// 190 fraction bits.
const uint kTwoOverPi[42] = uint[](
  0x00000000u, 0x00000000u, 0xa2f9836eu, 0x4e441529u, 0xfc2757d1u, 0xf534ddc0u, 0xdb629599u, 0x3c439041u,
  0xfe5163abu, 0xdebbc561u, 0xb7246e3au, 0x424dd2e0u, 0x06492eeau, 0x09d1921cu, 0xfe1deb1cu, 0xb129a73eu,
  0xe88235f5u, 0x2ebb4484u, 0xe99c7026u, 0xb45f7e41u, 0x3991d639u, 0x835339f4u, 0x9c845f8bu, 0xbdf9283bu,
  0x1ff897ffu, 0xde05980fu, 0xef2f118bu, 0x5a0a6d1fu, 0x6d367ecfu, 0x27cb09b7u, 0x4f463f66u, 0x9e5fea2du,
  0x7527bac7u, 0xebe5f17bu, 0x3d0739f7u, 0x8a5292eau, 0x6bfb5fb1u, 0x1f8d5d08u, 0x56033046u, 0xfc7b6babu,
  0xf0cfbc20u, 0x9af4361du);
dvec2 e_m_rem_pio2(double ax, out int q) {
  if (ax < 1647099.0LF) {
    precise double k = roundEven(ax * 0.6366197723675814LF);
    precise double r1 = ax - k * 1.5707963267341256LF;
    dvec2 a = e_m_sum(r1, -(k * 6.077100506303966e-11LF));
    dvec2 b = e_m_sum(a.x, -(k * 2.0222662487111665e-21LF));
    precise double tail = (a.y + b.y) - k * 8.4784276603689e-32LF;
    q = int(k) & 3;
    return e_m_sum(b.x, tail);
  }
  uvec2 bits = unpackDouble2x32(ax);
  int k0 = int(bits.y >> 20) - 1076;  // E - 1, >= -33 here
  int t = (k0 + 63) >> 5, o = (k0 + 63) & 31;
  uint v[6];  // the window, least significant word first
  for (int i = 0; i < 6; ++i) {
    uint hw = kTwoOverPi[t + i], lw = kTwoOverPi[t + i + 1];
    v[5 - i] = (hw << o) | ((lw >> 1) >> (31 - o));
  }
  uint m0 = bits.x, m1 = (bits.y & 0x000fffffu) | 0x00100000u;
  uint P[8];
  uint64_t c = 0UL;
  for (int i = 0; i < 6; ++i) { uint64_t w = uint64_t(v[i]) * uint64_t(m0) + c; P[i] = uint(w); c = w >> 32; }
  P[6] = uint(c);
  c = 0UL;
  for (int i = 0; i < 6; ++i) {
    uint64_t w = uint64_t(v[i]) * uint64_t(m1) + uint64_t(P[i + 1]) + c;
    P[i + 1] = uint(w); c = w >> 32;
  }
  P[7] = uint(c);
  // Bits 191..190 of M*window: q; bits 189..62: the fraction, as hi:lo.
  q = int(P[5] >> 30);
  uint64_t hi = (uint64_t(P[5] & 0x3fffffffu) << 34) | (uint64_t(P[4]) << 2) | uint64_t(P[3] >> 30);
  uint64_t lo = (uint64_t(P[3] & 0x3fffffffu) << 34) | (uint64_t(P[2]) << 2) | uint64_t(P[1] >> 30);
  precise double sg = 1.0LF;
  if ((hi >> 63) != 0UL) {  // fraction >= 1/2: take fraction - 1
    q += 1; sg = -1.0LF;
    hi = ~hi; lo = ~lo + 1UL;
    if (lo == 0UL) hi += 1UL;
  }
  q &= 3;
  precise double dh = double(hi);
  precise double gh = dh * 5.421010862427522e-20LF;  // 2^-64
  precise double gr = double(int64_t(hi - uint64_t(dh)));  // hi - dh, exact
  precise double gl = (gr + double(lo) * 5.421010862427522e-20LF) * 5.421010862427522e-20LF;
  dvec2 pr = e_m_prod(gh, 1.5707963267948966LF);
  precise double pl = pr.y + (gh * 6.123233995736766e-17LF + gl * 1.5707963267948966LF);
  dvec2 r = e_m_fsum(pr.x, pl);
  return sg * r;
}
// sin and cos of r + rr, |r| <= pi/4 (+ a hair), |rr| <= 2^-52 |r|.
double e_m_sin_k(double r, double rr) {
  precise double z = r * r;
  precise double p = -7.384540829789667e-13LF;
  p = fma(p, z, 1.6054220474850325e-10LF); p = fma(p, z, -2.5052070283396655e-08LF);
  p = fma(p, z, 2.7557319071880082e-06LF); p = fma(p, z, -0.00019841269840959285LF);
  p = fma(p, z, 0.00833333333333304LF); p = fma(p, z, -0.16666666666666666LF);
  precise double v = r + (r * z * p + rr * (1.0LF - 0.5LF * z));
  return v;
}
double e_m_cos_k(double r, double rr) {
  dvec2 zz = e_m_prod(r, r);
  precise double z = zz.x;
  precise double p = 4.5926906391697e-14LF;
  p = fma(p, z, -1.1466861803960364e-11LF); p = fma(p, z, 2.0876722008290355e-09LF);
  p = fma(p, z, -2.755731906067913e-07LF); p = fma(p, z, 2.4801587301180814e-05LF);
  p = fma(p, z, -0.0013888888888888389LF); p = fma(p, z, 0.041666666666666664LF);
  precise double hz = 0.5LF * z;
  precise double w = 1.0LF - hz;
  precise double v = w + ((((1.0LF - w) - hz) - 0.5LF * zz.y) + (z * z * p - r * rr));
  return v;
}
double e_m_trig(double x, int shift) {  // sin(|x|) (shift 0) or cos(x) (shift 1), x finite
  int q;
  dvec2 r = e_m_rem_pio2(abs(x), q);
  q = (q + shift) & 3;
  double v = (q & 1) != 0 ? e_m_cos_k(r.x, r.y) : e_m_sin_k(r.x, r.y);
  return (q & 2) != 0 ? -v : v;
}
double e_sind(double x) {
  if (isnan(x) || isinf(x)) return e_nand();
  if (abs(x) < 1.4901161193847656e-8LF) return x;  // 2^-26: sin(x) rounds to x (and keeps -0)
  double v = e_m_trig(x, 0);
  return x < 0.0LF ? -v : v;
}
double e_cosd(double x) {
  if (isnan(x) || isinf(x)) return e_nand();
  return e_m_trig(x, 1);
}

// tanh = E/(E + 2), E = e^(2|x|) - 1 as a double-double, the quotient corrected once.
double e_tanhd(double x) {
  if (isnan(x)) return x;
  double ax = abs(x);
  if (ax < 3.725290298461914e-9LF) return x;  // 2^-28: tanh(x) rounds to x (and keeps -0)
  precise double v = 1.0LF;  // from 22 on (and inf), tanh rounds to 1
  if (ax < 22.0LF) {
    int n;
    dvec2 E = e_m_expm1_red(2.0LF * ax, 0.0LF, n);
    if (n != 0) {  // 2^n (1 + E) - 1
      precise double p = e_m_pow2(n);
      dvec2 s = e_m_sum(p - 1.0LF, p * E.x);
      precise double el = s.y + p * E.y;
      E = e_m_fsum(s.x, el);
    }
    dvec2 D = e_m_sum(E.x, 2.0LF);
    precise double dl = D.y + E.y;
    precise double q = E.x / D.x;
    dvec2 qd = e_m_prod(q, D.x);
    precise double corr = ((((E.x - qd.x) - qd.y) + E.y) - q * dl) / D.x;
    v = q + corr;
  }
  return x < 0.0LF ? -v : v;
}

// erf: x + x*E(x^2) below 0.75; erf(1) + t*Q(t), t = |x| - 1, below 1.25 (where E's terms would
// cancel); 1 - e^(-x^2)*G_i(|x| - c_i) on [1.25, 1.75), [1.75, 2.5), [2.5, 3.75), [3.75, 6) (c_i
// the midpoints); +-1 from 6 on.
const double kErfcG[52] = double[](
  // [1.25, 1.75), t = |x| - 1.5
  0.3215854164543175LF, -0.16362291773256013LF, 0.07615103985549318LF, -0.03293090529952197LF,
  0.013377340950737223LF, -0.005145957551955672LF, 0.001886135000783949LF, -0.0006619299772323513LF,
  0.00022330705063227068LF, -7.26573243102156e-05LF, 2.2893734499974862e-05LF, -7.047058889538657e-06LF,
  1.9772965085421614e-06LF,
  // [1.75, 2.5), t = |x| - 2.125
  0.2426703646126546LF, -0.09703011749173056LF, 0.036481364942699226LF, -0.013004811325729925LF,
  0.0044230704403865366LF, -0.001442314649085277LF, 0.0004527171813829409LF, -0.0001372261245308337LF,
  4.027930045484366e-05LF, -1.1470609753315041e-05LF, 3.170421182246143e-06LF, -8.824582380962551e-07LF,
  2.50901462191986e-07LF,
  // [2.5, 3.75), t = |x| - 3.125
  0.17244435210217252LF, -0.05060196645695313LF, 0.014313206924391704LF, -0.003915463209905036LF,
  0.0010386921947950802LF, -0.0002678200940806036LF, 6.725141503596e-05LF, -1.6473682564195008e-05LF,
  3.943533254316325e-06LF, -9.236378260876777e-07LF, 2.0824085137980857e-07LF, -4.8283926322228234e-08LF,
  1.4618521050270381e-08LF,
  // [3.75, 6), t = |x| - 4.875
  0.11343587721470123LF, -0.02237936425204623LF, 0.0043364764897526106LF, -0.0008260275594737405LF,
  0.00015479607006179072LF, -2.8558851856995757e-05LF, 5.1901338502293344e-06LF, -9.307723235931541e-07LF,
  1.638893000781533e-07LF, -2.7888131359109253e-08LF, 6.343372342606158e-09LF, 1.5350474244396226e-10LF,
  4.5168633251151303e-10LF);
double e_erfd(double x) {
  if (isnan(x)) return x;
  double ax = abs(x);
  if (ax < 0.75LF) {
    precise double z = x * x;
    precise double p = 1.3348746167636156e-08LF;
    p = fma(p, z, -1.6471902984419664e-07LF); p = fma(p, z, 1.6494814552879673e-06LF);
    p = fma(p, z, -1.4928482380117064e-05LF); p = fma(p, z, 0.00012055462905735979LF);
    p = fma(p, z, -0.0008548330534540794LF); p = fma(p, z, 0.005223977681883408LF);
    p = fma(p, z, -0.026866170650281556LF); p = fma(p, z, 0.11283791670978856LF);
    p = fma(p, z, -0.37612638903184176LF); p = fma(p, z, 0.1283791670955126LF);
    precise double r = x + x * p;
    return r;
  }
  precise double v = 1.0LF;
  if (ax < 1.25LF) {
    precise double t = ax - 1.0LF;  // exact
    precise double p = -8.806575098351834e-06LF;
    p = fma(p, t, 2.3279426712084624e-05LF); p = fma(p, t, 1.9546256005002417e-05LF);
    p = fma(p, t, -0.0002000199310528133LF); p = fma(p, t, 8.544321991486406e-05LF);
    p = fma(p, t, 0.0012262860802434504LF); p = fma(p, t, -0.0018851843873221724LF);
    p = fma(p, t, -0.004777030688014985LF); p = fma(p, t, 0.015154718054857663LF);
    p = fma(p, t, 0.004612305526377169LF); p = fma(p, t, -0.06918458290201536LF);
    p = fma(p, t, 0.06918458290343667LF); p = fma(p, t, 0.1383691658068565LF);
    p = fma(p, t, -0.4151074974205947LF); p = fma(p, t, 0.4151074974205947LF);
    v = 0.8427007929497149LF + (t * p - 2.4801011789118602e-17LF);
  } else if (ax < 6.0LF) {
    int i = ax < 1.75LF ? 0 : (ax < 2.5LF ? 1 : (ax < 3.75LF ? 2 : 3));
    precise double t = ax - (i == 0 ? 1.5LF : (i == 1 ? 2.125LF : (i == 2 ? 3.125LF : 4.875LF)));  // exact
    precise double g = kErfcG[13 * i + 12];
    for (int k = 11; k >= 0; --k) g = fma(g, t, kErfcG[13 * i + k]);
    dvec2 sq = e_m_prod(ax, ax);
    v = 1.0LF - e_m_exp(-sq.x, -sq.y) * g;
  }
  return x < 0.0LF ? -v : v;
}
)";

}  // namespace ember::emit
