// Node construction and iterative destruction, the creation context of a thread's nodes
// (NodeContext, BackwardOrigin), and the run-time policy. Making a node for an op is in
// ops/make_array.cpp.
#include "graph/node.h"

#include "runtime/work_recorder.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <string>

namespace ember {

Node::Node(Op op_, OpAttrs attrs_, std::vector<NodePtr> inputs_, Shape shape_, DType dtype_,
           Device device_, Loc loc_)
    : op(op_), attrs(std::move(attrs_)), inputs(std::move(inputs_)), shape(std::move(shape_)),
      dtype(dtype_), device(device_), loc(loc_) {
  made_while_recording = active_work_recorder() != nullptr;
  uint32_t d = 0;
  for (const auto& in : inputs)
    if (in->is_pending()) d = std::max(d, in->depth);
  depth = d + 1;
}

namespace {
// The inputs still to release by the outermost ~Node running on this thread (null: none runs).
thread_local std::vector<NodePtr>* t_releasing = nullptr;
}  // namespace

Node::~Node() {
  // Destroying a node whose only owner we are would destroy its inputs recursively; a chain of a
  // million nodes would overflow the stack. So the outermost destructor on a thread releases the
  // inputs in a loop, and a destructor that runs inside it (an input whose last owner that loop
  // was) hands its own inputs to the loop instead of releasing them: the depth stays two.
  // (Asking `use_count() == 1` before taking an input's inputs over would be a data race: that
  // count is read without ordering against the thread that dropped the other owner, e.g. a device
  // queue worker that has just cleared the node's inputs; found by TSan.)
  if (t_releasing) {
    for (NodePtr& in : inputs) t_releasing->push_back(std::move(in));
    return;
  }
  std::vector<NodePtr> pending = std::move(inputs);
  t_releasing = &pending;
  while (!pending.empty()) {
    NodePtr n = std::move(pending.back());
    pending.pop_back();
    n.reset();  // if this was the last owner, its ~Node appends its inputs to `pending`
  }
  t_releasing = nullptr;
}

std::string Node::where() const {
  if (context) return fmt::format("{}: {} (at {})", context, op_name(op), format_location(loc));
  return fmt::format("{} (at {})", op_name(op), format_location(loc));
}

thread_local const char* t_node_context = nullptr;
thread_local const BackwardOrigin* t_backward_origin = nullptr;

NodeContext::NodeContext(const char* name) : previous_(t_node_context) { t_node_context = name; }
NodeContext::~NodeContext() { t_node_context = previous_; }

BackwardOrigin::BackwardOrigin(const char* forward_op, Loc loc)
    : op_(forward_op), loc_(loc), previous_(t_backward_origin) {
  t_backward_origin = this;
}
BackwardOrigin::~BackwardOrigin() { t_backward_origin = previous_; }

RuntimePolicy& runtime_policy() {
  static RuntimePolicy policy = [] {
    RuntimePolicy p;
    if (const char* s = std::getenv("EMBER_SYNC")) p.eager = std::string(s) == "1";
    if (const char* s = std::getenv("EMBER_AUTO_EVAL_NODES")) p.auto_eval_nodes = uint32_t(std::atoi(s));
    if (const char* s = std::getenv("EMBER_AUTO_EVAL_DEPTH")) p.auto_eval_depth = uint32_t(std::atoi(s));
    if (const char* s = std::getenv("EMBER_ASYNC"))
      p.async = std::string(s) == "0" ? AsyncMode::never : AsyncMode::always;
    return p;
  }();
  return policy;
}

}  // namespace ember
