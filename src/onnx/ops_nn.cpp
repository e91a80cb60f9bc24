// ONNX neural-network operators: MatMul, Gemm, Einsum, Conv / ConvTranspose (1-D to 3-D), MaxPool /
// AveragePool (1-D to 3-D, dilations, explicit or auto padding, ceil_mode), the global pools, the
// normalizations (Batch, Instance, Layer, Group, RMS) and Dropout. Pools pad explicitly and
// call Ember's pools without padding, so asymmetric pads and ceil_mode need no special kernel.
#include <algorithm>
#include <cctype>
#include <cmath>

#include "ember/ops_nn.h"
#include "onnx/op_registry.h"

namespace ember::onnx::detail {
namespace {

std::vector<Array> op_matmul(const OpContext& c) {
  const Array& a = c.input(0);
  const Array& b = c.input(1);
  if (!is_floating(a.dtype())) {  // integer matmul: computed in f64, exact for the corpus' sizes
    return {cast(matmul(cast(a, DType::F64), cast(b, DType::F64)), a.dtype())};
  }
  return {matmul(a, b)};
}

std::vector<Array> op_gemm(const OpContext& c) {
  Array a = c.input(0), b = c.input(1);
  if (a.rank() != 2 || b.rank() != 2) c.fail("A and B must be 2-D, got " + a.shape().str() + " and " + b.shape().str());
  if (c.attr_int("transA", 0)) a = transpose(a, 0, 1);
  if (c.attr_int("transB", 0)) b = transpose(b, 0, 1);
  double alpha = c.attr_float("alpha", 1.0), beta = c.attr_float("beta", 1.0);
  Array y = matmul(a, b);
  if (alpha != 1.0) y = mul(y, alpha);
  if (c.has_input(2) && beta != 0.0) y = add(y, beta == 1.0 ? c.input(2) : mul(c.input(2), beta));
  if (y.dtype() != c.input(0).dtype()) y = cast(y, c.input(0).dtype());
  return {y};
}

// Per spatial dim: kernel, stride, dilation, pad begin, pad end (after auto_pad and ceil_mode).
struct Window {
  std::vector<int64_t> kernel, stride, dilation, begin, end;
};

Window window(const OpContext& c, const Array& x, const std::vector<int64_t>& kernel, bool ceil_mode) {
  const int n = x.rank() - 2;
  Window w;
  w.kernel = kernel;
  w.stride = c.attr_ints("strides");
  w.dilation = c.attr_ints("dilations");
  if (w.stride.empty()) w.stride.assign(size_t(n), 1);
  if (w.dilation.empty()) w.dilation.assign(size_t(n), 1);
  std::vector<int64_t> pads = c.attr_ints("pads");
  if (pads.empty()) pads.assign(size_t(2 * n), 0);
  if (int(kernel.size()) != n || int(w.stride.size()) != n || int(w.dilation.size()) != n || int(pads.size()) != 2 * n)
    c.fail("kernel_shape, strides, dilations and pads must match the " + std::to_string(n) + " spatial dims");
  std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  for (int i = 0; i < n; ++i) {
    const int64_t in = x.shape()[i + 2], k = (kernel[size_t(i)] - 1) * w.dilation[size_t(i)] + 1, s = w.stride[size_t(i)];
    int64_t b = pads[size_t(i)], e = pads[size_t(i + n)];
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      int64_t out = (in + s - 1) / s;
      int64_t total = std::max<int64_t>((out - 1) * s + k - in, 0);
      b = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      e = total - b;
    } else if (auto_pad == "VALID") {
      b = e = 0;
    } else if (auto_pad != "NOTSET") {
      c.fail("auto_pad '" + auto_pad + "'");
    }
    if (ceil_mode) {
      int64_t out = (in + b + e - k + s - 1) / s + 1;
      if ((out - 1) * s >= in + b) --out;  // the last window must start inside the input or the left pad
      e = std::max(e, (out - 1) * s + k - in - b);
    }
    w.begin.push_back(b);
    w.end.push_back(e);
  }
  return w;
}

// x padded with `value` by the window's pads (Ember's pad takes pairs from the last dim).
Array pad_spatial(const Array& x, const Window& w, double value) {
  std::vector<int64_t> pads;
  for (int i = int(w.begin.size()) - 1; i >= 0; --i) {
    pads.push_back(w.begin[size_t(i)]);
    pads.push_back(w.end[size_t(i)]);
  }
  bool any = false;
  for (int64_t p : pads) any = any || p != 0;
  return any ? pad(x, pads, PadMode::Constant, value) : x;
}

// Einsum by broadcasting: each operand (diagonals taken for a label repeated within it) is laid
// out over all labels of the equation, the operands are multiplied, and the labels missing from
// the output are summed. "..." stands for the broadcast dims (right-aligned across operands).
std::vector<Array> op_einsum(const OpContext& c) {
  std::string eq;
  for (char ch : c.attr_string("equation", "")) if (ch != ' ') eq.push_back(ch);
  std::string lhs = eq, rhs;
  const bool has_arrow = eq.find("->") != std::string::npos;
  if (has_arrow) {
    lhs = eq.substr(0, eq.find("->"));
    rhs = eq.substr(eq.find("->") + 2);
  }
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (int(terms.size()) != c.num_inputs()) c.fail("equation '" + eq + "' has " + std::to_string(terms.size()) + " operands");
  // Ellipsis dims get the labels '0', '1', ... (right-aligned over the widest ellipsis).
  int ell = 0;
  auto explicit_count = [](const std::string& t) { return int(t.size()) - (t.find("...") != std::string::npos ? 3 : 0); };
  for (size_t i = 0; i < terms.size(); ++i)
    if (terms[i].find("...") != std::string::npos) ell = std::max(ell, c.input(int(i)).rank() - explicit_count(terms[i]));
  auto expand = [&](const std::string& t, int rank) {
    std::string out;
    size_t p = t.find("...");
    if (p == std::string::npos) return t;
    int n = rank - explicit_count(t);
    out = t.substr(0, p);
    for (int k = ell - n; k < ell; ++k) out.push_back(char('0' + k));
    return out + t.substr(p + 3);
  };
  std::string all;
  std::vector<std::string> labels;
  std::vector<Array> ops;
  for (size_t i = 0; i < terms.size(); ++i) {
    Array x = c.input(int(i));
    std::string l = expand(terms[i], x.rank());
    if (int(l.size()) != x.rank()) c.fail("term '" + terms[i] + "' does not match rank " + std::to_string(x.rank()));
    // Diagonals: a label seen twice keeps the entries where both indices agree.
    for (size_t a = 0; a < l.size(); ++a)
      for (size_t b = a + 1; b < l.size(); ++b)
        if (l[a] == l[b]) {
          const int64_t n = x.shape()[int(a)];
          Array m = movedim(movedim(x, int(a), x.rank() - 1), int(b) - (b > a ? 1 : 0), x.rank() - 1);
          std::vector<int64_t> shape(m.shape().begin(), m.shape().end() - 2);
          shape.push_back(n * n);
          Array diag = index_select(reshape(m, Shape(shape)), int(shape.size()) - 1, arange(0, n * n, n + 1, DType::I64, x.device()));
          std::string rest;
          for (size_t k = 0; k < l.size(); ++k)
            if (k != a && k != b) rest.push_back(l[k]);
          x = diag;
          l = rest + l[a];
          a = size_t(-1);  // restart the scan on the new labels
          break;
        }
    for (char ch : l)
      if (all.find(ch) == std::string::npos) all.push_back(ch);
    labels.push_back(l);
    ops.push_back(x);
  }
  std::string out_labels;
  if (has_arrow) {
    out_labels = rhs;
    if (size_t p = rhs.find("..."); p != std::string::npos) {
      std::string e;
      for (int k = 0; k < ell; ++k) e.push_back(char('0' + k));
      out_labels = rhs.substr(0, p) + e + rhs.substr(p + 3);
    }
  } else {
    for (int k = 0; k < ell; ++k) out_labels.push_back(char('0' + k));
    std::string once;
    for (char ch : all)
      if (!std::isdigit(static_cast<unsigned char>(ch)) && std::count(lhs.begin(), lhs.end(), ch) == 1) once.push_back(ch);
    std::sort(once.begin(), once.end());
    out_labels += once;
  }
  Array prod;
  for (size_t i = 0; i < ops.size(); ++i) {
    std::vector<int> perm;
    std::vector<int64_t> shape;
    for (char ch : all) {
      size_t p = labels[i].find(ch);
      if (p != std::string::npos) perm.push_back(int(p));
    }
    Array x = perm.empty() ? ops[i] : permute(ops[i], perm);
    for (char ch : all) {
      size_t p = labels[i].find(ch);
      shape.push_back(p == std::string::npos ? 1 : ops[i].shape()[int(p)]);
    }
    x = reshape(x, Shape(shape));
    prod = prod.defined() ? mul(prod, x) : x;
  }
  std::vector<int> reduce;
  std::string kept;
  for (size_t k = 0; k < all.size(); ++k) {
    if (out_labels.find(all[k]) == std::string::npos) reduce.push_back(int(k));
    else kept.push_back(all[k]);
  }
  Array y = reduce.empty() ? prod : sum(prod, reduce, false);
  if (y.dtype() != c.input(0).dtype()) y = cast(y, c.input(0).dtype());
  std::vector<int> perm;
  for (char ch : out_labels) {
    size_t p = kept.find(ch);
    if (p == std::string::npos) c.fail("output label '" + std::string(1, ch) + "' is not in the inputs");
    perm.push_back(int(p));
  }
  return {perm.empty() ? y : permute(y, perm)};
}

std::vector<Array> op_conv(const OpContext& c) {
  const Array& x = c.input(0);
  const Array& wgt = c.input(1);
  Array bias = c.has_input(2) ? c.input(2) : Array();
  const int n = x.rank() - 2;
  if (n != 1 && n != 2) c.unsupported(std::to_string(n) + "-D convolution (1-D and 2-D only)");
  // W is [M, C/group, k...] (ConvTranspose [C, M/group, k...]): checked before its dims are read
  // (a fuzzed rank-1 weight was read past its shape).
  if (wgt.rank() != x.rank()) c.fail("W must have rank " + std::to_string(x.rank()) + ", got " + wgt.shape().str());
  std::vector<int64_t> kernel = c.attr_ints("kernel_shape");
  if (kernel.empty())
    for (int i = 0; i < n; ++i) kernel.push_back(wgt.shape()[i + 2]);
  for (int i = 0; i < n; ++i)
    if (kernel.size() != size_t(n) || kernel[size_t(i)] != wgt.shape()[i + 2])
      c.fail("kernel_shape does not match W's shape " + wgt.shape().str());
  Window w = window(c, x, kernel, false);
  int64_t groups = c.attr_int("group", 1);
  if (n == 1) {
    Conv1dOptions o{.stride = w.stride[0], .padding = Padding1d(w.begin[0], w.end[0]), .dilation = w.dilation[0], .groups = groups};
    return {bias.defined() ? conv1d(x, wgt, bias, o) : conv1d(x, wgt, o)};
  }
  Conv2dOptions o{.stride = IntPair(w.stride[0], w.stride[1]),
                  .padding = Padding2d(w.begin[0], w.end[0], w.begin[1], w.end[1]),
                  .dilation = IntPair(w.dilation[0], w.dilation[1]),
                  .groups = groups};
  return {bias.defined() ? conv2d(x, wgt, bias, o) : conv2d(x, wgt, o)};
}

// [C] -> [1, C, 1, ...] to broadcast against x [N, C, ...]. x must have a channel dim and v C
// values (a fuzzed rank-1 BatchNormalization input wrote past the shape; a wrong-sized scale
// would otherwise broadcast silently).
Array per_channel(const OpContext& c, const Array& v, const Array& x, const char* what) {
  if (x.rank() < 2) c.fail("the input must have rank >= 2 ([N, C, ...]), got " + x.shape().str());
  if (v.rank() != 1 || v.numel() != x.shape()[1])
    c.fail(std::string(what) + " must have shape [" + std::to_string(x.shape()[1]) + "] (the channels), got " +
           v.shape().str());
  std::vector<int64_t> shape(size_t(x.rank()), 1);
  shape[1] = v.numel();
  return reshape(v, Shape(shape));
}

// A 3-D transposed convolution without padding, from 2-D ones: depth tap k of the kernel maps
// input depth d to output depth d * stride + k * dilation, so each tap is one 2-D transposed
// convolution over the N * D input planes whose results are spread along depth with the stride
// (zeros between) and shifted by the tap's offset; the taps' results are summed.
Array conv_transpose3d_full(const Array& x, const Array& w, const std::vector<int64_t>& stride,
                            const std::vector<int64_t>& dil, int64_t groups) {
  const int64_t N = x.shape()[0], C = x.shape()[1], D = x.shape()[2], H = x.shape()[3], W = x.shape()[4];
  const int64_t KD = w.shape()[2], sd = stride[0], dd = dil[0];
  const int64_t full_d = (D - 1) * sd + (KD - 1) * dd + 1;
  Array planes = reshape(permute(x, {0, 2, 1, 3, 4}), Shape{N * D, C, H, W});
  Array y;
  for (int64_t k = 0; k < KD; ++k) {
    Array wk = squeeze(slice(w, 2, k, k + 1), 2);
    Array t = conv_transpose2d(planes, wk, ConvTranspose2dOptions{.stride = IntPair(stride[1], stride[2]),
                                                                           .dilation = IntPair(dil[1], dil[2]),
                                                                           .groups = groups});
    const int64_t O = t.shape()[1], H2 = t.shape()[2], W2 = t.shape()[3];
    Array td = permute(reshape(t, Shape{N, D, O, H2, W2}), {0, 2, 1, 3, 4});  // [N, O, D, H2, W2]
    if (sd > 1) {  // D entries sd apart: each followed by sd - 1 zero planes, the last ones dropped
      Array z = zeros(Shape{N, O, D, sd - 1, H2, W2}, {td.dtype(), td.device()});
      td = reshape(cat({unsqueeze(td, 3), z}, 3), Shape{N, O, D * sd, H2, W2});
      td = slice(td, 2, 0, (D - 1) * sd + 1);
    }
    td = pad(td, {0, 0, 0, 0, k * dd, full_d - (D - 1) * sd - 1 - k * dd});
    y = y.defined() ? add(y, td) : td;
  }
  return y;
}

// The full transposed convolution (no padding) is cropped by the pads, and extended with zeros
// for output_padding, before the bias is added: so asymmetric pads, output_shape and auto_pad
// need nothing from Ember's conv_transpose beyond its unpadded form.
std::vector<Array> op_conv_transpose(const OpContext& c) {
  const Array& x = c.input(0);
  const Array& wgt = c.input(1);
  const int n = x.rank() - 2;
  if (n < 1 || n > 3) c.unsupported(std::to_string(n) + "-D transposed convolution (1-D to 3-D only)");
  auto get = [&](const char* name, int64_t fallback) {
    std::vector<int64_t> v = c.attr_ints(name);
    if (v.empty()) v.assign(size_t(n), fallback);
    if (int(v.size()) != n) c.fail(std::string(name) + " must have " + std::to_string(n) + " values");
    return v;
  };
  std::vector<int64_t> stride = get("strides", 1), dil = get("dilations", 1), outpad = get("output_padding", 0);
  // W is [M, C/group, k...] (ConvTranspose [C, M/group, k...]): checked before its dims are read
  // (a fuzzed rank-1 weight was read past its shape).
  if (wgt.rank() != x.rank()) c.fail("W must have rank " + std::to_string(x.rank()) + ", got " + wgt.shape().str());
  std::vector<int64_t> kernel = c.attr_ints("kernel_shape");
  if (kernel.empty())
    for (int i = 0; i < n; ++i) kernel.push_back(wgt.shape()[i + 2]);
  for (int i = 0; i < n; ++i)
    if (kernel.size() != size_t(n) || kernel[size_t(i)] != wgt.shape()[i + 2])
      c.fail("kernel_shape does not match W's shape " + wgt.shape().str());
  std::vector<int64_t> pads = c.attr_ints("pads");
  if (pads.empty()) pads.assign(size_t(2 * n), 0);
  std::vector<int64_t> out_shape = c.attr_ints("output_shape");
  const std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  const size_t nd = static_cast<size_t>(n);
  std::vector<int64_t> full_len(nd), begin(nd), target(nd);
  for (int i = 0; i < n; ++i) {
    const int64_t in = x.shape()[i + 2];
    full_len[size_t(i)] = (in - 1) * stride[size_t(i)] + (kernel[size_t(i)] - 1) * dil[size_t(i)] + 1;
    int64_t b = pads[size_t(i)], e = pads[size_t(i + n)];
    int64_t want = full_len[size_t(i)] + outpad[size_t(i)] - b - e;
    if (!out_shape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      want = !out_shape.empty() ? out_shape[out_shape.size() - size_t(n) + size_t(i)] : in * stride[size_t(i)];
      int64_t total = full_len[size_t(i)] + outpad[size_t(i)] - want;
      // The odd crop goes at the end except for SAME_LOWER (as Conv's auto_pad, and as the
      // corpus' output_shape test without auto_pad expects).
      b = auto_pad == "SAME_LOWER" ? total - total / 2 : total / 2;
    } else if (auto_pad == "VALID") {
      b = 0;
      want = full_len[size_t(i)] + outpad[size_t(i)];
    } else if (auto_pad != "NOTSET") {
      c.fail("auto_pad '" + auto_pad + "'");
    }
    if (want <= 0) c.fail("the output would be empty");
    begin[size_t(i)] = b;
    target[size_t(i)] = want;
  }
  int64_t groups = c.attr_int("group", 1);
  Array y;
  if (n == 1) {
    y = conv_transpose1d(x, wgt, ConvTranspose1dOptions{.stride = stride[0], .dilation = dil[0], .groups = groups});
  } else if (n == 2) {
    y = conv_transpose2d(x, wgt, ConvTranspose2dOptions{.stride = IntPair(stride[0], stride[1]),
                                                                 .dilation = IntPair(dil[0], dil[1]), .groups = groups});
  } else {
    y = conv_transpose3d_full(x, wgt, stride, dil, groups);
  }
  for (int i = 0; i < n; ++i) {
    const int d = i + 2;
    const int64_t b = begin[size_t(i)], len = target[size_t(i)], have = y.shape()[d];
    // Negative begin or a window past the end: zeros there (output_padding, or a larger output_shape).
    std::vector<int64_t> p(size_t(2 * (y.rank() - d)), 0);
    p[p.size() - 2] = std::max<int64_t>(-b, 0);
    p[p.size() - 1] = std::max<int64_t>(b + len - have, 0);
    if (p[p.size() - 2] || p[p.size() - 1]) y = pad(y, p);
    const int64_t start = std::max<int64_t>(b, 0);
    y = slice(y, d, start, start + len);
  }
  if (c.has_input(2)) y = add(y, per_channel(c, c.input(2), y, "B"));
  return {y};
}

// Any-rank pooling with dilations: the reduction over the kernel offsets of strided slices of
// the padded input (kernel volume many slices: meant for the small kernels of 3-D / dilated
// pools; the 1-D / 2-D undilated ones use Ember's pool kernels).
// With `indices`, max pooling also gives the flat index (over N, C and the spatial dims; the
// spatial part row-major, or column-major with storage_order 1) of each window's first maximum.
Array pool_by_slices(const OpContext& c, const Array& x, const Window& w, bool is_max, Array* indices = nullptr) {
  const int n = x.rank() - 2;
  std::vector<int64_t> out(static_cast<size_t>(n));
  int64_t volume = 1;
  for (int i = 0; i < n; ++i) {
    const int64_t k = (w.kernel[size_t(i)] - 1) * w.dilation[size_t(i)] + 1;
    out[size_t(i)] = (x.shape()[i + 2] + w.begin[size_t(i)] + w.end[size_t(i)] - k) / w.stride[size_t(i)] + 1;
    if (out[size_t(i)] <= 0) c.fail("the pooled output would be empty");
    volume *= w.kernel[size_t(i)];
  }
  if (volume > 4096) c.unsupported("a dilated / 3-D pooling kernel of " + std::to_string(volume) + " elements");
  const bool include_pad = c.attr_int("count_include_pad", 0) != 0;
  Array xp = pad_spatial(x, w, is_max ? -INFINITY : 0.0);
  Array mask;
  if (!is_max) {
    Window explicit_only = w;  // count_include_pad counts the explicit pads, not ceil_mode's extension
    std::vector<int64_t> pads = c.attr_ints("pads");
    for (int i = 0; i < n; ++i) {
      explicit_only.begin[size_t(i)] = include_pad && !pads.empty() ? pads[size_t(i)] : 0;
      explicit_only.end[size_t(i)] = include_pad && !pads.empty() ? pads[size_t(i + n)] : 0;
    }
    Window rest = w;
    for (int i = 0; i < n; ++i) {
      rest.begin[size_t(i)] = w.begin[size_t(i)] - explicit_only.begin[size_t(i)];
      rest.end[size_t(i)] = w.end[size_t(i)] - explicit_only.end[size_t(i)];
    }
    std::vector<int64_t> spatial{1, 1};
    for (int i = 0; i < n; ++i) spatial.push_back(x.shape()[i + 2]);
    Array ones_x = ones(Shape(spatial), TensorOptions{.dtype = x.dtype(), .device = x.device()});
    mask = pad_spatial(pad_spatial(ones_x, explicit_only, 1.0), rest, 0.0);
  }
  Array acc, count;
  for (int64_t flat = 0; flat < volume; ++flat) {
    Array v = xp, m = mask;
    int64_t rest = flat;
    for (int i = n - 1; i >= 0; --i) {
      const int64_t k = rest % w.kernel[size_t(i)];
      rest /= w.kernel[size_t(i)];
      const int64_t start = k * w.dilation[size_t(i)];
      const int64_t stop = start + (out[size_t(i)] - 1) * w.stride[size_t(i)] + 1;
      v = slice(v, i + 2, start, stop, w.stride[size_t(i)]);
      if (m.defined()) m = slice(m, i + 2, start, stop, w.stride[size_t(i)]);
    }
    if (indices) {
      // The unpadded spatial position each output reads at this kernel offset.
      const bool column_major = c.attr_int("storage_order", 0) != 0;
      std::vector<int64_t> kofs(static_cast<size_t>(n));
      for (int64_t r2 = flat, i = n - 1; i >= 0; --i) {
        kofs[size_t(i)] = r2 % w.kernel[size_t(i)];
        r2 /= w.kernel[size_t(i)];
      }
      int64_t count = 1;
      for (int64_t o : out) count *= o;
      std::vector<int64_t> pos(static_cast<size_t>(count));
      for (int64_t q = 0; q < count; ++q) {
        int64_t rest2 = q, flat_pos = 0, stride = 1;
        std::vector<int64_t> coord(static_cast<size_t>(n));
        for (int i = n - 1; i >= 0; --i) {
          coord[size_t(i)] = rest2 % out[size_t(i)] * w.stride[size_t(i)] + kofs[size_t(i)] * w.dilation[size_t(i)] - w.begin[size_t(i)];
          rest2 /= out[size_t(i)];
        }
        if (column_major) {
          for (int i = 0; i < n; ++i, stride *= x.shape()[i + 1]) flat_pos += coord[size_t(i)] * stride;
        } else {
          for (int i = n - 1; i >= 0; --i, stride *= x.shape()[i + 3]) flat_pos += coord[size_t(i)] * stride;
        }
        pos[size_t(q)] = flat_pos;
      }
      std::vector<int64_t> view{1, 1};
      view.insert(view.end(), out.begin(), out.end());
      Array idx_k = reshape(from_vector(pos, Shape{count}, x.device()), Shape(view));
      if (!acc.defined()) {
        *indices = broadcast_to(idx_k, v.shape());
      } else {
        Array take = gt(v, acc);  // strictly greater: the first maximum keeps its index
        *indices = where(take, broadcast_to(idx_k, v.shape()), *indices);
      }
    }
    acc = !acc.defined() ? v : is_max ? maximum(acc, v) : add(acc, v);
    if (m.defined()) count = count.defined() ? add(count, m) : m;
  }
  if (indices) {
    int64_t spatial = 1;
    for (int i = 0; i < n; ++i) spatial *= x.shape()[i + 2];
    std::vector<int64_t> view{x.shape()[0], x.shape()[1]};
    view.insert(view.end(), size_t(n), 1);
    Array base = reshape(mul(arange(0, x.shape()[0] * x.shape()[1], 1, DType::I64, x.device()), spatial), Shape(view));
    *indices = add(*indices, base);
  }
  return is_max ? acc : div(acc, count);
}

std::vector<Array> op_pool(const OpContext& c, bool is_max) {
  Array x = c.input(0);
  const int n = x.rank() - 2;
  if (n < 1 || n > 3) c.unsupported(std::to_string(n) + "-D pooling (1-D to 3-D only)");
  if (!is_floating(x.dtype())) {
    if (!is_max || x.dtype() != DType::U8) c.unsupported(std::string(is_max ? "max" : "average") + " pooling of " + std::string(dtype_name(x.dtype())));
    // uint8 max pooling: exact in f32 (every uint8 is a float32).
    OpContext as_float(c.node(), c.index(), c.opset, c.device, {cast(x, DType::F32)});
    return {cast(op_pool(as_float, true).at(0), DType::U8)};
  }
  Window w = window(c, x, c.attr_ints("kernel_shape"), c.attr_int("ceil_mode", 0) != 0);
  bool dilated = false;
  for (int64_t d : w.dilation) dilated = dilated || d != 1;
  const bool want_indices = is_max && c.node().outputs.size() > 1 && !c.node().outputs[1].empty();
  if (want_indices) {
    Array idx;
    Array y = pool_by_slices(c, x, w, true, &idx);
    return {y, idx};
  }
  if (n == 3 || dilated) return {pool_by_slices(c, x, w, is_max)};
  const bool one_d = n == 1;
  if (one_d) {  // as a 2-D pool with H = 1
    x = unsqueeze(x, 2);
    w.kernel.insert(w.kernel.begin(), 1);
    w.stride.insert(w.stride.begin(), 1);
    w.begin.insert(w.begin.begin(), 0);
    w.end.insert(w.end.begin(), 0);
  }
  Pool2dOptions o{.kernel = IntPair(w.kernel[0], w.kernel[1]), .stride = IntPair(w.stride[0], w.stride[1]), .padding = 0};
  Array y;
  if (is_max) {
    y = max_pool2d(pad_spatial(x, w, -INFINITY), o);
  } else {
    // Average over the window's valid elements: sum of the zero-padded input over the count of
    // a mask (1 for the input and, with count_include_pad, for the explicit pads).
    bool include_pad = c.attr_int("count_include_pad", 0) != 0;
    Array xp = pad_spatial(x, w, 0.0);
    Array mask;
    if (include_pad) {
      std::vector<int64_t> pads = c.attr_ints("pads");
      Window explicit_only = w;
      if (!pads.empty() && c.attr_string("auto_pad", "NOTSET") == "NOTSET") {
        for (int i = 0; i < n; ++i) {
          explicit_only.begin[size_t(i + (one_d ? 1 : 0))] = pads[size_t(i)];
          explicit_only.end[size_t(i + (one_d ? 1 : 0))] = pads[size_t(i + n)];
        }
      }
      Window rest = w;
      for (size_t i = 0; i < w.begin.size(); ++i) {
        rest.begin[i] = w.begin[i] - explicit_only.begin[i];
        rest.end[i] = w.end[i] - explicit_only.end[i];
      }
      mask = pad_spatial(pad_spatial(ones_like(x), explicit_only, 1.0), rest, 0.0);
    } else {
      mask = pad_spatial(ones_like(x), w, 0.0);
    }
    y = div(avg_pool2d(xp, o), avg_pool2d(mask, o));
  }
  if (one_d) y = squeeze(y, 2);
  return {y};
}

std::vector<Array> op_global_pool(const OpContext& c, bool is_max) {
  const Array& x = c.input(0);
  std::vector<int> dims;
  for (int d = 2; d < x.rank(); ++d) dims.push_back(d);
  return {is_max ? max(x, dims, true) : mean(x, dims, true)};
}

std::vector<Array> op_batch_norm(const OpContext& c) {
  const Array& x = c.input(0);
  const int r = x.rank();
  Array scale = per_channel(c, c.input(1), x, "scale"), bias = per_channel(c, c.input(2), x, "B");
  Array mu = per_channel(c, c.input(3), x, "input_mean"), var = per_channel(c, c.input(4), x, "input_var");
  double eps = c.attr_float("epsilon", 1e-5), momentum = c.attr_float("momentum", 0.9);
  bool training = c.attr_int("training_mode", 0) != 0;
  if (c.opset < 14 && c.node().outputs.size() > 1 && c.opset >= 9) training = true;
  std::vector<Array> outs;
  if (training) {
    std::vector<int> dims{0};
    for (int d = 2; d < r; ++d) dims.push_back(d);
    Array bm = mean(x, dims, true);
    Array bv = mean(square(sub(x, bm)), dims, true);
    outs.push_back(add(mul(div(sub(x, bm), sqrt(add(bv, eps))), scale), bias));
    outs.push_back(reshape(add(mul(c.input(3), momentum), mul(reshape(bm, Shape{-1}), 1 - momentum)), c.input(3).shape()));
    outs.push_back(reshape(add(mul(c.input(4), momentum), mul(reshape(bv, Shape{-1}), 1 - momentum)), c.input(4).shape()));
    return outs;
  }
  return {batch_norm_inference(x, mu, var, scale, bias, eps)};
}

std::vector<Array> op_instance_norm(const OpContext& c) {
  const Array& x = c.input(0);
  std::vector<int> dims;
  for (int d = 2; d < x.rank(); ++d) dims.push_back(d);
  double eps = c.attr_float("epsilon", 1e-5);
  Array m = mean(x, dims, true);
  Array v = mean(square(sub(x, m)), dims, true);
  return {add(mul(div(sub(x, m), sqrt(add(v, eps))), per_channel(c, c.input(1), x, "scale")), per_channel(c, c.input(2), x, "B"))};
}

// The stash type's dtype: statistics of f16/bf16 inputs are computed in f32 (stash_type 1).
DType stash_dtype(const OpContext& c, DType x) {
  int64_t stash = c.attr_int("stash_type", 1);
  if (stash == 1) return x == DType::F64 ? DType::F64 : DType::F32;
  return dtype_from_onnx(int32_t(stash), c.where() + ": stash_type");
}

std::vector<Array> op_layer_norm(const OpContext& c) {
  const Array& x0 = c.input(0);
  int axis = c.axis(c.attr_int("axis", -1), x0.rank());
  double eps = c.attr_float("epsilon", 1e-5);
  DType st = stash_dtype(c, x0.dtype());
  Array x = cast(x0, st);
  std::vector<int> dims;
  for (int d = axis; d < x.rank(); ++d) dims.push_back(d);
  Array m = mean(x, dims, true);
  Array d = sub(x, m);
  Array inv = rsqrt(add(mean(square(d), dims, true), eps));
  Array y = cast(mul(d, inv), x0.dtype());
  y = mul(y, c.input(1));
  if (c.has_input(2)) y = add(y, c.input(2));
  return {y, m, inv};
}

std::vector<Array> op_rms_norm(const OpContext& c) {
  const Array& x0 = c.input(0);
  int axis = c.axis(c.attr_int("axis", -1), x0.rank());
  double eps = c.attr_float("epsilon", 1e-5);
  Array x = cast(x0, stash_dtype(c, x0.dtype()));
  std::vector<int> dims;
  for (int d = axis; d < x.rank(); ++d) dims.push_back(d);
  Array inv = rsqrt(add(mean(square(x), dims, true), eps));
  return {mul(cast(mul(x, inv), x0.dtype()), c.input(1))};
}

std::vector<Array> op_group_norm(const OpContext& c) {
  const Array& x0 = c.input(0);
  int64_t groups = c.attr_int("num_groups", 0);
  double eps = c.attr_float("epsilon", 1e-5);
  const int64_t N = x0.shape()[0], C = x0.shape()[1];
  if (groups <= 0 || C % groups != 0) c.fail("num_groups " + std::to_string(groups) + " must divide the " + std::to_string(C) + " channels");
  Array x = reshape(cast(x0, stash_dtype(c, x0.dtype())), Shape{N, groups, -1});
  Array m = mean(x, {2}, true);
  Array d = sub(x, m);
  Array y = cast(reshape(mul(d, rsqrt(add(mean(square(d), {2}, true), eps))), x0.shape()), x0.dtype());
  Array scale = c.input(1), bias = c.input(2);
  if (c.opset < 21) {  // opset 18: one scale / bias per group, repeated over its channels
    scale = reshape(broadcast_to(reshape(scale, Shape{groups, 1}), Shape{groups, C / groups}), Shape{C});
    bias = reshape(broadcast_to(reshape(bias, Shape{groups, 1}), Shape{groups, C / groups}), Shape{C});
  }
  return {add(mul(y, per_channel(c, scale, x0, "scale")), per_channel(c, bias, x0, "bias"))};
}

std::vector<Array> op_dropout(const OpContext& c) {
  const Array& x = c.input(0);
  double ratio = c.opset >= 12 ? (c.has_input(1) ? c.floats_input(1).at(0) : 0.5) : c.attr_float("ratio", 0.5);
  bool training = c.opset >= 12 && c.has_input(2) && c.input(2).to_vector<bool>().at(0);
  if (!training || ratio == 0.0) return {x, ones_like(x, DType::Bool)};
  std::optional<uint64_t> seed;
  if (c.has_attr("seed")) seed = uint64_t(c.attr_int("seed", 0));
  Array keep = cast(bernoulli(x.shape(), 1.0 - ratio, RandomOptions{.seed = seed, .dtype = DType::F32, .device = x.device()}), DType::Bool);
  return {where(keep, div(x, 1.0 - ratio), zeros_like(x)), keep};
}

const Registrar registrar({
    {"MatMul", {op_matmul}},
    {"Einsum", {op_einsum}},
    {"Gemm", {op_gemm}},
    {"Conv", {op_conv}},
    {"ConvTranspose", {op_conv_transpose}},
    {"MaxPool", {[](const OpContext& c) { return op_pool(c, true); }}},
    {"AveragePool", {[](const OpContext& c) { return op_pool(c, false); }}},
    {"GlobalMaxPool", {[](const OpContext& c) { return op_global_pool(c, true); }}},
    {"GlobalAveragePool", {[](const OpContext& c) { return op_global_pool(c, false); }}},
    {"BatchNormalization", {op_batch_norm}},
    {"InstanceNormalization", {op_instance_norm}},
    {"LayerNormalization", {op_layer_norm}},
    {"RMSNormalization", {op_rms_norm}},
    {"GroupNormalization", {op_group_norm}},
    {"Dropout", {op_dropout}},
});

}  // namespace
}  // namespace ember::onnx::detail
