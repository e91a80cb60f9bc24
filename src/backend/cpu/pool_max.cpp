// Max pooling for the CPU backend in the operand's own precision: forward values, the index of
// each window's first maximum, and the gradient (abi.h EMBER_LIB_MAX_POOL2D, _INDICES, _BACKWARD).
// The forward values of any window come from two separable passes (rows, then columns of rows).
// f32 and f64 run directly on the buffers (strided inputs are packed once); f16 / bf16 go through
// f32, except the 2x2 stride-2 forward and gradient, which pick values and so run on the bits. The gradient finds each window's maximum again and adds dy there, so training needs no
// index tensor and no scatter. OpenMP over (n, c) planes: each thread owns its output planes, so
// overlapping windows need no atomics and results do not depend on the thread count.
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "backend/common/host_memory.h"
#include "backend/cpu/library.h"
#include "backend/cpu/parallel_for.h"
#include "backend/cpu/post_ops.h"
#include "backend/cpu/target_clones.h"
#include "ember/dtype.h"

namespace ember::cpu {

using ember::host::set_status;

namespace {

struct Geom {
  int64_t P, H, W, OH, OW;  // P = N * C planes
};

// The loop bodies that the per-plane functions below compile once per instruction set
// (EMBER_CLONES, target_clones.h): always inlined, since a body GCC calls out of line is compiled
// for the baseline only (the 3x3 stride-2 forward ran SSE2 code: 7.1 ms for [8, 64, 112, 112]).

// Used only in OpenMP clauses (unused where the compiler generates no OpenMP code, e.g. clang 14).
[[maybe_unused]] bool worth_threads(int64_t work) { return work >= (int64_t(1) << 15) && !omp_in_parallel(); }

// The rule of every path here and of the reference: a window's maximum is its first maximum in
// row-major order, and a NaN is a maximum (the window's first NaN wins). As a select the compiler
// vectorizes: v replaces the running maximum m when it is greater, or when it is the first NaN.
template <class T>
EMBER_BODY T take_max(T m, T v) {
  return ((v > m) | ((v != v) & (m == m))) ? v : m;
}

// Whether v replaces m under take_max's rule.
template <class T>
EMBER_BODY bool replaces(T m, T v) {
  return (v > m) | ((v != v) & (m == m));
}

// The second pass of the 2x2 paths combines rows of pairs OW long: 7 or 14 in a small CNN, where
// GCC's vector loop never ran and the pass took most of the forward's time (and GCC's vector
// extensions in target clones came out scalar too). On AVX-512, f32 rows take masked 16-lane
// vectors instead; plane_max_2x2_body and route_rows_of_pairs below hold the plain loops.
#if defined(__x86_64__) && defined(__GNUC__)
#define EMBER_POOL_AVX512 1
bool has_avx512() {
  static const bool has = __builtin_cpu_supports("avx512f") != 0;
  return has;
}
__attribute__((target("avx512f"))) inline __mmask16 replaces_avx512(__m512 m, __m512 v) {
  return _mm512_cmp_ps_mask(v, m, _CMP_GT_OQ) |
         (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) & _mm512_cmp_ps_mask(m, m, _CMP_ORD_Q));
}
// y row oh = the first maximum of h rows 2 oh and 2 oh + 1.
__attribute__((target("avx512f"))) void rows_of_pairs_max_avx512(const float* h, const Geom& g, float* y) {
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    const float* top = h + 2 * oh * g.OW;
    for (int64_t ow = 0; ow < g.OW; ow += 16) {
      const __mmask16 in = g.OW - ow >= 16 ? __mmask16(0xffff) : __mmask16((1u << (g.OW - ow)) - 1);
      const __m512 m = _mm512_maskz_loadu_ps(in, top + ow), v = _mm512_maskz_loadu_ps(in, top + g.OW + ow);
      _mm512_mask_storeu_ps(y + oh * g.OW + ow, in, _mm512_mask_blend_ps(replaces_avx512(m, v), m, v));
    }
  }
}
// dy + 0 to the winning row of each pair (rows 2 oh, 2 oh + 1 of routed), +0 to the other.
__attribute__((target("avx512f"))) void route_rows_of_pairs_avx512(const float* h, const float* dy, const Geom& g,
                                                                    uint32_t* routed) {
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    const float* top = h + 2 * oh * g.OW;
    float* rt = reinterpret_cast<float*>(routed + 2 * oh * g.OW);
    for (int64_t ow = 0; ow < g.OW; ow += 16) {
      const __mmask16 in = g.OW - ow >= 16 ? __mmask16(0xffff) : __mmask16((1u << (g.OW - ow)) - 1);
      const __mmask16 bottom =
          replaces_avx512(_mm512_maskz_loadu_ps(in, top + ow), _mm512_maskz_loadu_ps(in, top + g.OW + ow));
      // dy + 0: the reference adds dy to a zero, so a -0 gradient arrives as +0 (NaN stays NaN).
      const __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(in, dy + oh * g.OW + ow), _mm512_setzero_ps());
      _mm512_mask_storeu_ps(rt + ow, in, _mm512_maskz_mov_ps(__mmask16(~bottom), v));
      _mm512_mask_storeu_ps(rt + g.OW + ow, in, _mm512_maskz_mov_ps(bottom, v));
    }
  }
}
#endif

