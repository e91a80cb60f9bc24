// Direct f32 convolutions for inputs with few channels (the first layer of a model of grayscale
// images; library.h kSmallConvMaxChannels says how few), forward and weight gradient, in NCHW
// without oneDNN. oneDNN 2.6 takes its blocked layout here too, so such a layer paid the reorder
// of its large output to NCHW and of its output gradient from NCHW (64 x 32 x 28 x 28: 1.05 ms
// each at 1 thread), and its 1-channel kernels ran at about 12 GFLOP/s (forward 1.48 ms for 29
// MFLOP). The loops handle any channel count up to kSmallConvMaxTaps taps.
//
// Operands: the forward needs finite weights (conv_dnnl.cpp scans them; the f64 loops take the
// others), since a product with the padding must not be NaN; the weight gradient's result is
// scanned instead, and one that is not finite is computed again by the f64 loops. A bias of -0
// whose window meets the padding: conv_dnnl.cpp's keep_negative_zero_sums, as for oneDNN.
// The forward reads a zero-padded copy of the input whose rows are long enough for whole 16-float
// vectors past the last output column, so every inner loop runs over whole vectors; the weight
// gradient reads one shifted copy per tap column instead (shift_image), so that its input loads
// are aligned. Stride 1 and no dilation (small_channel_conv_fits). The forward sums each output's
// C*KH*KW terms in (c, kh, kw) order after the bias; the weight gradient sums over (n, oh)
// ascending with one partial sum per output column modulo 16, then adds the 16 in order: results
// do not depend on the thread count.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/common/host_memory.h"
#include "backend/cpu/library.h"
#include "backend/cpu/post_ops.h"
#include "backend/cpu/program.h"
#include "backend/cpu/target_clones.h"

// The 64-byte vector type below is passed only between always-inlined functions of one clone,
// so the ABI GCC warns about (a 512-bit argument without AVX-512) never applies.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace ember::cpu {

