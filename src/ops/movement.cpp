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
    } else if (__builtin_mul_overflow(known, dims[i], &known)) {
      fail("reshape", fmt::format("shape {} has too many elements (the product of its dims overflows 64 bits)",
                                  shape.str()),
           loc);
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

Array permute(const Array& x, const Axes& dims, Loc loc) {
  const NodePtr& n = node_of(x, "permute", loc);
  int r = n->shape.rank();
  if (int(dims.size()) != r)
    fail("permute", fmt::format("got {} dims for a tensor of rank {}", dims.size(), r), loc);
  PermuteAttrs perm;
  std::vector<bool> used(size_t(r), false);
  std::vector<int64_t> shape;
  for (int d : dims) {
    int w = dim_arg(d, r, "permute", loc);
    if (used[size_t(w)]) fail("permute", fmt::format("dim {} appears more than once", d), loc);
    used[size_t(w)] = true;
    perm.order.push_back(w);
    shape.push_back(n->shape[w]);
  }
  bool identity = true;
  for (int i = 0; i < r; ++i) identity &= perm.order[size_t(i)] == i;
  if (identity) return x;
  return movement(Op::Permute, x, {.params = std::move(perm)}, Shape(shape), loc);
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
  SliceAttrs cut{.start = std::vector<int64_t>(size_t(r), 0), .step = std::vector<int64_t>(size_t(r), 1)};
  cut.start[size_t(d)] = len ? s : 0;
  cut.step[size_t(d)] = step;
  Shape shape = n->shape;
  shape[d] = len;
  return movement(Op::Slice, x, {.params = std::move(cut)}, shape, loc);
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
  return make_array(Op::Cat, {.params = AxisAttrs{d}}, inputs, Shape(out), dt, device, loc);
}

}  // namespace ember

// ---- composite movement ops (views, slices, cat and index_select) ---------------------------
namespace ember {

Array swap_dims(const Array& x, int dim0, int dim1, Loc loc) { return transpose(x, dim0, dim1, loc); }

Array movedim(const Array& x, int source, int destination, Loc loc) {
  const NodePtr& n = node_of(x, "movedim", loc);
  int r = n->shape.rank();
  int s = dim_arg(source, r, "movedim", loc), d = dim_arg(destination, r, "movedim", loc);
  if (r == 0) return x;
  std::vector<int> order;
  for (int i = 0; i < r; ++i)
    if (i != s) order.push_back(i);
  order.insert(order.begin() + d, s);
  return permute(x, order, loc);
}

Array narrow(const Array& x, int dim, int64_t start, int64_t length, Loc loc) {
  const NodePtr& n = node_of(x, "narrow", loc);
  int r = n->shape.rank();
  if (r == 0) fail("narrow", "cannot narrow a rank-0 tensor", loc);
  int d = dim_arg(dim, r, "narrow", loc);
  int64_t size = n->shape[d];
  int64_t s = start < 0 ? start + size : start;
  if (s < 0 || s > size || length < 0 || s + length > size)
    fail("narrow", fmt::format("start {} and length {} do not fit in dim {} of size {}", start, length, dim, size), loc);
  return slice(x, d, s, s + length, 1, loc);
}

Array select(const Array& x, int dim, int64_t index, Loc loc) {
  const NodePtr& n = node_of(x, "select", loc);
  int r = n->shape.rank();
  if (r == 0) fail("select", "cannot select from a rank-0 tensor", loc);
  int d = dim_arg(dim, r, "select", loc);
  int64_t size = n->shape[d];
  if (index < -size || index >= size)
    fail("select", fmt::format("index {} is out of range for dim {} of size {}", index, dim, size), loc);
  int64_t i = index < 0 ? index + size : index;
  return squeeze(slice(x, d, i, i + 1, 1, loc), d, loc);
}

Array flip(const Array& x, Axes dims, Loc loc) {
  const NodePtr& n = node_of(x, "flip", loc);
  int r = n->shape.rank();
  std::vector<bool> seen(static_cast<size_t>(std::max(r, 1)), false);
  Array out = x;
  for (int dim : dims) {
    int d = dim_arg(dim, r, "flip", loc);
    if (seen[size_t(d)]) fail("flip", fmt::format("dim {} appears more than once", dim), loc);
    seen[size_t(d)] = true;
    if (r == 0 || n->shape[d] <= 1) continue;
    int64_t size = n->shape[d];
    out = index_select(out, d, arange(size - 1, -1, -1, DType::I64, n->device, loc), loc);
  }
  return out;
}

Array roll(const Array& x, int64_t shift, int dim, Loc loc) {
  const NodePtr& n = node_of(x, "roll", loc);
  int r = n->shape.rank();
  if (r == 0) fail("roll", "cannot roll a rank-0 tensor", loc);
  int d = dim_arg(dim, r, "roll", loc);
  int64_t size = n->shape[d];
  if (size == 0) return x;
  int64_t s = ((shift % size) + size) % size;
  if (s == 0) return x;
  return cat({slice(x, d, size - s, size, 1, loc), slice(x, d, 0, size - s, 1, loc)}, d, loc);
}

Array stack(const std::vector<Array>& xs, int dim, Loc loc) {
  if (xs.empty()) fail("stack", "needs at least one tensor", loc);
  const Shape& s0 = node_of(xs[0], "stack", loc)->shape;
  int d = dim_arg(dim, s0.rank() + 1, "stack", loc);
  std::vector<Array> parts;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Shape& s = node_of(xs[i], "stack", loc)->shape;
    if (s != s0)
      fail("stack", fmt::format("tensor {} has shape {} but tensor 0 has {} (all must match)", i, s.str(), s0.str()), loc);
    parts.push_back(unsqueeze(xs[i], d, loc));
  }
  return cat(parts, d, loc);
}

