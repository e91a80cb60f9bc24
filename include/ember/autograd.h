// Reverse-mode automatic differentiation. History hangs off the tensors: an op records a backward
// node when one of its inputs requires grad and grad mode is on in the calling thread. Backward
// rules are written with ordinary ops (src/op_table/ops.def and src/autograd/rules.cpp), so gradients
// are lazy arrays computed by the same scheduler as the forward pass.
//
//   Array w = normal({3, 2}).require_grad();
//   Array loss = sum(tanh(matmul(x, w)));
//   Gradients grads = loss.backward();
//   Array dw = w.grad(grads);
#pragma once

#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "ember/array.h"

namespace ember {

// Gradients of one or more backward passes, keyed by the leaf tensors (require_grad handles).
class Gradients {
 public:
  // The gradient of `leaf`, or an undefined Array if the pass did not reach it.
  Array get(const Array& leaf) const;
  bool contains(const Array& leaf) const;
  // Removes and returns the gradient of `leaf` (undefined if absent).
  Array remove(const Array& leaf);
  size_t size() const { return grads_.size(); }
  // Adds `grad` to the gradient of `leaf` (creating it if absent).
  void accumulate(const Array& leaf, const Array& grad);
  // Returns the leaf's gradient after adding.
  const Array& accumulate(const std::shared_ptr<autograd::GradNode>& leaf, const Array& grad);
  // Adds every gradient of `other` (gradient accumulation over several passes).
  Gradients& operator+=(const Gradients& other);
  // All gradients, e.g. to realize them together.
  std::vector<Array> arrays() const;

 private:
  struct Entry {
    std::shared_ptr<autograd::GradNode> leaf{};  // keeps the key alive
    Array grad{};
  };
  std::unordered_map<const autograd::GradNode*, Entry> grads_;
};

// Grad mode of the calling thread (on by default).
bool grad_enabled();
void set_grad_enabled(bool on);

// Disables recording in this thread for its lifetime.
class NoGradGuard {
 public:
  NoGradGuard() : previous_(grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

template <class F>
auto no_grad(F&& fn) {
  NoGradGuard guard;
  return fn();
}

// Gradients of `output` (one element, or weighted by `grad_output`) with respect to `inputs`,
// which may be leaves or intermediate results. With create_graph the results have history, so
// they can be differentiated again (second derivatives). As torch.autograd.grad, an input that
// `output` does not depend on throws an Error naming its index; with opts.allow_unused its
// gradient is an undefined Array (PyTorch's None), with opts.materialize_grads zeros of its shape.
// Piecewise-constant ops (floor, ceil, round, trunc, sign, floor_div) count as a dependence: their
// gradient is zero, as in PyTorch.
std::vector<Array> grad(const Array& output, const std::vector<Array>& inputs, BackwardOptions opts = {},
                        const Array& grad_output = Array());

// A differentiable operation with a user-written backward: `forward` runs without recording,
// `backward` gets the inputs, the output and the output's gradient and returns one gradient per
// input (an undefined Array for inputs without one). The escape hatch for fused or library ops.
struct CustomFunction {
  std::function<Array(const std::vector<Array>& inputs)> forward;
  std::function<std::vector<Array>(const std::vector<Array>& inputs, const Array& output, const Array& grad_output)>
     backward{};
  const char* name = "custom";
};
Array apply(const CustomFunction& fn, const std::vector<Array>& inputs, Loc loc = Loc::current());

// Gradient checkpointing: computes fn(inputs) without keeping its intermediates; the backward
// pass runs fn again to get them. Trades compute for memory.
Array checkpoint(const std::function<Array(const std::vector<Array>&)>& fn, const std::vector<Array>& inputs,
                 Loc loc = Loc::current());

}  // namespace ember
