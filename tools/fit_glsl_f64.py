#!/usr/bin/env python3
"""Constants and polynomial coefficients of the Vulkan backend's f64 math functions.

src/backend/common/glsl_f64_math.h (kGlslF64Math) implements e_expd, e_logd, e_sind, e_cosd,
e_tanhd, e_erfd and e_powd in GLSL, which has no double-precision transcendental functions.
This script computes every constant those functions use and prints them as GLSL `LF`
literals (17 significant digits: glslang converts them exactly, which was checked by compiling
a few hundred random literals and reading the SPIR-V constants back), in the order the GLSL
source uses them.

What it computes
----------------
Splittings of constants (exact in double, checked by the asserts below):
  ln2      = LN2_HI + LN2_LO + O(2^-86), LN2_HI with 32 significant bits (n*LN2_HI exact for
             |n| < 2^21).
  pi/2     = PIO2_1 + PIO2_2 + PIO2_3 + PIO2_4 + O(2^-154): three 33-bit pieces (k*PIO2_i exact for
             |k| < 2^20) and a 53-bit one: the Cody-Waite reduction of sin/cos.
  pi/2     = PIO2_HI + PIO2_LO (53 + 53 bits): the Payne-Hanek reduction's last product.
  2/pi     as 32-bit words (bits 1..1280 of its binary expansion), for the Payne-Hanek
             reduction of |x| >= 2^20*pi/2 (the table starts with two zero words so that windows
             starting at bit positions down to -63 read zeros).
  log(j/32) for j = 23..45 as double-double (LOGC_HI, LOGC_LO): the anchors of e_logd.

Polynomials, each a minimax fit (discrete Remez exchange on a dense Chebyshev grid, mpmath at
50 digits); the coefficients are then rounded to double one at a time, lowest degree first,
refitting the remaining ones after each rounding so they absorb the rounding:
  EXP_P   exp(r) - 1 - r - r^2/2 = r^3*P(r),   |r| <= 0.3466 (ln2/2 plus margin), degree 9.
  SIN_S   sin(r) = r + r^3*S(r^2),             |r| <= pi/4 + 2^-20, degree 6 in r^2.
  COS_C   cos(r) = 1 - r^2/2 + r^4*C(r^2),     same range, degree 6 in r^2.
Every error is weighted as the relative error it causes in the function's result (for P,
|r^3 dP / exp(r)|; for S, |r^3 dS / sin(r)|; and so on).
  ERF_E   erf(x) = x + x*E(x^2),               |x| <= 0.75, degree 10 in x^2 (weight
          |x/erf(x)|).
  ERF_Q   erf(1 + t) = erf(1) + t*Q(t),         |t| <= 0.25, degree 14, erf(1) as a
          double-double (ERF_ONE_HI + ERF_ONE_LO); weight |t/erf(1 + t)|. (x + x*E(x^2) up to 1
          measured 0.3 ulp worse near 1: E's terms cancel there.)
  ERFC_G  erfc(x) = exp(-x^2)*G_i(x - c_i), degree 12, on the intervals [1.25, 1.75],
          [1.75, 2.5], [2.5, 3.75], [3.75, 6] (c_i the midpoints), weight exp(-x^2)/erf(x) (the
          relative error of erf(x) = 1 - erfc(x)); erf rounds to 1 above x = 5.93 (erfc < 2^-54),
          where e_erfd returns +-1.
log needs no fit: log(m) = log(c) + 2*atanh(s), s = (m - c)/(m + c), |s| <= 0.0112, and the
atanh series 2s(1 + s^2/3 + s^4/5 + ... + s^10/11) is truncated below 2^-80 relative.

Printed for each polynomial: the double coefficients (constant term first) and the max
weighted error of the double-coefficient polynomial in exact arithmetic on a dense grid (the
rounding of the GLSL evaluation comes on top; the errors measured for the GLSL functions are
listed at the top of glsl_f64_math.h).

How to run
----------
  /work/venv-torch2/bin/python tools/fit_glsl_f64.py     # any Python 3 with mpmath
Takes several minutes (mostly the Remez refits after each coefficient rounding).
"""

import struct

import mpmath as mp

mp.mp.dps = 50


def d(v):
    """mpf -> nearest double."""
    return float(mp.mpf(v))


def lit(v):
    """A GLSL double literal that converts to exactly v."""
    s = repr(float(v))
    if "e" not in s and "." not in s and "inf" not in s:
        s += ".0"
    return s + "LF"


def truncate_bits(v, bits):
    """v rounded toward zero to `bits` significant bits, as a double."""
    v = mp.mpf(v)
    e = int(mp.floor(mp.log(abs(v), 2)))
    scale = mp.mpf(2) ** (bits - 1 - e)
    return d(mp.floor(v * scale) / scale)


def nbits(x):
    """Significant bits of a double."""
    m, e = mp.frexp(mp.mpf(x))
    m = int(m * 2**53)
    while m and m % 2 == 0:
        m //= 2
    return m.bit_length()


# ---------------------------------------------------------------------------------------------
# Remez exchange on a discrete grid.

