// The reference backend's library calls other than matmul (abi.h: EMBER_LIB_CONV2D ... INDEX_ADD):
// the most direct scalar loops, one output element at a time, floats accumulated in double. They
// are the oracle the CPU backend's oneDNN and OpenMP code is tested against, so they share no code
// with it: convolution is the defining sum, sorting is an insertion sort, scans are one pass.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "backend/abi.h"
#include "backend/library_attrs.h"
#include "backend/common/host_memory.h"
#include "ember/dtype.h"

using ember::host::set_status;

namespace ember::ref {

namespace {

bool is_float(int32_t dt) { return dt == EMBER_F32 || dt == EMBER_F64 || dt == EMBER_F16 || dt == EMBER_BF16; }

// Element `off` of a buffer, as double (floats) or int64 (others).
double getf(const ember_tensor_desc& d, int64_t off) {
  const void* p = d.buffer->data;
  switch (d.dtype) {
    case EMBER_F32: return static_cast<const float*>(p)[off];
    case EMBER_F64: return static_cast<const double*>(p)[off];
    case EMBER_F16: return ember::half_to_float(static_cast<const uint16_t*>(p)[off]);
    case EMBER_BF16: return ember::bf16_to_float(static_cast<const uint16_t*>(p)[off]);
    default: return 0;
  }
}
int64_t geti(const ember_tensor_desc& d, int64_t off) {
  const void* p = d.buffer->data;
  switch (d.dtype) {
    case EMBER_I32: return static_cast<const int32_t*>(p)[off];
    case EMBER_I64: return static_cast<const int64_t*>(p)[off];
    case EMBER_U8: return static_cast<const uint8_t*>(p)[off];
    case EMBER_BOOL: return static_cast<const uint8_t*>(p)[off] != 0;
    case EMBER_I8: return static_cast<const int8_t*>(p)[off];
    case EMBER_I16: return static_cast<const int16_t*>(p)[off];
    case EMBER_U16: return static_cast<const uint16_t*>(p)[off];
    case EMBER_U32: return static_cast<const uint32_t*>(p)[off];
    case EMBER_U64: return int64_t(static_cast<const uint64_t*>(p)[off]);  // the bits
    default: return 0;
  }
}
// Order of two integers of d's dtype (u64 compares its bits unsigned).
bool int_less(const ember_tensor_desc& d, int64_t a, int64_t b) {
  return d.dtype == EMBER_U64 ? uint64_t(a) < uint64_t(b) : a < b;
}
void setf(const ember_tensor_desc& d, int64_t off, double v) {
  void* p = d.buffer->data;
  switch (d.dtype) {
    case EMBER_F32: static_cast<float*>(p)[off] = float(v); break;
    case EMBER_F64: static_cast<double*>(p)[off] = v; break;
    case EMBER_F16: static_cast<uint16_t*>(p)[off] = ember::float_to_half(float(v)); break;
    case EMBER_BF16: static_cast<uint16_t*>(p)[off] = ember::float_to_bf16(float(v)); break;
    default: break;
  }
}
void seti(const ember_tensor_desc& d, int64_t off, int64_t v) {
  void* p = d.buffer->data;
  switch (d.dtype) {
    case EMBER_I32: static_cast<int32_t*>(p)[off] = int32_t(v); break;
    case EMBER_I64: static_cast<int64_t*>(p)[off] = v; break;
    case EMBER_U8: static_cast<uint8_t*>(p)[off] = uint8_t(v); break;
    case EMBER_BOOL: static_cast<uint8_t*>(p)[off] = v != 0; break;
    case EMBER_I8: static_cast<int8_t*>(p)[off] = int8_t(v); break;
    case EMBER_I16: static_cast<int16_t*>(p)[off] = int16_t(v); break;
    case EMBER_U16: static_cast<uint16_t*>(p)[off] = uint16_t(v); break;
    case EMBER_U32: static_cast<uint32_t*>(p)[off] = uint32_t(v); break;
    case EMBER_U64: static_cast<uint64_t*>(p)[off] = uint64_t(v); break;
    default: break;
  }
}

// Offset of element (a, b, c, e) of a rank-4 descriptor.
int64_t at4(const ember_tensor_desc& d, int64_t a, int64_t b, int64_t c, int64_t e) {
  return d.offset + a * d.strides[0] + b * d.strides[1] + c * d.strides[2] + e * d.strides[3];
}

int64_t numel(const ember_tensor_desc& d) {
  int64_t n = 1;
  for (int i = 0; i < d.rank; ++i) n *= d.shape[i];
  return n;
}

// ---- convolution -----------------------------------------------------------------------------
int32_t conv2d(const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc& y, const ember_conv_attrs& a) {
  const ember_tensor_desc &x = in[0], &w = in[1];
  const int64_t N = y.shape[0], O = y.shape[1], OH = y.shape[2], OW = y.shape[3];
  const int64_t H = x.shape[2], W = x.shape[3], Cg = w.shape[1], KH = w.shape[2], KW = w.shape[3];
  const int64_t Og = O / a.groups;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = n_in == 3 ? getf(in[2], in[2].offset + o * in[2].strides[0]) : 0.0;
          const int64_t g = o / Og;
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t ih = oh * a.stride[0] - a.pad_begin[0] + kh * a.dilation[0];
                const int64_t iw = ow * a.stride[1] - a.pad_begin[1] + kw * a.dilation[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                acc += getf(x, at4(x, n, g * Cg + c, ih, iw)) * getf(w, at4(w, o, c, kh, kw));
              }
          setf(y, at4(y, n, o, oh, ow), acc);
        }
  return EMBER_OK;
}

// dx[n, g*Cg + c, ih, iw] = sum of dy[n, o, oh, ow] * w[o, c, kh, kw] over the taps that read it.
int32_t conv2d_backward_data(const ember_tensor_desc& dy, const ember_tensor_desc& w, const ember_tensor_desc& dx,
                             const ember_conv_attrs& a) {
  const int64_t N = dx.shape[0], C = dx.shape[1], H = dx.shape[2], W = dx.shape[3];
  const int64_t O = dy.shape[1], OH = dy.shape[2], OW = dy.shape[3];
  const int64_t Cg = w.shape[1], KH = w.shape[2], KW = w.shape[3], Og = O / a.groups;
  std::vector<double> acc(size_t(N * C * H * W), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          const double gy = getf(dy, at4(dy, n, o, oh, ow));
          const int64_t g = o / Og;
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t ih = oh * a.stride[0] - a.pad_begin[0] + kh * a.dilation[0];
                const int64_t iw = ow * a.stride[1] - a.pad_begin[1] + kw * a.dilation[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                acc[size_t(((n * C + g * Cg + c) * H + ih) * W + iw)] += gy * getf(w, at4(w, o, c, kh, kw));
              }
        }
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t e = 0; e < W; ++e) setf(dx, at4(dx, n, c, h, e), acc[size_t(((n * C + c) * H + h) * W + e)]);
  return EMBER_OK;
}

