// Backward rules. Elementwise rules come from the gradient columns of src/op_table/ops.def; the rules
// of reductions, movement, indexing and matmul are written here, all with ordinary front-end ops
// so that gradients are lazy and go through the same scheduler as the forward pass.
#include <fmt/format.h>

#include "autograd/grad_math.h"
#include "autograd/grad_node.h"

namespace ember::autograd {

using namespace math;  // NOLINT: operators for the rule formulas

namespace {

// The gradient of a piecewise-constant op (the table's `zero_gradient(g)` column).
Array zero_gradient(const Array& g) { return zeros_like(g); }

// The input's shape with the reduced dims kept as size 1 (what keepdim would have given).
Shape keep_shape(const Shape& in, const std::vector<int64_t>& reduced) {
  Shape s = in;
  for (int64_t d : reduced) s[int(d)] = 1;
  return s;
}

std::vector<int> as_dims(const std::vector<int64_t>& v) { return std::vector<int>(v.begin(), v.end()); }

// Gradient of slice: the slice's gradient placed into zeros of the input's shape.
Array slice_backward(const Array& g, const Shape& in_shape, const SliceAttrs& cut) {
  Array r = g;
  for (int d = 0; d < in_shape.rank(); ++d) {
    const int64_t start = cut.start[size_t(d)], step = cut.step[size_t(d)];
    int64_t len = r.shape()[d], size = in_shape[d];
    if (len == size) continue;
    TensorOptions like{r.dtype(), r.device()};
    if (len == 0) {
      Shape z = r.shape();
      z[d] = size;
      r = zeros(z, like);
      continue;
    }
    if (step > 1) {  // interleave step-1 zeros after every element, then drop the tail
      Array u = unsqueeze(r, d + 1);
      Shape z = u.shape();
      z[d + 1] = step - 1;
      Array spread = cat({u, zeros(z, like)}, d + 1);
      Shape merged = r.shape();
      merged[d] = len * step;
      r = slice(reshape(spread, merged), d, 0, (len - 1) * step + 1);
    }
    int64_t before = start, after = size - start - r.shape()[d];
    std::vector<Array> parts;
    Shape z = r.shape();
    if (before > 0) {
      z[d] = before;
      parts.push_back(zeros(z, like));
    }
    parts.push_back(r);
    if (after > 0) {
      z[d] = after;
      parts.push_back(zeros(z, like));
    }
    r = parts.size() == 1 ? r : cat(parts, d);
  }
  return r;
}

// A permutation node that swaps the last two dims and keeps the others (a transpose).
bool swaps_last_two(const GradNode& n) {
  if (n.op != Op::Permute) return false;
  const auto& p = n.attrs.get<PermuteAttrs>().order;
  size_t r = p.size();
  if (r < 2 || p[r - 1] != int64_t(r - 2) || p[r - 2] != int64_t(r - 1)) return false;
  for (size_t i = 0; i + 2 < r; ++i)
    if (p[i] != int64_t(i)) return false;
  return true;
}

std::vector<int> inverse_permutation(const std::vector<int64_t>& perm) {
  std::vector<int> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[size_t(perm[i])] = int(i);
  return inv;
}

}  // namespace

std::vector<Array> apply_rule(GradNode& node, const Array& g, const std::vector<Array>& extra_grads) {
  if (node.custom) return node.custom(node, g);
  const auto& in = node.inputs;
  const auto& a = node.attrs;
  auto saved = [&](size_t i) { return i < node.saved_inputs.size() ? node.saved_inputs[i] : Array(); };
  Array x = saved(0), y = saved(1), z = saved(2);
  Array out = node.saved_output ? node.output() : Array();
  DType x_dtype = in.empty() ? node.out_dtype : in[0].dtype;
  (void)x_dtype;

  switch (node.op) {
#define EMBER_UNARY(Name, fn, rule, expr, saves, dx) \
  case Op::Name: return {[&]() -> Array { return dx; }()};
#define EMBER_BINARY(Name, fn, rule, expr, saves, dx, dy) \
  case Op::Name: return {[&]() -> Array { return dx; }(), [&]() -> Array { return dy; }()};
#define EMBER_TERNARY(Name, fn, rule, expr, saves, dx, dy, dz)                           \
  case Op::Name:                                                                          \
    return {[&]() -> Array { return dx; }(), [&]() -> Array { return dy; }(),            \
            [&]() -> Array { return dz; }()};
#include "op_table/ops.def"

    // ---- reductions: the gradient is broadcast back over the reduced dims ----------------
    case Op::Sum:
      return {expand(reshape(g, keep_shape(in[0].shape, a.get<ReduceAttrs>().dims)), in[0].shape)};
    case Op::Mean: {
      const std::vector<int64_t>& dims = a.get<ReduceAttrs>().dims;
      int64_t count = 1;
      for (int64_t d : dims) count *= in[0].shape[int(d)];
      return {expand(reshape(g, keep_shape(in[0].shape, dims)), in[0].shape) / double(count)};
    }
    case Op::Prod: {  // d prod / d x_i = prod / x_i (inputs with zeros give inf/nan, as 0/0)
      Shape keep = keep_shape(in[0].shape, a.get<ReduceAttrs>().dims);
      return {reshape(g, keep) * reshape(out, keep) / x};
    }
    case Op::Max:
    case Op::Min: {  // ties share the gradient equally
      const std::vector<int64_t>& dims = a.get<ReduceAttrs>().dims;
      Shape keep = keep_shape(in[0].shape, dims);
      Array mask = cast(eq(x, reshape(out, keep)), g.dtype());
      Array count = sum(mask, as_dims(dims), true);
      return {reshape(g, keep) * mask / count};
    }

    // ---- movement -------------------------------------------------------------------------
    case Op::Reshape: return {reshape(g, in[0].shape)};
    case Op::Permute: return {permute(g, inverse_permutation(a.get<PermuteAttrs>().order))};
    case Op::Slice: return {slice_backward(g, in[0].shape, a.get<SliceAttrs>())};
    case Op::Expand: return {g};  // summed back to the input shape by the engine
    case Op::Contiguous: return {g};
    case Op::OutputOf: return {g};  // routed by the engine to that output of the input's node (Edge::output)
    case Op::Cat: {
      const int dim = int(a.get<AxisAttrs>().dim);
      std::vector<Array> grads;
      int64_t start = 0;
      for (const auto& e : in) {
        grads.push_back(slice(g, dim, start, start + e.shape[dim]));
        start += e.shape[dim];
      }
      return grads;
    }

    // ---- indexing ------------------------------------------------------------------------
    // The forward's line goes with these: an index out of range fails here too (the scatters
    // check their indices), and the error should name the user's call, not this file.
    case Op::Gather: {
      const int dim = int(a.get<AxisAttrs>().dim);
      return {scatter_add(zeros(in[0].shape, {g.dtype(), g.device()}), dim, y, g, node.loc), Array()};
    }
    case Op::IndexSelect: {
      const int dim = int(a.get<AxisAttrs>().dim);
      return {index_add(zeros(in[0].shape, {g.dtype(), g.device()}), dim, y, g, node.loc), Array()};
    }
    case Op::ScatterAdd: {  // out[p] = sum of src where index hits p: src's gradient gathers
      const int dim = int(a.get<AxisAttrs>().dim);
      return {gather(g, dim, y, node.loc), Array()};
    }

    // ---- contraction ---------------------------------------------------------------------
    case Op::Matmul: {  // both operands have the output's rank; the engine sums broadcast batches
      // An operand that is a transpose (Linear computes x·Wᵀ) gets its gradient as the transpose
      // of the product in the other order: the transpose's own rule then hands the parameter a
      // contiguous gradient, which optimizers and reshapes read without a copy.
      auto is_transposed = [](const GradNode::Edge& e) { return e.fn && swaps_last_two(*e.fn); };
      Array da, db;
      if (in[0].fn)
        da = is_transposed(in[0]) ? transpose(matmul(y, transpose(g, -1, -2)), -1, -2) : matmul(g, transpose(y, -1, -2));
      // A right operand of size 1 in every batch dim (a weight: x [B, S, K] · W [1, K, N]) gets
      // its gradient as one 2-D product over the flattened batch rows. A product per batch entry
      // summed by the engine afterwards would make a [B, K, N] temporary (B weights' worth) and
      // a reduction pass over it.
      auto shared_weight = [&](const GradNode::Edge& e) {
        if (e.shape.rank() < 3 || g.shape().numel() == 0) return false;
        for (int d = 0; d < e.shape.rank() - 2; ++d)
          if (e.shape[d] != 1) return false;
        return g.shape().numel() != g.shape()[g.rank() - 2] * g.shape()[g.rank() - 1];  // a real batch
      };
      if (in[1].fn && shared_weight(in[1]) && x.shape()[x.rank() - 1] > 0) {
        const int64_t K = x.shape()[x.rank() - 1], N = g.shape()[g.rank() - 1], rows = g.shape().numel() / N;
        Array x2 = reshape(x, Shape{rows, K}), g2 = reshape(g, Shape{rows, N});
        Array d2 = is_transposed(in[1]) ? transpose(matmul(transpose(g2, 0, 1), x2), 0, 1)
                                        : matmul(transpose(x2, 0, 1), g2);
        db = reshape(d2, in[1].shape);
      } else if (in[1].fn) {
        db = is_transposed(in[1]) ? transpose(matmul(transpose(g, -1, -2), x), -1, -2) : matmul(transpose(x, -1, -2), g);
      }
      return {da, db};
    }

    default:
      if (op_info(node.op).kind == OpKind::Library) return library_rule(node, g, extra_grads);
      throw Error(fmt::format("backward: no gradient rule for op {} (created at {})", op_name(node.op),
                              format_location(node.loc)));
  }
}

}  // namespace ember::autograd
