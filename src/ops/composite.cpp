// Composite ops written with primitive ops: they get their gradients from the primitives' rules
// and become single kernels once the fusion scheduler merges reduce-then-broadcast patterns.
#include "autograd/composite.h"
#include "ember/autograd.h"
#include "ops/autocast.h"
#include "ops/frontend.h"

namespace ember {

static Array require_float(const Array& x, const char* op, Loc loc) {
  const NodePtr& n = node_of(x, op, loc);
  if (!is_floating(n->dtype))
    fail(op, fmt::format("needs a floating-point input, got {}; cast it first", dtype_name(n->dtype)), loc);
  return x;
}

// softmax, log_softmax, logsumexp, var and std run in f32 under autocast (autocast_policy.def).
Array logsumexp(const Array& x_in, Axes dims, bool keepdim, Loc loc) {
  require_float(x_in, "logsumexp", loc);
  const Array x = autocast_f32(x_in, loc);
  // The max is a constant shift (no gradient flows through it; the result does not depend on it).
  Array m = max(x, dims, true, loc).detach();
  Array finite_m = where(eq(abs(m, loc), INFINITY, loc), 0.0, m, loc);  // all -inf rows stay -inf
  Array r = add(log(sum(exp(sub(x, finite_m, loc), loc), dims, true, loc), loc), finite_m, loc);
  if (keepdim) return r;
  std::vector<int64_t> out;
  std::vector<bool> reduced(static_cast<size_t>(x.rank()), dims.empty());
  for (int d : dims) reduced[size_t(dim_arg(d, x.rank(), "logsumexp", loc))] = true;
  for (int d = 0; d < x.rank(); ++d)
    if (!reduced[size_t(d)]) out.push_back(x.shape()[d]);
  return reshape(r, Shape(out), loc);
}

Array log_softmax(const Array& x_in, int dim, Loc loc) {
  require_float(x_in, "log_softmax", loc);
  const Array x = autocast_f32(x_in, loc);
  dim_arg(dim, x.rank(), "log_softmax", loc);
  return sub(x, logsumexp(x, {dim}, true, loc), loc);
}

Array softmax(const Array& x_in, int dim, Loc loc) {
  require_float(x_in, "softmax", loc);
  const Array x = autocast_f32(x_in, loc);
  dim_arg(dim, x.rank(), "softmax", loc);
  // Times the reciprocal of the row's sum, as PyTorch computes it: one division per row instead
  // of one per element (a 16-lane division takes ten times a multiply's issue slots here).
  auto compose = [dim, loc](const Array& v) {
    Array e = exp(sub(v, max(v, {dim}, true, loc).detach(), loc), loc);
    return mul(e, recip(sum(e, {dim}, true, loc), loc), loc);
  };
  // The gradient from the output alone, dx = y (g - sum(g y)), as PyTorch's: the forward then
  // saves only y and stays one kernel (differentiated op by op, it also kept exp(x - max) and
  // the reciprocal: three kernels and a fourth tiny one in a transformer's training step).
  Array y;
  {
    NoGradGuard no_grad;
    y = compose(x);
  }
  autograd::CompositeRule rule;
  rule.first_order = [dim, loc](const std::vector<Array>& saved, const Array& g) {
    const Array& out = saved[0];
    return std::vector<Array>{mul(out, sub(g, sum(mul(g, out, loc), {dim}, true, loc), loc), loc)};
  };
  rule.composed = [compose](const std::vector<Array>& in) { return compose(in[0]); };
  return autograd::attach_composite({x}, y, {y}, std::move(rule), loc);
}

}  // namespace ember

// ---- reductions written with other reductions ------------------------------------------------
namespace ember {

// Counts nonzero elements (as bool -> i64 sum), so empty inputs work (any: false, all: true).
Array any(const Array& x, Axes dims, bool keepdim, Loc loc) {
  node_of(x, "any", loc);
  return gt(sum(cast(x, DType::Bool, loc), std::move(dims), keepdim, loc), 0, loc);
}
Array all(const Array& x, Axes dims, bool keepdim, Loc loc) {
  node_of(x, "all", loc);
  return eq(sum(logical_not(x, loc), std::move(dims), keepdim, loc), 0, loc);
}

Array var(const Array& x_in, Axes dims, int64_t correction, bool keepdim, Loc loc) {
  require_float(x_in, "var", loc);
  const Array x = autocast_f32(x_in, loc);
  if (correction < 0) fail("var", fmt::format("correction must be non-negative, got {}", correction), loc);
  int64_t count = 1;
  std::vector<bool> reduced(static_cast<size_t>(x.rank()), dims.empty());
  for (int d : dims) reduced[size_t(dim_arg(d, x.rank(), "var", loc))] = true;
  for (int d = 0; d < x.rank(); ++d)
    if (reduced[size_t(d)]) count *= x.shape()[d];
  Array centered = sub(x, mean(x, dims, true, loc), loc);
  // n - correction <= 0 gives inf/NaN (as PyTorch), never an error.
  return div(sum(mul(centered, centered, loc), dims, keepdim, loc), double(count - correction), loc);
}
Array std(const Array& x, Axes dims, int64_t correction, bool keepdim, Loc loc) {
  node_of(x, "std", loc);
  return sqrt(var(x, std::move(dims), correction, keepdim, loc), loc);
}

static ValuesIndices extreme_with_index(const Array& x, int dim, bool keepdim, bool is_max, Loc loc) {
  const char* name = is_max ? "max_with_indices" : "min_with_indices";
  const NodePtr& n = node_of(x, name, loc);
  int r = n->shape.rank();
  int d = dim_arg(dim, r, name, loc);
  if (r == 0) return {x, zeros({}, {DType::I64, n->device}, loc)};
  if (n->shape[d] == 0) fail(name, fmt::format("cannot reduce over zero elements (input shape {})", n->shape.str()), loc);
  Array idx = is_max ? argmax(x, d, true, loc) : argmin(x, d, true, loc);
  Array values = gather(x, d, idx, loc);  // the gradient goes to the chosen index only
  if (keepdim) return {values, idx};
  return {squeeze(values, d, loc), squeeze(idx, d, loc)};
}
ValuesIndices max_with_indices(const Array& x, int dim, bool keepdim, Loc loc) {
  return extreme_with_index(x, dim, keepdim, true, loc);
}
ValuesIndices min_with_indices(const Array& x, int dim, bool keepdim, Loc loc) {
  return extreme_with_index(x, dim, keepdim, false, loc);
}

}  // namespace ember
