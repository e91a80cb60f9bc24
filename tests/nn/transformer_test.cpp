// Transformer layers, stacks and position encodings against PyTorch
// (tools/reference/nn_attention_reference.py, float64): TransformerEncoderLayer /
// TransformerDecoderLayer (post- and pre-norm, relu / gelu, SwiGLU against its formula in torch),
// TransformerEncoder / TransformerDecoder with a final norm, masks; parameters loaded by PyTorch's
// names (strict); sinusoidal table and rotary embeddings against their formulas; argument errors.
#include <gtest/gtest.h>

#include "ember/nn/positional.h"
#include "ember/nn/transformer.h"
#include "nn/attention_test_util.h"

namespace ember {
namespace {

using namespace ember::nn;
using ember::testing::all_close;
using ember::testing::attention_ref;
using ember::testing::check_module;
using ember::testing::det;
using ember::testing::load_torch_params;
using ember::testing::nn_device;
using ember::testing::weighted_sum;

constexpr double kTol = 1e-9;

TransformerLayerOptions f64(TransformerLayerOptions o) {
  o.dtype = DType::F64;
  o.device = nn_device();
  return o;
}

// The script's masks.
Array kpm5() {
  return cast(from_vector(std::vector<uint8_t>{0, 0, 0, 0, 1, 0, 0, 1, 0, 0}, {2, 5}, nn_device()), DType::Bool);
}
Array causal(int64_t n) { return generate_square_subsequent_mask(n, DType::F64, nn_device()); }
Array bool_mask(const Shape& shape, double a, double b) {
  Array m = gt(det(shape, a, b), -0.3);
  return logical_or(m, eq(arange(0, shape.dims().back(), 1, DType::I64, nn_device()), 0));
}

template <class M>
M torch_module(const std::string& prefix, M m) {
  load_torch_params(m, prefix);
  m.eval();
  return m;
}

TEST(TransformerTest, EncoderLayerMatchesTorch) {
  Array src = det({5, 2, 8}, 0.37, 0.1).require_grad();
  Array src_b = det({2, 5, 8}, 0.37, 0.1).require_grad();
  {
    auto l = torch_module("enc.post_relu", TransformerEncoderLayer(f64({.d_model = 8, .nhead = 2, .dim_feedforward = 16})));
    check_module("enc.post_relu", l, l.forward(src, {.mask = causal(5), .key_padding_mask = kpm5()}), Array(), {src});
  }
  {
    auto l = torch_module("enc.pre_gelu", TransformerEncoderLayer(f64({.d_model = 8,
                                                                        .nhead = 2,
                                                                        .dim_feedforward = 16,
                                                                        .activation = FfnActivation::Gelu,
                                                                        .layer_norm_eps = 1e-3,
                                                                        .batch_first = true,
                                                                        .norm_first = true})));
    check_module("enc.pre_gelu", l, l.forward(src_b), Array(), {src_b});
  }
  {
    auto l = torch_module("enc.post_gelu_boolmask",
                          TransformerEncoderLayer(f64(
                              {.d_model = 8, .nhead = 2, .dim_feedforward = 16, .activation = FfnActivation::Gelu})));
    Array y = l.forward(src, {.mask = logical_not(bool_mask({5, 5}, 0.9, 0.3))});
    check_module("enc.post_gelu_boolmask", l, y, Array(), {src});
  }
  {
    auto l = torch_module("enc.pre_swiglu", TransformerEncoderLayer(f64({.d_model = 8,
                                                                          .nhead = 2,
                                                                          .dim_feedforward = 6,
                                                                          .activation = FfnActivation::Swiglu,
                                                                          .batch_first = true,
                                                                          .norm_first = true})));
    EXPECT_EQ(l.linear1.weight.array().shape(), Shape({12, 8}));
    EXPECT_EQ(l.linear2.weight.array().shape(), Shape({8, 6}));
    check_module("enc.pre_swiglu", l, l.forward(src_b, {.key_padding_mask = kpm5()}), Array(), {src_b});
  }
}

TEST(TransformerTest, DecoderLayerMatchesTorch) {
  Array tgt = det({4, 2, 8}, 0.53, 0.7).require_grad();
  Array mem = det({5, 2, 8}, 0.71, 0.2).require_grad();
  {
    auto l = torch_module("dec.post_relu", TransformerDecoderLayer(f64({.d_model = 8, .nhead = 2, .dim_feedforward = 16})));
    Array y = l.forward(tgt, mem, {.tgt_mask = causal(4), .memory_key_padding_mask = kpm5()});
    check_module("dec.post_relu", l, y, Array(), {tgt, mem});
  }
  {
    auto l = torch_module("dec.pre_gelu", TransformerDecoderLayer(f64({.d_model = 8,
                                                                        .nhead = 2,
                                                                        .dim_feedforward = 16,
                                                                        .activation = FfnActivation::Gelu,
                                                                        .batch_first = true,
                                                                        .norm_first = true})));
    Array tb = contiguous(transpose(det({4, 2, 8}, 0.53, 0.7), 0, 1)).require_grad();
    Array mb = contiguous(transpose(det({5, 2, 8}, 0.71, 0.2), 0, 1)).require_grad();
    Array tkpm = cast(from_vector(std::vector<uint8_t>{0, 0, 0, 1, 0, 0, 0, 0}, {2, 4}, nn_device()), DType::Bool);
    Array y = l.forward(tb, mb, {.memory_mask = mul(det({4, 5}, 0.61, 0.2), 2.0), .tgt_key_padding_mask = tkpm});
    check_module("dec.pre_gelu", l, y, Array(), {tb, mb});
  }
}

TEST(TransformerTest, StacksMatchTorch) {
  {
    TransformerEncoder enc({.layer = f64({.d_model = 8, .nhead = 2, .dim_feedforward = 16, .batch_first = true,
                                          .norm_first = true}),
                            .num_layers = 2,
                            .norm = true});
    enc = torch_module("enc.stack", enc);
    Array src = det({2, 5, 8}, 0.37, 0.1).require_grad();
    check_module("enc.stack", enc, enc.forward(src, {.mask = causal(5)}), Array(), {src});
  }
  {
    TransformerDecoder dec({.layer = f64({.d_model = 8, .nhead = 2, .dim_feedforward = 16}), .num_layers = 2});
    dec = torch_module("dec.stack", dec);
    Array tgt = det({4, 2, 8}, 0.53, 0.7).require_grad();
    Array mem = det({5, 2, 8}, 0.71, 0.2).require_grad();
    Array y = dec.forward(tgt, mem, {.tgt_mask = causal(4), .memory_key_padding_mask = kpm5()});
    check_module("dec.stack", dec, y, Array(), {tgt, mem});
  }
}

TEST(TransformerTest, DropoutAndModes) {
  TransformerEncoderLayer l({.d_model = 8, .nhead = 2, .dim_feedforward = 16, .dropout = 0.3, .seed = 5});
  TransformerEncoderLayer no_drop({.d_model = 8, .nhead = 2, .dim_feedforward = 16, .dropout = 0.0, .seed = 5});
  Array x = cast(det({5, 2, 8}, 0.37, 0.1), DType::F32);
  l.eval();
  no_drop.eval();
  // Same seed, same parameters; eval mode turns dropout off.
  EXPECT_TRUE(all_close(l.forward(x), no_drop.forward(x).to_vector<double>(), 1e-6, 1e-6));
  l.train();
  EXPECT_FALSE(all_close(l.forward(x), no_drop.forward(x).to_vector<double>(), 1e-3, 1e-3));
  // Stacks name their layers and optional norm as PyTorch.
  TransformerEncoder enc({.layer = {.d_model = 4, .nhead = 1, .dim_feedforward = 8}, .num_layers = 2});
  int norms = 0;
  for (auto& [name, p] : enc.named_parameters()) norms += name.rfind("norm.", 0) == 0;
  EXPECT_EQ(norms, 0);
  EXPECT_EQ(enc.named_parameters().front().name, "layers.0.self_attn.in_proj_weight");
  // Layers are initialized independently.
  EXPECT_FALSE(all_close(enc.layers[0].linear1.weight.array(), enc.layers[1].linear1.weight.array().to_vector<double>(),
                         0, 0));
  // Options round-trip.
  TransformerStackOptions so{.layer = {.d_model = 16, .nhead = 4, .activation = FfnActivation::Swiglu,
                                       .norm_first = true, .seed = 3},
                             .num_layers = 3,
                             .norm = true};
  EXPECT_EQ(TransformerStackOptions::from_json(so.to_json()).to_json(), so.to_json());
  EXPECT_THROW(TransformerLayerOptions::from_json(R"({"activation": "tanh"})"), Error);
}

TEST(TransformerTest, SquareSubsequentMask) {
  Array m = generate_square_subsequent_mask(3, DType::F64);
  double inf = std::numeric_limits<double>::infinity();
  std::vector<double> v = m.to_vector<double>();
  std::vector<double> want{0, -inf, -inf, 0, 0, -inf, 0, 0, 0};
  EXPECT_EQ(v, want);
  EXPECT_THROW(generate_square_subsequent_mask(0), Error);
}

TEST(TransformerTest, TransformerErrors) {
  EXPECT_THROW(TransformerEncoderLayer({.d_model = 6, .nhead = 4}), Error);
  EXPECT_THROW(TransformerDecoderLayer({.d_model = 8, .nhead = 2, .dim_feedforward = 0}), Error);
  EXPECT_THROW(TransformerEncoder({.layer = {.d_model = 8, .nhead = 2}, .num_layers = 0}), Error);
  TransformerEncoderLayer l({.d_model = 8, .nhead = 2, .dim_feedforward = 16});
  EXPECT_THROW(l.forward(ones({5, 2, 6})), Error);
  EXPECT_THROW(l.forward(ones({5, 2, 8}), {.mask = ones({4, 4})}), Error);
  TransformerDecoderLayer d({.d_model = 8, .nhead = 2, .dim_feedforward = 16});
  EXPECT_THROW(d.forward(ones({4, 2, 8}), ones({5, 8})), Error);
  try {
    l.forward(ones({5, 2, 6}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("TransformerEncoderLayer"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[5, 2, 6]"), std::string::npos) << e.what();
  }
}

// ---- position encodings ------------------------------------------------------------------------

void check_fn(const std::string& prefix, const Array& y, const std::vector<Array>& leaves) {
  SCOPED_TRACE(prefix);
  Gradients g = weighted_sum(y).backward();
  EXPECT_TRUE(all_close(y, attention_ref(prefix + ".y"), kTol, kTol));
  for (size_t i = 0; i < leaves.size(); ++i)
    EXPECT_TRUE(all_close(leaves[i].grad(g), attention_ref(prefix + ".d" + std::to_string(i)), kTol, kTol)) << "d" << i;
}

TEST(TransformerTest, SinusoidalPositionalEncoding) {
  EXPECT_TRUE(all_close(sinusoidal_table(7, 5, DType::F64), attention_ref("pe.table"), 1e-12, 1e-12));
  SinusoidalPositionalEncoding pe({.d_model = 6, .max_len = 16});
  Array x = det({2, 5, 6}, 0.37, 0.1).require_grad();
  check_fn("pe.batch_first", pe.forward(x), {x});
  SinusoidalPositionalEncoding pe_seq({.d_model = 6, .max_len = 16, .batch_first = false});
  Array xs = det({5, 2, 6}, 0.37, 0.1).require_grad();
  check_fn("pe.seq_first", pe_seq.forward(xs), {xs});
  // An offset continues the table; dropout is off in eval mode.
  Array z = zeros({3, 6}, {.dtype = DType::F64});
  EXPECT_TRUE(all_close(pe.forward(z, 2), narrow(sinusoidal_table(5, 6, DType::F64), 0, 2, 3).to_vector<double>(),
                        1e-12, 1e-12));
  SinusoidalPositionalEncoding drop({.d_model = 6, .dropout = 0.5});
  drop.eval();
  EXPECT_TRUE(all_close(drop.forward(z), sinusoidal_table(3, 6, DType::F64).to_vector<double>(), 1e-12, 1e-12));
  EXPECT_EQ(pe.num_params(), 0);
  EXPECT_THROW(pe.forward(ones({2, 5, 4})), Error);
  EXPECT_THROW(pe.forward(ones({2, 17, 6})), Error);  // past max_len
  EXPECT_THROW(SinusoidalPositionalEncoding({.d_model = 0}), Error);
  SinusoidalPositionalEncodingOptions o{.d_model = 8, .max_len = 64, .dropout = 0.1, .batch_first = false};
  EXPECT_EQ(SinusoidalPositionalEncodingOptions::from_json(o.to_json()).to_json(), o.to_json());
}

TEST(TransformerTest, RotaryEmbedding) {
  Array x = det({2, 3, 5, 6}, 0.37, 0.1).require_grad();
  check_fn("rope.interleaved", apply_rotary(x, {.offset = 3}), {x});
  check_fn("rope.half", apply_rotary(x, {.offset = 3, .interleaved = false}), {x});
  Array pos = from_vector(std::vector<int64_t>{0, 2, 4, 7, 1}, {5}, nn_device());
  check_fn("rope.positions", apply_rotary(x, {.positions = pos, .base = 500}), {x});
  RotaryEmbedding rope({.dim = 6, .interleaved = false});
  check_fn("rope.half", rope.forward(x, 3), {x});
  // Rotations keep each pair's norm; position 0 is the identity.
  Array y = apply_rotary(x, {.offset = 0});
  EXPECT_TRUE(all_close(select(y, 2, 0), select(x, 2, 0).to_vector<double>(), 1e-15, 1e-15));
  EXPECT_TRUE(all_close(sum(mul(y, y), {-1}), sum(mul(x, x), {-1}).to_vector<double>(), 1e-12, 1e-12));
  EXPECT_THROW(apply_rotary(ones({4, 5})), Error);  // odd D
  EXPECT_THROW(apply_rotary(ones({4, 6}), {.positions = ones({3})}), Error);
  EXPECT_THROW(RotaryEmbedding({.dim = 5}), Error);
  EXPECT_THROW(rope.forward(ones({4, 8})), Error);
  RotaryEmbeddingOptions o{.dim = 8, .base = 500, .interleaved = false};
  EXPECT_EQ(RotaryEmbeddingOptions::from_json(o.to_json()).to_json(), o.to_json());
}

}  // namespace
}  // namespace ember
