// Realization: orders the pending nodes a set of roots depends on (iteratively, so deep graphs
// cannot overflow the stack), executes them through the scheduler, publishes their views and
// drops their inputs. Errors name the op and the user's line that created it.
#include <fmt/format.h>

#include <cstdlib>
#include <iostream>
#include <mutex>
#include <unordered_set>

#include "graph/node.h"
#include "scheduler/fusion.h"
#include "scheduler/scheduler.h"
#include "graph/stats.h"

namespace ember {

namespace {

bool log_fusion() {
  static bool on = [] {
    const char* s = std::getenv("EMBER_LOG");
    return s && std::string(s).find("fusion") != std::string::npos;
  }();
  return on;
}

void log_plan(const Plan& plan) {
  if (!log_fusion()) return;
  for (const Step& s : plan.steps) {
    if (s.kernel < 0) {
      std::cerr << "[ember fusion] alone: " << s.node->where() << "\n";
      continue;
    }
    const FusedKernel& k = plan.kernels[size_t(s.kernel)];
    std::cerr << "[ember fusion] kernel of " << k.members.size() << " ops, " << k.outputs.size()
              << " output(s), root " << k.root->where() << ":";
    for (auto it = k.members.rbegin(); it != k.members.rend(); ++it) std::cerr << " " << op_name((*it)->op);
    std::cerr << "\n";
  }
  for (const std::string& b : plan.boundaries) std::cerr << "[ember fusion] boundary at " << b << "\n";
}

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
  std::vector<Node*> root_nodes;
  for (const auto& r : roots)
    if (r) root_nodes.push_back(r.get());
  Plan plan = plan_fusion(order, root_nodes);
  log_plan(plan);
  stats().realizations.fetch_add(1, std::memory_order_relaxed);
  for (const Step& step : plan.steps) {
    if (step.kernel < 0) {
      Node* n = step.node;
      if (n->is_ready()) continue;
      try {
        execute_node(*n);
      } catch (const Error& e) {
        n->view = View{};
        throw Error(fmt::format("{}: {}", n->where(), e.what()));
      }
      n->ready.store(true, std::memory_order_release);
      n->inputs.clear();
      continue;
    }
    FusedKernel& k = plan.kernels[size_t(step.kernel)];
    try {
      run_fused(k);
    } catch (const Error& e) {
      for (Node* o : k.outputs) o->view = View{};
      throw Error(fmt::format("{}: {}", k.root->where(), e.what()));
    }
    for (Node* o : k.outputs) o->ready.store(true, std::memory_order_release);
    // Inputs are dropped only after every output is published: dropping the root's inputs can
    // free members that other outputs still point to.
    for (Node* o : k.outputs) o->inputs.clear();
  }
}

}  // namespace ember