// dw[o, c, kh, kw] = sum over n, oh, ow of dy[n, o, oh, ow] * x[n, g*Cg + c, ih, iw].
int32_t conv2d_backward_weights(const ember_tensor_desc& x, const ember_tensor_desc& dy, const ember_tensor_desc& dw,
                                const ember_conv_attrs& a) {
  const int64_t N = x.shape[0], H = x.shape[2], W = x.shape[3];
  const int64_t O = dy.shape[1], OH = dy.shape[2], OW = dy.shape[3];
  const int64_t Cg = dw.shape[1], KH = dw.shape[2], KW = dw.shape[3], Og = O / a.groups;
  for (int64_t o = 0; o < O; ++o)
    for (int64_t c = 0; c < Cg; ++c)
      for (int64_t kh = 0; kh < KH; ++kh)
        for (int64_t kw = 0; kw < KW; ++kw) {
          double acc = 0;
          const int64_t g = o / Og;
          for (int64_t n = 0; n < N; ++n)
            for (int64_t oh = 0; oh < OH; ++oh)
              for (int64_t ow = 0; ow < OW; ++ow) {
                const int64_t ih = oh * a.stride[0] - a.pad_begin[0] + kh * a.dilation[0];
                const int64_t iw = ow * a.stride[1] - a.pad_begin[1] + kw * a.dilation[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                acc += getf(dy, at4(dy, n, o, oh, ow)) * getf(x, at4(x, n, g * Cg + c, ih, iw));
              }
          setf(dw, at4(dw, o, c, kh, kw), acc);
        }
  return EMBER_OK;
}

// ---- pooling ---------------------------------------------------------------------------------
// Calls f(ih, iw) for each input element inside the window of output (oh, ow).
template <class F>
void window(const ember_pool_attrs& a, int64_t H, int64_t W, int64_t oh, int64_t ow, F f) {
  for (int64_t kh = 0; kh < a.kernel[0]; ++kh)
    for (int64_t kw = 0; kw < a.kernel[1]; ++kw) {
      const int64_t ih = oh * a.stride[0] - a.pad_begin[0] + kh, iw = ow * a.stride[1] - a.pad_begin[1] + kw;
      if (ih >= 0 && ih < H && iw >= 0 && iw < W) f(ih, iw);
    }
}

// The divisor of an average-pooling window.
double avg_divisor(const ember_pool_attrs& a, int64_t H, int64_t W, int64_t oh, int64_t ow) {
  const int64_t h0 = oh * a.stride[0] - a.pad_begin[0], w0 = ow * a.stride[1] - a.pad_begin[1];
  int64_t count = 0;
  if (a.count_include_pad) {
    for (int64_t kh = 0; kh < a.kernel[0]; ++kh)
      for (int64_t kw = 0; kw < a.kernel[1]; ++kw) {
        const int64_t ih = h0 + kh, iw = w0 + kw;
        if (ih < H + a.pad_end[0] && iw < W + a.pad_end[1]) ++count;
      }
  } else {
    window(a, H, W, oh, ow, [&](int64_t, int64_t) { ++count; });
  }
  return double(count);
}


// The first maximum of window (oh, ow) of x[n, c] (NaN wins; first of equal values): false for an
// empty window, else its value and its row-major index ih * W + iw.
bool window_max(const ember_tensor_desc& x, const ember_pool_attrs& a, int64_t H, int64_t W, int64_t n, int64_t c,
                int64_t oh, int64_t ow, double& best, int64_t& arg) {
  bool have = false;
  window(a, H, W, oh, ow, [&](int64_t ih, int64_t iw) {
    const double v = getf(x, at4(x, n, c, ih, iw));
    if (!have || (std::isnan(v) && !std::isnan(best)) || v > best) {
      have = true;
      best = v;
      arg = ih * W + iw;
    }
  });
  return have;
}
// Max pooling with two outputs writes the indices to `indices` too (null: none).
int32_t pool2d(int32_t op, const ember_tensor_desc& x, const ember_tensor_desc& y, const ember_pool_attrs& a,
               const ember_tensor_desc* indices = nullptr) {
  const int64_t N = y.shape[0], C = y.shape[1], OH = y.shape[2], OW = y.shape[3], H = x.shape[2], W = x.shape[3];
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          if (op == EMBER_LIB_AVG_POOL2D) {
            double s = 0;
            window(a, H, W, oh, ow, [&](int64_t ih, int64_t iw) { s += getf(x, at4(x, n, c, ih, iw)); });
            const double div = avg_divisor(a, H, W, oh, ow);
            setf(y, at4(y, n, c, oh, ow), div > 0 ? s / div : 0.0);
            continue;
          }
          double best = 0;
          int64_t arg = 0;
          const bool have = window_max(x, a, H, W, n, c, oh, ow, best, arg);
          if (!have) best = -INFINITY;
          if (op == EMBER_LIB_MAX_POOL2D) setf(y, at4(y, n, c, oh, ow), best);
          else seti(y, at4(y, n, c, oh, ow), arg);
          if (indices) seti(*indices, at4(*indices, n, c, oh, ow), arg);
        }
  return EMBER_OK;
}

