// Front end of the library-backed ops (include/ember/ops_library.h): argument checks that name the
// op, the values and the caller's line, then one library node (op_table/ops_library.def), or a
// composite. Ops with two results (sort, topk, cummax, cummin) compute the indices with a library
// call and gather the values, so the values' gradient is gather's (a scatter of the gradient).
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "ops/autocast.h"
#include "ops/frontend.h"

namespace ember {

namespace {

std::string pair_str(int64_t a, int64_t b) { return fmt::format("({}, {})", a, b); }

DType floating_operands(const std::vector<const Array*>& xs, const char* op, Loc loc) {
  DType dt = node_of(*xs[0], op, loc)->dtype;
  for (const Array* a : xs) dt = promote_types(dt, node_of(*a, op, loc)->dtype);
  if (!is_floating(dt))
    fail(op, fmt::format("needs floating operands, got {}; cast them first (e.g. to f32)", dtype_name(dt)), loc);
  return dt;
}

// The options checked, with padding 'same' resolved into numbers: the node's attributes.
Conv2dOptions conv_params(const Conv2dOptions& o, int64_t KH, int64_t KW, const char* op, Loc loc) {
  if (o.stride.h < 1 || o.stride.w < 1)
    fail(op, fmt::format("stride must be at least 1, got {}", pair_str(o.stride.h, o.stride.w)), loc);
  if (o.dilation.h < 1 || o.dilation.w < 1)
    fail(op, fmt::format("dilation must be at least 1, got {}", pair_str(o.dilation.h, o.dilation.w)), loc);
  if (o.groups < 1) fail(op, fmt::format("groups must be at least 1, got {}", o.groups), loc);
  Conv2dOptions p = o;
  Padding2d& pad = p.padding;
  if (o.padding.is_same) {
    if (o.stride.h != 1 || o.stride.w != 1)
      fail(op, fmt::format("padding 'same' needs stride 1, got {}", pair_str(o.stride.h, o.stride.w)), loc);
    const int64_t th = o.dilation.h * (KH - 1), tw = o.dilation.w * (KW - 1);
    pad = Padding2d(th / 2, th - th / 2, tw / 2, tw - tw / 2);
  }
  if (pad.top < 0 || pad.bottom < 0 || pad.left < 0 || pad.right < 0)
    fail(op, fmt::format("padding must not be negative, got (top {}, bottom {}, left {}, right {})", pad.top,
                         pad.bottom, pad.left, pad.right),
         loc);
  return p;
}

// Output size of a window op along one dim (0 or less: the window does not fit).
int64_t out_size(int64_t in, int64_t pad_total, int64_t eff_kernel, int64_t stride) {
  const int64_t span = in + pad_total - eff_kernel;
  return span < 0 ? 0 : span / stride + 1;
}

// Checks x and weight of a convolution; returns the output shape.
Shape conv_shape(const Shape& xs, const Shape& ws, const Conv2dOptions& p, const char* op, Loc loc) {
  if (xs.rank() != 4) fail(op, fmt::format("input must be 4-D [N, C, H, W], got shape {}", xs.str()), loc);
  if (ws.rank() != 4) fail(op, fmt::format("weight must be 4-D [O, C/groups, KH, KW], got shape {}", ws.str()), loc);
  const int64_t C = xs[1], O = ws[0];
  if (C % p.groups != 0 || O % p.groups != 0)
    fail(op, fmt::format("groups {} must divide the input channels {} and the output channels {}", p.groups, C, O),
         loc);
  if (ws[1] * p.groups != C)
    fail(op, fmt::format("channel mismatch: input {} has {} channels, weight {} expects {} ({} per group x {} groups)",
                         xs.str(), C, ws.str(), ws[1] * p.groups, ws[1], p.groups),
         loc);
  const Padding2d& pad = p.padding;
  const int64_t ekh = p.dilation.h * (ws[2] - 1) + 1, ekw = p.dilation.w * (ws[3] - 1) + 1;
  const int64_t OH = out_size(xs[2], pad.top + pad.bottom, ekh, p.stride.h);
  const int64_t OW = out_size(xs[3], pad.left + pad.right, ekw, p.stride.w);
  if (ws[2] < 1 || ws[3] < 1 || OH < 1 || OW < 1)
    fail(op, fmt::format("kernel {} (dilated {}) is larger than the padded input {}", pair_str(ws[2], ws[3]),
                         pair_str(ekh, ekw), pair_str(xs[2] + pad.top + pad.bottom, xs[3] + pad.left + pad.right)),
         loc);
  return Shape{xs[0], O, OH, OW};
}

}  // namespace

// ---- convolution -------------------------------------------------------------------------------
Array conv2d(const Array& x, const Array& weight, const Array& bias, Conv2dOptions opts, Loc loc) {
  const char* op = "conv2d";
  if (autocast_active()) [[unlikely]] {
    if (auto c = autocast_operands(Op::Conv2d, {x, weight, bias}, loc)) return conv2d((*c)[0], (*c)[1], (*c)[2], opts, loc);
  }
  std::vector<const Array*> all{&x, &weight};
  if (bias.defined()) all.push_back(&bias);
  const Device dev = common_device(all, op, loc);
  const DType dt = floating_operands(all, op, loc);
  const Shape& ws = weight.shape();
  if (ws.rank() != 4) fail(op, fmt::format("weight must be 4-D [O, C/groups, KH, KW], got shape {}", ws.str()), loc);
  const Conv2dOptions p = conv_params(opts, ws[2], ws[3], op, loc);
  Shape out = conv_shape(x.shape(), ws, p, op, loc);
  std::vector<Array> inputs{cast(x, dt, loc), cast(weight, dt, loc)};
  if (bias.defined()) {
    if (bias.shape().rank() != 1 || bias.shape()[0] != ws[0])
      fail(op, fmt::format("bias must have shape [{}] (the output channels), got {}", ws[0], bias.shape().str()), loc);
    inputs.push_back(cast(bias, dt, loc));
  }
  return make_array(Op::Conv2d, {.params = p}, inputs, std::move(out), dt, dev, loc);
}

Array conv2d(const Array& x, const Array& weight, Conv2dOptions opts, Loc loc) {
  return conv2d(x, weight, Array(), opts, loc);
}

Array conv2d_backward_data(const Array& grad_out, const Array& weight, const Shape& input_shape, Conv2dOptions opts,
                           Loc loc) {
  const char* op = "conv2d_backward_data";
  const Device dev = common_device({&grad_out, &weight}, op, loc);
  const DType dt = floating_operands({&grad_out, &weight}, op, loc);
  const Shape& ws = weight.shape();
  if (ws.rank() != 4) fail(op, fmt::format("weight must be 4-D [O, C/groups, KH, KW], got shape {}", ws.str()), loc);
  const Conv2dOptions p = conv_params(opts, ws[2], ws[3], op, loc);
  const Shape out = conv_shape(input_shape, ws, p, op, loc);
  if (grad_out.shape() != out)
    fail(op, fmt::format("grad_out has shape {}, the convolution's output has {}", grad_out.shape().str(), out.str()),
         loc);
  return make_array(Op::Conv2dBackwardData, {.params = p}, {cast(grad_out, dt, loc), cast(weight, dt, loc)},
                    input_shape, dt, dev, loc);
}

Array conv2d_backward_weights(const Array& x, const Array& grad_out, const Shape& weight_shape, Conv2dOptions opts,
                              Loc loc) {
  const char* op = "conv2d_backward_weights";
  const Device dev = common_device({&x, &grad_out}, op, loc);
  const DType dt = floating_operands({&x, &grad_out}, op, loc);
  if (weight_shape.rank() != 4)
    fail(op, fmt::format("weight shape must be 4-D [O, C/groups, KH, KW], got {}", weight_shape.str()), loc);
  const Conv2dOptions p = conv_params(opts, weight_shape[2], weight_shape[3], op, loc);
  const Shape out = conv_shape(x.shape(), weight_shape, p, op, loc);
  if (grad_out.shape() != out)
    fail(op, fmt::format("grad_out has shape {}, the convolution's output has {}", grad_out.shape().str(), out.str()),
         loc);
  return make_array(Op::Conv2dBackwardWeights, {.params = p}, {cast(x, dt, loc), cast(grad_out, dt, loc)},
                    weight_shape, dt, dev, loc);
}

namespace {
Conv2dOptions conv1d_as_2d(const Conv1dOptions& o, const char* op, Loc loc) {
  if (o.stride < 1 || o.dilation < 1)
    fail(op, fmt::format("stride and dilation must be at least 1, got {} and {}", o.stride, o.dilation), loc);
  Conv2dOptions r{.stride = {1, o.stride}, .padding = {0, 0, o.padding.left, o.padding.right},
                  .dilation = {1, o.dilation}, .groups = o.groups};
  if (o.padding.is_same) r.padding = Padding2d::same();
  return r;
}
}  // namespace

Array conv1d(const Array& x, const Array& weight, const Array& bias, Conv1dOptions opts, Loc loc) {
  const char* op = "conv1d";
  if (node_of(x, op, loc)->shape.rank() != 3)
    fail(op, fmt::format("input must be 3-D [N, C, L], got shape {}", x.shape().str()), loc);
  if (node_of(weight, op, loc)->shape.rank() != 3)
    fail(op, fmt::format("weight must be 3-D [O, C/groups, K], got shape {}", weight.shape().str()), loc);
  Array y = conv2d(unsqueeze(x, 2, loc), unsqueeze(weight, 2, loc), bias, conv1d_as_2d(opts, op, loc), loc);
  return squeeze(y, 2, loc);
}

Array conv1d(const Array& x, const Array& weight, Conv1dOptions opts, Loc loc) {
  return conv1d(x, weight, Array(), opts, loc);
}

// ---- pooling ---------------------------------------------------------------------------------
namespace {

// The options checked, with a stride of 0 resolved to the kernel size: the node's attributes.
Pool2dOptions pool_params(const Pool2dOptions& o, const char* op, Loc loc) {
  if (o.kernel.h < 1 || o.kernel.w < 1)
    fail(op, fmt::format("kernel must be at least 1, got {}", pair_str(o.kernel.h, o.kernel.w)), loc);
  const int64_t sh = o.stride.h == 0 ? o.kernel.h : o.stride.h, sw = o.stride.w == 0 ? o.kernel.w : o.stride.w;
  if (sh < 1 || sw < 1) fail(op, fmt::format("stride must be at least 1, got {}", pair_str(sh, sw)), loc);
  if (o.padding.h < 0 || o.padding.w < 0 || 2 * o.padding.h > o.kernel.h || 2 * o.padding.w > o.kernel.w)
    fail(op, fmt::format("padding {} must be between 0 and half the kernel {}", pair_str(o.padding.h, o.padding.w),
                         pair_str(o.kernel.h, o.kernel.w)),
         loc);
  Pool2dOptions p = o;
  p.stride = {sh, sw};
  return p;
}

Shape pool_shape(const Shape& xs, const Pool2dOptions& p, const char* op, Loc loc) {
  if (xs.rank() != 4) fail(op, fmt::format("input must be 4-D [N, C, H, W] or 3-D [C, H, W], got shape {}", xs.str()), loc);
  const int64_t ph = 2 * p.padding.h, pw = 2 * p.padding.w;
  const int64_t OH = out_size(xs[2], ph, p.kernel.h, p.stride.h), OW = out_size(xs[3], pw, p.kernel.w, p.stride.w);
  if (OH < 1 || OW < 1)
    fail(op, fmt::format("kernel {} is larger than the padded input {}", pair_str(p.kernel.h, p.kernel.w),
                         pair_str(xs[2] + ph, xs[3] + pw)),
         loc);
  return Shape{xs[0], xs[1], OH, OW};
}

// Runs a pool op on x ([N, C, H, W], or [C, H, W] given a batch of one): its one output, or for
// MaxPool2dWithIndices the maxima and their i64 indices from one node (ops/make_array.h make_arrays).
std::vector<Array> pool_outputs(Op kind, const Array& x, const Pool2dOptions& opts, const char* op, Loc loc) {
  const NodePtr& n = node_of(x, op, loc);
  if (!is_floating(n->dtype))
    fail(op, fmt::format("needs a floating input, got {}; cast it first", dtype_name(n->dtype)), loc);
  const bool unbatched = n->shape.rank() == 3;
  Array in = unbatched ? unsqueeze(x, 0, loc) : x;
  const Pool2dOptions p = pool_params(opts, op, loc);
  const Shape out = pool_shape(in.shape(), p, op, loc);
  std::vector<OutputSpec> specs{{out, kind == Op::MaxPool2dIndices ? DType::I64 : n->dtype}};
  if (kind == Op::MaxPool2dWithIndices) specs.push_back({out, DType::I64});
  std::vector<Array> ys = make_arrays(kind, {.params = p}, {in}, std::move(specs), n->device, loc);
  if (unbatched)
    for (Array& y : ys) y = squeeze(y, 0, loc);
  return ys;
}

Array pool(Op kind, const Array& x, const Pool2dOptions& opts, const char* op, Loc loc) {
  return pool_outputs(kind, x, opts, op, loc)[0];
}

}  // namespace

Array max_pool2d(const Array& x, Pool2dOptions opts, Loc loc) { return pool(Op::MaxPool2d, x, opts, "max_pool2d", loc); }
Array avg_pool2d(const Array& x, Pool2dOptions opts, Loc loc) { return pool(Op::AvgPool2d, x, opts, "avg_pool2d", loc); }
Array max_pool2d_indices(const Array& x, Pool2dOptions opts, Loc loc) {
  return pool(Op::MaxPool2dIndices, x, opts, "max_pool2d_indices", loc);
}

ValuesIndices max_pool2d_with_indices(const Array& x, Pool2dOptions opts, Loc loc) {
  std::vector<Array> r = pool_outputs(Op::MaxPool2dWithIndices, x, opts, "max_pool2d_with_indices", loc);
  return {r[0], r[1]};
}

Array max_pool2d_backward(const Array& grad_out, const Array& x, Pool2dOptions opts, Loc loc) {
  const char* op = "max_pool2d_backward";
  const NodePtr& g = node_of(grad_out, op, loc);
  const NodePtr& n = node_of(x, op, loc);
  if (!is_floating(n->dtype) || g->dtype != n->dtype)
    fail(op, fmt::format("needs floating grad_out and x of one dtype, got {} and {}", dtype_name(g->dtype),
                         dtype_name(n->dtype)),
         loc);
  if (g->device != n->device) fail(op, "grad_out and x are on different devices", loc);
  const Pool2dOptions p = pool_params(opts, op, loc);
  const Shape out = pool_shape(n->shape, p, op, loc);
  if (g->shape != out)
    fail(op, fmt::format("grad_out has shape {}, the pooling of x {} gives {}", g->shape.str(), n->shape.str(), out.str()),
         loc);
  return make_array(Op::MaxPool2dBackward, {.params = p}, {grad_out, x}, n->shape, n->dtype, n->device, loc);
}

Array avg_pool2d_backward(const Array& grad_out, const Shape& input_shape, Pool2dOptions opts, Loc loc) {
  const char* op = "avg_pool2d_backward";
  const NodePtr& n = node_of(grad_out, op, loc);
  if (!is_floating(n->dtype)) fail(op, fmt::format("needs a floating gradient, got {}", dtype_name(n->dtype)), loc);
  const Pool2dOptions p = pool_params(opts, op, loc);
  const Shape out = pool_shape(input_shape, p, op, loc);
  if (n->shape != out)
    fail(op, fmt::format("grad_out has shape {}, the pooling's output has {}", n->shape.str(), out.str()), loc);
  return make_array(Op::AvgPool2dBackward, {.params = p}, {grad_out}, input_shape, n->dtype, n->device, loc);
}

namespace {
// [out, in] matrix averaging the adaptive windows [floor(i * in / out), ceil((i + 1) * in / out)).
Array adaptive_matrix(int64_t in, int64_t out, DType dt, Device dev, Loc loc) {
  std::vector<double> m(size_t(in * out), 0.0);
  for (int64_t i = 0; i < out; ++i) {
    const int64_t lo = (i * in) / out, hi = ((i + 1) * in + out - 1) / out;
    for (int64_t j = lo; j < hi; ++j) m[size_t(i * in + j)] = 1.0 / double(hi - lo);
  }
  return cast(from_vector(m, Shape{out, in}, dev, loc), dt, loc);
}
}  // namespace

Array adaptive_avg_pool2d(const Array& x, IntPair output_size, Loc loc) {
  const char* op = "adaptive_avg_pool2d";
  const NodePtr& n = node_of(x, op, loc);
  if (!is_floating(n->dtype)) fail(op, fmt::format("needs a floating input, got {}", dtype_name(n->dtype)), loc);
  const int r = n->shape.rank();
  if (r != 3 && r != 4) fail(op, fmt::format("input must be 4-D [N, C, H, W] or 3-D [C, H, W], got shape {}", n->shape.str()), loc);
  if (output_size.h < 1 || output_size.w < 1)
    fail(op, fmt::format("output size must be at least 1, got {}", pair_str(output_size.h, output_size.w)), loc);
  const int64_t H = n->shape[r - 2], W = n->shape[r - 1];
  if (H < 1 || W < 1) fail(op, fmt::format("input {} has an empty spatial dim", n->shape.str()), loc);
  Array ph = adaptive_matrix(H, output_size.h, n->dtype, n->device, loc);  // [OH, H]
  Array pw = adaptive_matrix(W, output_size.w, n->dtype, n->device, loc);  // [OW, W]
  return matmul(matmul(ph, x, loc), transpose(pw, 0, 1, loc), loc);
}

namespace {
Pool2dOptions pool1d_as_2d(const Pool1dOptions& o) {
  return {.kernel = {1, o.kernel}, .stride = {1, o.stride == 0 ? o.kernel : o.stride}, .padding = {0, o.padding},
          .count_include_pad = o.count_include_pad};
}
Array pool1d(Op kind, const Array& x, const Pool1dOptions& opts, const char* op, Loc loc) {
  const NodePtr& n = node_of(x, op, loc);
  const int r = n->shape.rank();
  if (r != 2 && r != 3) fail(op, fmt::format("input must be 3-D [N, C, L] or 2-D [C, L], got shape {}", n->shape.str()), loc);
  if (opts.kernel < 1) fail(op, fmt::format("kernel must be at least 1, got {}", opts.kernel), loc);
  Array y = pool(kind, unsqueeze(x, r - 1, loc), pool1d_as_2d(opts), op, loc);
  return squeeze(y, r - 1, loc);
}
}  // namespace

Array max_pool1d(const Array& x, Pool1dOptions opts, Loc loc) { return pool1d(Op::MaxPool2d, x, opts, "max_pool1d", loc); }
Array avg_pool1d(const Array& x, Pool1dOptions opts, Loc loc) { return pool1d(Op::AvgPool2d, x, opts, "avg_pool1d", loc); }

// ---- sorting -----------------------------------------------------------------------------------
namespace {
// An index op along dim over x (a scalar is treated as one element): `flag` is descending
// (argsort), largest (topk) or reverse (cummax, cummin); k is topk's.
Array index_op(Op kind, const Array& x, int dim, bool flag, int64_t k, const char* op, Loc loc) {
  const NodePtr& n = node_of(x, op, loc);
  const int r = n->shape.rank();
  const int d = dim_arg(dim, r, op, loc);
  if (r == 0) {
    Array one = reshape(x, Shape{1}, loc);
    return reshape(index_op(kind, one, 0, flag, k, op, loc), Shape{}, loc);
  }
  Shape out = n->shape;
  if (kind == Op::TopkIndices) out[d] = k;
  OpAttrs attrs;
  if (kind == Op::Argsort || kind == Op::TopkIndices) attrs.params = SortAttrs{.dim = d, .descending = flag, .k = k};
  else attrs.params = ScanAttrs{.dim = d, .reverse = flag};
  return make_array(kind, std::move(attrs), {x}, std::move(out), DType::I64, n->device, loc);
}

Array gather_values(const Array& x, int dim, const Array& idx, Loc loc) {
  if (x.shape().rank() == 0) return x;
  return gather(x, dim, idx, loc);
}
}  // namespace

Array argsort(const Array& x, int dim, bool descending, Loc loc) {
  return index_op(Op::Argsort, x, dim, descending, 0, "argsort", loc);
}

ValuesIndices sort(const Array& x, int dim, bool descending, Loc loc) {
  Array idx = index_op(Op::Argsort, x, dim, descending, 0, "sort", loc);
  return {gather_values(x, dim, idx, loc), idx};
}

ValuesIndices topk(const Array& x, int64_t k, int dim, bool largest, bool sorted, Loc loc) {
  (void)sorted;
  const char* op = "topk";
  const NodePtr& n = node_of(x, op, loc);
  const int r = n->shape.rank();
  const int d = dim_arg(dim, r, op, loc);
  const int64_t size = r == 0 ? 1 : n->shape[d];
  if (k < 0 || k > size)
    fail(op, fmt::format("k = {} is out of range for dim {} of size {} (expected 0 to {})", k, d, size, size), loc);
  if (r == 0) {  // a scalar is one element: k = 1 gives scalars, k = 0 empty vectors
    ValuesIndices t = topk(reshape(x, Shape{1}, loc), k, 0, largest, sorted, loc);
    if (k == 0) return t;
    return {reshape(t.values, Shape{}, loc), reshape(t.indices, Shape{}, loc)};
  }
  Array idx = index_op(Op::TopkIndices, x, d, largest, k, op, loc);
  return {gather(x, d, idx, loc), idx};
}

UniqueResult unique(const Array& x, Loc loc) {
  const char* op = "unique";
  const NodePtr& n = node_of(x, op, loc);
  const int64_t count = n->shape.numel();
  std::vector<int64_t> inverse(static_cast<size_t>(count));
  std::vector<int64_t> counts;
  Array values;
  // Sorted distinct keys; NaN (floats) sorts last and counts as one value.
  auto run = [&](auto data, auto less, auto equal) {
    std::vector<int64_t> order(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) order[size_t(i)] = i;
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return less(data[size_t(a)], data[size_t(b)]); });
    std::vector<typename decltype(data)::value_type> vals;
    for (int64_t j = 0; j < count; ++j) {
      const auto v = data[size_t(order[size_t(j)])];
      if (vals.empty() || !equal(vals.back(), v)) {
        vals.push_back(v);
        counts.push_back(0);
      }
      ++counts.back();
      inverse[size_t(order[size_t(j)])] = int64_t(vals.size()) - 1;
    }
    return vals;
  };
  if (is_floating(n->dtype)) {
    std::vector<double> data = x.to_vector<double>();
    auto less = [](double a, double b) { return std::isnan(a) ? false : std::isnan(b) ? true : a < b; };
    auto equal = [](double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; };
    std::vector<double> vals = run(data, less, equal);
    values = cast(from_vector(vals, Shape{int64_t(vals.size())}, n->device, loc), n->dtype, loc);
  } else {
    std::vector<int64_t> data = x.to_vector<int64_t>();
    std::vector<int64_t> vals = run(data, std::less<int64_t>(), std::equal_to<int64_t>());
    values = cast(from_vector(vals, Shape{int64_t(vals.size())}, n->device, loc), n->dtype, loc);
  }
  return {values, from_vector(inverse, n->shape, n->device, loc),
          from_vector(counts, Shape{int64_t(counts.size())}, n->device, loc)};
}

