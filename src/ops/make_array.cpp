// make_array and its siblings (ops/make_array.h): a node for each op call, its autograd record,
// and the creation-time evaluation policy (eager mode, automatic evaluation of a long-growing
// graph).
#include "ops/make_array.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "autograd/grad_node.h"
#include "runtime/stats.h"
#include "scheduler/realize.h"

namespace ember {

namespace {

// The nodes this thread created that may still be pending (weak: the log never keeps a node
// alive). make_array appends one and sweeps two, dropping those that died (a plain load per
// entry: the sweep adds no atomic operation to an op's cost), so the log stays about the size of
// the live set and dead nodes' memory is released soon. When the log reaches `next_count`
// entries, the live pending ones are counted exactly and, if there are at least
// `auto_eval_nodes`, realized; the others (realized, still held) are kept or dropped then.
struct PendingLog {
  std::vector<std::weak_ptr<Node>> nodes;
  size_t cursor = 0;      // where the incremental sweep continues
  size_t next_count = 0;  // the log size that triggers an exact count
  uint32_t limit = 0;     // the auto_eval_nodes next_count was set for (tests change it)
};
// initial-exec: a direct %fs access instead of a __tls_get_addr call from this shared library
// (it is loaded with the program, not dlopen'ed late, so static TLS has room for it).
thread_local PendingLog pending_log __attribute__((tls_model("initial-exec")));

void log_pending(const NodePtr& node, uint32_t limit) {
  PendingLog& log = pending_log;
  if (log.limit != limit) {
    log.limit = limit;
    log.next_count = 0;
  }
  log.nodes.emplace_back(node);
  for (int k = 0; k < 2 && !log.nodes.empty(); ++k) {
    if (log.cursor >= log.nodes.size()) log.cursor = 0;
    if (!log.nodes[log.cursor].expired()) {
      ++log.cursor;
    } else {
      log.nodes[log.cursor] = std::move(log.nodes.back());
      log.nodes.pop_back();
    }
  }
  if (log.nodes.size() < std::max<size_t>(log.next_count, limit)) return;
  std::vector<NodePtr> live;
  for (const auto& w : log.nodes)
    if (NodePtr n = w.lock(); n && n->is_pending()) live.push_back(std::move(n));
  log.nodes.clear();
  log.cursor = 0;
  if (live.size() >= limit) {
    stats().auto_flushes.fetch_add(1, std::memory_order_relaxed);
    realize_frontier(std::move(live));
  } else {
    for (const NodePtr& n : live) log.nodes.emplace_back(n);
  }
  // The next exact count after another half limit of growth (amortized: a few entries per op).
  log.next_count = log.nodes.size() + limit / 2;
}

}  // namespace

namespace {
// Every node's shape has a countable number of elements and bytes (expand to [2^62, 4] once
// summed to 0): the error names the op and the user's line.
void check_node_extent(const Shape& shape, DType dtype, Op op, Loc loc) {
  try {
    check_extent(shape, dtype_size(dtype), op_name(op));
  } catch (const Error& e) {
    throw Error(with_location(e.what(), loc));
  }
}
}  // namespace

namespace {

// Inlined into make_array, every op's path: the arguments are forwarded, never copied again (a
// Shape holds its dims inline; an out-of-line call that took them by value cost 2 % of a chain of
// tiny ops).
[[gnu::always_inline]] inline Array make_node_array(Op op, OpAttrs&& attrs, const std::vector<Array>& inputs,
                                                    Shape&& shape, DType dtype, Device device, Loc loc,
                                                    std::vector<OutputSpec>&& extra) {
  check_node_extent(shape, dtype, op, loc);
  for (const OutputSpec& e : extra) check_node_extent(e.shape, e.dtype, op, loc);
  if (attrs.params.index() != op_info(op).params) [[unlikely]]  // the op table names the struct
    throw Error(fmt::format("internal error: {} made with {}, the op table declares another attributes struct",
                            op_name(op), params_name(attrs.params)));
  // Inside a layer the user called (UserCall), the node records the user's line and the layer.
  const char* layer = attributed_layer(loc);
  loc = attributed_location(loc);
  std::vector<NodePtr> nodes;
  nodes.reserve(inputs.size());
  bool any_grad = false;
  for (const Array& a : inputs) {
    nodes.push_back(a.node());
    any_grad |= a.requires_grad();
  }
  auto node = std::make_shared<Node>(op, std::move(attrs), std::move(nodes), std::move(shape), dtype,
                                     device, loc);
  node->context = t_node_context ? t_node_context : layer;
  if (const BackwardOrigin* origin = t_backward_origin) {
    node->backward_of = origin->forward_op();
    node->backward_loc = origin->loc();
  }
  if (!extra.empty()) {
    node->extra_outputs.reserve(extra.size());
    for (OutputSpec& e : extra) node->extra_outputs.push_back({std::move(e), View{}});
  }
  std::shared_ptr<autograd::GradNode> grad;
  if (any_grad && grad_enabled()) grad = autograd::record(op, node->attrs, inputs, node, loc);
  const RuntimePolicy& policy = runtime_policy();
  if (policy.eager)
    realize_and_wait({node});
  else if (policy.auto_eval_depth && node->depth > policy.auto_eval_depth)
    realize({node});
  else if (policy.auto_eval_nodes && !node->inputs.empty())
    // Nodes without inputs (constants, generators) are not counted: they hold no memory and
    // nothing chains through them, and a constant folded into a queued kernel stays pending
    // until that kernel runs (counting those made a loop that evaluates as it goes flush).
    log_pending(node, policy.auto_eval_nodes);
  return Array(std::move(node), std::move(grad));
}

}  // namespace

Array make_array(Op op, OpAttrs attrs, const std::vector<Array>& inputs, Shape shape, DType dtype,
                 Device device, Loc loc) {
  return make_node_array(op, std::move(attrs), inputs, std::move(shape), dtype, device, loc, std::vector<OutputSpec>{});
}

std::vector<Array> make_arrays(Op op, OpAttrs attrs, const std::vector<Array>& inputs, std::vector<OutputSpec> outputs,
                               Device device, Loc loc) {
  if (outputs.empty()) throw Error(fmt::format("internal error: {} made with no outputs", op_name(op)));
  // Only library calls write several outputs (run_library allocates them; fusion never sees them).
  if (outputs.size() > 1 && op_info(op).kind != OpKind::Library)
    throw Error(fmt::format("internal error: {} is not a library op and cannot have {} outputs", op_name(op),
                            outputs.size()));
  OutputSpec first = std::move(outputs.front());
  outputs.erase(outputs.begin());
  std::vector<Array> result;
  result.reserve(outputs.size() + 1);
  result.push_back(make_node_array(op, std::move(attrs), inputs, std::move(first.shape), first.dtype, device, loc,
                                   std::move(outputs)));
  for (size_t i = 1; i <= result.front().node()->extra_outputs.size(); ++i)
    result.push_back(output_of(result.front(), int(i), loc));
  return result;
}

Array output_of(const Array& primary, int index, Loc loc) {
  const NodePtr& n = primary.node();
  if (index < 1 || size_t(index) > n->extra_outputs.size())
    throw Error(fmt::format("internal error: output {} of {}, which has {} outputs", index, op_name(n->op),
                            n->extra_outputs.size() + 1));
  const OutputSpec& spec = n->extra_outputs[size_t(index - 1)].spec;
  return make_node_array(Op::OutputOf, OpAttrs{.params = OutputAttrs{.index = index}}, {primary}, Shape(spec.shape),
                         spec.dtype, n->device, loc, std::vector<OutputSpec>{});
}

Array make_ready_array(Op op, View view, Shape shape, DType dtype, Device device,
                       Loc loc) {
  auto node = std::make_shared<Node>(op, OpAttrs{}, std::vector<NodePtr>{}, std::move(shape), dtype,
                                     device, attributed_location(loc));
  node->view = std::move(view);
  node->depth = 0;
  node->state.store(Node::State::Ready, std::memory_order_release);
  return Array(std::move(node));
}

}  // namespace ember
