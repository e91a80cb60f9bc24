// ONNX shape and movement operators: Shape, Size, Reshape, Transpose, Concat, Split, Slice,
// Squeeze/Unsqueeze (axes attribute before opset 13, input after), Expand, Flatten, Tile, Pad,
// Gather*, Scatter*, Constant, ConstantOfShape, Range and Trilu. Shape-like inputs are read to
// the host (they are usually folded constants).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "onnx/op_registry.h"

namespace ember::onnx::detail {
namespace {

Array ints_array(const std::vector<int64_t>& v, Device device) {
  return from_vector(v, Shape{int64_t(v.size())}, device);
}

std::vector<Array> op_shape(const OpContext& c) {
  const Array& x = c.input(0);
  int64_t r = x.rank();
  int64_t start = c.attr_int("start", 0), end = c.attr_int("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  std::vector<int64_t> dims;
  for (int64_t d = start; d < end; ++d) dims.push_back(x.shape()[int(d)]);
  return {ints_array(dims, c.device)};
}

std::vector<Array> op_size(const OpContext& c) {
  return {full(Shape{}, c.input(0).numel(), TensorOptions{.dtype = DType::I64, .device = c.device})};
}

std::vector<Array> op_reshape(const OpContext& c) {
  const Array& x = c.input(0);
  std::vector<int64_t> shape = c.opset >= 5 ? c.ints_input(1) : c.attr_ints("shape");
  bool allowzero = c.attr_int("allowzero", 0) != 0;
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && !allowzero) {
      if (int(i) >= x.rank()) c.fail("a 0 in shape at position " + std::to_string(i) + " has no input dim to copy");
      shape[i] = x.shape()[int(i)];
    }
    if (shape[i] == -1) {
      if (infer >= 0) c.fail("shape has more than one -1");
      infer = int(i);
    } else if (shape[i] < 0) {
      c.fail("shape has the negative size " + std::to_string(shape[i]));
    } else {
      if (shape[i] > 0 && known > std::numeric_limits<int64_t>::max() / shape[i])
        c.fail("the sizes of shape overflow 64 bits");
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || x.numel() % known != 0) c.fail("cannot infer the -1 of the shape for " + x.shape().str());
    shape[size_t(infer)] = x.numel() / known;
  }
  return {reshape(x, Shape(shape))};
}

std::vector<Array> op_transpose(const OpContext& c) {
  const Array& x = c.input(0);
  std::vector<int64_t> perm = c.attr_ints("perm");
  std::vector<int> dims;
  if (perm.empty())
    for (int d = x.rank() - 1; d >= 0; --d) dims.push_back(d);
  for (int64_t p : perm) dims.push_back(c.axis(p, x.rank()));
  return {permute(x, dims)};
}

std::vector<Array> op_concat(const OpContext& c) {
  std::vector<Array> xs;
  for (int i = 0; i < c.num_inputs(); ++i)
    if (c.has_input(i)) xs.push_back(c.input(i));
  if (xs.empty()) c.fail("needs at least one input");
  int axis = c.axis(c.attr_int("axis", 0), xs[0].rank());
  return {cat(xs, axis)};
}

std::vector<Array> op_split(const OpContext& c) {
  const Array& x = c.input(0);
  int axis = c.axis(c.attr_int("axis", 0), x.rank());
  const int64_t n = int64_t(c.node().outputs.size());
  std::vector<int64_t> sizes = c.opset >= 13 ? (c.has_input(1) ? c.ints_input(1) : std::vector<int64_t>{})
                                             : c.attr_ints("split");
  const int64_t dim = x.shape()[axis];
  if (sizes.empty()) {
    int64_t parts = c.opset >= 18 && c.has_attr("num_outputs") ? c.attr_int("num_outputs", n) : n;
    int64_t each = (dim + parts - 1) / parts;  // opset 18: the last piece may be smaller
    if (c.opset < 18 && dim % parts != 0) c.fail("dim " + std::to_string(dim) + " does not split into " + std::to_string(parts) + " equal parts");
    for (int64_t p = 0, left = dim; p < parts; ++p, left -= each) sizes.push_back(std::min(each, std::max<int64_t>(left, 0)));
  }
  if (std::accumulate(sizes.begin(), sizes.end(), int64_t(0)) != dim) c.fail("split sizes do not add up to " + std::to_string(dim));
  return split(x, sizes, axis);
}

std::vector<Array> op_slice(const OpContext& c) {
  const Array& x = c.input(0);
  std::vector<int64_t> starts, ends, axes, steps;
  if (c.opset < 10) {
    starts = c.attr_ints("starts");
    ends = c.attr_ints("ends");
    axes = c.attr_ints("axes");
  } else {
    starts = c.ints_input(1);
    ends = c.ints_input(2);
    if (c.has_input(3)) axes = c.ints_input(3);
    if (c.has_input(4)) steps = c.ints_input(4);
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    c.fail("starts, ends, axes and steps must have one length");
  Array y = x;
  for (size_t i = 0; i < starts.size(); ++i) {
    int axis = c.axis(axes[i], x.rank());
    const int64_t dim = x.shape()[axis];
    int64_t step = steps[i];
    if (step == 0) c.fail("step 0");
    int64_t s = starts[i], e = ends[i];
    if (s < 0) s = s < -dim ? 0 : s + dim;  // careful with INT64_MIN: no overflow
    if (e < 0) e = e < -dim ? -1 : e + dim;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      y = slice(y, axis, s, std::max(s, e), step);
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      // Indices s, s + step, ... > e: the same as a positive slice of the reversed axis.
      int64_t rs = dim - 1 - s, re = dim - 1 - e;
      if (dim == 0) continue;
      y = slice(flip(y, {axis}), axis, rs, std::max(rs, re), -step);
    }
  }
  return {y};
}

std::vector<int64_t> axes_arg(const OpContext& c) {
  if (c.opset >= 13) return c.has_input(1) ? c.ints_input(1) : std::vector<int64_t>{};
  return c.attr_ints("axes");
}

std::vector<Array> op_squeeze(const OpContext& c) {
  const Array& x = c.input(0);
  std::vector<int64_t> axes = axes_arg(c);
  std::vector<int64_t> shape;
  std::vector<bool> drop(size_t(x.rank()), false);
  if (axes.empty()) {
    for (int d = 0; d < x.rank(); ++d) drop[size_t(d)] = x.shape()[d] == 1;
  } else {
    for (int64_t a : axes) {
      int d = c.axis(a, x.rank());
      if (x.shape()[d] != 1) c.fail("cannot squeeze dim " + std::to_string(d) + " of size " + std::to_string(x.shape()[d]));
      drop[size_t(d)] = true;
    }
  }
  for (int d = 0; d < x.rank(); ++d)
    if (!drop[size_t(d)]) shape.push_back(x.shape()[d]);
  return {reshape(x, Shape(shape))};
}

std::vector<Array> op_unsqueeze(const OpContext& c) {
  const Array& x = c.input(0);
  std::vector<int64_t> axes = axes_arg(c);
  const int out_rank = x.rank() + int(axes.size());
  std::vector<bool> is_new(size_t(out_rank), false);
  for (int64_t a : axes) {
    int d = c.axis(a, out_rank);
    if (is_new[size_t(d)]) c.fail("axes repeat " + std::to_string(d));
    is_new[size_t(d)] = true;
  }
  std::vector<int64_t> shape;
  int src = 0;
  for (int d = 0; d < out_rank; ++d) shape.push_back(is_new[size_t(d)] ? 1 : x.shape()[src++]);
  return {reshape(x, Shape(shape))};
}

std::vector<Array> op_expand(const OpContext& c) {
  const Array& x = c.input(0);
  Shape target = broadcast_shapes(x.shape(), Shape(c.ints_input(1)), "Expand");
  return {contiguous(broadcast_to(x, target))};
}

std::vector<Array> op_flatten(const OpContext& c) {
  const Array& x = c.input(0);
  int64_t axis = c.attr_int("axis", 1);
  if (axis < -x.rank() || axis > x.rank()) c.fail("axis " + std::to_string(axis) + " out of range");
  if (axis < 0) axis += x.rank();
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < x.rank(); ++d) (d < axis ? outer : inner) *= x.shape()[d];
  return {reshape(x, Shape{outer, inner})};
}

