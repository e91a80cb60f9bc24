// Optimizer base: flat arenas per dtype and device, gradient gathering and clipping, one eval
// per step, state dicts (include/ember/optim/optimizer.h).
#include "ember/optim/optimizer.h"

#include "scheduler/realize.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>


namespace ember::optim {

// Norms of gradients are accumulated in f32 (f64 for f64 gradients).
static DType norm_dtype(DType t) { return t == DType::F64 ? DType::F64 : DType::F32; }

Optimizer::Optimizer(nn::Module& model, double lr, ClipOptions clip) : lr_(lr), clip_(clip) {
  for (auto& b : model.named_buffers()) buffers_.push_back(b.param);
  build_groups({ParamGroup{.params = model.named_parameters()}});
}

Optimizer::Optimizer(std::vector<nn::NamedParam> params, double lr, ClipOptions clip) : lr_(lr), clip_(clip) {
  build_groups({ParamGroup{.params = std::move(params)}});
}

Optimizer::Optimizer(std::vector<ParamGroup> groups, double lr, ClipOptions clip) : lr_(lr), clip_(clip) {
  build_groups(std::move(groups));
}

// One arena per (parameter group, dtype, device).
Array Optimizer::step_scalar(double v, const Array& like) {
  return cast(from_vector(std::vector<double>{v}, Shape{}, like.device()), like.dtype());
}

Optimizer::Decayed Optimizer::decayed_gradient(const Group& group, const Array& params, const Array& grad,
                                               double weight_decay, bool maximize, bool decoupled) const {
  Decayed r{maximize ? neg(grad) : grad, params};
  const double wd = group_weight_decay(group, weight_decay);
  if (wd == 0) return r;
  if (decoupled) r.params = mul(params, step_scalar(1.0 - group_lr(group) * wd, params));
  else r.grad = add(r.grad, mul(params, wd));
  return r;
}

void Optimizer::build_groups(std::vector<ParamGroup> param_groups) {
  if (lr_ < 0) throw Error(fmt::format("optimizer: learning rate must be >= 0, got {}", lr_));
  std::map<const nn::Slot*, size_t> seen;  // parameter -> its group
  std::set<std::string> names;
  for (size_t pg = 0; pg < param_groups.size(); ++pg) {
    const ParamGroup& group = param_groups[pg];
    if (group.lr && (*group.lr < 0 || (lr_ == 0 && *group.lr != 0)))
      throw Error(fmt::format("optimizer: parameter group {} has learning rate {} (needs >= 0, and an optimizer "
                              "rate > 0 to be relative to)",
                              pg, *group.lr));
    for (auto& np : group.params) {
      if (!np.param.defined()) continue;
      auto [found, inserted] = seen.emplace(np.param.identity(), pg);
      if (!inserted) {
        if (found->second != pg)
          throw Error(fmt::format("optimizer: parameter {} is in parameter groups {} and {}", np.name, found->second, pg));
        continue;  // shared (tied) parameter: optimized once
      }
      if (!names.insert(np.name).second)
        throw Error(fmt::format("optimizer: two parameters are named {}; names key the state dict", np.name));
      const Array& v = np.param.array();
      if (!is_floating(v.dtype()))
        throw Error(fmt::format("optimizer: parameter {} has dtype {}; only floating parameters can be optimized",
                                np.name, dtype_name(v.dtype())));
      auto it = std::find_if(groups_.begin(), groups_.end(), [&](const Group& g) {
        return g.param_group == pg && g.dtype == v.dtype() && g.device == v.device();
      });
      if (it == groups_.end()) {
        groups_.push_back(Group{.dtype = v.dtype(),
                                .device = v.device(),
                                .param_group = pg,
                                .lr_scale = group.lr ? (lr_ > 0 ? *group.lr / lr_ : 0.0) : 1.0,
                                .weight_decay = group.weight_decay});
        it = groups_.end() - 1;
      }
      Entry e{.param = np.param, .name = np.name, .offset = it->numel, .numel = v.numel(), .shape = v.shape()};
      it->numel += e.numel;
      it->entries.push_back(std::move(e));
    }
  }
  std::vector<Array> all;
  for (Group& g : groups_) {
    refresh_flat(g);
    all.push_back(g.flat);
  }
  eval(all);
  for (Group& g : groups_) install_views(g);
}

// State starts at state_initial_value (zero unless overridden); created on first use (state_names is virtual: not callable while the
// base class is being constructed).
void Optimizer::ensure_state() {
  if (state_ready_) return;
  for (Group& g : groups_)
    for (const std::string& s : state_names())
      g.state[s] = full({g.numel}, state_initial_value(s), {.dtype = g.dtype, .device = g.device});
  state_ready_ = true;
}

// Rebuilds the flat arena from the parameters' current values when any was replaced from outside
// (load_state_dict, to(device), a user's set()); otherwise the arena is already current.
void Optimizer::refresh_flat(Group& g) {
  bool current = g.flat.defined();
  for (const Entry& e : g.entries) current = current && e.param.array().node().get() == e.installed;
  if (current) return;
  std::vector<Array> parts;
  for (const Entry& e : g.entries) {
    const Array& v = e.param.array();
    if (v.shape() != e.shape || v.dtype() != g.dtype || v.device() != g.device)
      throw Error(fmt::format("optimizer: parameter {} changed from {} {} on {} to {} {} on {}; create the optimizer "
                              "after moving or casting the model",
                              e.name, e.shape.str(), dtype_name(g.dtype), g.device.str(), v.shape().str(),
                              dtype_name(v.dtype()), v.device().str()));
    parts.push_back(reshape(v.detach(), {e.numel}));
  }
  g.flat = parts.size() == 1 ? contiguous(parts[0]) : cat(parts, 0);
}

void Optimizer::install_views(Group& g) {
  for (Entry& e : g.entries) {
    Array view = reshape(slice(g.flat, 0, e.offset, e.offset + e.numel), e.shape);
    e.param.set(view);
    e.installed = e.param.array().node().get();
  }
}

void Optimizer::step(const Gradients& grads) {
  ensure_state();
  ++step_;
  NoGradGuard no_grad;
  struct Flat {
    Array grad;
    Array mask;  // undefined when every parameter of the group has a gradient
  };
  std::vector<Flat> flats(groups_.size());
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    Group& g = groups_[gi];
    refresh_flat(g);
    std::vector<Array> parts, mask_parts;
    bool missing = false;
    for (const Entry& e : g.entries) {
      Array grad = e.param.trainable() ? grads.get(e.param.array()) : Array();
      if (grad.defined()) {
        if (grad.dtype() != g.dtype) grad = cast(grad, g.dtype);
        parts.push_back(reshape(grad, {e.numel}));
        mask_parts.push_back(full({e.numel}, true, {.dtype = DType::Bool, .device = g.device}));
      } else {
        missing = true;
        parts.push_back(zeros({e.numel}, {.dtype = g.dtype, .device = g.device}));
        mask_parts.push_back(full({e.numel}, false, {.dtype = DType::Bool, .device = g.device}));
      }
    }
    flats[gi].grad = parts.size() == 1 ? parts[0] : cat(parts, 0);
    if (missing) flats[gi].mask = mask_parts.size() == 1 ? mask_parts[0] : cat(mask_parts, 0);
  }

