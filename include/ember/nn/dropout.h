// nn::Dropout: in training mode zeroes each element with probability p and scales the rest by
// 1 / (1 - p); identity in eval mode. With a seed, the k-th call of a module draws its mask from
// seed stream k (reproducible); without one, each call takes the next global seed.
#pragma once

#include <optional>

#include "ember/nn/module.h"
#include "ember/ops_nn.h"

namespace ember::nn {

struct DropoutOptions {
  double p = 0.5;
  std::optional<uint64_t> seed{};

  std::string to_json() const;
  static DropoutOptions from_json(const std::string& json);
};

// The functional forms are tensor ops (ember/ops_nn.h); these names stay for existing code.
using ember::dropout;

class Dropout : public Module {
 public:
  explicit Dropout(DropoutOptions opts = {});
  DropoutOptions options;
  EMBER_MODULE()
  Array forward(const Array& x, Loc loc = Loc::current());
  template <int D>
  Tensor<D> operator()(const Tensor<D>& x, Loc loc = Loc::current()) {
    return Tensor<D>(forward(x.array(), loc));
  }
  std::string type_name() const override { return "Dropout"; }
  std::string config() const override { return options.to_json(); }

 private:
  uint64_t calls_ = 0;
};

}  // namespace ember::nn
