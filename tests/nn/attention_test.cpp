// Scaled dot-product attention and MultiheadAttention against PyTorch
// (tools/reference/nn_attention_reference.py, float64): values, attention weights, gradients of
// the inputs and of every parameter, PyTorch's parameter names (strict state-dict loads), masks,
// dropout in eval mode, argument errors.
#include <gtest/gtest.h>

#include "ember/nn/attention.h"
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

void check_fn(const std::string& prefix, const Array& y, const std::vector<Array>& leaves) {
  SCOPED_TRACE(prefix);
  Gradients g = weighted_sum(y).backward();
  EXPECT_TRUE(all_close(y, attention_ref(prefix + ".y"), kTol, kTol));
  for (size_t i = 0; i < leaves.size(); ++i)
    EXPECT_TRUE(all_close(leaves[i].grad(g), attention_ref(prefix + ".d" + std::to_string(i)), kTol, kTol)) << "d" << i;
}

// The script's bool masks: det > -0.3 with the first key always allowed.
Array bool_mask(const Shape& shape, double a, double b) {
  Array m = gt(det(shape, a, b), -0.3);
  Array first = eq(arange(0, shape.dims().back(), 1, DType::I64, nn_device()), 0);
  return logical_or(m, first);
}

TEST(AttentionTest, SdpaMatchesFormula) {
  Array q = det({2, 3, 4, 5}, 0.37, 0.1).require_grad();
  Array k = det({2, 3, 6, 5}, 0.53, 0.7).require_grad();
  Array v = det({2, 3, 6, 4}, 0.71, 0.2).require_grad();
  check_fn("sdpa.plain", scaled_dot_product_attention(q, k, v), {q, k, v});
  check_fn("sdpa.scale", scaled_dot_product_attention(q, k, v, {.scale = 0.3}), {q, k, v});
  check_fn("sdpa.causal", scaled_dot_product_attention(q, k, v, {.is_causal = true}), {q, k, v});
  check_fn("sdpa.bool", scaled_dot_product_attention(q, k, v, {.attn_mask = bool_mask({4, 6}, 0.9, 0.3)}), {q, k, v});
  check_fn("sdpa.bool_bcast", scaled_dot_product_attention(q, k, v, {.attn_mask = bool_mask({2, 1, 1, 6}, 0.8, 0.5)}),
           {q, k, v});
  Array m = mul(det({2, 1, 4, 6}, 0.43, 0.9), 2.0).require_grad();
  check_fn("sdpa.float", scaled_dot_product_attention(q, k, v, {.attn_mask = m}), {q, k, v, m});
  Array q3 = det({3, 5, 4}, 0.37, 0.1).require_grad();
  Array k3 = det({3, 5, 4}, 0.53, 0.7).require_grad();
  Array v3 = det({3, 5, 2}, 0.71, 0.2).require_grad();
  check_fn("sdpa.rank3", scaled_dot_product_attention(q3, k3, v3, {.is_causal = true, .scale = 0.7}), {q3, k3, v3});

  // The weights form: rows sum to one; causal weights are zero above the diagonal.
  SdpaResult r = scaled_dot_product_attention_with_weights(q3, k3, v3, {.is_causal = true});
  EXPECT_TRUE(all_close(sum(r.weights, {-1}), std::vector<double>(15, 1.0), kTol, kTol));
  std::vector<double> w = r.weights.to_vector<double>();
  for (int b = 0; b < 3; ++b)
    for (int i = 0; i < 5; ++i)
      for (int j = i + 1; j < 5; ++j) EXPECT_EQ(w[size_t(b * 25 + i * 5 + j)], 0.0);
}

