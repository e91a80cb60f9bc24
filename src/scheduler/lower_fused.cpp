// Emits one fused kernel (a FusedKernel from the planner) as a KIR program and runs it.
//
// Phases: with reduce dims, a kernel makes passes over each row. Values that vary along the
// reduce dims are "row" values, computed in an even phase (a pass over the row) and recomputed in
// every later pass that needs them (the row is in cache); reductions and what is computed from
// them alone are "scalar" values of an odd phase (once per row, after its pass). Softmax is
// max (pass 0 -> phase 1), sum of exp(x - max) (pass 2 -> phase 3), exp(x - max) / sum (pass 4).
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <map>
#include <set>
#include <tuple>

#include "ember/error.h"
#include "op_table/dtype_rules.h"
#include "scheduler/fusion.h"
#include "runtime/stats.h"
#include "scheduler/launch.h"

namespace ember {

namespace {

// Marks "no fixed phase": a value that depends on no reduction and no reduce dim; it is emitted
// in whatever phase first needs it.
constexpr int kAnyPhase = -1;

std::atomic<int64_t> g_reuses{0};

// How the launch argument of one emitted load or store finds its memory in a graph of the same
// structure: the kernel's output `ref`; input `input` of member `ref` (a buffer computed
// earlier); or, for generator member `ref`, its linear index or its Philox key.
struct ArgRecipe {
  enum class Kind { Output, Input, Iota, SeedKey } kind;
  int ref = -1;
  int input = -1;
  IndexMap map;  // kernel point -> the argument's multi-index
};

// What a kernel's program depends on beyond the plan cache's key (which has the graph's ops,
// integer attributes, shapes, dtypes and which inputs are computed in the plan): the scalars it
// embeds (OpAttrs' f0, f1 and value, of its members and of the Full nodes they read), and which
// of the members' inputs are one node (the emitter loads a node read twice once: `x * x` has one
// argument where `x * y` has two). A program is reused only where both are equal. A random op's
// seed is a launch argument, not part of the program.
// Written into `v` (cleared first): the caller keeps its capacity from launch to launch.
void lowering_fingerprint(const FusedKernel& k, std::vector<uint64_t>& v) {
  thread_local std::vector<std::pair<const Node*, uint64_t>> slots;  // every member's inputs, numbered
  thread_local std::vector<uint64_t> first;
  v.clear();
  slots.clear();
  auto put = [&v](const OpAttrs& a) {
    v.insert(v.end(), {std::bit_cast<uint64_t>(a.f0), std::bit_cast<uint64_t>(a.f1),
                       std::bit_cast<uint64_t>(a.value.f), uint64_t(a.value.i)});
  };
  for (const Node* m : k.members) {
    put(m->attrs);
    for (const NodePtr& in : m->inputs) {
      if (in->op == Op::Full) put(in->attrs);
      slots.emplace_back(in.get(), uint64_t(slots.size()));
    }
  }
  // Each input slot as the first slot that holds the same node.
  std::sort(slots.begin(), slots.end());
  first.resize(slots.size());
  for (size_t i = 0; i < slots.size(); ++i)
    first[size_t(slots[i].second)] = i > 0 && slots[i].first == slots[i - 1].first ? first[size_t(slots[i - 1].second)]
                                                                                     : slots[i].second;
  v.insert(v.end(), first.begin(), first.end());
}

}  // namespace

// How a kernel's dims become launch dims: outer (not reduced) dims first, then reduced dims.
// The same for every kernel of one plan-cache entry (it depends on extents and reduce dims).
struct LaunchLayout {
  std::vector<int> launch_dim;  // kernel dim -> its launch dim
  std::vector<int64_t> shape;   // the launch's extents
  int outer = 0;                // how many launch dims are outer
};

LaunchLayout launch_layout(const FusedKernel& k) {
  LaunchLayout l;
  l.launch_dim.resize(k.extents.size());
  for (int reduced = 0; reduced < 2; ++reduced)
    for (size_t d = 0; d < k.extents.size(); ++d)
      if (k.reduce_dim[d] == bool(reduced)) {
        l.launch_dim[d] = int(l.shape.size());
        l.shape.push_back(k.extents[d]);
        if (!reduced) ++l.outer;
      }
  return l;
}

struct LoweredKernel {
  kir::Builder program;
  std::string name;
  LaunchLayout layout;
  std::vector<size_t> output_arg;  // output (by index in FusedKernel::outputs) -> its launch argument
  std::vector<ArgRecipe> args;  // in launch argument order
  std::vector<uint64_t> fingerprint;  // lowering_fingerprint of the kernel it was emitted for
  uint64_t structure_hash = 0;        // program.structure_hash(), computed once
};

namespace {

// Emits a fused kernel's program and binds its launch arguments (emit_all), or binds the
// arguments of a program lowered before from a kernel of the same structure (given to the
// constructor, then replay()); then places outputs and runs.
class Emitter {
 public:
  explicit Emitter(FusedKernel& k, const LoweredKernel* before = nullptr) : k_(k), replayed_(before) {
    if (!before) {
      own_layout_ = launch_layout(k);
      own_output_arg_.assign(k.outputs.size(), 0);
    }
    layout_ = before ? &before->layout : &own_layout_;
    output_arg_ = before ? &before->output_arg : &own_output_arg_;
    launch_.outer_rank = layout_->outer;
    launch_.shape = layout_->shape;
  }

