// The module system: walking a module tree by name, devices, modes, freezing, summaries and
// state dicts (include/ember/nn/module.h).
#include "ember/nn/module.h"
#include "nn/layer_error.h"

#include "autograd/grad_node.h"
#include "ember/autocast.h"

#include <cxxabi.h>
#include <fmt/format.h>

#include <cstdlib>
#include <set>
#include <typeinfo>

namespace ember::nn {

// ---- ParamRef ------------------------------------------------------------------------------

void ParamRef::set(const Array& value) const {
  if (!slot_) throw nn_error("Param::set: the parameter is empty (default-constructed)");
  bool grad = slot_->trainable && !slot_->is_buffer && value.defined() && is_floating(value.dtype());
  if (grad && value.requires_grad()) {
    // A leaf the caller made with require_grad() becomes the parameter itself (as assigning an
    // nn.Parameter in PyTorch): its gradient in a backward pass is the parameter's. A value with
    // history cannot be a parameter; detaching it silently would cut the caller's gradient.
    if (value.grad_node()->is_leaf) {
      slot_->value = value;
      return;
    }
    throw nn_error(fmt::format("Param::set: the value {} {} was computed from tensors that require grad; a parameter "
                            "must be a leaf. Pass value.detach() (or compute it under NoGradGuard) to start a new "
                            "parameter from its data, or a leaf made with require_grad() to share it",
                            dtype_name(value.dtype()), value.shape().str()));
  }
  slot_->value = grad ? value.detach().require_grad() : value.detach();
}

void ParamRef::set_trainable(bool on) const {
  if (!slot_ || slot_->is_buffer) return;
  slot_->trainable = on;
  set(slot_->value);
}

ParamRef make_param(const Array& init) {
  ParamRef p(std::make_shared<Slot>());
  p.set(init);
  return p;
}

ParamRef make_buffer(const Array& init) { return ParamRef(std::make_shared<Slot>(Slot{init.detach(), false, true})); }

// ---- input checks --------------------------------------------------------------------------

namespace {
// The enumerator as written in C++ (F32, BF16, Bool), for the hint in the message.
std::string_view dtype_enumerator(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F64: return "F64";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::U8: return "U8";
    case DType::Bool: return "Bool";
    case DType::I8: return "I8";
    case DType::I16: return "I16";
    case DType::U16: return "U16";
    case DType::U32: return "U32";
    case DType::U64: return "U64";
  }
  return "?";
}
}  // namespace

void check_input_dtype(std::string_view layer, const Array& input, const ParamRef& param, std::string_view param_name,
                       Loc loc) {
  if (!param.defined() || !input.defined()) return;
  DType want = param.array().dtype();
  DType got = input.dtype();
  if (got == want) return;
  // Under autocast f32 layers take low-precision activations (and cast their weights per op).
  if (autocast_dtype() && want == DType::F32 && got == *autocast_dtype()) return;
  // A floating input could be met either way; an integer one only by converting it.
  std::string model_hint = is_floating(got) ? fmt::format(", or the model, model.to(DType::{})", dtype_enumerator(got)) : "";
  throw Error(with_location(fmt::format("{}: input dtype {} does not match the layer's {} dtype {} (layers do not "
                                       "promote; convert the input, x.to_dtype(DType::{}){})",
                                       layer, dtype_name(got), param_name, dtype_name(want), dtype_enumerator(want),
                                       model_hint),
                           loc));
}

// ---- walking -------------------------------------------------------------------------------

namespace {

// Visits a tree with dotted names; calls the callbacks for parameters/buffers and modules.
class PathVisitor : public Visitor {
 public:
  std::function<void(const std::string&, ParamRef&)> on_value;
  std::function<void(const std::string&, Module&)> on_module;

  void param(const std::string& name, ParamRef& p) override {
    if (on_value) on_value(full(name), p);
  }
  void buffer(const std::string& name, ParamRef& b) override {
    if (on_value) on_value(full(name), b);
  }
  void module(const std::string& name, Module& m) override {
    std::string path = full(name);
    if (on_module) on_module(path, m);
    std::string saved = prefix_;
    prefix_ = path + ".";
    m.visit(*this);
    prefix_ = saved;
  }

 private:
  std::string full(const std::string& name) const { return prefix_ + name; }
  std::string prefix_;
};

std::string demangle(const char* name) {
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string s = status == 0 && out ? out : name;
  std::free(out);
  auto colon = s.rfind("::");
  if (colon != std::string::npos) s = s.substr(colon + 2);
  return s;
}

}  // namespace

namespace detail {
std::vector<std::string> split_field_names(std::string_view names) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : names) {
    if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else if (c != ' ' && c != '\t' && c != '\n') {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}
}  // namespace detail

std::string Module::type_name() const { return demangle(typeid(*this).name()); }

void Module::walk(const std::function<void(const std::string&, ParamRef&)>& fn) {
  PathVisitor v;
  v.on_value = fn;
  visit(v);
}

void Module::walk_modules(const std::function<void(const std::string&, Module&)>& fn) {
  PathVisitor v;
  v.on_module = fn;
  visit(v);
}

std::vector<NamedParam> Module::named_parameters() {
  std::vector<NamedParam> out;
  std::set<const Slot*> seen;  // a parameter shared by two submodules is listed once
  walk([&](const std::string& name, ParamRef& p) {
    if (!p.is_buffer() && seen.insert(p.identity()).second) out.push_back({name, p});
  });
  return out;
}

