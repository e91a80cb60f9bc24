// Loops of the CPU backend's library calls (see library.h): OpenMP over independent planes or
// rows, so each thread owns its outputs (no atomics, results independent of the thread count).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <type_traits>
#include <vector>

#include "backend/common/host_memory.h"
#include "backend/cpu/convert.h"
#include "backend/cpu/library.h"
#include "backend/cpu/parallel_for.h"
#include "ember/dtype.h"

namespace ember::cpu {

using ember::host::set_status;

int64_t desc_numel(const ember_tensor_desc& d) {
  int64_t n = 1;
  for (int i = 0; i < d.rank; ++i) n *= d.shape[i];
  return n;
}

bool desc_contiguous(const ember_tensor_desc& d) {
  int64_t s = 1;
  for (int i = d.rank - 1; i >= 0; --i) {
    if (d.shape[i] != 1 && d.strides[i] != s) return false;
    s *= d.shape[i];
  }
  return true;
}

namespace {

bool is_float(int32_t dt) { return dt == EMBER_F32 || dt == EMBER_F64 || dt == EMBER_F16 || dt == EMBER_BF16; }

double load_f(const void* p, int32_t dt, int64_t off) {
  switch (dt) {
    case EMBER_F32: return static_cast<const float*>(p)[off];
    case EMBER_F64: return static_cast<const double*>(p)[off];
    case EMBER_F16: return ember::half_to_float(static_cast<const uint16_t*>(p)[off]);
    default: return ember::bf16_to_float(static_cast<const uint16_t*>(p)[off]);
  }
}
void store_f(void* p, int32_t dt, int64_t off, double v) {
  switch (dt) {
    case EMBER_F32: static_cast<float*>(p)[off] = float(v); break;
    case EMBER_F64: static_cast<double*>(p)[off] = v; break;
    case EMBER_F16: static_cast<uint16_t*>(p)[off] = ember::float_to_half(float(v)); break;
    default: static_cast<uint16_t*>(p)[off] = ember::float_to_bf16(float(v)); break;
  }
}
int64_t load_i(const void* p, int32_t dt, int64_t off) {
  switch (dt) {
    case EMBER_I32: return static_cast<const int32_t*>(p)[off];
    case EMBER_I64: return static_cast<const int64_t*>(p)[off];
    case EMBER_U8: return static_cast<const uint8_t*>(p)[off];
    case EMBER_I8: return static_cast<const int8_t*>(p)[off];
    case EMBER_I16: return static_cast<const int16_t*>(p)[off];
    case EMBER_U16: return static_cast<const uint16_t*>(p)[off];
    case EMBER_U32: return static_cast<const uint32_t*>(p)[off];
    case EMBER_U64: return int64_t(static_cast<const uint64_t*>(p)[off]);  // the bits
    default: return static_cast<const uint8_t*>(p)[off] != 0;
  }
}
void store_i(void* p, int32_t dt, int64_t off, int64_t v) {
  switch (dt) {
    case EMBER_I32: static_cast<int32_t*>(p)[off] = int32_t(v); break;
    case EMBER_I64: static_cast<int64_t*>(p)[off] = v; break;
    case EMBER_U8: static_cast<uint8_t*>(p)[off] = uint8_t(v); break;
    case EMBER_I8: static_cast<int8_t*>(p)[off] = int8_t(v); break;
    case EMBER_I16: static_cast<int16_t*>(p)[off] = int16_t(v); break;
    case EMBER_U16: static_cast<uint16_t*>(p)[off] = uint16_t(v); break;
    case EMBER_U32: static_cast<uint32_t*>(p)[off] = uint32_t(v); break;
    case EMBER_U64: static_cast<uint64_t*>(p)[off] = uint64_t(v); break;
    default: static_cast<uint8_t*>(p)[off] = v != 0; break;
  }
}

// Offset of element `linear` (row-major over d's shape) in d.
int64_t offset_of(const ember_tensor_desc& d, int64_t linear) {
  int64_t off = d.offset;
  for (int i = d.rank - 1; i >= 0; --i) {
    off += (linear % d.shape[i]) * d.strides[i];
    linear /= d.shape[i];
  }
  return off;
}

[[maybe_unused]] bool parallel_worth(int64_t work) { return work >= (int64_t(1) << 15) && !omp_in_parallel(); }

}  // namespace

template <class T>
std::vector<T> pack_dense(const ember_tensor_desc& d) {
  const int64_t n = desc_numel(d);
  std::vector<T> v(static_cast<size_t>(n));
  if (n == 0) return v;
  const void* p = d.buffer->data;
  const bool dense = desc_contiguous(d);
  if (dense && ((std::is_same_v<T, float> && d.dtype == EMBER_F32) ||
                (std::is_same_v<T, double> && d.dtype == EMBER_F64))) {
    std::memcpy(v.data(), static_cast<const T*>(p) + d.offset, size_t(n) * sizeof(T));
    return v;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (dense && (d.dtype == EMBER_BF16 || d.dtype == EMBER_F16)) {  // autocast's operands: vectorized
      widen_to_f32(d.dtype, static_cast<const uint16_t*>(p) + d.offset, v.data(), n);
      return v;
    }
  }
  // Row by row along the last dim: one offset computation per row, not per element.
  const int64_t cols = d.rank == 0 ? 1 : d.shape[d.rank - 1];
  const int64_t step = d.rank == 0 ? 0 : d.strides[d.rank - 1];
  parallel_for(parallel_worth(n), n / cols, [&](int64_t r) {
    const int64_t base = offset_of(d, r * cols);
    T* out = v.data() + r * cols;
    for (int64_t j = 0; j < cols; ++j) out[j] = T(load_f(p, d.dtype, base + j * step));
  });
  return v;
}
template <class T>
void unpack_dense(const std::vector<T>& v, const ember_tensor_desc& d) {
  const int64_t n = desc_numel(d);
  if (n == 0) return;
  void* p = d.buffer->data;
  const bool dense = desc_contiguous(d);
  if constexpr (std::is_same_v<T, float>) {
    if (dense && d.dtype == EMBER_F32) {
      std::memcpy(static_cast<float*>(p) + d.offset, v.data(), size_t(n) * sizeof(float));
      return;
    }
    if (dense && (d.dtype == EMBER_BF16 || d.dtype == EMBER_F16)) {
      narrow_from_f32(d.dtype, v.data(), static_cast<uint16_t*>(p) + d.offset, n);
      return;
    }
  }
  const int64_t cols = d.rank == 0 ? 1 : d.shape[d.rank - 1];
  const int64_t step = d.rank == 0 ? 0 : d.strides[d.rank - 1];
  parallel_for(parallel_worth(n), n / cols, [&](int64_t r) {
    const int64_t base = offset_of(d, r * cols);
    const T* in = v.data() + r * cols;
    for (int64_t j = 0; j < cols; ++j) store_f(p, d.dtype, base + j * step, double(in[j]));
  });
}
template std::vector<float> pack_dense<float>(const ember_tensor_desc&);
template std::vector<double> pack_dense<double>(const ember_tensor_desc&);
template void unpack_dense<float>(const std::vector<float>&, const ember_tensor_desc&);
template void unpack_dense<double>(const std::vector<double>&, const ember_tensor_desc&);

// ---- f64 convolution (dense NCHW / OIHW operands) -------------------------------------------
// One output plane (n, o) per iteration: the sum over the group's channels and the taps.
void conv2d_f64(const double* x, const double* w, const double* bias, double* y, const int64_t xs[4],
                const int64_t ws[4], const int64_t ys[4], const ember_conv_attrs& a) {
  const int64_t N = ys[0], O = ys[1], OH = ys[2], OW = ys[3], C = xs[1], H = xs[2], W = xs[3];
  const int64_t Cg = ws[1], KH = ws[2], KW = ws[3], Og = O / a.groups;
  parallel_for(parallel_worth(N * O * OH * OW * Cg * KH * KW), N * O, [&](int64_t p) {
    const int64_t n = p / O, o = p % O, g = o / Og;
    double* out = y + p * OH * OW;
    std::fill(out, out + OH * OW, bias ? bias[o] : 0.0);
    for (int64_t c = 0; c < Cg; ++c) {
      const double* xp = x + (n * C + g * Cg + c) * H * W;
      for (int64_t kh = 0; kh < KH; ++kh)
        for (int64_t kw = 0; kw < KW; ++kw) {
          const double wv = w[((o * Cg + c) * KH + kh) * KW + kw];
          for (int64_t oh = 0; oh < OH; ++oh) {
            const int64_t ih = oh * a.stride[0] - a.pad_begin[0] + kh * a.dilation[0];
            if (ih < 0 || ih >= H) continue;
            for (int64_t ow = 0; ow < OW; ++ow) {
              const int64_t iw = ow * a.stride[1] - a.pad_begin[1] + kw * a.dilation[1];
              if (iw >= 0 && iw < W) out[oh * OW + ow] += wv * xp[ih * W + iw];
            }
          }
        }
    }
  });
}

// One input plane (n, c) per iteration: every output tap that read it.
void conv2d_backward_data_f64(const double* dy, const double* w, double* dx, const int64_t dxs[4],
                              const int64_t ws[4], const int64_t dys[4], const ember_conv_attrs& a) {
  const int64_t N = dxs[0], C = dxs[1], H = dxs[2], W = dxs[3], O = dys[1], OH = dys[2], OW = dys[3];
  const int64_t Cg = ws[1], KH = ws[2], KW = ws[3], Og = O / a.groups;
  parallel_for(parallel_worth(N * O * OH * OW * Cg * KH * KW), N * C, [&](int64_t p) {
    const int64_t n = p / C, ci = p % C, g = ci / Cg, c = ci % Cg;
    double* out = dx + p * H * W;
    std::fill(out, out + H * W, 0.0);
    for (int64_t o = g * Og; o < (g + 1) * Og; ++o) {
      const double* gp = dy + (n * O + o) * OH * OW;
      for (int64_t kh = 0; kh < KH; ++kh)
        for (int64_t kw = 0; kw < KW; ++kw) {
          const double wv = w[((o * Cg + c) * KH + kh) * KW + kw];
          for (int64_t oh = 0; oh < OH; ++oh) {
            const int64_t ih = oh * a.stride[0] - a.pad_begin[0] + kh * a.dilation[0];
            if (ih < 0 || ih >= H) continue;
            for (int64_t ow = 0; ow < OW; ++ow) {
              const int64_t iw = ow * a.stride[1] - a.pad_begin[1] + kw * a.dilation[1];
              if (iw >= 0 && iw < W) out[ih * W + iw] += wv * gp[oh * OW + ow];
            }
          }
        }
    }
  });
}

// One filter (o, c) per iteration.
void conv2d_backward_weights_f64(const double* x, const double* dy, double* dw, const int64_t xs[4],
                                 const int64_t dws[4], const int64_t dys[4], const ember_conv_attrs& a) {
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], O = dys[1], OH = dys[2], OW = dys[3];
  const int64_t Cg = dws[1], KH = dws[2], KW = dws[3], Og = O / a.groups;
  parallel_for(parallel_worth(N * O * OH * OW * Cg * KH * KW), O * Cg, [&](int64_t p) {
    const int64_t o = p / Cg, c = p % Cg, g = o / Og;
    for (int64_t kh = 0; kh < KH; ++kh)
      for (int64_t kw = 0; kw < KW; ++kw) {
        double acc = 0;
        for (int64_t n = 0; n < N; ++n) {
          const double* xp = x + (n * C + g * Cg + c) * H * W;
          const double* gp = dy + (n * O + o) * OH * OW;
          for (int64_t oh = 0; oh < OH; ++oh) {
            const int64_t ih = oh * a.stride[0] - a.pad_begin[0] + kh * a.dilation[0];
            if (ih < 0 || ih >= H) continue;
            for (int64_t ow = 0; ow < OW; ++ow) {
              const int64_t iw = ow * a.stride[1] - a.pad_begin[1] + kw * a.dilation[1];
              if (iw >= 0 && iw < W) acc += gp[oh * OW + ow] * xp[ih * W + iw];
            }
          }
        }
        dw[(p * KH + kh) * KW + kw] = acc;
      }
  });
}

