// ONNX reductions (Reduce*, ArgMax/ArgMin), the softmax family, CumSum and TopK. The axes of a
// Reduce* op are an attribute up to opset 17 (ReduceSum: 12) and an input after; without axes
// every dim is reduced unless noop_with_empty_axes. Softmax before opset 13 flattens the input
// to 2-D at `axis`; from 13 it works along one axis.
#include <algorithm>
#include <cmath>

#include "onnx/op_registry.h"

namespace ember::onnx::detail {
namespace {

enum class Reduce { Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare };

std::vector<Array> op_reduce(const OpContext& c, Reduce kind) {
  const Array& x = c.input(0);
  const int64_t axes_input_from = kind == Reduce::Sum ? 13 : 18;
  std::vector<int64_t> axes;
  if (c.opset >= axes_input_from) {
    if (c.has_input(1)) axes = c.ints_input(1);
  } else {
    axes = c.attr_ints("axes");
  }
  bool keep = c.attr_int("keepdims", 1) != 0;
  if (axes.empty() && c.attr_int("noop_with_empty_axes", 0) != 0) return {x};
  std::vector<int> dims;
  for (int64_t a : axes) dims.push_back(c.axis(a, x.rank()));
  if (dims.empty())
    for (int d = 0; d < x.rank(); ++d) dims.push_back(d);
  std::sort(dims.begin(), dims.end());
  if (std::adjacent_find(dims.begin(), dims.end()) != dims.end()) c.fail("axes repeat a dim");
  if (x.rank() == 0) return {x};
  // An empty reduction gives the identity of the op (ONNX: 0, 1, -inf / +inf for max / min).
  bool empty = false;
  for (int d : dims) empty = empty || x.shape()[d] == 0;
  if (empty && (kind == Reduce::Max || kind == Reduce::Min || kind == Reduce::LogSumExp || kind == Reduce::LogSum)) {
    std::vector<int64_t> shape;
    for (int d = 0; d < x.rank(); ++d) {
      bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
      if (!reduced) shape.push_back(x.shape()[d]);
      else if (keep) shape.push_back(1);
    }
    double v = kind == Reduce::Min ? INFINITY : -INFINITY;
    if (!is_floating(x.dtype()))
      v = kind == Reduce::Min ? double(INT32_MAX) : double(INT32_MIN);  // int32; int64 rarely reduced empty
    return {full(Shape(shape), v, TensorOptions{.dtype = x.dtype(), .device = x.device()})};
  }
  const bool integral = !is_floating(x.dtype());
  Array xf = integral && (kind == Reduce::L2 || kind == Reduce::LogSum || kind == Reduce::LogSumExp || kind == Reduce::Mean)
                 ? cast(x, DType::F64)
                 : x;
  Array y;
  switch (kind) {
    case Reduce::Sum: y = sum(xf, dims, keep); break;
    case Reduce::Mean: y = mean(xf, dims, keep); break;
    case Reduce::Max: y = max(xf, dims, keep); break;
    case Reduce::Min: y = min(xf, dims, keep); break;
    case Reduce::Prod: y = prod(xf, dims, keep); break;
    case Reduce::L1: y = sum(abs(xf), dims, keep); break;
    case Reduce::L2: y = sqrt(sum(mul(xf, xf), dims, keep)); break;
    case Reduce::LogSum: y = log(sum(xf, dims, keep)); break;
    case Reduce::LogSumExp: y = logsumexp(xf, dims, keep); break;
    case Reduce::SumSquare: y = sum(mul(xf, xf), dims, keep); break;
  }
  if (integral && (kind == Reduce::Mean || kind == Reduce::L2 || kind == Reduce::LogSum)) y = trunc(y);
  if (y.dtype() != x.dtype()) y = cast(y, x.dtype());
  return {y};
}

OpEntry reduce(Reduce kind) {
  return {[kind](const OpContext& c) { return op_reduce(c, kind); }};
}

std::vector<Array> op_arg(const OpContext& c, bool is_max) {
  const Array& x = c.input(0);
  int axis = c.axis(c.attr_int("axis", 0), x.rank());
  bool keep = c.attr_int("keepdims", 1) != 0;
  bool last = c.attr_int("select_last_index", 0) != 0;
  if (!last) return {is_max ? argmax(x, axis, keep) : argmin(x, axis, keep)};
  // The last extreme: the first one of the reversed axis, mapped back.
  Array flipped = flip(x, {axis});
  Array idx = is_max ? argmax(flipped, axis, keep) : argmin(flipped, axis, keep);
  return {sub(x.shape()[axis] - 1, idx)};
}

// Softmax / LogSoftmax / Hardmax, with the pre-13 "flatten at axis" semantics.
std::vector<Array> op_softmax(const OpContext& c, int which) {
  const Array& x = c.input(0);
  auto apply = [&](const Array& v, int dim) -> Array {
    if (which == 0) return softmax(v, dim);
    if (which == 1) return log_softmax(v, dim);
    Array am = argmax(v, dim, true);  // Hardmax: one-hot of the first maximum
    Array iota = arange(0, v.shape()[dim], 1, DType::I64, v.device());
    std::vector<int64_t> view(size_t(v.rank()), 1);
    view[size_t(dim)] = v.shape()[dim];
    return cast(eq(reshape(iota, Shape(view)), am), v.dtype());
  };
  if (x.rank() == 0) c.fail("input must have rank >= 1");
  if (c.opset >= 13) return {apply(x, c.axis(c.attr_int("axis", -1), x.rank()))};
  int axis = c.axis(c.attr_int("axis", 1), x.rank());
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < x.rank(); ++d) (d < axis ? outer : inner) *= x.shape()[d];
  return {reshape(apply(reshape(x, Shape{outer, inner}), 1), x.shape())};
}

std::vector<Array> op_cumsum(const OpContext& c) {
  const Array& x = c.input(0);
  std::vector<int64_t> ax = c.ints_input(1);
  if (ax.size() != 1) c.fail("axis must hold one value");
  int axis = c.axis(ax[0], x.rank());
  bool exclusive = c.attr_int("exclusive", 0) != 0, reverse = c.attr_int("reverse", 0) != 0;
  Array v = reverse ? flip(x, {axis}) : x;
  Array y = cumsum(v, axis);
  if (y.dtype() != x.dtype()) y = cast(y, x.dtype());
  if (exclusive) y = sub(y, v);
  if (reverse) y = flip(y, {axis});
  return {y};
}

std::vector<Array> op_topk(const OpContext& c) {
  const Array& x = c.input(0);
  int64_t k = c.opset >= 10 ? c.ints_input(1).at(0) : c.attr_int("k", 1);
  int axis = c.axis(c.attr_int("axis", -1), x.rank());
  bool largest = c.attr_int("largest", 1) != 0;
  if (k < 0 || k > x.shape()[axis]) c.fail("k = " + std::to_string(k) + " is outside [0, " + std::to_string(x.shape()[axis]) + "]");
  ValuesIndices r = topk(x, k, axis, largest, true);
  return {r.values, r.indices};
}

const Registrar registrar({
    {"ReduceSum", reduce(Reduce::Sum)},
    {"ReduceMean", reduce(Reduce::Mean)},
    {"ReduceMax", reduce(Reduce::Max)},
    {"ReduceMin", reduce(Reduce::Min)},
    {"ReduceProd", reduce(Reduce::Prod)},
    {"ReduceL1", reduce(Reduce::L1)},
    {"ReduceL2", reduce(Reduce::L2)},
    {"ReduceLogSum", reduce(Reduce::LogSum)},
    {"ReduceLogSumExp", reduce(Reduce::LogSumExp)},
    {"ReduceSumSquare", reduce(Reduce::SumSquare)},
    {"ArgMax", {[](const OpContext& c) { return op_arg(c, true); }}},
    {"ArgMin", {[](const OpContext& c) { return op_arg(c, false); }}},
    {"Softmax", {[](const OpContext& c) { return op_softmax(c, 0); }}},
    {"LogSoftmax", {[](const OpContext& c) { return op_softmax(c, 1); }}},
    {"Hardmax", {[](const OpContext& c) { return op_softmax(c, 2); }}},
    {"CumSum", {op_cumsum}},
    {"TopK", {op_topk}},
});

}  // namespace
}  // namespace ember::onnx::detail