std::vector<NamedParam> Module::named_buffers() {
  std::vector<NamedParam> out;
  walk([&](const std::string& name, ParamRef& p) {
    if (p.is_buffer()) out.push_back({name, p});
  });
  return out;
}

std::vector<ParamRef> Module::parameters() {
  std::vector<ParamRef> out;
  for (auto& np : named_parameters()) out.push_back(np.param);
  return out;
}

int64_t Module::num_params(bool trainable_only) {
  int64_t n = 0;
  for (auto& np : named_parameters())
    if (!trainable_only || np.param.trainable()) n += np.param.array().numel();
  return n;
}

// ---- devices, dtypes, modes ------------------------------------------------------------------

Module& Module::to(Device device) {
  NoGradGuard no_grad;  // moving a parameter is not part of its history
  std::set<const Slot*> done;
  walk([&](const std::string&, ParamRef& p) {
    if (!done.insert(p.identity()).second) return;
    if (p.array().device() != device) p.set(to_device(p.array(), device));
  });
  return *this;
}

Module& Module::to(DType dtype) {
  if (!is_floating(dtype)) throw nn_error(fmt::format("Module::to: {} is not a floating dtype", dtype_name(dtype)));
  NoGradGuard no_grad;
  std::set<const Slot*> done;
  walk([&](const std::string&, ParamRef& p) {
    if (!done.insert(p.identity()).second) return;
    if (is_floating(p.array().dtype()) && p.array().dtype() != dtype) p.set(cast(p.array(), dtype));
  });
  return *this;
}

Module& Module::train(bool on) {
  training_ = on;
  walk_modules([&](const std::string&, Module& m) { m.training_ = on; });
  return *this;
}

Module& Module::freeze() {
  for (auto& np : named_parameters()) np.param.set_trainable(false);
  return *this;
}

Module& Module::unfreeze() {
  for (auto& np : named_parameters()) np.param.set_trainable(true);
  return *this;
}

// ---- summary -------------------------------------------------------------------------------

std::string Module::summary() {
  std::string out = fmt::format("{:<36} {:<22} {:<20} {:>12}\n", "name", "type", "shape", "params");
  out += std::string(93, '-') + "\n";
  int64_t total = 0, trainable = 0, buffers = 0;
  PathVisitor v;
  v.on_module = [&](const std::string& name, Module& m) {
    int64_t n = m.num_params();
    out += fmt::format("{:<36} {:<22} {:<20} {:>12}\n", name, m.type_name(), "", n);
  };
  v.on_value = [&](const std::string& name, ParamRef& p) {
    int64_t n = p.array().numel();
    std::string kind = p.is_buffer() ? "buffer" : (p.trainable() ? "param" : "param (frozen)");
    out += fmt::format("{:<36} {:<22} {:<20} {:>12}\n", name, kind, p.array().shape().str(), n);
    if (p.is_buffer()) {
      buffers += n;
    } else {
      total += n;
      if (p.trainable()) trainable += n;
    }
  };
  visit(v);
  out += std::string(93, '-') + "\n";
  out += fmt::format("{}: {} parameters ({} trainable, {} frozen), {} buffer elements\n", type_name(), total,
                     trainable, total - trainable, buffers);
  return out;
}

// ---- state dicts ---------------------------------------------------------------------------

StateDict Module::state_dict() {
  StateDict out;
  walk([&](const std::string& name, ParamRef& p) { out.emplace(name, p.array().detach()); });
  return out;
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  std::vector<std::string> missing, mis_shaped;
  std::set<std::string> known;
  std::vector<std::pair<ParamRef, Array>> updates;
  walk([&](const std::string& name, ParamRef& p) {
    known.insert(name);
    auto it = state.find(name);
    if (it == state.end()) {
      missing.push_back(name);
      return;
    }
    const Array& v = it->second;
    if (!v.defined() || v.shape() != p.array().shape()) {
      mis_shaped.push_back(fmt::format("{} (expected {}, got {})", name, p.array().shape().str(),
                                       v.defined() ? v.shape().str() : "nothing"));
      return;
    }
    Array converted = v;
    if (converted.dtype() != p.array().dtype()) converted = cast(converted, p.array().dtype());
    if (converted.device() != p.array().device()) converted = to_device(converted, p.array().device());
    updates.emplace_back(p, converted);
  });
  std::vector<std::string> unexpected;
  for (const auto& [name, value] : state)
    if (!known.count(name)) unexpected.push_back(name);
  auto join = [](const std::vector<std::string>& names) {
    std::string s;
    for (size_t i = 0; i < names.size(); ++i) s += (i ? ", " : "") + names[i];
    return s;
  };
  std::string problems;
  if (!mis_shaped.empty()) problems += "\n  mis-shaped keys: " + join(mis_shaped);
  if (strict && !missing.empty()) problems += "\n  missing keys: " + join(missing);
  if (strict && !unexpected.empty()) problems += "\n  unexpected keys: " + join(unexpected);
  if (!problems.empty())
    throw nn_error(fmt::format("load_state_dict: the state does not match {}:{}", type_name(), problems));
  for (auto& [p, v] : updates) p.set(v);
}

}  // namespace ember::nn
