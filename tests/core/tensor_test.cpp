// The typed facade Tensor<D, K>: compile-time rank and kind rules, creation, reductions that
// keep rank, rank-changing ops, operators with scalars, printing, and run-time kind checks.
#include <gtest/gtest.h>

#include <sstream>

#include "ember/ember.h"
#include "test_util.h"

namespace ember {
namespace {

using ember::testing::all_close;

// ---- compile-time rules: these would be compile errors in user code ------------------------
static_assert(std::is_constructible_v<Dims<2>, int, int>);
static_assert(!std::is_constructible_v<Dims<2>, int, int, int>, "3 sizes for rank 2 must not compile");
static_assert(!std::is_constructible_v<Dims<2>, int>, "1 size for rank 2 must not compile");
template <class T>
concept HasGelu = requires(T t) { t.gelu(); };
static_assert(HasGelu<Tensor<2, Float>>);
static_assert(!HasGelu<Tensor<2, Int>>, "gelu of an Int tensor must not compile");
static_assert(!HasGelu<Tensor<2, Bool>>, "gelu of a Bool tensor must not compile");
template <class T>
concept CanAdd = requires(T a, T b) { a + b; };
static_assert(CanAdd<Tensor<3, Int>>);
static_assert(!CanAdd<Tensor<3, Bool>>, "arithmetic on Bool tensors must not compile");
static_assert(std::is_same_v<decltype(Tensor<3>().sum_dim(1)), Tensor<3>>, "sum_dim keeps the rank");
static_assert(std::is_same_v<decltype(Tensor<3>().sum()), Tensor<1>>);
static_assert(std::is_same_v<decltype(Tensor<3, Bool>().sum_dim(0)), Tensor<3, Int>>, "bools sum to Int");
static_assert(std::is_same_v<decltype(Tensor<3>().argmax(0)), Tensor<3, Int>>);
static_assert(std::is_same_v<decltype(Tensor<3>().squeeze<1>()), Tensor<2>>);
static_assert(std::is_same_v<decltype(Tensor<3>().unsqueeze<0>()), Tensor<4>>);
static_assert(std::is_same_v<decltype(Tensor<4>().flatten<2>(1)), Tensor<2>>);
static_assert(std::is_same_v<decltype(Tensor<2>().greater(0.0)), Tensor<2, Bool>>);

class TensorTest : public ::testing::TestWithParam<Device> {};

TEST_P(TensorTest, ApiSketchExample) {
  Device d = GetParam();
  auto x = Tensor<2>::from_data({{0.5, -1}, {2, 0}, {-0.25, 1.5}, {1, 1}}, {.device = d});
  auto w = Tensor<2>::from_data({{1, 2}, {3, 4}}, {.device = d});
  Tensor<2> y = gelu(x.matmul(w) + 1.0f);
  EXPECT_EQ(y.dims(), (std::array<int64_t, 2>{4, 2}));
  // Independent f64 computation of gelu(x @ w + 1).
  double xv[4][2] = {{0.5, -1}, {2, 0}, {-0.25, 1.5}, {1, 1}}, wv[2][2] = {{1, 2}, {3, 4}};
  std::vector<double> want;
  for (auto& row : xv)
    for (int j = 0; j < 2; ++j) {
      double v = row[0] * wv[0][j] + row[1] * wv[1][j] + 1.0;
      want.push_back(0.5 * v * (1 + std::erf(v / std::sqrt(2.0))));
    }
  EXPECT_TRUE(all_close(y.array(), want, 1e-5, 1e-6));
  Tensor<2> s = y.sum_dim(1);
  EXPECT_EQ(s.dims(), (std::array<int64_t, 2>{4, 1}));
  Tensor<1> t = s.squeeze<1>();
  EXPECT_TRUE(all_close(t.array(), {want[0] + want[1], want[2] + want[3], want[4] + want[5], want[6] + want[7]}, 1e-5));
  Tensor<2, Int> idx = y.argmax(1);
  std::vector<int64_t> want_idx;
  for (int i = 0; i < 4; ++i) want_idx.push_back(want[size_t(2 * i + 1)] > want[size_t(2 * i)] ? 1 : 0);
  EXPECT_EQ(idx.to_vector(), want_idx);
  Tensor<3> z = y.unsqueeze<0>();
  EXPECT_EQ(z.shape(), (Shape{1, 4, 2}));
}

TEST_P(TensorTest, ReshapeErrorNamesBothShapesAndTheLine) {
  auto y = Tensor<2>::zeros({4, 2}, {.device = GetParam()});
  try {
    (void)y.reshape<2>({2, 2});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("reshape: cannot view [4, 2] (8 elements) as [2, 2] (4 elements)"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("tensor_test.cpp:"), std::string::npos) << e.what();
  }
}

TEST_P(TensorTest, CreationRespectsKindDefaults) {
  Device d = GetParam();
  EXPECT_EQ(Tensor<2>::zeros({2, 3}, {.device = d}).dtype(), DType::F32);
  EXPECT_EQ((Tensor<2, Int>::ones({2, 3}, {.device = d}).dtype()), DType::I64);
  EXPECT_EQ((Tensor<1, Bool>::full({3}, true, {.device = d}).dtype()), DType::Bool);
  EXPECT_EQ((Tensor<1, Int>::arange(0, 10, 3, {.device = d}).to_vector()), (std::vector<int64_t>{0, 3, 6, 9}));
  EXPECT_EQ(Tensor<2>::full({2, 2}, 1.5, {.dtype = DType::F64, .device = d}).to_vector<double>(),
            (std::vector<double>{1.5, 1.5, 1.5, 1.5}));
  auto b = Tensor<2, Bool>::from_data({{true, false}, {false, true}}, {.device = d});
  EXPECT_EQ(b.to_vector(), (std::vector<bool>{true, false, false, true}));
  EXPECT_THROW((Tensor<2>::from_data({{1, 2}, {3}}, {.device = d})), Error);  // ragged
  EXPECT_THROW((Tensor<1, Int>::zeros({2}, {.dtype = DType::F32, .device = d})), Error);  // kind mismatch
}

TEST_P(TensorTest, RandomIsSeededAndShaped) {
  Device d = GetParam();
  auto a = Tensor<2>::randn({100, 50}, {.seed = 3, .device = d});
  auto b = Tensor<2>::randn({100, 50}, {.seed = 3, .device = d});
  EXPECT_EQ(a.to_vector(), b.to_vector());
  double mean = a.mean().item<double>();
  EXPECT_NEAR(mean, 0.0, 0.05);  // 5000 samples: the standard error is 0.014
  auto u = Tensor<1>::rand({1000}, {.seed = 4, .device = d});
  EXPECT_GE(u.min().item(), 0.0f);
  EXPECT_LT(u.max().item(), 1.0f);
}

TEST_P(TensorTest, OperatorsWithScalarsAndLowerRanks) {
  Device d = GetParam();
  auto x = Tensor<2>::from_data({{1, 2, 3}, {4, 5, 6}}, {.device = d});
  auto bias = Tensor<1>::from_data({10, 20, 30}, {.device = d});
  EXPECT_EQ((x + bias).to_vector(), (std::vector<float>{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ((2.0 * x - 1).to_vector(), (std::vector<float>{1, 3, 5, 7, 9, 11}));
  EXPECT_EQ((1.0 / x).to_vector()[1], 0.5f);
  EXPECT_EQ((-x).to_vector()[5], -6.0f);
  auto y = x;
  y += 1;
  y *= x;
  EXPECT_EQ(y.to_vector(), (std::vector<float>{2, 6, 12, 20, 30, 42}));
  auto i = Tensor<1, Int>::from_data({-7, 7}, {.device = d});
  EXPECT_EQ(i.floor_div(2).to_vector(), (std::vector<int64_t>{-4, 3}));
  EXPECT_EQ(i.rem(2).to_vector(), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ((i * 3).to_vector(), (std::vector<int64_t>{-21, 21}));
  EXPECT_THROW((void)(i * 0.5), Error);  // an Int tensor times a float scalar is float: wrong kind
}

TEST_P(TensorTest, MasksAndComparisons) {
  Device d = GetParam();
  auto x = Tensor<1>::from_data({-1, 0, 2}, {.device = d});
  Tensor<1, Bool> pos = x.greater(0.0);
  EXPECT_EQ(pos.to_vector(), (std::vector<bool>{false, false, true}));
  EXPECT_EQ(pos.logical_not().to_vector(), (std::vector<bool>{true, true, false}));
  EXPECT_EQ(x.mask_fill(pos, 9.0).to_vector(), (std::vector<float>{-1, 0, 9}));
  EXPECT_EQ(x.relu().to_vector(), (std::vector<float>{0, 0, 2}));
  EXPECT_EQ(x.clamp(-0.5, 1).to_vector(), (std::vector<float>{-0.5, 0, 1}));
  EXPECT_EQ(pos.to_int().sum().item(), 1);
}

TEST_P(TensorTest, MovementKeepsTypesRight) {
  Device d = GetParam();
  auto x = Tensor<1, Int>::arange(0, 24, 1, {.device = d}).reshape<3>({2, 3, 4});
  EXPECT_EQ(x.permute({2, 0, 1}).dims(), (std::array<int64_t, 3>{4, 2, 3}));
  EXPECT_EQ(x.transpose().dims(), (std::array<int64_t, 3>{2, 4, 3}));
  EXPECT_EQ(x.flatten<2>(1).dims(), (std::array<int64_t, 2>{2, 12}));
  EXPECT_EQ(x.narrow(2, 1, 2).slice(1, 0, 3, 2).to_vector(), (std::vector<int64_t>{1, 2, 9, 10, 13, 14, 21, 22}));
  auto c = Tensor<3, Int>::cat({x, x}, 0);
  EXPECT_EQ(c.dims()[0], 4);
  auto e = Tensor<1>::from_data({1, 2}, {.device = d}).expand<2>({3, 2});
  EXPECT_EQ(e.sum().item(), 9.0f);
  auto g = Tensor<2>::from_data({{1, 2}, {3, 4}}, {.device = d});
  EXPECT_EQ(g.gather(1, Tensor<2, Int>::from_data({{1, 1}, {0, 1}}, {.device = d})).to_vector(),
            (std::vector<float>{2, 2, 3, 4}));
  EXPECT_EQ(g.select(0, Tensor<1, Int>::from_data({1, 0, 1}, {.device = d})).to_vector(),
            (std::vector<float>{3, 4, 1, 2, 3, 4}));
}

TEST_P(TensorTest, PrintsLikePyTorch) {
  Device d = GetParam();
  std::ostringstream os;
  os << Tensor<2>::from_data({{1, 2}, {3, 4}}, {.device = d}).to(Device::cpu().available() ? Device::cpu() : d);
  std::string cpu_suffix = Device::cpu().available() ? "" : ", device='reference'";
  EXPECT_EQ(os.str(), "tensor([[1., 2.],\n        [3., 4.]]" + cpu_suffix + ")");
  auto f = Tensor<1>::from_data({0.5, -1.25}, {.dtype = DType::F64, .device = d});
  std::string dev = d == Device::cpu() ? "" : ", device='" + d.str() + "'";
  EXPECT_EQ(f.str(), "tensor([ 0.5000, -1.2500], dtype=ember.float64" + dev + ")");
  EXPECT_EQ((Tensor<1, Bool>::from_data({true, false}, {.device = d}).str()), "tensor([ True, False]" + dev + ")");
  EXPECT_EQ((Tensor<1, Int>::from_data({3, -10}, {.device = d}).str()), "tensor([  3, -10]" + dev + ")");
}

INSTANTIATE_TEST_SUITE_P(Devices, TensorTest, ::testing::ValuesIn(ember::testing::test_devices()),
                         ember::testing::device_test_name);

}  // namespace
}  // namespace ember

namespace ember {
namespace {

TEST(TensorAutogradTest, TypedGradients) {
  Device d = Device::cpu().available() ? Device::cpu() : Device::reference();
  auto w = Tensor<2>::from_data({{1, 2}, {3, 4}}, {.dtype = DType::F64, .device = d}).require_grad();
  auto x = Tensor<2>::from_data({{1, 0}, {0, 2}}, {.dtype = DType::F64, .device = d});
  Tensor<1> loss = (x.matmul(w) * 0.5).sum();
  Gradients g = loss.backward();
  Tensor<2> dw = w.grad(g);  // d/dw sum(0.5 x w) = 0.5 x^T 1
  EXPECT_EQ(dw.to_vector<double>(), (std::vector<double>{0.5, 0.5, 1, 1}));
  EXPECT_FALSE(w.detach().requires_grad());
}

}  // namespace
}  // namespace ember
