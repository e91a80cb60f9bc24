// Front end of gather, index_select and matmul.
#include <algorithm>

#include "runtime/registry.h"
#include "ops/autocast.h"
#include "ops/frontend.h"

namespace ember {

static void check_index(const NodePtr& idx, const char* op, Loc loc) {
  if (!is_integral(idx->dtype))
    fail(op, fmt::format("index must have an integer dtype, got {}", dtype_name(idx->dtype)), loc);
}

Array gather(const Array& x, int dim, const Array& index, Loc loc) {
  const NodePtr& n = node_of(x, "gather", loc);
  const NodePtr& idx = node_of(index, "gather", loc);
  common_device({&x, &index}, "gather", loc);
  check_index(idx, "gather", loc);
  int r = n->shape.rank();
  if (idx->shape.rank() != r)
    fail("gather", fmt::format("index has rank {} but input has rank {}", idx->shape.rank(), r), loc);
  int d = dim_arg(dim, r, "gather", loc);
  if (r == 0) return x;
  for (int k = 0; k < r; ++k)
    if (k != d && idx->shape[k] > n->shape[k])
      fail("gather", fmt::format("index shape {} exceeds input shape {} in dim {}", idx->shape.str(),
                                 n->shape.str(), k),
           loc);
  return make_array(Op::Gather, {.params = AxisAttrs{d}}, {x, index}, idx->shape, n->dtype, n->device, loc);
}

Array index_select(const Array& x, int dim, const Array& index, Loc loc) {
  const NodePtr& n = node_of(x, "index_select", loc);
  const NodePtr& idx = node_of(index, "index_select", loc);
  common_device({&x, &index}, "index_select", loc);
  check_index(idx, "index_select", loc);
  if (idx->shape.rank() != 1)
    fail("index_select", fmt::format("index must be 1-D, got shape {}", idx->shape.str()), loc);
  int r = n->shape.rank();
  if (r == 0) fail("index_select", "input must have at least one dim", loc);
  int d = dim_arg(dim, r, "index_select", loc);
  Shape shape = n->shape;
  shape[d] = idx->shape[0];
  return make_array(Op::IndexSelect, {.params = AxisAttrs{d}}, {x, index}, shape, n->dtype, n->device, loc);
}

Array matmul(const Array& a, const Array& b, Loc loc) {
  const NodePtr& na = node_of(a, "matmul", loc);
  const NodePtr& nb = node_of(b, "matmul", loc);
  if (autocast_active()) [[unlikely]] {
    if (auto cast_ab = autocast_operands(Op::Matmul, {a, b}, loc)) return matmul((*cast_ab)[0], (*cast_ab)[1], loc);
  }
  Device device = common_device({&a, &b}, "matmul", loc);
  if (na->shape.rank() == 0 || nb->shape.rank() == 0)
    fail("matmul", fmt::format("operands must have at least one dim, got {} and {}", na->shape.str(),
                               nb->shape.str()),
         loc);
  DType dt = promote_types(na->dtype, nb->dtype);
  if (dt == DType::Bool) fail("matmul", "not defined for bool operands; cast them first", loc);
  // 1-D operands as in numpy: a vector is a row (left) or a column (right), removed afterwards.
  Array x = na->shape.rank() == 1 ? unsqueeze(a, 0, loc) : a;
  Array y = nb->shape.rank() == 1 ? unsqueeze(b, 1, loc) : b;
  const Shape &sx = x.shape(), &sy = y.shape();
  int64_t M = sx[sx.rank() - 2], K = sx[sx.rank() - 1], K2 = sy[sy.rank() - 2], N = sy[sy.rank() - 1];
  if (K != K2)
    fail("matmul", fmt::format("inner dims differ: {} x {} ({} vs {})", na->shape.str(), nb->shape.str(), K, K2),
         loc);
  Shape bx(std::vector<int64_t>(sx.begin(), sx.end() - 2)), by(std::vector<int64_t>(sy.begin(), sy.end() - 2));
  Shape batch;
  try {
    batch = broadcast_shapes(bx, by, "matmul");
  } catch (const Error& e) {
    fail("matmul", fmt::format("batch dims of {} and {} cannot be broadcast", na->shape.str(), nb->shape.str()), loc);
  }
  std::vector<int64_t> out = batch.dims();
  out.push_back(M);
  out.push_back(N);
  // Both operands get the output's rank (leading size-1 dims), so backends see equal ranks.
  auto lift = [&](const Array& t, const Shape& s) {
    std::vector<int64_t> dims(out.size() - size_t(s.rank()), 1);
    dims.insert(dims.end(), s.begin(), s.end());
    return reshape(cast(t, dt, loc), Shape(dims), loc);
  };
  Array xa = lift(x, sx), ya = lift(y, sy);
  Array r = make_array(Op::Matmul, {}, {xa, ya}, Shape(out), dt, device, loc);
  if (na->shape.rank() == 1) r = squeeze(r, -2, loc);
  if (nb->shape.rank() == 1) r = squeeze(r, -1, loc);
  return r;
}

}  // namespace ember

