// Realization: orders the pending nodes a set of roots depends on (iteratively, so deep graphs
// cannot overflow the stack), executes them through the scheduler, publishes their views and
// drops their inputs. Errors name the op and the user's line that created it.
#include <fmt/format.h>

#include <mutex>
#include <unordered_set>

#include "graph/node.h"
#include "scheduler/scheduler.h"

namespace ember {

namespace {
// One realization at a time: graph building stays concurrent, execution is serialized here
// (per-device queues replace this lock when asynchronous execution lands).
std::recursive_mutex& realize_mutex() {
  static std::recursive_mutex m;
  return m;
}
}  // namespace

void realize(const std::vector<NodePtr>& roots) {
  std::lock_guard lock(realize_mutex());
  std::vector<Node*> order;
  std::unordered_set<Node*> seen;
  struct Frame {
    Node* node;
    size_t next_input;
  };
  std::vector<Frame> stack;
  for (const auto& root : roots) {
    if (!root || root->is_ready() || !seen.insert(root.get()).second) continue;
    stack.push_back({root.get(), 0});
    while (!stack.empty()) {
      Frame& f = stack.back();
      if (f.next_input < f.node->inputs.size()) {
        Node* in = f.node->inputs[f.next_input++].get();
        if (!in->is_ready() && !folds_into_consumer(*f.node, *in) && seen.insert(in).second)
          stack.push_back({in, 0});
        continue;
      }
      order.push_back(f.node);
      stack.pop_back();
    }
  }
  for (Node* n : order) {
    if (n->is_ready()) continue;
    try {
      execute_node(*n);
    } catch (const Error& e) {
      n->view = View{};
      throw Error(fmt::format("{}: {}", n->where(), e.what()));
    }
    n->ready.store(true, std::memory_order_release);
    n->inputs.clear();
  }
}

}  // namespace ember