std::vector<Array> op_tile(const OpContext& c) {
  std::vector<int64_t> reps = c.ints_input(1);
  if (int(reps.size()) != c.input(0).rank()) c.fail("repeats must have one entry per dim");
  return {tile(c.input(0), reps)};
}

std::vector<Array> op_pad(const OpContext& c) {
  const Array& x = c.input(0);
  std::string mode = c.attr_string("mode", "constant");
  std::vector<int64_t> pads = c.opset >= 11 ? c.ints_input(1) : c.attr_ints("pads");
  double value = c.opset >= 11 ? (c.has_input(2) ? c.floats_input(2).at(0) : 0.0) : c.attr_float("value", 0.0);
  std::vector<int64_t> axes;
  if (c.has_input(3)) axes = c.ints_input(3);
  else
    for (int d = 0; d < x.rank(); ++d) axes.push_back(d);
  if (pads.size() != 2 * axes.size()) c.fail("pads must hold 2 values per padded axis");
  std::vector<int64_t> begin(size_t(x.rank()), 0), end(size_t(x.rank()), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    int d = c.axis(axes[i], x.rank());
    begin[size_t(d)] = pads[i];
    end[size_t(d)] = pads[i + axes.size()];
  }
  std::vector<int64_t> ember_pads;  // (before, after) from the last dim
  for (int d = x.rank() - 1; d >= 0; --d) {
    ember_pads.push_back(begin[size_t(d)]);
    ember_pads.push_back(end[size_t(d)]);
  }
  if (mode == "wrap") {  // circular: each dim gets its last `before` and first `after` entries around it
    Array y = x;
    for (int d = 0; d < x.rank(); ++d) {
      const int64_t n = y.shape()[d], b = begin[size_t(d)], e = end[size_t(d)];
      if (b < 0 || e < 0 || b > n || e > n) c.unsupported("wrap padding beyond the dim's size or negative");
      std::vector<Array> parts;
      if (b > 0) parts.push_back(slice(y, d, n - b, n));
      parts.push_back(y);
      if (e > 0) parts.push_back(slice(y, d, 0, e));
      if (parts.size() > 1) y = cat(parts, d);
    }
    return {y};
  }
  PadMode m = PadMode::Constant;
  if (mode == "reflect") m = PadMode::Reflect;
  else if (mode == "edge") m = PadMode::Replicate;
  else if (mode != "constant") c.unsupported("mode '" + mode + "'");
  return {pad(x, ember_pads, m, value)};
}

