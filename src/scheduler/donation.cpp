// Buffer donation, the planning half: which inputs of each fused kernel die with it, so that
// the kernel may write an output into the input's buffer instead of a fresh one (run_fused,
// lower_fused.cpp, makes the final checks when the buffers exist). `x = x * 0.9 + g` in a loop,
// an optimizer's state update or a chain of gradients then reuses memory that is still in
// cache instead of touching a new buffer every time.
#include "scheduler/donation.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>

namespace ember {

bool donation_enabled() {
  static const bool on = [] {
    const char* s = std::getenv("EMBER_DONATION");
    return !(s && std::string(s) == "0");
  }();
  return on;
}

void choose_donors(Plan& plan) {
  if (!donation_enabled()) return;
  for (FusedKernel& k : plan.kernels) {
    k.donors.clear();
    // Only kernels without reductions: every point is read before (or when) it is written, and
    // written once. A multi-pass kernel reads its rows again after storing.
    if (std::any_of(k.reduce_dim.begin(), k.reduce_dim.end(), [](bool r) { return r; })) continue;
    if (std::any_of(k.members.begin(), k.members.end(),
                    [](const Node* m) { return op_info(m->op).kind == OpKind::Reduce; }))
      continue;
    // References to each input from this kernel's members (an input read twice counts twice).
    // (Scratch kept by the thread: this runs for every kernel of every realization.)
    thread_local std::vector<const Node*> members;
    thread_local std::vector<std::pair<const NodePtr*, long>> edges;
    members.assign(k.members.begin(), k.members.end());
    std::sort(members.begin(), members.end());
    edges.clear();
    for (Node* m : k.members)
      for (const NodePtr& in : m->inputs) {
        if (in->op == Op::Full || std::binary_search(members.begin(), members.end(), in.get()))
          continue;  // constants, members
        auto it = std::find_if(edges.begin(), edges.end(), [&](const auto& e) { return e.first->get() == in.get(); });
        if (it == edges.end()) edges.push_back({&in, 1});
        else ++it->second;
      }
    for (const auto& [in, count] : edges) {
      const Node& n = **in;
      const size_t bytes = size_t(n.shape.numel()) * dtype_size(n.dtype);
      bool fits = false;
      for (const Node* o : k.outputs)
        fits |= !o->placement && o->device == n.device && size_t(o->shape.numel()) * dtype_size(o->dtype) == bytes;
      // Every reference to the input is one of those edges: no user handle, no value saved for
      // backward, no other consumer in this plan or in a graph not realized yet. The caller runs
      // this before it takes references of its own (see realize_impl); a reference taken
      // meanwhile by another thread only makes the count larger (no donation).
      if (fits && in->use_count() == count) k.donors.push_back(in->get());
    }
  }
}

}  // namespace ember
