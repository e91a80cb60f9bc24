// Autocast: the thread-local mode, its RAII guard and the casting of operands by policy.
#include "ops/autocast.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>

#include "autograd/grad_node.h"
#include "ember/autograd.h"
#include "ops/frontend.h"

namespace ember {

namespace detail {
thread_local uint8_t t_autocast_state = 0;
}  // namespace detail

namespace {

// The low-precision copies of parameters made in this thread's autocast scope (PyTorch keeps the
// same cache): a weight used several times in one forward (an RNN's recurrent weights at every
// time step, tied embeddings) is cast once. Only leaves of differentiation (parameters) are
// cached, so activations never stay alive here. An entry is reused while its source is the same
// node (an optimizer step replaces a parameter's node, so the next step casts the new values),
// while its cast's backward node has not been released by a backward pass (that cast cannot be
// differentiated again), and, with grad mode on, only if it was recorded for autograd. Cleared
// when the outermost scope ends.
struct CachedCast {
  std::weak_ptr<Node> source;
  Array low;
};
thread_local std::map<std::pair<const Node*, DType>, CachedCast> t_cast_cache;
thread_local size_t t_cast_cache_sweep_at = 64;

bool reusable(const CachedCast& c, const Array& x) {
  if (c.source.lock() != x.node()) return false;
  const std::shared_ptr<autograd::GradNode>& g = c.low.grad_node();
  if (!g) return !grad_enabled();
  std::lock_guard lock(g->mutex);
  return !g->released;
}

Array cast_low(const Array& x, DType low, Loc loc) {
  const bool parameter = x.grad_node() && x.grad_node()->is_leaf;
  if (!parameter) return cast(x, low, loc);
  const auto key = std::make_pair(x.node().get(), low);
  auto it = t_cast_cache.find(key);
  if (it != t_cast_cache.end() && reusable(it->second, x)) return it->second.low;
  Array y = cast(x, low, loc);
  if (t_cast_cache.size() >= t_cast_cache_sweep_at) {  // drop entries whose parameter moved on
    std::erase_if(t_cast_cache, [](const auto& kv) { return kv.second.source.expired(); });
    t_cast_cache_sweep_at = std::max<size_t>(64, 2 * t_cast_cache.size());
  }
  t_cast_cache[key] = CachedCast{x.node(), y};
  return y;
}

std::optional<DType> state_dtype(uint8_t s) {
  if (s == 0) return std::nullopt;
  return DType(s - 1);
}
uint8_t dtype_state(std::optional<DType> d) { return d ? uint8_t(uint8_t(*d) + 1) : uint8_t(0); }
bool is_low_float(DType d) { return d == DType::BF16 || d == DType::F16; }
}  // namespace

const char* autocast_policy_name(AutocastPolicy p) {
  switch (p) {
    case AutocastPolicy::Low: return "low";
    case AutocastPolicy::F32: return "f32";
    case AutocastPolicy::Follow: return "follow";
  }
  return "?";
}

AutocastPolicy autocast_policy(Op op) {
  switch (op) {
#define EMBER_AUTOCAST(Name, policy) \
  case Op::Name: return AutocastPolicy::policy;
#include "ops/autocast_policy.def"
    default: return AutocastPolicy::Follow;
  }
}

std::optional<DType> autocast_dtype() { return state_dtype(detail::t_autocast_state); }

AutocastGuard::AutocastGuard(AutocastOptions opts) : previous_(autocast_dtype()) {
  if (opts.enabled && !is_low_float(opts.dtype))
    throw Error(fmt::format("autocast: dtype must be bfloat16 or float16, got {}", dtype_name(opts.dtype)));
  detail::t_autocast_state = opts.enabled ? dtype_state(opts.dtype) : 0;
}
AutocastGuard::~AutocastGuard() {
  detail::t_autocast_state = dtype_state(previous_);
  if (!previous_) {
    t_cast_cache.clear();
    t_cast_cache_sweep_at = 64;
  }
}

Array autocast_f32(const Array& x, Loc loc) {
  if (!autocast_active() || !x.defined() || !is_low_float(x.dtype())) return x;
  return cast(x, DType::F32, loc);
}

Array autocast_low(const Array& x, Loc loc) {
  if (!autocast_active() || !x.defined() || x.dtype() != DType::F32) return x;
  return cast_low(x, *autocast_dtype(), loc);
}

std::optional<std::vector<Array>> autocast_operands(Op op, const std::vector<Array>& operands, Loc loc) {
  if (!autocast_active()) return std::nullopt;
  AutocastPolicy policy = autocast_policy(op);
  if (policy == AutocastPolicy::Follow) return std::nullopt;
  const DType low = *autocast_dtype();
  bool changes = false;
  for (const Array& a : operands) {
    if (!a.defined()) continue;
    DType d = a.dtype();
    // An f64 operand keeps a contraction out of autocast (as PyTorch): the user asked for f64.
    if (policy == AutocastPolicy::Low && d == DType::F64) return std::nullopt;
    changes |= policy == AutocastPolicy::Low ? d == DType::F32 : is_low_float(d);
  }
  if (!changes) return std::nullopt;
  std::vector<Array> out;
  out.reserve(operands.size());
  for (const Array& a : operands) {
    if (a.defined() && policy == AutocastPolicy::Low && a.dtype() == DType::F32) out.push_back(cast_low(a, low, loc));
    else if (a.defined() && policy == AutocastPolicy::F32 && is_low_float(a.dtype())) out.push_back(cast(a, DType::F32, loc));
    else out.push_back(a);
  }
  return out;
}

}  // namespace ember