TEST(AttentionTest, SdpaDropout) {
  Array q = det({2, 4, 3}, 0.37, 0.1), k = det({2, 5, 3}, 0.53, 0.7), v = det({2, 5, 3}, 0.71, 0.2);
  Array plain = scaled_dot_product_attention(q, k, v);
  // Not training (or p = 0): no dropout at all.
  EXPECT_TRUE(all_close(scaled_dot_product_attention(q, k, v, {.dropout_p = 0.5, .training = false}),
                        plain.to_vector<double>(), 0, 0));
  // Training: each weight is dropped or scaled by 1 / (1 - p); seeded draws repeat.
  SdpaOptions o{.dropout_p = 0.5, .seed = 11};
  SdpaResult a = scaled_dot_product_attention_with_weights(q, k, v, o);
  SdpaResult b = scaled_dot_product_attention_with_weights(q, k, v, o);
  EXPECT_TRUE(all_close(a.output, b.output.to_vector<double>(), 0, 0));
  std::vector<double> wd = a.weights.to_vector<double>();
  std::vector<double> w = scaled_dot_product_attention_with_weights(q, k, v).weights.to_vector<double>();
  int zeros = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    if (wd[i] == 0) ++zeros;
    else EXPECT_NEAR(wd[i], 2 * w[i], 1e-12);
  }
  EXPECT_GT(zeros, 5);
  EXPECT_LT(zeros, 35);
  EXPECT_TRUE(all_close(a.output, matmul(a.weights, v).to_vector<double>(), kTol, kTol));
}