namespace {

constexpr int64_t kLanes = 16;  // columns per vector in the loops below (one AVX-512 register; splat)
// GCC left the plain loops over 16 lanes scalar (the weight gradient took 8.1 ms instead of 2.2 ms
// in oneDNN), so the bodies use vector types: one AVX-512 register, two AVX2 ones, four SSE ones.
typedef float Vec __attribute__((vector_size(kLanes * sizeof(float))));
typedef float VecUnaligned __attribute__((vector_size(kLanes * sizeof(float)), aligned(alignof(float))));
typedef int32_t VecInt __attribute__((vector_size(kLanes * sizeof(float))));
EMBER_BODY Vec splat(float v) { return Vec{v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v}; }
EMBER_BODY Vec load(const float* p) { return *reinterpret_cast<const VecUnaligned*>(p); }

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// The zero-padded input of one image: C planes of `rows` x `row` floats.
struct Padded {
  int64_t rows, row, plane;
};

Padded padded_geometry(const SmallConv& s) {
  Padded p;
  p.rows = s.OH + s.KH - 1;
  p.row = round_up(s.OW, kLanes) + s.KW - 1;
  p.plane = p.rows * p.row;
  return p;
}

// Image n of x [N, C, H, W] into xp (C planes of the padded geometry).
void pad_image(const SmallConv& s, const Padded& p, const float* x, int64_t n, float* xp) {
  std::fill(xp, xp + s.C * p.plane, 0.0f);
  for (int64_t c = 0; c < s.C; ++c)
    for (int64_t h = 0; h < s.H; ++h) {
      const int64_t hp = h + s.pad_top;
      if (hp < 0 || hp >= p.rows) continue;
      const float* src = x + ((n * s.C + c) * s.H + h) * s.W;
      float* dst = xp + c * p.plane + hp * p.row;
      for (int64_t w = 0; w < s.W; ++w) {
        const int64_t wp = w + s.pad_left;
        if (wp >= 0 && wp < p.row) dst[wp] = src[w];
      }
    }
}

// NV * 16 outputs of row oh of OB channels from wo (their weights, `taps` apart), from column
// ow0: bias, then the taps in order. Each input vector is loaded once for the OB channels.
template <int NV, int OB>
EMBER_BODY void forward_chunk(const SmallConv& s, const Padded& p, const float* xp, const float* wo, int64_t taps,
                              const Vec* bias, int64_t oh, int64_t ow0, float* out, int64_t out_plane,
                              int64_t count, bool overrun_ok) {
  Vec acc[OB][NV];
  for (int b = 0; b < OB; ++b)
    for (int j = 0; j < NV; ++j) acc[b][j] = bias[b];
  int64_t t = 0;
  for (int64_t c = 0; c < s.C; ++c)
    for (int64_t kh = 0; kh < s.KH; ++kh) {
      const float* r = xp + c * p.plane + (oh + kh) * p.row + ow0;
      for (int64_t kw = 0; kw < s.KW; ++kw, ++t) {
        Vec x[NV];
        for (int j = 0; j < NV; ++j) x[j] = load(r + kw + j * kLanes);
        for (int b = 0; b < OB; ++b) {
          const float wv = wo[b * taps + t];
          for (int j = 0; j < NV; ++j) acc[b][j] += wv * x[j];
        }
      }
    }
  // Whole vectors, then the row's last columns. Where the next row of the plane follows (written
  // later by this thread), a whole vector may run into it; the plane's last row copies its last
  // columns (GCC makes that a memcpy call, which costs more than the sums).
  const int full = int(count / kLanes), tail = int(count % kLanes);
  for (int b = 0; b < OB; ++b) {
    float* o = out + b * out_plane;
    for (int j = 0; j < full; ++j) *reinterpret_cast<VecUnaligned*>(o + j * kLanes) = acc[b][j];
    if (tail == 0) continue;
    if (overrun_ok) *reinterpret_cast<VecUnaligned*>(o + full * kLanes) = acc[b][full < NV ? full : 0];
    else
      for (int i = 0; i < tail; ++i) o[full * kLanes + i] = acc[b][full < NV ? full : 0][i];
  }
}

// One row's columns in chunks of up to 4 vectors, for OB channels.
template <int OB>
EMBER_BODY void forward_row(const SmallConv& s, const Padded& p, const float* xp, const float* wo, int64_t taps,
                            const Vec* bias, int64_t oh, float* yr, int64_t out_plane) {
  // A row's last vector may run into the next row, which is computed after it (not past the plane).
  const bool over = oh + 1 < s.OH && round_up(s.OW, kLanes) - s.OW <= s.OW;
  int64_t ow0 = 0;
  for (; ow0 + 4 * kLanes <= s.OW; ow0 += 4 * kLanes)
    forward_chunk<4, OB>(s, p, xp, wo, taps, bias, oh, ow0, yr + ow0, out_plane, 4 * kLanes, over);
  const int64_t rest = s.OW - ow0;
  if (rest > 2 * kLanes) forward_chunk<3, OB>(s, p, xp, wo, taps, bias, oh, ow0, yr + ow0, out_plane, rest, over);
  else if (rest > kLanes) forward_chunk<2, OB>(s, p, xp, wo, taps, bias, oh, ow0, yr + ow0, out_plane, rest, over);
  else if (rest > 0) forward_chunk<1, OB>(s, p, xp, wo, taps, bias, oh, ow0, yr + ow0, out_plane, rest, over);
}

// Output channels [o0, o1) of image n, four at a time.
EMBER_CLONES void forward_rows(const SmallConv& s, const Padded& p, const float* xp, const float* w,
                               const float* bias, float* y, int64_t n, int64_t o0, int64_t o1,
                               const ember_epilogue_attrs* post, PostScratch<float>& scratch) {
  const int64_t taps = s.C * s.KH * s.KW, out_plane = s.OH * s.OW;
  // The accumulators start at the bias (not at +0 plus the bias, which is +0 for a bias of -0), or
  // at +0 without one. As vectors made once per block of channels: GCC builds a splat in these
  // clones through the stack, and a 64-byte load of four 16-byte stores waits for them (that
  // stall was half of this function's time when each chunk of a row made its own).
  Vec b[4];
  auto splat_bias = [&](int64_t o, int count) {
    for (int k = 0; k < count; ++k) b[k] = bias ? splat(bias[o + k]) : Vec{};
  };
  // The epilogue over planes [c0, c1) of image n while they are in cache.
  auto finish = [&](int64_t c0, int64_t c1) {
    for (int k = 0; post && k < post->n_ops; ++k)
      post_op_row(post->ops[k], y + (n * s.O + c0) * out_plane, (c1 - c0) * out_plane, nullptr, 0, scratch);
  };
  int64_t o = o0;
  for (; o + 4 <= o1; o += 4) {
    splat_bias(o, 4);
    for (int64_t oh = 0; oh < s.OH; ++oh)
      forward_row<4>(s, p, xp, w + o * taps, taps, b, oh, y + (n * s.O + o) * out_plane + oh * s.OW, out_plane);
    finish(o, o + 4);
  }
  for (; o < o1; ++o) {
    splat_bias(o, 1);
    for (int64_t oh = 0; oh < s.OH; ++oh)
      forward_row<1>(s, p, xp, w + o * taps, taps, b, oh, y + (n * s.O + o) * out_plane + oh * s.OW, out_plane);
    finish(o, o + 1);
  }
}

// The weight gradient reads the input through pre-shifted copies: for each tap column kw, the
// zero-padded image shifted left by kw, in rows of a whole number of vectors starting on 64-byte
// boundaries. Every input load of its loop is then one aligned vector; loads at the taps' own
// offsets into one padded image span two cache lines each (a vector of 16 floats starting
// anywhere), and those split loads, nine per dy vector, bounded the loop (1.48 ms for
// [64, 32, 28, 28] at 1 thread, 19 GFLOP/s; a standalone loop of 9 FMAs on such loads ran at half
// the speed of the same loop on aligned ones).
struct Shifted {
  int64_t rows, row, plane;  // row: round_up(OW, 16) floats; plane: rows * row
};

Shifted shifted_geometry(const SmallConv& s) {
  Shifted h;
  h.rows = s.OH + s.KH - 1;
  h.row = round_up(s.OW, kLanes);
  h.plane = h.rows * h.row;
  return h;
}

// Image n of x as C * KW shifted planes: xs[(c * KW + kw) * plane + r * row + j] = the padded
// input at (row r, column j + kw), i.e. x[n, c, r - pad_top, j + kw - pad_left] or 0 outside.
void shift_image(const SmallConv& s, const Shifted& h, const float* x, int64_t n, float* xs) {
  for (int64_t c = 0; c < s.C; ++c)
    for (int64_t kw = 0; kw < s.KW; ++kw) {
      float* plane = xs + (c * s.KW + kw) * h.plane;
      // Columns [j0, j1) of a row come from the input (iw = j + kw - pad_left in [0, W)).
      const int64_t j0 = std::clamp<int64_t>(s.pad_left - kw, 0, h.row);
      const int64_t j1 = std::clamp<int64_t>(s.W + s.pad_left - kw, j0, h.row);
      for (int64_t r = 0; r < h.rows; ++r) {
        float* dst = plane + r * h.row;
        const int64_t ih = r - s.pad_top;
        if (ih < 0 || ih >= s.H) {
          std::fill(dst, dst + h.row, 0.0f);
          continue;
        }
        const float* src = x + ((n * s.C + c) * s.H + ih) * s.W;  // column iw = j + kw - pad_left
        std::fill(dst, dst + j0, 0.0f);
        std::copy(src + (j0 + kw - s.pad_left), src + (j1 + kw - s.pad_left), dst + j0);
        std::fill(dst + j1, dst + h.row, 0.0f);
      }
    }
}

EMBER_BODY Vec load_aligned(const float* p) { return *reinterpret_cast<const Vec*>(p); }

// OB output channels' weight gradients over image n: acc[b][t][lane] += dy[n, o + b] row chunks
// times tap t's input chunk, each input chunk loaded once for the OB channels.
template <int T, int OB>
EMBER_BODY void weight_grad_image(const SmallConv& s, const Shifted& h, const float* xs, const float* dy, int64_t n,
                                  int64_t o, const int64_t* tap, VecInt tail_mask, VecUnaligned* sums) {
  const int64_t vecs = h.row / kLanes, full = s.OW / kLanes, tail = s.OW % kLanes;
  const float* dy_end = dy + s.N * s.O * s.OH * s.OW;
  Vec acc[OB][T];
  for (int b = 0; b < OB; ++b)
    for (int t = 0; t < T; ++t) acc[b][t] = sums[b * T + t];
  for (int64_t oh = 0; oh < s.OH; ++oh) {
    for (int64_t v = 0; v < vecs; ++v) {
      Vec d[OB];
      for (int b = 0; b < OB; ++b) {
        const float* q = dy + ((n * s.O + o + b) * s.OH + oh) * s.OW + v * kLanes;
        if (v < full) {
          d[b] = load(q);
        } else if (q + kLanes <= dy_end) {  // the row's last columns: a whole vector, zeros past OW
          d[b] = (Vec)((VecInt)load(q) & tail_mask);
        } else {  // the last row of the buffer (through a copy, so that d stays in registers)
          alignas(64) float last[kLanes] = {};
          for (int64_t i = 0; i < tail; ++i) last[i] = q[i];
          d[b] = load_aligned(last);
        }
      }
      const float* xr = xs + oh * h.row + v * kLanes;
      for (int t = 0; t < T; ++t) {
        const Vec x = load_aligned(xr + tap[t]);
        for (int b = 0; b < OB; ++b) acc[b][t] += d[b] * x;
      }
    }
  }
  for (int b = 0; b < OB; ++b)
    for (int t = 0; t < T; ++t) sums[b * T + t] = acc[b][t];
}

// The weight gradient of output channels [o0, o1): acc[o][t][lane] summed over every image and
// row, then over the lanes. Images outermost, so dy (N x O planes) is read in its own order; the
// running sums of the block's channels stay in `acc_mem` (o1 - o0 times T vectors, in L1) between
// images, and channels go in pairs where their 2 x T accumulators fit in registers. Each
// channel's sum runs over (n, oh) ascending, one partial sum per lane, whatever the pairing and
// the thread count. T: the number of taps (C * KH * KW), fixed so that the accumulators stay in
// registers. `xs`: shifted copies of every image (shift_image), 64-byte aligned.
template <int T>
EMBER_BODY void weight_grad_block(const SmallConv& s, const Shifted& h, const float* xs, const float* dy, int64_t o0,
                                  int64_t o1, float* acc_mem, float* dw) {
  constexpr int kPair = T <= 12 ? 2 : 1;
  const int64_t tail = s.OW % kLanes;
  VecInt tail_mask;
  for (int i = 0; i < kLanes; ++i) tail_mask[i] = i < tail ? -1 : 0;
  int64_t tap[T];  // offset of tap t's shifted plane and row
  for (int t = 0; t < T; ++t) {
    const int64_t c = t / (s.KH * s.KW), kh = t / s.KW % s.KH, kw = t % s.KW;
    tap[t] = (c * s.KW + kw) * h.plane + kh * h.row;
  }
  VecUnaligned* const sums = reinterpret_cast<VecUnaligned*>(acc_mem);
  for (int64_t i = 0; i < (o1 - o0) * T; ++i) sums[i] = Vec{};
  for (int64_t n = 0; n < s.N; ++n) {
    const float* xn = xs + n * s.C * s.KW * h.plane;
    int64_t o = o0;
    for (; o + kPair <= o1; o += kPair)
      weight_grad_image<T, kPair>(s, h, xn, dy, n, o, tap, tail_mask, sums + (o - o0) * T);
    for (; o < o1; ++o) weight_grad_image<T, 1>(s, h, xn, dy, n, o, tap, tail_mask, sums + (o - o0) * T);
  }
  for (int64_t o = o0; o < o1; ++o)
    for (int t = 0; t < T; ++t) {
      const Vec a = sums[(o - o0) * T + t];
      float sum = 0.0f;
      for (int i = 0; i < kLanes; ++i) sum += a[i];
      dw[o * T + t] = sum;
    }
}

// Channels in blocks of kWeightGradBlock, so that the block's running sums stay in L1 (32 x 27
// taps x 64 bytes = 54 KB at most; 18 KB for 3x3 taps) whatever the channel count.
constexpr int64_t kWeightGradBlock = 32;

template <int T>
EMBER_CLONES void weight_grad_channels(const SmallConv& s, const Shifted& h, const float* xs, const float* dy,
                                       int64_t o0, int64_t o1, float* dw) {
  std::vector<float> acc_mem(size_t(kWeightGradBlock * T * kLanes));
  for (int64_t b = o0; b < o1; b += kWeightGradBlock)
    weight_grad_block<T>(s, h, xs, dy, b, std::min(o1, b + kWeightGradBlock), acc_mem.data(), dw);
}

// Any tap count up to kSmallConvMaxTaps, dispatched to the fixed-size loops above.
template <int T = 1>
void weight_grad_dispatch(int taps, const SmallConv& s, const Shifted& h, const float* xs, const float* dy,
                          int64_t o0, int64_t o1, float* dw) {
  if constexpr (T <= kSmallConvMaxTaps) {
    if (taps == T) return weight_grad_channels<T>(s, h, xs, dy, o0, o1, dw);
    weight_grad_dispatch<T + 1>(taps, s, h, xs, dy, o0, o1, dw);
  }
}

}  // namespace

