// User-defined differentiable functions, gradient checkpointing and composite ops with a
// closed-form backward (composite.h), all as GradNodes with a custom rule instead of an op-table
// rule.
#include <fmt/format.h>

#include "autograd/composite.h"
#include "autograd/grad_node.h"

namespace ember {

using autograd::GradNode;

namespace {

// A GradNode over `inputs` (undefined ones get no gradient) for a custom rule; null if no input
// needs a gradient.
std::shared_ptr<GradNode> custom_node(const std::vector<Array>& inputs, const Array& output, Loc loc) {
  auto node = std::make_shared<GradNode>();
  node->loc = loc;
  node->out_shape = output.shape();
  node->out_dtype = output.dtype();
  bool any = false;
  for (const Array& in : inputs) {
    const bool flows = in.defined() && in.requires_grad() && is_floating(in.dtype());
    node->inputs.push_back(
        {flows ? in.grad_node() : nullptr, in.defined() ? in.shape() : Shape{}, in.defined() ? in.dtype() : DType::F32});
    any |= flows;
  }
  return any && grad_enabled() ? node : nullptr;
}

}  // namespace

Array apply(const CustomFunction& fn, const std::vector<Array>& inputs, Loc loc) {
  if (!fn.forward || !fn.backward) throw Error(fmt::format("{}: forward and backward must both be set", fn.name));
  std::vector<Array> detached;
  for (const Array& in : inputs) detached.push_back(in.detach());
  Array out = no_grad([&] { return fn.forward(detached); }).detach();
  auto node = custom_node(inputs, out, loc);
  if (!node) return out;
  node->custom_saved = detached;
  node->saved_output = out.node();
  std::string name = fn.name;
  auto backward = fn.backward;
  node->custom = [backward, name](GradNode& self, const Array& g) {
    std::vector<Array> grads = backward(self.custom_saved, Array(self.saved_output), g);
    if (grads.size() != self.inputs.size())
      throw Error(fmt::format("{}: backward returned {} gradients for {} inputs", name, grads.size(), self.inputs.size()));
    for (size_t i = 0; i < grads.size(); ++i)
      if (grads[i].defined() && self.inputs[i].fn && grads[i].shape() != self.inputs[i].shape)
        throw Error(fmt::format("{}: gradient {} has shape {}, the input has {}", name, i, grads[i].shape().str(),
                                self.inputs[i].shape.str()));
    return grads;
  };
  return Array(out.node(), node);
}

Array checkpoint(const std::function<Array(const std::vector<Array>&)>& fn, const std::vector<Array>& inputs,
                 Loc loc) {
  std::vector<Array> detached;
  for (const Array& in : inputs) detached.push_back(in.detach());
  Array out = no_grad([&] { return fn(detached); });
  auto node = custom_node(inputs, out, loc);
  if (!node) return out;
  node->custom_saved = detached;  // only the inputs: the intermediates are recomputed
  node->custom = [fn](GradNode& self, const Array& g) {
    // Run fn again with recording on, from fresh leaves, and differentiate that.
    std::vector<Array> leaves;
    for (size_t i = 0; i < self.custom_saved.size(); ++i)
      leaves.push_back(self.inputs[i].fn ? self.custom_saved[i].require_grad() : self.custom_saved[i]);
    set_grad_enabled(true);
    Array again = fn(leaves);
    set_grad_enabled(false);
    std::vector<Array> wanted, grads(leaves.size());
    std::vector<size_t> where;
    for (size_t i = 0; i < leaves.size(); ++i)
      if (leaves[i].requires_grad()) {
        wanted.push_back(leaves[i]);
        where.push_back(i);
      }
    // An input fn does not use gets no gradient (undefined: the engine skips it).
    std::vector<Array> got = grad(again, wanted, {.allow_unused = true}, g);
    for (size_t k = 0; k < where.size(); ++k) grads[where[k]] = got[k];
    return grads;
  };
  return Array(out.node(), node);
}

}  // namespace ember

namespace ember::autograd {

Array attach_composite(const std::vector<Array>& inputs, const Array& output, std::vector<Array> saved, CompositeRule rule,
                       Loc loc) {
  auto node = custom_node(inputs, output, loc);
  if (!node) return output;
  node->saved_inputs = inputs;  // with their history: the create_graph path records on them
  node->custom_saved = std::move(saved);
  node->saved_output = output.node();
  node->custom = [rule = std::move(rule)](GradNode& self, const Array& g) -> std::vector<Array> {
    if (!grad_enabled()) return rule.first_order(self.custom_saved, g);
    // create_graph: the composition again, recorded, differentiated with its history kept.
    Array again = rule.composed(self.saved_inputs);
    std::vector<Array> wanted, grads(self.inputs.size());
    std::vector<size_t> where;
    for (size_t i = 0; i < self.inputs.size(); ++i)
      if (self.inputs[i].fn) {
        wanted.push_back(self.saved_inputs[i]);
        where.push_back(i);
      }
    std::vector<Array> got = grad(again, wanted, {.create_graph = true, .allow_unused = true}, g);
    for (size_t k = 0; k < where.size(); ++k) grads[where[k]] = got[k];
    return grads;
  };
  return Array(output.node(), node);
}

}  // namespace ember::autograd
