// The fusion planner (see fusion.h). Nodes are visited consumers-first; a producer joins the
// kernel of its consumers when all of them are in one kernel, its index map from that kernel is
// unique, and (for reductions) its reduced dims agree with the kernel's. Everything else starts
// a kernel of its own or runs alone. Boundaries are recorded with their reason.
#include "scheduler/fusion.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <set>

#include "runtime/registry.h"
#include "ember/error.h"
#include "graph/pointer_table.h"
#include "runtime/stats.h"

namespace ember {

namespace {

bool& fusion_flag() {
  static bool on = [] {
    const char* s = std::getenv("EMBER_FUSION");
    return !(s && std::string(s) == "0");
  }();
  return on;
}

// Caps that keep programs and argument lists small.
constexpr size_t kMaxMembers = 160;
constexpr int64_t kMaxBroadcastBackRow = 16384;  // a row reduced and reused must fit in cache
// An elementwise value read by an elementwise kernel at least kHoistRatio times per element (it is
// broadcast: a batch norm's per-channel scale rsqrt(var + eps) * weight read at every pixel) is
// computed by a kernel of its own once the kernel has kHoistMinPoints points: recomputed per point,
// the batch-norm normalization of [32, 64, 28, 28] took 2.1 ms against 0.68 ms with the scale and
// shift computed first (1 thread). Smaller kernels keep the recomputation: a launch costs more.
constexpr int64_t kHoistRatio = 8;
constexpr int64_t kHoistMinPoints = 16384;

bool absorbable_kind(const Node& n) {
  switch (op_info(n.op).kind) {
    case OpKind::Elementwise:
    case OpKind::Generator:
    case OpKind::Reduce:
      return true;
    case OpKind::Movement:
      return true;  // as an index map (reshape only when it adds or removes size-1 dims)
    default:
      return false;
  }
}

// Non-size-1 dims of a shape.
std::vector<int> big_dims(const Shape& s) {
  std::vector<int> d;
  for (int i = 0; i < s.rank(); ++i)
    if (s[i] != 1) d.push_back(i);
  return d;
}

}  // namespace

bool fusion_enabled() { return fusion_flag(); }
void set_fusion_enabled(bool on) { fusion_flag() = on; }

// Broadcast: input dim a (aligned right) reads the consumer's dim map, or a constant 0 that
// remembers the kernel dim it was broadcast along.
static IndexMap broadcast_map(const Shape& in, const Shape& out, const IndexMap& mo) {
  IndexMap mi;
  int r = out.rank(), ri = in.rank();
  for (int a = 0; a < ri; ++a) {
    int b = r - ri + a;
    const DimMap& d = mo.dims[size_t(b)];
    if (in[a] == 1 && out[b] != 1) mi.dims.push_back({-1, 0, 0, d.src >= 0 ? d.src : d.bcast});
    else mi.dims.push_back(d);
  }
  return mi;
}

std::optional<IndexMap> edge_map(const Node& c, const IndexMap& mc, size_t input,
                                 const std::vector<int>* reduce_kdims) {
  const Node& in = *c.inputs[input];
  switch (op_info(c.op).kind) {
    case OpKind::Elementwise:
      return broadcast_map(in.shape, c.shape, mc);
    case OpKind::Reduce: {
      if (!reduce_kdims) return std::nullopt;
      IndexMap mi;
      std::vector<bool> reduced(static_cast<size_t>(in.shape.rank()), false);
      for (int64_t d : c.attrs.get<ReduceAttrs>().dims) reduced[size_t(d)] = true;
      bool keepdim = c.shape.rank() == in.shape.rank();
      size_t next_kept = 0, next_reduced = 0;
      for (int j = 0; j < in.shape.rank(); ++j) {
        if (reduced[size_t(j)]) {
          mi.dims.push_back({(*reduce_kdims)[next_reduced++], 1, 0, -1});
          if (keepdim) ++next_kept;
        } else {
          mi.dims.push_back(mc.dims[keepdim ? size_t(j) : next_kept++]);
        }
      }
      return mi;
    }
    case OpKind::Movement:
      switch (c.op) {
        case Op::Contiguous: return mc;
        case Op::Expand: return broadcast_map(in.shape, c.shape, mc);
        case Op::Permute: {
          IndexMap mi;
          const std::vector<int64_t>& order = c.attrs.get<PermuteAttrs>().order;
          mi.dims.resize(order.size());
          for (size_t j = 0; j < order.size(); ++j) mi.dims[size_t(order[j])] = mc.dims[j];
          return mi;
        }
        case Op::Slice: {
          IndexMap mi = mc;
          const SliceAttrs& cut = c.attrs.get<SliceAttrs>();
          for (size_t j = 0; j < mi.dims.size(); ++j) {
            DimMap& d = mi.dims[j];
            d.offset = cut.start[j] + d.offset * cut.step[j];
            d.scale *= cut.step[j];
          }
          return mi;
        }
        case Op::Reshape: {  // only adding or removing size-1 dims keeps the map simple
          std::vector<int> bi = big_dims(in.shape), bo = big_dims(c.shape);
          if (bi.size() != bo.size()) return std::nullopt;
          for (size_t k = 0; k < bi.size(); ++k)
            if (in.shape[bi[k]] != c.shape[bo[k]]) return std::nullopt;
          IndexMap mi;
          mi.dims.assign(static_cast<size_t>(in.shape.rank()), DimMap{-1, 0, 0, -1});
          for (size_t k = 0; k < bi.size(); ++k) mi.dims[size_t(bi[k])] = mc.dims[size_t(bo[k])];
          // Size-1 dims of the consumer that the input lacks: keep their broadcast dims.
          std::vector<int> out_ones, in_ones;
          for (int j = 0; j < c.shape.rank(); ++j)
            if (c.shape[j] == 1) out_ones.push_back(j);
          for (int j = 0; j < in.shape.rank(); ++j)
            if (in.shape[j] == 1) in_ones.push_back(j);
          size_t shared = std::min(out_ones.size(), in_ones.size());
          for (size_t k = 0; k < shared; ++k) mi.dims[size_t(in_ones[k])] = mc.dims[size_t(out_ones[k])];
          for (size_t k = shared; k < out_ones.size(); ++k) {
            int b = mc.dims[size_t(out_ones[k])].bcast;
            if (b >= 0) mi.dropped_bcast.push_back(b);
          }
          mi.dropped_bcast.insert(mi.dropped_bcast.end(), mc.dropped_bcast.begin(), mc.dropped_bcast.end());
          return mi;
        }
        default: return std::nullopt;
      }
    default:
      return std::nullopt;
  }
}

namespace {

struct Planner {
  const std::vector<Node*>& order;
  std::unordered_map<Node*, size_t> position;
  std::unordered_map<Node*, std::vector<Node*>> consumers;  // pending consumers (unique)
  std::unordered_map<Node*, long> internal_refs;
  std::unordered_map<Node*, long> total_refs;
  std::set<Node*> roots;
  std::unordered_map<Node*, int> kernel_of;  // -1: runs alone
  bool fuse = true;  // false: every node runs alone
  Plan plan;

