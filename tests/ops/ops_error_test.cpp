// Bad input to any op is an ember::Error (never a crash) whose message names the op, the values
// involved and, for errors found at the call, the caller's file and line.
#include "ops/op_test_util.h"

namespace ember::testing {
namespace {

class OpError : public ::testing::TestWithParam<Device> {
 protected:
  Device dev = GetParam();
};

TEST_P(OpError, MismatchedShapesNameOpShapesAndLine) {
  Array a = f32(iota_d(6), {2, 3}, dev), b = f32(iota_d(4), {4}, dev);
  EMBER_EXPECT_ERROR(add(a, b), "add", "[2, 3]", "[4]", "ops_error_test.cpp:");
  EMBER_EXPECT_ERROR(sub(b, a), "sub", "[4]", "[2, 3]", "ops_error_test.cpp:");
  EMBER_EXPECT_ERROR(mul(a, f32(iota_d(6), {3, 2}, dev)), "mul", "[2, 3]", "[3, 2]");
  EMBER_EXPECT_ERROR(eq(a, b), "eq", "[2, 3]", "[4]");
  EMBER_EXPECT_ERROR(where(make({1, 0}, {2}, DType::Bool, dev), a, a), "where", "[2]", "[2, 3]");
  EMBER_EXPECT_ERROR(clamp(a, b, b), "clamp", "[4]");
  EMBER_EXPECT_ERROR(logical_and(a, b), "logical_and", "[4]");
  // The line is the caller's: this line number appears in the message.
  const int line = __LINE__ + 1;
  std::string msg = error_of([&] { maximum(a, b); });
  EXPECT_TRUE(has_all(msg, {"maximum", "ops_error_test.cpp:" + std::to_string(line)}));
}

TEST_P(OpError, WrongDtypes) {
  Array b = make({1, 0}, {2}, DType::Bool, dev);
  EMBER_EXPECT_ERROR(add(b, b), "add", "bool", "ops_error_test.cpp:");
  EMBER_EXPECT_ERROR(mul(b, b), "mul", "bool");
  EMBER_EXPECT_ERROR(floor_div(b, b), "floor_div", "bool");
  EMBER_EXPECT_ERROR(pow(b, b), "pow", "bool");
  EMBER_EXPECT_ERROR(maximum(b, b), "maximum", "bool");
  EMBER_EXPECT_ERROR(neg(b), "neg", "bool", "ops_error_test.cpp:");
  EMBER_EXPECT_ERROR(abs(b), "abs", "bool");
  EMBER_EXPECT_ERROR(mean(make({1}, {1}, DType::I32, dev)), "mean", "int32");
  EMBER_EXPECT_ERROR(uniform({2}, 0, 1, {.seed = 1, .dtype = DType::I64, .device = dev}), "uniform", "int64");
  EMBER_EXPECT_ERROR(gather(f32({1}, {1}, dev), 0, f32({0}, {1}, dev)), "gather", "float32");
  EMBER_EXPECT_ERROR(matmul(b, b), "matmul", "bool");
}

TEST_P(OpError, OutOfRangeDims) {
  Array a = f32(iota_d(6), {2, 3}, dev);
  EMBER_EXPECT_ERROR(sum(a, {2}), "sum", "dim 2", "rank 2", "ops_error_test.cpp:");
  EMBER_EXPECT_ERROR(argmin(a, -3), "argmin", "dim -3", "rank 2");
  EMBER_EXPECT_ERROR(transpose(a, 0, 7), "transpose", "dim 7");
  EMBER_EXPECT_ERROR(squeeze(a, 2), "squeeze", "dim 2");
  EMBER_EXPECT_ERROR(unsqueeze(a, 4), "unsqueeze", "dim 4");
  EMBER_EXPECT_ERROR(slice(a, -3, 0, 1), "slice", "dim -3");
  EMBER_EXPECT_ERROR(cat({a, a}, 3), "cat", "dim 3");
  EMBER_EXPECT_ERROR(index_select(a, 2, i64({0}, {1}, dev)), "index_select", "dim 2");
  EMBER_EXPECT_ERROR(gather(a, 2, i64({0}, {1, 1}, dev)), "gather", "dim 2");
  EMBER_EXPECT_ERROR(a.size(2), "dim 2");
}

TEST_P(OpError, ReshapeElementCount) {
  Array a = f32(iota_d(6), {2, 3}, dev);
  EMBER_EXPECT_ERROR(reshape(a, {4}), "reshape", "[2, 3]", "6 elements", "[4]", "4 elements", "ops_error_test.cpp:");
  EMBER_EXPECT_ERROR(reshape(a, {5, -1}), "reshape", "[5, -1]");
  EMBER_EXPECT_ERROR(reshape(a, {2, 2, 2}), "reshape", "8 elements");
  EMBER_EXPECT_ERROR(reshape(a, {}), "reshape", "[]", "1 elements");
}

TEST_P(OpError, ErrorsFoundAtReadNameTheOpAndTheLine) {
  const int line = __LINE__ + 1;
  Array q = floor_div(i32({4}, {1}, dev), i32({0}, {1}, dev));
  std::string msg = error_of([&] { q.to_vector<int32_t>(); });
  EXPECT_TRUE(has_all(msg, {"floor_div", "zero", "ops_error_test.cpp:" + std::to_string(line)}));
  // Reading again reports the error again (no crash, no garbage).
  EMBER_EXPECT_ERROR(q.to_vector<int32_t>(), "floor_div");
  Array g = index_select(f32({1, 2}, {2}, dev), 0, i64({2}, {1}, dev));
  EMBER_EXPECT_ERROR(g.item<float>(), "index_select", "2");
  EMBER_EXPECT_ERROR(pow(i64({2}, {1}, dev), -1).item<int64_t>(), "pow", "negative");
}

TEST_P(OpError, MiscellaneousBadCalls) {
  Array a = f32(iota_d(6), {2, 3}, dev);
  EMBER_EXPECT_ERROR(a.item<float>(), "item", "[2, 3]", "6 elements");
  Array undefined;
  EMBER_EXPECT_ERROR(add(undefined, a), "add", "empty");
  EMBER_EXPECT_ERROR(neg(undefined), "neg", "empty");
  EMBER_EXPECT_ERROR(reshape(undefined, {1}), "reshape", "empty");
  EMBER_EXPECT_ERROR(clamp(a, 2, 1), "clamp", "2", "1");
  EMBER_EXPECT_ERROR(clamp(a, std::nullopt, std::nullopt), "clamp");
  EMBER_EXPECT_ERROR(full({1, 1, 1, 1, 1, 1, 1, 1, 1}, 0, {.device = dev}), "full", "rank 9");
  // Operands on different devices (when a second backend is loaded).
  std::vector<Device> devs = test_devices();
  if (devs.size() > 1) {
    Device other = devs[0] == dev ? devs[1] : devs[0];
    EMBER_EXPECT_ERROR(add(a, f32(iota_d(6), {2, 3}, other)), "add", "different devices");
  }
}

EMBER_OP_SUITE(OpError);

}  // namespace
}  // namespace ember::testing