  void emit_all() {
    k_.load_maps();
    // A reduction over no (or only size-1) dims still needs its accumulation phases.
    has_reduce_ = layout_->outer < int(k_.extents.size());
    for (Node* m : k_.members) has_reduce_ |= op_info(m->op).kind == OpKind::Reduce;
    member_.insert(k_.members.begin(), k_.members.end());
    for (size_t index = 0; index < k_.outputs.size(); ++index) {
      Node* o = k_.outputs[index];
      int p = phase_of(o, k_.maps.at(o));
      if (p == kAnyPhase) p = has_reduce_ ? 1 : 0;
      kir::Val v = value(o, k_.maps.at(o), p);
      b_.phase = p;
      int arg = b_.add_arg(o->dtype);
      own_output_arg_[index] = launch_.args.size();
      add_arg(o->view, k_.maps.at(o), o->shape, o->view.strides, o, {ArgRecipe::Kind::Output, int(index)});
      b_.store(arg, b_.cast(v, o->dtype));
    }
    for (auto it = k_.members.rbegin(); it != k_.members.rend(); ++it) {
      if (op_info((*it)->op).kind == OpKind::Movement) continue;
      if (!name_.empty()) name_ += "+";
      name_ += op_name((*it)->op);
    }
  }

  // Gives each output still without a buffer one: a donor's (FusedKernel::donors) where that
  // is safe, else a fresh one.
  void place_outputs() {
    std::vector<Node*> taken;
    for (size_t index = 0; index < k_.outputs.size(); ++index) {
      Node* o = k_.outputs[index];
      if (o->view.buffer) continue;
      const size_t oi = (*output_arg_)[index];
      Launch::Arg& out = launch_.args[oi];
      for (Node* d : k_.donors) {
        if (std::find(taken.begin(), taken.end(), d) != taken.end() || !can_donate(d, o, oi)) continue;
        o->view.buffer = d->view.buffer;
        taken.push_back(d);
        stats().buffers_donated.fetch_add(1, std::memory_order_relaxed);
        break;
      }
      if (!o->view.buffer) o->view.buffer = alloc_contiguous(*o).buffer;
      out.buffer = o->view.buffer;
    }
  }

  // What emit_all produced, for the kernel's LoweringSlot (before run: the launch collapses its
  // dims, and the program takes its name).
  std::shared_ptr<const LoweredKernel> lowered(const std::vector<uint64_t>& fingerprint) const {
    auto l = std::make_shared<LoweredKernel>();
    l->program = b_;
    l->name = name_;
    l->layout = own_layout_;
    l->output_arg = own_output_arg_;
    l->args = recipes_;
    l->fingerprint = fingerprint;
    l->structure_hash = l->program.structure_hash();
    return l;
  }

  // Instead of emit_all: the program and launch arguments of a kernel lowered before from a graph
  // of the same structure, found again in this one.
  void replay() {
    const LoweredKernel& l = *replayed_;
    launch_.args.reserve(l.args.size());
    arg_node_.reserve(l.args.size());
    for (const ArgRecipe& r : l.args) {
      switch (r.kind) {
        case ArgRecipe::Kind::Output: {
          Node* o = k_.outputs[size_t(r.ref)];
          bind_arg(o->view, r.map, o->shape, o->view.strides, o);
          break;
        }
        case ArgRecipe::Kind::Input: {
          Node* n = k_.members[size_t(r.ref)]->inputs[size_t(r.input)].get();
          bind_arg(n->view, r.map, n->shape, n->view.strides, n);
          break;
        }
        case ArgRecipe::Kind::Iota: {
          Node* n = k_.members[size_t(r.ref)];
          bind_arg(View{}, r.map, n->shape, n->shape.contiguous_strides(), nullptr);
          break;
        }
        case ArgRecipe::Kind::SeedKey:
          bind_arg(seed_key(*k_.members[size_t(r.ref)]), r.map, Shape{}, {}, nullptr);
          break;
      }
    }
  }