namespace ember {

// The scatters check their indices: an index outside [0, size) is an error. The dense scatter-add
// (Op::ScatterAdd) compares each index with each target position, so such an index would match
// none and its value would vanish silently (the gradient of an out-of-range gather or embedding,
// computed by this scatter, did). A gather of every index from `size` zeros raises "index out of
// range (9 for a dimension of size 4)" when the sum is computed; subtracting its zeros leaves src
// unchanged bit for bit (x - 0 == x, -0 - 0 == -0). The library call checks too, but the gather's
// error names the user's op the same way on every path.
// src minus the zeros gathered at every index (shaped `zeros_shape`, which broadcasts to src's).
static Array checked_src(const Array& src, const Array& index, int64_t size, const Shape& zeros_shape, Loc loc) {
  if (index.numel() == 0) return src;
  NodeContext context("scatter index check");
  Array zero = gather(zeros({size}, {.dtype = src.dtype(), .device = src.device()}, loc), 0, reshape(index, {-1}, loc),
                      loc);
  return sub(src, reshape(zero, zeros_shape, loc), loc);
}

static Array scatter_sum(const Array& src, int dim, const Array& index, int64_t size, Loc loc) {
  Shape shape = index.shape();
  shape[dim] = size;
  return make_array(Op::ScatterAdd, {.params = AxisAttrs{dim}}, {checked_src(src, index, size, index.shape(), loc), index},
                    shape, src.dtype(), src.device(), loc);
}

// Whether index_add of `dtype` on `device` is one library call (abi.h EMBER_LIB_INDEX_ADD: each
// row added once) rather than the dense scatter (every index compared with every position).
static bool index_add_library(Device device, DType dtype) {
  Backend* b = Backend::try_get(device.kind);
  return b && device.index >= 0 && device.index < b->device_count() && is_floating(dtype) &&
         b->supports(device.index, EMBER_SUPPORT_LIBRARY, EMBER_LIB_INDEX_ADD, int32_t(dtype));
}

// Zero-pads `a` at the end of every dim up to `shape` (scatter results for a smaller index).
static Array pad_to(const Array& a, const Shape& shape, Loc loc) {
  Array r = a;
  for (int d = 0; d < shape.rank(); ++d) {
    int64_t missing = shape[d] - r.shape()[d];
    if (missing <= 0) continue;
    Shape zs = r.shape();
    zs[d] = missing;
    r = cat({r, zeros(zs, {r.dtype(), r.device()}, loc)}, d, loc);
  }
  return r;
}

Array scatter_add(const Array& x, int dim, const Array& index, const Array& src, Loc loc) {
  const NodePtr& n = node_of(x, "scatter_add", loc);
  const NodePtr& idx = node_of(index, "scatter_add", loc);
  const NodePtr& s = node_of(src, "scatter_add", loc);
  common_device({&x, &index, &src}, "scatter_add", loc);
  check_index(idx, "scatter_add", loc);
  int r = n->shape.rank();
  int d = dim_arg(dim, r, "scatter_add", loc);
  if (idx->shape != s->shape)
    fail("scatter_add", fmt::format("index shape {} and src shape {} differ", idx->shape.str(), s->shape.str()), loc);
  if (idx->shape.rank() != r)
    fail("scatter_add", fmt::format("index has rank {} but input has rank {}", idx->shape.rank(), r), loc);
  for (int k = 0; k < r; ++k)
    if (k != d && idx->shape[k] > n->shape[k])
      fail("scatter_add", fmt::format("index shape {} exceeds input shape {} in dim {}", idx->shape.str(),
                                      n->shape.str(), k),
           loc);
  Array summed = scatter_sum(cast(src, x.dtype(), loc), d, index, n->shape[d], loc);
  return add(x, pad_to(summed, n->shape, loc), loc);
}

Array index_add(const Array& x, int dim, const Array& index, const Array& src, Loc loc) {
  const NodePtr& n = node_of(x, "index_add", loc);
  const NodePtr& idx = node_of(index, "index_add", loc);
  const NodePtr& s = node_of(src, "index_add", loc);
  common_device({&x, &index, &src}, "index_add", loc);
  check_index(idx, "index_add", loc);
  if (idx->shape.rank() != 1) fail("index_add", fmt::format("index must be 1-D, got shape {}", idx->shape.str()), loc);
  int r = n->shape.rank();
  int d = dim_arg(dim, r, "index_add", loc);
  Shape want = n->shape;
  want[d] = idx->shape[0];
  if (s->shape != want)
    fail("index_add", fmt::format("src has shape {}, expected {} for input {} and {} indices", s->shape.str(),
                                  want.str(), n->shape.str(), idx->shape[0]),
         loc);
  Array values = cast(src, x.dtype(), loc);
  // The 1-D index, viewed along every other dim of src.
  std::vector<int64_t> view(static_cast<size_t>(r), 1);
  view[size_t(d)] = idx->shape[0];
  if (index_add_library(x.device(), x.dtype())) {
    Array rows = make_array(Op::IndexAdd, {.params = AxisAttrs{d}},
                            {checked_src(values, index, n->shape[d], Shape(view), loc), cast(index, DType::I64, loc)},
                            n->shape, n->dtype, n->device, loc);
    return add(x, rows, loc);
  }
  Array wide = expand(reshape(index, Shape(view), loc), want, loc);
  return add(x, scatter_sum(values, d, wide, n->shape[d], loc), loc);
}

}  // namespace ember