// One plane: every column pair's first maximum into h (H x OW), then each output row's maximum
// of its two rows' pairs.
template <class T>
EMBER_BODY void plane_max_2x2_body(const T* xp, const Geom& g, T* h, T* yp) {
  const int64_t n = g.H * g.OW;
  for (int64_t i = 0; i < n; ++i) h[i] = take_max(xp[2 * i], xp[2 * i + 1]);
#if EMBER_POOL_AVX512
  if constexpr (std::is_same_v<T, float>)
    if (has_avx512()) return rows_of_pairs_max_avx512(h, g, yp);
#endif
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    const T* top = h + 2 * oh * g.OW;
    for (int64_t ow = 0; ow < g.OW; ++ow) yp[oh * g.OW + ow] = take_max(top[ow], top[g.OW + ow]);
  }
}

// routed rows 2 oh and 2 oh + 1 = dy row oh + 0 where that row's pair won (h rows 2 oh and
// 2 oh + 1 of pair maxima), +0 in the other. The reference adds dy to a zero, so a -0 gradient
// arrives as +0 there; so it does here.
template <class T, class U>
EMBER_BODY void route_rows_of_pairs(const T* h, const T* gp, const Geom& g, U* routed) {
#if EMBER_POOL_AVX512
  if constexpr (std::is_same_v<T, float>)
    if (has_avx512()) return route_rows_of_pairs_avx512(h, gp, g, routed);
#endif
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    const T* top = h + 2 * oh * g.OW;
    U* rt = routed + 2 * oh * g.OW;
    for (int64_t ow = 0; ow < g.OW; ++ow) {
      const U bottom = U(0) - U(replaces(top[ow], top[g.OW + ow]));
      const U v = std::bit_cast<U>(T(gp[oh * g.OW + ow] + T(0)));  // -0 arrives as +0, as in the reference
      rt[ow] = v & ~bottom;
      rt[g.OW + ow] = v & bottom;
    }
  }
}

// The gradient on one plane: the same passes keep which entry of each column pair won (as a bit
// mask) and route dy to the winning row's pair, then to the winning entry; +0 everywhere else.
template <class T, class U>
EMBER_BODY void plane_max_backward_2x2_body(const T* xp, const T* gp, const Geom& g, T* h, U* second, U* routed, T* out) {
  const int64_t n = g.H * g.OW;
  for (int64_t i = 0; i < n; ++i) {
    const T a = xp[2 * i], b = xp[2 * i + 1];
    const bool r = replaces(a, b);
    h[i] = r ? b : a;
    second[i] = U(0) - U(r);
  }
  route_rows_of_pairs(h, gp, g, routed);
  for (int64_t i = 0; i < n; ++i) {
    out[2 * i] = std::bit_cast<T>(routed[i] & ~second[i]);
    out[2 * i + 1] = std::bit_cast<T>(routed[i] & second[i]);
  }
}

// The per-plane loops compiled for AVX-512, AVX2 + FMA and the baseline, picked at load time
// (GCC's target_clones, as gemv.cpp; the library is built for the baseline). The template bodies
// inline into each clone. On [64, 32, 28, 28] f32 (2026-12-06): the separable passes took the
// gradient from 3.8 to 0.73 ms at 1 thread (the forward stayed at 0.5 ms, the speed of reading
// its input); the AVX-512 clones then took 2 threads from 0.42 to 0.23 ms forward and from 0.62
// to 0.34 ms for the gradient.
EMBER_CLONES void plane_max_2x2(const float* xp, const Geom& g, float* h, float* yp) {
  plane_max_2x2_body(xp, g, h, yp);
}
EMBER_CLONES void plane_max_2x2(const double* xp, const Geom& g, double* h, double* yp) {
  plane_max_2x2_body(xp, g, h, yp);
}
EMBER_CLONES void plane_max_backward_2x2(const float* xp, const float* gp, const Geom& g, float* h, uint32_t* second,
                                         uint32_t* routed, float* out) {
  plane_max_backward_2x2_body(xp, gp, g, h, second, routed, out);
}
EMBER_CLONES void plane_max_backward_2x2(const double* xp, const double* gp, const Geom& g, double* h, uint64_t* second,
                                         uint64_t* routed, double* out) {
  plane_max_backward_2x2_body(xp, gp, g, h, second, routed, out);
}