def cheb_grid(a, b, n):
    return [mp.mpf(a + b) / 2 + mp.mpf(b - a) / 2 * mp.cos(mp.pi * (2 * i + 1) / (2 * n)) for i in range(n)][::-1]


def remez(f, w, a, b, powers, fixed=None, grid=3000, iters=30):
    """Minimax p(t) = sum c_k t^k (k in powers) of f on [a, b] with weight w: minimizes
    max |w(t) (f(t) - p(t) - fixed(t))|. Returns (coefficients by power, max weighted error)."""
    fixed = fixed or (lambda t: 0)
    ts = cheb_grid(a, b, grid)  # an even count: never t = 0
    fv = [f(t) - fixed(t) for t in ts]
    wv = [w(t) for t in ts]
    # Without a constant term the basis is no Chebyshev system where the interval holds 0:
    # fit (f - fixed)/t^m with the powers lowered by m and the weight times |t|^m instead.
    m0 = min(powers)
    if m0 > 0:
        fv = [v / t**m0 for v, t in zip(fv, ts)]
        wv = [v * abs(t) ** m0 for v, t in zip(wv, ts)]
        # Where that weight is negligible the free coefficients change nothing (the error there
        # is the fixed part's); leaving those points out keeps the system regular.
        keep = [i for i in range(len(ts)) if wv[i] > max(wv) * mp.mpf(10) ** -25]
        ts, fv, wv = [ts[i] for i in keep], [fv[i] for i in keep], [wv[i] for i in keep]
        coef, m = remez_grid(ts, fv, wv, [k - m0 for k in powers], iters)
        return {k: coef[k - m0] for k in powers}, m
    return remez_grid(ts, fv, wv, powers, iters)


def remez_grid(ts, fv, wv, powers, iters):
    grid = len(ts)
    n = len(powers)
    idx = [int(round((grid - 1) * (1 - mp.cos(mp.pi * i / (n)) ) / 2)) for i in range(n + 1)]
    idx = sorted(set(idx))
    while len(idx) < n + 1:
        idx.append(idx[-1] + 1)
    coef = None
    for _ in range(iters):
        A = mp.matrix(n + 1, n + 1)
        rhs = mp.matrix(n + 1, 1)
        for r, i in enumerate(idx):
            for c, k in enumerate(powers):
                A[r, c] = ts[i] ** k
            A[r, n] = (-1) ** r / wv[i]
            rhs[r] = fv[i]
        sol = mp.lu_solve(A, rhs)
        coef = [sol[c] for c in range(n)]
        E = abs(sol[n])
        err = [wv[i] * (fv[i] - sum(coef[c] * ts[i] ** k for c, k in enumerate(powers))) for i in range(grid)]
        # Alternating extrema: the largest |err| of each run of one sign.
        runs = []
        for i, e in enumerate(err):
            s = e >= 0
            if runs and runs[-1][0] == s:
                if abs(e) > abs(err[runs[-1][1]]):
                    runs[-1][1] = i
            else:
                runs.append([s, i])
        cand = [r[1] for r in runs]
        while len(cand) > n + 1:
            # Drop the smallest extremum: alone at an end, else with its smaller neighbour (so
            # the signs still alternate); with one too many, drop the smaller end instead.
            a = [abs(err[i]) for i in cand]
            j = a.index(min(a))
            if j in (0, len(cand) - 1) or len(cand) == n + 2:
                cand.pop(0 if a[0] < a[-1] else -1)
            else:
                k = j - 1 if a[j - 1] < a[j + 1] else j + 1
                for i in sorted((j, k), reverse=True):
                    cand.pop(i)
        if len(cand) < n + 1:
            break
        m = max(abs(e) for e in err)
        idx = cand
        if m <= E * (1 + mp.mpf(10) ** -6):
            break
    m = max(abs(wv[i] * (fv[i] - sum(coef[c] * ts[i] ** k for c, k in enumerate(powers)))) for i in range(grid))
    return {k: coef[c] for c, k in enumerate(powers)}, m


def fit_rounded(f, w, a, b, powers, grid=1500):
    """Remez, then round coefficients to double lowest power first, refitting the rest."""
    fixed_c = {}
    for k in powers:
        free = [p for p in powers if p not in fixed_c]
        fx = lambda t, fc=dict(fixed_c): sum(mp.mpf(c) * t ** p for p, c in fc.items())
        coef, _ = remez(f, w, a, b, free, fixed=fx, grid=grid)
        fixed_c[k] = d(coef[k])
    # Error of the double-coefficient polynomial, exact arithmetic, on a denser grid.
    ts = cheb_grid(a, b, 4 * grid)
    err = max(abs(w(t) * (f(t) - sum(mp.mpf(c) * t ** p for p, c in fixed_c.items()))) for t in ts)
    return [fixed_c[k] for k in powers], err


def show(name, coefs, err):
    print(f"// {name}: max weighted error {mp.nstr(err, 3)} (2^{mp.nstr(mp.log(err, 2), 4)})")
    print("  " + ", ".join(lit(c) for c in coefs))