// ---- assignment-style scatters, take, n-d indexing, data-dependent selections ---------------
namespace ember {

namespace {

// For each element of index, whether no later element (higher position along dim) of the same
// line names the same target: the element that wins under "last index wins".
Array last_occurrence(const Array& index, int d, Loc loc) {
  int64_t k = index.shape()[d];
  Array a = unsqueeze(index, d + 1, loc);  // [.., k, 1, ..]
  Array b = unsqueeze(index, d, loc);      // [.., 1, k', ..]
  std::vector<int64_t> kshape(static_cast<size_t>(index.rank() + 1), 1);
  kshape[size_t(d)] = k;
  Array kk = reshape(arange(0, k, 1, DType::I64, index.device(), loc), Shape(kshape), loc);
  kshape[size_t(d)] = 1;
  kshape[size_t(d) + 1] = k;
  Array kl = reshape(arange(0, k, 1, DType::I64, index.device(), loc), Shape(kshape), loc);
  Array later_same = logical_and(eq(a, b, loc), gt(kl, kk, loc), loc);
  return logical_not(any(later_same, {d + 1}, false, loc), loc);
}

// x with src written where index points (is_last marks the elements that win).
Array scatter_assign(const Array& x, int d, const Array& index, const Array& src, const Array& is_last, Loc loc) {
  DType dt = x.dtype();
  DType vdt = dt == DType::Bool ? DType::U8 : dt;
  // A bounds-checked read of zeros at the index: out-of-range indices fail at read (as gather).
  Array check = gather(zeros(x.shape(), {DType::I64, x.device()}, loc), d, index, loc);
  Array count = scatter_add(zeros(x.shape(), {DType::I64, x.device()}, loc), d, index,
                            add(cast(is_last, DType::I64, loc), check, loc), loc);
  Array picked = where(is_last, cast(src, vdt, loc), zeros({}, {vdt, x.device()}, loc), loc);
  Array values = scatter_add(zeros(x.shape(), {vdt, x.device()}, loc), d, index, picked, loc);
  return where(gt(count, 0, loc), cast(values, dt, loc), x, loc);
}

Array index_as_i64(const Array& index, const char* op, Loc loc) {
  const NodePtr& n = node_of(index, op, loc);
  check_index(n, op, loc);
  return cast(index, DType::I64, loc);
}

// Row-major linear positions of indices[..., m] into the first m dims of `shape` (negative
// components count from the end; out-of-range components give -1, which fails at read).
Array linear_positions(const Array& indices, const Shape& shape, const char* op, Loc loc) {
  const NodePtr& n = node_of(indices, op, loc);
  check_index(n, op, loc);
  if (n->shape.rank() == 0) fail(op, "indices must have at least one dim (the last addresses x's dims)", loc);
  int64_t m = n->shape[n->shape.rank() - 1];
  if (m > shape.rank())
    fail(op, fmt::format("indices address {} dims but x has rank {} (shape {})", m, shape.rank(), shape.str()), loc);
  Array idx = cast(indices, DType::I64, loc);
  Array lin = zeros({}, {DType::I64, n->device}, loc);
  Array bad = zeros({}, {DType::Bool, n->device}, loc);
  int last = n->shape.rank() - 1;
  for (int64_t j = 0; j < m; ++j) {
    int64_t size = shape[int(j)];
    Array c = select(idx, last, j, loc);
    c = where(lt(c, 0, loc), add(c, size, loc), c, loc);
    bad = logical_or(bad, logical_or(lt(c, 0, loc), ge(c, size, loc), loc), loc);
    lin = add(mul(lin, size, loc), c, loc);
  }
  return where(bad, -1, lin, loc);
}

}  // namespace

Array scatter(const Array& x, int dim, const Array& index, const Array& src, Loc loc) {
  const NodePtr& n = node_of(x, "scatter", loc);
  const NodePtr& idx = node_of(index, "scatter", loc);
  const NodePtr& s = node_of(src, "scatter", loc);
  common_device({&x, &index, &src}, "scatter", loc);
  check_index(idx, "scatter", loc);
  int r = n->shape.rank();
  if (r == 0) fail("scatter", "cannot scatter into a rank-0 tensor", loc);
  int d = dim_arg(dim, r, "scatter", loc);
  if (idx->shape != s->shape)
    fail("scatter", fmt::format("index shape {} and src shape {} differ", idx->shape.str(), s->shape.str()), loc);
  if (idx->shape.rank() != r)
    fail("scatter", fmt::format("index has rank {} but input has rank {}", idx->shape.rank(), r), loc);
  for (int k = 0; k < r; ++k)
    if (k != d && idx->shape[k] > n->shape[k])
      fail("scatter", fmt::format("index shape {} exceeds input shape {} in dim {}", idx->shape.str(), n->shape.str(), k), loc);
  if (idx->shape.numel() == 0) return x;
  return scatter_assign(x, d, index, src, last_occurrence(index, d, loc), loc);
}

Array scatter(const Array& x, int dim, const Array& index, Scalar value, Loc loc) {
  const NodePtr& n = node_of(x, "scatter", loc);
  const NodePtr& idx = node_of(index, "scatter", loc);
  return scatter(x, dim, index, full(idx->shape, value, {n->dtype, n->device}, loc), loc);
}

Array slice_assign(const Array& x, int dim, int64_t start, int64_t end, int64_t step, const Array& value, Loc loc) {
  const NodePtr& n = node_of(x, "slice_assign", loc);
  const NodePtr& v = node_of(value, "slice_assign", loc);
  common_device({&x, &value}, "slice_assign", loc);
  int r = n->shape.rank();
  if (r == 0) fail("slice_assign", "cannot assign a slice of a rank-0 tensor", loc);
  int d = dim_arg(dim, r, "slice_assign", loc);
  if (step <= 0) fail("slice_assign", fmt::format("step must be positive, got {}", step), loc);
  int64_t size = n->shape[d];
  auto clampi = [&](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + size : i, 0, size); };
  int64_t s = clampi(start), e = clampi(end);
  int64_t len = e > s ? (e - s + step - 1) / step : 0;
  Shape region = n->shape;
  region[d] = len;
  try {
    if (broadcast_shapes(v->shape, region, "slice_assign") != region) throw Error("");
  } catch (const Error&) {
    fail("slice_assign", fmt::format("value of shape {} does not broadcast to the region {} of {}", v->shape.str(),
                                     region.str(), n->shape.str()),
         loc);
  }
  if (len == 0 || n->shape.numel() == 0) return x;
  // Along dim: position i takes value[(i - s) / step] where i is in the region.
  std::vector<int64_t> pick(static_cast<size_t>(size));
  std::vector<bool> in(static_cast<size_t>(size));
  for (int64_t i = 0; i < size; ++i) {
    bool hit = i >= s && i < e && (i - s) % step == 0;
    in[size_t(i)] = hit;
    pick[size_t(i)] = std::clamp<int64_t>((i - s) / step, 0, len - 1);
  }
  Array vals = expand(cast(value, n->dtype, loc), region, loc);
  Array placed = index_select(vals, d, from_vector(pick, Shape{size}, n->device, loc), loc);
  std::vector<int64_t> mshape(static_cast<size_t>(r), 1);
  mshape[size_t(d)] = size;
  Array mask = from_vector(in, Shape(mshape), n->device, loc);
  return where(mask, placed, x, loc);
}