// ---- pooling loops -----------------------------------------------------------------------------
namespace {

struct PoolGeom {
  int64_t N, C, H, W, OH, OW;
};

// Max pooling over dense double planes: values (if vals) and/or flat indices (if idx).
void max_pool_loop(const double* x, const PoolGeom& g, const ember_pool_attrs& a, double* vals, int64_t* idx) {
  parallel_for(parallel_worth(g.N * g.C * g.OH * g.OW * a.kernel[0] * a.kernel[1]), g.N * g.C, [&](int64_t p) {
    const double* xp = x + p * g.H * g.W;
    for (int64_t oh = 0; oh < g.OH; ++oh)
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        const int64_t h0 = oh * a.stride[0] - a.pad_begin[0], w0 = ow * a.stride[1] - a.pad_begin[1];
        const int64_t h_lo = std::max<int64_t>(h0, 0), h_hi = std::min(h0 + a.kernel[0], g.H);
        const int64_t w_lo = std::max<int64_t>(w0, 0), w_hi = std::min(w0 + a.kernel[1], g.W);
        double best = -INFINITY;
        int64_t arg = -1;
        for (int64_t ih = h_lo; ih < h_hi; ++ih)
          for (int64_t iw = w_lo; iw < w_hi; ++iw) {
            const double v = xp[ih * g.W + iw];
            if (arg < 0 || v > best || (std::isnan(v) && !std::isnan(best))) {
              best = v;
              arg = ih * g.W + iw;
            }
          }
        const int64_t o = (p * g.OH + oh) * g.OW + ow;
        if (vals) vals[o] = best;
        if (idx) idx[o] = arg < 0 ? 0 : arg;
      }
  });
}