Array normalize_index(const Array& idx, int64_t dim) {
  Array i = cast(idx, DType::I64);
  return where(lt(i, 0), add(i, dim), i);
}

std::vector<Array> op_gather(const OpContext& c) {
  const Array& x = c.input(0);
  const Array& idx = c.input(1);
  if (x.rank() == 0) c.fail("data must have rank >= 1, got a scalar");  // found by the fuzzer
  int axis = c.axis(c.attr_int("axis", 0), x.rank());
  std::vector<int64_t> shape;
  for (int d = 0; d < axis; ++d) shape.push_back(x.shape()[d]);
  for (int64_t d : idx.shape()) shape.push_back(d);
  for (int d = axis + 1; d < x.rank(); ++d) shape.push_back(x.shape()[d]);
  // Static indices (constants, shape arithmetic) that pick one position or a run of consecutive
  // ones give a view (a slice) instead of a gather kernel: the exported attention splits its packed
  // q/k/v projection with Gather(index 0, 1, 2), three copies per layer otherwise.
  if (is_static_value(idx) && idx.numel() >= 1) {
    std::vector<int64_t> v = c.ints_input(1);
    const int64_t n = x.shape()[axis];
    bool run = true;
    for (size_t k = 0; k < v.size(); ++k) {
      const int64_t i = v[k] < 0 ? v[k] + n : v[k];
      if (i < 0 || i >= n)
        c.fail("index " + std::to_string(v[k]) + " is out of range for axis " + std::to_string(axis) + " of size " +
               std::to_string(n));
      run = run && (k == 0 || i == v[0] + int64_t(k));
      v[k] = i;
    }
    if (run) return {reshape(slice(x, axis, v[0], v[0] + int64_t(v.size())), Shape(shape))};
  }
  Array flat = reshape(normalize_index(idx, x.shape()[axis]), Shape{idx.numel()});
  Array picked = index_select(x, axis, flat);
  return {reshape(picked, Shape(shape))};
}

