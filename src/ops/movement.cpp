// Front end of the movement ops. They produce views (strides/offsets over the input's buffer)
// when realized; only a reshape that the layout cannot express copies.
#include <algorithm>
#include <numeric>

#include "ops/frontend.h"

namespace ember {

static Array movement(Op op, const Array& x, OpAttrs attrs, Shape shape, Loc loc) {
  const NodePtr& in = x.node();
  return make_array(op, std::move(attrs), {x}, std::move(shape), in->dtype, in->device, loc);
}

Array reshape(const Array& x, const Shape& shape, Loc loc) {
  const NodePtr& n = node_of(x, "reshape", loc);
  std::vector<int64_t> dims = shape.dims();
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1) {
      if (infer >= 0) fail("reshape", fmt::format("only one dim can be -1, got {}", shape.str()), loc);
      infer = int(i);
    } else if (dims[i] < 0) {
      fail("reshape", fmt::format("negative size in {}", shape.str()), loc);
    } else {
      known *= dims[i];
    }
  }
  int64_t numel = n->shape.numel();
  if (infer >= 0) {
    if (known == 0 || numel % known != 0)
      fail("reshape", fmt::format("cannot view {} ({} elements) as {}", n->shape.str(), numel, shape.str()), loc);
    dims[size_t(infer)] = numel / known;
  }
  Shape target(dims);
  if (target.numel() != numel)
    fail("reshape", fmt::format("cannot view {} ({} elements) as {} ({} elements)", n->shape.str(), numel,
                                target.str(), target.numel()),
         loc);
  if (target.rank() > kMaxRank) fail("reshape", fmt::format("rank {} exceeds {}", target.rank(), kMaxRank), loc);
  if (target == n->shape) return x;
  return movement(Op::Reshape, x, {}, target, loc);
}

Array permute(const Array& x, const std::vector<int>& dims, Loc loc) {
  const NodePtr& n = node_of(x, "permute", loc);
  int r = n->shape.rank();
  if (int(dims.size()) != r)
    fail("permute", fmt::format("got {} dims for a tensor of rank {}", dims.size(), r), loc);
  OpAttrs attrs;
  std::vector<bool> used(size_t(r), false);
  std::vector<int64_t> shape;
  for (int d : dims) {
    int w = dim_arg(d, r, "permute", loc);
    if (used[size_t(w)]) fail("permute", fmt::format("dim {} appears more than once", d), loc);
    used[size_t(w)] = true;
    attrs.ints.push_back(w);
    shape.push_back(n->shape[w]);
  }
  bool identity = true;
  for (int i = 0; i < r; ++i) identity &= attrs.ints[size_t(i)] == i;
  if (identity) return x;
  return movement(Op::Permute, x, std::move(attrs), Shape(shape), loc);
}

Array transpose(const Array& x, int dim0, int dim1, Loc loc) {
  const NodePtr& n = node_of(x, "transpose", loc);
  int r = n->shape.rank();
  int a = dim_arg(dim0, r, "transpose", loc), b = dim_arg(dim1, r, "transpose", loc);
  if (r == 0) return x;
  std::vector<int> perm(static_cast<size_t>(r));
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[size_t(a)], perm[size_t(b)]);
  return permute(x, perm, loc);
}

Array slice(const Array& x, int dim, int64_t start, int64_t end, int64_t step, Loc loc) {
  const NodePtr& n = node_of(x, "slice", loc);
  int r = n->shape.rank();
  if (r == 0) fail("slice", "cannot slice a rank-0 tensor", loc);
  int d = dim_arg(dim, r, "slice", loc);
  if (step <= 0) fail("slice", fmt::format("step must be positive, got {}", step), loc);
  int64_t size = n->shape[d];
  auto clampi = [&](int64_t i) {
    if (i < 0) i += size;
    return std::clamp<int64_t>(i, 0, size);
  };
  int64_t s = clampi(start), e = clampi(end);
  int64_t len = e > s ? (e - s + step - 1) / step : 0;
  if (s == 0 && len == size && step == 1) return x;
  OpAttrs attrs;
  attrs.ints.assign(size_t(2 * r), 0);
  for (int i = 0; i < r; ++i) attrs.ints[size_t(2 * i + 1)] = 1;
  attrs.ints[size_t(2 * d)] = len ? s : 0;
  attrs.ints[size_t(2 * d + 1)] = step;
  Shape shape = n->shape;
  shape[d] = len;
  return movement(Op::Slice, x, std::move(attrs), shape, loc);
}

