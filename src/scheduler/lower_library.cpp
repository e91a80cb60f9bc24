// Lowering of contractions and the library-backed ops (convolution, pooling, sorting, scans, fused
// attention) to backend library calls (oneDNN on the CPU).
#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <type_traits>

#include "ember/error.h"
#include "op_table/dtype_rules.h"
#include "scheduler/epilogue.h"
#include "scheduler/host_fallback.h"
#include "scheduler/launch.h"

namespace ember {

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
  library_call(n.device, op_name(n.op), EMBER_LIB_MATMUL, ins, 2, &out, 1, nullptr,
               {a.view.buffer, b.view.buffer, n.view.buffer});
}

namespace {

// A view of `shape` and `dtype` as a library-call descriptor (explicit shape and strides).
ember_tensor_desc tensor_desc(const Shape& shape, DType dtype, const View& v) {
  ember_tensor_desc d{};
  d.buffer = v.buffer ? v.buffer->handle : nullptr;
  d.offset = v.offset;
  d.dtype = int32_t(dtype);
  d.rank = shape.rank();
  for (int i = 0; i < d.rank; ++i) {
    d.shape[i] = shape[i];
    d.strides[i] = v.strides[size_t(i)];
  }
  return d;
}
ember_tensor_desc tensor_desc(const Node& x, const View& v) { return tensor_desc(x.shape, x.dtype, v); }

// The node's attrs struct (op_table/op_attrs.h) as the call's attrs struct of abi.h: one overload per
// struct of the table's attrs column.
ember_conv_attrs call_attrs(const Conv2dOptions& c) { return conv_call_attrs(c); }
ember_pool_attrs call_attrs(const Pool2dOptions& p) { return pool_call_attrs(p); }
ember_sort_attrs call_attrs(const SortAttrs& s) { return {int32_t(s.dim), int32_t(s.descending), s.k}; }
ember_scan_attrs call_attrs(const ScanAttrs& s) { return {int32_t(s.dim), int32_t(s.reverse)}; }
ember_attention_attrs call_attrs(const AttentionAttrs& a) { return {a.scale, int32_t(a.causal)}; }
ember_recurrence_attrs call_attrs(const RecurrenceAttrs& r) { return {int32_t(r.reverse)}; }
ember_index_attrs call_attrs(const AxisAttrs& a) { return {int32_t(a.dim)}; }

// Library call `code` for node n with the call's `attrs`: every output (a multi-output node's too,
// graph/node.h) gets a fresh contiguous buffer; the inputs are passed as their views.
template <class CallAttrs>
void call_library(Node& n, int32_t code, const CallAttrs& attrs) {
  n.view = alloc_contiguous(n);
  std::vector<ember_tensor_desc> outs{tensor_desc(n, n.view)};
  std::vector<std::shared_ptr<DeviceBuffer>> buffers{n.view.buffer};
  bool empty = n.shape.numel() == 0;
  for (Node::ExtraOutput& e : n.extra_outputs) {
    e.view = alloc_contiguous(n.device, e.spec.shape, e.spec.dtype);
    outs.push_back(tensor_desc(e.spec.shape, e.spec.dtype, e.view));
    buffers.push_back(e.view.buffer);
    empty = empty && e.spec.shape.numel() == 0;
  }
  if (empty) return;
  std::vector<ember_tensor_desc> ins;
  for (const NodePtr& in : n.inputs) {
    ins.push_back(tensor_desc(*in, in->view));
    buffers.push_back(in->view.buffer);
  }
  try {
    library_call(n.device, op_name(n.op), code, ins.data(), int(ins.size()), outs.data(), int(outs.size()), &attrs,
                 buffers);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", n.where(), e.what()));
  }
}

// The table entry's call with its attrs struct; the epilogues carry their post-ops
// (scheduler/epilogue.h), which run_epilogue spells out.
template <class Attrs>
void lower_library_op(Node& n, [[maybe_unused]] int32_t code) {
  if constexpr (std::is_same_v<Attrs, EpilogueAttrs>) {
    run_epilogue(n);
  } else {
    call_library(n, code, call_attrs(n.attrs.get<Attrs>()));
  }
}

}  // namespace

// Ops of ops_library.def: the call and attrs struct their table entry names.
void run_library(Node& n) {
  switch (n.op) {
#define EMBER_LIBRARY(Name, fn, attrs, saves, grad, call) \
  case Op::Name: return lower_library_op<attrs>(n, EMBER_LIB_##call);
#include "op_table/ops.def"
    default: throw Error(fmt::format("{}: not a library op", n.where()));
  }
}

}  // namespace ember
