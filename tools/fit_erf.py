#!/usr/bin/env python3
"""Fit the coefficients of Ember's vectorizable f32 erf (e_erff, tier-1 CPU kernel prelude).

What it computes
----------------
e_erff evaluates both pieces for every lane and picks one with a select:

  |x| <  A :  erf(x) = x + x*P(x*x)
              P(t) ~ erf(sqrt(t))/sqrt(t) - 1, fitted for minimax *relative* error of
              erf(x) (weight 1/(1 + P(t))).
  |x| >= A :  erf(x) = sign(x)*(1 - exp(-z*z + S(z))), z = min(|x|, B)
              S(z) ~ log(erfc(z)) + z*z, fitted for minimax *absolute* error of erf
              (weight erfc(z): an error dS in the exponent changes erf by erfc(z)*dS).
              erf rounds to 1.0f above ~3.92, so clamping at B = 4 is exact and keeps
              +-inf finite (NaN passes the clamp and propagates).
  exp (inlined, no libmvec call): exp(a) = 2^n*(1 + r*Q(r)), n = round(a/ln2),
              Q(r) ~ (exp(r) - 1)/r with Q(0) = 1 fixed, fitted for minimax relative
              error of exp on |r| <= ln(2)/2.  r = -z*z + S(z) - n*ln2 is formed from the
              exact split z*z = zz + zl (fma) and a 17-bit ln2_hi, so that
              zz + n*ln2_hi is exact and -z*z + S(z) is never rounded as a whole.

Each fit is a discrete Remez exchange on a dense Chebyshev-distributed grid, solved with
mpmath at 40 digits.  The coefficients are then rounded to float32 one at a time (lowest
degree first); after each rounding the remaining free coefficients are re-fitted with Remez
so that they absorb the rounding error.

Printed: the float32 coefficients as C hex-float literals, the complete C++ e_erff as it is
pasted into the prelude, and the predicted max error on a dense grid, both for the
approximation alone (float32 coefficients, exact arithmetic) and for a float32 simulation of
the generated code (each operation rounded to float32, fma rounded once), in ulp of erf(x)
and, for the tail piece, as an absolute error.  The exhaustive check over all 2^32 floats is
done separately in C++ (see the report that introduced this script).

How to run
----------
  python3 tools/fit_erf.py                          # the coefficients used by Ember
  python3 tools/fit_erf.py --a 0.875 --np 7 --ns 7  # explore other splits / degrees
Needs Python 3 and mpmath (`pip install --user mpmath`); takes a few seconds.
"""

import argparse
import math
import struct

import mpmath as mp

mp.mp.dps = 40


def f32(v):
    """Round a Python float (double) to the nearest float32, returned as float."""
    return struct.unpack("<f", struct.pack("<f", float(v)))[0]


def hexf(v):
    """C hex-float literal of a float32 value, with the f suffix."""
    v = f32(v)
    if v == 0.0:
        return "0x0p+0f"
    s = float(v).hex()  # e.g. -0x1.20dd760000000p-1
    sign = "-" if s.startswith("-") else ""
    mant, exp = s.lstrip("-")[2:].split("p")
    mant = mant.rstrip("0")
    if mant.endswith("."):
        mant = mant[:-1]
    return f"{sign}0x{mant}p{int(exp):+d}f"


def ulp32(v):
    """Spacing of float32 numbers at |v| (for |v| in the normal range)."""
    v = abs(v)
    if v < 2.0 ** -126:
        return 2.0 ** -149
    e = math.frexp(v)[1]  # v = m * 2^e, m in [0.5, 1)
    return 2.0 ** (e - 24)


def cheb_grid(lo, hi, n):
    return [(lo + hi) / 2 - (hi - lo) / 2 * math.cos(math.pi * (i + 0.5) / n) for i in range(n)]


