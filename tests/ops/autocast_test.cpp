// Autocast (include/ember/autocast.h): the scope's rules (nesting, disabling, thread-locality), the
// policy of every op of the table checked by the dtype each op produces inside a scope, the
// composite functions' policies, the docs table, values of low-precision contractions against
// an f64 reference, and the casts staying inside fused kernels.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "ember/autocast.h"
#include "ember/debug.h"
#include "ember/nn/linear.h"
#include "ember/nn/loss.h"
#include "ember/nn/norm.h"
#include "ember/nn/group_norm.h"
#include "ember/ops.h"
#include "ember/ops_library.h"
#include "ops/autocast.h"
#include "ops/frontend.h"

namespace ember {
namespace {

using Builder = std::function<Array(DType)>;

Array input(const Shape& s, DType dt, uint64_t seed = 1) { return cast(uniform(s, -1, 1, {.seed = seed}), dt); }

TEST(AutocastScope, NestsDisablesAndRestores) {
  EXPECT_FALSE(autocast_dtype().has_value());
  {
    auto outer = autocast({.dtype = DType::BF16});
    EXPECT_EQ(autocast_dtype(), DType::BF16);
    {
      auto inner = autocast({.dtype = DType::F16});
      EXPECT_EQ(autocast_dtype(), DType::F16);
      {
        auto off = autocast({.enabled = false});
        EXPECT_FALSE(autocast_dtype().has_value());
        EXPECT_EQ(matmul(input({2, 3}, DType::F32), input({3, 2}, DType::F32)).dtype(), DType::F32);
      }
      EXPECT_EQ(autocast_dtype(), DType::F16);
      EXPECT_EQ(matmul(input({2, 3}, DType::F32), input({3, 2}, DType::F32)).dtype(), DType::F16);
    }
    EXPECT_EQ(autocast_dtype(), DType::BF16);
  }
  EXPECT_FALSE(autocast_dtype().has_value());
}

TEST(AutocastScope, IsThreadLocal) {
  auto scope = autocast({.dtype = DType::BF16});
  std::optional<DType> seen = DType::F64;
  DType other_result = DType::Bool;
  std::thread t([&] {
    seen = autocast_dtype();
    other_result = matmul(input({2, 3}, DType::F32), input({3, 2}, DType::F32)).dtype();
  });
  t.join();
  EXPECT_FALSE(seen.has_value());
  EXPECT_EQ(other_result, DType::F32);
  EXPECT_EQ(matmul(input({2, 3}, DType::F32), input({3, 2}, DType::F32)).dtype(), DType::BF16);
}

TEST(AutocastScope, RejectsNonLowDtypes) {
  for (DType d : {DType::F32, DType::F64, DType::I32, DType::Bool}) {
    try {
      auto scope = autocast({.dtype = d});
      FAIL() << "autocast accepted " << dtype_name(d);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("autocast: dtype must be bfloat16 or float16, got " +
                                           std::string(dtype_name(d))),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_FALSE(autocast_dtype().has_value());  // a failed guard leaves the mode alone
}

// Builders for the ops that are not elementwise: each makes the op from floating operands of the
// given dtype through the public front end.
std::map<Op, Builder> non_elementwise_builders() {
  auto x2 = [](DType d) { return input({3, 4}, d); };
  auto idx = [] { return from_vector<int64_t>({0, 2, 1, 0}, {1, 4}); };
  std::map<Op, Builder> b;
  b[Op::Sum] = [=](DType d) { return sum(x2(d), {1}); };
  b[Op::Mean] = [=](DType d) { return mean(x2(d), {1}); };
  b[Op::Prod] = [=](DType d) { return prod(x2(d), {1}); };
  b[Op::Max] = [=](DType d) { return max(x2(d), {1}); };
  b[Op::Min] = [=](DType d) { return min(x2(d), {1}); };
  b[Op::Argmax] = [=](DType d) { return argmax(x2(d), 1); };
  b[Op::Argmin] = [=](DType d) { return argmin(x2(d), 1); };
  b[Op::Reshape] = [=](DType d) { return reshape(x2(d), {4, 3}); };
  b[Op::Permute] = [=](DType d) { return permute(x2(d), {1, 0}); };
  b[Op::Slice] = [=](DType d) { return slice(x2(d), 1, 0, 4, 2); };
  b[Op::Expand] = [=](DType d) { return expand(input({1, 4}, d), {3, 4}); };
  b[Op::Contiguous] = [=](DType d) { return contiguous(permute(x2(d), {1, 0})); };
  b[Op::Cat] = [=](DType d) { return cat({x2(d), x2(d)}, 0); };
  b[Op::Gather] = [=](DType d) { return gather(x2(d), 0, idx()); };
  b[Op::IndexSelect] = [=](DType d) { return index_select(x2(d), 0, from_vector<int64_t>({2, 0}, {2})); };
  b[Op::ScatterAdd] = [=](DType d) { return scatter_add(x2(d), 0, idx(), input({1, 4}, d, 2)); };
  // (index_add of floats is the IndexAdd library call on the CPU; of other dtypes, the scatter.)
  b[Op::IndexAdd] = [=](DType d) { return index_add(x2(d), 0, from_vector<int64_t>({2, 0, 2}, {3}), input({3, 4}, d, 2)); };
  b[Op::Matmul] = [=](DType d) { return matmul(x2(d), input({4, 2}, d, 2)); };
  b[Op::Conv2d] = [](DType d) { return conv2d(input({1, 2, 5, 5}, d), input({3, 2, 3, 3}, d, 2), input({3}, d, 3)); };
  b[Op::MaxPool2d] = [](DType d) { return max_pool2d(input({1, 2, 4, 4}, d), 2); };
  b[Op::MaxPool2dIndices] = [](DType d) { return max_pool2d_indices(input({1, 2, 4, 4}, d), {.kernel = 2}); };
  b[Op::MaxPool2dWithIndices] = [](DType d) { return max_pool2d_with_indices(input({1, 2, 4, 4}, d), {.kernel = 2}).values; };
  b[Op::AvgPool2d] = [](DType d) { return avg_pool2d(input({1, 2, 4, 4}, d), 2); };
  b[Op::Argsort] = [=](DType d) { return argsort(x2(d)); };
  b[Op::TopkIndices] = [=](DType d) { return topk(x2(d), 2).values; };
  b[Op::Cumsum] = [=](DType d) { return cumsum(x2(d), 1); };
  b[Op::Cumprod] = [=](DType d) { return cumprod(x2(d), 1); };
  b[Op::CummaxIndices] = [=](DType d) { return cummax(x2(d), 1).values; };
  b[Op::CumminIndices] = [=](DType d) { return cummin(x2(d), 1).values; };
  b[Op::FusedAttention] = [](DType d) { return fused_attention(input({2, 3, 4}, d), input({2, 5, 4}, d, 2), input({2, 5, 4}, d, 3)); };
  b[Op::LstmRecurrence] = [](DType d) {
    return lstm_recurrence(input({2, 1, 8}, d), input({1, 2}, d, 2), input({1, 2}, d, 3), input({8, 2}, d, 4)).h;
  };
  b[Op::GruRecurrence] = [](DType d) {
    return gru_recurrence(input({2, 1, 6}, d), input({1, 2}, d, 2), input({6, 2}, d, 3), input({6}, d, 4));
  };
  // Generators have no operands: autocast leaves their dtype alone.
  b[Op::Full] = [](DType d) { return full({2}, 1.5, {d}); };
  b[Op::Arange] = [](DType d) { return arange(0, 4, 1, d); };
  b[Op::Linspace] = [](DType d) { return linspace(0, 1, 5, {d}); };
  b[Op::RandUniform] = [](DType d) { return uniform({3}, 0, 1, {.seed = 1, .dtype = d}); };
  b[Op::RandNormal] = [](DType d) { return normal({3}, 0, 1, {.seed = 1, .dtype = d}); };
  return b;
}

// Ops no front-end call builds from user operands: the backward rules (which run with autocast
// off), the scheduler's epilogue rewrites and host data. Their policy must be Follow.
const std::set<Op> kNotFromFrontEnd = {Op::FromData,          Op::Conv2dBackwardData, Op::Conv2dBackwardWeights,
                                       Op::MaxPool2dBackward, Op::AvgPool2dBackward,  Op::FusedAttentionBackward,
                                       Op::MatmulEpilogue,    Op::Conv2dEpilogue,     Op::MaxPool2dBackwardEpilogue,
                                       Op::OutputOf,
                                       Op::LstmRecurrenceBackward, Op::GruRecurrenceBackward};

// An elementwise op built directly from operands of dtype d (attributes at their defaults).
Array elementwise_of(Op op, DType d) {
  const int n = op_info(op).arity;
  std::vector<Array> xs;
  for (int i = 0; i < n; ++i) xs.push_back(input({2, 3}, d, uint64_t(i + 1)));
  return elementwise(op, xs, Loc::current(), op == Op::Cast ? DType::F32 : DType::F32);
}

// The dtype an op gives for operands of dtype d, inside an autocast scope or outside; nullopt if
// the op rejects those operands.
std::optional<DType> result_dtype(const std::function<Array(DType)>& build, DType d, bool inside) {
  std::optional<AutocastGuard> scope;
  if (inside) scope.emplace(AutocastOptions{.dtype = DType::BF16});
  try {
    return build(d).dtype();
  } catch (const Error&) {
    return std::nullopt;
  }
}

TEST(AutocastPolicy, EveryOpOfTheTableRunsInItsPolicysDtype) {
  auto builders = non_elementwise_builders();
  int checked = 0, low = 0, f32 = 0;
  for (int i = 0; i < int(Op::NumOps); ++i) {
    const Op op = Op(i);
    const OpInfo& info = op_info(op);
    const AutocastPolicy policy = autocast_policy(op);
    SCOPED_TRACE(std::string(info.name) + " (policy " + autocast_policy_name(policy) + ")");
    std::function<Array(DType)> build;
    if (info.kind == OpKind::Elementwise) {
      build = [op](DType d) { return elementwise_of(op, d); };
    } else if (builders.count(op)) {
      build = builders.at(op);
    } else {
      EXPECT_TRUE(kNotFromFrontEnd.count(op)) << "no builder for this op: add one to the test";
      EXPECT_EQ(policy, AutocastPolicy::Follow);
      continue;
    }
    ++checked;
    if (policy == AutocastPolicy::Low) {
      ++low;
      // f32 operands run in the low dtype; f64 operands are left alone.
      EXPECT_EQ(result_dtype(build, DType::F32, false), DType::F32);
      EXPECT_EQ(result_dtype(build, DType::F32, true), DType::BF16);
      EXPECT_EQ(result_dtype(build, DType::F64, true), DType::F64);
    } else if (policy == AutocastPolicy::F32) {
      ++f32;
      // bf16 operands are raised to f32: the result is what f32 operands give outside.
      EXPECT_EQ(result_dtype(build, DType::BF16, true), result_dtype(build, DType::F32, false));
      EXPECT_EQ(result_dtype(build, DType::BF16, true), DType::F32);
    } else {
      // Follow: the same dtype inside as outside, for every operand dtype the op accepts.
      for (DType d : {DType::BF16, DType::F16, DType::F32, DType::I32, DType::Bool})
        EXPECT_EQ(result_dtype(build, d, true), result_dtype(build, d, false)) << dtype_name(d);
    }
  }
  EXPECT_EQ(checked + int(kNotFromFrontEnd.size()), int(Op::NumOps));
  EXPECT_EQ(low, 3);   // matmul, conv2d, fused_attention
  EXPECT_GE(f32, 10);  // exp/log family, pow, sums, scans
}

// Builders for the composite functions of autocast_policy.def (EMBER_AUTOCAST_FN).
std::map<std::string, Builder> composite_builders() {
  std::map<std::string, Builder> b;
  auto x = [](DType d) { return input({4, 6}, d); };
  auto labels = [] { return from_vector<int64_t>({0, 5, 2, 3}, {4}); };
  b["softmax"] = [=](DType d) { return softmax(x(d), 1); };
  b["log_softmax"] = [=](DType d) { return log_softmax(x(d), 1); };
  b["logsumexp"] = [=](DType d) { return logsumexp(x(d), {1}); };
  b["var"] = [=](DType d) { return var(x(d), {1}); };
  b["std"] = [=](DType d) { return ember::std(x(d), {1}); };
  b["layer_norm"] = [=](DType d) { return layer_norm(x(d), 1, Array(), Array(), 1e-5); };
  b["rms_norm"] = [=](DType d) { return rms_norm(x(d), 1, Array(), 1e-5); };
  b["group_norm"] = [](DType d) { return group_norm(input({2, 4, 3}, d), 2, Array(), Array(), 1e-5); };
  b["batch_norm"] = [](DType d) {
    return batch_norm(input({4, 6}, d), Array(), Array(), Array(), Array(), {.training = true}).output;
  };
  b["nn::BatchNorm"] = [](DType d) {
    // f32 parameters under autocast (master weights); outside, a layer takes its own dtype.
    nn::BatchNorm1d bn({.features = 6, .dtype = autocast_dtype() ? DType::F32 : d});
    return bn.forward(input({4, 6}, d));
  };
  b["nn::cross_entropy"] = [=](DType d) { return nn::cross_entropy(x(d), labels()); };
  b["nn::nll_loss"] = [=](DType d) { return nn::nll_loss(x(d), labels()); };
  b["nn::mse_loss"] = [=](DType d) { return nn::mse_loss(x(d), x(d)); };
  b["nn::l1_loss"] = [=](DType d) { return nn::l1_loss(x(d), x(d)); };
  b["nn::smooth_l1_loss"] = [=](DType d) { return nn::smooth_l1_loss(x(d), x(d)); };
  b["nn::huber_loss"] = [=](DType d) { return nn::huber_loss(x(d), x(d)); };
  b["nn::binary_cross_entropy"] = [](DType d) {
    return nn::binary_cross_entropy(cast(uniform({4, 6}, 0.1, 0.9, {.seed = 4}), d), cast(uniform({4, 6}, 0, 1, {.seed = 5}), d));
  };
  b["nn::binary_cross_entropy_with_logits"] = [=](DType d) {
    return nn::binary_cross_entropy_with_logits(x(d), cast(uniform({4, 6}, 0, 1, {.seed = 5}), d));
  };
  b["nn::Linear"] = [](DType d) {
    manual_seed(3);
    nn::Linear fc({.in = 6, .out = 2});
    return fc.forward(input({4, 6}, d));
  };
  return b;
}

TEST(AutocastPolicy, CompositeFunctionsRunInTheirPolicysDtype) {
  auto builders = composite_builders();
  int n = 0;
#define EMBER_AUTOCAST_FN(fn, policy)                                                                  \
  {                                                                                                    \
    ++n;                                                                                               \
    SCOPED_TRACE(#fn);                                                                                 \
    ASSERT_TRUE(builders.count(#fn)) << "no builder for " #fn ": add one to the test";                \
    if (AutocastPolicy::policy == AutocastPolicy::F32) {                                               \
      EXPECT_EQ(result_dtype(builders.at(#fn), DType::BF16, false), DType::BF16);                      \
      EXPECT_EQ(result_dtype(builders.at(#fn), DType::BF16, true), DType::F32);                        \
    } else {                                                                                           \
      EXPECT_EQ(result_dtype(builders.at(#fn), DType::F32, false), DType::F32);                        \
      EXPECT_EQ(result_dtype(builders.at(#fn), DType::F32, true), DType::BF16);                        \
    }                                                                                                  \
  }
#include "ops/autocast_policy.def"
  EXPECT_EQ(n, int(builders.size()));
}

// docs/semantics.md lists the policy table exactly as generated here from autocast_policy.def.
std::string generated_docs_table() {
  std::ostringstream os;
  os << "| op or function | autocast policy |\n|---|---|\n";
#define EMBER_AUTOCAST(Name, policy) os << "| `" << op_name(Op::Name) << "` | " << autocast_policy_name(AutocastPolicy::policy) << " |\n";
#define EMBER_AUTOCAST_FN(fn, policy) os << "| `" << #fn << "` | " << autocast_policy_name(AutocastPolicy::policy) << " |\n";
#include "ops/autocast_policy.def"
  os << "| every other op | follow |\n";
  return os.str();
}

TEST(AutocastPolicy, DocsTableIsGeneratedFromTheOpTable) {
  std::ifstream f(std::string(EMBER_TEST_SOURCE_DIR) + "/../docs/semantics.md");
  ASSERT_TRUE(f) << "docs/semantics.md not found";
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string table = generated_docs_table();
  EXPECT_NE(ss.str().find(table), std::string::npos) << "docs/semantics.md must contain this table:\n" << table;
}

// Values: an autocast matmul equals the bf16-rounded operands multiplied with f32 accumulation.
TEST(AutocastValues, MatmulRoundsOperandsAndAccumulatesInF32) {
  const int64_t M = 5, K = 64, N = 3;
  Array a = input({M, K}, DType::F32, 11), b = input({K, N}, DType::F32, 12);
  Array c;
  {
    auto scope = autocast({.dtype = DType::BF16});
    c = matmul(a, b);
  }
  ASSERT_EQ(c.dtype(), DType::BF16);
  std::vector<double> ar = cast(cast(a, DType::BF16), DType::F64).to_vector<double>();
  std::vector<double> br = cast(cast(b, DType::BF16), DType::F64).to_vector<double>();
  std::vector<double> got = cast(c, DType::F64).to_vector<double>();
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double ref = 0;
      for (int64_t k = 0; k < K; ++k) ref += ar[size_t(i * K + k)] * br[size_t(k * N + j)];
      // One bf16 rounding of an f32-accumulated result: relative 2^-8 (plus f32 sums, far smaller).
      EXPECT_NEAR(got[size_t(i * N + j)], ref, std::abs(ref) * 0x1p-8 + 1e-6) << i << "," << j;
    }
}

// Casts stay inside fused kernels: under autocast a bf16 activation's softmax, layer norm and
// cross-entropy are as many kernels as the f32 versions are without autocast.
int64_t kernels_for(const std::function<Array()>& f) {
  Array y = f();
  synchronize();
  reset_execution_stats();
  y.eval();
  synchronize();
  return execution_stats().kernels;
}

TEST(AutocastFusion, CastsFuseIntoTheirConsumers) {
  Array x32 = input({8, 32}, DType::F32, 21);
  Array x16 = input({8, 32}, DType::BF16, 21);
  x32.eval();
  x16.eval();
  Array labels = from_vector<int64_t>({0, 1, 2, 3, 4, 5, 6, 7}, {8});
  std::vector<std::pair<const char*, std::function<Array(const Array&)>>> cases = {
      {"softmax", [](const Array& x) { return softmax(x, 1); }},
      {"log_softmax", [](const Array& x) { return log_softmax(x, 1); }},
      {"layer_norm", [](const Array& x) { return nn::layer_norm(x, 1, Array(), Array(), 1e-5); }},
      {"exp * 2", [](const Array& x) { return mul(exp(x), 2.0); }},
      {"cross_entropy", [&](const Array& x) { return nn::cross_entropy(x, labels); }},
  };
  for (auto& [name, f] : cases) {
    SCOPED_TRACE(name);
    int64_t plain = kernels_for([&] { return f(x32); });
    int64_t mixed = kernels_for([&] {
      auto scope = autocast({.dtype = DType::BF16});
      Array y = f(x16);
      EXPECT_EQ(y.dtype(), DType::F32);
      return y;
    });
    EXPECT_GE(plain, 1);
    EXPECT_EQ(mixed, plain);
  }
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

// The autocast cache (src/ops/autocast.cpp): a parameter is cast once per scope and per value.
TEST(AutocastCache, AParameterIsCastOncePerScopeAndValue) {
  Array w = from_vector<float>({0.5f, -1.25f, 2.0f, 3.0f}, {2, 2}).require_grad();
  Array act = from_vector<float>({1.0f, 2.0f}, {1, 2});
  {
    AutocastGuard amp({.dtype = DType::BF16});
    Array a = autocast_low(w), b = autocast_low(w);
    EXPECT_EQ(a.dtype(), DType::BF16);
    EXPECT_EQ(a.node(), b.node());  // cached
    // Operands of a Low-policy op share the same copy.
    Array p = matmul(act, w);
    EXPECT_EQ(p.dtype(), DType::BF16);
    EXPECT_EQ(autocast_low(w).node(), a.node());
    // Activations are never cached.
    EXPECT_NE(autocast_low(act).node(), autocast_low(act).node());
    // Another dtype in a nested scope is another copy.
    {
      AutocastGuard inner({.dtype = DType::F16});
      Array h = autocast_low(w);
      EXPECT_EQ(h.dtype(), DType::F16);
      EXPECT_NE(h.node(), a.node());
    }
    EXPECT_EQ(autocast_low(w).node(), a.node());  // the outer scope's cache survives the inner one
  }
  AutocastGuard again({.dtype = DType::BF16});
  EXPECT_EQ(autocast_low(w).dtype(), DType::BF16);
}

TEST(AutocastCache, NewValuesAndBackwardPassesGetFreshCopies) {
  // loss = sum(x · w) in bf16 (all values exact in bf16): dloss/dw[k][j] = sum_i x[i][k].
  Array x = from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  Array w = from_vector<float>({0.5f, -1.0f, 2.0f, 0.25f}, {2, 2}).require_grad();
  AutocastGuard amp({.dtype = DType::BF16});
  Array first = autocast_low(w);
  for (int step = 0; step < 2; ++step) {  // two backward passes in one scope (gradient accumulation)
    Array loss = sum(cast(matmul(x, w), DType::F32));
    std::vector<float> g = loss.backward().get(w).to_vector<float>();
    EXPECT_EQ(g, (std::vector<float>{9, 9, 12, 12})) << "step " << step;
  }
  // The first pass released the cached cast's backward node: the cache made a new one.
  EXPECT_NE(autocast_low(w).node(), first.node());
  // A parameter given new values (as an optimizer step does) is cast again, with the new values.
  Array w2 = from_vector<float>({1.0f, 1.0f, 1.0f, 1.0f}, {2, 2}).require_grad();
  EXPECT_EQ(autocast_low(w2).to_vector<float>(), (std::vector<float>{1, 1, 1, 1}));
  // A copy made without grad mode is not handed to a pass that records.
  Array w3 = from_vector<float>({2.0f, 2.0f, 2.0f, 2.0f}, {2, 2}).require_grad();
  {
    NoGradGuard no_grad;
    EXPECT_FALSE(autocast_low(w3).requires_grad());
  }
  EXPECT_TRUE(autocast_low(w3).requires_grad());
}

}  // namespace
}  // namespace ember