Array slice_assign(const Array& x, int dim, int64_t start, int64_t end, const Array& value, Loc loc) {
  return slice_assign(x, dim, start, end, 1, value, loc);
}

Array select_assign(const Array& x, int dim, int64_t index, const Array& value, Loc loc) {
  const NodePtr& n = node_of(x, "select_assign", loc);
  const NodePtr& v = node_of(value, "select_assign", loc);
  int r = n->shape.rank();
  if (r == 0) fail("select_assign", "cannot assign into a rank-0 tensor", loc);
  int d = dim_arg(dim, r, "select_assign", loc);
  int64_t size = n->shape[d];
  if (index < -size || index >= size)
    fail("select_assign", fmt::format("index {} is out of range for dim {} of size {}", index, dim, size), loc);
  int64_t i = index < 0 ? index + size : index;
  std::vector<int64_t> sel = n->shape.dims();
  sel.erase(sel.begin() + d);
  try {
    if (broadcast_shapes(v->shape, Shape(sel), "select_assign") != Shape(sel)) throw Error("");
  } catch (const Error&) {
    fail("select_assign", fmt::format("value of shape {} does not broadcast to {}", v->shape.str(), Shape(sel).str()), loc);
  }
  return slice_assign(x, d, i, i + 1, 1, unsqueeze(expand(value, Shape(sel), loc), d, loc), loc);
}

