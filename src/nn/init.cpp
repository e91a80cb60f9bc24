// Parameter initializers (include/ember/nn/init.h).
#include "ember/nn/init.h"
#include "nn/layer_error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace ember::nn::init {

double gain(Nonlinearity nonlinearity, double negative_slope) {
  switch (nonlinearity) {
    case Nonlinearity::Linear:
    case Nonlinearity::Sigmoid: return 1.0;
    case Nonlinearity::Tanh: return 5.0 / 3.0;
    case Nonlinearity::ReLU: return std::sqrt(2.0);
    case Nonlinearity::LeakyReLU: return std::sqrt(2.0 / (1.0 + negative_slope * negative_slope));
    case Nonlinearity::SELU: return 0.75;
  }
  return 1.0;
}

std::pair<int64_t, int64_t> fans(const Shape& shape) {
  if (shape.rank() == 0) throw nn_error("init: fans of a scalar shape are undefined");
  if (shape.rank() == 1) return {shape[0], shape[0]};
  int64_t receptive = 1;
  for (int d = 2; d < shape.rank(); ++d) receptive *= shape[d];
  return {shape[1] * receptive, shape[0] * receptive};
}

static RandomOptions random_options(const InitOptions& o) { return {.seed = o.seed, .dtype = o.dtype, .device = o.device}; }

Array constant(const Shape& shape, double value, InitOptions opts) {
  return full(shape, value, {.dtype = opts.dtype, .device = opts.device});
}
Array zeros(const Shape& shape, InitOptions opts) { return constant(shape, 0.0, opts); }
Array ones(const Shape& shape, InitOptions opts) { return constant(shape, 1.0, opts); }

Array uniform(const Shape& shape, double low, double high, InitOptions opts) {
  return ember::uniform(shape, low, high, random_options(opts));
}
Array normal(const Shape& shape, double mean, double std, InitOptions opts) {
  return ember::normal(shape, mean, std, random_options(opts));
}

Array xavier_uniform(const Shape& shape, double g, InitOptions opts) {
  auto [in, out] = fans(shape);
  double bound = g * std::sqrt(6.0 / double(in + out));
  return uniform(shape, -bound, bound, opts);
}
Array xavier_normal(const Shape& shape, double g, InitOptions opts) {
  auto [in, out] = fans(shape);
  return normal(shape, 0.0, g * std::sqrt(2.0 / double(in + out)), opts);
}

static double kaiming_std(const Shape& shape, double a, FanMode mode, Nonlinearity nl) {
  auto [in, out] = fans(shape);
  int64_t fan = mode == FanMode::FanIn ? in : out;
  if (fan <= 0) throw nn_error(fmt::format("kaiming init: shape {} has no fan", shape.str()));
  return gain(nl, a) / std::sqrt(double(fan));
}
Array kaiming_uniform(const Shape& shape, double a, FanMode mode, Nonlinearity nl, InitOptions opts) {
  double bound = std::sqrt(3.0) * kaiming_std(shape, a, mode, nl);
  return uniform(shape, -bound, bound, opts);
}
Array kaiming_normal(const Shape& shape, double a, FanMode mode, Nonlinearity nl, InitOptions opts) {
  return normal(shape, 0.0, kaiming_std(shape, a, mode, nl), opts);
}

Array default_weight(const Shape& shape, InitOptions opts) {
  return kaiming_uniform(shape, std::sqrt(5.0), FanMode::FanIn, Nonlinearity::LeakyReLU, opts);
}
Array default_bias(int64_t size, int64_t fan_in, InitOptions opts) {
  double bound = fan_in > 0 ? 1.0 / std::sqrt(double(fan_in)) : 0.0;
  return uniform(Shape{size}, -bound, bound, opts);
}

// ---- orthogonal and truncated normal (host computations in f64) ----------------------------

static Device host_device() { return Device::cpu().available() ? Device::cpu() : Device::reference(); }

static Array to_target(const std::vector<double>& v, const Shape& shape, const InitOptions& opts) {
  return cast(from_vector(v, shape, opts.device), opts.dtype);
}