  // A device that binds a limited number of buffers per kernel (Vulkan: the per-shader storage
  // buffer limit, 32 on lavapipe) reports max_kernel_args; 0 is no limit (the CPU). Under a limit
  // each kernel keeps the values it reads from outside, as (node, index map) pairs like the
  // lowering's arguments, and a producer joins only if the reads it trades for its own inputs',
  // the stored outputs and the generators' arguments stay within it.
  struct ArgBudget {
    uint32_t limit = 0;
    std::vector<std::pair<const Node*, std::optional<IndexMap>>> reads;
    uint32_t other = 0;  // stored outputs, iota and seed arguments
  };
  std::vector<ArgBudget> budgets;  // per kernel
  Device limit_device{};
  uint32_t device_limit = 0;
  bool have_limit = false;

  uint32_t arg_limit(Device d) {
    if (!have_limit || d != limit_device) {
      const uint32_t l = Backend::get(d.kind).properties(d.index).max_kernel_args;
      // Margin: a value read at one map in two passes of a reduction takes two arguments.
      device_limit = l == 0 ? 0 : l > 4 ? l - 2 : 2;
      limit_device = d;
      have_limit = true;
    }
    return device_limit;
  }

  static uint32_t generator_args(const Node& n) {
    if (op_info(n.op).kind != OpKind::Generator || n.op == Op::Full) return 0;
    return n.op == Op::RandUniform || n.op == Op::RandNormal ? 2 : 1;
  }