Array take(const Array& x, const Array& index, Loc loc) {
  const NodePtr& n = node_of(x, "take", loc);
  common_device({&x, &index}, "take", loc);
  Array idx = index_as_i64(index, "take", loc);
  int64_t numel = n->shape.numel();
  idx = where(lt(idx, 0, loc), add(idx, numel, loc), idx, loc);
  Array flat = reshape(x, Shape{numel}, loc);
  return reshape(index_select(flat, 0, reshape(idx, Shape{idx.numel()}, loc), loc), index.shape(), loc);
}

Array gather_nd(const Array& x, const Array& indices, Loc loc) {
  const NodePtr& n = node_of(x, "gather_nd", loc);
  common_device({&x, &indices}, "gather_nd", loc);
  Array lin = linear_positions(indices, n->shape, "gather_nd", loc);
  const Shape& is = indices.shape();
  int m = int(is[is.rank() - 1]);
  std::vector<int64_t> flat{1}, out(is.begin(), is.end() - 1);
  for (int j = 0; j < m; ++j) flat[0] *= n->shape[j];
  for (int j = m; j < n->shape.rank(); ++j) {
    flat.push_back(n->shape[j]);
    out.push_back(n->shape[j]);
  }
  if (Shape(out).rank() > kMaxRank) fail("gather_nd", fmt::format("result rank {} exceeds {}", out.size(), kMaxRank), loc);
  Array rows = index_select(reshape(x, Shape(flat), loc), 0, reshape(lin, Shape{lin.numel()}, loc), loc);
  return reshape(rows, Shape(out), loc);
}

Array scatter_nd(const Array& x, const Array& indices, const Array& updates, Loc loc) {
  const NodePtr& n = node_of(x, "scatter_nd", loc);
  const NodePtr& u = node_of(updates, "scatter_nd", loc);
  common_device({&x, &indices, &updates}, "scatter_nd", loc);
  Array lin = linear_positions(indices, n->shape, "scatter_nd", loc);
  const Shape& is = indices.shape();
  int m = int(is[is.rank() - 1]);
  std::vector<int64_t> flat{1}, want(is.begin(), is.end() - 1), rows{lin.numel()};
  for (int j = 0; j < m; ++j) flat[0] *= n->shape[j];
  for (int j = m; j < n->shape.rank(); ++j) {
    flat.push_back(n->shape[j]);
    want.push_back(n->shape[j]);
    rows.push_back(n->shape[j]);
  }
  if (u->shape != Shape(want))
    fail("scatter_nd", fmt::format("updates have shape {}, expected {} for indices {} into {}", u->shape.str(),
                                   Shape(want).str(), is.str(), n->shape.str()),
         loc);
  if (lin.numel() == 0 || n->shape.numel() == 0) return x;
  Array lin1 = reshape(lin, Shape{lin.numel()}, loc);
  Array is_last = last_occurrence(lin1, 0, loc);
  std::vector<int64_t> col(rows.size(), 1);
  col[0] = lin.numel();
  Array index = expand(reshape(lin1, Shape(col), loc), Shape(rows), loc);
  Array last = expand(reshape(is_last, Shape(col), loc), Shape(rows), loc);
  Array r = scatter_assign(reshape(x, Shape(flat), loc), 0, index, reshape(updates, Shape(rows), loc), last, loc);
  return reshape(r, n->shape, loc);
}

