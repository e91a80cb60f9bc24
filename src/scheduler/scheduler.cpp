// The scheduler turns pending nodes into work for a backend. For now every compute node is its
// own kernel (fusion comes later, here, once for all backends); movement ops become views
// (strides and offsets) that later kernels read through, so they copy nothing unless a reshape
// cannot be expressed over the existing layout.
#include "scheduler/scheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <iostream>

#include "ember/error.h"
#include "ops/dtype_rules.h"

namespace ember {

namespace {

Backend& backend_for(Device d) { return Backend::get(d.kind); }

bool env_log_kir() {
  static bool on = [] {
    const char* s = std::getenv("EMBER_LOG");
    return s && std::string(s).find("kir") != std::string::npos;
  }();
  return on;
}

View alloc_contiguous(const Node& n) {
  View v;
  size_t bytes = size_t(n.shape.numel()) * dtype_size(n.dtype);
  v.buffer = backend_for(n.device).alloc(n.device, bytes);
  v.strides = n.shape.contiguous_strides();
  return v;
}

bool is_contiguous(const View& v, const Shape& shape) {
  int64_t expect = 1;
  for (int i = shape.rank() - 1; i >= 0; --i) {
    if (shape[i] != 1 && v.strides[size_t(i)] != expect) return false;
    expect *= shape[i];
  }
  return true;
}

// Strides of `in` (shape in_shape) read at every point of out_shape (numpy broadcasting).
std::vector<int64_t> broadcast_strides(const Shape& in_shape, const std::vector<int64_t>& strides,
                                       const Shape& out_shape) {
  int r = out_shape.rank(), ri = in_shape.rank();
  std::vector<int64_t> s(size_t(r), 0);
  for (int i = 0; i < ri; ++i) {
    int o = r - ri + i;
    s[size_t(o)] = in_shape[i] == 1 ? 0 : strides[size_t(i)];
  }
  return s;
}

// An iteration space with its arguments, before dims are collapsed into a launch.
struct Launch {
  int outer_rank = 0;
  std::vector<int64_t> shape;  // outer dims, then reduce dims
  struct Arg {
    std::shared_ptr<Buffer> buffer;
    int64_t offset = 0;
    std::vector<int64_t> strides;  // over `shape`
    int64_t gather_stride = 0, gather_size = 0;
  };
  std::vector<Arg> args;

  void add(const View& v, std::vector<int64_t> strides) {
    args.push_back({v.buffer, v.offset, std::move(strides), 0, 0});
  }

  // Drops size-1 dims and merges neighbours that every argument walks contiguously, so kernels
  // see few, long dims (a contiguous elementwise op becomes one flat loop).
  void collapse() {
    std::vector<int64_t> kept_shape;
    std::vector<std::vector<int64_t>> kept_strides(args.size());
    int kept_outer = 0;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] == 1) continue;
      bool outer = int(d) < outer_rank;
      // Outer dims come first, so the previous kept dim is in d's segment if one exists there.
      bool has_neighbour = outer ? !kept_shape.empty() : int(kept_shape.size()) > kept_outer;
      bool mergeable = has_neighbour;
      for (size_t a = 0; a < args.size() && mergeable; ++a)
        mergeable = kept_strides[a].back() == args[a].strides[d] * shape[d];
      if (mergeable) {
        kept_shape.back() *= shape[d];
        for (size_t a = 0; a < args.size(); ++a) kept_strides[a].back() = args[a].strides[d];
      } else {
        kept_shape.push_back(shape[d]);
        for (size_t a = 0; a < args.size(); ++a) kept_strides[a].push_back(args[a].strides[d]);
        if (outer) ++kept_outer;
      }
    }
    shape = std::move(kept_shape);
    outer_rank = kept_outer;
    for (size_t a = 0; a < args.size(); ++a) args[a].strides = std::move(kept_strides[a]);
  }

  void run(Backend& be, kir::Builder& b, const std::string& name) {
    collapse();
    if (shape.size() > EMBER_MAX_ITER_RANK)
      throw Error(fmt::format("{}: iteration space of rank {} exceeds {}", name, shape.size(),
                              EMBER_MAX_ITER_RANK));
    ember_kir_program prog = b.program(name);
    if (env_log_kir()) std::cerr << kir::to_string(prog);
    ember_program compiled = be.program(prog, b.structure_hash());
    std::vector<ember_kir_arg> cargs(args.size());
    for (size_t a = 0; a < args.size(); ++a) {
      ember_kir_arg& c = cargs[a];
      c = ember_kir_arg{};
      c.buffer = args[a].buffer ? args[a].buffer->handle : nullptr;
      c.offset = args[a].offset;
      std::copy(args[a].strides.begin(), args[a].strides.end(), c.strides);
      c.gather_stride = args[a].gather_stride;
      c.gather_size = args[a].gather_size;
    }
    ember_kir_launch l{};
    l.outer_rank = outer_rank;
    l.reduce_rank = int32_t(shape.size()) - outer_rank;
    std::copy(shape.begin(), shape.end(), l.shape);
    l.n_args = int32_t(cargs.size());
    l.args = cargs.data();
    be.run(compiled, l);
  }
};