def main():
    # --- splittings -----------------------------------------------------------------------
    ln2 = mp.log(2)
    LN2_HI = truncate_bits(ln2, 32)
    LN2_LO = d(ln2 - LN2_HI)
    assert nbits(LN2_HI) <= 32
    print("// ln2 = LN2_HI + LN2_LO, residual 2^%s" % mp.nstr(mp.log(abs(ln2 - LN2_HI - LN2_LO), 2), 4))
    print("LN2_HI", lit(LN2_HI), "LN2_LO", lit(LN2_LO), "INV_LN2", lit(d(1 / ln2)))

    pio2 = mp.pi / 2
    P1 = truncate_bits(pio2, 33)
    P2 = truncate_bits(pio2 - P1, 33)
    P3 = truncate_bits(pio2 - P1 - P2, 33)
    P4 = d(pio2 - P1 - P2 - P3)
    for p in (P1, P2, P3):
        assert nbits(p) <= 33
    print("// pi/2 = PIO2_1 + PIO2_2 + PIO2_3 + PIO2_4, residual 2^%s" %
          mp.nstr(mp.log(abs(pio2 - P1 - P2 - P3 - P4), 2), 4))
    print("PIO2_1..4", lit(P1), lit(P2), lit(P3), lit(P4))
    PH = d(pio2)
    PL = d(pio2 - PH)
    print("PIO2_HI", lit(PH), "PIO2_LO", lit(PL), "TWO_OVER_PI", lit(d(2 / mp.pi)))

    # 2/pi words: bits 1..32*NW after the binary point.
    NW = 40
    mp.mp.dps = 500
    v = 2 / mp.pi
    words = []
    for _ in range(NW):
        v *= 2**32
        wd = int(mp.floor(v))
        words.append(wd)
        v -= wd
    mp.mp.dps = 50
    print("// 2/pi, 32 bits a word, after two zero words")
    print("  0x00000000u, 0x00000000u, " + ", ".join("0x%08xu" % wd for wd in words))

    # log anchors
    his, los = [], []
    for j in range(23, 46):
        L = mp.log(mp.mpf(j) / 32)
        hi = d(L)
        lo = d(L - hi)
        his.append(hi)
        los.append(lo)
    print("// log(j/32), j = 23..45, high parts")
    print("  " + ", ".join(lit(h) for h in his))
    print("// low parts")
    print("  " + ", ".join(lit(l) for l in los))

    # --- polynomials ----------------------------------------------------------------------
    def g_exp(r):
        return (mp.exp(r) - 1 - r - r * r / 2) / r**3
    c, e = fit_rounded(g_exp, lambda r: abs(r) ** 3 / mp.exp(r), -0.3466, 0.3466, list(range(0, 10)))
    show("EXP_P (p0..p9 of r^3*P(r))", c, e)

    zmax = (mp.pi / 4 + mp.mpf(2) ** -20) ** 2
    def g_sin(z):
        s = mp.sqrt(z)
        return (mp.sin(s) - s) / (z * s)
    c, e = fit_rounded(g_sin, lambda z: z * mp.sqrt(z) / mp.sin(mp.sqrt(z)), mp.mpf(10) ** -30, zmax,
                       list(range(0, 7)))
    show("SIN_S (S0..S6)", c, e)

    def g_cos(z):
        return (mp.cos(mp.sqrt(z)) - 1 + z / 2) / (z * z)
    c, e = fit_rounded(g_cos, lambda z: z * z / mp.cos(mp.sqrt(z)), mp.mpf(10) ** -30, zmax, list(range(0, 7)))
    show("COS_C (C0..C6)", c, e)

    def g_erf(z):
        s = mp.sqrt(z)
        return mp.erf(s) / s - 1
    c, e = fit_rounded(g_erf, lambda z: mp.sqrt(z) / mp.erf(mp.sqrt(z)), mp.mpf(10) ** -30, mp.mpf(0.75) ** 2,
                       list(range(0, 11)))
    show("ERF_E (E0..E10), |x| < 0.75", c, e)

    A = mp.erf(1)
    print("ERF_ONE_HI", lit(d(A)), "ERF_ONE_LO", lit(d(A - d(A))))
    c, e = fit_rounded(lambda t: (mp.erf(1 + t) - A) / t, lambda t: abs(t) / mp.erf(1 + t), -0.25, 0.25,
                       list(range(0, 15)))
    show("ERF_Q (Q0..Q14), t = |x| - 1 in [-0.25, 0.25]", c, e)

    edges = [1.25, 1.75, 2.5, 3.75, 6.0]
    degs = [12, 12, 12, 12]
    for (a, b), deg in zip(zip(edges, edges[1:]), degs):
        mid = (a + b) / 2
        G = lambda t, mid=mid: mp.erfc(t + mid) * mp.exp((t + mid) ** 2)
        W = lambda t, mid=mid: mp.exp(-(t + mid) ** 2) / mp.erf(t + mid)
        c, e = fit_rounded(G, W, a - mid, b - mid, list(range(0, deg + 1)))
        show(f"ERFC_G on [{a}, {b}], t = x - {mid}", c, e)


if __name__ == "__main__":
    main()