double avg_divisor(const ember_pool_attrs& a, const PoolGeom& g, int64_t h0, int64_t w0) {
  if (a.count_include_pad) {
    const int64_t hh = std::min(h0 + a.kernel[0], g.H + a.pad_end[0]) - h0;
    const int64_t ww = std::min(w0 + a.kernel[1], g.W + a.pad_end[1]) - w0;
    return double(hh * ww);
  }
  const int64_t hh = std::min(h0 + a.kernel[0], g.H) - std::max<int64_t>(h0, 0);
  const int64_t ww = std::min(w0 + a.kernel[1], g.W) - std::max<int64_t>(w0, 0);
  return hh > 0 && ww > 0 ? double(hh * ww) : 0.0;
}

void avg_pool_loop(const double* x, const PoolGeom& g, const ember_pool_attrs& a, double* y) {
  parallel_for(parallel_worth(g.N * g.C * g.OH * g.OW * a.kernel[0] * a.kernel[1]), g.N * g.C, [&](int64_t p) {
    const double* xp = x + p * g.H * g.W;
    for (int64_t oh = 0; oh < g.OH; ++oh)
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        const int64_t h0 = oh * a.stride[0] - a.pad_begin[0], w0 = ow * a.stride[1] - a.pad_begin[1];
        double s = 0;
        for (int64_t ih = std::max<int64_t>(h0, 0); ih < std::min(h0 + a.kernel[0], g.H); ++ih)
          for (int64_t iw = std::max<int64_t>(w0, 0); iw < std::min(w0 + a.kernel[1], g.W); ++iw) s += xp[ih * g.W + iw];
        const double div = avg_divisor(a, g, h0, w0);
        y[(p * g.OH + oh) * g.OW + ow] = div > 0 ? s / div : 0.0;
      }
  });
}