Array expand(const Array& x, const Shape& shape, Loc loc) {
  const NodePtr& n = node_of(x, "expand", loc);
  int r = shape.rank(), ri = n->shape.rank();
  if (r < ri)
    fail("expand", fmt::format("cannot expand {} to fewer dims {}", n->shape.str(), shape.str()), loc);
  std::vector<int64_t> out(static_cast<size_t>(r));
  for (int i = 0; i < r; ++i) {
    int j = i - (r - ri);
    int64_t want = shape[i];
    int64_t have = j >= 0 ? n->shape[j] : 1;
    if (want == -1) {
      if (j < 0) fail("expand", fmt::format("-1 is not allowed for the new leading dim {} in {}", i, shape.str()), loc);
      want = have;
    }
    if (have != want && have != 1)
      fail("expand", fmt::format("cannot expand {} to {}: dim {} has size {} (only size-1 dims expand)",
                                 n->shape.str(), shape.str(), i, have),
           loc);
    out[size_t(i)] = want;
  }
  Shape target(out);
  if (target == n->shape) return x;
  return movement(Op::Expand, x, {}, target, loc);
}

Array broadcast_to(const Array& x, const Shape& shape, Loc loc) { return expand(x, shape, loc); }

Array squeeze(const Array& x, int dim, Loc loc) {
  const NodePtr& n = node_of(x, "squeeze", loc);
  int d = dim_arg(dim, n->shape.rank(), "squeeze", loc);
  if (n->shape.rank() == 0) return x;
  if (n->shape[d] != 1)
    fail("squeeze", fmt::format("dim {} of {} has size {}, not 1", dim, n->shape.str(), n->shape[d]), loc);
  std::vector<int64_t> dims = n->shape.dims();
  dims.erase(dims.begin() + d);
  return reshape(x, Shape(dims), loc);
}

Array unsqueeze(const Array& x, int dim, Loc loc) {
  const NodePtr& n = node_of(x, "unsqueeze", loc);
  int d = dim_arg(dim, n->shape.rank() + 1, "unsqueeze", loc);
  std::vector<int64_t> dims = n->shape.dims();
  dims.insert(dims.begin() + d, 1);
  return reshape(x, Shape(dims), loc);
}

Array flatten(const Array& x, int start_dim, int end_dim, Loc loc) {
  const NodePtr& n = node_of(x, "flatten", loc);
  int r = n->shape.rank();
  if (r == 0) return reshape(x, Shape{1}, loc);
  int s = dim_arg(start_dim, r, "flatten", loc), e = dim_arg(end_dim, r, "flatten", loc);
  if (s > e) fail("flatten", fmt::format("start dim {} comes after end dim {}", start_dim, end_dim), loc);
  std::vector<int64_t> dims;
  for (int i = 0; i < s; ++i) dims.push_back(n->shape[i]);
  int64_t p = 1;
  for (int i = s; i <= e; ++i) p *= n->shape[i];
  dims.push_back(p);
  for (int i = e + 1; i < r; ++i) dims.push_back(n->shape[i]);
  return reshape(x, Shape(dims), loc);
}

Array contiguous(const Array& x, Loc loc) {
  const NodePtr& n = node_of(x, "contiguous", loc);
  // Only views can be non-contiguous: every kernel writes a fresh contiguous buffer.
  if (n->op == Op::Contiguous || op_info(n->op).kind != OpKind::Movement) return x;
  return movement(Op::Contiguous, x, {}, n->shape, loc);
}

Array cat(const std::vector<Array>& xs, int dim, Loc loc) {
  if (xs.empty()) fail("cat", "needs at least one tensor", loc);
  std::vector<const Array*> ptrs;
  for (const Array& a : xs) ptrs.push_back(&a);
  Device device = common_device(ptrs, "cat", loc);
  const Shape& s0 = xs[0].shape();
  int r = s0.rank();
  if (r == 0) fail("cat", "cannot concatenate rank-0 tensors; unsqueeze them first", loc);
  int d = dim_arg(dim, r, "cat", loc);
  DType dt = xs[0].dtype();
  std::vector<int64_t> out = s0.dims();
  out[size_t(d)] = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Shape& s = xs[i].shape();
    bool ok = s.rank() == r;
    for (int k = 0; ok && k < r; ++k) ok = k == d || s[k] == s0[k];
    if (!ok)
      fail("cat", fmt::format("tensor {} has shape {} but tensor 0 has {} (all dims but {} must match)", i,
                              s.str(), s0.str(), dim),
           loc);
    out[size_t(d)] += s[d];
    dt = promote_types(dt, xs[i].dtype());
  }
  if (xs.size() == 1) return xs[0];
  std::vector<Array> inputs;
  for (const Array& a : xs) inputs.push_back(cast(a, dt, loc));
  OpAttrs attrs;
  attrs.ints = {d};
  return make_array(Op::Cat, std::move(attrs), inputs, Shape(out), dt, device, loc);
}

}  // namespace ember