  // Takes n (at map m; rd: its reduced kernel dims) into kernel ki's budget; false, and the
  // budget unchanged, when the kernel's reads, outputs and generator arguments would pass the
  // device's limit. Nothing to do without a limit.
  bool take_budget(int ki, Node* n, const IndexMap& m, const std::vector<int>* rd, bool store) {
    if (budgets[size_t(ki)].limit == 0) return true;
    ArgBudget b = budgets[size_t(ki)];
    b.reads.erase(std::remove_if(b.reads.begin(), b.reads.end(), [n](const auto& r) { return r.first == n; }),
                  b.reads.end());
    add_reads(b, *n, m, rd);
    b.other += (store ? 1 : 0) + generator_args(*n);
    if (b.reads.size() + b.other > b.limit) return false;
    budgets[size_t(ki)] = std::move(b);
    return true;
  }

  static void add_reads(ArgBudget& b, const Node& n, const IndexMap& m, const std::vector<int>* rd) {
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const Node* in = n.inputs[i].get();
      if (in->op == Op::Full && in->is_pending()) continue;  // a constant in the program
      std::optional<IndexMap> im = edge_map(n, m, i, rd);
      bool seen = false;
      for (const auto& r : b.reads) seen = seen || (r.first == in && r.second == im);
      if (!seen) b.reads.emplace_back(in, std::move(im));
    }
  }

  Planner(const std::vector<Node*>& o, const std::vector<Node*>& r, bool f)
      : order(o), roots(r.begin(), r.end()), fuse(f) {
    for (size_t i = 0; i < order.size(); ++i) position[order[i]] = i;
    for (Node* n : order)
      for (const NodePtr& in : n->inputs) {
        internal_refs[in.get()] += 1;
        total_refs[in.get()] = in.use_count();
        auto& cs = consumers[in.get()];
        if (std::find(cs.begin(), cs.end(), n) == cs.end()) cs.push_back(n);
      }
  }

  // Referenced from outside the pending graph: a user handle, saved for backward, a root.
  bool external(Node* n) {
    if (roots.count(n)) return true;
    auto t = total_refs.find(n);
    return t == total_refs.end() || t->second > internal_refs[n];
  }

  void boundary(Node* n, const std::string& why) {
    plan.boundaries.push_back(fmt::format("{}: {}", n->where(), why));
  }

  int new_kernel(Node* root) {
    FusedKernel k;
    k.root = root;
    IndexMap m;
    if (op_info(root->op).kind == OpKind::Reduce) {
      const Node& in = *root->inputs[0];
      bool keepdim = root->shape.rank() == in.shape.rank();
      for (int j = 0; j < root->shape.rank(); ++j) {
        k.extents.push_back(root->shape[j]);
        k.reduce_dim.push_back(false);
        m.dims.push_back({j, 1, 0, -1});
      }
      std::vector<int> rd;
      for (int64_t d : root->attrs.get<ReduceAttrs>().dims) {
        rd.push_back(int(k.extents.size()));
        k.extents.push_back(in.shape[int(d)]);
        k.reduce_dim.push_back(true);
      }
      (void)keepdim;
      k.reduce_kdims[root] = rd;
      std::vector<int> set;
      for (int d : rd)
        if (k.extents[size_t(d)] != 1) set.push_back(d);
      k.reduce_set = set;
    } else {
      for (int j = 0; j < root->shape.rank(); ++j) {
        k.extents.push_back(root->shape[j]);
        k.reduce_dim.push_back(false);
        m.dims.push_back({j, 1, 0, -1});
      }
    }
    k.maps[root] = m;
    k.members.push_back(root);
    k.outputs.push_back(root);
    ArgBudget b;
    b.limit = arg_limit(root->device);
    if (b.limit > 0) {
      auto rk = k.reduce_kdims.find(root);
      add_reads(b, *root, m, rk == k.reduce_kdims.end() ? nullptr : &rk->second);
      b.other = 1 + generator_args(*root);
    }
    budgets.push_back(std::move(b));
    plan.kernels.push_back(std::move(k));
    return int(plan.kernels.size()) - 1;
  }

