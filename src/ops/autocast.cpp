// Autocast: the thread-local mode, its RAII guard and the casting of operands by policy.
#include "ops/autocast.h"

#include <fmt/format.h>

#include "ops/frontend.h"

namespace ember {

namespace detail {
thread_local uint8_t t_autocast_state = 0;
}  // namespace detail

namespace {
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
AutocastGuard::~AutocastGuard() { detail::t_autocast_state = dtype_state(previous_); }

Array autocast_f32(const Array& x, Loc loc) {
  if (!autocast_active() || !x.defined() || !is_low_float(x.dtype())) return x;
  return cast(x, DType::F32, loc);
}

Array autocast_low(const Array& x, Loc loc) {
  if (!autocast_active() || !x.defined() || x.dtype() != DType::F32) return x;
  return cast(x, *autocast_dtype(), loc);
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
    if (a.defined() && policy == AutocastPolicy::Low && a.dtype() == DType::F32) out.push_back(cast(a, low, loc));
    else if (a.defined() && policy == AutocastPolicy::F32 && is_low_float(a.dtype())) out.push_back(cast(a, DType::F32, loc));
    else out.push_back(a);
  }
  return out;
}

}  // namespace ember
