// Group and instance normalization (PyTorch's GroupNorm, InstanceNorm1d/2d): statistics per
// sample over groups of channels (GroupNorm) or per sample and channel (InstanceNorm), biased
// variance, the same in training and eval. InstanceNorm keeps no running statistics (PyTorch's
// default track_running_stats = false; the option is not offered).
#pragma once

#include "ember/nn/module.h"
#include "ember/ops_nn.h"

namespace ember::nn {

// The functional forms are tensor ops (ember/ops_nn.h); these names stay for existing code.
using ember::group_norm;
using ember::instance_norm;

struct GroupNormOptions {
  int64_t groups = 1;
  int64_t channels = 0;  // C, a multiple of groups
  double eps = 1e-5;
  bool affine = true;  // weight (ones) and bias (zeros), per channel
  DType dtype = DType::F32;
  Device device = Device::cpu();

  std::string to_json() const;
  static GroupNormOptions from_json(const std::string& json);
};

class GroupNorm : public Module {
 public:
  GroupNorm() = default;
  explicit GroupNorm(GroupNormOptions opts);
  Param<1> weight;  // [C]
  Param<1> bias;    // [C]
  GroupNormOptions options;
  EMBER_MODULE(weight, bias)
  Array forward(const Array& x, Loc loc = Loc::current());
  template <int D>
  Tensor<D> operator()(const Tensor<D>& x, Loc loc = Loc::current()) {
    return Tensor<D>(forward(x.array(), loc));
  }
  std::string type_name() const override { return "GroupNorm"; }
  std::string config() const override { return options.to_json(); }
};

struct InstanceNormOptions {
  int64_t features = 0;  // C
  double eps = 1e-5;
  bool affine = false;  // PyTorch's default
  DType dtype = DType::F32;
  Device device = Device::cpu();

  std::string to_json() const;
  static InstanceNormOptions from_json(const std::string& json);
};

// Shared implementation; InstanceNorm1d takes [N, C, L], InstanceNorm2d [N, C, H, W].
class InstanceNorm : public Module {
 public:
  InstanceNorm() = default;
  InstanceNorm(InstanceNormOptions opts, int rank, const char* name);
  Param<1> weight;
  Param<1> bias;
  InstanceNormOptions options;
  EMBER_MODULE(weight, bias)
  Array forward(const Array& x, Loc loc = Loc::current());
  template <int D>
  Tensor<D> operator()(const Tensor<D>& x, Loc loc = Loc::current()) {
    return Tensor<D>(forward(x.array(), loc));
  }
  std::string type_name() const override { return name_; }
  std::string config() const override { return options.to_json(); }

 private:
  int rank_ = 3;
  const char* name_ = "InstanceNorm";
};

class InstanceNorm1d : public InstanceNorm {
 public:
  InstanceNorm1d() = default;
  explicit InstanceNorm1d(InstanceNormOptions opts) : InstanceNorm(opts, 3, "InstanceNorm1d") {}
};
class InstanceNorm2d : public InstanceNorm {
 public:
  InstanceNorm2d() = default;
  explicit InstanceNorm2d(InstanceNormOptions opts) : InstanceNorm(opts, 4, "InstanceNorm2d") {}
};

}  // namespace ember::nn
