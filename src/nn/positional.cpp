// Sinusoidal and rotary position encodings (include/ember/nn/positional.h).
#include "ember/nn/positional.h"
#include "nn/layer_error.h"

#include <cmath>

#include "nn/json_util.h"

namespace ember::nn {

namespace {

std::vector<double> table_values(int64_t n, int64_t d, int64_t first = 0) {
  std::vector<double> v(size_t(n * d));
  for (int64_t j = 0; j < d; ++j) {
    double inv = std::pow(10000.0, -double(j - j % 2) / double(d));
    for (int64_t p = 0; p < n; ++p) {
      double angle = double(first + p) * inv;
      v[size_t(p * d + j)] = j % 2 == 0 ? std::sin(angle) : std::cos(angle);
    }
  }
  return v;
}

}  // namespace

Array sinusoidal_table(int64_t n, int64_t d, DType dtype, Device device) {
  if (n <= 0 || d <= 0) throw nn_error(fmt::format("sinusoidal_table: sizes must be positive, got [{}, {}]", n, d));
  return cast(from_vector(table_values(n, d), {n, d}, device), dtype);
}

SinusoidalPositionalEncoding::SinusoidalPositionalEncoding(SinusoidalPositionalEncodingOptions opts)
    : dropout({.p = opts.dropout, .seed = opts.seed}), options(opts) {
  if (opts.d_model <= 0 || opts.max_len <= 0)
    throw nn_error(fmt::format("SinusoidalPositionalEncoding: d_model and max_len must be positive, got {} and {}",
                            opts.d_model, opts.max_len));
  table_ = table_values(opts.max_len, opts.d_model);
}

Array SinusoidalPositionalEncoding::forward(const Array& x, int64_t offset, Loc loc) {
  UserCall call("SinusoidalPositionalEncoding", loc);
  const int64_t d = options.d_model;
  const bool ok = (x.rank() == 2 || x.rank() == 3) && x.size(-1) == d && is_floating(x.dtype());
  if (!ok)
    throw call.error(fmt::format("expected a floating {} or [L, {}], got {} {}",
                            options.batch_first ? fmt::format("[N, L, {}]", d) : fmt::format("[L, N, {}]", d), d,
                            dtype_name(x.dtype()), x.shape().str()));
  const bool seq_first = x.rank() == 3 && !options.batch_first;
  const int64_t L = seq_first ? x.size(0) : x.size(-2);
  if (offset < 0 || offset + L > options.max_len)
    throw call.error(fmt::format("positions {}..{} exceed max_len {}", offset, offset + L - 1, options.max_len));
  std::vector<double> rows(table_.begin() + offset * d, table_.begin() + (offset + L) * d);
  Array pe = cast(from_vector(rows, seq_first ? Shape({L, 1, d}) : Shape({L, d}), x.device()), x.dtype());
  return dropout.forward(add(x, pe));
}

Array apply_rotary(const Array& x, const RotaryOptions& o, Loc loc) {
  UserCall call("apply_rotary", loc);
  if (x.rank() < 2 || x.size(-1) % 2 || !is_floating(x.dtype()))
    throw nn_error(fmt::format("apply_rotary: expected a floating [..., L, D] with D even, got {} {}",
                            dtype_name(x.dtype()), x.shape().str()));
  if (!(o.base > 0)) throw nn_error(fmt::format("apply_rotary: base must be positive, got {}", o.base));
  const int64_t L = x.size(-2), D = x.size(-1), h = D / 2;
  const int r = x.rank();
  Array pos;
  if (o.positions.defined()) {
    if (o.positions.rank() < 1 || o.positions.size(-1) != L)
      throw nn_error(fmt::format("apply_rotary: positions {} must end in L = {} (x {})", o.positions.shape().str(), L,
                              x.shape().str()));
    pos = cast(o.positions, x.dtype());
  } else {
    pos = cast(arange(o.offset, o.offset + L, 1, DType::F64, x.device()), x.dtype());
  }
  std::vector<double> inv(size_t(h), 0.0);
  for (int64_t i = 0; i < h; ++i) inv[size_t(i)] = std::pow(o.base, -double(2 * i) / double(D));
  Array angle = mul(unsqueeze(pos, -1), cast(from_vector(inv, {h}, x.device()), x.dtype()));  // [..., L, h]
  Array c = cos(angle), s = sin(angle);
  if (o.interleaved) {
    std::vector<int64_t> dims = x.shape().dims();
    dims.back() = h;
    dims.push_back(2);
    Array pairs = reshape(x, Shape(dims));
    Array a = select(pairs, r, 0), b = select(pairs, r, 1);
    Array y = stack({sub(mul(a, c), mul(b, s)), add(mul(a, s), mul(b, c))}, r);
    return reshape(y, x.shape());
  }
  Array a = narrow(x, r - 1, 0, h), b = narrow(x, r - 1, h, h);
  return cat({sub(mul(a, c), mul(b, s)), add(mul(a, s), mul(b, c))}, r - 1);
}

RotaryEmbedding::RotaryEmbedding(RotaryEmbeddingOptions opts) : options(opts) {
  if (opts.dim <= 0 || opts.dim % 2)
    throw nn_error(fmt::format("RotaryEmbedding: dim must be positive and even, got {}", opts.dim));
}

Array RotaryEmbedding::forward(const Array& x, int64_t offset, Loc loc) {
  UserCall call("RotaryEmbedding", loc);
  if (x.rank() < 2 || x.size(-1) != options.dim)
    throw call.error(fmt::format("expected [..., L, {}], got {}", options.dim, x.shape().str()));
  return apply_rotary(x, {.offset = offset, .base = options.base, .interleaved = options.interleaved});
}

Array RotaryEmbedding::forward(const Array& x, const Array& positions, Loc loc) {
  UserCall call("RotaryEmbedding", loc);
  if (x.rank() < 2 || x.size(-1) != options.dim)
    throw call.error(fmt::format("expected [..., L, {}], got {}", options.dim, x.shape().str()));
  return apply_rotary(x, {.positions = positions, .base = options.base, .interleaved = options.interleaved});
}

std::string SinusoidalPositionalEncodingOptions::to_json() const {
  json j{{"d_model", d_model}, {"max_len", max_len}, {"dropout", dropout}, {"batch_first", batch_first}};
  if (seed) j["seed"] = *seed;
  return j.dump();
}

SinusoidalPositionalEncodingOptions SinusoidalPositionalEncodingOptions::from_json(const std::string& text) {
  json j = parse_json(text, "SinusoidalPositionalEncodingOptions");
  SinusoidalPositionalEncodingOptions o;
  read_field(j, "d_model", o.d_model);
  read_field(j, "max_len", o.max_len);
  read_field(j, "dropout", o.dropout);
  read_field(j, "batch_first", o.batch_first);
  read_optional(j, "seed", o.seed);
  reject_unknown_keys(j, o.to_json(), "SinusoidalPositionalEncodingOptions");
  return o;
}

std::string RotaryEmbeddingOptions::to_json() const {
  return json{{"dim", dim}, {"base", base}, {"interleaved", interleaved}}.dump();
}

RotaryEmbeddingOptions RotaryEmbeddingOptions::from_json(const std::string& text) {
  json j = parse_json(text, "RotaryEmbeddingOptions");
  RotaryEmbeddingOptions o;
  read_field(j, "dim", o.dim);
  read_field(j, "base", o.base);
  read_field(j, "interleaved", o.interleaved);
  reject_unknown_keys(j, o.to_json(), "RotaryEmbeddingOptions");
  return o;
}

}  // namespace ember::nn