  // A stored output's map must visit each of its elements exactly once per outer point.
  static bool bijective(const FusedKernel& k, const Node& n, const IndexMap& m) {
    std::vector<bool> used(k.extents.size(), false);
    bool varies_reduce = false;
    for (int j = 0; j < n.shape.rank(); ++j) {
      const DimMap& d = m.dims[size_t(j)];
      if (n.shape[j] == 1) {
        if (d.src >= 0 && k.extents[size_t(d.src)] != 1) return false;
        if (d.offset != 0) return false;
        continue;
      }
      if (d.src < 0 || d.scale != 1 || d.offset != 0 || used[size_t(d.src)] ||
          k.extents[size_t(d.src)] != n.shape[j])
        return false;
      used[size_t(d.src)] = true;
      varies_reduce |= k.reduce_dim[size_t(d.src)];
    }
    // Every outer dim must be covered (else the same element is stored repeatedly); reduce dims
    // must be covered all or not at all.
    bool all_reduce = true;
    for (size_t d = 0; d < k.extents.size(); ++d) {
      if (k.extents[d] == 1) continue;
      if (!k.reduce_dim[d] && !used[d]) return false;
      if (k.reduce_dim[d] && !used[d]) all_reduce = false;
    }
    return !varies_reduce || all_reduce;
  }

  // Tries to put n into kernel ki with map m; returns false (and changes nothing) if it cannot.
  bool absorb(Node* n, int ki, const IndexMap& m, bool also_store) {
    FusedKernel& k = plan.kernels[size_t(ki)];
    if (k.members.size() >= kMaxMembers) return false;
    if (also_store && !bijective(k, *n, m)) return false;
    std::vector<int> rd;
    std::vector<int64_t> new_extents;
    if (op_info(n->op).kind == OpKind::Reduce) {
      const Node& in = *n->inputs[0];
      bool keepdim = n->shape.rank() == in.shape.rank();
      size_t dropped = 0;
      for (int64_t d : n->attrs.get<ReduceAttrs>().dims) {
        int kd = -1;
        if (keepdim) kd = m.dims[size_t(d)].src >= 0 ? -2 : m.dims[size_t(d)].bcast;
        else if (dropped < m.dropped_bcast.size()) kd = m.dropped_bcast[dropped++];
        if (kd == -2) return false;  // the reduced dim is read at varying points: not a broadcast
        if (kd < 0) {                // not broadcast back: a new kernel dim (epilogue case)
          kd = int(k.extents.size() + new_extents.size());
          new_extents.push_back(in.shape[int(d)]);
        } else if (k.extents[size_t(kd)] != in.shape[int(d)]) {
          return false;
        }
        rd.push_back(kd);
      }
      // All reductions of a kernel reduce the same kernel dims.
      std::vector<int> mine;
      for (int d : rd)
        if (d >= int(k.extents.size()) || k.extents[size_t(d)] != 1) mine.push_back(d);
      std::sort(mine.begin(), mine.end());
      if (k.reduce_set && mine != *k.reduce_set) return false;
      if (!k.reduce_set) {
        int64_t row = 1;
        for (int d : rd)
          if (d < int(k.extents.size())) row *= k.extents[size_t(d)];
        if (row > kMaxBroadcastBackRow) return false;
      }
      if (k.extents.size() + new_extents.size() > EMBER_MAX_ITER_RANK) return false;
      if (!take_budget(ki, n, m, &rd, also_store)) return false;
      for (int64_t e : new_extents) {
        k.extents.push_back(e);
        k.reduce_dim.push_back(true);
      }
      for (int d : rd) k.reduce_dim[size_t(d)] = true;
      k.reduce_kdims[n] = rd;
      k.reduce_set = mine;
    } else if (!take_budget(ki, n, m, nullptr, also_store)) {
      return false;
    }
    k.maps[n] = m;
    k.members.push_back(n);
    if (also_store) k.outputs.push_back(n);
    kernel_of[n] = ki;
    return true;
  }