// 2x2 windows at stride 2 on a plane of even height and width, in two separable passes whose
// loops are long and contiguous, so the compiler vectorizes them (a loop over a row's windows is
// only OW long, 7 or 14 here, and its interleaved loads kept it scalar): every column pair's
// first maximum over the whole plane, then each output the first maximum of its two rows' pairs.
// Top row first and ties keeping the earlier entry, so the result is take_max's row-major rule
// (the window's first maximum, its first NaN).
template <class T>
void max_2x2_even(const T* x, const Geom& g, T* y) {
  const int64_t n = g.H * g.OW;
  parallel_for_with(worth_threads(g.P * n * 2), g.P, [&] { return std::vector<T>(size_t(n)); },
                    [&](std::vector<T>& pairs, int64_t p) {
    plane_max_2x2(x + p * g.H * g.W, g, pairs.data(), y + p * g.OH * g.OW);
  });
}

// The gradient of max_2x2_even (plane_max_backward_2x2_body). `done(p, plane)` runs on each plane
// of dx right after it is written (PlaneEpilogue below, or nothing), as in the other paths.
template <class T, class Done>
void max_backward_2x2_even(const T* dy, const T* x, const Geom& g, T* dx, const Done& done) {
  using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  const int64_t n = g.H * g.OW;
  struct Scratch {
    std::vector<T> pair_max;  // each column pair's first maximum
    std::vector<U> second;    // all ones where the pair's second entry won
    std::vector<U> routed;    // dy's bits routed to each pair (0 for the losing row)
  };
  parallel_for_with(worth_threads(g.P * n * 2), g.P,
                    [&] {
                      return Scratch{std::vector<T>(size_t(n)), std::vector<U>(size_t(n)), std::vector<U>(size_t(n))};
                    },
                    [&](Scratch& s, int64_t p) {
    plane_max_backward_2x2(x + p * g.H * g.W, dy + p * g.OH * g.OW, g, s.pair_max.data(), s.second.data(),
                               s.routed.data(), dx + p * g.H * g.W);
    done(p, dx + p * g.H * g.W);
  });
}

// 2x2 windows at stride 2 without padding (the common case): two rows at a time.
template <class T>
void max_2x2(const T* x, const Geom& g, T* y) {
  if (g.H == 2 * g.OH && g.W == 2 * g.OW) {
    max_2x2_even(x, g, y);
    return;
  }
  parallel_for(worth_threads(g.P * g.OH * g.OW * 4), g.P, [&](int64_t p) {
    const T* xp = x + p * g.H * g.W;
    T* yp = y + p * g.OH * g.OW;
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      const T* r0 = xp + 2 * oh * g.W;
      const T* r1 = r0 + g.W;
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        const T a = r0[2 * ow], b = r0[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1];
        T m = a;
        // take_max's rule in row-major order; NaN-free windows reduce to plain max.
        if (b > m || (std::isnan(b) && !std::isnan(m))) m = b;
        if (c > m || (std::isnan(c) && !std::isnan(m))) m = c;
        if (d > m || (std::isnan(d) && !std::isnan(m))) m = d;
        yp[oh * g.OW + ow] = m;
      }
    }
  });
}

// One input row's maximum over the columns of every window: out[ow] for ow in [0, OW). The loop
// over kernel columns is outside, so each column's scan is a strided pass the compiler vectorizes
// (kStride is the column stride when it is known at compile time, 0 otherwise); each window still
// sees its columns left to right.
template <class T, int kStride>
EMBER_BODY void row_max(const T* row, const Geom& g, const ember_pool_attrs& a, T* out) {
  const int64_t s = kStride > 0 ? kStride : a.stride[1], pad = a.pad_begin[1];
  std::fill(out, out + g.OW, T(-INFINITY));
  for (int64_t kw = 0; kw < a.kernel[1]; ++kw) {
    // Columns ow whose input column ow * s - pad + kw lies in [0, W).
    const int64_t shift = kw - pad;
    const int64_t lo = shift >= 0 ? 0 : (-shift + s - 1) / s;
    const int64_t hi = std::min(g.OW, g.W - 1 - shift < 0 ? 0 : (g.W - 1 - shift) / s + 1);
    for (int64_t ow = lo; ow < hi; ++ow) out[ow] = take_max(out[ow], row[ow * s + shift]);
  }
}

