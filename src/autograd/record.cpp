// Recording: thread-local grad mode, leaf identities, and the creation of GradNodes with exactly
// what each op's backward rule needs saved.
#include <fmt/format.h>

#include "autograd/grad_node.h"

namespace ember {

namespace {
thread_local bool t_grad_enabled = true;
}  // namespace

bool grad_enabled() { return t_grad_enabled; }
void set_grad_enabled(bool on) { t_grad_enabled = on; }

namespace autograd {

Saves saves_of(Op op) {
  switch (op) {
#define EMBER_UNARY(Name, fn, rule, expr, saves, ...) \
  case Op::Name: return Saves::saves;
#define EMBER_BINARY(Name, fn, rule, expr, saves, ...) \
  case Op::Name: return Saves::saves;
#define EMBER_TERNARY(Name, fn, rule, expr, saves, ...) \
  case Op::Name: return Saves::saves;
#define EMBER_REDUCE(Name, fn, rule, accumulate, finish, saves, grad) \
  case Op::Name: return Saves::saves;
#define EMBER_OTHER(Name, fn, kind, attrs, saves, grad) \
  case Op::Name: return Saves::saves;
#include "op_table/ops.def"
    default: return Saves::None;
  }
}

namespace {
// An elementwise gradient column written as `{}` means "no gradient for this input".
constexpr bool no_gradient(const char* column) { return column[0] == '{' && column[1] == '}' && column[2] == 0; }
constexpr bool Yes = true, No = false;
}  // namespace

bool is_differentiable(Op op) {
  switch (op) {
#define EMBER_UNARY(Name, fn, rule, expr, saves, dx) \
  case Op::Name: return !no_gradient(#dx);
#define EMBER_BINARY(Name, fn, rule, expr, saves, dx, dy) \
  case Op::Name: return !no_gradient(#dx) || !no_gradient(#dy);
#define EMBER_TERNARY(Name, fn, rule, expr, saves, dx, dy, dz) \
  case Op::Name: return !no_gradient(#dx) || !no_gradient(#dy) || !no_gradient(#dz);
#define EMBER_REDUCE(Name, fn, rule, accumulate, finish, saves, grad) \
  case Op::Name: return grad;
#define EMBER_OTHER(Name, fn, kind, attrs, saves, grad) \
  case Op::Name: return grad;
#include "op_table/ops.def"
    default: return false;  // generators
  }
}

namespace {
constexpr bool is_zero_gradient(const char* column) {
  const char* want = "zero_gradient(g)";
  for (; *want; ++want, ++column)
    if (*column != *want) return false;
  return *column == 0;
}
}  // namespace

bool has_zero_gradient(Op op) {
  switch (op) {
#define EMBER_UNARY(Name, fn, rule, expr, saves, dx) \
  case Op::Name: return is_zero_gradient(#dx);
#define EMBER_BINARY(Name, fn, rule, expr, saves, dx, dy) \
  case Op::Name: return is_zero_gradient(#dx) && is_zero_gradient(#dy);
#include "op_table/ops.def"
    default: return false;
  }
}

std::shared_ptr<GradNode> make_leaf(const Shape& shape, DType dtype) {
  auto leaf = std::make_shared<GradNode>();
  leaf->is_leaf = true;
  leaf->out_shape = shape;
  leaf->out_dtype = dtype;
  return leaf;
}

std::shared_ptr<GradNode> record(Op op, const OpAttrs& attrs, const std::vector<Array>& inputs,
                                 const NodePtr& output, Loc loc) {
  if (!is_differentiable(op)) return nullptr;
  auto node = std::make_shared<GradNode>();
  node->op = op;
  node->attrs = attrs;
  node->loc = loc;
  node->out_shape = output->shape;
  node->out_dtype = output->dtype;
  bool any = false;
  for (const Array& in : inputs) {
    // Only floating values carry gradients (an integer index input never does).
    bool flows = in.requires_grad() && is_floating(in.dtype());
    node->inputs.push_back({flows ? in.grad_node() : nullptr, in.shape(), in.dtype()});
    any |= flows;
  }
  if (!any || !is_floating(output->dtype)) return nullptr;
  if (op == Op::OutputOf) {  // the gradient goes to that output of the input's node
    GradNode::Edge& e = node->inputs[0];
    e.shape = output->shape;
    e.dtype = output->dtype;
    e.output = int32_t(attrs.get<OutputAttrs>().index);
  }
  for (const Node::ExtraOutput& e : output->extra_outputs) node->extra_outputs.push_back(e.spec);
  Saves s = saves_of(op);
  auto save_input = [&](size_t i) {
    if (node->saved_inputs.size() < inputs.size()) node->saved_inputs.resize(inputs.size());
    if (i < inputs.size()) node->saved_inputs[i] = inputs[i];
  };
  switch (s) {
    case Saves::None: break;
    case Saves::X: save_input(0); break;
    case Saves::Out: node->saved_output = output; break;
    case Saves::XY: save_input(0); save_input(1); break;
    case Saves::XYOut: save_input(0); save_input(1); node->saved_output = output; break;
    case Saves::XYZ: save_input(0); save_input(1); save_input(2); break;
    case Saves::All:
      for (size_t i = 0; i < inputs.size(); ++i) save_input(i);
      node->saved_output = output;
      break;
  }
  return node;
}

}  // namespace autograd

Array Array::require_grad(bool on) const {
  if (!defined()) throw Error("require_grad: the tensor is empty (default-constructed)");
  if (!on) return detach();
  if (!is_floating(dtype()))
    throw Error(fmt::format("require_grad: only floating tensors can require grad, this one is {}",
                            dtype_name(dtype())));
  if (grad_ && grad_->is_leaf) return *this;
  return Array(node_, autograd::make_leaf(shape(), dtype()));
}

}  // namespace ember