std::vector<Array> op_gather_elements(const OpContext& c) {
  const Array& x = c.input(0);
  if (x.rank() == 0) c.fail("data must have rank >= 1, got a scalar");
  int axis = c.axis(c.attr_int("axis", 0), x.rank());
  return {gather(x, axis, normalize_index(c.input(1), x.shape()[axis]))};
}

std::vector<Array> op_gather_nd(const OpContext& c) {
  const Array& x = c.input(0);
  Array idx = cast(c.input(1), DType::I64);
  const int64_t b = c.attr_int("batch_dims", 0);
  if (b == 0) return {gather_nd(x, idx)};
  // batch_dims b: the first b dims of data and indices pair up. Flattened to one batch dim B, each
  // index tuple gets its batch number prepended, which makes it a batch_dims = 0 gather.
  if (b < 0 || b >= x.rank() || b >= idx.rank()) c.fail("batch_dims " + std::to_string(b) + " out of range");
  std::vector<int64_t> batch;
  int64_t B = 1;
  for (int d = 0; d < int(b); ++d) {
    if (x.shape()[d] != idx.shape()[d]) c.fail("data and indices differ in batch dim " + std::to_string(d));
    batch.push_back(x.shape()[d]);
    B *= x.shape()[d];
  }
  std::vector<int64_t> xs = {B}, is = {B};
  for (int d = int(b); d < x.rank(); ++d) xs.push_back(x.shape()[d]);
  for (int d = int(b); d < idx.rank(); ++d) is.push_back(idx.shape()[d]);
  Array xf = reshape(x, Shape(xs)), ixf = reshape(idx, Shape(is));
  std::vector<int64_t> bshape(is.size(), 1);
  bshape[0] = B;
  std::vector<int64_t> tuple_shape = is;
  tuple_shape.back() = 1;
  Array bn = broadcast_to(reshape(arange(0, B, 1, DType::I64, x.device()), Shape(bshape)), Shape(tuple_shape));
  Array g = gather_nd(xf, cat({bn, ixf}, int(is.size()) - 1));
  std::vector<int64_t> out = batch;
  for (int d = 1; d < g.rank(); ++d) out.push_back(g.shape()[d]);
  return {reshape(g, Shape(out))};
}

// Scatter with a reduction other than none (ScatterElements) or add (both ops): computed on the
// host in the element type (f64 for floats, i64 for integers), in index order as the reference.
// Not differentiable; the values are read back once.
template <class T>
Array host_scatter(const OpContext& c, const Array& x, const std::vector<int64_t>& offsets, const Array& updates,
                   int64_t inner, const std::string& red) {
  std::vector<T> out = x.to_vector<T>();
  std::vector<T> up = updates.to_vector<T>();
  for (size_t i = 0; i < offsets.size(); ++i)
    for (int64_t k = 0; k < inner; ++k) {
      int64_t o = offsets[i] + k;
      if (o < 0 || o >= int64_t(out.size())) c.fail("index out of range");
      T u = up[i * size_t(inner) + size_t(k)];
      T& v = out[size_t(o)];
      if (red == "add") v = v + u;
      else if (red == "mul") v = v * u;
      else if (red == "max") v = std::max(v, u);
      else if (red == "min") v = std::min(v, u);
      else c.unsupported("reduction '" + red + "'");
    }
  Array r = from_vector(out, x.shape(), x.device());
  return r.dtype() == x.dtype() ? r : cast(r, x.dtype());
}

