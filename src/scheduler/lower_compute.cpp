// Lowering of elementwise, generator and reduction nodes to KIR programs.
#include <fmt/format.h>

#include <algorithm>
#include <cassert>

#include "ember/error.h"
#include "op_table/dtype_rules.h"
#include "scheduler/launch.h"

namespace ember {

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
  l.run(n.device, b, op_name(n.op));
}

void run_generator(Node& n) {
  n.view = alloc_contiguous(n);
  if (n.shape.numel() == 0) return;
  DType compute = (n.dtype == DType::F16 || n.dtype == DType::BF16) ? DType::F32 : n.dtype;
  kir::Builder b;
  int out = b.add_arg(n.dtype);
  // The element's index in the node's own layout, from an argument without a buffer (not the
  // output's offset: the output may be a slab of a larger buffer, and a device addresses it from
  // the window it binds).
  int counter = b.add_arg(DType::I64);
  kir::Val v = generator_expr(n.op, b, n.attrs, compute, b.iota(counter));
  b.store(out, b.cast(v, n.dtype));
  Launch l;
  l.outer_rank = n.shape.rank();
  l.shape = n.shape.dims();
  l.add(n.view, n.view.strides);
  l.add(View{}, n.shape.contiguous_strides());
  l.run(n.device, b, op_name(n.op));
}

// ReduceAttrs: the reduced dims (sorted, wrapped); the node's shape has them removed or kept as 1.
void run_reduce(Node& n) {
  const Node& in = *n.inputs[0];
  ReduceTypes t = reduce_types(n.op, in.dtype);
  n.view = alloc_contiguous(n);
  if (n.shape.numel() == 0) return;

  std::vector<bool> reduced(size_t(in.shape.rank()), false);
  for (int64_t d : n.attrs.get<ReduceAttrs>().dims) reduced[size_t(d)] = true;
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
  l.run(n.device, b, op_name(n.op));
}

// Gather (AxisAttrs): out[p] = x[p with p[dim] replaced by index[p]].
// IndexSelect (AxisAttrs): out[p] = x[p with p[dim] replaced by index[p[dim]]].
}  // namespace ember