// A pending or ready Full node folds into its consumers as a constant.
bool is_constant(const NodePtr& n) { return n->op == Op::Full; }

// Copies `src` (viewed with `src_view`) into `dst` at every point of `shape`.
void copy_kernel(const Node& src, const View& src_view, const Shape& shape, const View& dst,
                 const std::vector<int64_t>& dst_strides, Device device) {
  if (shape.numel() == 0) return;
  kir::Builder b;
  int out = b.add_arg(src.dtype);
  int in = b.add_arg(src.dtype);
  b.store(out, b.load(in));
  Launch l;
  l.outer_rank = shape.rank();
  l.shape = shape.dims();
  l.add(dst, dst_strides);
  l.add(src_view, src_view.strides);
  l.run(backend_for(device), b, "copy");
}

View materialize(const Node& n, const View& v) {
  View out = alloc_contiguous(n);
  copy_kernel(n, v, n.shape, out, out.strides, n.device);
  return out;
}

// ---- compute nodes ------------------------------------------------------------------------
void run_elementwise(Node& n) {
  std::vector<DType> in_types;
  for (auto& in : n.inputs) in_types.push_back(in->dtype);
  ElementwiseTypes t = elementwise_types(n.op, in_types, n.attrs.dtype);
  n.view = alloc_contiguous(n);
  if (n.shape.numel() == 0) return;

  kir::Builder b;
  Launch l;
  l.outer_rank = n.shape.rank();
  l.shape = n.shape.dims();
  int out = b.add_arg(n.dtype);
  l.add(n.view, n.view.strides);
  kir::Val operands[3];
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    const NodePtr& in = n.inputs[k];
    kir::Val v;
    if (is_constant(in)) {
      // A folded constant is a tensor of its dtype: an f16/bf16 value is rounded to it.
      kir::Builder::Scalar2 value = in->attrs.value;
      if (in->dtype == DType::F16) value.f = double(half_to_float(float_to_half(float(value.f))));
      if (in->dtype == DType::BF16) value.f = double(bf16_to_float(float_to_bf16(float(value.f))));
      v = b.constant_like(value, in->dtype);
    } else {
      v = b.load(b.add_arg(in->dtype));
      l.add(in->view, broadcast_strides(in->shape, in->view.strides, n.shape));
    }
    operands[k] = b.cast(v, t.operands[k]);
  }
  kir::Val r = elementwise_expr(n.op, b, n.attrs, t.compute, operands[0], operands[1], operands[2]);
  b.store(out, b.cast(r, n.dtype));
  l.run(backend_for(n.device), b, op_name(n.op));
}

