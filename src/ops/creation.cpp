// Creation ops: constants, ranges, host data and counter-based random numbers.
#include <atomic>
#include <cmath>

#include "ember/ops_library.h"
#include "ops/frontend.h"
#include "ops/random_sequence.h"

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
std::atomic<uint64_t> restarts{0};

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// `seed`, else the next key of the global sequence.
uint64_t next_seed(std::optional<uint64_t> seed) {
  if (seed) return *seed;
  const RandomSequencePosition at = take_random_draws(1);
  return random_sequence_key(at.seed, at.draws);
}

Array random(Op op, const Shape& shape, double a, double b, const RandomOptions& opts, Loc loc) {
  const char* name = op_name(op);
  check_shape(shape, name, loc);
  if (!is_floating(opts.dtype))
    fail(name, fmt::format("needs a floating-point dtype, got {}", dtype_name(opts.dtype)), loc);
  OpAttrs attrs;
  attrs.f0 = a;
  attrs.f1 = b;
  attrs.seed = next_seed(opts.seed);
  return make_array(op, std::move(attrs), {}, shape, opts.dtype, opts.device, loc);
}
}  // namespace

void manual_seed(uint64_t seed) {
  global_seed.store(seed);
  draws.store(0);
  restarts.fetch_add(1);
}

