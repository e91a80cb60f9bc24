// Lowering of nodes that move data: views for movement ops (no copy unless a reshape cannot be
// expressed over the strides), cat, gather/index_select and scatter-add kernels.
#include <fmt/format.h>

#include <algorithm>
#include <cassert>

#include "ember/error.h"
#include "op_table/dtype_rules.h"
#include "scheduler/launch.h"

namespace ember {

// Strides that view `v` (of shape `from`) as shape `to` without copying, if they exist.
static bool reshape_strides(const Shape& from, const std::vector<int64_t>& strides, const Shape& to,
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
      for (int64_t p : n.attrs.get<PermuteAttrs>().order) out.strides.push_back(v.strides[size_t(p)]);
      break;
    }
    case Op::Slice: {
      const SliceAttrs& cut = n.attrs.get<SliceAttrs>();
      for (size_t d = 0; d < size_t(n.shape.rank()); ++d) {
        out.offset += cut.start[d] * v.strides[d];
        out.strides[d] = v.strides[d] * cut.step[d];
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

void run_gather(Node& n) {
  const Node& x = *n.inputs[0];
  const Node& index = *n.inputs[1];
  const int dim = int(n.attrs.get<AxisAttrs>().dim);
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
  l.run(n.device, b, op_name(n.op));
}

// ScatterAdd (AxisAttrs): a reduction over the index's extent k along dim:
// out[p] = sum_k (index[p|dim=k] == p[dim] ? src[p|dim=k] : 0). The comparison value p[dim] is
// the IOTA of an argument without a buffer that steps 1 along dim.
void run_scatter_add(Node& n) {
  const Node& src = *n.inputs[0];
  const Node& index = *n.inputs[1];
  const int dim = int(n.attrs.get<AxisAttrs>().dim);
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
  l.run(n.device, b, op_name(n.op));
}

// Cat (AxisAttrs): one copy per input into its slab of the output, except for inputs
// that were computed in their slab already (place_cat_inputs in realize.cpp).
void run_cat(Node& n) {
  const int dim = int(n.attrs.get<AxisAttrs>().dim);
  n.view = alloc_contiguous(n);
  int64_t start = 0;
  for (auto& in : n.inputs) {
    View dst = n.view;
    dst.offset = n.view.offset + start * n.view.strides[size_t(dim)];
    const bool in_place = in->view.buffer == dst.buffer && in->view.offset == dst.offset &&
                          is_contiguous(in->view, in->shape) && is_contiguous(n.view, n.shape) &&
                          std::all_of(n.shape.begin(), n.shape.begin() + dim, [](int64_t s) { return s == 1; });
    if (in_place) {
      // computed in its slab already
    } else if (in->view.buffer == dst.buffer) {  // another slab of this output: copy via a fresh buffer
      View tmp = materialize(*in, in->view);
      copy_kernel(*in, tmp, in->shape, dst, n.view.strides, n.device);
    } else {
      copy_kernel(*in, in->view, in->shape, dst, n.view.strides, n.device);
    }
    start += in->shape[dim];
  }
}

}  // namespace ember