void run_generator(Node& n) {
  n.view = alloc_contiguous(n);
  if (n.shape.numel() == 0) return;
  DType compute = (n.dtype == DType::F16 || n.dtype == DType::BF16) ? DType::F32 : n.dtype;
  kir::Builder b;
  int out = b.add_arg(n.dtype);
  kir::Val v = generator_expr(n.op, b, n.attrs, compute, b.iota(out));
  b.store(out, b.cast(v, n.dtype));
  Launch l;
  l.outer_rank = n.shape.rank();
  l.shape = n.shape.dims();
  l.add(n.view, n.view.strides);
  l.run(backend_for(n.device), b, op_name(n.op));
}

// attrs.ints: the reduced dims (sorted, wrapped); the node's shape has them removed or kept as 1.
void run_reduce(Node& n) {
  const Node& in = *n.inputs[0];
  ReduceTypes t = reduce_types(n.op, in.dtype);
  n.view = alloc_contiguous(n);
  if (n.shape.numel() == 0) return;

  std::vector<bool> reduced(size_t(in.shape.rank()), false);
  for (int64_t d : n.attrs.ints) reduced[size_t(d)] = true;
  Launch l;
  std::vector<int64_t> in_strides, out_strides;
  int64_t count = 1;
  // Output strides over the input's kept dims (contiguous, in order).
  std::vector<int64_t> kept;
  for (int d = 0; d < in.shape.rank(); ++d)
    if (!reduced[size_t(d)]) kept.push_back(in.shape[d]);
  std::vector<int64_t> kept_strides = Shape(kept).contiguous_strides();
  size_t k = 0;
  for (int d = 0; d < in.shape.rank(); ++d) {
    if (reduced[size_t(d)]) continue;
    l.shape.push_back(in.shape[d]);
    in_strides.push_back(in.view.strides[size_t(d)]);
    out_strides.push_back(kept_strides[k++]);
  }
  l.outer_rank = int(l.shape.size());
  for (int d = 0; d < in.shape.rank(); ++d) {
    if (!reduced[size_t(d)]) continue;
    l.shape.push_back(in.shape[d]);
    in_strides.push_back(in.view.strides[size_t(d)]);
    out_strides.push_back(0);
    count *= in.shape[d];
  }
  kir::Builder b;
  int out = b.add_arg(n.dtype);
  int src = b.add_arg(in.dtype);
  l.add(n.view, out_strides);
  l.add(in.view, in_strides);
  kir::Val x = b.cast(b.load(src), t.accumulate);
  kir::Val acc = reduce_accumulate(n.op, b, x);
  b.phase = 1;
  kir::Val r = reduce_finish(n.op, b, acc, count);
  b.store(out, b.cast(r, n.dtype));
  l.run(backend_for(n.device), b, op_name(n.op));
}

// Gather (attrs.ints = {dim}): out[p] = x[p with p[dim] replaced by index[p]].
// IndexSelect (attrs.ints = {dim}): out[p] = x[p with p[dim] replaced by index[p[dim]]].
void run_gather(Node& n) {
  const Node& x = *n.inputs[0];
  const Node& index = *n.inputs[1];
  int dim = int(n.attrs.ints[0]);
  n.view = alloc_contiguous(n);
  if (n.shape.numel() == 0) return;
  Launch l;
  l.outer_rank = n.shape.rank();
  l.shape = n.shape.dims();
  l.add(n.view, n.view.strides);
  std::vector<int64_t> xs = x.view.strides;
  xs[size_t(dim)] = 0;
  l.add(x.view, xs);
  l.args.back().gather_stride = x.view.strides[size_t(dim)];
  l.args.back().gather_size = x.shape[dim];
  std::vector<int64_t> is(size_t(n.shape.rank()), 0);
  if (n.op == Op::Gather) is = index.view.strides;
  else is[size_t(dim)] = index.view.strides[0];
  l.add(index.view, is);

  kir::Builder b;
  int out = b.add_arg(n.dtype);
  int src = b.add_arg(x.dtype);
  int idx = b.add_arg(index.dtype);
  b.store(out, b.load_gather(src, b.cast(b.load(idx), DType::I64)));
  l.run(backend_for(n.device), b, op_name(n.op));
}