Array orthogonal(const Shape& shape, double g, InitOptions opts) {
  if (shape.rank() < 2) throw nn_error(fmt::format("orthogonal init: needs a shape of rank >= 2, got {}", shape.str()));
  int64_t rows = shape[0], cols = shape.numel() / std::max<int64_t>(rows, 1);
  if (rows == 0 || cols == 0) return to_target({}, shape, opts);
  // Column vectors of an m x n matrix, m >= n (the transpose when rows < cols, as PyTorch).
  bool transposed = rows < cols;
  int64_t m = transposed ? cols : rows, n = transposed ? rows : cols;
  std::vector<double> a = ember::normal(Shape{rows, cols}, 0.0, 1.0, {.seed = opts.seed, .dtype = DType::F64,
                                                                        .device = host_device()})
                              .to_vector<double>();
  // q[j] (column j, length m) from element (r, c) of the drawn matrix.
  std::vector<std::vector<double>> q(static_cast<size_t>(n), std::vector<double>(static_cast<size_t>(m)));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      double v = a[static_cast<size_t>(r * cols + c)];
      if (transposed) q[static_cast<size_t>(r)][static_cast<size_t>(c)] = v;
      else q[static_cast<size_t>(c)][static_cast<size_t>(r)] = v;
    }
  auto dot = [](const std::vector<double>& x, const std::vector<double>& y) {
    double s = 0;
    for (size_t i = 0; i < x.size(); ++i) s += x[i] * y[i];
    return s;
  };
  for (size_t j = 0; j < q.size(); ++j) {
    for (int pass = 0; pass < 2; ++pass)
      for (size_t k = 0; k < j; ++k) {
        double p = dot(q[k], q[j]);
        for (size_t i = 0; i < q[j].size(); ++i) q[j][i] -= p * q[k][i];
      }
    double norm = std::sqrt(dot(q[j], q[j]));
    if (norm == 0) throw nn_error("orthogonal init: the drawn matrix is rank-deficient");
    for (double& v : q[j]) v /= norm;  // R's diagonal is the (positive) norm: PyTorch's sign fix
  }
  std::vector<double> out(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[static_cast<size_t>(r * cols + c)] =
          g * (transposed ? q[static_cast<size_t>(r)][static_cast<size_t>(c)] : q[static_cast<size_t>(c)][static_cast<size_t>(r)]);
  return to_target(out, shape, opts);
}

static double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

// x in [lo, hi] with normal_cdf(x) = u: Newton steps, falling back to bisection outside the bracket.
static double inverse_cdf(double u, double lo, double hi) {
  double x = std::clamp(0.0, lo, hi);
  for (int it = 0; it < 100; ++it) {
    double f = normal_cdf(x) - u;
    if (f > 0) hi = x;
    else lo = x;
    double pdf = std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
    double next = pdf > 0 ? x - f / pdf : 0.5 * (lo + hi);
    if (!(next > lo && next < hi)) next = 0.5 * (lo + hi);
    if (std::abs(next - x) <= 1e-15 * std::max(1.0, std::abs(x))) return next;
    x = next;
  }
  return x;
}

Array truncated_normal(const Shape& shape, double mean, double std, double a, double b, InitOptions opts) {
  if (!(std > 0) || !(a < b))
    throw nn_error(fmt::format("truncated_normal: need std > 0 and a < b, got std = {}, [{}, {}]", std, a, b));
  double alpha = (a - mean) / std, beta = (b - mean) / std;
  // In the right tail, sample the mirrored interval (the CDF keeps its precision near 0).
  bool mirror = alpha > 0;
  if (mirror) {
    std::swap(alpha, beta);
    alpha = -alpha;
    beta = -beta;
  }
  double lo = normal_cdf(alpha), hi = normal_cdf(beta);
  std::vector<double> u = ember::uniform(shape, lo, hi, {.seed = opts.seed, .dtype = DType::F64, .device = host_device()})
                              .to_vector<double>();
  for (double& v : u) {
    double z = inverse_cdf(std::clamp(v, lo, hi), alpha, beta);
    v = mean + std * (mirror ? -z : z);
  }
  return to_target(u, shape, opts);
}

}  // namespace ember::nn::init
