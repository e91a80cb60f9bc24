// Runs every op on random inputs on each loaded backend and compares it with the reference
// backend (the scalar KIR interpreter, whose results are themselves checked against independent
// values by the rest of the suite). Skipped when the reference is the only backend.
#include <cmath>
#include <functional>
#include <limits>
#include <utility>

#include "graph/node.h"
#include "ops/op_coverage.h"
#include "ops/op_test_util.h"

namespace ember::testing {
namespace {

struct Case {
  std::string name;
  std::function<Array(Device)> run;
  double rtol = 0, atol = 0;  // 0, 0: bit-identical values
};

// Host inputs are generated once (fixed seeds) and uploaded to each device.
std::vector<Case> cases() {
  std::vector<Case> cs;
  auto add_case = [&](std::string n, std::function<Array(Device)> f, double rtol = 0, double atol = 0) {
    cs.push_back({std::move(n), std::move(f), rtol, atol});
  };
  const int64_t n = 70001;
  static const std::vector<double> u = rand_f32(n, -3, 3, 101), v = rand_f32(n, -3, 3, 102);
  static const std::vector<double> pos = rand_f32(n, 1e-3, 50, 103);
  static const std::vector<double> ints = rand_int(n, -1000, 1000, 104), nz = rand_int(n, 1, 37, 105);
  static const std::vector<double> m1 = rand_f32(6 * 257, -1, 1, 106);

  // random number generators: bits must match (uniform within 1 ulp, normal within ~1e-5)
  for (DType t : float_dtypes()) {
    add_case("uniform " + std::string(dtype_name(t)), [t](Device d) {
      return uniform({n}, -2, 5, {.seed = 9, .dtype = t, .device = d});
    }, t == DType::F64 ? 2.3e-16 : 1.2e-7, 0);
    add_case("normal " + std::string(dtype_name(t)), [t](Device d) {
      return normal({n}, 0, 1, {.seed = 10, .dtype = t, .device = d});
    }, rtol_for(t), 1e-5);
  }
  // unary math (f32, f16, bf16, f64)
  using Un = Array (*)(const Array&, Loc);
  const std::pair<const char*, Un> unary[] = {{"neg", &ember::neg},   {"abs", &ember::abs},         {"exp", &ember::exp},
                                              {"tanh", &ember::tanh}, {"erf", &ember::erf},         {"sigmoid", &ember::sigmoid},
                                              {"relu", &ember::relu}, {"gelu", &ember::gelu},       {"logical_not", &ember::logical_not}};
  for (DType t : float_dtypes())
    for (auto [name, f] : unary)
      add_case(std::string(name) + " " + std::string(dtype_name(t)),
               [f, t](Device d) { return f(make(u, {n}, t, d), Loc::current()); }, 4 * rtol_for(t), 1e-6);
  add_case("log", [](Device d) { return log(f32(pos, {n}, d)); }, 4e-6, 1e-6);
  add_case("sqrt", [](Device d) { return sqrt(f32(pos, {n}, d)); }, 2e-6, 0);
  // binary arithmetic: IEEE ops are correctly rounded, so results must match exactly
  add_case("add", [](Device d) { return add(f32(u, {n}, d), f32(v, {n}, d)); });
  add_case("sub broadcast", [](Device d) { return sub(f32(m1, {6, 257}, d), f32(std::vector<double>(v.begin(), v.begin() + 257), {257}, d)); });
  add_case("mul transposed", [](Device d) { return mul(transpose(f32(m1, {6, 257}, d), 0, 1), f32(std::vector<double>(u.begin(), u.begin() + 6), {6}, d)); });
  add_case("div", [](Device d) { return div(f32(u, {n}, d), f32(pos, {n}, d)); });
  add_case("pow", [](Device d) { return pow(f32(pos, {n}, d), f32(u, {n}, d)); }, 8e-6, 0);
  add_case("maximum", [](Device d) { return maximum(f32(u, {n}, d), f32(v, {n}, d)); });
  add_case("minimum f64", [](Device d) { return minimum(f64(u, {n}, d), f64(v, {n}, d)); });
  add_case("floor_div f32", [](Device d) { return floor_div(f32(u, {n}, d), f32(v, {n}, d)); });
  add_case("rem f32", [](Device d) { return rem(f32(u, {n}, d), f32(v, {n}, d)); }, 0, 1e-6);
  add_case("fmod f32", [](Device d) { return fmod(f32(u, {n}, d), f32(v, {n}, d)); }, 0, 1e-6);
  add_case("fmod f64 scalar", [](Device d) { return fmod(f64(u, {n}, d), -0.7); }, 0, 1e-12);
  add_case("fmod f16", [](Device d) { return fmod(make(u, {n}, DType::F16, d), make(pos, {n}, DType::F16, d)); }, 0, 1e-3);
  for (DType t : {DType::I32, DType::I64, DType::U8}) {
    std::string s(dtype_name(t));
    add_case("add " + s, [t](Device d) { return add(make(ints, {n}, t, d), make(nz, {n}, t, d)); });
    add_case("mul " + s, [t](Device d) { return mul(make(ints, {n}, t, d), make(ints, {n}, t, d)); });
    add_case("floor_div " + s, [t](Device d) { return floor_div(make(ints, {n}, t, d), make(nz, {n}, t, d)); });
    add_case("rem " + s, [t](Device d) { return rem(make(ints, {n}, t, d), neg(make(nz, {n}, DType::I32, d))); });
    add_case("fmod " + s, [t](Device d) { return fmod(make(ints, {n}, t, d), neg(make(nz, {n}, DType::I32, d))); });
    add_case("div " + s, [t](Device d) { return div(make(ints, {n}, t, d), make(nz, {n}, t, d)); });
    add_case("pow " + s, [t](Device d) { return pow(make(ints, {n}, t, d), 3); });
  }
  add_case("f16 + bf16", [](Device d) { return add(make(u, {n}, DType::F16, d), make(v, {n}, DType::BF16, d)); });
  // comparisons, logical, where, clamp
  add_case("lt", [](Device d) { return lt(f32(u, {n}, d), f32(v, {n}, d)); });
  add_case("eq i32", [](Device d) { return eq(i32(ints, {n}, d), i32(nz, {n}, d)); });
  add_case("ge mixed", [](Device d) { return ge(i32(ints, {n}, d), f32(u, {n}, d)); });
  add_case("logical_or", [](Device d) { return logical_or(gt(f32(u, {n}, d), 1), lt(f32(v, {n}, d), -1)); });
  add_case("where", [](Device d) { return where(gt(f32(u, {n}, d), 0), f32(v, {n}, d), i32(ints, {n}, d)); });
  add_case("clamp", [](Device d) { return clamp(f32(u, {n}, d), -1, 0.5); });
  // casts between every pair
  for (DType from : all_dtypes())
    for (DType to : all_dtypes())
      add_case("cast " + std::string(dtype_name(from)) + "->" + std::string(dtype_name(to)), [from, to](Device d) {
        return cast(make(map_d(u, [](double x) { return x * 100; }), {n}, from, d), to);
      });
  // reductions (the accumulation order may differ: sums get a tolerance)
  add_case("sum all", [](Device d) { return sum(f32(u, {n}, d)); }, 1e-4, 1e-2);
  add_case("sum rows", [](Device d) { return sum(f32(m1, {6, 257}, d), {1}); }, 1e-5, 1e-4);
  add_case("sum cols keepdim", [](Device d) { return sum(f32(m1, {6, 257}, d), {0}, true); }, 1e-5, 1e-5);
  add_case("sum i32", [](Device d) { return sum(i32(ints, {n}, d)); });
  add_case("mean", [](Device d) { return mean(f32(m1, {6, 257}, d), {0, 1}); }, 1e-4, 1e-5);
  add_case("prod", [](Device d) { return prod(add(div(f32(m1, {6, 257}, d), 20), 1), {1}); }, 1e-4, 0);
  add_case("max", [](Device d) { return max(f32(u, {n}, d)); });
  add_case("min dims", [](Device d) { return min(f32(m1, {6, 257}, d), {1}); });
  add_case("argmax", [](Device d) { return argmax(f32(u, {n}, d), 0); });
  add_case("argmin transposed", [](Device d) { return argmin(transpose(f32(m1, {6, 257}, d), 0, 1), 1); });
  // 16-bit floats: each op rounds its result to the dtype and sums accumulate in f32, so every
  // backend gives the reference's bits here (Vulkan's f16 sums, which rounded at every step, and
  // the CPU's fused consumers of a sum, which read it unrounded, did not)
  for (DType t : {DType::F16, DType::BF16}) {
    const std::string s(dtype_name(t));
    add_case("sum rows " + s, [t](Device d) { return sum(make(m1, {6, 257}, t, d), {1}); });
    add_case("mean cols " + s, [t](Device d) { return mean(make(m1, {6, 257}, t, d), {0}); });
    add_case("softmax " + s, [t](Device d) { return softmax(make(m1, {6, 257}, t, d), 1); });
    add_case("log_softmax " + s, [t](Device d) { return log_softmax(make(m1, {6, 257}, t, d), 1); });
    add_case("cumsum " + s, [t](Device d) { return cumsum(make(m1, {6, 257}, t, d), 1); });
    add_case("matmul " + s, [t](Device d) {
      Array a = make(m1, {6, 257}, t, d);
      return matmul(a, transpose(a, 0, 1));
    });
  }
  // movement and indexing (pure data movement: exact)
  add_case("reshape of permuted", [](Device d) { return reshape(permute(f32(m1, {2, 3, 257}, d), {2, 0, 1}), {257, 6}); });
  add_case("slice step", [](Device d) { return slice(f32(u, {n}, d), 0, 3, n - 5, 7); });
  add_case("cat mixed", [](Device d) { return cat({f32(m1, {6, 257}, d), transpose(i32(std::vector<double>(ints.begin(), ints.begin() + 1542), {257, 6}, d), 0, 1)}, 1); });
  add_case("expand contiguous", [](Device d) { return contiguous(expand(f32(std::vector<double>(u.begin(), u.begin() + 257), {257}, d), {5, 257})); });
  add_case("index_select", [](Device d) { return index_select(f32(m1, {6, 257}, d), 1, i64(map_d(std::vector<double>(nz.begin(), nz.begin() + 500), [](double x) { return x * 6; }), {500}, d)); });
  add_case("gather", [](Device d) { return gather(f32(m1, {6, 257}, d), 0, i64(map_d(std::vector<double>(nz.begin(), nz.begin() + 1542), [](double x) { return double(int(x) % 6); }), {6, 257}, d)); });
  // index_add: rows of [6, 257] (NaN, inf and -0 among them) summed at 9 positions with repeats,
  // along dim 0 and along the strided dim 1; f32 and bf16 (sums in f32, rounded once)
  auto repeats = [](int64_t count, int64_t size) {
    std::vector<double> v;
    for (int64_t i = 0; i < count; ++i) v.push_back(double((i * 5 + i / 3) % size));
    return v;
  };
  add_case("index_add dim 0", [repeats](Device d) {
    return index_add(zeros({9, 257}, {DType::F32, d}), 0, i64(repeats(6, 9), {6}, d), f32(m1, {6, 257}, d));
  }, 1e-6, 1e-6);
  add_case("index_add dim 1 bf16", [repeats](Device d) {
    return index_add(zeros({6, 40}, {DType::BF16, d}), 1, i64(repeats(257, 40), {257}, d), make(m1, {6, 257}, DType::BF16, d));
  }, 1e-2, 1e-2);
  // matmul
  add_case("matmul f32 batch", [](Device d) {
    return matmul(f32(std::vector<double>(u.begin(), u.begin() + 2 * 37 * 65), {2, 1, 37, 65}, d),
                  f32(std::vector<double>(v.begin(), v.begin() + 3 * 65 * 29), {3, 65, 29}, d));
  }, 1e-4, 1e-4);
  add_case("matmul f64 transposed", [](Device d) {
    return matmul(transpose(f64(std::vector<double>(u.begin(), u.begin() + 65 * 37), {65, 37}, d), 0, 1),
                  f64(std::vector<double>(v.begin(), v.begin() + 65 * 29), {65, 29}, d));
  }, 1e-12, 1e-12);
  add_case("matmul i32", [](Device d) {
    return matmul(i32(std::vector<double>(ints.begin(), ints.begin() + 40 * 50), {40, 50}, d),
                  i32(std::vector<double>(nz.begin(), nz.begin() + 50 * 30), {50, 30}, d));
  });
  add_case("matmul vector", [](Device d) { return matmul(f32(m1, {6, 257}, d), f32(std::vector<double>(u.begin(), u.begin() + 257), {257}, d)); }, 1e-4, 1e-4);
  // large flat op (crosses every thread threshold)
  add_case("add 2^20", [](Device d) {
    Array a = arange(0, 1 << 20, 1, DType::F32, d);
    return add(a, mul(a, 0.5f));
  });
  // Rounding, sign and the predicates, on values that hold NaN, +-inf, -0 and exact halves.
  static const std::vector<double> special = [] {
    std::vector<double> s(u.begin(), u.begin() + 4096);
    const double inf = std::numeric_limits<double>::infinity();
    const double extra[] = {std::nan(""), inf, -inf, -0.0, 0.0, 0.5, -0.5, 1.5, -2.5, 2.5, 1e30, -1e-30};
    for (size_t i = 0; i < std::size(extra); ++i) s[i * 97] = extra[i];
    return s;
  }();
  const int64_t ns = int64_t(special.size());
  using Un1 = Array (*)(const Array&, Loc);
  for (auto [name, f] : std::initializer_list<std::pair<const char*, Un1>>{
           {"floor", &ember::floor}, {"ceil", &ember::ceil}, {"round", &ember::round}, {"trunc", &ember::trunc},
           {"sign", &ember::sign}, {"is_nan", &ember::is_nan}, {"is_inf", &ember::is_inf}, {"is_finite", &ember::is_finite}})
    for (DType t : {DType::F32, DType::F64})
      add_case(std::string(name) + " special " + std::string(dtype_name(t)),
               [f, t, ns](Device d) { return f(make(special, {ns}, t, d), Loc::current()); });
  add_case("ne special", [ns](Device d) {
    return ne(f32(special, {ns}, d), f32(std::vector<double>(special.rbegin(), special.rend()), {ns}, d));
  });
  add_case("logical_xor", [](Device d) { return logical_xor(gt(f32(u, {n}, d), 0), lt(f32(v, {n}, d), 0.5)); });
  // Bit ops on i32 (negative values included) and i64.
  add_case("bitwise_not i32", [](Device d) { return bitwise_not(i32(ints, {n}, d)); });
  add_case("bitwise_and i32", [](Device d) { return bitwise_and(i32(ints, {n}, d), i32(nz, {n}, d)); });
  add_case("bitwise_or i64", [](Device d) { return bitwise_or(i64(ints, {n}, d), i64(nz, {n}, d)); });
  add_case("bitwise_xor i32", [](Device d) { return bitwise_xor(i32(ints, {n}, d), i32(nz, {n}, d)); });
  add_case("shift_left i32", [](Device d) {
    return shift_left(i32(ints, {n}, d), i32(map_d(nz, [](double x) { return double(int(x) % 20); }), {n}, d));
  });
  add_case("shift_right i64", [](Device d) {
    return shift_right(i64(ints, {n}, d), i64(map_d(nz, [](double x) { return double(int(x) % 9); }), {n}, d));
  });
  add_case("linspace f32", [](Device d) { return linspace(-3.0, 7.5, n, {.device = d}); }, 1e-6, 1e-6);
  // Pooling indices and a running maximum's indices (NaN included).
  add_case("max_pool2d_indices", [](Device d) {
    return max_pool2d_indices(f32(std::vector<double>(u.begin(), u.begin() + 1536), {2, 3, 16, 16}, d),
                              {.kernel = 3, .stride = 2, .padding = 1});
  });
  add_case("cummax special", [ns](Device d) { return cummax(f32(special, {4, ns / 4}, d), 1).indices; });
  return cs;
}

TEST(OpCrossBackend, EveryOpMatchesTheReferenceBackend) {
  std::vector<Device> others = non_reference_devices();
  if (others.empty() || !Device::reference().available())
    GTEST_SKIP() << "only one backend is loaded (" << test_devices().size()
                 << " device(s)); nothing to compare against the reference";
  const Device ref = Device::reference();
  for (const Case& c : cases()) {
    Array want = c.run(ref);
    std::vector<double> w = vals(want);
    for (const Device& d : others) {
      SCOPED_TRACE(c.name + " on " + d.str());
      Array got;
      std::string err = error_of([&] { got = c.run(d); got.eval(); });
      ASSERT_EQ(err, "<no error>");
      EXPECT_EQ(got.dtype(), want.dtype());
      EXPECT_EQ(got.shape(), want.shape());
      EXPECT_TRUE(all_close(vals(got), w, c.rtol, c.atol));
    }
  }
}

// Errors found while running kernels are reported the same way on every backend.
TEST(OpCrossBackend, KernelErrorsOnEveryBackend) {
  std::vector<Device> others = non_reference_devices();
  if (others.empty()) GTEST_SKIP() << "only the reference backend is loaded";
  for (const Device& d : others) {
    SCOPED_TRACE(d.str());
    EMBER_EXPECT_ERROR(floor_div(i32({1, 2}, {2}, d), i32({1, 0}, {2}, d)).to_vector<int32_t>(), "floor_div", "zero");
    EMBER_EXPECT_ERROR(rem(i64({1}, {1}, d), 0).to_vector<int64_t>(), "rem", "zero");
    EMBER_EXPECT_ERROR(pow(i32({2}, {1}, d), -2).to_vector<int32_t>(), "pow", "negative");
    EMBER_EXPECT_ERROR(index_select(f32({1, 2}, {2}, d), 0, i64({0, 2}, {2}, d)).to_vector<float>(), "index_select", "2");
    EMBER_EXPECT_ERROR(gather(f32({1, 2}, {2}, d), 0, i64({-1}, {1}, d)).to_vector<float>(), "gather", "-1");
  }
}

}  // namespace

std::set<Op> ops_in_graph(const Array& a) {
  std::set<Op> ops;
  std::vector<const Node*> stack{a.node().get()};
  std::set<const Node*> seen;
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (!n || !seen.insert(n).second) continue;
    ops.insert(n->op);
    for (const NodePtr& in : n->inputs) stack.push_back(in.get());
  }
  return ops;
}

std::vector<std::pair<std::string, std::set<Op>>> cross_backend_case_ops() {
  std::vector<std::pair<std::string, std::set<Op>>> out;
  for (const Case& c : cases()) out.emplace_back(c.name, ops_in_graph(c.run(Device::reference())));
  return out;
}

}  // namespace ember::testing