// ---- scans ---------------------------------------------------------------------------------
namespace {
Array scan(Op kind, const Array& x, int dim, bool reverse, const char* op, Loc loc) {
  const NodePtr& n = node_of(x, op, loc);
  if (autocast_active()) [[unlikely]] {
    if (auto cast_x = autocast_operands(kind, {x}, loc)) return scan(kind, (*cast_x)[0], dim, reverse, op, loc);
  }
  // As sum: integers accumulate in i64, except u64 (which i64 cannot hold; it wraps in u64).
  const DType dt = is_floating(n->dtype) || n->dtype == DType::U64 ? n->dtype : DType::I64;
  Array in = cast(x, dt, loc);
  const int r = n->shape.rank();
  const int d = dim_arg(dim, r, op, loc);
  if (r == 0) return in;
  return make_array(kind, {.params = ScanAttrs{.dim = d, .reverse = reverse}}, {in}, n->shape, dt, n->device, loc);
}
}  // namespace

Array cumsum(const Array& x, int dim, Loc loc) { return scan(Op::Cumsum, x, dim, false, "cumsum", loc); }
Array cumprod(const Array& x, int dim, Loc loc) { return scan(Op::Cumprod, x, dim, false, "cumprod", loc); }

// Internal (autograd): suffix sums, the gradient of cumsum.
Array cumsum_reverse(const Array& x, int dim, Loc loc) { return scan(Op::Cumsum, x, dim, true, "cumsum", loc); }

ValuesIndices cummax(const Array& x, int dim, Loc loc) {
  Array idx = index_op(Op::CummaxIndices, x, dim, false, 0, "cummax", loc);
  return {gather_values(x, dim, idx, loc), idx};
}
ValuesIndices cummin(const Array& x, int dim, Loc loc) {
  Array idx = index_op(Op::CumminIndices, x, dim, false, 0, "cummin", loc);
  return {gather_values(x, dim, idx, loc), idx};
}

}  // namespace ember