// dx plane (n, c) gathers the share of every window that covers each element.
void avg_pool_backward_loop(const double* dy, const PoolGeom& g, const ember_pool_attrs& a, double* dx) {
  parallel_for(parallel_worth(g.N * g.C * g.OH * g.OW * a.kernel[0] * a.kernel[1]), g.N * g.C, [&](int64_t p) {
    double* out = dx + p * g.H * g.W;
    std::fill(out, out + g.H * g.W, 0.0);
    const double* gp = dy + p * g.OH * g.OW;
    for (int64_t oh = 0; oh < g.OH; ++oh)
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        const int64_t h0 = oh * a.stride[0] - a.pad_begin[0], w0 = ow * a.stride[1] - a.pad_begin[1];
        const double div = avg_divisor(a, g, h0, w0);
        if (div == 0) continue;
        const double v = gp[oh * g.OW + ow] / div;
        for (int64_t ih = std::max<int64_t>(h0, 0); ih < std::min(h0 + a.kernel[0], g.H); ++ih)
          for (int64_t iw = std::max<int64_t>(w0, 0); iw < std::min(w0 + a.kernel[1], g.W); ++iw) out[ih * g.W + iw] += v;
      }
  });
}

}  // namespace

// Pooling calls that conv_dnnl.cpp does not serve with oneDNN: f64, max-pool indices and the
// avg-pool backward (all dtypes, computed in double).
int32_t pool_loops(int32_t op, const ember_tensor_desc& in, const ember_tensor_desc& out, const ember_pool_attrs& a,
                   ember_status* st) {
  const bool backward = op == EMBER_LIB_AVG_POOL2D_BACKWARD;
  const ember_tensor_desc& big = backward ? out : in;
  const ember_tensor_desc& small = backward ? in : out;
  PoolGeom g{big.shape[0], big.shape[1], big.shape[2], big.shape[3], small.shape[2], small.shape[3]};
  std::vector<double> x = pack_dense<double>(in);
  if (op == EMBER_LIB_MAX_POOL2D_INDICES) {
    if (out.dtype != EMBER_I64) return set_status(st, EMBER_ERR_INVALID, "max_pool2d indices: output must be i64");
    std::vector<int64_t> idx(size_t(desc_numel(out)));
    max_pool_loop(x.data(), g, a, nullptr, idx.data());
    for (int64_t i = 0; i < int64_t(idx.size()); ++i)
      static_cast<int64_t*>(out.buffer->data)[offset_of(out, i)] = idx[size_t(i)];
    return EMBER_OK;
  }
  std::vector<double> y(size_t(desc_numel(out)));
  if (op == EMBER_LIB_MAX_POOL2D) max_pool_loop(x.data(), g, a, y.data(), nullptr);
  else if (op == EMBER_LIB_AVG_POOL2D) avg_pool_loop(x.data(), g, a, y.data());
  else avg_pool_backward_loop(x.data(), g, a, y.data());
  unpack_dense(y, out);
  return EMBER_OK;
}

