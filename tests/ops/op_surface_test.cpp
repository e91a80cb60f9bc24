// The generated op surface. At compile time (C++20 requires-expressions over the table
// ember/elementwise_ops.def): every unary and binary op has its Array free function, its
// Tensor<D, K> member and its Tensor free function, for each kind the table's `kinds` column names,
// with the result kind of its `result` column, and no member for the kinds it excludes (t.exp() of
// an Int tensor must not compile). At run time: every op of the table has a row in docs/ops.md.
#include <gtest/gtest.h>


#include <cctype>
#include <cmath>
#include <concepts>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "ember/tensor.h"
#include "test_util.h"

namespace ember {
namespace {

template <class... T>
struct Samples {};
// Tensors of each kind (of different ranks, so broadcasting is exercised too).
using FloatT = Tensor<2, Float>;
using IntT = Tensor<3, Int>;
using BoolT = Tensor<1, Bool>;
// The kinds each `kinds` column accepts, and those it excludes.
using Accepted_Any = Samples<FloatT, IntT, BoolT>;
using Excluded_Any = Samples<>;
using Accepted_Float = Samples<FloatT>;
using Excluded_Float = Samples<IntT, BoolT>;
using Accepted_Numeric = Samples<FloatT, IntT>;
using Excluded_Numeric = Samples<BoolT>;
using Accepted_Int = Samples<IntT>;
using Excluded_Int = Samples<FloatT, BoolT>;
using Accepted_Bool = Samples<BoolT>;
using Excluded_Bool = Samples<FloatT, IntT>;
using Accepted_IntBool = Samples<IntT, BoolT>;
using Excluded_IntBool = Samples<FloatT>;
// The result a `result` column promises for an operand of type T.
template <class T>
using Expected_Same = T;
template <class T>
using Expected_Bool = Tensor<T::rank, Bool>;

// All / none of the samples satisfy the check.
#define EMBER_ALL_SAMPLES(list, check) []<class... T>(Samples<T...>) { return (check<T> && ...); }(list{})
#define EMBER_NO_SAMPLE(list, check) []<class... T>(Samples<T...>) { return (!check<T> && ...); }(list{})

// ---- unary ops: fn(x) (the forms Plain, Rounding and Params: parameters have defaults) ---------
#define EMBER_CHECK_UNARY(fn, kinds, result)                                                           \
  template <class A>                                                                                   \
  concept array_has_##fn = requires(const A& a) {                                                      \
    { ember::fn(a) } -> std::same_as<Array>;                                                           \
  };                                                                                                   \
  template <class T>                                                                                   \
  concept member_##fn = requires(const T& t) {                                                         \
    { t.fn() } -> std::same_as<Expected_##result<T>>;                                                  \
  };                                                                                                   \
  template <class T>                                                                                   \
  concept free_##fn = requires(const T& t) {                                                           \
    { ember::fn(t) } -> std::same_as<Expected_##result<T>>;                                            \
  };                                                                                                   \
  static_assert(array_has_##fn<Array>, "Array function " #fn "(x) is missing");                       \
  static_assert(EMBER_ALL_SAMPLES(Accepted_##kinds, member_##fn), "Tensor member t." #fn "() is missing"); \
  static_assert(EMBER_ALL_SAMPLES(Accepted_##kinds, free_##fn), "Tensor function " #fn "(t) is missing"); \
  static_assert(EMBER_NO_SAMPLE(Excluded_##kinds, member_##fn), "t." #fn "() compiles for an excluded kind"); \
  static_assert(EMBER_NO_SAMPLE(Excluded_##kinds, free_##fn), #fn "(t) compiles for an excluded kind");
#define EMBER_CHECK_UNARY_Plain(fn, kinds, result) EMBER_CHECK_UNARY(fn, kinds, result)
#define EMBER_CHECK_UNARY_Rounding(fn, kinds, result) EMBER_CHECK_UNARY(fn, kinds, result)
#define EMBER_CHECK_UNARY_Params(fn, kinds, result) EMBER_CHECK_UNARY(fn, kinds, result)
// cast(x, dtype): every kind, to a dtype of the same kind.
#define EMBER_CHECK_UNARY_Cast(fn, kinds, result)                                                      \
  template <class T>                                                                                   \
  concept cast_forms = requires(const T& t, const Array& a) {                                          \
    { ember::fn(a, DType::F64) } -> std::same_as<Array>;                                               \
    { t.fn(DType::F64) } -> std::same_as<T>;                                                           \
    { ember::fn(t, DType::F64) } -> std::same_as<T>;                                                   \
  };                                                                                                   \
  static_assert(EMBER_ALL_SAMPLES(Accepted_##kinds, cast_forms), #fn ": a form is missing");
#define EMBER_UNARY_OP(Name, fn, rule, form, kinds, result, ...) EMBER_CHECK_UNARY_##form(fn, kinds, result)

// ---- binary ops: fn(a, b) with tensors of any two ranks and with a scalar on either side --------
#define EMBER_BINARY_OP(Name, fn, rule, kinds, result, ...)                                            \
  template <class A>                                                                                   \
  concept array_has_##fn = requires(const A& a) {                                                      \
    { ember::fn(a, a) } -> std::same_as<Array>;                                                        \
    { ember::fn(a, 2) } -> std::same_as<Array>;                                                        \
    { ember::fn(2, a) } -> std::same_as<Array>;                                                        \
  };                                                                                                   \
  template <class T>                                                                                   \
  concept member_##fn = requires(const T& t, const Tensor<T::rank + 1, typename T::Kind>& wider) {     \
    { t.fn(t) } -> std::same_as<Expected_##result<T>>;                                                 \
    { t.fn(wider) } -> std::same_as<Expected_##result<std::remove_cvref_t<decltype(wider)>>>;         \
    { t.fn(2) } -> std::same_as<Expected_##result<T>>;                                                 \
  };                                                                                                   \
  template <class T>                                                                                   \
  concept free_##fn = requires(const T& t, const Tensor<T::rank + 1, typename T::Kind>& wider) {       \
    { ember::fn(t, t) } -> std::same_as<Expected_##result<T>>;                                         \
    { ember::fn(wider, t) } -> std::same_as<Expected_##result<std::remove_cvref_t<decltype(wider)>>>;  \
    { ember::fn(t, 2) } -> std::same_as<Expected_##result<T>>;                                         \
    { ember::fn(2, t) } -> std::same_as<Expected_##result<T>>;                                         \
  };                                                                                                   \
  static_assert(array_has_##fn<Array>, "Array function " #fn "(a, b) is missing");                    \
  static_assert(EMBER_ALL_SAMPLES(Accepted_##kinds, member_##fn), "Tensor member t." #fn "(b) is missing"); \
  static_assert(EMBER_ALL_SAMPLES(Accepted_##kinds, free_##fn), "Tensor function " #fn "(a, b) is missing"); \
  static_assert(EMBER_NO_SAMPLE(Excluded_##kinds, member_##fn), "t." #fn "(b) compiles for an excluded kind"); \
  static_assert(EMBER_NO_SAMPLE(Excluded_##kinds, free_##fn), #fn "(a, b) compiles for an excluded kind");
#include "ember/elementwise_ops.def"

// The pairs the issue names, spelled out.
static_assert(requires(const Tensor<2>& t) {
  log2(t);
  t.log2();
  fmod(t, t);
  t.fmod(2.0);
  max_pool2d(Tensor<4>(), 2);
});

// The function names of the table, in order.
const std::vector<std::string>& table_functions() {
  static const std::vector<std::string> names = {
#define EMBER_UNARY_OP(Name, fn, ...) #fn,
#define EMBER_BINARY_OP(Name, fn, ...) #fn,
#include "ember/elementwise_ops.def"
  };
  return names;
}

// The names written in backticks in the first cell of the rows of docs/ops.md's tables:
// "| `atan`, `atan2(y, x)` | ..." names atan and atan2.
std::set<std::string> documented_functions(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::set<std::string> names;
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() < 2 || line[0] != '|') continue;
    const std::string cell = line.substr(1, line.find('|', 1) - 1);
    for (size_t open = cell.find('`'); open != std::string::npos; open = cell.find('`', open + 1)) {
      size_t close = cell.find('`', open + 1);
      if (close == std::string::npos) break;
      std::string name;
      for (size_t i = open + 1; i < close && (std::isalnum((unsigned char)cell[i]) || cell[i] == '_'); ++i)
        name += cell[i];
      if (!name.empty()) names.insert(name);
      open = close;
    }
  }
  return names;
}

TEST(OpSurface, EveryTableOpHasADocsRow) {
  const std::set<std::string> documented = documented_functions(std::string(EMBER_TEST_SOURCE_DIR) + "/../docs/ops.md");
  ASSERT_GT(documented.size(), 50u);
  EXPECT_GT(table_functions().size(), 70u);
  for (const std::string& fn : table_functions())
    EXPECT_TRUE(documented.count(fn)) << "`" << fn << "` is in ember/elementwise_ops.def but has no row in docs/ops.md";
}

// The parser reads what a row names, and only the first cell.
TEST(OpSurface, DocsRowParser) {
  const std::string path = ::testing::TempDir() + "/ops_rows.md";
  {
    std::ofstream out(path);
    out << "| `atan`, `atan2(y, x)` | `notme` |\n| op | kind |\n`outside` a table\n| `bitwise_and` | x |\n";
  }
  EXPECT_EQ(documented_functions(path), (std::set<std::string>{"atan", "atan2", "bitwise_and"}));
}

// PyTorch's scalar shorthand for pooling: max_pool2d(x, 2) is a 2 x 2 kernel with stride 2.
TEST(OpSurface, PoolingScalarShorthand) {
  Array x = reshape(arange(0, 16, 1, DType::F32), {1, 1, 4, 4});  // rows 0-3, 4-7, 8-11, 12-15
  EXPECT_EQ(max_pool2d(x, 2).to_vector<float>(), (std::vector<float>{5, 7, 13, 15}));
  EXPECT_EQ(avg_pool2d(x, 2).to_vector<float>(), (std::vector<float>{2.5, 4.5, 10.5, 12.5}));
  EXPECT_EQ(max_pool2d(x, 4).to_vector<float>(), (std::vector<float>{15}));
  Array line = reshape(arange(0, 6, 1, DType::F32), {1, 1, 6});
  EXPECT_EQ(max_pool1d(line, 3).to_vector<float>(), (std::vector<float>{2, 5}));
  EXPECT_EQ(avg_pool1d(line, 2).to_vector<float>(), (std::vector<float>{0.5, 2.5, 4.5}));
  Tensor<4> t(x);
  EXPECT_EQ(t.max_pool2d(2).to_vector(), (std::vector<float>{5, 7, 13, 15}));
  EXPECT_EQ(avg_pool2d(t, 2).to_vector(), (std::vector<float>{2.5, 4.5, 10.5, 12.5}));
  EXPECT_EQ(max_pool2d(t, 2).shape(), Shape({1, 1, 2, 2}));
}

// Several dims are one type, Axes: one dim, a braced list, a vector of int or int64_t; never a bool
// (sum(x, true) reducing dim 1 would be a silent mistake).
template <class A>
concept sum_of_bool = requires(const A& a) { ember::sum(a, true); };
template <class A>
concept sum_of_int = requires(const A& a) { ember::sum(a, 1); };
static_assert(!sum_of_bool<Array>, "sum(x, true) must not compile");
static_assert(sum_of_int<Array>, "sum(x, 1) must compile");

TEST(OpSurface, AxesTakeOneDimAListOrAVector) {
  Array x = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  const std::vector<double> rows{6, 15}, cols{5, 7, 9};
  EXPECT_TRUE(testing::all_close(sum(x, 1), rows, 0, 0));
  EXPECT_TRUE(testing::all_close(sum(x, {1}), rows, 0, 0));
  EXPECT_TRUE(testing::all_close(sum(x, -1), rows, 0, 0));
  EXPECT_TRUE(testing::all_close(sum(x, std::vector<int>{0}), cols, 0, 0));
  EXPECT_TRUE(testing::all_close(sum(x, std::vector<int64_t>{0}), cols, 0, 0));
  EXPECT_TRUE(testing::all_close(mean(x, 0), {2.5, 3.5, 4.5}, 0, 0));
  EXPECT_TRUE(testing::all_close(max(x, {0, 1}), {6}, 0, 0));
  EXPECT_TRUE(testing::all_close(logsumexp(x, 1), {std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)),
                                                   std::log(std::exp(4.0) + std::exp(5.0) + std::exp(6.0))},
                                 1e-12, 0));
  EXPECT_TRUE(testing::all_close(flip(x, 1), {3, 2, 1, 6, 5, 4}, 0, 0));
  EXPECT_EQ(var(x, 1).shape(), Shape({2}));
  EXPECT_EQ(Tensor<2>(x).sum_dims(0).shape(), Shape({1, 3}));
}

}  // namespace
}  // namespace ember