// dy added at the first maximum of each window of x (the index pool2d gives), summed in double.
int32_t max_pool2d_backward(const ember_tensor_desc& dy, const ember_tensor_desc& x, const ember_tensor_desc& dx,
                            const ember_pool_attrs& a) {
  const int64_t N = dx.shape[0], C = dx.shape[1], H = dx.shape[2], W = dx.shape[3];
  const int64_t OH = dy.shape[2], OW = dy.shape[3];
  std::vector<double> acc(size_t(N * C * H * W), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double best = 0;
          int64_t arg = 0;
          const bool have = window_max(x, a, H, W, n, c, oh, ow, best, arg);
          if (have) acc[size_t((n * C + c) * H * W + arg)] += getf(dy, at4(dy, n, c, oh, ow));
        }
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t e = 0; e < W; ++e) setf(dx, at4(dx, n, c, h, e), acc[size_t(((n * C + c) * H + h) * W + e)]);
  return EMBER_OK;
}

int32_t avg_pool2d_backward(const ember_tensor_desc& dy, const ember_tensor_desc& dx, const ember_pool_attrs& a) {
  const int64_t N = dx.shape[0], C = dx.shape[1], H = dx.shape[2], W = dx.shape[3];
  const int64_t OH = dy.shape[2], OW = dy.shape[3];
  std::vector<double> acc(size_t(N * C * H * W), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          const double div = avg_divisor(a, H, W, oh, ow);
          if (div == 0) continue;
          const double g = getf(dy, at4(dy, n, c, oh, ow)) / div;
          window(a, H, W, oh, ow, [&](int64_t ih, int64_t iw) { acc[size_t(((n * C + c) * H + ih) * W + iw)] += g; });
        }
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t e = 0; e < W; ++e) setf(dx, at4(dx, n, c, h, e), acc[size_t(((n * C + c) * H + h) * W + e)]);
  return EMBER_OK;
}

// ---- rows along a dim (sorting and scans) ----------------------------------------------------
// Calls f(in_start, out_start) for every row along `dim` of the (equal-rank) descriptors x and y,
// iterating over the other dims of y.
template <class F>
void rows(const ember_tensor_desc& x, const ember_tensor_desc& y, int dim, F f) {
  std::vector<int64_t> idx(size_t(y.rank), 0);
  for (int d = 0; d < y.rank; ++d)
    if (d != dim && y.shape[d] == 0) return;
  while (true) {
    int64_t ox = x.offset, oy = y.offset;
    for (int d = 0; d < y.rank; ++d) {
      ox += idx[size_t(d)] * x.strides[d];
      oy += idx[size_t(d)] * y.strides[d];
    }
    f(ox, oy);
    int d = y.rank - 1;
    for (; d >= 0; --d) {
      if (d == dim) continue;
      if (++idx[size_t(d)] < y.shape[d]) break;
      idx[size_t(d)] = 0;
    }
    if (d < 0) return;
  }
}

// Total order of sort keys: numbers by value, NaN above everything. Returns a < b.
bool key_less(const ember_tensor_desc& x, int64_t oa, int64_t ob) {
  if (is_float(x.dtype)) {
    const double a = getf(x, oa), b = getf(x, ob);
    if (std::isnan(a)) return false;
    if (std::isnan(b)) return true;
    return a < b;
  }
  return int_less(x, geti(x, oa), geti(x, ob));
}

// Stable insertion sort of one row's indices.
std::vector<int64_t> sorted_row(const ember_tensor_desc& x, int64_t start, int64_t stride, int64_t len, bool desc) {
  std::vector<int64_t> order;
  for (int64_t i = 0; i < len; ++i) {
    size_t pos = order.size();
    // Move left past every element that must come after i (strictly, so ties keep index order).
    while (pos > 0) {
      const int64_t j = order[pos - 1];
      const bool after = desc ? key_less(x, start + j * stride, start + i * stride)
                              : key_less(x, start + i * stride, start + j * stride);
      if (!after) break;
      --pos;
    }
    order.insert(order.begin() + std::ptrdiff_t(pos), i);
  }
  return order;
}

