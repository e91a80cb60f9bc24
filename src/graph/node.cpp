// Node construction, iterative destruction, and the creation-time evaluation policy.
#include "graph/node.h"

#include "autograd/grad_node.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <string>

namespace ember {

std::string format_location(const Loc& loc) {
  std::string file = loc.file_name();
  size_t slash = file.find_last_of('/');
  if (slash != std::string::npos) file = file.substr(slash + 1);
  return fmt::format("{}:{}", file, loc.line());
}

Node::Node(Op op_, OpAttrs attrs_, std::vector<NodePtr> inputs_, Shape shape_, DType dtype_,
           Device device_, Loc loc_)
    : op(op_), attrs(std::move(attrs_)), inputs(std::move(inputs_)), shape(std::move(shape_)),
      dtype(dtype_), device(device_), loc(loc_) {
  uint32_t d = 0;
  for (const auto& in : inputs)
    if (in->is_pending()) d = std::max(d, in->depth);
  depth = d + 1;
}

Node::~Node() {
  // Destroying a node whose only owner we are would destroy its inputs recursively; a chain of a
  // million nodes would overflow the stack. Take the inputs over and release them in a loop.
  std::vector<NodePtr> pending = std::move(inputs);
  while (!pending.empty()) {
    NodePtr n = std::move(pending.back());
    pending.pop_back();
    if (n && n.use_count() == 1) {
      for (auto& in : n->inputs) pending.push_back(std::move(in));
      n->inputs.clear();
    }
  }
}

std::string Node::where() const {
  return fmt::format("{} (at {})", op_name(op), format_location(loc));
}

RuntimePolicy& runtime_policy() {
  static RuntimePolicy policy = [] {
    RuntimePolicy p;
    if (const char* s = std::getenv("EMBER_SYNC")) p.eager = std::string(s) == "1";
    if (const char* s = std::getenv("EMBER_AUTO_EVAL_DEPTH")) p.auto_eval_depth = uint32_t(std::atoi(s));
    if (const char* s = std::getenv("EMBER_ASYNC")) p.async = std::string(s) != "0";
    return p;
  }();
  return policy;
}

Array make_array(Op op, OpAttrs attrs, const std::vector<Array>& inputs, Shape shape, DType dtype,
                 Device device, Loc loc) {
  std::vector<NodePtr> nodes;
  nodes.reserve(inputs.size());
  bool any_grad = false;
  for (const Array& a : inputs) {
    nodes.push_back(a.node());
    any_grad |= a.requires_grad();
  }
  auto node = std::make_shared<Node>(op, std::move(attrs), std::move(nodes), std::move(shape), dtype,
                                     device, loc);
  std::shared_ptr<autograd::GradNode> grad;
  if (any_grad && grad_enabled()) grad = autograd::record(op, node->attrs, inputs, node, loc);
  const RuntimePolicy& policy = runtime_policy();
  if (policy.eager)
    realize_and_wait({node});
  else if (policy.auto_eval_depth && node->depth > policy.auto_eval_depth)
    realize({node});
  return Array(std::move(node), std::move(grad));
}

Array make_ready_array(Op op, View view, Shape shape, DType dtype, Device device,
                       Loc loc) {
  auto node = std::make_shared<Node>(op, OpAttrs{}, std::vector<NodePtr>{}, std::move(shape), dtype,
                                     device, loc);
  node->view = std::move(view);
  node->depth = 0;
  node->state.store(Node::State::Ready, std::memory_order_release);
  return Array(std::move(node));
}

}  // namespace ember
