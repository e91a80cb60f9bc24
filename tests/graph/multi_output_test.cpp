// Multi-output nodes (ops/make_array.h make_arrays): one node computing several arrays of different
// shapes, read through OutputOf nodes. Fused attention is the op that has one (o and lse): both
// outputs against values computed by hand in double, consumers of both fused into one kernel, an
// output read after its sibling array was dropped, eager mode, a captured function's replay, NaN
// rows against the reference backend, and the node's printing.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "ember/capture.h"
#include "ember/debug.h"
#include "ember/ember.h"
#include "graph/node.h"
#include "test_util.h"

namespace ember {
namespace {

class MultiOutputTest : public ::testing::TestWithParam<Device> {
 protected:
  Device dev() const { return GetParam(); }
};

constexpr int64_t B = 2, L = 3, S = 4, E = 2, Ev = 3;

std::vector<double> values(int64_t n, double a, double b) {
  std::vector<double> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(a * double(i) + b);
  return v;
}

// o [B, L, Ev] and lse [B, L] of softmax(q k^T / sqrt(E)) v, by hand in double.
struct Expected {
  std::vector<double> o, lse;
};
Expected by_hand(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v) {
  Expected r;
  const double scale = 1.0 / std::sqrt(double(E));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < L; ++i) {
      std::vector<double> s(S);
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < S; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < E; ++e) dot += q[size_t((b * L + i) * E + e)] * k[size_t((b * S + j) * E + e)];
        s[size_t(j)] = dot * scale;
        mx = std::max(mx, s[size_t(j)]);
      }
      double sum = 0;
      for (double x : s) sum += std::exp(x - mx);
      const double lse = mx + std::log(sum);
      r.lse.push_back(lse);
      for (int64_t c = 0; c < Ev; ++c) {
        double acc = 0;
        for (int64_t j = 0; j < S; ++j) acc += std::exp(s[size_t(j)] - lse) * v[size_t((b * S + j) * Ev + c)];
        r.o.push_back(acc);
      }
    }
  return r;
}

struct Inputs {
  std::vector<double> q = values(B * L * E, 0.7, 0.1), k = values(B * S * E, 0.45, 0.9), v = values(B * S * Ev, 0.3, 2.0);
  Array on(Device d, const std::vector<double>& x, Shape s) const { return from_vector(x, s, d); }
  Array qa(Device d) const { return on(d, q, {B, L, E}); }
  Array ka(Device d) const { return on(d, k, {B, S, E}); }
  Array va(Device d) const { return on(d, v, {B, S, Ev}); }
};

TEST_P(MultiOutputTest, BothOutputsAndAKernelReadingBothMatchHandValues) {
  const Inputs in;
  const Expected want = by_hand(in.q, in.k, in.v);
  AttentionResult r = fused_attention_lse(in.qa(dev()), in.ka(dev()), in.va(dev()));
  ASSERT_EQ(r.out.shape(), Shape({B, L, Ev}));
  ASSERT_EQ(r.lse.shape(), Shape({B, L}));
  // One elementwise kernel reading both outputs of the one node: o + lse (broadcast) and lse * 2.
  Array both = add(r.out, unsqueeze(r.lse, 2));
  Array twice = mul(r.lse, 2.0);
  const std::string text = graph_text({both, twice});
  EXPECT_NE(text.find("output_of"), std::string::npos) << text;
  EXPECT_NE(text.find("output 1"), std::string::npos) << text;
  std::vector<double> want_both, want_twice;
  for (int64_t row = 0; row < B * L; ++row) {
    want_twice.push_back(2 * want.lse[size_t(row)]);
    for (int64_t c = 0; c < Ev; ++c) want_both.push_back(want.o[size_t(row * Ev + c)] + want.lse[size_t(row)]);
  }
  eval({both, twice});
  EXPECT_TRUE(testing::all_close(both, want_both, 1e-12, 1e-12));
  EXPECT_TRUE(testing::all_close(twice, want_twice, 1e-12, 1e-12));
  EXPECT_TRUE(testing::all_close(r.out, want.o, 1e-12, 1e-12));
  EXPECT_TRUE(testing::all_close(r.lse, want.lse, 1e-12, 1e-12));
}

