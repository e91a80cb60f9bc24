// Node: one op in the lazy graph. Immutable after creation except for its realization state:
// Pending (built, not scheduled) -> Queued (in a device queue) -> Ready (`view` describes its
// data, a strided window of a buffer; published with release ordering; inputs dropped so memory
// can be freed) or Failed (`error` says why; reading the node throws it).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <memory>
#include <optional>
#include <vector>

#include "ember/device.h"
#include "ember/dtype.h"
#include "ember/error.h"
#include "ember/shape.h"
#include "op_table/op_table.h"
#include "runtime/registry.h"

namespace ember {

struct View {
  std::shared_ptr<DeviceBuffer> buffer;
  int64_t offset = 0;            // elements
  std::vector<int64_t> strides;  // elements, one per dim
};

struct Node;
using NodePtr = std::shared_ptr<Node>;

// The shape and dtype of one output of a node.
struct OutputSpec {
  Shape shape;
  DType dtype;
};

struct Node {
  Op op;
  OpAttrs attrs;
  std::vector<NodePtr> inputs;  // cleared once the node is realized
  Shape shape;
  DType dtype;
  Device device;
  Loc loc;
  const char* context = nullptr;  // the library function that made it (NodeContext), for errors
  // Set on the nodes a backward rule made while anomaly detection was on (BackwardOrigin): the
  // forward op ("sqrt") and the user's line that created it, which the anomaly report names.
  const char* backward_of = nullptr;
  Loc backward_loc;
  uint32_t depth = 0;  // longest chain of pending nodes ending here
  // Made while this thread recorded its work (ops/capture.cpp): a recorded realization may
  // compute only such nodes; older pending nodes are realized first, outside the recording.
  bool made_while_recording = false;

  enum class State : uint8_t { Pending, Queued, Ready, Failed };
  std::atomic<State> state{State::Pending};
  View view;                                 // valid once Ready
  // Where the scheduler asks this node's output to be written (a slab of a cat's buffer, see
  // place_cat_inputs in realize.cpp); alloc_contiguous returns it. Set before the node runs.
  std::optional<View> placement;
  std::shared_ptr<const std::string> error;  // set before state becomes Failed
  // A multi-output op (one library call writing several arrays, e.g. fused attention's o and its
  // f32 log-sum-exp) is one node: output 0 is the node itself (shape, dtype, view above), and
  // output i >= 1 is described here, its view set when the node runs (from then until the node
  // dies its buffer stays alive). Users reach output i through an OutputOf node (output_of below)
  // whose one input is this node, realized as that view.
  struct ExtraOutput {
    OutputSpec spec;
    View view;  // valid once Ready
  };
  std::vector<ExtraOutput> extra_outputs;

  Node(Op op, OpAttrs attrs, std::vector<NodePtr> inputs, Shape shape, DType dtype, Device device,
       Loc loc);
  ~Node();  // releases long input chains iteratively, never recursively
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  State current() const { return state.load(std::memory_order_acquire); }
  bool is_ready() const { return current() == State::Ready; }
  bool is_pending() const { return current() == State::Pending; }
  // "add (at model.cpp:42)", or "cross_entropy: gather (at model.cpp:42)" with a context
  std::string where() const;
};

// Names the library function on the nodes this thread makes while it lives (a static string),
// so that an error computing one of them says which function the user called: a class index
// out of range is "cross_entropy: gather (at train.cpp:40): ...", not a bare gather.
class NodeContext {
 public:
  explicit NodeContext(const char* name);
  ~NodeContext();
  NodeContext(const NodeContext&) = delete;
  NodeContext& operator=(const NodeContext&) = delete;

 private:
  const char* previous_;
};

// Marks the nodes this thread makes while it lives as parts of the backward of `forward_op` (a
// static string) created at `loc` (the autograd engine, with anomaly detection on).
class BackwardOrigin {
 public:
  BackwardOrigin(const char* forward_op, Loc loc);
  ~BackwardOrigin();
  BackwardOrigin(const BackwardOrigin&) = delete;
  BackwardOrigin& operator=(const BackwardOrigin&) = delete;
  const char* forward_op() const { return op_; }
  // The forward_op of a user-written rule (CustomFunction, checkpoint): its nodes' own lines are
  // the user's too, so the anomaly report names both.
  static constexpr const char* kCustomFunction = "a custom function";
  Loc loc() const { return loc_; }

 private:
  const char* op_;
  Loc loc_;
  const BackwardOrigin* previous_;
};

// The NodeContext and BackwardOrigin open on this thread (null: none), read where a node is made
// (ops/make_array.cpp). initial-exec: a direct %fs access from inside the library.
extern thread_local const char* t_node_context __attribute__((tls_model("initial-exec")));
extern thread_local const BackwardOrigin* t_backward_origin __attribute__((tls_model("initial-exec")));

// Where eval() runs a device's work (docs/backends.md, "Asynchronous execution").
enum class AsyncMode : uint8_t {
  // On the device's queue thread, so eval() returns before the work is done, on a device that
  // computes elsewhere (a GPU); on a host device (cpu, reference) the calling thread runs its
  // work itself whenever the queue is idle (measured faster: realize.cpp, worker_pays).
  automatic,
  always,  // EMBER_ASYNC=1: on the queue thread (a host that waits on an idle queue still runs it)
  never,   // EMBER_ASYNC=0: on the calling thread, always
};

// Run-time policy (read once from EMBER_SYNC / EMBER_AUTO_EVAL_NODES / EMBER_AUTO_EVAL_DEPTH /
// EMBER_ASYNC; settable for tests).
struct RuntimePolicy {
  bool eager = false;
  // Realize a thread's pending nodes once this many are alive (0 disables). High, so a training
  // step (a few thousand nodes) is never cut in two; see log_pending in ops/make_array.cpp.
  uint32_t auto_eval_nodes = 100000;
  uint32_t auto_eval_depth = 0;  // realize any node deeper than this (0, the default, disables)
  AsyncMode async = AsyncMode::automatic;
};
RuntimePolicy& runtime_policy();

}  // namespace ember
