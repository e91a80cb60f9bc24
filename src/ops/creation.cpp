// Creation ops: constants, ranges, host data and counter-based random numbers.
#include <atomic>
#include <cmath>

#include "ops/frontend.h"

namespace ember {

static void check_shape(const Shape& shape, const char* op, Loc loc) {
  if (shape.rank() > kMaxRank) fail(op, fmt::format("rank {} exceeds the maximum of {}", shape.rank(), kMaxRank), loc);
  for (int64_t d : shape)
    if (d < 0) fail(op, fmt::format("negative size in shape {}", shape.str()), loc);
}

Array full(const Shape& shape, Scalar value, TensorOptions opts, Loc loc) {
  check_shape(shape, "full", loc);
  DType dtype = opts.dtype.value_or(kDefaultFloat);
  OpAttrs attrs;
  attrs.value = {value.f, value.i};
  if (value.category == DTypeCategory::Floating && !is_floating(dtype)) {
    if (!std::isfinite(value.f))
      fail("full", fmt::format("value {} cannot be represented in {}", value.f, dtype_name(dtype)), loc);
    attrs.value.i = int64_t(value.f);
  }
  return make_array(Op::Full, std::move(attrs), {}, shape, dtype, opts.device, loc);
}

Array zeros(const Shape& shape, TensorOptions opts, Loc loc) { return full(shape, 0, opts, loc); }
Array ones(const Shape& shape, TensorOptions opts, Loc loc) { return full(shape, 1, opts, loc); }

Array arange(Scalar start, Scalar end, Scalar step, std::optional<DType> dtype, Device device, Loc loc) {
  bool all_int = start.category != DTypeCategory::Floating && end.category != DTypeCategory::Floating &&
                 step.category != DTypeCategory::Floating;
  DType dt = dtype.value_or(all_int ? kDefaultInt : kDefaultFloat);
  if (step.f == 0) fail("arange", "step must be nonzero", loc);
  if ((end.f - start.f) * step.f < 0)
    fail("arange", fmt::format("step {} goes away from end {} when starting at {}", step.f, end.f, start.f), loc);
  int64_t n = all_int ? (end.i - start.i + step.i + (step.i > 0 ? -1 : 1)) / step.i
                      : int64_t(std::ceil((end.f - start.f) / step.f));
  OpAttrs attrs;
  attrs.f0 = start.f;
  attrs.f1 = step.f;
  return make_array(Op::Arange, std::move(attrs), {}, Shape{n}, dt, device, loc);
}

Array from_buffer(const void* data, const Shape& shape, DType dtype, Device device, Loc loc) {
  check_shape(shape, "from_data", loc);
  View v;
  size_t bytes = size_t(shape.numel()) * dtype_size(dtype);
  Backend& be = Backend::get(device.kind);
  v.buffer = be.alloc(device, bytes);
  if (bytes) be.write(*v.buffer, 0, data, bytes);
  v.strides = shape.contiguous_strides();
  return make_ready_array(Op::FromData, std::move(v), shape, dtype, device, loc);
}

// ---- random ---------------------------------------------------------------------------------
namespace {
std::atomic<uint64_t> global_seed{0x5eed5eed5eedULL};
std::atomic<uint64_t> draws{0};

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

Array random(Op op, const Shape& shape, double a, double b, const RandomOptions& opts, Loc loc) {
  const char* name = op_name(op);
  check_shape(shape, name, loc);
  if (!is_floating(opts.dtype))
    fail(name, fmt::format("needs a floating-point dtype, got {}", dtype_name(opts.dtype)), loc);
  OpAttrs attrs;
  attrs.f0 = a;
  attrs.f1 = b;
  attrs.seed = opts.seed ? *opts.seed : splitmix64(global_seed.load() + draws.fetch_add(1));
  return make_array(op, std::move(attrs), {}, shape, opts.dtype, opts.device, loc);
}
}  // namespace

void manual_seed(uint64_t seed) {
  global_seed.store(seed);
  draws.store(0);
}

Array uniform(const Shape& shape, double low, double high, RandomOptions opts, Loc loc) {
  if (!(low <= high)) fail("uniform", fmt::format("low {} is greater than high {}", low, high), loc);
  return random(Op::RandUniform, shape, low, high, opts, loc);
}

Array normal(const Shape& shape, double mean, double std, RandomOptions opts, Loc loc) {
  if (!(std >= 0)) fail("normal", fmt::format("std {} is negative", std), loc);
  return random(Op::RandNormal, shape, mean, std, opts, loc);
}

}  // namespace ember
