// Library-call epilogues (epilogue.h): the rewrite pass over the pending nodes and the lowering of
// the rewritten nodes to one library call.
#include "scheduler/epilogue.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "runtime/work_recorder.h"
#include "ember/error.h"
#include "graph/pointer_table.h"
#include "scheduler/fusion.h"
#include "scheduler/host_fallback.h"
#include "scheduler/launch.h"

namespace ember {

namespace {

bool& epilogue_flag() {
  static bool on = [] {
    const char* s = std::getenv("EMBER_FUSION_EPILOGUE");
    return !(s && std::string(s) == "0");
  }();
  return on;
}

bool log_fusion() {
  static bool on = [] {
    const char* s = std::getenv("EMBER_LOG");
    return s && std::string(s).find("fusion") != std::string::npos;
  }();
  return on;
}

constexpr size_t kMaxOperands = 4;

// Ops that may be part of a chain (the head or a link).
bool chain_op(Op op) {
  switch (op) {
    case Op::Matmul: case Op::Conv2d: case Op::MaxPool2dBackward: case Op::Add: case Op::Sub: case Op::Mul:
    case Op::Relu: case Op::Tanh: case Op::Sigmoid: case Op::Gelu: case Op::GeluTanh: case Op::Where:
      return true;
    default:
      return false;
  }
}

bool is_head(Op op) { return op == Op::Matmul || op == Op::Conv2d || op == Op::MaxPool2dBackward; }

// The value of a Full node as the consumer computes with it.
std::optional<double> constant_value(const Node& f) {
  if (f.op != Op::Full) return std::nullopt;
  if (f.dtype == DType::F32) return double(float(f.attrs.value.f));
  if (f.dtype == DType::F64) return f.attrs.value.f;
  if (f.dtype == DType::I32 || f.dtype == DType::I64) return double(f.attrs.value.i);
  return std::nullopt;
}

PostOp post(int32_t kind, double alpha = 0, double beta = 0, int32_t input = -1) {
  return {.kind = kind, .input = input, .alpha = alpha, .beta = beta};
}

// Whether tensor `o` can be an operand of head's call (broadcast to the output).
bool operand_fits(const Node& o, const Node& head, const std::vector<NodePtr>& operands) {
  if (operands.size() >= kMaxOperands) return false;
  if (o.dtype != head.dtype || o.device != head.device || o.shape.rank() > head.shape.rank()) return false;
  return !(o.is_pending() && o.op == Op::Full);  // folded constants have no buffer
}

// The post-op that computes consumer c from the chain's value `cur`, or nullopt. An added tensor
// operand is appended to `operands` (its input index: first_operand + position); a node that only
// c reads and that the post-op computes too (the mask's comparison) is appended to `side`.
std::optional<PostOp> match(const Node& c, const Node* cur, const Node& head, std::vector<NodePtr>& operands,
                            int32_t first_operand, std::vector<Node*>& side) {
  switch (c.op) {
    case Op::Relu: return post(EMBER_POST_RELU);
    case Op::Tanh: return post(EMBER_POST_TANH);
    case Op::Sigmoid: return post(EMBER_POST_SIGMOID);
    case Op::Gelu: return post(EMBER_POST_GELU_ERF);
    case Op::GeluTanh: return post(EMBER_POST_GELU_TANH);
    case Op::Add: case Op::Sub: case Op::Mul: {
      if (c.inputs.size() != 2) return std::nullopt;
      const int self = c.inputs[0].get() == cur ? 0 : 1;
      const NodePtr& other = c.inputs[size_t(1 - self)];
      if (other.get() == cur) return std::nullopt;
      if (std::optional<double> v = constant_value(*other)) {
        // alpha * y + beta. x * c has beta -0, not +0: y * c + (-0) is y * c for every y, -0
        // included, while + (+0) would turn a -0 product into +0 (x + 0 is (1, +0): that one does).
        if (c.op == Op::Add) return post(EMBER_POST_LINEAR, 1.0, *v);
        if (c.op == Op::Mul) return post(EMBER_POST_LINEAR, *v, -0.0);
        if (self == 0) return post(EMBER_POST_LINEAR, 1.0, -*v);  // x - c
        return std::nullopt;
      }
      // A tensor operand (broadcast to the output: a bias, an inference batch norm's per-channel
      // scale and shift, a residual).
      if (c.op == Op::Sub || !operand_fits(*other, head, operands)) return std::nullopt;
      operands.push_back(other);
      return post(c.op == Op::Add ? EMBER_POST_ADD : EMBER_POST_MUL, 0, 0, first_operand + int32_t(operands.size()) - 1);
    }
    case Op::Where: {
      // where(gt(o, 0), cur, +0): ReLU's gradient from its output o (elementwise_ops.def). Only
      // after a pooling gradient, the one head whose backends take this post-op.
      if (head.op != Op::MaxPool2dBackward || c.inputs.size() != 3 || c.inputs[1].get() != cur) return std::nullopt;
      const std::optional<double> zero = constant_value(*c.inputs[2]);
      if (!zero || *zero != 0 || std::signbit(*zero)) return std::nullopt;
      const NodePtr& cond = c.inputs[0];
      // The comparison leaves with the chain: nothing else may read it.
      if (cond->op != Op::Gt || cond.use_count() != 1 || !cond->is_pending() || cond->inputs.size() != 2)
        return std::nullopt;
      const std::optional<double> threshold = constant_value(*cond->inputs[1]);
      const NodePtr& o = cond->inputs[0];
      if (!threshold || *threshold != 0 || o.get() == cur || !operand_fits(*o, head, operands)) return std::nullopt;
      operands.push_back(o);
      side.push_back(cond.get());
      return post(EMBER_POST_MASK_POSITIVE, 0, 0, first_operand + int32_t(operands.size()) - 1);
    }
    default:
      return std::nullopt;
  }
}

// Otherwise the product and its epilogue stay separate kernels (a fallback, not an error).
bool backend_supports(Device d, int32_t code, DType dtype) {
  return Backend::get(d.kind).supports(d.index, EMBER_SUPPORT_LIBRARY, code, int32_t(dtype));
}

// Whether every tensor of the fused call (the product's inputs, the operands, the output) fits in
// one of the device's bindings, counted as contiguous (`numel` elements).
bool fits_one_binding(const Node& head, const std::vector<NodePtr>& operands, const Node& out) {
  const uint64_t limit = Backend::get(head.device.kind).max_binding(head.device.index);
  if (limit == UINT64_MAX) return true;
  auto fits = [&](const Node& x) { return double(x.shape.numel()) * double(dtype_size(x.dtype)) <= double(limit); };
  bool ok = fits(out);
  for (const NodePtr& in : head.inputs) ok = ok && fits(*in);
  for (const NodePtr& o : operands) ok = ok && fits(*o);
  return ok;
}

}  // namespace

bool epilogue_folding_enabled() { return epilogue_flag(); }
void set_epilogue_folding_enabled(bool on) { epilogue_flag() = on; }

void fold_epilogues(std::vector<Node*>& order, const std::vector<Node*>& roots) {
  if (!fusion_enabled() || !epilogue_flag()) return;
  // Cheap exit for the graphs without contractions (most realizations of a training step's
  // optimizer and loss).
  if (std::none_of(order.begin(), order.end(), [](Node* n) { return is_head(n->op); })) return;
  (void)roots;  // a root is held by the caller's handle: its use count excludes it below
  // The consumer of each single-use value: use_count() == 1 means the consumer's input slot is
  // the only reference (no user handle, nothing saved for backward, not a root).
  // (Tables kept by the thread: this runs on every realization with a contraction.)
  thread_local NodeTable<Node*> consumer;  // nullptr: none (any more)
  thread_local NodeTable<char> removed;     // absorbed (and destroyed) nodes: never dereferenced again
  consumer.clear();
  removed.clear();
  for (Node* n : order)
    for (const NodePtr& in : n->inputs)
      if (in.use_count() == 1 && chain_op(in->op) && in->is_pending()) consumer[in.get()] = n;
  for (Node* head : order) {
    if (removed.find(head)) continue;
    if (!is_head(head->op)) continue;
    if (head->dtype != DType::F32 && head->dtype != DType::F64) continue;
    const bool conv = head->op == Op::Conv2d, pool = head->op == Op::MaxPool2dBackward;
    const int32_t code = conv ? EMBER_LIB_CONV2D_EPILOGUE
                         : pool ? EMBER_LIB_MAX_POOL2D_BACKWARD_EPILOGUE
                                : EMBER_LIB_MATMUL_EPILOGUE;
    const int32_t first_operand = int32_t(head->inputs.size());
    std::vector<PostOp> ops;
    std::vector<NodePtr> operands;
    std::vector<Node*> absorbed, side;
    Node* cur = head;
    while (ops.size() < EMBER_MAX_POST_OPS) {
      Node* const* found = consumer.find(cur);
      if (!found || !*found || removed.find(*found)) break;
      Node* c = *found;
      if (c->device != head->device || c->dtype != head->dtype || c->shape != head->shape || !c->is_pending()) break;
      std::optional<PostOp> op = match(*c, cur, *head, operands, first_operand, side);
      if (!op) break;
      ops.push_back(*op);
      absorbed.push_back(cur);
      cur = c;
    }
    if (ops.empty() || !backend_supports(head->device, code, head->dtype)) continue;
    // A device that cannot bind one of the tensors whole runs the plain product (which it may
    // split, as Vulkan splits matmuls) and the post-ops as a kernel, not the fused call on the host.
    if (!fits_one_binding(*head, operands, *cur)) continue;
    EpilogueAttrs epilogue{.has_bias = conv && head->inputs.size() == 3, .ops = std::move(ops)};
    if (conv) epilogue.conv = head->attrs.get<Conv2dOptions>();
    if (pool) epilogue.pool = head->attrs.get<Pool2dOptions>();
    if (log_fusion()) {
      std::string chain = op_name(head->op);
      for (Node* a : absorbed)
        if (a != head) chain += std::string(" ") + op_name(a->op);
      std::cerr << "[ember fusion] epilogue: " << chain << " " << op_name(cur->op)
                << " folded into one library call at " << cur->where() << "\n";
    }
    std::vector<NodePtr> inputs = head->inputs;
    inputs.insert(inputs.end(), operands.begin(), operands.end());
    for (Node* a : absorbed) removed.insert(a);
    for (Node* a : side) removed.insert(a);
    for (const NodePtr& o : operands)  // now an input of the rewritten node
      if (Node** c = consumer.find(o.get())) *c = nullptr;
    cur->op = conv ? Op::Conv2dEpilogue : pool ? Op::MaxPool2dBackwardEpilogue : Op::MatmulEpilogue;
    cur->attrs = OpAttrs{.params = std::move(epilogue)};
    cur->inputs = std::move(inputs);  // releases the absorbed chain (nothing else holds it)
  }
  if (removed.size() > 0)
    order.erase(std::remove_if(order.begin(), order.end(), [&](Node* n) { return removed.find(n) != nullptr; }),
                order.end());
}

ember_conv_attrs conv_call_attrs(const Conv2dOptions& c) {
  return {{c.stride.h, c.stride.w}, {c.padding.top, c.padding.left}, {c.padding.bottom, c.padding.right},
          {c.dilation.h, c.dilation.w}, c.groups};
}

ember_pool_attrs pool_call_attrs(const Pool2dOptions& p) {
  return {{p.kernel.h, p.kernel.w}, {p.stride.h, p.stride.w}, {p.padding.h, p.padding.w},
          {p.padding.h, p.padding.w}, int32_t(p.count_include_pad)};
}

ember_epilogue_attrs epilogue_attrs(const Node& n) {
  const EpilogueAttrs& e = n.attrs.get<EpilogueAttrs>();
  ember_epilogue_attrs a{};
  a.has_bias = int32_t(e.has_bias);
  if (n.op == Op::Conv2dEpilogue) a.conv = conv_call_attrs(e.conv);
  if (n.op == Op::MaxPool2dBackwardEpilogue) a.pool = pool_call_attrs(e.pool);
  a.n_ops = int32_t(e.ops.size());
  if (a.n_ops < 1 || a.n_ops > EMBER_MAX_POST_OPS)
    throw Error(fmt::format("{}: an epilogue of {} post-ops (1 to {})", n.where(), a.n_ops, EMBER_MAX_POST_OPS));
  for (int k = 0; k < a.n_ops; ++k) {
    const PostOp& p = e.ops[size_t(k)];
    a.ops[k].kind = p.kind;
    a.ops[k].input = p.input;
    a.ops[k].alpha = p.alpha;
    a.ops[k].beta = p.beta;
  }
  return a;
}

void run_epilogue(Node& n) {
  const bool conv = n.op == Op::Conv2dEpilogue, pool = n.op == Op::MaxPool2dBackwardEpilogue;
  const ember_epilogue_attrs attrs = epilogue_attrs(n);
  n.view = alloc_contiguous(n);
  if (n.shape.numel() == 0) return;
  const int r = n.shape.rank();
  // A node's view read at every point of `want` (numpy broadcasting, stride 0 on broadcast dims).
  auto desc = [&](const Node& x, const View& v, const Shape& want) {
    ember_tensor_desc d{};
    d.buffer = v.buffer ? v.buffer->handle : nullptr;
    d.offset = v.offset;
    d.dtype = int32_t(x.dtype);
    d.rank = want.rank();
    std::vector<int64_t> s = broadcast_strides(x.shape, v.strides, want);
    for (int i = 0; i < d.rank; ++i) {
      d.shape[i] = want[i];
      d.strides[i] = s[size_t(i)];
    }
    return d;
  };
  const size_t n_base = conv ? size_t(2 + attrs.has_bias) : 2;
  std::vector<ember_tensor_desc> ins;
  if (conv || pool) {  // each input as it is (pool: dy, x)
    for (size_t k = 0; k < n_base; ++k) ins.push_back(desc(*n.inputs[k], n.inputs[k]->view, n.inputs[k]->shape));
  } else {  // as run_matmul: a [..., M, K] and b [..., K, N] with the batch dims broadcast to out's
    const Node& a = *n.inputs[0];
    const int64_t K = a.shape[a.shape.rank() - 1];
    Shape wa = n.shape, wb = n.shape;
    wa[r - 1] = K;
    wb[r - 2] = K;
    ins.push_back(desc(a, a.view, wa));
    ins.push_back(desc(*n.inputs[1], n.inputs[1]->view, wb));
  }
  for (size_t k = n_base; k < n.inputs.size(); ++k) ins.push_back(desc(*n.inputs[k], n.inputs[k]->view, n.shape));
  ember_tensor_desc out = desc(n, n.view, n.shape);
  std::vector<std::shared_ptr<DeviceBuffer>> buffers{n.view.buffer};
  for (const NodePtr& in : n.inputs) buffers.push_back(in->view.buffer);
  try {
    // Through the launch checks: a tensor the device cannot bind takes the host fallback.
    const int32_t code = conv ? EMBER_LIB_CONV2D_EPILOGUE
                         : pool ? EMBER_LIB_MAX_POOL2D_BACKWARD_EPILOGUE
                                : EMBER_LIB_MATMUL_EPILOGUE;
    library_call(n.device, op_name(n.op), code, ins.data(), int(ins.size()), &out, 1, &attrs, buffers);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", n.where(), e.what()));
  }
}

}  // namespace ember
