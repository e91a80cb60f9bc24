// fused_attention (include/ember/ops_library.h) on every backend: values and gradients against
// PyTorch (tools/reference/fused_attention_reference.py -> tests/ops/data/), then against the
// plain composition softmax(q k^T * scale + mask) v built from matmul/softmax on random inputs of
// many shapes (blocks not dividing L or S, E != Ev, causal with L != S, sizes of 1), f16/bf16
// against f32, peak memory far below an L x S buffer, and errors on bad arguments.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>

#include "ember/autograd.h"
#include "ember/device.h"
#include "nn/nn_test_util.h"
#include "ops/op_test_util.h"

namespace ember::testing {
namespace {

class FusedAttentionTest : public ::testing::TestWithParam<Device> {
 protected:
  Device dev = GetParam();
};

Array det_on(const Shape& shape, double a, double b, Device dev, DType dt = DType::F64) {
  std::vector<double> v(size_t(shape.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(a * double(i) + b);
  return cast(from_vector(v, shape, dev), dt);
}

Array random_on(const Shape& shape, uint32_t seed, Device dev, DType dt, double lo = -1.5, double hi = 1.5) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(size_t(shape.numel()));
  for (double& x : v) x = u(gen);
  return cast(from_vector(v, shape, dev), dt);
}

// The plain path: the whole score matrix, masked, through softmax.
Array plain_attention(const Array& q, const Array& k, const Array& v, const FusedAttentionOptions& o) {
  const int r = q.shape().rank();
  const int64_t L = q.shape()[r - 2], S = k.shape()[r - 2], E = q.shape()[r - 1];
  const double scale = o.scale ? *o.scale : 1.0 / std::sqrt(double(E));
  Array s = mul(matmul(q, transpose(k, r - 2, r - 1)), scale);
  if (o.mask.defined())
    s = o.mask.dtype() == DType::Bool ? where(o.mask, s, -std::numeric_limits<double>::infinity()) : add(s, o.mask);
  if (o.causal) {
    Array i = reshape(arange(0, L, 1, DType::I64, q.device()), Shape{L, 1});
    Array j = reshape(arange(0, S, 1, DType::I64, q.device()), Shape{1, S});
    s = where(le(j, i), s, -std::numeric_limits<double>::infinity());
  }
  return matmul(softmax(s, -1), v);
}

const std::map<std::string, std::vector<double>>& reference() {
  static auto ref = read_reference(tests_dir() + "/ops/data/fused_attention_reference.txt");
  return ref;
}
const std::vector<double>& expected_ref(const std::string& name) {
  auto it = reference().find(name);
  if (it == reference().end()) throw std::runtime_error("no reference value " + name);
  return it->second;
}

// Values and gradients of sum(y * det(y.shape, 0.29, 0.4)) against the script's lines.
void check_reference(const std::string& name, std::vector<Array> ins, const std::function<Array(const std::vector<Array>&)>& f) {
  for (Array& a : ins) a = a.require_grad();
  Array y = f(ins);
  EXPECT_TRUE(all_close(y, expected_ref("attn." + name + ".y"), 1e-10, 1e-12)) << name;
  Gradients g = sum(mul(y, det_on(y.shape(), 0.29, 0.4, y.device()))).backward();
  for (size_t i = 0; i < ins.size(); ++i)
    EXPECT_TRUE(all_close(ins[i].grad(g), expected_ref("attn." + name + ".d" + std::to_string(i)), 1e-10, 1e-12))
        << name << " input " << i;
}

TEST_P(FusedAttentionTest, ValuesAndGradientsMatchPyTorch) {
  struct C {
    std::string name;
    Shape qs, ks, vs;
    FusedAttentionOptions o;
  };
  const std::vector<C> cases = {
      {"basic", {2, 5, 4}, {2, 7, 4}, {2, 7, 3}, {}},
      {"causal_l_lt_s", {2, 3, 4, 6}, {2, 3, 9, 6}, {2, 3, 9, 5}, {.causal = true}},
      {"causal_l_gt_s", {1, 7, 3}, {1, 4, 3}, {1, 4, 2}, {.scale = 0.7, .causal = true}},
      {"long_causal", {1, 150, 8}, {1, 150, 8}, {1, 150, 8}, {.causal = true}},
  };
  for (const C& c : cases) {
    std::vector<Array> ins{det_on(c.qs, 0.37, 0.1, dev), det_on(c.ks, 0.53, 0.2, dev), det_on(c.vs, 0.61, 0.3, dev)};
    check_reference(c.name, ins, [&](const std::vector<Array>& a) { return fused_attention(a[0], a[1], a[2], c.o); });
  }
  std::vector<Array> ins{det_on({2, 5, 4}, 0.37, 0.1, dev), det_on({2, 6, 4}, 0.53, 0.2, dev),
                         det_on({2, 6, 3}, 0.61, 0.3, dev), det_on({5, 6}, 0.71, 0.5, dev)};
  check_reference("additive_mask", ins,
                  [](const std::vector<Array>& a) { return fused_attention(a[0], a[1], a[2], {.mask = a[3]}); });
  std::vector<bool> keep(12, true);
  keep[10] = keep[11] = false;  // batch 1, keys 4 and 5
  Array bm = from_vector(keep, Shape{2, 1, 6}, dev);
  ins.pop_back();
  check_reference("bool_mask", ins, [&](const std::vector<Array>& a) {
    return fused_attention(a[0], a[1], a[2], {.causal = true, .mask = bm});
  });
}

struct Case {
  Shape qs, ks, vs;
  bool causal = false;
  int mask = 0;  // 0 none, 1 additive [L, S], 2 bool [B..., 1, S]
  std::optional<double> scale;
};

std::vector<Case> shape_cases() {
  return {
      {{1, 1, 1}, {1, 1, 1}, {1, 1, 1}},                // all sizes 1
      {{3, 1, 5}, {3, 1, 5}, {3, 1, 2}, true},          // one query, one key, causal
      {{2, 37, 16}, {2, 200, 16}, {2, 200, 24}},        // S not a multiple of the key block, E != Ev
      {{2, 70, 8}, {2, 45, 8}, {2, 45, 3}, true},       // causal with L > S (top-left)
      {{1, 33, 5}, {1, 300, 5}, {1, 300, 7}, true},     // causal with L < S over several key blocks
      {{2, 2, 65, 12}, {2, 2, 129, 12}, {2, 2, 129, 12}, false, 1, 0.3},  // additive mask, own scale
      {{2, 40, 4}, {2, 130, 4}, {2, 130, 9}, true, 2},  // bool padding mask and causal
      {{4, 3}, {6, 3}, {6, 2}},                         // no batch dims
  };
}

Array make_mask(const Case& c, Device dev, DType dt) {
  const int r = c.qs.rank();
  const int64_t L = c.qs[r - 2], S = c.ks[r - 2];
  if (c.mask == 1) return random_on({L, S}, 77, dev, dt, -2, 2);
  if (c.mask == 2) {
    std::vector<int64_t> d(c.qs.begin(), c.qs.end() - 2);
    d.push_back(1);
    d.push_back(S);
    const Shape ms(d);
    std::vector<bool> keep(size_t(ms.numel()));
    for (size_t i = 0; i < keep.size(); ++i) keep[i] = (i % size_t(S)) < size_t(S) - 7 * (i / size_t(S) + 1) % size_t(S);
    return from_vector(keep, ms, dev);
  }
  return Array();
}

void compare_with_plain(Device dev, DType dt, double tol) {
  uint32_t seed = 1;
  for (const Case& c : shape_cases()) {
    const std::string what = "q " + c.qs.str() + " k " + c.ks.str() + " v " + c.vs.str() + " causal " +
                             std::to_string(c.causal) + " mask " + std::to_string(c.mask) + " " + std::string(dtype_name(dt));
    Array q = random_on(c.qs, seed++, dev, dt).require_grad();
    Array k = random_on(c.ks, seed++, dev, dt).require_grad();
    Array v = random_on(c.vs, seed++, dev, dt).require_grad();
    Array m = make_mask(c, dev, dt);
    if (c.mask == 1) m = m.require_grad();
    FusedAttentionOptions o{.scale = c.scale, .causal = c.causal, .mask = m};
    Array fused = fused_attention(q, k, v, o), plain = plain_attention(q, k, v, o);
    ASSERT_EQ(fused.shape(), plain.shape()) << what;
    EXPECT_TRUE(all_close(fused, plain.to_vector<double>(), tol, tol)) << what;
    Array w = random_on(fused.shape(), seed++, dev, dt);
    Gradients gf = sum(mul(fused, w)).backward(), gp = sum(mul(plain, w)).backward();
    std::vector<Array> leaves{q, k, v};
    if (c.mask == 1) leaves.push_back(m);
    for (size_t i = 0; i < leaves.size(); ++i)
      EXPECT_TRUE(all_close(leaves[i].grad(gf), leaves[i].grad(gp).to_vector<double>(), tol, tol))
          << what << " gradient " << i;
  }
}

TEST_P(FusedAttentionTest, EqualsPlainPathF64) { compare_with_plain(dev, DType::F64, 1e-11); }
TEST_P(FusedAttentionTest, EqualsPlainPathF32) { compare_with_plain(dev, DType::F32, 2e-5); }

// f16 / bf16 compute in f32: the result is the f32 result rounded to the dtype.
TEST_P(FusedAttentionTest, HalfDtypesFollowF32) {
  for (DType dt : {DType::F16, DType::BF16}) {
    Array q = random_on({2, 20, 8}, 5, dev, dt), k = random_on({2, 33, 8}, 6, dev, dt), v = random_on({2, 33, 4}, 7, dev, dt);
    Array got = fused_attention(q, k, v, {.causal = true});
    EXPECT_EQ(got.dtype(), dt);
    Array want = plain_attention(cast(q, DType::F32), cast(k, DType::F32), cast(v, DType::F32), {.causal = true});
    EXPECT_TRUE(all_close(got, want.to_vector<double>(), dt == DType::F16 ? 4e-3 : 2e-2, 4e-3)) << dtype_name(dt);
  }
}

// Relative root-mean-square distance of got from want.
double rel_rms(const std::vector<double>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / den);
}

// f16 / bf16 keep the softmax statistics in f32 (as PyTorch's kernels do): the logsumexp is f32,
// and the gradients, which recompute the probabilities from it, are within a small multiple of
// one rounding of the f64 gradients of the same (rounded) inputs. Scores of up to about +-20 make
// a rounded lse visible: with lse stored in bf16, the gradients were 1-3 % off (rms) against
// 0.16 % for one bf16 rounding.
TEST_P(FusedAttentionTest, HalfDtypesKeepTheSoftmaxStatisticsInF32) {
  for (DType dt : {DType::F16, DType::BF16}) {
    const Array q = random_on({2, 24, 16}, 31, dev, dt, -4, 4), k = random_on({2, 40, 16}, 32, dev, dt, -4, 4),
                v = random_on({2, 40, 8}, 33, dev, dt), w = random_on({2, 24, 8}, 34, dev, DType::F32);
    auto run = [&](DType compute, Device on) {  // the gradients of sum(o * w)
      std::vector<Array> in;
      for (const Array& x : {q, k, v}) in.push_back(cast(to_device(x, on), compute).require_grad());
      AttentionResult r = fused_attention_lse(in[0], in[1], in[2], {.causal = true});
      const DType wide = compute == DType::F64 ? DType::F64 : DType::F32;
      Gradients g = sum(mul(cast(r.out, wide), cast(to_device(w, on), wide))).backward();
      std::vector<std::vector<double>> got{cast(r.lse, DType::F64).to_vector<double>()};
      for (const Array& x : in) got.push_back(cast(x.grad(g), DType::F64).to_vector<double>());
      EXPECT_EQ(r.lse.dtype(), compute == DType::F64 ? DType::F64 : DType::F32) << dtype_name(compute);
      EXPECT_EQ(r.out.dtype(), compute);
      return got;
    };
    const std::vector<std::vector<double>> got = run(dt, dev), want = run(DType::F64, Device::cpu());
    EXPECT_LT(rel_rms(got[0], want[0]), 1e-6) << dtype_name(dt) << " lse";
    const double bound = dt == DType::BF16 ? 5e-3 : 7e-4;  // one rounding: 1.6e-3 and 2e-4 (rms)
    for (size_t i = 1; i < 4; ++i) EXPECT_LT(rel_rms(got[i], want[i]), bound) << dtype_name(dt) << " gradient " << i - 1;
  }
}

// Fused attention is one node with two outputs (o and lse, ops/make_array.h make_arrays): gradients
// reaching either or both, with and without create_graph (the fused backward op, or plain ops),
// equal the plain path's (f64: lse = logsumexp(s), o = softmax(s) v).
TEST_P(FusedAttentionTest, GradientsThroughEitherOutputMatchPlainPath) {
  const Array q0 = random_on({2, 5, 4}, 71, dev, DType::F64), k0 = random_on({2, 7, 4}, 72, dev, DType::F64),
              v0 = random_on({2, 7, 3}, 73, dev, DType::F64);
  const Array wo = random_on({2, 5, 3}, 74, dev, DType::F64), wl = random_on({2, 5}, 75, dev, DType::F64);
  for (bool causal : {false, true})
    for (int used : {1, 2, 3})  // 1: o only, 2: lse only, 3: both
      for (bool create_graph : {false, true}) {
        const std::string what = fmt::format("causal {} outputs {} create_graph {}", causal, used, create_graph);
        auto grads = [&](bool fused) {
          std::vector<Array> in{q0.require_grad(), k0.require_grad(), v0.require_grad()};
          Array o, lse;
          if (fused) {
            AttentionResult r = fused_attention_lse(in[0], in[1], in[2], {.causal = causal});
            o = r.out;
            lse = r.lse;
          } else {
            Array s = mul(matmul(in[0], transpose(in[1], 1, 2)), 0.5);
            if (causal) {
              Array i = reshape(arange(0, 5, 1, DType::I64, dev), Shape{5, 1});
              Array j = reshape(arange(0, 7, 1, DType::I64, dev), Shape{1, 7});
              s = where(le(j, i), s, -std::numeric_limits<double>::infinity());
            }
            lse = logsumexp(s, {2});
            o = matmul(softmax(s, -1), in[2]);
          }
          Array loss;
          if (used & 1) loss = sum(mul(o, wo));
          if (used & 2) loss = loss.defined() ? add(loss, sum(mul(lse, wl))) : sum(mul(lse, wl));
          std::vector<Array> g = grad(loss, in, {.create_graph = create_graph, .materialize_grads = true});
          std::vector<std::vector<double>> out;
          for (const Array& x : g) out.push_back(x.to_vector<double>());
          if (create_graph)  // a second order, d/dk of |dL/dq|^2, through the plain-op backward
            out.push_back(grad(sum(mul(g[0], g[0])), {in[1]})[0].to_vector<double>());
          return out;
        };
        const auto got = grads(true), want = grads(false);
        ASSERT_EQ(got.size(), want.size()) << what;
        for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(all_close(got[i], want[i], 1e-10, 1e-12)) << what << " grad " << i;
      }
}

// The logsumexp output is logsumexp of the masked scores; a row that sees nothing is NaN / -inf.
TEST_P(FusedAttentionTest, LogsumexpAndFullyMaskedRows) {
  Array q = random_on({2, 6, 4}, 11, dev, DType::F64), k = random_on({2, 9, 4}, 12, dev, DType::F64);
  Array v = random_on({2, 9, 3}, 13, dev, DType::F64);
  std::vector<double> hide(6 * 9, 0.0);
  for (int j = 0; j < 9; ++j) hide[size_t(2 * 9 + j)] = -std::numeric_limits<double>::infinity();  // row 2 hidden
  Array mask = from_vector(hide, Shape{6, 9}, dev);
  AttentionResult r = fused_attention_lse(q, k, v, {.scale = 0.5, .mask = mask});
  Array s = add(mul(matmul(q, transpose(k, 1, 2)), 0.5), mask);
  std::vector<double> want = logsumexp(s, {2}).to_vector<double>();
  EXPECT_TRUE(all_close(r.lse, want, 1e-12, 1e-12));
  std::vector<double> o = r.out.to_vector<double>();
  for (int b = 0; b < 2; ++b)
    for (int c = 0; c < 3; ++c) EXPECT_TRUE(std::isnan(o[size_t((b * 6 + 2) * 3 + c)]));
}

// L = S = 4096 (f32, E = 64): the call's peak device memory is its output, far below the 64 MiB
// of one L x S score matrix, which the plain path does allocate; so is the backward pass's. The reference backend
// runs scalar loops, so it is measured at L = S = 1024.
TEST_P(FusedAttentionTest, PeakMemoryStaysFarBelowTheScoreMatrix) {
  const int64_t L = dev == Device::cpu() ? 4096 : 1024, E = 64, scores = L * L * 4;
  Array q = random_on({1, L, E}, 21, dev, DType::F32), k = random_on({1, L, E}, 22, dev, DType::F32);
  Array v = random_on({1, L, E}, 23, dev, DType::F32);
  eval({q, k, v});
  synchronize(dev);
  const int64_t base = memory_stats(dev).live_bytes;
  reset_peak_memory(dev);
  Array o = fused_attention(q, k, v, {.causal = true});
  o.eval();
  const int64_t fused_peak = memory_stats(dev).peak_bytes - base, out_bytes = (L * E + L) * 4;
  EXPECT_LE(fused_peak, out_bytes + 4096) << "fused peak " << fused_peak << " bytes: only the output";
  EXPECT_LT(fused_peak, scores / 8) << "fused peak " << fused_peak << " bytes";
  EXPECT_TRUE(std::isfinite(o.to_vector<double>().back()));
  // The first rows against the plain path (a causal query i only sees keys 0..i).
  Array want = plain_attention(slice(q, 1, 0, 8), slice(k, 1, 0, 8), slice(v, 1, 0, 8), {.causal = true});
  EXPECT_TRUE(all_close(slice(o, 1, 0, 8), want.to_vector<double>(), 1e-5, 1e-5));
  reset_peak_memory(dev);
  Array p = plain_attention(q, k, v, {.causal = true});
  p.eval();
  EXPECT_GE(memory_stats(dev).peak_bytes - base, scores) << "the plain path holds the scores";
  p = Array();
  // The backward pass (the fused backward op) stays below one score matrix too; dq of the first
  // causal rows depends only on the first keys, so it matches the plain path on that slice.
  Array qg = q.require_grad(), kg = k.require_grad(), vg = v.require_grad();
  synchronize(dev);
  const int64_t base2 = memory_stats(dev).live_bytes;
  reset_peak_memory(dev);
  Gradients g = sum(fused_attention(qg, kg, vg, {.causal = true})).backward();
  Array dq = qg.grad(g), dk = kg.grad(g), dv = vg.grad(g);
  eval({dq, dk, dv});
  const int64_t backward_peak = memory_stats(dev).peak_bytes - base2;
  // A dozen L x E buffers (forward output, gradients, the packed gradient) and under half a score matrix.
  EXPECT_LT(backward_peak, 12 * L * E * 4) << "backward peak " << backward_peak << " bytes";
  EXPECT_LT(backward_peak, scores / 2) << "backward peak " << backward_peak << " bytes";
  std::printf("[ info ] %s L = S = %lld: fused forward peak %lld bytes, backward peak %lld, one score matrix %lld\n",
              dev.str().c_str(), (long long)L, (long long)fused_peak, (long long)backward_peak, (long long)scores);
  Array q8 = slice(q, 1, 0, 8).require_grad();
  Gradients g8 = sum(plain_attention(q8, slice(k, 1, 0, 8), slice(v, 1, 0, 8), {.causal = true})).backward();
  EXPECT_TRUE(all_close(slice(dq, 1, 0, 8), q8.grad(g8).to_vector<double>(), 1e-4, 1e-5));
}

TEST_P(FusedAttentionTest, BadArgumentsThrow) {
  Array q = random_on({2, 4, 3}, 1, dev, DType::F32), k = random_on({2, 5, 3}, 2, dev, DType::F32);
  Array v = random_on({2, 5, 6}, 3, dev, DType::F32);
  auto rnd = [&](const Shape& s, uint32_t seed) { return random_on(s, seed, dev, DType::F32); };
  EXPECT_TRUE(has_all(error_of([&] { fused_attention(reshape(q, {24}), k, v); }),
                      {"fused_attention", "at least 2 dims", "[24]"}));
  EXPECT_TRUE(has_all(error_of([&] { fused_attention(q, reshape(k, {1, 2, 5, 3}), v); }),
                      {"fused_attention", "same rank", "[1, 2, 5, 3]"}));
  EXPECT_TRUE(has_all(error_of([&] { fused_attention(q, rnd({2, 5, 4}, 4), v); }), {"fused_attention", "(E = 3)"}));
  EXPECT_TRUE(has_all(error_of([&] { fused_attention(q, k, rnd({2, 4, 6}, 5)); }), {"fused_attention", "(S = 5)"}));
  EXPECT_TRUE(has_all(error_of([&] { fused_attention(q, rnd({3, 5, 3}, 6), v); }),
                      {"fused_attention", "same leading dims", "[2]", "[3]"}));
  EXPECT_TRUE(has_all(error_of([&] { fused_attention(cast(q, DType::I32), cast(k, DType::I32), cast(v, DType::I32)); }),
                      {"fused_attention", "needs floating", "int32"}));
  EXPECT_TRUE(has_all(error_of([&] { fused_attention(q, k, v, {.mask = rnd({4, 4}, 7)}); }),
                      {"fused_attention", "does not broadcast", "[4, 4]", "[2, 4, 5]"}));
  EXPECT_TRUE(has_all(error_of([&] { fused_attention(q, k, v, {.mask = cast(rnd({4, 5}, 8), DType::I64)}); }),
                      {"fused_attention", "mask must be bool", "int64"}));
  EXPECT_TRUE(has_all(error_of([&] { fused_attention(q, k, v, {.scale = std::numeric_limits<double>::infinity()}); }),
                      {"fused_attention", "scale must be finite"}));
  EXPECT_EQ(error_of([&] { fused_attention(q, k, v, {.causal = true, .mask = rnd({5}, 9)}).eval(); }), "<no error>");
}

// Empty dims: E = 0 gives uniform weights (the mean of v's rows), S = 0 leaves every query with
// nothing to see (NaN, lse -inf), L = 0 an empty result; gradients of the first case too.
TEST_P(FusedAttentionTest, EmptyDims) {
  Array q = random_on({2, 3, 0}, 51, dev, DType::F64).require_grad(), k = random_on({2, 4, 0}, 52, dev, DType::F64);
  Array v = random_on({2, 4, 2}, 53, dev, DType::F64).require_grad();
  Array y = fused_attention(q, k, v);
  EXPECT_TRUE(all_close(y, expand(mean(v, {1}, true), Shape{2, 3, 2}).to_vector<double>(), 1e-14, 1e-14));
  Gradients g = sum(y).backward();
  EXPECT_TRUE(all_close(v.grad(g), std::vector<double>(16, 0.75), 1e-14, 1e-14));
  AttentionResult none = fused_attention_lse(random_on({1, 2, 3}, 54, dev, DType::F64),
                                             random_on({1, 0, 3}, 55, dev, DType::F64),
                                             random_on({1, 0, 2}, 56, dev, DType::F64));
  for (double x : none.out.to_vector<double>()) EXPECT_TRUE(std::isnan(x));
  for (double x : none.lse.to_vector<double>()) EXPECT_EQ(x, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(fused_attention(random_on({2, 0, 3}, 57, dev, DType::F32), random_on({2, 5, 3}, 58, dev, DType::F32),
                            random_on({2, 5, 4}, 59, dev, DType::F32))
                .shape(),
            (Shape{2, 0, 4}));
}

// With create_graph the gradient is built from plain ops, so it differentiates again: the
// gradient of sum(dq^2) matches the plain path's.
TEST_P(FusedAttentionTest, SecondOrderGradientsMatchPlainPath) {
  Array q = random_on({2, 5, 3}, 41, dev, DType::F64).require_grad();
  Array k = random_on({2, 7, 3}, 42, dev, DType::F64).require_grad();
  Array v = random_on({2, 7, 4}, 43, dev, DType::F64).require_grad();
  auto second = [&](const Array& y) {
    Gradients g = sum(mul(y, y)).backward({.create_graph = true});
    Gradients g2 = sum(mul(q.grad(g), q.grad(g))).backward();
    return std::vector<std::vector<double>>{k.grad(g2).to_vector<double>(), v.grad(g2).to_vector<double>()};
  };
  const auto fused = second(fused_attention(q, k, v, {.causal = true})), plain = second(plain_attention(q, k, v, {.causal = true}));
  for (size_t i = 0; i < fused.size(); ++i) EXPECT_TRUE(all_close(fused[i], plain[i], 1e-10, 1e-12)) << i;
}

// nn::scaled_dot_product_attention hands long sequences without dropout or masks other than
// causal to fused_attention: the same values and gradients as its composed path (EMBER_SDPA=fused
// against =plain); left to choose, it takes the fused path for a causal 600 x 640 with gradients
// and a non-causal one without (peak memory below one batch of scores), the plain path for a
// non-causal one with gradients (below 1024^2).
TEST_P(FusedAttentionTest, SdpaLongSequencesMatchPlainPath) {
  if (!fused_attention_available(dev, DType::F64))
    GTEST_SKIP() << dev.str() << " has no fused attention on f64 (a device without f64: EMBER_REFERENCE_WEAK=1, EMBER_VULKAN_DISABLE=f64): nothing to compare";
  const int64_t L = 600, S = 640;
  Array q = random_on({2, 2, L, 16}, 31, dev, DType::F64).require_grad();
  Array k = random_on({2, 2, S, 16}, 32, dev, DType::F64).require_grad();
  Array v = random_on({2, 2, S, 8}, 33, dev, DType::F64).require_grad();
  Array w = random_on({2, 2, L, 8}, 34, dev, DType::F64);
  eval({q, k, v, w});
  for (bool causal : {false, true}) {
    auto run = [&](const char* path, int64_t* peak) {
      setenv("EMBER_SDPA", path, 1);
      synchronize(dev);
      const int64_t base = memory_stats(dev).live_bytes;
      reset_peak_memory(dev);
      Array y = nn::scaled_dot_product_attention(q, k, v, {.is_causal = causal, .training = false});
      y.eval();
      *peak = memory_stats(dev).peak_bytes - base;
      Gradients g = sum(mul(y, w)).backward();
      unsetenv("EMBER_SDPA");
      return std::vector<std::vector<double>>{y.to_vector<double>(), q.grad(g).to_vector<double>(),
                                              k.grad(g).to_vector<double>(), v.grad(g).to_vector<double>()};
    };
    int64_t peak_fused = 0, peak_plain = 0, peak_auto = 0;
    const auto fused = run("fused", &peak_fused), plain = run("plain", &peak_plain);
    run("auto", &peak_auto);
    for (size_t i = 0; i < fused.size(); ++i)
      EXPECT_TRUE(all_close(fused[i], plain[i], 1e-11, 1e-12)) << "causal " << causal << " result " << i;
    const int64_t scores = 2 * 2 * L * S * 8;
    EXPECT_LT(peak_fused, scores / 8);
    EXPECT_GE(peak_plain, scores);
    if (causal)
      EXPECT_LT(peak_auto, scores / 8) << "a long causal sequence takes the fused path";
    else
      EXPECT_GE(peak_auto, scores) << "non-causal with gradients below 1024^2 stays on the plain path";
  }
  NoGradGuard no_grad;
  synchronize(dev);
  const int64_t base = memory_stats(dev).live_bytes;
  reset_peak_memory(dev);
  nn::scaled_dot_product_attention(q, k, v).eval();
  EXPECT_LT(memory_stats(dev).peak_bytes - base, 2 * 2 * L * S * 8 / 8) << "without gradients: the fused path";
}

INSTANTIATE_TEST_SUITE_P(Devices, FusedAttentionTest, ::testing::ValuesIn(test_devices()), device_test_name);

}  // namespace
}  // namespace ember::testing
