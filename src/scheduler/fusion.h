// The fusion planner: partitions the pending nodes of a realization into kernels. Elementwise
// chains, generators, movement ops (as index maps) and reductions with their prologues and
// epilogues become one KIR kernel each; reduce-then-broadcast-back patterns (softmax, layer norm)
// stay in one multi-pass kernel. Other nodes (matmul, gather, cat, library ops, views of
// materialized buffers) run on their own. See docs/backends.md ("Fusion").
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "graph/node.h"

namespace ember {

// Where a kernel point p lands in a node's multi-index: q = offset + scale * p[src], or the
// constant `offset` when src < 0. `bcast` remembers the kernel dim a size-1 dim was broadcast
// along (how a reduction finds the kernel dims it reduces when its result is broadcast back).
struct DimMap {
  int src = -1;
  int64_t scale = 0;
  int64_t offset = 0;
  int bcast = -1;
  friend bool operator==(const DimMap&, const DimMap&) = default;
};
struct IndexMap {
  std::vector<DimMap> dims;        // one per node dim
  std::vector<int> dropped_bcast;  // bcast dims of size-1 dims a reshape removed (in order)
  friend bool operator==(const IndexMap&, const IndexMap&) = default;
};

// What lowering a kernel produced (lower_fused.cpp: the KIR program and how each launch argument
// is found in the graph), kept with the kernel's entry in the plan cache so that the next realize
// of a graph with the same structure and constants launches it without emitting it again.
struct LoweredKernel;
struct LoweringSlot {
  std::mutex m;
  std::shared_ptr<const LoweredKernel> kernel;  // null until the kernel was lowered once
};

// The index maps of a kernel from the plan cache, by member index (FusedKernel::load_maps).
struct CachedMaps {
  std::vector<std::pair<int, IndexMap>> maps;
  std::vector<std::pair<int, std::vector<int>>> reduce_kdims;
};

struct FusedKernel {
  Node* root = nullptr;
  std::vector<int64_t> extents;      // kernel iteration dims
  std::vector<bool> reduce_dim;      // per kernel dim: reduced (true) or outer
  std::vector<Node*> members;        // every node computed inside, consumers before producers
  std::vector<Node*> outputs;        // nodes the kernel stores (root first)
  // kernel point -> member's multi-index; reduction member -> kernel dims it reduces. A kernel
  // from the plan cache has them only after load_maps() (a kernel replayed from its LoweringSlot
  // never needs them, and copying them was a third of a cache hit's cost).
  std::unordered_map<Node*, IndexMap> maps;
  std::unordered_map<Node*, std::vector<int>> reduce_kdims;
  std::shared_ptr<const CachedMaps> cached_maps;  // what load_maps() fills them from
  void load_maps();
  // The (non-trivial) kernel dims every reduction of this kernel reduces, once it has one.
  std::optional<std::vector<int>> reduce_set;
  // Inputs that die with this kernel, whose buffers an output may take (scheduler/donation.h).
  std::vector<Node*> donors;
  // Shared by every plan made from one plan-cache entry (null when the plan was not cached).
  std::shared_ptr<LoweringSlot> lowering;
};

// The map of input `input` of consumer `c`, given c's map; nullopt when the edge cannot be
// expressed (a general reshape). Reductions need the kernel dims they reduce.
std::optional<IndexMap> edge_map(const Node& c, const IndexMap& mc, size_t input,
                                 const std::vector<int>* reduce_kdims);

struct Step {
  Node* node = nullptr;  // a node executed on its own (views, library calls, ...), or
  int kernel = -1;       // an index into Plan::kernels
};

struct Plan {
  std::vector<FusedKernel> kernels;
  std::vector<Step> steps;  // in dependency order
  std::vector<std::string> boundaries;  // why nodes were materialized (EMBER_LOG=fusion)
};

// Plans the realization of `order` (pending nodes in topological order). `roots` are the nodes
// the caller asked for. Without `allow_fusion` (anomaly detection), or with fusion_enabled() off,
// every node runs alone.
Plan plan_fusion(const std::vector<Node*>& order, const std::vector<Node*>& roots, bool allow_fusion);

// Emits and runs one fused kernel (lower_fused.cpp); sets the views of its outputs. A kernel
// lowered before in a plan from the same cache entry, with the same constants, is launched from
// its LoweringSlot without emitting.
void run_fused(FusedKernel& k);
// How many fused kernels were launched from a LoweringSlot since the process started (tests).
int64_t lowered_kernel_reuses();

// Whether fusion is on (EMBER_FUSION=0 turns it off: every node is its own kernel).
bool fusion_enabled();
void set_fusion_enabled(bool on);

}  // namespace ember