  if (clip_.max_value) {
    double v = *clip_.max_value;
    for (Flat& f : flats) f.grad = clamp(f.grad, -v, v);
  }
  last_norm_ = Array();
  if (clip_.max_norm) {
    Array sq;
    for (Flat& f : flats) {
      Array gn = cast(f.grad, norm_dtype(f.grad.dtype()));
      Array s = sum(mul(gn, gn));
      sq = sq.defined() ? add(sq, s) : s;
    }
    if (sq.defined()) {
      last_norm_ = sqrt(sq);
      Array scale = clamp(div(*clip_.max_norm, add(last_norm_, 1e-6)), std::nullopt, 1.0);
      for (Flat& f : flats) f.grad = mul(f.grad, cast(scale, f.grad.dtype()));
    }
  }

  std::vector<Array> realize, previous;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    Group& g = groups_[gi];
    previous.push_back(g.flat);
    std::map<std::string, Array> old_state = g.state;
    Array updated = update(g, g.flat, flats[gi].grad, step_);
    if (flats[gi].mask.defined()) {
      updated = where(flats[gi].mask, updated, g.flat);
      for (auto& [name, a] : g.state) a = where(flats[gi].mask, a, old_state.at(name));
    }
    g.flat = updated;
    realize.push_back(g.flat);
    for (auto& [name, a] : g.state) realize.push_back(a);
  }
  if (last_norm_.defined()) realize.push_back(last_norm_);
  for (const nn::ParamRef& b : buffers_) realize.push_back(b.array());
  // The step waits for its result: an error anywhere in the forward or backward pass (an index
  // out of range, a bad class label) surfaces here, naming the op and line that failed, and the
  // parameters stay as they were (their arena is never donated: the parameters are views of it,
  // and the views are replaced only after the update succeeded). The optimizer's state of a failed
  // step is gone (its buffers may have been donated to the update): it starts again from its
  // initial value. A training loop reads its loss every step anyway, which waits as long.
  std::vector<NodePtr> nodes;
  for (const Array& a : realize) nodes.push_back(a.node());
  try {
    realize_and_wait(nodes);
  } catch (const Error& e) {
    // The first failed root throws; the others of the plan may still be finishing (or failing).
    for (const NodePtr& n : nodes) {
      try {
        realize_and_wait({n});
      } catch (const Error&) {
      }
    }
    for (size_t gi = 0; gi < groups_.size(); ++gi) {
      Group& g = groups_[gi];
      g.flat = previous[gi];
      for (auto& [name, a] : g.state)
        if (failure_of(*a.node()))
          a = full({g.numel}, state_initial_value(name), {.dtype = g.dtype, .device = g.device});
    }
    --step_;
    last_norm_ = Array();
    throw Error(fmt::format("optimizer step: {} (the parameters are unchanged)", e.what()));
  }
  for (Group& g : groups_) install_views(g);
}