int32_t sort_op(int32_t op, const ember_tensor_desc& x, const ember_tensor_desc& y, const ember_sort_attrs& a) {
  const int dim = a.dim;
  const int64_t len = x.shape[dim];
  rows(x, y, dim, [&](int64_t ox, int64_t oy) {
    std::vector<int64_t> order = sorted_row(x, ox, x.strides[dim], len, a.descending != 0);
    const int64_t n = op == EMBER_LIB_TOPK ? a.k : len;
    for (int64_t i = 0; i < n; ++i) seti(y, oy + i * y.strides[dim], order[size_t(i)]);
  });
  return EMBER_OK;
}

int32_t scan_op(int32_t op, const ember_tensor_desc& x, const ember_tensor_desc& y, const ember_scan_attrs& a) {
  const int dim = a.dim;
  const int64_t len = x.shape[dim], sx = x.strides[dim], sy = y.strides[dim];
  const bool fl = is_float(x.dtype);
  rows(x, y, dim, [&](int64_t ox, int64_t oy) {
    if (op == EMBER_LIB_CUMSUM || op == EMBER_LIB_CUMPROD) {
      const bool prod = op == EMBER_LIB_CUMPROD;
      double accf = prod ? 1 : 0;
      uint64_t acci = prod ? 1 : 0;
      for (int64_t s = 0; s < len; ++s) {
        const int64_t i = (op == EMBER_LIB_CUMSUM && a.reverse) ? len - 1 - s : s;
        if (fl) {
          const double v = getf(x, ox + i * sx);
          accf = prod ? accf * v : accf + v;
          setf(y, oy + i * sy, accf);
        } else {
          const uint64_t v = uint64_t(geti(x, ox + i * sx));
          acci = prod ? acci * v : acci + v;
          seti(y, oy + i * sy, int64_t(acci));
        }
      }
      return;
    }
    const bool is_max = op == EMBER_LIB_CUMMAX_INDICES;
    int64_t best = 0;
    for (int64_t i = 0; i < len; ++i) {
      bool take;
      if (i == 0) {
        take = true;
      } else if (fl) {
        const double v = getf(x, ox + i * sx), b = getf(x, ox + best * sx);
        take = std::isnan(v) || (!std::isnan(b) && (is_max ? v >= b : v <= b));
      } else {
        const int64_t v = geti(x, ox + i * sx), b = geti(x, ox + best * sx);
        take = is_max ? !int_less(x, v, b) : !int_less(x, b, v);
      }
      if (take) best = i;
      seti(y, oy + i * sy, best);
    }
  });
  return EMBER_OK;
}

// Scaled dot-product attention, one query row at a time: the row's scores (S doubles, never
// L x S), their maximum and logsumexp, then o = sum_j exp(s_j - lse) v_j. All in double.
// Whether d is [B, rows, cols].
bool shaped(const ember_tensor_desc& d, int64_t B, int64_t rows, int64_t cols) {
  return d.rank == 3 && d.shape[0] == B && d.shape[1] == rows && d.shape[2] == cols;
}

int32_t attention(const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out, int32_t n_out,
                  const ember_attention_attrs& a, ember_status* st) {
  if (n_in < 3 || n_out != 2)
    return set_status(st, EMBER_ERR_INVALID, "reference backend: fused attention: %d inputs and %d outputs", n_in, n_out);
  const ember_tensor_desc &q = in[0], &k = in[1], &v = in[2], &y = out[0], &ly = out[1];
  const ember_tensor_desc* mask = n_in > 3 ? &in[3] : nullptr;
  if (q.rank != 3 || k.rank != 3 || v.rank != 3 || (mask && mask->rank != 3))
    return set_status(st, EMBER_ERR_INVALID, "reference backend: fused attention: bad operand ranks");
  const int64_t B = q.shape[0], L = q.shape[1], E = q.shape[2], S = k.shape[1], Ev = v.shape[2];
  if (!shaped(y, B, L, Ev) || ly.rank != 2 || ly.shape[0] != B || ly.shape[1] != L)
    return set_status(st, EMBER_ERR_INVALID, "reference backend: fused attention: output shapes mismatch");
  const double inf = INFINITY;
  std::vector<double> s(size_t(S > 0 ? S : 1));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < L; ++i) {
      double mx = -inf;
      for (int64_t j = 0; j < S; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < E; ++e)
          dot += getf(q, q.offset + b * q.strides[0] + i * q.strides[1] + e * q.strides[2]) *
                 getf(k, k.offset + b * k.strides[0] + j * k.strides[1] + e * k.strides[2]);
        double sj = dot * a.scale;
        if (mask) sj += getf(*mask, mask->offset + b * mask->strides[0] + i * mask->strides[1] + j * mask->strides[2]);
        if (a.causal && j > i) sj = -inf;
        s[size_t(j)] = sj;
        mx = std::max(mx, sj);
      }
      double sum = 0;
      if (mx > -inf)
        for (int64_t j = 0; j < S; ++j) sum += std::exp(s[size_t(j)] - mx);
      const double lse = sum > 0 ? mx + std::log(sum) : -inf;
      for (int64_t c = 0; c < Ev; ++c) {
        double acc = 0;
        for (int64_t j = 0; j < S && lse > -inf; ++j)
          acc += std::exp(s[size_t(j)] - lse) * getf(v, v.offset + b * v.strides[0] + j * v.strides[1] + c * v.strides[2]);
        setf(y, y.offset + (b * L + i) * Ev + c, lse > -inf ? acc : NAN);
      }
      setf(ly, ly.offset + b * L + i, lse);
    }
  return EMBER_OK;
}