bool small_channel_conv_fits(const SmallConv& s, const ember_conv_attrs& a) {
  return a.groups == 1 && a.stride[0] == 1 && a.stride[1] == 1 && a.dilation[0] == 1 && a.dilation[1] == 1 &&
         s.C <= kSmallConvMaxChannels && s.C * s.KH * s.KW <= kSmallConvMaxTaps && s.pad_top >= 0 &&
         s.pad_left >= 0 && s.OH == s.H + a.pad_begin[0] + a.pad_end[0] - s.KH + 1 &&
         s.OW == s.W + a.pad_begin[1] + a.pad_end[1] - s.KW + 1 && s.OH > 0 && s.OW > 0;
}

void small_channel_conv_forward(const SmallConv& s, const float* x, const float* w, const float* bias, float* y,
                                const ember_epilogue_attrs* post) {
  const Padded p = padded_geometry(s);
  // Tasks of (image, block of output channels): whole images when there are enough of them.
  const int64_t threads = omp_get_max_threads();
  const int64_t blocks = s.N >= 2 * threads ? 1 : std::min<int64_t>(s.O, (2 * threads + s.N - 1) / s.N);
  const int64_t per_block = (s.O + blocks - 1) / blocks;
  const int64_t points = s.N * s.O * s.OH * s.OW * s.C * s.KH * s.KW;
  run_tasks(s.N * blocks, points, [&](int64_t t0, int64_t t1) {
    std::vector<float> xp(size_t(s.C * p.plane));
    PostScratch<float> scratch;
    int64_t padded_n = -1;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t n = t / blocks, ob = t % blocks;
      if (n != padded_n) pad_image(s, p, x, n, xp.data());
      padded_n = n;
      const int64_t o0 = ob * per_block, o1 = std::min(s.O, o0 + per_block);
      if (o0 < o1) forward_rows(s, p, xp.data(), w, bias, y, n, o0, o1, post, scratch);
    }
  });
}

void small_channel_conv_backward_weights(const SmallConv& s, const float* x, const float* dy, float* dw) {
  const Shifted h = shifted_geometry(s);
  const int64_t per_image = s.C * s.KW * h.plane;
  std::vector<float> mem(size_t(s.N * per_image + kLanes));
  float* const xs = mem.data() + (kLanes - (reinterpret_cast<uintptr_t>(mem.data()) / sizeof(float)) % kLanes) % kLanes;
  run_tasks(s.N, s.N * per_image, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) shift_image(s, h, x, n, xs + n * per_image);
  });
  const int taps = int(s.C * s.KH * s.KW);
  const int64_t points = s.N * s.O * s.OH * s.OW * taps;
  run_tasks(s.O, points, [&](int64_t o0, int64_t o1) {
    weight_grad_dispatch(taps, s, h, xs, dy, o0, o1, dw);
  });
}

}  // namespace ember::cpu
