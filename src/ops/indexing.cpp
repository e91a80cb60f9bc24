// Front end of gather, index_select and matmul.
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
  OpAttrs attrs;
  attrs.ints = {d};
  return make_array(Op::Gather, std::move(attrs), {x, index}, idx->shape, n->dtype, n->device, loc);
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
  OpAttrs attrs;
  attrs.ints = {d};
  return make_array(Op::IndexSelect, std::move(attrs), {x, index}, shape, n->dtype, n->device, loc);
}

Array matmul(const Array& a, const Array& b, Loc loc) {
  const NodePtr& na = node_of(a, "matmul", loc);
  const NodePtr& nb = node_of(b, "matmul", loc);
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

// The dense scatter-add (Op::ScatterAdd): out has index's shape with dim resized to `size`.
static Array scatter_sum(const Array& src, int dim, const Array& index, int64_t size, Loc loc) {
  OpAttrs attrs;
  attrs.ints = {dim};
  attrs.value = {double(size), size};
  Shape shape = index.shape();
  shape[dim] = size;
  return make_array(Op::ScatterAdd, std::move(attrs), {src, index}, shape, src.dtype(), src.device(), loc);
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
  // The 1-D index, viewed (stride 0) along every other dim of src.
  std::vector<int64_t> view(static_cast<size_t>(r), 1);
  view[size_t(d)] = idx->shape[0];
  Array wide = expand(reshape(index, Shape(view), loc), want, loc);
  return add(x, scatter_sum(cast(src, x.dtype(), loc), d, wide, n->shape[d], loc), loc);
}

}  // namespace ember