// Its gradient, one query row at a time in double: the row's scores and probabilities (S
// values), then dv_j += p_j do, ds_j = p_j (do . v_j - d), dq += ds_j k_j scale, dk_j += ds_j q
// scale (dk and dv summed over the rows in double, rounded once).
int32_t attention_backward(const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out, int32_t n_out,
                           const ember_attention_attrs& a, ember_status* st) {
  if (n_in < 6 || n_out != 3)
    return set_status(st, EMBER_ERR_INVALID, "reference backend: fused attention backward: bad operands");
  const ember_tensor_desc &q = in[0], &k = in[1], &v = in[2], &lse = in[3], &dd = in[4], &dout = in[5];
  const ember_tensor_desc &gq = out[0], &gk = out[1], &gv = out[2];
  const ember_tensor_desc* mask = n_in > 6 ? &in[6] : nullptr;
  const int64_t B = q.shape[0], L = q.shape[1], E = q.shape[2], S = k.shape[1], Ev = v.shape[2];
  if (!shaped(gq, B, L, E) || !shaped(gk, B, S, E) || !shaped(gv, B, S, Ev))
    return set_status(st, EMBER_ERR_INVALID, "reference backend: fused attention backward: output shapes mismatch");
  auto at = [](const ember_tensor_desc& d, int64_t b, int64_t i, int64_t j) {
    return getf(d, d.offset + b * d.strides[0] + i * d.strides[1] + j * d.strides[2]);
  };
  const double inf = INFINITY;
  std::vector<double> p(size_t(S > 0 ? S : 1)), dk(size_t(S * E)), dv(size_t(S * Ev)), dq(size_t(E > 0 ? E : 1));
  for (int64_t b = 0; b < B; ++b) {
    std::fill(dk.begin(), dk.end(), 0.0);
    std::fill(dv.begin(), dv.end(), 0.0);
    for (int64_t i = 0; i < L; ++i) {
      const double l = getf(lse, lse.offset + b * lse.strides[0] + i * lse.strides[1]);
      const double d = getf(dd, dd.offset + b * dd.strides[0] + i * dd.strides[1]);
      std::fill(dq.begin(), dq.end(), 0.0);
      for (int64_t j = 0; j < S; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < E; ++e) dot += at(q, b, i, e) * at(k, b, j, e);
        double sj = dot * a.scale;
        if (mask) sj += at(*mask, b, i, j);
        if (a.causal && j > i) sj = -inf;
        const double pj = sj == -inf ? 0.0 : std::exp(sj - l);
        double dp = 0;
        for (int64_t c = 0; c < Ev; ++c) {
          const double g = at(dout, b, i, c);
          dv[size_t(j * Ev + c)] += pj * g;
          dp += g * at(v, b, j, c);
        }
        const double ds = pj * (dp - d) * a.scale;
        for (int64_t e = 0; e < E; ++e) {
          dq[size_t(e)] += ds * at(k, b, j, e);
          dk[size_t(j * E + e)] += ds * at(q, b, i, e);
        }
      }
      for (int64_t e = 0; e < E; ++e) setf(gq, gq.offset + (b * L + i) * E + e, dq[size_t(e)]);
    }
    for (int64_t j = 0; j < S; ++j) {
      for (int64_t e = 0; e < E; ++e) setf(gk, gk.offset + (b * S + j) * E + e, dk[size_t(j * E + e)]);
      for (int64_t c = 0; c < Ev; ++c) setf(gv, gv.offset + (b * S + j) * Ev + c, dv[size_t(j * Ev + c)]);
    }
  }
  return EMBER_OK;
}

// The LSTM recurrence, one step and one batch row at a time, in double: each step reads the
// previous h and c back from the outputs (as stored in the dtype), as the ABI defines them.
int64_t at3(const ember_tensor_desc& d, int64_t a, int64_t b, int64_t c) {
  return d.offset + a * d.strides[0] + b * d.strides[1] + c * d.strides[2];
}
int64_t at2(const ember_tensor_desc& d, int64_t a, int64_t b) { return d.offset + a * d.strides[0] + b * d.strides[1]; }
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

int32_t lstm_recurrence(const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out,
                        const ember_recurrence_attrs& a, ember_status* st) {
  if (n_in != 4) return set_status(st, EMBER_ERR_INVALID, "reference backend: lstm recurrence: %d inputs", n_in);
  const ember_tensor_desc &gi = in[0], &h0 = in[1], &c0 = in[2], &w = in[3], &h = out[0], &c = out[1], &gates = out[2];
  const int64_t L = gi.shape[0], N = gi.shape[1], H = gi.shape[2] / 4;
  if (gi.rank != 3 || !shaped(h, L, N, H) || !shaped(c, L, N, H) || !shaped(gates, L, N, 4 * H) || w.rank != 2 ||
      w.shape[0] != 4 * H || w.shape[1] != H)
    return set_status(st, EMBER_ERR_INVALID, "reference backend: lstm recurrence: operand shapes mismatch");
  std::vector<double> act(size_t(4 * H));
  for (int64_t s = 0; s < L; ++s) {
    const int64_t t = a.reverse ? L - 1 - s : s, prev = a.reverse ? t + 1 : t - 1;
    for (int64_t n = 0; n < N; ++n) {
      auto h_prev = [&](int64_t k) { return s == 0 ? getf(h0, at2(h0, n, k)) : getf(h, at3(h, prev, n, k)); };
      auto c_prev = [&](int64_t k) { return s == 0 ? getf(c0, at2(c0, n, k)) : getf(c, at3(c, prev, n, k)); };
      for (int64_t j = 0; j < 4 * H; ++j) {
        double x = getf(gi, at3(gi, t, n, j));
        for (int64_t k = 0; k < H; ++k) x += h_prev(k) * getf(w, at2(w, j, k));
        act[size_t(j)] = j >= 2 * H && j < 3 * H ? std::tanh(x) : sigmoid(x);
        setf(gates, at3(gates, t, n, j), act[size_t(j)]);
      }
      for (int64_t k = 0; k < H; ++k) {
        const double i = act[size_t(k)], f = act[size_t(H + k)], g = act[size_t(2 * H + k)], o = act[size_t(3 * H + k)];
        const double ct = f * c_prev(k) + i * g;
        setf(c, at3(c, t, n, k), ct);
        setf(h, at3(h, t, n, k), o * std::tanh(ct));
      }
    }
  }
  return EMBER_OK;
}

