// Parameter initializers (include/ember/nn/init.h).
#include "ember/nn/init.h"

#include <fmt/format.h>

#include <cmath>

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
  if (shape.rank() == 0) throw Error("init: fans of a scalar shape are undefined");
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
  if (fan <= 0) throw Error(fmt::format("kaiming init: shape {} has no fan", shape.str()));
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

}  // namespace ember::nn::init