// ---- sorting, top-k and scans: one row along `dim` per iteration ------------------------------
namespace {

// Offsets of row r (over every dim but `dim`, row-major) in x and y.
void row_offsets(const ember_tensor_desc& x, const ember_tensor_desc& y, int dim, int64_t r, int64_t& ox,
                 int64_t& oy) {
  ox = x.offset;
  oy = y.offset;
  for (int i = y.rank - 1; i >= 0; --i) {
    if (i == dim) continue;
    const int64_t k = r % y.shape[i];
    r /= y.shape[i];
    ox += k * x.strides[i];
    oy += k * y.strides[i];
  }
}

// Sort keys: doubles with NaN mapped above +inf by a flag, or integers.
template <class K>
struct Keyed {
  K key;
  int64_t index;
};

template <class K>
bool less_key(const K& a, const K& b) {
  if constexpr (std::is_floating_point_v<K>) {
    if (std::isnan(a)) return false;
    if (std::isnan(b)) return true;
  }
  return a < b;
}

template <class K>
void sort_rows(const ember_tensor_desc& x, const ember_tensor_desc& y, const ember_sort_attrs& a, bool topk) {
  const int dim = a.dim;
  const int64_t len = x.shape[dim], n_out = topk ? a.k : len;
  const int64_t rows = len == 0 ? 0 : desc_numel(x) / len;
  const bool desc = a.descending != 0;
  const void* px = x.buffer ? x.buffer->data : nullptr;
  int64_t* py = static_cast<int64_t*>(y.buffer->data);
  const bool fl = is_float(x.dtype);
  parallel_for_with(parallel_worth(rows * len * 8) && rows > 1, rows,
                    [&] { return std::vector<Keyed<K>>(static_cast<size_t>(len)); },
                    [&](std::vector<Keyed<K>>& row, int64_t r) {
      int64_t ox, oy;
      row_offsets(x, y, dim, r, ox, oy);
      for (int64_t i = 0; i < len; ++i) {
        const int64_t off = ox + i * x.strides[dim];
        row[size_t(i)] = {fl ? K(load_f(px, x.dtype, off)) : K(load_i(px, x.dtype, off)), i};
      }
      // Ties are ordered by index, which makes any sort stable and top-k deterministic.
      auto cmp = [desc](const Keyed<K>& p, const Keyed<K>& q) {
        if (desc ? less_key(q.key, p.key) : less_key(p.key, q.key)) return true;
        if (desc ? less_key(p.key, q.key) : less_key(q.key, p.key)) return false;
        return p.index < q.index;
      };
      if (topk && n_out < len) std::partial_sort(row.begin(), row.begin() + n_out, row.end(), cmp);
      else std::sort(row.begin(), row.end(), cmp);
      for (int64_t i = 0; i < n_out; ++i) py[oy + i * y.strides[dim]] = row[size_t(i)].index;
  });
}

template <class K>
void scan_rows(int32_t op, const ember_tensor_desc& x, const ember_tensor_desc& y, const ember_scan_attrs& a) {
  const int dim = a.dim;
  const int64_t len = x.shape[dim];
  const int64_t rows = len == 0 ? 0 : desc_numel(x) / len;
  const void* px = x.buffer->data;
  void* py = y.buffer->data;
  const int64_t sx = x.strides[dim], sy = y.strides[dim];
  parallel_for(parallel_worth(rows * len) && rows > 1, rows, [&](int64_t r) {
    int64_t ox, oy;
    row_offsets(x, y, dim, r, ox, oy);
    auto get = [&](int64_t i) { return std::is_floating_point_v<K> ? K(load_f(px, x.dtype, ox + i * sx)) : K(load_i(px, x.dtype, ox + i * sx)); };
    if (op == EMBER_LIB_CUMSUM || op == EMBER_LIB_CUMPROD) {
      const bool prod = op == EMBER_LIB_CUMPROD, rev = op == EMBER_LIB_CUMSUM && a.reverse;
      using Acc = std::conditional_t<std::is_floating_point_v<K>, double, uint64_t>;
      Acc acc = prod ? Acc(1) : Acc(0);
      for (int64_t s = 0; s < len; ++s) {
        const int64_t i = rev ? len - 1 - s : s;
        const Acc v = Acc(get(i));
        acc = prod ? Acc(acc * v) : Acc(acc + v);
        if constexpr (std::is_floating_point_v<K>) store_f(py, y.dtype, oy + i * sy, acc);
        else store_i(py, y.dtype, oy + i * sy, int64_t(acc));
      }
      return;  // (this row's loop body)
    }
    const bool is_max = op == EMBER_LIB_CUMMAX_INDICES;
    K best{};
    int64_t arg = 0;
    for (int64_t i = 0; i < len; ++i) {
      const K v = get(i);
      bool take = i == 0;
      if (!take) {
        if constexpr (std::is_floating_point_v<K>) take = std::isnan(v) || (!std::isnan(best) && (is_max ? v >= best : v <= best));
        else take = is_max ? v >= best : v <= best;
      }
      if (take) {
        best = v;
        arg = i;
      }
      static_cast<int64_t*>(py)[oy + i * sy] = arg;
    }
  });
}

}  // namespace