// Its gradient, backwards through time with the carries dh', dc' in double.
int32_t lstm_recurrence_backward(const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out,
                                 const ember_recurrence_attrs& a, ember_status* st) {
  if (n_in != 6)
    return set_status(st, EMBER_ERR_INVALID, "reference backend: lstm recurrence backward: %d inputs", n_in);
  const ember_tensor_desc &gates = in[0], &c = in[1], &c0 = in[2], &w = in[3], &dh = in[4], &dc = in[5];
  const ember_tensor_desc &da = out[0], &dh0 = out[1], &dc0 = out[2];
  const int64_t L = gates.shape[0], N = gates.shape[1], H = gates.shape[2] / 4;
  if (gates.rank != 3 || !shaped(c, L, N, H) || !shaped(dh, L, N, H) || !shaped(dc, L, N, H) ||
      !shaped(da, L, N, 4 * H) || w.rank != 2 || w.shape[0] != 4 * H || w.shape[1] != H)
    return set_status(st, EMBER_ERR_INVALID, "reference backend: lstm recurrence backward: operand shapes mismatch");
  std::vector<double> dh_next(size_t(N * H)), dc_next(size_t(N * H)), d(size_t(4 * H));
  for (int64_t s = L - 1; s >= 0; --s) {
    const int64_t t = a.reverse ? L - 1 - s : s, prev = a.reverse ? t + 1 : t - 1;
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t k = 0; k < H; ++k) {
        const double i = getf(gates, at3(gates, t, n, k)), f = getf(gates, at3(gates, t, n, H + k));
        const double g = getf(gates, at3(gates, t, n, 2 * H + k)), o = getf(gates, at3(gates, t, n, 3 * H + k));
        const double tc = std::tanh(getf(c, at3(c, t, n, k)));
        const double cp = s == 0 ? getf(c0, at2(c0, n, k)) : getf(c, at3(c, prev, n, k));
        const size_t e = size_t(n * H + k);
        const double dht = getf(dh, at3(dh, t, n, k)) + dh_next[e];
        const double dct = getf(dc, at3(dc, t, n, k)) + dc_next[e] + dht * o * (1 - tc * tc);
        d[size_t(k)] = dct * g * i * (1 - i);
        d[size_t(H + k)] = dct * cp * f * (1 - f);
        d[size_t(2 * H + k)] = dct * i * (1 - g * g);
        d[size_t(3 * H + k)] = dht * tc * o * (1 - o);
        dc_next[e] = dct * f;
      }
      for (int64_t j = 0; j < 4 * H; ++j) setf(da, at3(da, t, n, j), d[size_t(j)]);
      for (int64_t k = 0; k < H; ++k) {
        double acc = 0;
        for (int64_t j = 0; j < 4 * H; ++j) acc += d[size_t(j)] * getf(w, at2(w, j, k));
        dh_next[size_t(n * H + k)] = acc;
      }
    }
  }
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < H; ++k) {
      setf(dh0, at2(dh0, n, k), dh_next[size_t(n * H + k)]);
      setf(dc0, at2(dc0, n, k), dc_next[size_t(n * H + k)]);
    }
  return EMBER_OK;
}

// The GRU recurrence, as the LSTM's: one step and one batch row at a time, in double, the previous
// h read back from the output.
int32_t gru_recurrence(const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out,
                       const ember_recurrence_attrs& a, ember_status* st) {
  if (n_in != 4) return set_status(st, EMBER_ERR_INVALID, "reference backend: gru recurrence: %d inputs", n_in);
  const ember_tensor_desc &gi = in[0], &h0 = in[1], &w = in[2], &bias = in[3], &h = out[0], &gates = out[1],
                          &hn = out[2];
  const int64_t L = gi.shape[0], N = gi.shape[1], H = gi.shape[2] / 3;
  if (gi.rank != 3 || !shaped(h, L, N, H) || !shaped(gates, L, N, 3 * H) || !shaped(hn, L, N, H) || w.rank != 2 ||
      w.shape[0] != 3 * H || w.shape[1] != H || bias.rank != 1 || bias.shape[0] != 3 * H)
    return set_status(st, EMBER_ERR_INVALID, "reference backend: gru recurrence: operand shapes mismatch");
  std::vector<double> b(size_t(3 * H));
  for (int64_t s = 0; s < L; ++s) {
    const int64_t t = a.reverse ? L - 1 - s : s, prev = a.reverse ? t + 1 : t - 1;
    for (int64_t n = 0; n < N; ++n) {
      auto h_prev = [&](int64_t k) { return s == 0 ? getf(h0, at2(h0, n, k)) : getf(h, at3(h, prev, n, k)); };
      for (int64_t j = 0; j < 3 * H; ++j) {
        double x = getf(bias, bias.offset + j * bias.strides[0]);
        for (int64_t k = 0; k < H; ++k) x += h_prev(k) * getf(w, at2(w, j, k));
        b[size_t(j)] = x;
      }
      for (int64_t k = 0; k < H; ++k) {
        const double r = sigmoid(getf(gi, at3(gi, t, n, k)) + b[size_t(k)]);
        const double z = sigmoid(getf(gi, at3(gi, t, n, H + k)) + b[size_t(H + k)]);
        const double bn = b[size_t(2 * H + k)];
        const double nv = std::tanh(getf(gi, at3(gi, t, n, 2 * H + k)) + r * bn);
        setf(gates, at3(gates, t, n, k), r);
        setf(gates, at3(gates, t, n, H + k), z);
        setf(gates, at3(gates, t, n, 2 * H + k), nv);
        setf(hn, at3(hn, t, n, k), bn);
        setf(h, at3(h, t, n, k), nv + z * (h_prev(k) - nv));
      }
    }
  }
  return EMBER_OK;
}

