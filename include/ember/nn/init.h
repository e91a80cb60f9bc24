// Parameter initializers: constant, uniform, normal, Xavier/Glorot and Kaiming/He (uniform and
// normal, fan in or fan out), orthogonal and truncated normal, seeded through the counter-based
// generator (same seed, same values on every backend). Fans follow PyTorch: for a weight [out, in, k...], fan_in =
// in * prod(k) and fan_out = out * prod(k). Layers use PyTorch's defaults (see each layer).
#pragma once

#include <cstdint>
#include <optional>
#include <utility>

#include "ember/ops.h"

namespace ember::nn::init {

struct InitOptions {
  std::optional<uint64_t> seed{};  // unset: the next seed of the global sequence (manual_seed)
  DType dtype = DType::F32;
  Device device = Device::cpu();
};

enum class FanMode { FanIn, FanOut };
enum class Nonlinearity { Linear, Sigmoid, Tanh, ReLU, LeakyReLU, SELU };

// PyTorch's calculate_gain: linear/sigmoid 1, tanh 5/3, relu sqrt(2), leaky_relu
// sqrt(2 / (1 + slope^2)), selu 3/4.
double gain(Nonlinearity nonlinearity, double negative_slope = 0.01);
// (fan_in, fan_out) of a weight shape (rank >= 2; rank 1 gives (n, n)).
std::pair<int64_t, int64_t> fans(const Shape& shape);

Array constant(const Shape& shape, double value, InitOptions opts = {});
Array zeros(const Shape& shape, InitOptions opts = {});
Array ones(const Shape& shape, InitOptions opts = {});
Array uniform(const Shape& shape, double low, double high, InitOptions opts = {});
Array normal(const Shape& shape, double mean, double std, InitOptions opts = {});
// U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out)).
Array xavier_uniform(const Shape& shape, double gain = 1.0, InitOptions opts = {});
// N(0, s) with s = gain * sqrt(2 / (fan_in + fan_out)).
Array xavier_normal(const Shape& shape, double gain = 1.0, InitOptions opts = {});
// U(-b, b) with b = gain(nonlinearity, a) * sqrt(3 / fan).
Array kaiming_uniform(const Shape& shape, double a = 0, FanMode mode = FanMode::FanIn,
                      Nonlinearity nonlinearity = Nonlinearity::LeakyReLU, InitOptions opts = {});
// N(0, s) with s = gain(nonlinearity, a) / sqrt(fan).
Array kaiming_normal(const Shape& shape, double a = 0, FanMode mode = FanMode::FanIn,
                     Nonlinearity nonlinearity = Nonlinearity::LeakyReLU, InitOptions opts = {});

// A (semi-)orthogonal matrix (PyTorch's orthogonal_): the shape is viewed as [rows, cols] with
// rows = shape[0] and cols the product of the rest; the result has orthonormal rows or columns
// (whichever are fewer), times gain. A Gaussian matrix is drawn and orthonormalized on the host
// in f64 (modified Gram-Schmidt, twice for accuracy) with the signs of PyTorch's QR (R's diagonal
// positive).
Array orthogonal(const Shape& shape, double gain = 1.0, InitOptions opts = {});
// N(mean, std) conditioned on [a, b] (absolute bounds, as PyTorch's trunc_normal_): uniform draws
// in [Phi(alpha), Phi(beta)] mapped through the inverse normal CDF on the host in f64.
Array truncated_normal(const Shape& shape, double mean = 0, double std = 1, double a = -2, double b = 2,
                       InitOptions opts = {});

// PyTorch's default for Linear and Conv weights: kaiming_uniform(a = sqrt(5)), i.e.
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)); the matching bias default is U(-1/sqrt(fan_in), ...).
Array default_weight(const Shape& shape, InitOptions opts = {});
Array default_bias(int64_t size, int64_t fan_in, InitOptions opts = {});

}  // namespace ember::nn::init
