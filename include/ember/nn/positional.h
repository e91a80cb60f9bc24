// Position encodings for transformers: the sinusoidal table of "Attention Is All You Need"
// (added to the input) and rotary embeddings (RoFormer: pairs of the last dim rotated by an
// angle proportional to the position).
//
//   nn::SinusoidalPositionalEncoding pe({.d_model = 64, .batch_first = true});
//   Array h = pe.forward(tok_emb);                       // [N, L, 64] + table[:L]
//   Array q2 = nn::apply_rotary(q, {.offset = past_len});  // q [..., L, D], D even
#pragma once

#include <optional>
#include <vector>

#include "ember/nn/dropout.h"
#include "ember/nn/module.h"

namespace ember::nn {

// table[pos, j] = sin(pos / 10000^(2i / d)) for j = 2i, cos(...) for j = 2i + 1; [n, d] in f64
// on the host, cast to `dtype`.
Array sinusoidal_table(int64_t n, int64_t d, DType dtype = DType::F32, Device device = Device::cpu());

struct SinusoidalPositionalEncodingOptions {
  int64_t d_model = 0;
  int64_t max_len = 5000;
  double dropout = 0;  // applied after the addition in training mode (PyTorch's tutorial uses 0.1)
  bool batch_first = true;  // x [N, L, d] (or [L, d]); false: [L, N, d]
  std::optional<uint64_t> seed{};  // dropout stream

  std::string to_json() const;
  static SinusoidalPositionalEncodingOptions from_json(const std::string& json);
};

// x + table[offset : offset + L] (the table is a constant, not a parameter or buffer).
class SinusoidalPositionalEncoding : public Module {
 public:
  SinusoidalPositionalEncoding() = default;
  explicit SinusoidalPositionalEncoding(SinusoidalPositionalEncodingOptions opts);
  Dropout dropout;
  SinusoidalPositionalEncodingOptions options;
  EMBER_MODULE(dropout)
  Array forward(const Array& x, int64_t offset = 0, Loc loc = Loc::current());
  template <int D>
  Tensor<D> operator()(const Tensor<D>& x, Loc loc = Loc::current()) {
    return Tensor<D>(forward(x.array(), 0, loc));
  }
  std::string type_name() const override { return "SinusoidalPositionalEncoding"; }
  std::string config() const override { return options.to_json(); }

 private:
  std::vector<double> table_;  // [max_len, d_model]
};

struct RotaryOptions {
  int64_t offset = 0;  // positions offset, offset + 1, ... along dim -2 (when no positions)
  Array positions{};     // optional [L] (or broadcasting to x's [..., L]), integer or floating
  double base = 10000;  // angle of pair i at position p: p * base^(-2i / D)
  // true: pairs (x[2i], x[2i+1]) (RoFormer); false: pairs (x[i], x[i + D/2]) (GPT-NeoX / LLaMA
  // "rotate half" layout).
  bool interleaved = true;
};

// x [..., L, D] with D even: each pair (a, b) becomes (a cos t - b sin t, a sin t + b cos t).
Array apply_rotary(const Array& x, const RotaryOptions& opts = {}, Loc loc = Loc::current());

struct RotaryEmbeddingOptions {
  int64_t dim = 0;  // D, even
  double base = 10000;
  bool interleaved = true;

  std::string to_json() const;
  static RotaryEmbeddingOptions from_json(const std::string& json);
};

// apply_rotary with fixed options; no parameters.
class RotaryEmbedding : public Module {
 public:
  RotaryEmbedding() = default;
  explicit RotaryEmbedding(RotaryEmbeddingOptions opts);
  RotaryEmbeddingOptions options;
  EMBER_MODULE()
  Array forward(const Array& x, int64_t offset = 0, Loc loc = Loc::current());
  Array forward(const Array& x, const Array& positions, Loc loc = Loc::current());
  std::string type_name() const override { return "RotaryEmbedding"; }
  std::string config() const override { return options.to_json(); }
};

}  // namespace ember::nn