TEST(AttentionTest, SdpaErrors) {
  Array q = ones({2, 4, 3}, {.dtype = DType::F64}), k = ones({2, 5, 3}, {.dtype = DType::F64});
  Array v = ones({2, 5, 2}, {.dtype = DType::F64});
  EXPECT_THROW(scaled_dot_product_attention(ones({3}, {.dtype = DType::F64}), k, v), Error);
  EXPECT_THROW(scaled_dot_product_attention(q, ones({2, 5, 4}, {.dtype = DType::F64}), v), Error);  // E differs
  EXPECT_THROW(scaled_dot_product_attention(q, k, ones({2, 6, 2}, {.dtype = DType::F64})), Error);  // S differs
  EXPECT_THROW(scaled_dot_product_attention(q, k, cast(v, DType::F32)), Error);
  EXPECT_THROW(scaled_dot_product_attention(q, k, v, {.attn_mask = ones({4, 4}, {.dtype = DType::Bool})}), Error);
  EXPECT_THROW(scaled_dot_product_attention(q, k, v, {.attn_mask = ones({4, 5}, {.dtype = DType::I64})}), Error);
  EXPECT_THROW(scaled_dot_product_attention(q, k, v, {.attn_mask = ones({4, 5}), .is_causal = true}), Error);
  EXPECT_THROW(scaled_dot_product_attention(q, k, v, {.dropout_p = 1.5}), Error);
  try {
    scaled_dot_product_attention(q, ones({2, 5, 4}, {.dtype = DType::F64}), v);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("scaled_dot_product_attention"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[2, 5, 4]"), std::string::npos) << e.what();
  }
}

MultiheadAttention torch_mha(const std::string& prefix, MultiheadAttentionOptions o) {
  o.dtype = DType::F64;
  o.device = nn_device();
  MultiheadAttention m(o);
  load_torch_params(m, prefix);
  m.eval();
  return m;
}

TEST(AttentionTest, MultiheadAttentionMatchesTorch) {
  Array q = det({4, 2, 8}, 0.37, 0.1).require_grad();
  Array k = det({5, 2, 8}, 0.53, 0.7).require_grad();
  Array v = det({5, 2, 8}, 0.71, 0.2).require_grad();
  {
    auto m = torch_mha("mha.basic", {.embed_dim = 8, .num_heads = 2});
    MhaOutput o = m.forward(q, k, v);
    EXPECT_EQ(o.weights.shape(), Shape({2, 4, 5}));
    check_module("mha.basic", m, o.output, o.weights, {q, k, v});
  }
  {
    auto m = torch_mha("mha.dropout_eval", {.embed_dim = 8, .num_heads = 2, .dropout = 0.5});
    MhaOutput o = m.forward(q, k, v);
    check_module("mha.dropout_eval", m, o.output, o.weights, {q, k, v});
  }
  {
    auto m = torch_mha("mha.nobias", {.embed_dim = 8, .num_heads = 4, .bias = false});
    EXPECT_FALSE(m.in_proj_bias.defined());
    EXPECT_FALSE(m.out_proj.bias.defined());
    MhaOutput o = m.forward(q, k, v, {.average_attn_weights = false});
    EXPECT_EQ(o.weights.shape(), Shape({2, 4, 4, 5}));
    check_module("mha.nobias", m, o.output, o.weights, {q, k, v});
  }
  {
    auto m = torch_mha("mha.kvdim", {.embed_dim = 8, .num_heads = 2, .kdim = 6, .vdim = 3, .batch_first = true});
    EXPECT_FALSE(m.in_proj_weight.defined());
    Array qb = det({2, 4, 8}, 0.37, 0.1).require_grad();
    Array kb = det({2, 5, 6}, 0.53, 0.7).require_grad();
    Array vb = det({2, 5, 3}, 0.71, 0.2).require_grad();
    MhaOutput o = m.forward(qb, kb, vb, {.average_attn_weights = false});
    EXPECT_EQ(o.output.shape(), Shape({2, 4, 8}));
    check_module("mha.kvdim", m, o.output, o.weights, {qb, kb, vb});
  }
}

TEST(AttentionTest, MultiheadAttentionMasksMatchTorch) {
  Array q = det({4, 2, 8}, 0.37, 0.1).require_grad();
  Array k = det({5, 2, 8}, 0.53, 0.7).require_grad();
  Array v = det({5, 2, 8}, 0.71, 0.2).require_grad();
  Array kpm = from_vector(std::vector<uint8_t>{0, 0, 0, 1, 1, 0, 1, 0, 0, 0}, {2, 5}, nn_device());
  kpm = cast(kpm, DType::Bool);
  {
    auto m = torch_mha("mha.bool_masks", {.embed_dim = 8, .num_heads = 2});
    MhaOutput o = m.forward(q, k, v, {.key_padding_mask = kpm, .attn_mask = logical_not(bool_mask({4, 5}, 0.9, 0.3))});
    check_module("mha.bool_masks", m, o.output, o.weights, {q, k, v});
  }
  {
    auto m = torch_mha("mha.float3d_masks", {.embed_dim = 8, .num_heads = 2});
    Array kpm2 = cast(from_vector(std::vector<uint8_t>{0, 0, 0, 0, 1, 0, 0, 1, 0, 0}, {2, 5}, nn_device()), DType::Bool);
    MhaOutput o = m.forward(q, k, v, {.key_padding_mask = kpm2, .attn_mask = mul(det({4, 4, 5}, 0.61, 0.2), 2.0)});
    check_module("mha.float3d_masks", m, o.output, o.weights, {q, k, v});
  }
  {
    auto m = torch_mha("mha.float_kpm", {.embed_dim = 8, .num_heads = 2});
    MhaOutput o = m.forward(q, k, v, {.key_padding_mask = mul(det({2, 5}, 0.77, 0.4), 3.0)});
    check_module("mha.float_kpm", m, o.output, o.weights, {q, k, v});
  }
  {
    auto m = torch_mha("mha.self", {.embed_dim = 8, .num_heads = 2});
    MhaOutput o = m.forward(q, q, q);
    check_module("mha.self", m, o.output, o.weights, {q});
  }
  {
    auto m = torch_mha("mha.no_weights", {.embed_dim = 8, .num_heads = 2});
    MhaOutput o = m.forward(q, k, v, {.need_weights = false});
    EXPECT_FALSE(o.weights.defined());
    check_module("mha.no_weights", m, o.output, o.weights, {q, k, v});
  }
  {
    auto m = torch_mha("mha.unbatched", {.embed_dim = 8, .num_heads = 2});
    Array qu = det({4, 8}, 0.37, 0.1).require_grad();
    Array ku = det({5, 8}, 0.53, 0.7).require_grad();
    Array vu = det({5, 8}, 0.71, 0.2).require_grad();
    MhaOutput o = m.forward(qu, ku, vu, {.attn_mask = logical_not(bool_mask({2, 4, 5}, 0.47, 0.8))});
    EXPECT_EQ(o.output.shape(), Shape({4, 8}));
    EXPECT_EQ(o.weights.shape(), Shape({4, 5}));
    check_module("mha.unbatched", m, o.output, o.weights, {qu, ku, vu});
  }
}

TEST(AttentionTest, MultiheadAttentionModule) {
  MultiheadAttention m({.embed_dim = 6, .num_heads = 3, .seed = 3});
  std::vector<std::string> names;
  for (auto& [name, p] : m.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"}));
  // PyTorch's init: xavier-uniform packed weight (bound sqrt(6 / (6 + 18))), zero biases.
  for (double w : m.in_proj_weight.array().to_vector<double>()) EXPECT_LE(std::abs(w), std::sqrt(6.0 / 24) + 1e-7);
  for (double b : m.in_proj_bias.array().to_vector<double>()) EXPECT_EQ(b, 0.0);
  for (double b : m.out_proj.bias.array().to_vector<double>()) EXPECT_EQ(b, 0.0);
  // Seeded: the same parameters again.
  MultiheadAttention m2({.embed_dim = 6, .num_heads = 3, .seed = 3});
  EXPECT_TRUE(all_close(m2.in_proj_weight.array(), m.in_proj_weight.array().to_vector<double>(), 0, 0));
  // Self-attention form; eval with dropout equals no dropout.
  MultiheadAttention d({.embed_dim = 6, .num_heads = 3, .dropout = 0.5, .batch_first = true, .seed = 3});
  Array x = cast(det({2, 4, 6}, 0.3, 0.1), DType::F32);
  d.eval();
  Array y_eval = d.forward(x);
  // Same seed, same parameters: batch_first only changes the layout.
  Array y_seq = transpose(m2.forward(transpose(x, 0, 1)), 0, 1);
  EXPECT_TRUE(all_close(y_eval, y_seq.to_vector<double>(), 1e-6, 1e-6));
  d.train();
  Array y_train = d.forward(x);
  EXPECT_FALSE(all_close(y_train, y_eval.to_vector<double>(), 1e-6, 1e-6));
  // Options round-trip through JSON.
  MultiheadAttentionOptions o{.embed_dim = 8, .num_heads = 2, .dropout = 0.1, .kdim = 4, .batch_first = true};
  EXPECT_EQ(MultiheadAttentionOptions::from_json(o.to_json()).to_json(), o.to_json());
  EXPECT_EQ(m.type_name(), "MultiheadAttention");
}

TEST(AttentionTest, MultiheadAttentionErrors) {
  EXPECT_THROW(MultiheadAttention({.embed_dim = 6, .num_heads = 4}), Error);
  EXPECT_THROW(MultiheadAttention({.embed_dim = 0}), Error);
  EXPECT_THROW(MultiheadAttention({.embed_dim = 4, .dropout = 2}), Error);
  MultiheadAttention m({.embed_dim = 4, .num_heads = 2});
  Array x = ones({3, 2, 4});
  EXPECT_THROW(m.forward(ones({3, 2, 5}), x, x), Error);           // wrong E
  EXPECT_THROW(m.forward(x, ones({3, 4}), ones({3, 4})), Error);    // batched query, unbatched key
  EXPECT_THROW(m.forward(x, ones({3, 3, 4}), ones({3, 3, 4})), Error);  // batch sizes differ
  EXPECT_THROW(m.forward(x, x, x, {.attn_mask = ones({3, 4}, {.dtype = DType::Bool})}), Error);
  EXPECT_THROW(m.forward(x, x, x, {.attn_mask = ones({3, 3, 3}, {.dtype = DType::Bool})}), Error);
  EXPECT_THROW(m.forward(x, x, x, {.key_padding_mask = ones({3, 2}, {.dtype = DType::Bool})}), Error);
  EXPECT_THROW(m.forward(x, x, x, {.key_padding_mask = ones({2, 3}, {.dtype = DType::I64})}), Error);
  try {
    m.forward(x, x, x, {.attn_mask = ones({3, 4}, {.dtype = DType::Bool})});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("MultiheadAttention"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[3, 4]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ember
