// Lowering of contractions and the library-backed ops (convolution, pooling, sorting, scans, fused
// attention) to backend library calls (oneDNN on the CPU).
#include <fmt/format.h>

#include <algorithm>
#include <cassert>

#include "ember/error.h"
#include "ops/dtype_rules.h"
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

}  // namespace

// Ops of ops_library.def: one library call each, the node's typed attributes (ops/op_attrs.h)
// spelled as the attrs struct of abi.h.
void run_library(Node& n) {
  if (n.op == Op::MatmulEpilogue || n.op == Op::Conv2dEpilogue) return run_epilogue(n);
  // Every output (a multi-output node's too, graph/node.h) gets a fresh contiguous buffer.
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
  for (const NodePtr& in : n.inputs) ins.push_back(tensor_desc(*in, in->view));
  ember_conv_attrs conv{};
  ember_pool_attrs pool{};
  ember_sort_attrs sort{};
  ember_scan_attrs scan{};
  ember_attention_attrs attention{};
  const void* attrs = nullptr;
  int32_t code = 0;
  switch (n.op) {
    case Op::Conv2d: code = EMBER_LIB_CONV2D; break;
    case Op::Conv2dBackwardData: code = EMBER_LIB_CONV2D_BACKWARD_DATA; break;
    case Op::Conv2dBackwardWeights: code = EMBER_LIB_CONV2D_BACKWARD_WEIGHTS; break;
    case Op::MaxPool2d: code = EMBER_LIB_MAX_POOL2D; break;
    case Op::MaxPool2dWithIndices: code = EMBER_LIB_MAX_POOL2D; break;  // its second output: the indices
    case Op::MaxPool2dIndices: code = EMBER_LIB_MAX_POOL2D_INDICES; break;
    case Op::MaxPool2dBackward: code = EMBER_LIB_MAX_POOL2D_BACKWARD; break;
    case Op::AvgPool2d: code = EMBER_LIB_AVG_POOL2D; break;
    case Op::AvgPool2dBackward: code = EMBER_LIB_AVG_POOL2D_BACKWARD; break;
    case Op::Argsort: code = EMBER_LIB_ARGSORT; break;
    case Op::TopkIndices: code = EMBER_LIB_TOPK; break;
    case Op::Cumsum: code = EMBER_LIB_CUMSUM; break;
    case Op::Cumprod: code = EMBER_LIB_CUMPROD; break;
    case Op::CummaxIndices: code = EMBER_LIB_CUMMAX_INDICES; break;
    case Op::CumminIndices: code = EMBER_LIB_CUMMIN_INDICES; break;
    case Op::FusedAttention: code = EMBER_LIB_FUSED_ATTENTION; break;
    case Op::FusedAttentionBackward: code = EMBER_LIB_FUSED_ATTENTION_BACKWARD; break;
    default: throw Error(fmt::format("{}: no lowering for this library op", n.where()));
  }
  switch (code) {
    case EMBER_LIB_CONV2D: case EMBER_LIB_CONV2D_BACKWARD_DATA: case EMBER_LIB_CONV2D_BACKWARD_WEIGHTS:
      conv = conv_call_attrs(n.attrs.get<Conv2dOptions>());
      attrs = &conv;
      break;
    case EMBER_LIB_MAX_POOL2D: case EMBER_LIB_MAX_POOL2D_INDICES: case EMBER_LIB_AVG_POOL2D:
    case EMBER_LIB_AVG_POOL2D_BACKWARD: case EMBER_LIB_MAX_POOL2D_BACKWARD: {
      const Pool2dOptions& p = n.attrs.get<Pool2dOptions>();
      pool = {{p.kernel.h, p.kernel.w}, {p.stride.h, p.stride.w}, {p.padding.h, p.padding.w},
              {p.padding.h, p.padding.w}, int32_t(p.count_include_pad)};
      attrs = &pool;
      break;
    }
    case EMBER_LIB_ARGSORT: case EMBER_LIB_TOPK: {
      const SortAttrs& s = n.attrs.get<SortAttrs>();
      sort = {int32_t(s.dim), int32_t(s.descending), s.k};
      attrs = &sort;
      break;
    }
    case EMBER_LIB_FUSED_ATTENTION:
    case EMBER_LIB_FUSED_ATTENTION_BACKWARD: {
      const AttentionAttrs& a = n.attrs.get<AttentionAttrs>();
      attention = {a.scale, int32_t(a.causal)};
      attrs = &attention;
      break;
    }
    default: {
      const ScanAttrs& s = n.attrs.get<ScanAttrs>();
      scan = {int32_t(s.dim), int32_t(s.reverse)};
      attrs = &scan;
      break;
    }
  }
  for (const NodePtr& in : n.inputs) buffers.push_back(in->view.buffer);
  try {
    library_call(n.device, op_name(n.op), code, ins.data(), int(ins.size()), outs.data(), int(outs.size()), attrs,
                 buffers);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", n.where(), e.what()));
  }
}

}  // namespace ember