int32_t gru_recurrence_backward(const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out,
                                const ember_recurrence_attrs& a, ember_status* st) {
  if (n_in != 6)
    return set_status(st, EMBER_ERR_INVALID, "reference backend: gru recurrence backward: %d inputs", n_in);
  const ember_tensor_desc &gates = in[0], &hn = in[1], &h = in[2], &h0 = in[3], &w = in[4], &dh = in[5];
  const ember_tensor_desc &dgi = out[0], &db = out[1], &dh0 = out[2];
  const int64_t L = gates.shape[0], N = gates.shape[1], H = gates.shape[2] / 3;
  if (gates.rank != 3 || !shaped(hn, L, N, H) || !shaped(h, L, N, H) || !shaped(dh, L, N, H) ||
      !shaped(dgi, L, N, 3 * H) || !shaped(db, L, N, 3 * H) || w.rank != 2 || w.shape[0] != 3 * H || w.shape[1] != H)
    return set_status(st, EMBER_ERR_INVALID, "reference backend: gru recurrence backward: operand shapes mismatch");
  std::vector<double> dh_next(static_cast<size_t>(N * H)), d(static_cast<size_t>(3 * H)), zc(static_cast<size_t>(H));
  for (int64_t s = L - 1; s >= 0; --s) {
    const int64_t t = a.reverse ? L - 1 - s : s, prev = a.reverse ? t + 1 : t - 1;
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t k = 0; k < H; ++k) {
        const double r = getf(gates, at3(gates, t, n, k)), z = getf(gates, at3(gates, t, n, H + k));
        const double nv = getf(gates, at3(gates, t, n, 2 * H + k)), bn = getf(hn, at3(hn, t, n, k));
        const double hp = s == 0 ? getf(h0, at2(h0, n, k)) : getf(h, at3(h, prev, n, k));
        const double dht = getf(dh, at3(dh, t, n, k)) + dh_next[size_t(n * H + k)];
        const double da_n = dht * (1 - z) * (1 - nv * nv);
        const double da_r = da_n * bn * r * (1 - r);
        const double da_z = dht * (hp - nv) * z * (1 - z);
        setf(dgi, at3(dgi, t, n, k), da_r);
        setf(dgi, at3(dgi, t, n, H + k), da_z);
        setf(dgi, at3(dgi, t, n, 2 * H + k), da_n);
        d[size_t(k)] = da_r;
        d[size_t(H + k)] = da_z;
        d[size_t(2 * H + k)] = da_n * r;
        zc[size_t(k)] = dht * z;
      }
      for (int64_t j = 0; j < 3 * H; ++j) setf(db, at3(db, t, n, j), d[size_t(j)]);
      for (int64_t k = 0; k < H; ++k) {
        double acc = zc[size_t(k)];
        for (int64_t j = 0; j < 3 * H; ++j) acc += d[size_t(j)] * getf(w, at2(w, j, k));
        dh_next[size_t(n * H + k)] = acc;
      }
    }
  }
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < H; ++k) setf(dh0, at2(dh0, n, k), dh_next[size_t(n * H + k)]);
  return EMBER_OK;
}

// out = 0, then out[..., index[n], ...] += src[..., n, ...] for n in order, one element at a time
// with every offset from the strides; sums in the dtype (f16 / bf16: in f32, rounded once), as
// abi.h states, so that every backend's result is the same bits.
int32_t index_add(const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc& out, const ember_index_attrs& a,
                  ember_status* st) {
  if (n_in != 2) return set_status(st, EMBER_ERR_INVALID, "reference backend: index_add: %d inputs", n_in);
  const ember_tensor_desc& src = in[0];
  const ember_tensor_desc& idx = in[1];
  const int r = src.rank, dim = a.dim;
  bool ok = r >= 1 && out.rank == r && dim >= 0 && dim < r && is_float(src.dtype) && out.dtype == src.dtype &&
            idx.dtype == EMBER_I64 && idx.rank == 1 && idx.shape[0] == src.shape[dim];
  for (int d = 0; ok && d < r; ++d) ok = d == dim || src.shape[d] == out.shape[d];
  if (!ok) return set_status(st, EMBER_ERR_INVALID, "reference backend: index_add: bad operands");
  const int64_t N = src.shape[dim], S = out.shape[dim];
  for (int64_t n = 0; n < N; ++n) {
    const int64_t v = geti(idx, idx.offset + n * idx.strides[0]);
    if (v < 0 || v >= S)
      return set_status(st, EMBER_ERR_INVALID, "reference backend: index_add: index %lld out of range for size %lld",
                        static_cast<long long>(v), static_cast<long long>(S));
  }
  int64_t total = 1;
  for (int d = 0; d < r; ++d) total *= out.shape[d];
  if (total == 0) return EMBER_OK;
  std::vector<double> acc(size_t(total), 0.0);  // f32 sums are rounded to float at each step
  const bool f64 = src.dtype == EMBER_F64;
  const int64_t others = total / S;  // positions in the dims other than `dim`
  for (int64_t n = 0; n < N; ++n) {
    const int64_t target = geti(idx, idx.offset + n * idx.strides[0]);
    for (int64_t p = 0; p < others; ++p) {
      int64_t rem = p, src_off = src.offset + n * src.strides[dim], o = 0, scale = 1;  // o: row-major in out
      for (int d = r - 1; d >= 0; --d) {
        int64_t i = target;
        if (d != dim) {
          i = rem % out.shape[d];
          rem /= out.shape[d];
          src_off += i * src.strides[d];
        }
        o += i * scale;
        scale *= out.shape[d];
      }
      double& cell = acc[size_t(o)];
      cell = f64 ? cell + getf(src, src_off) : double(float(cell) + float(getf(src, src_off)));
    }
  }
  for (int64_t o = 0; o < total; ++o) setf(out, out.offset + o, acc[size_t(o)]);
  return EMBER_OK;
}

}  // namespace