// Each result keeps the node alive: one output is read after the array of the other was dropped,
// pending or computed.
TEST_P(MultiOutputTest, AnOutputOutlivesItsSibling) {
  const Inputs in;
  const Expected want = by_hand(in.q, in.k, in.v);
  Array lse, out;
  {
    AttentionResult r = fused_attention_lse(in.qa(dev()), in.ka(dev()), in.va(dev()));
    lse = r.lse;  // r.out dies pending
  }
  EXPECT_TRUE(testing::all_close(lse, want.lse, 1e-12, 1e-12));
  {
    AttentionResult r = fused_attention_lse(in.qa(dev()), in.ka(dev()), in.va(dev()));
    out = r.out;
    eval({r.lse});  // computed, then dropped: out reads the node's first output later
  }
  EXPECT_TRUE(testing::all_close(out, want.o, 1e-12, 1e-12));
}

TEST_P(MultiOutputTest, EagerModeComputesEveryOutput) {
  const Inputs in;
  const Expected want = by_hand(in.q, in.k, in.v);
  RuntimePolicy& policy = runtime_policy();
  const bool was = policy.eager;
  policy.eager = true;
  AttentionResult r = fused_attention_lse(in.qa(dev()), in.ka(dev()), in.va(dev()));
  policy.eager = was;
  EXPECT_TRUE(testing::all_close(r.out, want.o, 1e-12, 1e-12));
  EXPECT_TRUE(testing::all_close(r.lse, want.lse, 1e-12, 1e-12));
}

// A captured function returning both outputs replays them with fresh inputs (f32: a device
// without f64 runs f64 attention on the host fallback, which a recording refuses).
TEST_P(MultiOutputTest, CapturedFunctionReplaysBothOutputs) {
  CapturedFunction f = capture([](const std::vector<Array>& x) {
    AttentionResult r = fused_attention_lse(x[0], x[1], x[2]);
    return std::vector<Array>{r.out, r.lse};
  });
  Inputs in;
  for (int call = 0; call < 3; ++call) {
    in.q = values(B * L * E, 0.7 + 0.2 * call, 0.1 * call);
    const Expected want = by_hand(in.q, in.k, in.v);
    std::vector<Array> got =
        f({cast(in.qa(dev()), DType::F32), cast(in.ka(dev()), DType::F32), cast(in.va(dev()), DType::F32)});
    EXPECT_TRUE(testing::all_close(got[0], want.o, 1e-5, 1e-6)) << "call " << call;
    EXPECT_TRUE(testing::all_close(got[1], want.lse, 1e-5, 1e-6)) << "call " << call;
  }
  // (A device whose attention shaders need 64-bit integers it lacks, SwiftShader, runs the call on
  // the host fallback, which is never recorded: the values were still compared above.)
  if (f.stats().recordings == 0 && f.stats().last_refusal.find("host fallback") != std::string::npos)
    GTEST_SKIP() << "not recordable on this device: " << f.stats().last_refusal;
  EXPECT_EQ(f.stats().recordings, 1) << f.stats().last_refusal;
  EXPECT_EQ(f.stats().replays, 2);
}

// A query row holding NaN, another holding inf: both outputs as the reference backend gives them.
TEST_P(MultiOutputTest, NanAndInfRowsMatchTheReferenceBackend) {
  Inputs in;
  in.q[2] = std::numeric_limits<double>::quiet_NaN();        // batch 0, row 1
  in.q[8] = std::numeric_limits<double>::infinity();         // batch 1, row 1
  AttentionResult got = fused_attention_lse(in.qa(dev()), in.ka(dev()), in.va(dev()));
  AttentionResult want =
      fused_attention_lse(in.qa(Device::reference()), in.ka(Device::reference()), in.va(Device::reference()));
  auto same = [](const Array& a, const Array& b) {
    const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
    if (x.size() != y.size()) return ::testing::AssertionFailure() << "sizes differ";
    for (size_t i = 0; i < x.size(); ++i) {
      const bool ok = std::isnan(x[i]) ? std::isnan(y[i])
                      : std::isinf(x[i]) ? x[i] == y[i]
                                         : !std::isnan(y[i]) && std::fabs(x[i] - y[i]) <= 1e-12 * (1 + std::fabs(y[i]));
      if (!ok) return ::testing::AssertionFailure() << "element " << i << ": " << x[i] << " vs " << y[i];
    }
    return ::testing::AssertionSuccess();
  };
  EXPECT_TRUE(same(got.out, want.out));
  EXPECT_TRUE(same(got.lse, want.lse));
  // (The row's o is NaN; its lse is -inf, as for any row without a finite score: abi.h.)
  const std::vector<double> o = got.out.to_vector<double>();
  for (int64_t c = 0; c < Ev; ++c) EXPECT_TRUE(std::isnan(o[size_t(Ev + c)])) << c;
}

INSTANTIATE_TEST_SUITE_P(Devices, MultiOutputTest, ::testing::ValuesIn(testing::test_devices()),
                         testing::device_test_name);

}  // namespace
}  // namespace ember