// ScatterAdd (attrs.ints = {dim}): a reduction over the index's extent k along dim:
// out[p] = sum_k (index[p|dim=k] == p[dim] ? src[p|dim=k] : 0). The comparison value p[dim] is
// the IOTA of an argument without a buffer that steps 1 along dim.
void run_scatter_add(Node& n) {
  const Node& src = *n.inputs[0];
  const Node& index = *n.inputs[1];
  int dim = int(n.attrs.ints[0]);
  n.view = alloc_contiguous(n);
  if (n.shape.numel() == 0) return;
  int r = n.shape.rank();
  Launch l;
  l.outer_rank = r;
  l.shape = n.shape.dims();
  l.shape.push_back(index.shape[dim]);
  auto with_k = [&](const View& v) {  // strides over outer dims (dim -> 0) and then k
    std::vector<int64_t> s(v.strides.begin(), v.strides.end());
    s[size_t(dim)] = 0;
    s.push_back(v.strides[size_t(dim)]);
    return s;
  };
  std::vector<int64_t> out_strides = n.view.strides;
  out_strides.push_back(0);
  l.add(n.view, out_strides);
  l.add(src.view, with_k(src.view));
  l.add(index.view, with_k(index.view));
  std::vector<int64_t> position(static_cast<size_t>(r + 1), 0);
  position[size_t(dim)] = 1;
  l.add(View{}, position);

  kir::Builder b;
  DType acc = (n.dtype == DType::F16 || n.dtype == DType::BF16) ? DType::F32 : n.dtype;
  int out = b.add_arg(n.dtype);
  int s_arg = b.add_arg(src.dtype);
  int i_arg = b.add_arg(index.dtype);
  int p_arg = b.add_arg(DType::I64);
  kir::Val hit = kir::eq(b.cast(b.load(i_arg), DType::I64), b.iota(p_arg));
  kir::Val v = kir::select(hit, b.cast(b.load(s_arg), acc), b.constant(0, acc));
  kir::Val total = b.acc_sum(v);
  b.phase = 1;
  b.store(out, b.cast(total, n.dtype));
  l.run(backend_for(n.device), b, op_name(n.op));
}

// Cat (attrs.ints = {dim}): one copy per input into its slab of the output.
void run_cat(Node& n) {
  int dim = int(n.attrs.ints[0]);
  n.view = alloc_contiguous(n);
  int64_t start = 0;
  for (auto& in : n.inputs) {
    View dst = n.view;
    dst.offset = start * n.view.strides[size_t(dim)];
    copy_kernel(*in, in->view, in->shape, dst, n.view.strides, n.device);
    start += in->shape[dim];
  }
}

void run_matmul(Node& n) {
  const Node& a = *n.inputs[0];
  const Node& b = *n.inputs[1];
  n.view = alloc_contiguous(n);
  if (n.shape.numel() == 0) return;
  int r = n.shape.rank();
  auto desc = [&](const Node& x, const View& v, int64_t rows, int64_t cols) {
    ember_tensor_desc d{};
    d.buffer = v.buffer->handle;
    d.offset = v.offset;
    d.dtype = int32_t(x.dtype);
    d.rank = r;
    Shape want = n.shape;
    want[r - 2] = rows;
    want[r - 1] = cols;
    std::vector<int64_t> s = broadcast_strides(x.shape, v.strides, want);
    // A size-1 matrix dim keeps its own stride (any value works; keep a valid one).
    for (int i = 0; i < r; ++i) {
      d.shape[i] = want[i];
      d.strides[i] = s[size_t(i)];
    }
    return d;
  };
  int64_t K = a.shape[a.shape.rank() - 1];
  ember_tensor_desc ins[2] = {desc(a, a.view, n.shape[r - 2], K), desc(b, b.view, K, n.shape[r - 1])};
  ember_tensor_desc out = desc(n, n.view, n.shape[r - 2], n.shape[r - 1]);
  backend_for(n.device).library_call(EMBER_LIB_MATMUL, ins, 2, &out, 1, nullptr);
}