// One plane of max_forward_separable: rows (H x OW) is the per-thread buffer of row maxima.
template <class T>
EMBER_BODY void plane_max_separable_body(const T* xp, const Geom& g, const ember_pool_attrs& a, T* rows, T* yp) {
  const int64_t sh = a.stride[0], ph = a.pad_begin[0];
  for (int64_t ih = 0; ih < g.H; ++ih) {
    T* out = rows + ih * g.OW;
    switch (a.stride[1]) {
      case 1: row_max<T, 1>(xp + ih * g.W, g, a, out); break;
      case 2: row_max<T, 2>(xp + ih * g.W, g, a, out); break;
      default: row_max<T, 0>(xp + ih * g.W, g, a, out); break;
    }
  }
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    T* yr = yp + oh * g.OW;
    std::fill(yr, yr + g.OW, T(-INFINITY));
    for (int64_t kh = 0; kh < a.kernel[0]; ++kh) {
      const int64_t ih = oh * sh - ph + kh;
      if (ih < 0 || ih >= g.H) continue;
      const T* hr = rows + ih * g.OW;
      for (int64_t ow = 0; ow < g.OW; ++ow) yr[ow] = take_max(yr[ow], hr[ow]);
    }
  }
}
EMBER_CLONES void plane_max_separable(const float* xp, const Geom& g, const ember_pool_attrs& a, float* rows,
                                      float* yp) {
  plane_max_separable_body(xp, g, a, rows, yp);
}
EMBER_CLONES void plane_max_separable(const double* xp, const Geom& g, const ember_pool_attrs& a, double* rows,
                                      double* yp) {
  plane_max_separable_body(xp, g, a, rows, yp);
}

// Any window (kernel, stride, padding) in two separable passes per plane: every input row's
// maximum over each window's columns (row_max, into a per-thread buffer of H x OW), then each
// output row's maximum over its window's rows. The rows are taken top to bottom and each row's
// first maximum wins, so the result is the window's first maximum in row-major order (which only
// shows for -0 against +0), and its first NaN if it has one. The input is read
// once instead of once per window that covers it (9/4 times for 3x3 at stride 2).
template <class T>
void max_forward_separable(const T* x, const Geom& g, const ember_pool_attrs& a, T* y) {
  parallel_for_with(worth_threads(g.P * g.OH * g.OW * a.kernel[0] * a.kernel[1]), g.P,
                    [&] { return std::vector<T>(size_t(g.H * g.OW)); }, [&](std::vector<T>& rows, int64_t p) {
    plane_max_separable(x + p * g.H * g.W, g, a, rows.data(), y + p * g.OH * g.OW);
  });
}

template <class T>
void max_forward(const T* x, const Geom& g, const ember_pool_attrs& a, T* y) {
  if (a.kernel[0] == 2 && a.kernel[1] == 2 && a.stride[0] == 2 && a.stride[1] == 2 && a.pad_begin[0] == 0 &&
      a.pad_begin[1] == 0 && 2 * g.OH <= g.H && 2 * g.OW <= g.W) {
    max_2x2(x, g, y);
    return;
  }
  max_forward_separable(x, g, a, y);
}

// The position h * W + w of each window's maximum (take_max's rule), by the separable passes of
// max_forward_separable carrying positions: per input row, each window's best value and column;
// then per output row, the best of its window's rows. A window that covers no input element keeps
// -1. fn(oh, args) receives each output row's OW positions, rows in order. Positions are of type
// I: int32_t where a plane has fewer than 2^31 elements (so that the passes, 32-bit lanes like the
// values, vectorize), int64_t otherwise.
template <class T, class I>
class WindowArgs {
 public:
  WindowArgs(const Geom& g, const ember_pool_attrs& a)
      : g_(g), a_(a), val_(size_t(g.H * g.OW)), col_(size_t(g.H * g.OW)), best_(size_t(g.OW)), arg_(size_t(g.OW)) {}

  // Whether positions in a plane of g fit I.
  static bool fits(const Geom& g) { return g.H * g.W <= int64_t(std::numeric_limits<I>::max()); }

  template <class Fn>
  __attribute__((always_inline)) void plane(const T* xp, Fn&& fn) {
    for (int64_t ih = 0; ih < g_.H; ++ih) {
      switch (a_.stride[1]) {
        case 1: row<1>(xp + ih * g_.W, ih); break;
        case 2: row<2>(xp + ih * g_.W, ih); break;
        default: row<0>(xp + ih * g_.W, ih); break;
      }
    }
    T* bv = best_.data();
    I* ba = arg_.data();
    for (int64_t oh = 0; oh < g_.OH; ++oh) {
      std::fill(bv, bv + g_.OW, T(-INFINITY));
      std::fill(ba, ba + g_.OW, I(-1));
      for (int64_t kh = 0; kh < a_.kernel[0]; ++kh) {
        const int64_t ih = oh * a_.stride[0] - a_.pad_begin[0] + kh;
        if (ih < 0 || ih >= g_.H) continue;
        const T* rv = val_.data() + ih * g_.OW;
        const I* rc = col_.data() + ih * g_.OW;
        const I row_start = I(ih * g_.W);
        for (int64_t ow = 0; ow < g_.OW; ++ow) {
          const bool take = (rc[ow] >= 0) & ((ba[ow] < 0) | (rv[ow] > bv[ow]) | ((rv[ow] != rv[ow]) & (bv[ow] == bv[ow])));
          bv[ow] = take ? rv[ow] : bv[ow];
          ba[ow] = take ? row_start + rc[ow] : ba[ow];
        }
      }
      fn(oh, static_cast<const I*>(ba));
    }
  }