Array masked_select(const Array& x, const Array& mask, Loc loc) {
  const NodePtr& n = node_of(x, "masked_select", loc);
  const NodePtr& m = node_of(mask, "masked_select", loc);
  common_device({&x, &mask}, "masked_select", loc);
  if (m->dtype != DType::Bool) fail("masked_select", fmt::format("mask must be bool, got {}", dtype_name(m->dtype)), loc);
  Shape shape;
  try {
    shape = broadcast_shapes(n->shape, m->shape, "masked_select");
  } catch (const Error&) {
    fail("masked_select", fmt::format("mask shape {} and input shape {} do not broadcast", m->shape.str(), n->shape.str()), loc);
  }
  std::vector<bool> bits = expand(mask, shape, loc).to_vector<bool>();  // synchronizes
  std::vector<int64_t> pos;
  for (size_t i = 0; i < bits.size(); ++i)
    if (bits[i]) pos.push_back(int64_t(i));
  Array flat = reshape(expand(x, shape, loc), Shape{shape.numel()}, loc);
  return index_select(flat, 0, from_vector(pos, Shape{int64_t(pos.size())}, n->device, loc), loc);
}

Array nonzero(const Array& x, Loc loc) {
  const NodePtr& n = node_of(x, "nonzero", loc);
  const Shape& s = n->shape;
  std::vector<bool> bits = cast(x, DType::Bool, loc).to_vector<bool>();  // synchronizes
  std::vector<int64_t> coords;
  int64_t count = 0;
  std::vector<int64_t> strides = s.contiguous_strides();
  for (size_t i = 0; i < bits.size(); ++i) {
    if (!bits[i]) continue;
    ++count;
    for (int d = 0; d < s.rank(); ++d) coords.push_back((int64_t(i) / strides[size_t(d)]) % s[d]);
  }
  return from_vector(coords, Shape{count, s.rank()}, n->device, loc);
}
Array argwhere(const Array& x, Loc loc) { return nonzero(x, loc); }

// ---- matmul family --------------------------------------------------------------------------
Array dot(const Array& a, const Array& b, Loc loc) {
  const NodePtr& na = node_of(a, "dot", loc);
  const NodePtr& nb = node_of(b, "dot", loc);
  if (na->shape.rank() != 1 || nb->shape.rank() != 1 || na->shape[0] != nb->shape[0])
    fail("dot", fmt::format("needs two 1-D tensors of one length, got {} and {}", na->shape.str(), nb->shape.str()), loc);
  return matmul(a, b, loc);
}
Array outer(const Array& a, const Array& b, Loc loc) {
  const NodePtr& na = node_of(a, "outer", loc);
  const NodePtr& nb = node_of(b, "outer", loc);
  if (na->shape.rank() != 1 || nb->shape.rank() != 1)
    fail("outer", fmt::format("needs two 1-D tensors, got {} and {}", na->shape.str(), nb->shape.str()), loc);
  return mul(unsqueeze(a, 1, loc), unsqueeze(b, 0, loc), loc);
}
Array mv(const Array& a, const Array& b, Loc loc) {
  const NodePtr& na = node_of(a, "mv", loc);
  const NodePtr& nb = node_of(b, "mv", loc);
  if (na->shape.rank() != 2 || nb->shape.rank() != 1 || na->shape[1] != nb->shape[0])
    fail("mv", fmt::format("needs [n, k] and [k], got {} and {}", na->shape.str(), nb->shape.str()), loc);
  return matmul(a, b, loc);
}
Array bmm(const Array& a, const Array& b, Loc loc) {
  const NodePtr& na = node_of(a, "bmm", loc);
  const NodePtr& nb = node_of(b, "bmm", loc);
  const Shape &sa = na->shape, &sb = nb->shape;
  if (sa.rank() != 3 || sb.rank() != 3 || sa[0] != sb[0] || sa[2] != sb[1])
    fail("bmm", fmt::format("needs [b, n, k] and [b, k, m], got {} and {}", sa.str(), sb.str()), loc);
  return matmul(a, b, loc);
}

}  // namespace ember