  void assign() {
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      Node* n = *it;
      if (!fuse || !absorbable_kind(*n)) {
        kernel_of[n] = -1;
        continue;
      }
      const auto& cs = consumers[n];
      std::string why;
      int ki = -1;
      std::optional<IndexMap> m;
      if (cs.empty()) {
        why = "no pending consumer";
      } else {
        for (Node* c : cs) {
          int kc = kernel_of.count(c) ? kernel_of[c] : -1;
          if (kc < 0) {
            why = fmt::format("read by {} which needs a buffer", op_name(c->op));
            break;
          }
          if (ki >= 0 && kc != ki) {
            why = "consumers in different kernels";
            break;
          }
          ki = kc;
          for (size_t i = 0; i < c->inputs.size(); ++i) {
            if (c->inputs[i].get() != n) continue;
            const auto& rk = plan.kernels[size_t(ki)].reduce_kdims;
            auto r = rk.find(c);
            std::optional<IndexMap> mi =
                edge_map(*c, plan.kernels[size_t(ki)].maps[c], i, r == rk.end() ? nullptr : &r->second);
            if (!mi) {
              why = fmt::format("{} cannot be folded into an index map", op_name(c->op));
              break;
            }
            if (m && !(*m == *mi)) {
              why = "read at two different index maps";
              break;
            }
            m = mi;
          }
          if (!why.empty()) break;
        }
      }
      if (why.empty() && m) {
        bool store = external(n);
        if (store && op_info(n->op).kind == OpKind::Movement) {
          why = "a view that is also used elsewhere";
        } else if (op_info(n->op).kind == OpKind::Movement && !edge_map(*n, *m, 0, nullptr)) {
          why = "a reshape that is not an index map of its input";
        } else if (recomputed_per_point(*n, ki)) {
          why = "broadcast into a much larger kernel: computed once by a kernel of its own";
        } else if (absorb(n, ki, *m, store)) {
          continue;
        } else {
          why = store ? "needed elsewhere and not stored one-to-one by its consumer's kernel, or past the "
                        "device's kernel argument limit"
                      : "its reduction dims or size do not fit its consumer's kernel, or past the device's "
                        "kernel argument limit";
        }
      }
      if (op_info(n->op).kind == OpKind::Movement) {
        kernel_of[n] = -1;  // a view of its input's buffer
        if (!roots.count(n)) boundary(n, why + "; runs as a view");
        continue;
      }
      if (!roots.count(n)) boundary(n, why);
      kernel_of[n] = new_kernel(n);
    }
  }

  // Whether elementwise n, read by kernel ki, would be recomputed at kHoistRatio or more points per
  // element of its own (see kHoistRatio). Values that follow from a reduction in this graph stay:
  // a layer norm's rsqrt(var + eps) joins its row's kernel, which computes it once per row.
  bool recomputed_per_point(Node& n, int ki) {
    if (op_info(n.op).kind != OpKind::Elementwise || follows_reduction(&n)) return false;
    const FusedKernel& k = plan.kernels[size_t(ki)];
    int64_t points = 1;
    for (size_t d = 0; d < k.extents.size(); ++d) {
      if (k.reduce_dim[d]) return false;
      points *= k.extents[d];
    }
    return points >= kHoistMinPoints && points >= kHoistRatio * std::max<int64_t>(n.shape.numel(), 1);
  }

  // Whether n depends, through nodes of this graph, on a reduction of this graph. Filled for every
  // node at the first question, in one pass over `order` (inputs come before their consumers).
  std::vector<uint8_t> after_reduction;
  bool follows_reduction(Node* n) {
    if (after_reduction.empty()) {
      after_reduction.assign(order.size(), 0);
      for (size_t i = 0; i < order.size(); ++i)
        for (const NodePtr& in : order[i]->inputs) {
          auto p = position.find(in.get());
          if (p == position.end()) continue;  // computed before this realization
          if (op_info(in->op).kind == OpKind::Reduce || after_reduction[p->second]) after_reduction[i] = 1;
        }
    }
    auto p = position.find(n);
    return p != position.end() && after_reduction[p->second];
  }

  // Orders kernels and lone nodes so that every step runs after the steps it reads from.
  void order_steps() {
    size_t n_steps = order.size();
    std::vector<Step> candidates;
    std::unordered_map<Node*, size_t> step_of;
    std::vector<bool> kernel_added(plan.kernels.size(), false);
    for (Node* n : order) {
      int ki = kernel_of[n];
      if (ki < 0) {
        step_of[n] = candidates.size();
        candidates.push_back({n, -1});
      } else if (!kernel_added[size_t(ki)]) {
        kernel_added[size_t(ki)] = true;
        size_t s = candidates.size();
        candidates.push_back({nullptr, ki});
        for (Node* m : plan.kernels[size_t(ki)].members) step_of[m] = s;
      }
    }
    (void)n_steps;
    // Dependencies: inputs of members that another step produces.
    std::vector<std::set<size_t>> deps(candidates.size());
    for (Node* n : order) {
      size_t s = step_of[n];
      for (const NodePtr& in : n->inputs) {
        auto it = step_of.find(in.get());
        if (it != step_of.end() && it->second != s) deps[s].insert(it->second);
      }
    }
    std::vector<bool> done(candidates.size(), false);
    size_t finished = 0;
    while (finished < candidates.size()) {
      bool progressed = false;
      for (size_t s = 0; s < candidates.size(); ++s) {
        if (done[s]) continue;
        bool ready = std::all_of(deps[s].begin(), deps[s].end(), [&](size_t d) { return done[d]; });
        if (!ready) continue;
        plan.steps.push_back(candidates[s]);
        done[s] = true;
        ++finished;
        progressed = true;
      }
      if (!progressed) throw Error("internal error: the fusion plan has a dependency cycle");
    }
  }
};

}  // namespace