int32_t library(int32_t op, const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out, int32_t n_out,
                const void* attrs, ember_status* st) {
  if (!in || !out || n_in < 1 || !library_output_count_ok(op, n_out) || !attrs)
    return set_status(st, EMBER_ERR_INVALID, "reference backend: library op %d: bad arguments", op);
  for (int32_t i = 0; i < n_in; ++i)
    if (numel(in[i]) > 0 && !in[i].buffer)
      return set_status(st, EMBER_ERR_INVALID, "reference backend: library op %d: missing buffer", op);
  int64_t out_elements = 0;
  for (int32_t i = 0; i < n_out; ++i) out_elements += numel(out[i]);
  if (out_elements == 0) return EMBER_OK;
  switch (op) {
    case EMBER_LIB_CONV2D: return conv2d(in, n_in, out[0], *static_cast<const ember_conv_attrs*>(attrs));
    case EMBER_LIB_CONV2D_BACKWARD_DATA:
      return conv2d_backward_data(in[0], in[1], out[0], *static_cast<const ember_conv_attrs*>(attrs));
    case EMBER_LIB_CONV2D_BACKWARD_WEIGHTS:
      return conv2d_backward_weights(in[0], in[1], out[0], *static_cast<const ember_conv_attrs*>(attrs));
    case EMBER_LIB_MAX_POOL2D:
      return pool2d(op, in[0], out[0], *static_cast<const ember_pool_attrs*>(attrs), n_out == 2 ? &out[1] : nullptr);
    case EMBER_LIB_MAX_POOL2D_INDICES:
    case EMBER_LIB_AVG_POOL2D: return pool2d(op, in[0], out[0], *static_cast<const ember_pool_attrs*>(attrs));
    case EMBER_LIB_AVG_POOL2D_BACKWARD:
      return avg_pool2d_backward(in[0], out[0], *static_cast<const ember_pool_attrs*>(attrs));
    case EMBER_LIB_MAX_POOL2D_BACKWARD:
      if (n_in != 2) return set_status(st, EMBER_ERR_INVALID, "reference backend: max_pool2d_backward: %d inputs", n_in);
      return max_pool2d_backward(in[0], in[1], out[0], *static_cast<const ember_pool_attrs*>(attrs));
    case EMBER_LIB_ARGSORT:
    case EMBER_LIB_TOPK: return sort_op(op, in[0], out[0], *static_cast<const ember_sort_attrs*>(attrs));
    case EMBER_LIB_CUMSUM:
    case EMBER_LIB_CUMPROD:
    case EMBER_LIB_CUMMAX_INDICES:
    case EMBER_LIB_CUMMIN_INDICES: return scan_op(op, in[0], out[0], *static_cast<const ember_scan_attrs*>(attrs));
    case EMBER_LIB_FUSED_ATTENTION:
      return attention(in, n_in, out, n_out, *static_cast<const ember_attention_attrs*>(attrs), st);
    case EMBER_LIB_FUSED_ATTENTION_BACKWARD:
      return attention_backward(in, n_in, out, n_out, *static_cast<const ember_attention_attrs*>(attrs), st);
    case EMBER_LIB_LSTM_RECURRENCE:
      return lstm_recurrence(in, n_in, out, *static_cast<const ember_recurrence_attrs*>(attrs), st);
    case EMBER_LIB_LSTM_RECURRENCE_BACKWARD:
      return lstm_recurrence_backward(in, n_in, out, *static_cast<const ember_recurrence_attrs*>(attrs), st);
    case EMBER_LIB_GRU_RECURRENCE:
      return gru_recurrence(in, n_in, out, *static_cast<const ember_recurrence_attrs*>(attrs), st);
    case EMBER_LIB_GRU_RECURRENCE_BACKWARD:
      return gru_recurrence_backward(in, n_in, out, *static_cast<const ember_recurrence_attrs*>(attrs), st);
    case EMBER_LIB_INDEX_ADD: return index_add(in, n_in, out[0], *static_cast<const ember_index_attrs*>(attrs), st);
    default: return set_status(st, EMBER_ERR_UNSUPPORTED, "reference backend: unknown library op %d", op);
  }
}

}  // namespace ember::ref