std::vector<Array> split(const Array& x, const std::vector<int64_t>& sizes, int dim, Loc loc) {
  const NodePtr& n = node_of(x, "split", loc);
  int r = n->shape.rank();
  if (r == 0) fail("split", "cannot split a rank-0 tensor", loc);
  int d = dim_arg(dim, r, "split", loc);
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) fail("split", fmt::format("negative size {}", s), loc);
    total += s;
  }
  if (total != n->shape[d])
    fail("split", fmt::format("sizes add up to {} but dim {} has size {}", total, dim, n->shape[d]), loc);
  std::vector<Array> out;
  int64_t start = 0;
  for (int64_t s : sizes) {
    out.push_back(slice(x, d, start, start + s, 1, loc));
    start += s;
  }
  return out;
}

std::vector<Array> split(const Array& x, int64_t size, int dim, Loc loc) {
  const NodePtr& n = node_of(x, "split", loc);
  int r = n->shape.rank();
  if (r == 0) fail("split", "cannot split a rank-0 tensor", loc);
  int d = dim_arg(dim, r, "split", loc);
  if (size <= 0) fail("split", fmt::format("size must be positive, got {}", size), loc);
  int64_t len = n->shape[d];
  std::vector<int64_t> sizes;
  for (int64_t s = 0; s < len; s += size) sizes.push_back(std::min(size, len - s));
  if (sizes.empty()) sizes.push_back(0);
  return split(x, sizes, d, loc);
}

std::vector<Array> chunk(const Array& x, int64_t chunks, int dim, Loc loc) {
  const NodePtr& n = node_of(x, "chunk", loc);
  if (chunks <= 0) fail("chunk", fmt::format("chunks must be positive, got {}", chunks), loc);
  int r = n->shape.rank();
  if (r == 0) fail("chunk", "cannot chunk a rank-0 tensor", loc);
  int d = dim_arg(dim, r, "chunk", loc);
  int64_t len = n->shape[d];
  int64_t size = std::max<int64_t>((len + chunks - 1) / chunks, 1);
  return split(x, size, d, loc);
}

Array repeat(const Array& x, const std::vector<int64_t>& repeats, Loc loc) {
  const NodePtr& n = node_of(x, "repeat", loc);
  int r = n->shape.rank(), k = int(repeats.size());
  if (k < r) fail("repeat", fmt::format("got {} repeats for a tensor of rank {} (need at least the rank)", k, r), loc);
  if (k > kMaxRank) fail("repeat", fmt::format("{} repeats exceed the maximum rank {}", k, kMaxRank), loc);
  for (int64_t v : repeats)
    if (v < 0) fail("repeat", fmt::format("negative repeat count {}", v), loc);
  // x viewed as [1, s0, 1, s1, ...] (leading dims of size 1), expanded to [r0, s0, r1, s1, ...],
  // then merged pairwise.
  std::vector<int64_t> src(static_cast<size_t>(k - r), 1);
  src.insert(src.end(), n->shape.begin(), n->shape.end());
  std::vector<int64_t> inter, wide, out;
  for (int i = 0; i < k; ++i) {
    inter.push_back(1);
    inter.push_back(src[size_t(i)]);
    wide.push_back(repeats[size_t(i)]);
    wide.push_back(src[size_t(i)]);
    out.push_back(repeats[size_t(i)] * src[size_t(i)]);
  }
  if (2 * k > kMaxRank) {  // too many dims for the pairwise view: one dim at a time with cat
    Array cur = reshape(x, Shape(src), loc);
    for (int i = 0; i < k; ++i) {
      if (repeats[size_t(i)] == 1) continue;
      if (repeats[size_t(i)] == 0) {
        Shape z = cur.shape();
        z[i] = 0;
        cur = zeros(z, {n->dtype, n->device}, loc);
        continue;
      }
      cur = cat(std::vector<Array>(size_t(repeats[size_t(i)]), cur), i, loc);
    }
    return cur;
  }
  return reshape(contiguous(expand(reshape(x, Shape(inter), loc), Shape(wide), loc), loc), Shape(out), loc);
}