// ---- the partition cache ----------------------------------------------------------------------
// A training loop realizes graphs of the same structure again and again. The plan depends only on
// structure (ops, shapes, dtypes, dim attributes, edges, which nodes are needed elsewhere), so it
// is cached under that structure, with nodes named by their position in `order`.
namespace {

struct CachedKernel {
  std::shared_ptr<LoweringSlot> lowering = std::make_shared<LoweringSlot>();
  int root = -1;
  std::vector<int64_t> extents;
  std::vector<bool> reduce_dim;
  std::vector<int> members, outputs;
  std::shared_ptr<const CachedMaps> maps = std::make_shared<CachedMaps>();  // by member index
  std::optional<std::vector<int>> reduce_set;
};
struct CachedPlan {
  std::vector<int64_t> key;
  std::vector<CachedKernel> kernels;
  std::vector<std::pair<int, int>> steps;  // (node index, kernel index)
};

// The partition cache's key of a graph, written into `k` (cleared first). It runs on every
// realize, plan cache hit or not, so the caller keeps `k` between calls: a fresh key of a few
// hundred nodes is tens of kilobytes, and glibc consolidates its free lists whenever a chunk that
// large is freed (3-4 % of a tiny LSTM's training step).
void structure_key(const std::vector<Node*>& order, const std::vector<Node*>& roots, std::vector<int64_t>& k) {
  // One table for everything the key needs to know of a node (allocated once per thread): its
  // position in `order` (-1: not in it), how often nodes of `order` read it, its holders in all,
  // and whether it is a root.
  struct Seen {
    int64_t pos = -1;
    long internal = 0, total = 0;
    bool root = false, read = false;
  };
  thread_local NodeTable<Seen> seen;
  seen.clear();
  seen.reserve(order.size() * 2);
  for (size_t i = 0; i < order.size(); ++i) seen[order[i]].pos = int64_t(i);
  for (Node* n : order)
    for (const NodePtr& in : n->inputs) {
      Seen& s = seen[in.get()];
      s.internal += 1;
      s.total = in.use_count();
      s.read = true;
    }
  for (Node* r : roots) seen[r].root = true;
  k.clear();
  k.reserve(order.size() * 16);
  auto shape = [&](const Node& n) {
    k.push_back(n.shape.rank());
    for (int64_t d : n.shape) k.push_back(d);
  };
  for (Node* n : order) {
    k.push_back(int64_t(n->op));
    k.push_back(int64_t(n->dtype));
    k.push_back(int64_t(n->device.kind) * 1000 + n->device.index);
    shape(*n);
    append_key(n->attrs.params, k);
    k.push_back(int64_t(n->attrs.dtype));
    const Seen& self = *seen.find(n);
    const bool ext = self.root || !self.read || self.total > self.internal;
    k.push_back(ext ? 1 : 0);
    k.push_back(int64_t(n->inputs.size()));
    for (const NodePtr& in : n->inputs) {
      const int64_t at = seen.find(in.get())->pos;
      if (at >= 0) {
        k.push_back(at);
      } else {  // a buffer or a folded constant: only its kind, shape and dtype matter
        k.push_back(in->op == Op::Full ? -2 : -1);
        k.push_back(int64_t(in->dtype));
        shape(*in);
      }
    }
  }
}

uint64_t hash_key(const std::vector<int64_t>& key) {
  uint64_t h = 1469598103934665603ull;
  for (int64_t v : key) h = (h ^ uint64_t(v)) * 1099511628211ull;
  return h;
}

std::unordered_map<uint64_t, CachedPlan>& plan_cache() {
  static std::unordered_map<uint64_t, CachedPlan> cache;  // planning is serialized by the caller
  return cache;
}

CachedPlan to_cached(const Plan& plan, const std::vector<Node*>& order, std::vector<int64_t> key) {
  NodeTable<int> pos, member;
  for (size_t i = 0; i < order.size(); ++i) pos[order[i]] = int(i);
  auto at = [](NodeTable<int>& t, const Node* n) {
    if (int* i = t.find(n)) return *i;
    throw Error("internal error: a planned node is missing from the plan cache's entry");
  };
  CachedPlan c;
  c.key = std::move(key);
  for (const FusedKernel& k : plan.kernels) {
    CachedKernel ck;
    ck.root = at(pos, k.root);
    ck.extents = k.extents;
    ck.reduce_dim = k.reduce_dim;
    member.clear();
    for (size_t i = 0; i < k.members.size(); ++i) {
      ck.members.push_back(at(pos, k.members[i]));
      member[k.members[i]] = int(i);
    }
    for (Node* o : k.outputs) ck.outputs.push_back(at(pos, o));
    auto maps = std::make_shared<CachedMaps>();
    for (const auto& [n, m] : k.maps) maps->maps.push_back({at(member, n), m});
    for (const auto& [n, r] : k.reduce_kdims) maps->reduce_kdims.push_back({at(member, n), r});
    ck.maps = std::move(maps);
    ck.reduce_set = k.reduce_set;
    c.kernels.push_back(std::move(ck));
  }
  for (const Step& s : plan.steps) c.steps.push_back({s.node ? at(pos, s.node) : -1, s.kernel});
  return c;
}

Plan from_cached(const CachedPlan& c, const std::vector<Node*>& order) {
  Plan plan;
  plan.kernels.reserve(c.kernels.size());
  plan.steps.reserve(c.steps.size());
  for (const CachedKernel& ck : c.kernels) {
    FusedKernel k;
    k.lowering = ck.lowering;
    k.root = order[size_t(ck.root)];
    k.extents = ck.extents;
    k.reduce_dim = ck.reduce_dim;
    for (int m : ck.members) k.members.push_back(order[size_t(m)]);
    for (int o : ck.outputs) k.outputs.push_back(order[size_t(o)]);
    k.cached_maps = ck.maps;
    k.reduce_set = ck.reduce_set;
    plan.kernels.push_back(std::move(k));
  }
  for (const auto& [node, kernel] : c.steps) plan.steps.push_back({node >= 0 ? order[size_t(node)] : nullptr, kernel});
  return plan;
}

}  // namespace