Array host_scatter_any(const OpContext& c, const Array& x, const std::vector<int64_t>& offsets, const Array& updates,
                       int64_t inner, const std::string& red) {
  if (is_floating(x.dtype())) return host_scatter<double>(c, x, offsets, updates, inner, red);
  if (x.dtype() == DType::U64) return host_scatter<uint64_t>(c, x, offsets, updates, inner, red);  // unsigned max/min
  return host_scatter<int64_t>(c, x, offsets, updates, inner, red);
}

std::vector<Array> op_scatter_elements(const OpContext& c) {
  const Array& x = c.input(0);
  int axis = c.axis(c.attr_int("axis", 0), x.rank());
  Array idx = normalize_index(c.input(1), x.shape()[axis]);
  std::string red = c.attr_string("reduction", "none");
  if (red == "none") return {scatter(x, axis, idx, c.input(2))};
  if (red == "add") return {scatter_add(x, axis, idx, c.input(2))};
  // Offsets of every index element: its own position with the axis coordinate replaced.
  const Shape& is = idx.shape();
  std::vector<int64_t> iv = idx.to_vector<int64_t>(), offsets(iv.size());
  std::vector<int64_t> xstrides = x.shape().contiguous_strides();
  for (size_t p = 0; p < iv.size(); ++p) {
    int64_t rest = int64_t(p), off = 0;
    for (int d = is.rank() - 1; d >= 0; --d) {
      int64_t coord = rest % is[d];
      rest /= is[d];
      off += (d == axis ? iv[p] : coord) * xstrides[size_t(d)];
    }
    offsets[p] = off;
  }
  return {host_scatter_any(c, x, offsets, c.input(2), 1, red)};
}

std::vector<Array> op_scatter_nd(const OpContext& c) {
  std::string red = c.attr_string("reduction", "none");
  if (red == "none") return {scatter_nd(c.input(0), cast(c.input(1), DType::I64), c.input(2))};
  const Array& x = c.input(0);
  const Array& idx = c.input(1);
  const int64_t k = idx.shape()[idx.rank() - 1];
  if (k > x.rank()) c.fail("indices address " + std::to_string(k) + " dims of a rank-" + std::to_string(x.rank()) + " tensor");
  std::vector<int64_t> strides = x.shape().contiguous_strides();
  int64_t inner = 1;
  for (int d = int(k); d < x.rank(); ++d) inner *= x.shape()[d];
  std::vector<int64_t> iv = idx.to_vector<int64_t>(), offsets;
  for (size_t p = 0; p + size_t(k) <= iv.size() && k > 0; p += size_t(k)) {
    int64_t off = 0;
    for (int64_t j = 0; j < k; ++j) {
      int64_t v = iv[p + size_t(j)], dim = x.shape()[int(j)];
      if (v < 0) v += dim;
      if (v < 0 || v >= dim) c.fail("index " + std::to_string(iv[p + size_t(j)]) + " out of range for dim " + std::to_string(dim));
      off += v * strides[size_t(j)];
    }
    offsets.push_back(off);
  }
  return {host_scatter_any(c, x, offsets, c.input(2), inner, red)};
}

