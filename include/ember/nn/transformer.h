// Transformer layers as PyTorch's torch.nn.TransformerEncoderLayer / TransformerDecoderLayer and
// the stacks TransformerEncoder / TransformerDecoder: the same parameter names
// (self_attn.in_proj_weight, linear1.weight, norm1.bias, layers.0..., norm.weight), post-norm or
// pre-norm (norm_first), relu / gelu / swiglu feed-forward, masks, batch_first.
//
//   nn::TransformerEncoder enc({.layer = {.d_model = 64, .nhead = 4, .dim_feedforward = 256,
//                                         .batch_first = true, .norm_first = true},
//                               .num_layers = 2, .norm = true});
//   Array h = enc.forward(x, {.mask = nn::generate_square_subsequent_mask(L)});
#pragma once

#include <optional>
#include <vector>

#include "ember/nn/attention.h"
#include "ember/nn/dropout.h"
#include "ember/nn/linear.h"
#include "ember/nn/norm.h"

namespace ember::nn {

// The feed-forward activation. Swiglu: linear1 maps d_model -> 2 * dim_feedforward, split in
// halves (a, b) giving silu(a) * b, and linear2 maps dim_feedforward -> d_model.
enum class FfnActivation { Relu, Gelu, Swiglu };

struct TransformerLayerOptions {
  int64_t d_model = 0;
  int64_t nhead = 1;
  int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  FfnActivation activation = FfnActivation::Relu;
  double layer_norm_eps = 1e-5;
  bool batch_first = false;  // [N, L, E] instead of [L, N, E]
  bool norm_first = false;   // pre-norm: x + f(norm(x)); post-norm: norm(x + f(x))
  std::optional<uint64_t> seed{};  // initialization and dropout streams
  DType dtype = DType::F32;
  Device device = Device::cpu();

  std::string to_json() const;
  static TransformerLayerOptions from_json(const std::string& json);
};

// Float [sz, sz] mask with -inf above the diagonal and 0 elsewhere (PyTorch's
// Transformer.generate_square_subsequent_mask): position i sees positions 0..i.
Array generate_square_subsequent_mask(int64_t sz, DType dtype = DType::F32, Device device = Device::cpu());

// Masks follow MultiheadAttention: attn masks [L, S] or [N * nhead, L, S] (bool: true = not
// allowed, or float, added); key padding masks [N, S] (bool: true = padding, or float).
struct EncoderMasks {
  Array mask{};
  Array key_padding_mask{};
};
struct DecoderMasks {
  Array tgt_mask{};
  Array memory_mask{};
  Array tgt_key_padding_mask{};
  Array memory_key_padding_mask{};
};

class TransformerEncoderLayer : public Module {
 public:
  TransformerEncoderLayer() = default;
  explicit TransformerEncoderLayer(TransformerLayerOptions opts);
  MultiheadAttention self_attn;
  Linear linear1;
  Dropout dropout;
  Linear linear2;
  LayerNorm norm1, norm2;
  Dropout dropout1, dropout2;
  TransformerLayerOptions options;
  EMBER_MODULE(self_attn, linear1, dropout, linear2, norm1, norm2, dropout1, dropout2)

  // src [L, N, E] ([N, L, E] with batch_first, or [L, E]).
  Array forward(const Array& src, const EncoderMasks& masks = {}, Loc loc = Loc::current());
  std::string type_name() const override { return "TransformerEncoderLayer"; }
  std::string config() const override { return options.to_json(); }
};

class TransformerDecoderLayer : public Module {
 public:
  TransformerDecoderLayer() = default;
  explicit TransformerDecoderLayer(TransformerLayerOptions opts);
  MultiheadAttention self_attn;
  MultiheadAttention multihead_attn;
  Linear linear1;
  Dropout dropout;
  Linear linear2;
  LayerNorm norm1, norm2, norm3;
  Dropout dropout1, dropout2, dropout3;
  TransformerLayerOptions options;
  EMBER_MODULE(self_attn, multihead_attn, linear1, dropout, linear2, norm1, norm2, norm3, dropout1, dropout2, dropout3)

  // tgt [T, N, E], memory [S, N, E] (batch_first: [N, T, E], [N, S, E]).
  Array forward(const Array& tgt, const Array& memory, const DecoderMasks& masks = {}, Loc loc = Loc::current());
  std::string type_name() const override { return "TransformerDecoderLayer"; }
  std::string config() const override { return options.to_json(); }
};

struct TransformerStackOptions {
  TransformerLayerOptions layer{};
  int64_t num_layers = 1;
  bool norm = false;  // a final LayerNorm ("norm"), as PyTorch's optional norm argument

  std::string to_json() const;
  static TransformerStackOptions from_json(const std::string& json);
};

// Unlike PyTorch, which deep-copies one layer (every layer starts with the same values), each
// layer is initialized on its own (seeded layers take seed + 1000 * i).
class TransformerEncoder : public Module {
 public:
  TransformerEncoder() = default;
  explicit TransformerEncoder(TransformerStackOptions opts);
  std::vector<TransformerEncoderLayer> layers;
  LayerNorm norm;  // only with options.norm
  TransformerStackOptions options;
  void visit(Visitor& v) override;
  Array forward(const Array& src, const EncoderMasks& masks = {}, Loc loc = Loc::current());
  EMBER_CALL_OPERATOR
  std::string type_name() const override { return "TransformerEncoder"; }
  std::string config() const override { return options.to_json(); }
};

class TransformerDecoder : public Module {
 public:
  TransformerDecoder() = default;
  explicit TransformerDecoder(TransformerStackOptions opts);
  std::vector<TransformerDecoderLayer> layers;
  LayerNorm norm;
  TransformerStackOptions options;
  void visit(Visitor& v) override;
  Array forward(const Array& tgt, const Array& memory, const DecoderMasks& masks = {}, Loc loc = Loc::current());
  EMBER_CALL_OPERATOR
  std::string type_name() const override { return "TransformerDecoder"; }
  std::string config() const override { return options.to_json(); }
};

}  // namespace ember::nn
