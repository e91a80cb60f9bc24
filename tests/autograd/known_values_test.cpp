// Gradients of small composite functions (an MLP with softmax cross-entropy, layer norm and
// log-softmax written from primitives) against PyTorch's, computed in f64 by the committed
// script tools/reference/autograd_reference.py into tests/autograd/data/reference_grads.txt.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "ember/ember.h"
#include "test_util.h"

namespace ember {
namespace {

using ember::testing::all_close;

std::map<std::string, std::vector<double>> load_reference() {
  std::ifstream f(std::string(EMBER_TEST_DATA_DIR) + "/reference_grads.txt");
  std::map<std::string, std::vector<double>> out;
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ss(line);
    std::string name;
    ss >> name;
    double v;
    while (ss >> v) out[name].push_back(v);
  }
  return out;
}

// The same deterministic inputs as the script: element i is sin(a * i + b).
Array det(const Shape& shape, double a, double b, Device d) {
  std::vector<double> v(static_cast<size_t>(shape.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(a * double(i) + b);
  return from_vector(v, shape, d);
}

// log-softmax along the last dim from primitives.
Array log_softmax_last(const Array& x) {
  Array m = max(x, {-1}, true);
  Array z = sub(x, m);
  return sub(z, log(sum(exp(z), {-1}, true)));
}

class KnownValuesTest : public ::testing::TestWithParam<Device> {
 protected:
  std::map<std::string, std::vector<double>> ref = load_reference();
};

TEST_P(KnownValuesTest, MlpWithSoftmaxCrossEntropy) {
  Device d = GetParam();
  ASSERT_FALSE(ref.empty()) << "reference file missing";
  Array x = det({4, 5}, 0.37, 0.1, d);
  Array w1 = det({5, 6}, 0.71, 0.3, d).require_grad(), b1 = det({6}, 1.3, 0.2, d).require_grad();
  Array w2 = det({6, 3}, 0.53, 0.7, d).require_grad(), b2 = det({3}, 0.9, 0.4, d).require_grad();
  Array labels = from_vector<int64_t>({0, 2, 1, 2}, {4, 1}, d);
  Array logits = add(matmul(gelu(add(matmul(x, w1), b1)), w2), b2);
  Array loss = neg(mean(gather(log_softmax_last(logits), 1, labels)));
  EXPECT_NEAR(loss.item<double>(), ref["mlp.loss"][0], 1e-10);
  Gradients g = loss.backward();
  EXPECT_TRUE(all_close(w1.grad(g), ref["mlp.w1"], 1e-8, 1e-10));
  EXPECT_TRUE(all_close(b1.grad(g), ref["mlp.b1"], 1e-8, 1e-10));
  EXPECT_TRUE(all_close(w2.grad(g), ref["mlp.w2"], 1e-8, 1e-10));
  EXPECT_TRUE(all_close(b2.grad(g), ref["mlp.b2"], 1e-8, 1e-10));
}

TEST_P(KnownValuesTest, LayerNormFromPrimitives) {
  Device d = GetParam();
  Array x = det({3, 8}, 0.41, 0.5, d).require_grad();
  Array gamma = det({8}, 0.8, 1.1, d).require_grad(), beta = det({8}, 0.6, 0.9, d).require_grad();
  Array mu = mean(x, {-1}, true);
  Array xc = sub(x, mu);
  Array var = mean(mul(xc, xc), {-1}, true);
  Array y = add(mul(div(xc, sqrt(add(var, 1e-5))), gamma), beta);
  Gradients g = sum(mul(y, det({3, 8}, 0.27, 0.05, d))).backward();
  EXPECT_TRUE(all_close(x.grad(g), ref["ln.x"], 1e-7, 1e-9));
  EXPECT_TRUE(all_close(gamma.grad(g), ref["ln.gamma"], 1e-8, 1e-10));
  EXPECT_TRUE(all_close(beta.grad(g), ref["ln.beta"], 1e-8, 1e-10));
}

TEST_P(KnownValuesTest, LogSoftmaxTanhBroadcastAndMax) {
  Device d = GetParam();
  Array x = det({2, 3, 4}, 0.33, 0.2, d).require_grad();
  Array s = mul(tanh(x), det({3, 1}, 0.9, 0.1, d));
  Array out = add(sum(mul(log_softmax_last(s), det({2, 3, 4}, 0.77, 0.3, d))), sum(max(s, {1})));
  Gradients g = out.backward();
  EXPECT_TRUE(all_close(x.grad(g), ref["mix.x"], 1e-8, 1e-10));
}

INSTANTIATE_TEST_SUITE_P(Devices, KnownValuesTest, ::testing::ValuesIn(ember::testing::test_devices()),
                         ember::testing::device_test_name);

}  // namespace
}  // namespace ember