def remez(xs, fs, ws, nterms, power_of, max_iter=60, tol=1e-4):
    """Discrete weighted minimax fit of fs ~ sum c_k * v^power_of(k).

    xs: grid abscissae (the polynomial variable), fs: targets, ws: weights.
    Returns (coefficients as mpf, max weighted error on the grid).
    """
    n = len(xs)
    m = nterms + 1  # reference size
    # initial reference: Chebyshev extrema mapped to grid indices
    ref = sorted(set(int(round((n - 1) * (1 - math.cos(math.pi * i / (m - 1))) / 2)) for i in range(m)))
    assert len(ref) == m, "grid too coarse"
    coef = None
    best = None
    for _ in range(max_iter):
        A = mp.matrix(m, m)
        b = mp.matrix(m, 1)
        for r, i in enumerate(ref):
            x = mp.mpf(xs[i])
            for k in range(nterms):
                A[r, k] = x ** power_of(k)
            A[r, nterms] = (-1) ** r / mp.mpf(ws[i])
            b[r] = mp.mpf(fs[i])
        sol = mp.lu_solve(A, b)
        coef = [sol[k] for k in range(nterms)]
        cf = [float(c) for c in coef]
        errs = []
        for x, fv, wv in zip(xs, fs, ws):
            p = sum(cf[k] * x ** power_of(k) for k in range(nterms))
            errs.append(wv * (fv - p))
        emax = max(abs(e) for e in errs)
        best = emax
        # sign runs -> one extremum per run
        runs = []
        cur = None
        for i, e in enumerate(errs):
            s = e >= 0
            if cur is None or s != cur[0]:
                cur = [s, i]
                runs.append(cur)
            elif abs(e) > abs(errs[cur[1]]):
                cur[1] = i
        ext = [r[1] for r in runs]
        while len(ext) > m:
            if len(ext) == m + 1:
                if abs(errs[ext[0]]) < abs(errs[ext[-1]]):
                    ext.pop(0)
                else:
                    ext.pop()
                continue
            j = min(range(len(ext)), key=lambda q: abs(errs[ext[q]]))
            if j == 0 or j == len(ext) - 1:
                ext.pop(j)
            else:
                # drop j and merge its two same-signed neighbours
                keep = ext[j - 1] if abs(errs[ext[j - 1]]) >= abs(errs[ext[j + 1]]) else ext[j + 1]
                ext[j - 1:j + 2] = [keep]
        if len(ext) < m:
            break  # degenerate: fit already exact to grid resolution
        emin = min(abs(errs[i]) for i in ext)
        ref = ext
        if (emax - emin) <= tol * emax:
            break
    return coef, best


