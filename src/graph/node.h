// Node: one op in the lazy graph. Immutable after creation except for its realization state:
// once realized, `view` describes its data (a strided window of a buffer), `ready` is published
// with release ordering, and the inputs are dropped so that memory can be freed.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/registry.h"
#include "ember/array.h"
#include "ops/op_table.h"

namespace ember {

struct View {
  std::shared_ptr<Buffer> buffer;
  int64_t offset = 0;            // elements
  std::vector<int64_t> strides;  // elements, one per dim
};

struct Node;
using NodePtr = std::shared_ptr<Node>;

struct Node {
  Op op;
  OpAttrs attrs;
  std::vector<NodePtr> inputs;  // cleared once the node is realized
  Shape shape;
  DType dtype;
  Device device;
  Loc loc;
  uint32_t depth = 0;  // longest chain of pending nodes ending here

  std::atomic<bool> ready{false};
  View view;  // valid once ready

  Node(Op op, OpAttrs attrs, std::vector<NodePtr> inputs, Shape shape, DType dtype, Device device,
       Loc loc);
  ~Node();  // releases long input chains iteratively, never recursively
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  bool is_ready() const { return ready.load(std::memory_order_acquire); }
  // "add (at model.cpp:42)"
  std::string where() const;
};

// Creates a node for an op whose inputs were checked by the caller, and records its backward
// history when an input requires grad. Applies the run-time policy: eager mode (EMBER_SYNC=1)
// realizes at once, and a node deeper than the auto-eval depth is realized so that graphs
// cannot grow without bound.
Array make_array(Op op, OpAttrs attrs, const std::vector<Array>& inputs, Shape shape, DType dtype,
                 Device device, Loc loc);
// A realized node that wraps an existing view (a leaf).
Array make_ready_array(Op op, View view, Shape shape, DType dtype, Device device,
                       Loc loc);

// Realizes the nodes (and what they depend on). Thread-safe; throws the first error.
void realize(const std::vector<NodePtr>& roots);

// Run-time policy (read once from EMBER_SYNC / EMBER_AUTO_EVAL_DEPTH; settable for tests).
struct RuntimePolicy {
  bool eager = false;
  uint32_t auto_eval_depth = 1000;  // 0 disables
};
RuntimePolicy& runtime_policy();

}  // namespace ember
