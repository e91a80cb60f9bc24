// nn::Embedding: a lookup table [num, dim]; indices of any shape give [..., dim]. Weight
// defaults to N(0, 1) as in PyTorch; the padding row starts at zero and gets no gradient.
#pragma once

#include <optional>

#include "ember/nn/module.h"
#include "ember/ops_nn.h"

namespace ember::nn {

struct EmbeddingOptions {
  int64_t num = 0;  // number of entries
  int64_t dim = 0;  // size of each vector
  std::optional<int64_t> padding_idx{};
  std::optional<uint64_t> seed{};
  DType dtype = DType::F32;
  Device device = Device::cpu();

  std::string to_json() const;
  static EmbeddingOptions from_json(const std::string& json);
};

class Embedding : public Module {
 public:
  Embedding() = default;
  explicit Embedding(EmbeddingOptions opts);
  Param<2> weight;  // [num, dim]
  EmbeddingOptions options;
  EMBER_MODULE(weight)

  Array forward(const Array& indices, Loc loc = Loc::current());
  template <int D>
    requires(D < kMaxRank)
  Tensor<D + 1> operator()(const Tensor<D, Int>& indices, Loc loc = Loc::current()) {
    return Tensor<D + 1>(forward(indices.array(), loc));
  }
  std::string type_name() const override { return "Embedding"; }
  std::string config() const override { return options.to_json(); }
};

// The functional forms are tensor ops (ember/ops_nn.h); these names stay for existing code.
using ember::embedding;

}  // namespace ember::nn