  void run(Device device) {
    if (replayed_) launch_.run(device, replayed_->program, replayed_->name, replayed_->structure_hash);
    else launch_.run(device, b_, name_);
  }

 private:
  // Whether output o may be written into donor d's buffer: d is computed, its view is the whole
  // buffer and nothing but d (and this launch's arguments) holds that buffer; every argument
  // reading d is read before o is stored (arguments are added as the program first loads or
  // stores them) at exactly the element o is written to at the same point.
  bool can_donate(Node* d, Node* o, size_t oi) const {
    if (!d->is_ready() || !d->view.buffer) return false;
    const View& dv = d->view;
    const size_t bytes = size_t(o->shape.numel()) * dtype_size(o->dtype);
    if (dv.offset != 0 || dv.buffer->bytes != bytes || !(dv.buffer->device == o->device) ||
        !is_contiguous(dv, d->shape))
      return false;
    const Launch::Arg& out = launch_.args[oi];
    long reads = 0;
    for (size_t a = 0; a < arg_node_.size(); ++a) {
      if (arg_node_[a] != d) continue;
      ++reads;
      const Launch::Arg& in = launch_.args[a];
      if (a > oi || in.offset != out.offset || in.strides != out.strides) return false;
    }
    return reads > 0 && dv.buffer.use_count() == 1 + reads;
  }

  // Adds a launch argument reading/writing `view` (of a node with `shape`) through `map`;
  // `owner` is the node whose memory it is (nullptr: none).
  // `recipe` (without its map) says how replay() will find the argument again.
  void add_arg(const View& view, const IndexMap& map, const Shape& shape, const std::vector<int64_t>& strides,
               Node* owner, ArgRecipe recipe) {
    recipe.map = map;
    recipes_.push_back(std::move(recipe));
    bind_arg(view, map, shape, strides, owner);
  }

  void bind_arg(const View& view, const IndexMap& map, const Shape& shape, const std::vector<int64_t>& strides,
                Node* owner) {
    arg_node_.push_back(owner);
    // The argument's stride along each launch dim.
    std::vector<int64_t> launch_strides(layout_->shape.size(), 0);
    int64_t offset = view.offset;
    for (int j = 0; j < shape.rank(); ++j) {
      const DimMap& d = map.dims[size_t(j)];
      offset += strides[size_t(j)] * d.offset;
      if (d.src >= 0) launch_strides[size_t(layout_->launch_dim[size_t(d.src)])] += strides[size_t(j)] * d.scale;
    }
    launch_.args.push_back({view.buffer, offset, std::move(launch_strides), 0, 0});
  }

  bool varies(const IndexMap& m) const {
    for (const DimMap& d : m.dims)
      if (d.src >= 0 && k_.reduce_dim[size_t(d.src)] && k_.extents[size_t(d.src)] != 1) return true;
    return false;
  }

  bool is_member(Node* n) const { return member_.count(n) > 0; }

  // The input map of member c's input i.
  IndexMap input_map(Node* c, const IndexMap& mc, size_t i) {
    auto r = k_.reduce_kdims.find(c);
    std::optional<IndexMap> m = edge_map(*c, mc, i, r == k_.reduce_kdims.end() ? nullptr : &r->second);
    if (!m) throw Error(fmt::format("internal error: no index map for an input of {}", c->where()));
    return *m;
  }

  // The earliest phase a value can be computed in (even: a row pass; odd: after a pass;
  // kAnyPhase: anywhere).
  int phase_of(Node* n, const IndexMap& m) {
    if (!has_reduce_) return 0;
    auto key = std::make_pair(n, key_of(m));
    if (auto it = phase_memo_.find(key); it != phase_memo_.end()) return it->second;
    int p;
    if (!is_member(n) || n->op == Op::Full) {
      p = varies(m) ? 0 : kAnyPhase;
    } else if (op_info(n->op).kind == OpKind::Reduce) {
      int q = phase_of(n->inputs[0].get(), input_map(n, m, 0));
      int row = q == kAnyPhase ? 0 : (q % 2 == 0 ? q : q + 1);
      p = row + 1;
    } else if (op_info(n->op).kind == OpKind::Generator) {
      p = varies(m) ? 0 : kAnyPhase;
    } else {  // elementwise or movement: the latest of the inputs
      bool row = varies(m);
      p = kAnyPhase;
      for (size_t i = 0; i < n->inputs.size(); ++i) {
        if (n->inputs[i]->op == Op::Full && op_info(n->op).kind == OpKind::Elementwise) continue;
        IndexMap mi = input_map(n, m, i);
        int q = phase_of(n->inputs[i].get(), mi);
        row |= varies(mi) || (q != kAnyPhase && q % 2 == 0 && q > 0);
        if (q == kAnyPhase) continue;
        p = std::max(p, q);
      }
      if (row) p = p == kAnyPhase ? 0 : (p % 2 == 0 ? p : p + 1);
    }
    phase_memo_[key] = p;
    return p;
  }