void FusedKernel::load_maps() {
  if (!cached_maps) return;
  for (const auto& [i, m] : cached_maps->maps) maps[members[size_t(i)]] = m;
  for (const auto& [i, r] : cached_maps->reduce_kdims) reduce_kdims[members[size_t(i)]] = r;
  cached_maps = nullptr;
}

Plan plan_fusion(const std::vector<Node*>& order, const std::vector<Node*>& roots, bool allow_fusion) {
  const bool fuse = allow_fusion && fusion_enabled();
  thread_local std::vector<int64_t> key;
  if (key.capacity() > (size_t(1) << 20) && order.size() * 64 < key.capacity()) key = {};  // once a huge graph
  structure_key(order, roots, key);
  key.push_back(fuse);  // a fused and an unfused partition of one graph are two entries
  uint64_t h = hash_key(key) ^ (fuse ? 0 : 0x9e3779b97f4a7c15ull);
  auto& cache = plan_cache();
  if (auto it = cache.find(h); it != cache.end() && it->second.key == key) {
    stats().plan_cache_hits.fetch_add(1, std::memory_order_relaxed);
    return from_cached(it->second, order);
  }
  stats().plan_cache_misses.fetch_add(1, std::memory_order_relaxed);
  Planner p(order, roots, fuse);
  p.assign();
  p.order_steps();
  if (cache.size() >= 512) cache.clear();  // bounded: a changing workload does not grow it forever
  CachedPlan& cached = cache[h] = to_cached(p.plan, order, key);
  for (size_t i = 0; i < p.plan.kernels.size(); ++i) p.plan.kernels[i].lowering = cached.kernels[i].lowering;
  return std::move(p.plan);
}

}  // namespace ember