std::vector<Array> op_constant(const OpContext& c) {
  const Node& n = c.node();
  Device cpu = Device::cpu();
  if (const Attribute* a = c.attr("value")) {
    if (a->kind != Attribute::Kind::Tensor) c.fail("attribute 'value' must be a tensor");
    return {a->t};
  }
  if (c.has_attr("value_float")) return {full(Shape{}, c.attr_float("value_float", 0), TensorOptions{.dtype = DType::F32, .device = cpu})};
  if (c.has_attr("value_int")) return {full(Shape{}, c.attr_int("value_int", 0), TensorOptions{.dtype = DType::I64, .device = cpu})};
  if (c.has_attr("value_floats")) {
    std::vector<double> v = c.attr_floats("value_floats");
    std::vector<float> f(v.begin(), v.end());
    return {from_vector(f, Shape{int64_t(f.size())})};
  }
  if (c.has_attr("value_ints")) return {ints_array(c.attr_ints("value_ints"), cpu)};
  c.unsupported("needs one of value, value_float(s), value_int(s) (sparse and string values are not supported; node has " +
                std::to_string(n.attributes.size()) + " attributes)");
}

std::vector<Array> op_constant_of_shape(const OpContext& c) {
  std::vector<int64_t> shape = c.ints_input(0);
  for (int64_t d : shape)
    if (d < 0) c.fail("negative dim " + std::to_string(d));
  Shape s(shape);
  if (const Attribute* a = c.attr("value")) {
    if (a->kind != Attribute::Kind::Tensor || a->t.numel() != 1) c.fail("attribute 'value' must be a one-element tensor");
    Array v = reshape(to_device(a->t, c.device), Shape{});
    return {contiguous(broadcast_to(v, s))};
  }
  return {zeros(s, TensorOptions{.dtype = DType::F32, .device = c.device})};
}

std::vector<Array> op_range(const OpContext& c) {
  const Array& start = c.input(0);
  DType d = start.dtype();
  if (is_floating(d)) {
    double s = c.floats_input(0).at(0), l = c.floats_input(1).at(0), dt = c.floats_input(2).at(0);
    if (dt == 0) c.fail("delta 0");
    int64_t n = std::max<int64_t>(int64_t(std::ceil((l - s) / dt)), 0);
    // start + i * delta, as the spec defines it (not accumulated).
    Array i = arange(0, n, 1, DType::F64, c.device);
    return {cast(add(mul(i, dt), s), d)};
  }
  int64_t s = c.ints_input(0).at(0), l = c.ints_input(1).at(0), dt = c.ints_input(2).at(0);
  if (dt == 0) c.fail("delta 0");
  int64_t n = std::max<int64_t>((l - s + (dt > 0 ? dt - 1 : dt + 1)) / dt, 0);
  Array i = arange(0, n, 1, DType::I64, c.device);
  return {cast(add(mul(i, dt), s), d)};
}

std::vector<Array> op_trilu(const OpContext& c) {
  const Array& x = c.input(0);
  int64_t k = c.has_input(1) ? c.ints_input(1).at(0) : 0;
  bool upper = c.attr_int("upper", 1) != 0;
  return {upper ? triu(x, k) : tril(x, k)};
}

const Registrar registrar({
    {"Shape", {op_shape}},
    {"Size", {op_size}},
    {"Reshape", {op_reshape}},
    {"Transpose", {op_transpose}},
    {"Concat", {op_concat}},
    {"Split", {op_split}},
    {"Slice", {op_slice}},
    {"Squeeze", {op_squeeze}},
    {"Unsqueeze", {op_unsqueeze}},
    {"Expand", {op_expand}},
    {"Flatten", {op_flatten}},
    {"Tile", {op_tile}},
    {"Pad", {op_pad}},
    {"Gather", {op_gather}},
    {"GatherElements", {op_gather_elements}},
    {"GatherND", {op_gather_nd}},
    {"ScatterElements", {op_scatter_elements}},
    {"ScatterND", {op_scatter_nd}},
    {"Constant", {op_constant}},
    {"ConstantOfShape", {op_constant_of_shape}},
    {"Range", {op_range}},
    {"Trilu", {op_trilu}},
});

}  // namespace
}  // namespace ember::onnx::detail