nn::StateDict Optimizer::state_dict() {
  ensure_state();
  nn::StateDict out;
  out["step"] = from_vector<int64_t>({step_}, {1});
  for (const Group& g : groups_)
    for (const auto& [sname, flat] : g.state)
      for (const Entry& e : g.entries)
        out[e.name + "." + sname] = reshape(slice(flat, 0, e.offset, e.offset + e.numel), e.shape);
  return out;
}

void Optimizer::load_state_dict(const nn::StateDict& state) {
  ensure_state();
  std::vector<std::string> problems;
  auto step_it = state.find("step");
  if (step_it == state.end() || step_it->second.numel() != 1) problems.push_back("missing key: step");
  std::set<std::string> used{"step"};
  std::vector<std::pair<Group*, std::pair<std::string, Array>>> updates;
  for (Group& g : groups_) {
    for (const auto& [sname, flat] : g.state) {
      std::vector<Array> parts;
      for (const Entry& e : g.entries) {
        std::string key = e.name + "." + sname;
        auto it = state.find(key);
        if (it == state.end()) {
          problems.push_back("missing key: " + key);
          continue;
        }
        used.insert(key);
        if (it->second.shape() != e.shape) {
          problems.push_back(fmt::format("mis-shaped key: {} (expected {}, got {})", key, e.shape.str(),
                                         it->second.shape().str()));
          continue;
        }
        Array v = it->second;
        if (v.dtype() != g.dtype) v = cast(v, g.dtype);
        if (v.device() != g.device) v = to_device(v, g.device);
        parts.push_back(reshape(v, {e.numel}));
      }
      if (parts.size() == g.entries.size())
        updates.push_back({&g, {sname, parts.size() == 1 ? contiguous(parts[0]) : cat(parts, 0)}});
    }
  }
  for (const auto& [key, v] : state)
    if (!used.count(key)) problems.push_back("unexpected key: " + key);
  if (!problems.empty()) {
    std::string msg = fmt::format("{}::load_state_dict: the state does not match this optimizer:", type_name());
    for (const std::string& p : problems) msg += "\n  " + p;
    throw Error(msg);
  }
  step_ = step_it->second.item<int64_t>();
  std::vector<Array> all;
  for (auto& [g, kv] : updates) {
    g->state[kv.first] = kv.second;
    all.push_back(kv.second);
  }
  eval(all);
}

// ---- free-standing clipping ----------------------------------------------------------------

Array clip_grad_norm(Gradients& grads, const std::vector<nn::ParamRef>& params, double max_norm) {
  NoGradGuard no_grad;
  Array sq;
  std::vector<std::pair<Array, Array>> present;  // (leaf, grad)
  for (const nn::ParamRef& p : params) {
    Array g = grads.get(p.array());
    if (!g.defined()) continue;
    present.emplace_back(p.array(), g);
    Array gf = cast(g, norm_dtype(g.dtype()));
    Array s = sum(mul(gf, gf));
    sq = sq.defined() ? add(sq, s) : s;
  }
  if (!sq.defined()) return zeros(Shape{}, TensorOptions{});
  Array norm = sqrt(sq);
  Array scale = clamp(div(max_norm, add(norm, 1e-6)), std::nullopt, 1.0);
  for (auto& [leaf, g] : present) {
    grads.remove(leaf);
    grads.accumulate(leaf, mul(g, cast(scale, g.dtype())));
  }
  return norm;
}

void clip_grad_value(Gradients& grads, const std::vector<nn::ParamRef>& params, double max_value) {
  NoGradGuard no_grad;
  for (const nn::ParamRef& p : params) {
    Array g = grads.get(p.array());
    if (!g.defined()) continue;
    grads.remove(p.array());
    grads.accumulate(p.array(), clamp(g, -max_value, max_value));
  }
}

}  // namespace ember::optim
