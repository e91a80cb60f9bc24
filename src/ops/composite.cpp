// Composite ops written with primitive ops: they get their gradients from the primitives' rules
// and become single kernels once the fusion scheduler merges reduce-then-broadcast patterns.
#include "ops/frontend.h"

namespace ember {

static Array require_float(const Array& x, const char* op, Loc loc) {
  const NodePtr& n = node_of(x, op, loc);
  if (!is_floating(n->dtype))
    fail(op, fmt::format("needs a floating-point input, got {}; cast it first", dtype_name(n->dtype)), loc);
  return x;
}

Array logsumexp(const Array& x, std::vector<int> dims, bool keepdim, Loc loc) {
  require_float(x, "logsumexp", loc);
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

Array log_softmax(const Array& x, int dim, Loc loc) {
  require_float(x, "log_softmax", loc);
  dim_arg(dim, x.rank(), "log_softmax", loc);
  return sub(x, logsumexp(x, {dim}, true, loc), loc);
}

Array softmax(const Array& x, int dim, Loc loc) {
  require_float(x, "softmax", loc);
  dim_arg(dim, x.rank(), "softmax", loc);
  Array e = exp(sub(x, max(x, {dim}, true, loc).detach(), loc), loc);
  return div(e, sum(e, {dim}, true, loc), loc);
}

}  // namespace ember
