// Normalization layers: BatchNorm1d/2d (batch statistics in training, running statistics in
// eval, PyTorch's momentum convention; statistics over several processes when synchronized),
// LayerNorm and RMSNorm over the trailing dims.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "ember/nn/module.h"
#include "ember/ops_nn.h"

namespace ember::nn {

struct BatchNormOptions {
  int64_t features = 0;  // C
  double eps = 1e-5;
  double momentum = 0.1;  // running = (1 - momentum) * running + momentum * batch
  bool affine = true;
  bool track_running_stats = true;
  DType dtype = DType::F32;
  Device device = Device::cpu();

  std::string to_json() const;
  static BatchNormOptions from_json(const std::string& json);
};

// Shared implementation; BatchNorm1d takes [N, C] or [N, C, L], BatchNorm2d [N, C, H, W].
class BatchNorm : public Module {
 public:
  BatchNorm() = default;
  BatchNorm(BatchNormOptions opts, std::vector<int> ranks, const char* name);
  Param<1> weight;                    // [C], ones
  Param<1> bias;                      // [C], zeros
  Buffer<1> running_mean;             // [C], zeros
  Buffer<1> running_var;              // [C], ones
  ParamRef num_batches_tracked;       // i64 count, rank 0 as in PyTorch
  BatchNormOptions options;
  // Synchronized batch statistics (set by dist::synchronize_batch_norm, or by hand): a function
  // that sums an array over every rank of a data-parallel group, differentiably (its backward is
  // the same sum of the gradients). When set, training-mode statistics are those of the whole
  // group's batch: mean = group_sum(sum x) / group_sum(n), then the variance the same way around
  // that mean, so every rank normalizes with the same numbers and the running statistics stay
  // identical on every rank. Every rank must then run the same forward and backward passes.
  // Unset (the default): the local batch's statistics. Eval mode never communicates.
  std::function<Array(const Array&)> group_sum;
  EMBER_MODULE(weight, bias, running_mean, running_var, num_batches_tracked)

  Array forward(const Array& x, Loc loc = Loc::current());
  template <int D>
  Tensor<D> operator()(const Tensor<D>& x, Loc loc = Loc::current()) {
    return Tensor<D>(forward(x.array(), loc));
  }
  std::string type_name() const override { return name_; }
  std::string config() const override { return options.to_json(); }

 private:
  std::vector<int> ranks_;
  const char* name_ = "BatchNorm";
};

class BatchNorm1d : public BatchNorm {
 public:
  BatchNorm1d() = default;
  explicit BatchNorm1d(BatchNormOptions opts) : BatchNorm(opts, {2, 3}, "BatchNorm1d") {}
};
class BatchNorm2d : public BatchNorm {
 public:
  BatchNorm2d() = default;
  explicit BatchNorm2d(BatchNormOptions opts) : BatchNorm(opts, {4}, "BatchNorm2d") {}
};

struct LayerNormOptions {
  std::vector<int64_t> shape{};  // the normalized trailing dims
  double eps = 1e-5;
  bool affine = true;  // weight (ones) and bias (zeros)
  bool bias = true;
  DType dtype = DType::F32;
  Device device = Device::cpu();

  std::string to_json() const;
  static LayerNormOptions from_json(const std::string& json);
};

// The functional forms are tensor ops (ember/ops_nn.h); these names stay for existing code.
using ember::batch_norm_inference;
using ember::layer_norm;
using ember::rms_norm;

class LayerNorm : public Module {
 public:
  LayerNorm() = default;
  explicit LayerNorm(LayerNormOptions opts);
  ParamRef weight;  // options.shape (rank varies, hence untyped)
  ParamRef bias;
  LayerNormOptions options;
  EMBER_MODULE(weight, bias)
  Array forward(const Array& x, Loc loc = Loc::current());
  template <int D>
  Tensor<D> operator()(const Tensor<D>& x, Loc loc = Loc::current()) {
    return Tensor<D>(forward(x.array(), loc));
  }
  std::string type_name() const override { return "LayerNorm"; }
  std::string config() const override { return options.to_json(); }
};

struct RMSNormOptions {
  std::vector<int64_t> shape{};
  std::optional<double> eps{};  // unset: the dtype's machine epsilon (PyTorch's default)
  bool affine = true;
  DType dtype = DType::F32;
  Device device = Device::cpu();

  std::string to_json() const;
  static RMSNormOptions from_json(const std::string& json);
};

// y = x / sqrt(mean(x^2 over the trailing dims) + eps) * weight
class RMSNorm : public Module {
 public:
  RMSNorm() = default;
  explicit RMSNorm(RMSNormOptions opts);
  ParamRef weight;
  RMSNormOptions options;
  EMBER_MODULE(weight)
  Array forward(const Array& x, Loc loc = Loc::current());
  template <int D>
  Tensor<D> operator()(const Tensor<D>& x, Loc loc = Loc::current()) {
    return Tensor<D>(forward(x.array(), loc));
  }
  std::string type_name() const override { return "RMSNorm"; }
  std::string config() const override { return options.to_json(); }
};



}  // namespace ember::nn
