// Anomaly detection (ember/anomaly.h): the process-wide switch, the check of a computed node's
// output against its inputs, and the first unreported anomaly. realize.cpp plans every node as
// its own kernel while the mode is on and calls check_anomaly after each one.
#include "graph/anomaly.h"

#include <fmt/format.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

#include "ember/anomaly.h"

namespace ember {

namespace {

std::atomic<bool>& anomaly_flag() {
  static std::atomic<bool> on = [] {
    const char* s = std::getenv("EMBER_DETECT_ANOMALY");
    return s && std::string(s) == "1";
  }();
  return on;
}

// The first anomaly found that no read or eval has thrown yet.
struct Unreported {
  std::mutex m;
  std::shared_ptr<const std::string> error;
  std::atomic<bool> set{false};
};
Unreported& unreported() {
  static auto* u = new Unreported;  // never destroyed: queue workers may check during exit
  return *u;
}

struct NonFinite {
  int64_t nan = 0, inf = 0;
  int64_t total() const { return nan + inf; }
};

void count_value(NonFinite& c, const unsigned char* p, DType dtype) {
  switch (dtype) {
    case DType::F32: {
      float v;
      std::memcpy(&v, p, sizeof v);
      c.nan += std::isnan(v);
      c.inf += std::isinf(v);
      break;
    }
    case DType::F64: {
      double v;
      std::memcpy(&v, p, sizeof v);
      c.nan += std::isnan(v);
      c.inf += std::isinf(v);
      break;
    }
    case DType::F16:
    case DType::BF16: {  // all-ones exponent: inf with a zero mantissa, NaN otherwise
      uint16_t bits;
      std::memcpy(&bits, p, sizeof bits);
      const uint16_t exponent = dtype == DType::F16 ? 0x7c00 : 0x7f80;
      const uint16_t mantissa = dtype == DType::F16 ? 0x03ff : 0x007f;
      if ((bits & exponent) == exponent) ((bits & mantissa) ? c.nan : c.inf) += 1;
      break;
    }
    default: break;  // integers and bools hold no NaN/inf
  }
}

// NaN/inf among the values of a realized node, read back through its view (every element of the
// node's shape, a broadcast element as often as it appears).
NonFinite count_nonfinite(const Node& n) {
  NonFinite c;
  const int64_t numel = n.shape.numel();
  if (numel == 0 || !n.view.buffer) return c;
  const size_t esize = dtype_size(n.dtype);
  const int rank = n.shape.rank();
  // The span of elements the view touches (strides may be zero or negative).
  int64_t lo = n.view.offset, hi = n.view.offset;
  for (int d = 0; d < rank; ++d) {
    const int64_t extent = (n.shape[d] - 1) * n.view.strides[size_t(d)];
    (extent < 0 ? lo : hi) += extent;
  }
  std::vector<unsigned char> host(size_t(hi - lo + 1) * esize);
  n.view.buffer->backend->read(*n.view.buffer, size_t(lo) * esize, host.data(), host.size());
  std::vector<int64_t> index(size_t(rank), 0);
  int64_t at = n.view.offset - lo;
  for (int64_t k = 0; k < numel; ++k) {
    count_value(c, host.data() + size_t(at) * esize, n.dtype);
    for (int d = rank - 1; d >= 0; --d) {  // next multi-index, last dim fastest
      at += n.view.strides[size_t(d)];
      if (++index[size_t(d)] < n.shape[d]) break;
      at -= n.shape[d] * n.view.strides[size_t(d)];
      index[size_t(d)] = 0;
    }
  }
  return c;
}

// Whether an input of a checked node holds NaN/inf; nullopt when it cannot be read (not computed:
// the node is then never blamed).
std::optional<bool> input_has_nonfinite(const Node& in) {
  if (!is_floating(in.dtype)) return false;
  if (in.op == Op::Full && !in.is_ready()) {  // a constant folded into its consumer
    double v = in.attrs.value.f;
    if (in.dtype == DType::F32) v = double(float(v));
    if (in.dtype == DType::F16) v = double(half_to_float(float_to_half(float(v))));
    if (in.dtype == DType::BF16) v = double(bf16_to_float(float_to_bf16(float(v))));
    return !std::isfinite(v);
  }
  if (!in.is_ready()) return std::nullopt;
  return count_nonfinite(in).total() > 0;
}

// "log (at model.cpp:12)", or "div in the backward of sqrt created at model.cpp:12" for a node a
// backward rule made (its own line is inside Ember; a custom function's rule is the user's, so
// "div (at model.cpp:30) in the backward of a custom function created at model.cpp:35").
std::string describe(const Node& n) {
  if (n.backward_of && n.backward_of == std::string_view(BackwardOrigin::kCustomFunction))
    return fmt::format("{} in the backward of {} created at {}", n.where(), n.backward_of,
                       format_location(n.backward_loc));
  if (n.backward_of)
    return fmt::format("{} in the backward of {} created at {}", op_name(n.op), n.backward_of,
                       format_location(n.backward_loc));
  return n.where();
}

}  // namespace

bool detect_anomaly_enabled() { return anomaly_flag().load(std::memory_order_relaxed); }
void set_detect_anomaly(bool on) { anomaly_flag().store(on, std::memory_order_relaxed); }

std::shared_ptr<const std::string> check_anomaly(const Node& n) {
  if (!is_floating(n.dtype) || n.inputs.empty() || op_info(n.op).kind == OpKind::Movement) return nullptr;
  const NonFinite out = count_nonfinite(n);
  if (out.total() == 0) return nullptr;
  for (const NodePtr& in : n.inputs) {
    std::optional<bool> has = input_has_nonfinite(*in);
    if (!has || *has) return nullptr;  // carried along (or unknown): not this node's doing
  }
  auto error = std::make_shared<const std::string>(fmt::format(
      "detect_anomaly: {} produced NaN/inf from inputs without any: {} of the {} values of its {} output of "
      "shape {} ({} NaN, {} inf)",
      describe(n), out.total(), n.shape.numel(), dtype_name(n.dtype), n.shape.str(), out.nan, out.inf));
  Unreported& u = unreported();
  std::lock_guard lock(u.m);
  if (!u.error) {
    u.error = error;
    u.set.store(true, std::memory_order_release);
  }
  return error;
}

void throw_unreported_anomaly() {
  Unreported& u = unreported();
  if (!u.set.load(std::memory_order_acquire)) return;
  std::shared_ptr<const std::string> error;
  {
    std::lock_guard lock(u.m);
    error = std::move(u.error);
    u.error.reset();
    u.set.store(false, std::memory_order_relaxed);
  }
  if (error) throw Error(*error);
}

}  // namespace ember
