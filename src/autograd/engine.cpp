// The backward pass: orders the GradNodes reachable from the output (iteratively, so deep
// histories cannot overflow the stack), runs each rule once all gradients of its output have
// arrived, sums broadcast gradients back to the input shapes, and collects the gradients of
// leaves. Without retain_graph the saved tensors are released afterwards, which frees the
// forward pass's intermediates.
#include <fmt/format.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "autograd/grad_math.h"
#include "graph/pointer_table.h"
#include "ember/anomaly.h"
#include "ember/autocast.h"
#include "autograd/grad_node.h"

namespace ember {

using autograd::GradNode;

namespace {

// Sums `g` (a broadcast result) back to `shape`.
Array sum_to(const Array& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  int extra = g.rank() - shape.rank();
  std::vector<int> dims;
  for (int d = 0; d < g.rank(); ++d)
    if (d < extra || (shape[d - extra] == 1 && g.shape()[d] != 1)) dims.push_back(d);
  Array r = dims.empty() ? g : sum(g, dims, true);
  return reshape(r, shape);
}

// Reverse topological order of the GradNodes reachable from `root` (outputs before inputs).
std::vector<GradNode*> order_from(GradNode* root) {
  std::vector<GradNode*> post;
  thread_local PointerTable<GradNode, bool> seen;  // reused: backward runs every step
  seen.clear();
  struct Frame {
    GradNode* node;
    size_t next;
  };
  std::vector<Frame> stack{{root, 0}};
  seen[root] = true;
  while (!stack.empty()) {
    Frame& f = stack.back();
    if (f.next < f.node->inputs.size()) {
      GradNode* in = f.node->inputs[f.next++].fn.get();
      if (in && !seen[in]) {
        seen[in] = true;
        stack.push_back({in, 0});
      }
      continue;
    }
    post.push_back(f.node);
    stack.pop_back();
  }
  return {post.rbegin(), post.rend()};
}

// The gradient of a step-1 slice along one dim, kept as the piece it is until its input's
// gradient is needed: the pieces of one input (e.g. the gates an LSTM chunks from one product)
// then become one cat with zeros in the gaps, instead of a zero-padded copy of each piece summed.
struct SlicePiece {
  int dim;
  int64_t start;
  Array grad;
};

// The slice's dim and start if it is step 1 and cuts one dim only; -1 otherwise.
std::pair<int, int64_t> simple_slice(const GradNode& n, const Shape& in_shape, const Shape& g_shape) {
  int dim = -1;
  int64_t start = 0;
  const SliceAttrs& cut = n.attrs.get<SliceAttrs>();
  if (in_shape.rank() != g_shape.rank() || cut.step.size() != size_t(in_shape.rank())) return {-1, 0};
  for (int d = 0; d < in_shape.rank(); ++d) {
    if (cut.step[size_t(d)] != 1) return {-1, 0};
    if (g_shape[d] == in_shape[d]) continue;
    if (dim >= 0 || g_shape[d] == 0) return {-1, 0};
    dim = d;
    start = cut.start[size_t(d)];
  }
  return {dim, start};
}

// The gradient of an input of shape `shape` from its slices' pieces: one cat along their dim
// when they share it and do not overlap, else each zero-padded and summed.
Array merge_pieces(std::vector<SlicePiece>& pieces, const Shape& shape) {
  std::sort(pieces.begin(), pieces.end(), [](const SlicePiece& a, const SlicePiece& b) {
    return a.dim != b.dim ? a.dim < b.dim : a.start < b.start;
  });
  const int dim = pieces.front().dim;
  bool disjoint = true;
  for (size_t i = 0; i < pieces.size(); ++i) {
    disjoint = disjoint && pieces[i].dim == dim;
    if (i > 0) disjoint = disjoint && pieces[i].start >= pieces[i - 1].start + pieces[i - 1].grad.shape()[dim];
  }
  const Array& like = pieces.front().grad;
  if (!disjoint) {  // each piece padded on its own (a one-piece merge), then summed
    Array sum_all;
    for (const SlicePiece& p : pieces) {
      std::vector<SlicePiece> one = {p};
      Array full = merge_pieces(one, shape);
      sum_all = sum_all.defined() ? add(sum_all, full) : full;
    }
    return sum_all;
  }
  std::vector<Array> parts;
  int64_t at = 0;
  auto gap = [&](int64_t len) {
    Shape z = shape;
    z[dim] = len;
    parts.push_back(zeros(z, {like.dtype(), like.device()}));
  };
  for (const SlicePiece& p : pieces) {
    if (p.start > at) gap(p.start - at);
    parts.push_back(p.grad);
    at = p.start + p.grad.shape()[dim];
  }
  if (at < shape[dim]) gap(shape[dim] - at);
  return parts.size() == 1 ? parts[0] : cat(parts, dim);
}

void run_backward(const Array& output, const Array& grad_output, BackwardOptions opts, Gradients& into,
                  const std::vector<GradNode*>* targets, std::unordered_map<GradNode*, Array>* target_grads) {
  if (!output.defined()) throw Error("backward: the tensor is empty (default-constructed)");
  // Each op's backward keeps the dtypes its forward pass chose: no autocast policy applies again.
  AutocastGuard no_autocast({.enabled = false});
  if (!output.requires_grad())
    throw Error("backward: the tensor does not require grad (no input of it was made with require_grad())");
  Array seed = grad_output;
  if (!seed.defined()) {
    if (output.numel() != 1)
      throw Error(fmt::format("backward: the output has shape {}; pass a gradient of that shape or reduce it "
                              "to one element first",
                              output.shape().str()));
    seed = ones(output.shape(), {output.dtype(), output.device()});
  } else if (seed.shape() != output.shape()) {
    throw Error(fmt::format("backward: gradient shape {} does not match output shape {}", seed.shape().str(),
                            output.shape().str()));
  }

  bool previous = grad_enabled();
  set_grad_enabled(opts.create_graph);
  struct Restore {
    bool on;
    ~Restore() { set_grad_enabled(on); }
  } restore{previous};

  GradNode* root = output.grad_node().get();
  std::vector<GradNode*> order = order_from(root);
  // The gradient reaching each node so far, by its place in `order` (not a map keyed by node:
  // one allocation instead of one per node).
  PointerTable<GradNode, int> position;
  position.reserve(order.size());
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = int(i);
  std::vector<Array> pending(order.size());
  auto pending_of = [&](GradNode* n) -> Array& {
    const int* i = position.find(n);
    if (!i) throw Error(fmt::format("internal error: backward reached {} outside its order", op_name(n->op)));
    return pending[size_t(*i)];
  };
  std::unordered_map<GradNode*, std::vector<SlicePiece>> pieces;  // slice gradients not yet merged
  std::unordered_map<GradNode*, Shape> piece_shape;
  // Gradients of multi-output nodes' outputs after the first (Edge::output >= 1).
  std::unordered_map<GradNode*, std::vector<Array>> extra_pending;
  pending_of(root) = seed;
  for (size_t at = 0; at < order.size(); ++at) {
    GradNode* n = order[at];
    auto pit = pieces.empty() ? pieces.end() : pieces.find(n);
    std::vector<Array> extra_grads;
    if (!extra_pending.empty()) {
      if (auto eit = extra_pending.find(n); eit != extra_pending.end()) {
        extra_grads = std::move(eit->second);
        extra_pending.erase(eit);
      }
    }
    if (!pending[at].defined() && pit == pieces.end() && extra_grads.empty()) continue;  // no gradient reached it
    Array g = std::move(pending[at]);
    pending[at] = Array();
    if (pit != pieces.end()) {
      Array merged = merge_pieces(pit->second, piece_shape.at(n));
      g = g.defined() ? add(g, merged) : merged;
      pieces.erase(pit);
    }
    if (targets && g.defined()) {  // (undefined: only another output of a multi-output node got one)
      for (GradNode* t : *targets)
        if (t == n) {
          Array& slot = (*target_grads)[n];
          slot = slot.defined() ? add(slot, g) : g;
        }
    }
    if (n->is_leaf) {
      if (!targets) {
        // Final here: every node that feeds it comes earlier in `order`.
        const Array& total = into.accumulate(n->shared_from_this(), g);
        if (opts.leaf_gradient_ready) opts.leaf_gradient_ready(n, total);
      }
      continue;
    }
    if (n->op == Op::Slice && n->inputs.size() == 1 && n->inputs[0].fn && n->inputs[0].output == 0 && g.defined() &&
        g.dtype() == n->inputs[0].dtype) {
      const GradNode::Edge& e = n->inputs[0];
      auto [dim, start] = simple_slice(*n, e.shape, g.shape());
      if (dim >= 0) {
        pieces[e.fn.get()].push_back({dim, start, g});
        piece_shape.emplace(e.fn.get(), e.shape);
        continue;
      }
    }
    // With anomaly detection on, the nodes made for this step (the rule, the sums back to the
    // input shapes) say whose backward they are: their own lines are in Ember's rules.
    std::optional<BackwardOrigin> origin;
    if (detect_anomaly_enabled()) origin.emplace(n->custom ? BackwardOrigin::kCustomFunction : op_name(n->op), n->loc);
    std::vector<Array> grads;
    {
      // Another thread's backward through this shared history may release it meanwhile.
      std::lock_guard lock(n->mutex);
      if (n->released)
        throw Error(fmt::format("backward: the graph through {} (created at {}) was already used by a backward "
                                "pass; pass retain_graph = true to the first one to run backward twice",
                                op_name(n->op), format_location(n->loc)));
      if (!n->extra_outputs.empty()) extra_grads.resize(n->extra_outputs.size());
      grads = autograd::apply_rule(*n, g, extra_grads);
    }
    for (size_t i = 0; i < n->inputs.size() && i < grads.size(); ++i) {
      const GradNode::Edge& e = n->inputs[i];
      if (!e.fn || !grads[i].defined()) continue;
      Array gi = cast(sum_to(grads[i], e.shape), e.dtype);
      Array* slot = nullptr;
      if (e.output == 0) {
        slot = &pending_of(e.fn.get());
      } else {
        std::vector<Array>& extra = extra_pending[e.fn.get()];
        if (e.fn->extra_outputs.size() < size_t(e.output))
          throw Error(fmt::format("internal error: backward routed a gradient to output {} of {}", e.output,
                                  op_name(e.fn->op)));
        extra.resize(e.fn->extra_outputs.size());
        slot = &extra[size_t(e.output - 1)];
      }
      *slot = slot->defined() ? add(*slot, gi) : gi;
    }
  }
  if (!opts.retain_graph && !opts.create_graph)  // a recorded backward may be differentiated again
    for (GradNode* n : order)
      if (!n->is_leaf) n->release();
}

}  // namespace

// ---- Gradients -------------------------------------------------------------------------------
Array Gradients::get(const Array& leaf) const {
  auto it = grads_.find(leaf.grad_node().get());
  return it == grads_.end() ? Array() : it->second.grad;
}
bool Gradients::contains(const Array& leaf) const { return grads_.count(leaf.grad_node().get()) > 0; }
Array Gradients::remove(const Array& leaf) {
  auto it = grads_.find(leaf.grad_node().get());
  if (it == grads_.end()) return Array();
  Array g = it->second.grad;
  grads_.erase(it);
  return g;
}
const Array& Gradients::accumulate(const std::shared_ptr<GradNode>& leaf, const Array& grad) {
  Entry& e = grads_[leaf.get()];
  e.leaf = leaf;
  e.grad = e.grad.defined() ? add(e.grad, grad) : grad;
  return e.grad;
}
void Gradients::accumulate(const Array& leaf, const Array& grad) {
  if (!leaf.grad_node() || !leaf.grad_node()->is_leaf)
    throw Error("Gradients::accumulate: the key is not a leaf (make it with require_grad())");
  accumulate(leaf.grad_node(), grad);
}
Gradients& Gradients::operator+=(const Gradients& other) {
  for (const auto& [key, e] : other.grads_) accumulate(e.leaf, e.grad);
  return *this;
}
std::vector<Array> Gradients::arrays() const {
  std::vector<Array> out;
  for (const auto& [key, e] : grads_) out.push_back(e.grad);
  return out;
}

// ---- Array entry points -------------------------------------------------------------------
Gradients Array::backward(BackwardOptions opts) const {
  Gradients g;
  run_backward(*this, Array(), opts, g, nullptr, nullptr);
  return g;
}
Gradients Array::backward(const Array& grad_output, BackwardOptions opts) const {
  Gradients g;
  run_backward(*this, grad_output, opts, g, nullptr, nullptr);
  return g;
}
void Array::backward_into(Gradients& into, BackwardOptions opts) const {
  run_backward(*this, Array(), opts, into, nullptr, nullptr);
}
Array Array::grad(const Gradients& grads) const { return grads.get(*this); }

std::vector<Array> grad(const Array& output, const std::vector<Array>& inputs, BackwardOptions opts,
                        const Array& grad_output) {
  std::vector<GradNode*> targets;
  for (const Array& in : inputs) {
    if (!in.requires_grad())
      throw Error(fmt::format("grad: input {} does not require grad", targets.size()));
    targets.push_back(in.grad_node().get());
  }
  std::unordered_map<GradNode*, Array> found;
  Gradients unused;
  run_backward(output, grad_output, opts, unused, &targets, &found);
  std::vector<Array> result;
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto it = found.find(targets[i]);
    if (it != found.end()) {
      result.push_back(it->second);
    } else if (opts.materialize_grads) {
      result.push_back(zeros(inputs[i].shape(), {inputs[i].dtype(), inputs[i].device()}));
    } else if (opts.allow_unused) {
      result.push_back(Array());
    } else {
      throw Error(fmt::format("grad: input {} (shape {}) is not used to compute the output; pass "
                              "allow_unused = true (an undefined gradient) or materialize_grads = true (zeros) "
                              "if that is intended",
                              i, inputs[i].shape().str()));
    }
  }
  return result;
}

}  // namespace ember