  // The KIR value of node n at map m, used in phase `want`.
  kir::Val value(Node* n, const IndexMap& m, int want) {
    int p = phase_of(n, m);
    // Scalar values are computed once in their own phase; row values and phase-free values
    // are computed (again) in the phase that wants them.
    int at = (p != kAnyPhase && p % 2 == 1) ? p : want;
    auto key = std::make_tuple(n, key_of(m), at);
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    kir::Val v = compute(n, m, at);
    memo_[key] = v;
    return v;
  }

  kir::Val compute(Node* n, const IndexMap& m, int at) {
    b_.phase = at;
    if (n->op == Op::Full) {
      kir::Builder::Scalar2 value = n->attrs.value;
      if (n->dtype == DType::F16) value.f = double(half_to_float(float_to_half(float(value.f))));
      if (n->dtype == DType::BF16) value.f = double(bf16_to_float(float_to_bf16(float(value.f))));
      return b_.constant_like(value, n->dtype);
    }
    if (!is_member(n)) {  // a buffer computed earlier
      int arg = b_.add_arg(n->dtype);
      add_arg(n->view, m, n->shape, n->view.strides, n, input_recipe(n));
      b_.phase = at;
      // A one-element buffer (a scalar on the device: a learning rate, a loss scale) is the same
      // at every point: read once, and the program stays the same whatever its value.
      return n->shape.numel() == 1 ? b_.load_uniform(arg) : b_.load(arg);
    }
    switch (op_info(n->op).kind) {
      case OpKind::Movement:
        return value(n->inputs[0].get(), input_map(n, m, 0), at);
      case OpKind::Generator: {
        // The element's linear index in the generator's own (contiguous) layout.
        int arg = b_.add_arg(DType::I64);
        add_arg(View{}, m, n->shape, n->shape.contiguous_strides(), nullptr, {ArgRecipe::Kind::Iota, member_index(n)});
        b_.phase = at;
        DType compute = (n->dtype == DType::F16 || n->dtype == DType::BF16) ? DType::F32 : n->dtype;
        kir::Val counter = b_.iota(arg);
        const bool random = n->op == Op::RandUniform || n->op == Op::RandNormal;
        if (random) {
          // The seed as a launch-time scalar (a run-time Philox key): a new seed every step
          // (dropout) keeps the same program and writes no buffer.
          int karg = b_.add_arg(DType::I64);
          add_arg(seed_key(*n), m, Shape{}, {}, nullptr, {ArgRecipe::Kind::SeedKey, member_index(n)});
          b_.phase = at;
          b_.runtime_key = b_.load_scalar(karg);
        }
        kir::Val v = generator_expr(n->op, b_, n->attrs, compute, counter);
        b_.runtime_key = kir::Val{};
        return b_.cast(v, n->dtype);
      }
      case OpKind::Elementwise: {
        std::vector<DType> types;
        for (auto& in : n->inputs) types.push_back(in->dtype);
        ElementwiseTypes t = elementwise_types(n->op, types, n->attrs.dtype);
        kir::Val ops[3];
        for (size_t i = 0; i < n->inputs.size(); ++i) {
          kir::Val v = value(n->inputs[i].get(), input_map(n, m, i), at);
          b_.phase = at;
          ops[i] = b_.cast(v, t.operands[i]);
        }
        b_.phase = at;
        kir::Val r = elementwise_expr(n->op, b_, n->attrs, t.compute, ops[0], ops[1], ops[2]);
        return b_.round_to_dtype(b_.cast(r, n->dtype));
      }
      case OpKind::Reduce: {
        const Node& in = *n->inputs[0];
        ReduceTypes t = reduce_types(n->op, in.dtype);
        IndexMap mi = input_map(n, m, 0);
        int row = at - 1;  // the pass that feeds this reduction
        kir::Val x = value(n->inputs[0].get(), mi, row);
        b_.phase = row;
        x = b_.cast(x, t.accumulate);
        kir::Val acc = reduce_accumulate(n->op, b_, x);
        int64_t count = 1;
        for (int d : k_.reduce_kdims.at(n)) count *= k_.extents[size_t(d)];
        b_.phase = at;
        kir::Val r = reduce_finish(n->op, b_, acc, count);
        // Rounded to the node's dtype here, not only when stored: a consumer in this kernel (a
        // cast to f32, a division) must see the f16 sum that an unfused sum stores.
        return b_.round_to_dtype(b_.cast(r, n->dtype));
      }
      default:
        throw Error(fmt::format("internal error: {} cannot be part of a fused kernel", n->where()));
    }
  }