 private:
  template <int kStride>
  __attribute__((always_inline)) void row(const T* r, int64_t ih) {
    const int64_t s = kStride > 0 ? kStride : a_.stride[1], pad = a_.pad_begin[1];
    T* v = val_.data() + ih * g_.OW;
    I* c = col_.data() + ih * g_.OW;
    std::fill(v, v + g_.OW, T(-INFINITY));
    std::fill(c, c + g_.OW, I(-1));
    for (int64_t kw = 0; kw < a_.kernel[1]; ++kw) {
      const int64_t shift = kw - pad;
      const int64_t lo = shift >= 0 ? 0 : (-shift + s - 1) / s;
      const int64_t hi = std::min(g_.OW, g_.W - 1 - shift < 0 ? 0 : (g_.W - 1 - shift) / s + 1);
      for (int64_t ow = lo; ow < hi; ++ow) {
        const T x = r[ow * s + shift];
        // The first column of a window is taken whatever it is (-inf included).
        const bool take = (c[ow] < 0) | (x > v[ow]) | ((x != x) & (v[ow] == v[ow]));
        v[ow] = take ? x : v[ow];
        c[ow] = take ? I(ow * s + shift) : c[ow];
      }
    }
  }

  Geom g_;
  ember_pool_attrs a_;
  std::vector<T> val_;
  std::vector<I> col_;
  std::vector<T> best_;
  std::vector<I> arg_;
};

template <class T, class I>
void max_indices_as(const T* x, const Geom& g, const ember_pool_attrs& a, int64_t* idx) {
  parallel_for_with(worth_threads(g.P * g.OH * g.OW * a.kernel[0] * a.kernel[1]), g.P,
                    [&] { return WindowArgs<T, I>(g, a); }, [&](WindowArgs<T, I>& args, int64_t p) {
    args.plane(x + p * g.H * g.W, [&](int64_t oh, const I* arg) {
      int64_t* out = idx + (p * g.OH + oh) * g.OW;
      for (int64_t ow = 0; ow < g.OW; ++ow) out[ow] = arg[ow] < 0 ? 0 : int64_t(arg[ow]);
    });
  });
}

template <class T>
void max_indices(const T* x, const Geom& g, const ember_pool_attrs& a, int64_t* idx) {
  if (WindowArgs<T, int32_t>::fits(g)) max_indices_as<T, int32_t>(x, g, a, idx);
  else max_indices_as<T, int64_t>(x, g, a, idx);
}

// take_max's rule for the 4 entries of a 2x2 window, as 0..3 (row-major). Without a
// NaN: the first maximum of each pair, then of the two pairs (ties go to the earlier entry), as
// selects rather than branches (the argmax of real data is unpredictable: branches cost ~4x).
template <class T>
inline int arg4(T a, T b, T c, T d) {
  if (!((a != a) | (b != b) | (c != c) | (d != d))) {
    const int k01 = int(b > a), k23 = 2 + int(d > c);
    const int hi = int(std::max(c, d) > std::max(a, b));  // std::max(p, q) is q only if p < q
    return hi * k23 + (1 - hi) * k01;
  }
  int k = 0;
  T m = a;
  if (b > m || (std::isnan(b) && !std::isnan(m))) m = b, k = 1;
  if (c > m || (std::isnan(c) && !std::isnan(m))) m = c, k = 2;
  if (d > m || (std::isnan(d) && !std::isnan(m))) k = 3;
  return k;
}

// 2x2 windows at stride 2 without padding: each window writes its 4 entries of dx (dy at the
// maximum, zeros elsewhere), so dx needs no separate clearing pass except for a last odd row or
// column that no window covers.
template <class T, class Done>
void max_backward_2x2(const T* dy, const T* x, const Geom& g, T* dx, const Done& done) {
  if (g.H == 2 * g.OH && g.W == 2 * g.OW) {
    max_backward_2x2_even(dy, x, g, dx, done);
    return;
  }
  using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  parallel_for(worth_threads(g.P * g.OH * g.OW * 4), g.P, [&](int64_t p) {
    const T* xp = x + p * g.H * g.W;
    const T* gp = dy + p * g.OH * g.OW;
    T* out = dx + p * g.H * g.W;
    if (2 * g.OH != g.H || 2 * g.OW != g.W) std::fill(out, out + g.H * g.W, T(0));
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      const T* r0 = xp + 2 * oh * g.W;
      const T* r1 = r0 + g.W;
      T* o0 = out + 2 * oh * g.W;
      T* o1 = o0 + g.W;
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        const int64_t c = 2 * ow;
        const int k = arg4(r0[c], r0[c + 1], r1[c], r1[c + 1]);
        // dy at entry k, +0 elsewhere, by bit masks (compilers turn selects into branches here).
        const U v = std::bit_cast<U>(T(gp[oh * g.OW + ow] + T(0)));  // -0 arrives as +0, as in the reference
        auto at = [&](int e) { return std::bit_cast<T>(v & (U(0) - U(k == e))); };
        o0[c] = at(0);
        o0[c + 1] = at(1);
        o1[c] = at(2);
        o1[c + 1] = at(3);
      }
    }
    done(p, out);
  });
}