RandomSequencePosition random_sequence_position() { return {global_seed.load(), draws.load(), restarts.load()}; }
uint64_t random_sequence_key(uint64_t seed, uint64_t draw) { return splitmix64(seed + draw); }
RandomSequencePosition take_random_draws(uint64_t n) {
  const uint64_t seed = global_seed.load();
  return {seed, draws.fetch_add(n), restarts.load()};
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

// ---- creation from other tensors, ranges, identity, one-hot, random integers ----------------
namespace ember {

Array full_like(const Array& x, Scalar value, std::optional<DType> dtype, Loc loc) {
  const NodePtr& n = node_of(x, "full_like", loc);
  return full(n->shape, value, {dtype.value_or(n->dtype), n->device}, loc);
}
Array zeros_like(const Array& x, std::optional<DType> dtype, Loc loc) { return full_like(x, 0, dtype, loc); }
Array ones_like(const Array& x, std::optional<DType> dtype, Loc loc) { return full_like(x, 1, dtype, loc); }

Array linspace(Scalar start, Scalar end, int64_t steps, TensorOptions opts, Loc loc) {
  if (steps < 0) fail("linspace", fmt::format("steps must be non-negative, got {}", steps), loc);
  if (!std::isfinite(start.f) || !std::isfinite(end.f))
    fail("linspace", fmt::format("start {} and end {} must be finite", start.f, end.f), loc);
  DType dt = opts.dtype.value_or(kDefaultFloat);
  if (dt == DType::Bool) fail("linspace", "not defined for bool", loc);
  // Integer dtypes: computed in f64, then truncated (as PyTorch).
  DType gen = is_floating(dt) ? dt : DType::F64;
  OpAttrs attrs;
  attrs.f0 = start.f;
  attrs.f1 = steps > 1 ? (end.f - start.f) / double(steps - 1) : 0;
  attrs.value = {end.f, steps};
  if (steps == 1) attrs.value.f = start.f;  // the single point is start
  Array r = make_array(Op::Linspace, std::move(attrs), {}, Shape{steps}, gen, opts.device, loc);
  return cast(r, dt, loc);
}

Array eye(int64_t n, std::optional<int64_t> m, TensorOptions opts, Loc loc) {
  int64_t cols = m.value_or(n);
  if (n < 0 || cols < 0) fail("eye", fmt::format("sizes must be non-negative, got {} x {}", n, cols), loc);
  Array r = arange(0, n, 1, DType::I64, opts.device, loc);
  Array c = arange(0, cols, 1, DType::I64, opts.device, loc);
  return cast(eq(unsqueeze(r, 1, loc), unsqueeze(c, 0, loc), loc), opts.dtype.value_or(kDefaultFloat), loc);
}

Array one_hot(const Array& index, int64_t num_classes, std::optional<DType> dtype, Loc loc) {
  const NodePtr& n = node_of(index, "one_hot", loc);
  if (!is_integral(n->dtype))
    fail("one_hot", fmt::format("index must have an integer dtype, got {}", dtype_name(n->dtype)), loc);
  if (num_classes <= 0) fail("one_hot", fmt::format("num_classes must be positive, got {}", num_classes), loc);
  if (n->shape.rank() >= kMaxRank) fail("one_hot", fmt::format("index rank {} leaves no room for the class dim", n->shape.rank()), loc);
  // Rows of the identity picked by a bounds-checked lookup.
  Array table = eye(num_classes, std::nullopt, {dtype.value_or(DType::I64), n->device}, loc);
  Array rows = index_select(table, 0, reshape(index, Shape{n->shape.numel()}, loc), loc);
  std::vector<int64_t> shape = n->shape.dims();
  shape.push_back(num_classes);
  return reshape(rows, Shape(shape), loc);
}

Array bernoulli(const Array& p, std::optional<uint64_t> seed, Loc loc) {
  const NodePtr& n = node_of(p, "bernoulli", loc);
  if (!is_floating(n->dtype))
    fail("bernoulli", fmt::format("p must be floating, got {}", dtype_name(n->dtype)), loc);
  DType u_dt = n->dtype == DType::F64 ? DType::F64 : DType::F32;
  Array u = uniform(n->shape, 0, 1, {.seed = next_seed(seed), .dtype = u_dt, .device = n->device}, loc);
  return cast(lt(u, cast(p, u_dt, loc), loc), n->dtype, loc);
}

Array bernoulli(const Shape& shape, double p, RandomOptions opts, Loc loc) {
  if (!(p >= 0 && p <= 1)) fail("bernoulli", fmt::format("p must be in [0, 1], got {}", p), loc);
  check_shape(shape, "bernoulli", loc);
  DType u_dt = opts.dtype == DType::F64 ? DType::F64 : DType::F32;
  Array u = uniform(shape, 0, 1, {.seed = next_seed(opts.seed), .dtype = u_dt, .device = opts.device}, loc);
  return cast(lt(u, p, loc), opts.dtype, loc);
}

Array randint(int64_t low, int64_t high, const Shape& shape, RandintOptions opts, Loc loc) {
  if (low >= high) fail("randint", fmt::format("low {} must be less than high {}", low, high), loc);
  if (opts.dtype == DType::Bool) fail("randint", "needs a numeric dtype, got bool", loc);
  check_shape(shape, "randint", loc);
  Array u = uniform(shape, 0, 1, {.seed = next_seed(opts.seed), .dtype = DType::F64, .device = opts.device}, loc);
  double range = double(high) - double(low);
  Array k = minimum(floor(mul(u, range, loc), loc), range - 1, loc);  // u < 1, but rounding may reach range
  return cast(add(cast(k, DType::I64, loc), low, loc), opts.dtype, loc);
}

Array randperm(int64_t n, RandintOptions opts, Loc loc) {
  if (n < 0) fail("randperm", fmt::format("n must be non-negative, got {}", n), loc);
  if (opts.dtype == DType::Bool) fail("randperm", "needs a numeric dtype, got bool", loc);
  std::vector<double> u = uniform({n}, 0, 1, {.seed = next_seed(opts.seed), .dtype = DType::F64, .device = opts.device}, loc)
                              .to_vector<double>();
  std::vector<int64_t> perm(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) perm[size_t(i)] = i;
  for (int64_t i = n - 1; i > 0; --i) {  // Fisher-Yates: swap i with j uniform in [0, i]
    int64_t j = std::min<int64_t>(int64_t(u[size_t(i)] * double(i + 1)), i);
    std::swap(perm[size_t(i)], perm[size_t(j)]);
  }
  return cast(from_vector(perm, Shape{n}, opts.device, loc), opts.dtype, loc);
}

// ---- multinomial ------------------------------------------------------------------------------
namespace {
// Raises the first problem of a weight matrix w [N, C] (f64), if any. The happy path reads one
// small summary from the device; the error paths read the weights to name the offending value.
void check_multinomial_weights(const Array& w, int64_t num_samples, bool replacement, Loc loc) {
  constexpr const char* op = "multinomial";
  Array bad = logical_or(logical_not(is_finite(w, loc), loc), lt(w, 0, loc), loc);
  Array nonzero_per_row = sum(cast(gt(w, 0, loc), DType::I64, loc), {1}, false, loc);
  Array row_sums = sum(w, {1}, false, loc);
  Array summary = stack({cast(sum(cast(bad, DType::I64, loc), {}, false, loc), DType::F64, loc),
                         cast(min(nonzero_per_row, {}, false, loc), DType::F64, loc)},
                        0, loc);
  std::vector<double> s = summary.to_vector<double>();
  const int64_t cols = w.shape()[1];
  if (s[0] > 0) {
    std::vector<double> values = w.to_vector<double>();
    for (size_t i = 0; i < values.size(); ++i)
      if (!std::isfinite(values[i]) || values[i] < 0)
        fail(op, fmt::format("probs must be finite and non-negative; row {} has {} at index {}",
                             int64_t(i) / cols, values[i], int64_t(i) % cols),
             loc);
  }
  if (s[1] >= double(replacement ? 1 : num_samples)) return;
  std::vector<int64_t> counts = nonzero_per_row.to_vector<int64_t>();
  std::vector<double> sums = row_sums.to_vector<double>();
  for (size_t r = 0; r < counts.size(); ++r) {
    if (counts[r] == 0)
      fail(op, fmt::format("row {} of probs sums to {} (every weight is zero); a row needs a positive weight",
                           r, sums[r]),
           loc);
    if (!replacement && counts[r] < num_samples)
      fail(op, fmt::format("cannot take {} samples without replacement from row {}, which has only {} "
                           "non-zero weights",
                           num_samples, r, counts[r]),
           loc);
  }
}
}  // namespace

Array multinomial(const Array& probs, int64_t num_samples, bool replacement, std::optional<uint64_t> seed, Loc loc) {
  constexpr const char* op = "multinomial";
  const NodePtr& n = node_of(probs, op, loc);
  const int rank = n->shape.rank();
  if (!is_floating(n->dtype)) fail(op, fmt::format("probs must be floating, got {}", dtype_name(n->dtype)), loc);
  if (rank != 1 && rank != 2) fail(op, fmt::format("probs must be 1-D or 2-D, got shape {}", n->shape.str()), loc);
  const int64_t rows = rank == 2 ? n->shape[0] : 1, cols = n->shape[rank - 1];
  if (num_samples <= 0) fail(op, fmt::format("num_samples must be positive, got {}", num_samples), loc);
  if (cols == 0) fail(op, fmt::format("probs of shape {} has no categories", n->shape.str()), loc);
  if (!replacement && num_samples > cols)
    fail(op, fmt::format("cannot take {} samples without replacement from {} categories", num_samples, cols), loc);
  const uint64_t draw_seed = next_seed(seed);
  Shape out_shape = rank == 2 ? Shape{rows, num_samples} : Shape{num_samples};
  if (rows == 0) return zeros(out_shape, {DType::I64, n->device}, loc);

  Array w = cast(rank == 1 ? unsqueeze(probs, 0, loc) : probs, DType::F64, loc);  // [N, C]
  check_multinomial_weights(w, num_samples, replacement, loc);
  Array index;
  if (replacement) {
    // Inverse CDF: the sample is the number of categories whose cumulative weight is <= u. Dividing
    // by the last column makes the row end exactly 1 > u, so trailing zero weights are never drawn.
    Array cdf = cumsum(w, 1, loc);
    cdf = div(cdf, slice(cdf, 1, cols - 1, cols, 1, loc), loc);
    Array u = uniform({rows, num_samples}, 0, 1, {.seed = draw_seed, .dtype = DType::F64, .device = n->device}, loc);
    Array below = le(unsqueeze(cdf, 1, loc), unsqueeze(u, 2, loc), loc);  // [N, S, C]
    index = sum(cast(below, DType::I64, loc), {2}, false, loc);
  } else {
    // The exponential race: category c finishes at E_c / w_c with E_c ~ Exp(1); the first
    // num_samples to finish, in order, have the law of successive draws without replacement.
    // Zero weights finish at +inf (never taken: each row has num_samples non-zero weights).
    Array u = uniform({rows, cols}, 0, 1, {.seed = draw_seed, .dtype = DType::F64, .device = n->device}, loc);
    Array finish = div(neg(log(u, loc), loc), w, loc);
    index = topk(finish, num_samples, 1, /*largest=*/false, /*sorted=*/true, loc).indices;
  }
  return reshape(cast(index, DType::I64, loc), out_shape, loc);
}

}  // namespace ember