  // A random op's Philox key: a launch-time scalar argument (no buffer; its offset is the seed).
  // A replay passes the key it draws for this op instead (ops/capture.cpp).
  static View seed_key(const Node& n) {
    View key;
    key.offset = int64_t(n.attrs.seed);
    return key;
  }

  int member_index(const Node* n) const {
    return int(std::find(k_.members.begin(), k_.members.end(), n) - k_.members.begin());
  }

  // The recipe of a non-member node the kernel reads: the first member that has it as an input.
  ArgRecipe input_recipe(const Node* n) const {
    for (size_t i = 0; i < k_.members.size(); ++i)
      for (size_t j = 0; j < k_.members[i]->inputs.size(); ++j)
        if (k_.members[i]->inputs[j].get() == n) return {ArgRecipe::Kind::Input, int(i), int(j)};
    throw Error(fmt::format("internal error: {} is read by no member of its kernel", n->where()));
  }

  // The memo key of an index map (the emitter looks nodes up once per use, so this is hot: plain
  // integers, no formatting).
  static std::vector<int64_t> key_of(const IndexMap& m) {
    std::vector<int64_t> k;
    k.reserve(m.dims.size() * 4);
    for (const DimMap& d : m.dims) k.insert(k.end(), {int64_t(d.src), d.scale, d.offset, int64_t(d.bcast)});
    return k;
  }

  FusedKernel& k_;
  kir::Builder b_;
  Launch launch_;
  const LoweredKernel* replayed_;  // the kernel replay() binds and run() launches, or null
  LaunchLayout own_layout_;        // when emitting
  const LaunchLayout* layout_;     // own_layout_ or the replayed kernel's
  bool has_reduce_ = false;
  std::set<Node*> member_;                // filled by emit_all (replay needs no membership)
  std::vector<Node*> arg_node_;           // per launch argument: the node whose memory it is
  std::vector<ArgRecipe> recipes_;        // per launch argument: how replay() finds it again
  std::string name_;
  std::vector<size_t> own_output_arg_;    // output (by index in k_.outputs) -> its launch argument
  const std::vector<size_t>* output_arg_;  // own_output_arg_ or the replayed kernel's
  std::map<std::pair<Node*, std::vector<int64_t>>, int> phase_memo_;
  std::map<std::tuple<Node*, std::vector<int64_t>, int>, kir::Val> memo_;
};

}  // namespace

void run_fused(FusedKernel& k) {
  int64_t outer_points = 1;
  for (size_t d = 0; d < k.extents.size(); ++d)
    if (!k.reduce_dim[d]) outer_points *= k.extents[d];
  // Outputs that may take a donor's buffer get one once the program is built (the check needs
  // its arguments), the others now.
  const bool donate = !k.donors.empty() && outer_points > 0;
  for (Node* o : k.outputs) {
    if (donate && !o->placement) {
      o->view = View{};
      o->view.strides = o->shape.contiguous_strides();
    } else {
      o->view = alloc_contiguous(*o);
    }
  }
  if (outer_points == 0) return;
  std::shared_ptr<const LoweredKernel> before;
  thread_local std::vector<uint64_t> fingerprint;
  if (k.lowering) {
    {
      std::lock_guard lock(k.lowering->m);
      before = k.lowering->kernel;
    }
    lowering_fingerprint(k, fingerprint);
    if (before && before->fingerprint != fingerprint) before = nullptr;
  }
  Emitter e(k, before.get());
  if (before) {
    e.replay();
    g_reuses.fetch_add(1, std::memory_order_relaxed);
  } else {
    e.emit_all();
    if (k.lowering) {
      std::shared_ptr<const LoweredKernel> now = e.lowered(fingerprint);
      std::lock_guard lock(k.lowering->m);
      k.lowering->kernel = std::move(now);
    }
  }
  if (donate) e.place_outputs();
  e.run(k.root->device);
}

int64_t lowered_kernel_reuses() { return g_reuses.load(std::memory_order_relaxed); }

}  // namespace ember