// One plane of max_backward_as: dx = 0, then dy added at each window's maximum. Windows in
// row-major order, so overlapping windows add in the same order on every path.
template <class T, class I>
EMBER_BODY void plane_max_backward_body(WindowArgs<T, I>& args, const T* xp, const T* gp, const Geom& g, T* out) {
  std::fill(out, out + g.H * g.W, T(0));
  args.plane(xp, [&](int64_t oh, const I* arg) {
    for (int64_t ow = 0; ow < g.OW; ++ow)
      if (arg[ow] >= 0) out[arg[ow]] += gp[oh * g.OW + ow];
  });
}
EMBER_CLONES void plane_max_backward(WindowArgs<float, int32_t>& args, const float* xp, const float* gp, const Geom& g,
                                     float* out) {
  plane_max_backward_body(args, xp, gp, g, out);
}
EMBER_CLONES void plane_max_backward(WindowArgs<float, int64_t>& args, const float* xp, const float* gp, const Geom& g,
                                     float* out) {
  plane_max_backward_body(args, xp, gp, g, out);
}
EMBER_CLONES void plane_max_backward(WindowArgs<double, int32_t>& args, const double* xp, const double* gp,
                                     const Geom& g, double* out) {
  plane_max_backward_body(args, xp, gp, g, out);
}
EMBER_CLONES void plane_max_backward(WindowArgs<double, int64_t>& args, const double* xp, const double* gp,
                                     const Geom& g, double* out) {
  plane_max_backward_body(args, xp, gp, g, out);
}

template <class T, class I, class Done>
void max_backward_as(const T* dy, const T* x, const Geom& g, const ember_pool_attrs& a, T* dx, const Done& done) {
  parallel_for_with(worth_threads(g.P * g.OH * g.OW * a.kernel[0] * a.kernel[1]), g.P,
                    [&] { return WindowArgs<T, I>(g, a); }, [&](WindowArgs<T, I>& args, int64_t p) {
    plane_max_backward(args, x + p * g.H * g.W, dy + p * g.OH * g.OW, g, dx + p * g.H * g.W);
    done(p, dx + p * g.H * g.W);
  });
}

// Nothing to do after a plane of dx (the plain gradient).
struct NoEpilogue {
  template <class T>
  void operator()(int64_t, T*) const {}
};

// EMBER_LIB_MAX_POOL2D_BACKWARD_EPILOGUE: the post-ops on one plane of dx (contiguous, H x W) while
// it is in cache, with each operand's matching plane (the call's descriptors, of dx's shape; a
// ReLU's gradient reads the pooling's input here). A plane whose operand rows are contiguous (or
// broadcast) is one row of H * W for post_op_row, else row by row: the planes of a small CNN are 7
// to 28 wide, and a call per row would cost about as much as the mask itself.
template <class T>
struct PlaneEpilogue {
  const ember_epilogue_attrs& post;
  const ember_tensor_desc* in;
  int64_t C, H, W;
  void operator()(int64_t p, T* plane) const {
    PostScratch<T> s;
    const int64_t n = p / C, c = p % C;
    for (int k = 0; k < post.n_ops; ++k) {
      const ember_post_op& op = post.ops[k];
      if (!ember_post_has_operand(op.kind)) {
        post_op_row(op, plane, H * W, nullptr, 0, s);
        continue;
      }
      const ember_tensor_desc& d = in[op.input];
      const T* arg = static_cast<const T*>(d.buffer->data) + d.offset + n * d.strides[0] + c * d.strides[1];
      if (d.strides[2] == W * d.strides[3]) {
        post_op_row(op, plane, H * W, arg, d.strides[3], s);
      } else {
        for (int64_t h = 0; h < H; ++h) post_op_row(op, plane + h * W, W, arg + h * d.strides[2], d.strides[3], s);
      }
    }
  }
};

template <class T, class Done = NoEpilogue>
void max_backward(const T* dy, const T* x, const Geom& g, const ember_pool_attrs& a, T* dx, const Done& done = {}) {
  if (a.kernel[0] == 2 && a.kernel[1] == 2 && a.stride[0] == 2 && a.stride[1] == 2 && a.pad_begin[0] == 0 &&
      a.pad_begin[1] == 0 && 2 * g.OH <= g.H && 2 * g.OW <= g.W) {
    max_backward_2x2(dy, x, g, dx, done);
    return;
  }
  if (WindowArgs<T, int32_t>::fits(g)) max_backward_as<T, int32_t>(dy, x, g, a, dx, done);
  else max_backward_as<T, int64_t>(dy, x, g, a, dx, done);
}