def fit_rounded(xs, fs, ws, nterms, power_of):
    """Remez, then round coefficients to float32 one by one, refitting the rest."""
    fixed = []
    fs = list(fs)
    for k in range(nterms):
        free = nterms - k
        coef, _ = remez(xs, fs, ws, free, lambda j, k=k: power_of(j + k))
        c = f32(coef[0])
        fixed.append(c)
        fs = [fv - c * x ** power_of(k) for fv, x in zip(fs, xs)]
    return fixed


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", type=float, default=1.0, help="split point A (float32-exact)")
    ap.add_argument("--b", type=float, default=4.0, help="clamp B (erf(B) rounds to 1.0f)")
    ap.add_argument("--np", type=int, default=7, help="number of coefficients of P")
    ap.add_argument("--ns", type=int, default=7, help="number of coefficients of S")
    ap.add_argument("--nq", type=int, default=6, help="number of coefficients of Q (exp)")
    ap.add_argument("--grid", type=int, default=1500, help="Remez grid size per piece")
    args = ap.parse_args()
    A, B = f32(args.a), f32(args.b)
    assert A == args.a and B == args.b, "A and B must be float32 values"

    # ---- small piece: erf(x) = x + x*P(x^2), |x| < A
    ts = cheb_grid(0.0, A * A, args.grid)
    gs, ws = [], []
    for t in ts:
        x = mp.sqrt(mp.mpf(t))
        g = mp.erf(x) / x - 1 if t > 0 else 2 / mp.sqrt(mp.pi) - 1
        gs.append(float(g))
        ws.append(float(1 / (1 + g)))
    P = fit_rounded(ts, gs, ws, args.np, lambda k: k)

    # ---- tail piece: erf(x) = 1 - exp(-x^2 + S(x)), A <= x <= B
    xs = cheb_grid(A, B, args.grid)
    us, ss, wt = [], [], []
    for x in xs:
        X = mp.mpf(x)
        ec = mp.erfc(X)
        us.append(x)
        ss.append(float(mp.log(ec) + X * X))
        wt.append(float(ec))
    S = fit_rounded(us, ss, wt, args.ns, lambda k: k)

    # ---- exp piece: exp(r) = 1 + r*Q(r), Q(0) = 1, |r| <= R (a bit over ln(2)/2), relative error of exp
    R = 0.3467
    rs = [r for r in cheb_grid(-R, R, args.grid)]
    qs, wq = [], []
    for r in rs:
        X = mp.mpf(r)
        qs.append(float(mp.expm1(X) / X - 1))  # q0 is fixed to exactly 1
        wq.append(float(abs(X) / mp.exp(X)))
    Q = [1.0] + fit_rounded(rs, qs, wq, args.nq - 1, lambda k: k + 1)

    # ---- constants of the inlined exp: n = round(a/ln2), r = a - n*ln2, with ln2 = LN2_HI + LN2_LO,
    # LN2_HI having 17 significant bits so that n*LN2_HI (|n| < 32) and z*z + n*LN2_HI are exact.
    LOG2E = f32(1 / math.log(2))
    LN2_HI = math.ldexp(round(math.ldexp(math.log(2), 17)), -17)
    LN2_LO = f32(mp.log(2) - LN2_HI)
    SHIFT = float.fromhex("0x1.8p23")  # adding it rounds a float in (-2^22, 2^22) to an integer

    print(f"// split A = {hexf(A)} ({A}), clamp B = {hexf(B)} ({B})")
    print("// P (|x| < A: x + x*P(x*x)), ascending powers of t = x*x:")
    for k, c in enumerate(P):
        print(f"//   p{k} = {hexf(c)}  ({c:.9e})")
    print("// S (A <= |x|: 1 - exp(-z*z + S(z)), z = min(|x|, B)), ascending powers of z:")
    for k, c in enumerate(S):
        print(f"//   s{k} = {hexf(c)}  ({c:.9e})")
    print("// Q (exp(r) = 1 + r*Q(r), |r| <= ln(2)/2), ascending powers of r:")
    for k, c in enumerate(Q):
        print(f"//   q{k} = {hexf(c)}  ({c:.9e})")
    print(f"// log2(e) = {hexf(LOG2E)}, ln2 = {hexf(LN2_HI)} + {hexf(LN2_LO)}")

    # ---- the C++ function, as pasted into the tier-1 kernel prelude
    def horner_c(var, acc, cs, indent="  "):
        lines = [f"{indent}float {acc} = {hexf(cs[-1])};"]
        for c in reversed(cs[:-1]):
            lines.append(f"{indent}{acc} = __builtin_fmaf({acc}, {var}, {hexf(c)});")
        return "\n".join(lines)

    code = f"""// erf for f32: branch-free, call-free, so it vectorizes inside `#pragma omp simd`.
// Generated by tools/fit_erf.py (Remez fits, coefficients rounded to float32 and refitted).
//   |x| < {A:g}: erf(x) = x + x*P(x*x)
//   |x| >= {A:g}: erf(x) = sign(x)*(1 - exp(-z*z + S(z))), z = min(|x|, {B:g}) (erf(z) rounds to 1 past 3.92)
//   exp inlined as 2^n*(1 + r*Q(r)), r = -z*z + S(z) - n*ln2, using the exact split z*z = zz + zl
//   (zz + n*ln2_hi is exact), so -z*z + S(z) is never rounded as a whole.
// Max error 1 ulp over all floats (exhaustive); NaN -> NaN, +-inf -> +-1, -0 -> -0.
inline float e_erff(float x) {{
  const float ax = __builtin_fabsf(x);
  const float t = x * x;
{horner_c("t", "p", P)}
  const float lo = __builtin_fmaf(x, p, x);
  const float z = ax > {hexf(B)} ? {hexf(B)} : ax;  // NaN passes through
{horner_c("z", "s", S)}
  const float zz = z * z;
  const float zl = __builtin_fmaf(z, z, -zz);
  const float k = __builtin_fmaf(s - zz, {hexf(LOG2E)}, {hexf(SHIFT)});  // 1.5*2^23 + n
  const float n = k - {hexf(SHIFT)};
  float r = s - __builtin_fmaf(n, {hexf(LN2_HI)}, zz);
  r = __builtin_fmaf(n, {hexf(-LN2_LO)}, r - zl);
{horner_c("r", "q", [1.0] + Q)}
  const float e = q * __builtin_bit_cast(float, (__builtin_bit_cast(uint32_t, k) + 127u) << 23);
  const float hi = __builtin_copysignf(1.0f - e, x);
  return ax < {hexf(A)} ? lo : hi;
}}"""
    print(code)

    # ---- predicted errors on a dense check grid: exact arithmetic, and a float32 simulation of
    # the code above (fma: a*b is exact in double for float32 a, b; then one rounding to float32)
    def fma32(a, b, c):
        return f32(a * b + c)

    def horner32(cs, v):
        r = cs[-1]
        for c in reversed(cs[:-1]):
            r = fma32(r, v, c)
        return r

    n = 20000
    worst_small = [0.0, 0.0]  # approx ulp, simulated ulp
    for i in range(1, n):
        x = f32(A * i / n)
        if x >= A:
            continue
        ref = float(mp.erf(mp.mpf(x)))
        t = x * x
        exact = x + x * sum(c * t ** k for k, c in enumerate(P))
        sim = fma32(x, horner32(P, f32(x * x)), x)
        u = ulp32(ref)
        worst_small = [max(worst_small[0], abs(exact - ref) / u), max(worst_small[1], abs(sim - ref) / u)]
    worst_tail = [0.0, 0.0, 0.0, 0.0]  # approx abs, simulated abs, approx ulp, simulated ulp
    for i in range(n + 1):
        x = f32(A + (B - A) * i / n)
        X = mp.mpf(x)
        ref = float(mp.erf(X))
        u = ulp32(ref)
        approx = float(1 - mp.exp(-X * X + sum(c * X ** k for k, c in enumerate(S))))
        s = horner32(S, x)
        zz = f32(x * x)
        zl = fma32(x, x, -zz)
        k = fma32(f32(s - zz), LOG2E, SHIFT)
        nn = f32(k - SHIFT)
        r = f32(s - fma32(nn, LN2_HI, zz))
        r = fma32(nn, -LN2_LO, f32(r - zl))
        q = horner32([1.0] + Q, r)
        sim = f32(1.0 - f32(q * 2.0 ** nn))
        ea, es = abs(approx - ref), abs(sim - ref)
        worst_tail = [max(worst_tail[0], ea), max(worst_tail[1], es),
                      max(worst_tail[2], ea / u), max(worst_tail[3], es / u)]
    print(f"// predicted |x|<A : approx err {worst_small[0]:.3f} ulp, float32-simulated {worst_small[1]:.3f} ulp")
    print(f"// predicted tail  : approx err {worst_tail[0]:.3g} abs ({worst_tail[2]:.3f} ulp),"
          f" float32-simulated {worst_tail[1]:.3g} abs ({worst_tail[3]:.3f} ulp)")

if __name__ == "__main__":
    main()
