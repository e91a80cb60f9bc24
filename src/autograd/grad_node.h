// GradNode: one step of backward history. Arrays that require grad point to the GradNode that
// made them (leaves to a leaf node that is their identity in Gradients). A GradNode points to the
// GradNodes of its inputs and saves only what its op's backward rule needs. It never points back
// to its own output's GradNode, so no reference cycles form: the output is saved as a bare node.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "ember/autograd.h"
#include "graph/node.h"

namespace ember::autograd {

struct GradNode : std::enable_shared_from_this<GradNode> {
  struct Edge {
    std::shared_ptr<GradNode> fn;  // null: this input needs no gradient
    Shape shape;                   // the input's shape and dtype, to sum broadcast gradients
    DType dtype = DType::F32;      // back and convert them
    int32_t output = 0;            // which output of `fn` this input is (an OutputOf's: >= 1)
  };

  Op op = Op::FromData;
  OpAttrs attrs;
  Loc loc;
  bool is_leaf = false;
  std::vector<Edge> inputs;

  // Saved for the rule: inputs (with their history, for higher-order gradients) and the output
  // (data only; its history is this node, reattached when a rule needs it).
  std::vector<Array> saved_inputs;  // one per input; undefined when not saved
  NodePtr saved_output;
  Shape out_shape;
  DType out_dtype = DType::F32;
  // A multi-output op's outputs after the first (graph/node.h): its rule receives their
  // gradients too (apply_rule's `extra_grads`).
  std::vector<OutputSpec> extra_outputs;
  bool released = false;  // saved values dropped after a backward pass without retain_graph
  // Guards the saved values and `released`: backward passes in several threads may run through
  // one shared history, and one of them may release it while another applies its rule.
  std::mutex mutex;

  // User-written rules (custom functions, checkpoints) instead of an op-table rule.
  std::function<std::vector<Array>(GradNode& self, const Array& grad_output)> custom;
  std::vector<Array> custom_saved;

  // The output with this node as its history (for rules that use the output).
  Array output() { return Array(saved_output, shared_from_this()); }
  void release() {
    std::lock_guard lock(mutex);
    saved_inputs.clear();
    saved_output.reset();
    custom_saved.clear();
    released = true;
  }
};

// Creates the GradNode of a new op when one of its inputs requires grad and grad mode is on;
// returns null when no gradient flows (grad mode off, no input requires grad, or the op has no
// gradient, e.g. comparisons and argmax).
std::shared_ptr<GradNode> record(Op op, const OpAttrs& attrs, const std::vector<Array>& inputs,
                                 const NodePtr& output, Loc loc);

// A fresh leaf identity.
std::shared_ptr<GradNode> make_leaf(const Shape& shape, DType dtype);

// The op-table rule of `node`: one gradient per input (undefined where none), not yet summed
// back to the input shapes. A multi-output op's rule also gets the gradients of its other
// outputs, `extra_grads` (one per GradNode::extra_outputs); there any gradient, grad_output
// included, may be undefined (no gradient reached that output: zero).
std::vector<Array> apply_rule(GradNode& node, const Array& grad_output, const std::vector<Array>& extra_grads = {});

// Rules of the library-backed ops (src/autograd/rules_library.cpp).
std::vector<Array> library_rule(GradNode& node, const Array& grad_output, const std::vector<Array>& extra_grads);

// What a rule saves from the forward pass.
enum class Saves { None, X, Out, XY, XYOut, XYZ, All };
Saves saves_of(Op op);
// True when the op has a gradient for at least one input.
bool is_differentiable(Op op);
// True for the piecewise-constant ops (floor, sign, ...): differentiable, with zero gradients
// (their table column is `zero_gradient(g)`), as PyTorch gives.
bool has_zero_gradient(Op op);

}  // namespace ember::autograd