// ---- 16-bit storage (bf16, f16): the 2x2 stride-2 paths on the bits --------------------------
// A 2x2 max (or its gradient) only picks values, so for bf16/f16 operands the fast paths compare
// the values as floats converted on the fly and store the picked one back in 16 bits (exact: it
// came from 16 bits): no widening pass over the input and no rounding pass over the output. A
// picked NaN leaves as the f32 path's narrowing leaves it, so both paths give the same bits.
struct Bf16Bits {
  static float value(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }
  // Exact for a value that came from value(): the bits back, a NaN with its quiet bit set.
  static uint16_t bits(float f) {
    const uint32_t x = std::bit_cast<uint32_t>(f);
    return uint16_t((x & 0x7fffffffu) > 0x7f800000u ? (x >> 16) | 0x40 : x >> 16);
  }
};
struct F16Bits {
  static float value(uint16_t h) { return ember::half_to_float(h); }
  static uint16_t bits(float f) { return ember::float_to_half(f); }
};

template <class B>
void max_2x2_bits(const uint16_t* x, const Geom& g, uint16_t* y) {
  parallel_for(worth_threads(g.P * g.OH * g.OW * 4), g.P, [&](int64_t p) {
    const uint16_t* xp = x + p * g.H * g.W;
    uint16_t* yp = y + p * g.OH * g.OW;
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      const uint16_t* r0 = xp + 2 * oh * g.W;
      const uint16_t* r1 = r0 + g.W;
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        const float a = B::value(r0[2 * ow]), b = B::value(r0[2 * ow + 1]);
        const float c = B::value(r1[2 * ow]), d = B::value(r1[2 * ow + 1]);
        // max_2x2's rule as selects the compiler vectorizes: the first maximum of each pair, then
        // of the pairs (ties keep the earlier entry, so -0 and +0 come out as max_2x2 picks
        // them); a window with a NaN gives its first NaN.
        const float ab = b > a ? b : a, cd = d > c ? d : c;
        const float m = cd > ab ? cd : ab;
        const float first_nan = a != a ? a : b != b ? b : c != c ? c : d;
        yp[oh * g.OW + ow] = B::bits(first_nan != first_nan ? first_nan : m);
      }
    }
  });
}

template <class B>
void max_backward_2x2_bits(const uint16_t* dy, const uint16_t* x, const Geom& g, uint16_t* dx) {
  parallel_for(worth_threads(g.P * g.OH * g.OW * 4), g.P, [&](int64_t p) {
    const uint16_t* xp = x + p * g.H * g.W;
    const uint16_t* gp = dy + p * g.OH * g.OW;
    uint16_t* out = dx + p * g.H * g.W;
    if (2 * g.OH != g.H || 2 * g.OW != g.W) std::fill(out, out + g.H * g.W, uint16_t(0));
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      const uint16_t* r0 = xp + 2 * oh * g.W;
      const uint16_t* r1 = r0 + g.W;
      uint16_t* o0 = out + 2 * oh * g.W;
      uint16_t* o1 = o0 + g.W;
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        const int64_t c = 2 * ow;
        const int k = arg4(B::value(r0[c]), B::value(r0[c + 1]), B::value(r1[c]), B::value(r1[c + 1]));
        // dy at entry k, +0 elsewhere, by bit masks (as max_backward_2x2).
        const uint16_t v = B::bits(B::value(gp[oh * g.OW + ow]) + 0.0f);  // -0 arrives as +0, as in the reference
        auto at = [&](int e) { return uint16_t(v & uint16_t(0u - unsigned(k == e))); };
        o0[c] = at(0);
        o0[c + 1] = at(1);
        o1[c] = at(2);
        o1[c + 1] = at(3);
      }
    }
  });
}

// The 2x2 paths for contiguous 16-bit operands; false if the call is not one of them.
bool run_bits(int32_t op, const ember_tensor_desc* in, const ember_tensor_desc& out, const ember_pool_attrs& a) {
  const bool backward = op == EMBER_LIB_MAX_POOL2D_BACKWARD;
  if (op == EMBER_LIB_MAX_POOL2D_INDICES) return false;
  const ember_tensor_desc& big = backward ? in[1] : in[0];
  const ember_tensor_desc& small = backward ? in[0] : out;
  const Geom g{big.shape[0] * big.shape[1], big.shape[2], big.shape[3], small.shape[2], small.shape[3]};
  const bool two = a.kernel[0] == 2 && a.kernel[1] == 2 && a.stride[0] == 2 && a.stride[1] == 2 &&
                   a.pad_begin[0] == 0 && a.pad_begin[1] == 0 && 2 * g.OH <= g.H && 2 * g.OW <= g.W;
  if (!two || !desc_contiguous(big) || !desc_contiguous(out) || (backward && !desc_contiguous(in[0]))) return false;
  auto ptr = [](const ember_tensor_desc& d) { return static_cast<uint16_t*>(d.buffer->data) + d.offset; };
  const bool bf16 = big.dtype == EMBER_BF16;
  if (backward) {
    if (bf16) max_backward_2x2_bits<Bf16Bits>(ptr(in[0]), ptr(big), g, ptr(out));
    else max_backward_2x2_bits<F16Bits>(ptr(in[0]), ptr(big), g, ptr(out));
  } else {
    if (bf16) max_2x2_bits<Bf16Bits>(ptr(big), g, ptr(out));
    else max_2x2_bits<F16Bits>(ptr(big), g, ptr(out));
  }
  return true;
}