int32_t sort_scan_library(int32_t op, const ember_tensor_desc& in, const ember_tensor_desc& out, const void* attrs,
                          ember_status* st) {
  const bool fl = is_float(in.dtype);
  if (op == EMBER_LIB_ARGSORT || op == EMBER_LIB_TOPK) {
    const auto& a = *static_cast<const ember_sort_attrs*>(attrs);
    if (a.dim < 0 || a.dim >= in.rank || out.dtype != EMBER_I64)
      return set_status(st, EMBER_ERR_INVALID, "sort: bad dim %d or index dtype", a.dim);
    // u64 keys sort as unsigned (K = uint64_t: load_i returns the bits).
    if (fl) sort_rows<double>(in, out, a, op == EMBER_LIB_TOPK);
    else if (in.dtype == EMBER_U64) sort_rows<uint64_t>(in, out, a, op == EMBER_LIB_TOPK);
    else sort_rows<int64_t>(in, out, a, op == EMBER_LIB_TOPK);
    return EMBER_OK;
  }
  const auto& a = *static_cast<const ember_scan_attrs*>(attrs);
  if (a.dim < 0 || a.dim >= in.rank) return set_status(st, EMBER_ERR_INVALID, "scan: bad dim %d", a.dim);
  if (fl) scan_rows<double>(op, in, out, a);
  else if (in.dtype == EMBER_U64) scan_rows<uint64_t>(op, in, out, a);
  else scan_rows<int64_t>(op, in, out, a);
  return EMBER_OK;
}

}  // namespace ember::cpu