Array tile(const Array& x, const std::vector<int64_t>& reps, Loc loc) {
  const NodePtr& n = node_of(x, "tile", loc);
  std::vector<int64_t> full = reps;
  if (int(full.size()) < n->shape.rank()) full.insert(full.begin(), size_t(n->shape.rank()) - full.size(), 1);
  return repeat(x, full, loc);
}

Array pad(const Array& x, const std::vector<int64_t>& pads, PadMode mode, Scalar value, Loc loc) {
  const NodePtr& n = node_of(x, "pad", loc);
  int r = n->shape.rank();
  if (pads.size() % 2 != 0 || int(pads.size()) > 2 * r)
    fail("pad", fmt::format("pads must be (before, after) pairs for at most {} dims, got {} values", r, pads.size()), loc);
  Array out = x;
  for (size_t p = 0; p < pads.size() / 2; ++p) {
    int d = r - 1 - int(p);
    int64_t before = pads[2 * p], after = pads[2 * p + 1];
    int64_t size = out.shape()[d];
    if (before == 0 && after == 0) continue;
    if (mode == PadMode::Constant) {
      if (size + before + after < 0)
        fail("pad", fmt::format("pads ({}, {}) remove more than the {} elements of dim {}", before, after, size, d), loc);
      // Negative pads crop.
      if (before < 0 || after < 0) {
        out = slice(out, d, std::max<int64_t>(-before, 0), size - std::max<int64_t>(-after, 0), 1, loc);
        before = std::max<int64_t>(before, 0);
        after = std::max<int64_t>(after, 0);
      }
      std::vector<Array> parts;
      Shape z = out.shape();
      if (before > 0) {
        z[d] = before;
        parts.push_back(full(z, value, {n->dtype, n->device}, loc));
      }
      parts.push_back(out);
      if (after > 0) {
        z[d] = after;
        parts.push_back(full(z, value, {n->dtype, n->device}, loc));
      }
      out = cat(parts, d, loc);
      continue;
    }
    if (before < 0 || after < 0)
      fail("pad", fmt::format("negative pads ({}, {}) need constant mode", before, after), loc);
    std::vector<int64_t> idx;
    if (mode == PadMode::Reflect) {
      if (before >= size || after >= size)
        fail("pad", fmt::format("reflect pads ({}, {}) must be smaller than dim {} of size {}", before, after, d, size), loc);
      for (int64_t i = -before; i < size + after; ++i) idx.push_back(i < 0 ? -i : i >= size ? 2 * (size - 1) - i : i);
    } else {
      if (size == 0) fail("pad", fmt::format("replicate needs a nonempty dim {}", d), loc);
      for (int64_t i = -before; i < size + after; ++i) idx.push_back(std::clamp<int64_t>(i, 0, size - 1));
    }
    out = index_select(out, d, from_vector(idx, Shape{int64_t(idx.size())}, n->device, loc), loc);
  }
  return out;
}

static Array triangle(const Array& x, int64_t k, bool lower, Loc loc) {
  const char* name = lower ? "tril" : "triu";
  const NodePtr& n = node_of(x, name, loc);
  int r = n->shape.rank();
  if (r < 2) fail(name, fmt::format("needs at least 2 dims, got shape {}", n->shape.str()), loc);
  int64_t rows = n->shape[r - 2], cols = n->shape[r - 1];
  Array i = unsqueeze(arange(0, rows, 1, DType::I64, n->device, loc), 1, loc);
  Array j = unsqueeze(arange(0, cols, 1, DType::I64, n->device, loc), 0, loc);
  Array diff = sub(j, i, loc);  // column - row
  Array keep = lower ? le(diff, k, loc) : ge(diff, k, loc);
  return where(keep, x, zeros({}, {n->dtype, n->device}, loc), loc);
}
Array tril(const Array& x, int64_t diagonal, Loc loc) { return triangle(x, diagonal, true, loc); }
Array triu(const Array& x, int64_t diagonal, Loc loc) { return triangle(x, diagonal, false, loc); }

}  // namespace ember