template <class T>
int32_t run(int32_t op, const ember_tensor_desc* in, const ember_tensor_desc& out, const ember_pool_attrs& a,
            const ember_epilogue_attrs* post) {
  const bool backward = op == EMBER_LIB_MAX_POOL2D_BACKWARD;
  const ember_tensor_desc& big = backward ? in[1] : in[0];
  const ember_tensor_desc& small = backward ? in[0] : out;
  const Geom g{big.shape[0] * big.shape[1], big.shape[2], big.shape[3], small.shape[2], small.shape[3]};
  const DenseIn<T> x(big);
  if (op == EMBER_LIB_MAX_POOL2D_INDICES) {
    // Outputs are fresh contiguous buffers (abi.h).
    max_indices(x.data, g, a, static_cast<int64_t*>(out.buffer->data) + out.offset);
    return EMBER_OK;
  }
  constexpr int32_t want = sizeof(T) == 4 ? EMBER_F32 : EMBER_F64;
  std::vector<T> tmp;
  T* y = static_cast<T*>(out.buffer->data) + out.offset;
  if (out.dtype != want) {
    tmp.resize(size_t(desc_numel(out)));
    y = tmp.data();
  }
  if (backward && post) {  // f32 / f64 only (max_pool_library), so y is the output itself
    const DenseIn<T> dy(in[0]);
    max_backward(dy.data, x.data, g, a, y, PlaneEpilogue<T>{*post, in, big.shape[1], g.H, g.W});
  } else if (backward) {
    const DenseIn<T> dy(in[0]);
    max_backward(dy.data, x.data, g, a, y);
  } else {
    max_forward(x.data, g, a, y);
  }
  if (!tmp.empty()) unpack_dense(tmp, out);
  return EMBER_OK;
}

}  // namespace

int32_t max_pool_library(int32_t op, const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc& out,
                         const ember_pool_attrs& a, ember_status* st, const ember_epilogue_attrs* post) {
  const bool backward = op == EMBER_LIB_MAX_POOL2D_BACKWARD;
  if (post) {
    if (!backward || n_in < 2) return set_status(st, EMBER_ERR_INVALID, "max_pool2d backward epilogue: %d inputs", n_in);
    if (const char* why = check_epilogue(post, in, n_in, out))
      return set_status(st, EMBER_ERR_INVALID, "max_pool2d backward epilogue: %s", why);
  } else if (n_in != (backward ? 2 : 1)) {
    return set_status(st, EMBER_ERR_INVALID, "max_pool2d: %d inputs", n_in);
  }
  for (int i = 0; i < (backward ? 2 : 1); ++i)
    if (in[i].rank != 4) return set_status(st, EMBER_ERR_INVALID, "max_pool2d: input %d has rank %d", i, in[i].rank);
  if (out.rank != 4) return set_status(st, EMBER_ERR_INVALID, "max_pool2d: output has rank %d", out.rank);
  const ember_tensor_desc& x = backward ? in[1] : in[0];
  if (op == EMBER_LIB_MAX_POOL2D_INDICES && out.dtype != EMBER_I64)
    return set_status(st, EMBER_ERR_INVALID, "max_pool2d indices: output must be i64");
  if (op != EMBER_LIB_MAX_POOL2D_INDICES && out.dtype != x.dtype)
    return set_status(st, EMBER_ERR_INVALID, "max_pool2d: output dtype %d differs from the input's %d", out.dtype,
                      x.dtype);
  if (backward && (in[0].dtype != x.dtype || in[0].shape[0] != x.shape[0] || in[0].shape[1] != x.shape[1] ||
                   out.shape[2] != x.shape[2] || out.shape[3] != x.shape[3]))
    return set_status(st, EMBER_ERR_INVALID, "max_pool2d backward: dy, x and dx do not match");
  if (desc_numel(out) == 0) return EMBER_OK;
  switch (x.dtype) {
    case EMBER_F64: return run<double>(op, in, out, a, post);
    case EMBER_F16: case EMBER_BF16:  // (no epilogue: check_epilogue takes f32 and f64 only)
      if (run_bits(op, in, out, a)) return EMBER_OK;
      return run<float>(op, in, out, a, nullptr);
    case EMBER_F32: return run<float>(op, in, out, a, post);
    default: return set_status(st, EMBER_ERR_UNSUPPORTED, "max_pool2d: dtype %d is not floating", x.dtype);
  }
}

}  // namespace ember::cpu