// ---- views --------------------------------------------------------------------------------
// Strides that view `v` (of shape `from`) as shape `to` without copying, if they exist.
bool reshape_strides(const Shape& from, const std::vector<int64_t>& strides, const Shape& to,
                     std::vector<int64_t>& out) {
  out.assign(size_t(to.rank()), 0);
  if (from.numel() == 0) {
    out = to.contiguous_strides();
    return true;
  }
  // Walk chunks of dims whose product matches on both sides; each input chunk must be contiguous.
  int i = 0, j = 0;
  int fr = from.rank(), tr = to.rank();
  while (i < fr || j < tr) {
    // Skip size-1 dims on either side.
    if (j < tr && to[j] == 1) { out[size_t(j)] = 1; ++j; continue; }
    if (i < fr && from[i] == 1) { ++i; continue; }
    if (i >= fr || j >= tr) return false;
    int i0 = i, j0 = j;
    int64_t pf = from[i++], pt = to[j++];
    while (pf != pt) {
      if (pf < pt) {
        if (i >= fr) return false;
        pf *= from[i++];
      } else {
        if (j >= tr) return false;
        pt *= to[j++];
      }
    }
    // Input dims i0..i-1 must be contiguous among themselves (ignoring size-1 dims); the chunk's
    // output dims then step by the stride of its innermost input dim.
    int64_t last = -1, innermost = -1;
    for (int d = i - 1; d >= i0; --d) {
      if (from[d] == 1) continue;
      if (last >= 0 && strides[size_t(d)] != strides[size_t(last)] * from[last]) return false;
      if (innermost < 0) innermost = d;
      last = d;
    }
    int64_t inner = innermost >= 0 ? strides[size_t(innermost)] : 1;
    for (int d = j - 1; d >= j0; --d) {
      out[size_t(d)] = inner;
      inner *= to[d];
    }
  }
  return true;
}

void run_movement(Node& n) {
  const Node& in = *n.inputs[0];
  const View& v = in.view;
  View out = v;
  switch (n.op) {
    case Op::Reshape: {
      if (!reshape_strides(in.shape, v.strides, n.shape, out.strides)) {
        View c = materialize(in, v);
        out = c;
        out.strides = n.shape.contiguous_strides();
      }
      break;
    }
    case Op::Permute: {
      out.strides.clear();
      for (int64_t p : n.attrs.ints) out.strides.push_back(v.strides[size_t(p)]);
      break;
    }
    case Op::Slice: {  // ints: per dim start, step
      for (int d = 0; d < n.shape.rank(); ++d) {
        int64_t start = n.attrs.ints[size_t(2 * d)], step = n.attrs.ints[size_t(2 * d + 1)];
        out.offset += start * v.strides[size_t(d)];
        out.strides[size_t(d)] = v.strides[size_t(d)] * step;
      }
      break;
    }
    case Op::Expand:
      out.strides = broadcast_strides(in.shape, v.strides, n.shape);
      break;
    case Op::Contiguous:
      if (!is_contiguous(v, in.shape)) out = materialize(in, v);
      break;
    default: assert(false);
  }
  n.view = std::move(out);
}

}  // namespace

bool folds_into_consumer(const Node& consumer, const Node& input) {
  return op_info(consumer.op).kind == OpKind::Elementwise && input.op == Op::Full;
}

void execute_node(Node& n) {
  switch (op_info(n.op).kind) {
    case OpKind::Elementwise: run_elementwise(n); break;
    case OpKind::Generator: run_generator(n); break;
    case OpKind::Reduce: run_reduce(n); break;
    case OpKind::Movement: run_movement(n); break;
    case OpKind::Gather: run_gather(n); break;
    case OpKind::Scatter: run_scatter_add(n); break;
    case OpKind::Opaque: run_cat(n); break;
    case OpKind::Contraction: run_matmul(n); break;
    case OpKind::Leaf: throw Error(fmt::format("{}: leaf node has no data", n.where()));
  }
}

}  // namespace ember
