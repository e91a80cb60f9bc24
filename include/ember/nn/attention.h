// Attention: scaled dot-product attention (the semantics of PyTorch's
// torch.nn.functional.scaled_dot_product_attention) and nn::MultiheadAttention (PyTorch's
// torch.nn.MultiheadAttention: parameter names and layouts, masks, batch_first, weights).
//
//   Array y = nn::scaled_dot_product_attention(q, k, v, {.is_causal = true});
//   nn::MultiheadAttention mha({.embed_dim = 64, .num_heads = 4, .batch_first = true});
//   auto [out, weights] = mha.forward(x, x, x, {.key_padding_mask = pad});
#pragma once

#include <optional>

#include "ember/nn/linear.h"
#include "ember/nn/module.h"
#include "ember/ops_nn.h"

namespace ember::nn {

// The functional forms are tensor ops (ember/ops_nn.h); these names stay for existing code.
using ember::SdpaOptions;
using ember::SdpaResult;
using ember::causal_mask;
using ember::scaled_dot_product_attention;
using ember::scaled_dot_product_attention_with_weights;

struct MultiheadAttentionOptions {
  int64_t embed_dim = 0;
  int64_t num_heads = 1;  // embed_dim must be a multiple
  double dropout = 0;  // on the attention weights, in training mode
  bool bias = true;  // in_proj_bias and out_proj.bias
  std::optional<int64_t> kdim{};  // unset: embed_dim; if kdim or vdim differ from embed_dim,
  std::optional<int64_t> vdim{};  // q/k/v_proj_weight replace the packed in_proj_weight
  bool batch_first = false;  // [N, L, E] instead of PyTorch's default [L, N, E]
  std::optional<uint64_t> seed{};  // initialization (and dropout streams, as nn::Dropout)
  DType dtype = DType::F32;
  Device device = Device::cpu();

  std::string to_json() const;
  static MultiheadAttentionOptions from_json(const std::string& json);
};

struct MhaForwardOptions {
  Array key_padding_mask{};  // [N, S] ([S] unbatched); bool: true = ignore that key; floating: added
  // [L, S] or [N * num_heads, L, S] ([num_heads, L, S] unbatched); bool: true = NOT allowed;
  // floating: added to the scores.
  Array attn_mask{};
  bool need_weights = true;
  bool average_attn_weights = true;  // weights [N, L, S] (mean over heads) or [N, H, L, S]
};

struct MhaOutput {
  Array output{};   // [L, N, E] ([N, L, E] with batch_first; [L, E] unbatched)
  Array weights{};  // undefined unless need_weights
};

class MultiheadAttention : public Module {
 public:
  MultiheadAttention() = default;
  explicit MultiheadAttention(MultiheadAttentionOptions opts);

  ParamRef in_proj_weight;  // [3E, E] (same kdim/vdim)
  ParamRef q_proj_weight;   // [E, E]    (different kdim/vdim)
  ParamRef k_proj_weight;   // [E, kdim]
  ParamRef v_proj_weight;   // [E, vdim]
  ParamRef in_proj_bias;    // [3E]
  Linear out_proj;          // E -> E
  MultiheadAttentionOptions options;
  EMBER_MODULE(in_proj_weight, q_proj_weight, k_proj_weight, v_proj_weight, in_proj_bias, out_proj)

  // query [L, N, E] / [N, L, E] / [L, E]; key [.., S, .., kdim]; value [.., S, .., vdim].
  MhaOutput forward(const Array& query, const Array& key, const Array& value, const MhaForwardOptions& f = {},
                    Loc loc = Loc::current());
  // Self-attention output only (no weights).
  Array forward(const Array& x, const MhaForwardOptions& f = {}, Loc loc = Loc::current());
  std::string type_name() const override { return "MultiheadAttention"; }
  std::string config() const override { return options.to_json(); }

 private:
  uint64_t calls_ = 0;
};

}  // namespace ember::nn
