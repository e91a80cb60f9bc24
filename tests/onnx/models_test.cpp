// Models exported by PyTorch's ONNX exporter (tools/onnx/export_models.py writes
// tests/onnx/models/<name>/: model.onnx, input_0.pb and PyTorch's output_0.pb): a ResNet-style
// CNN, a two-layer LSTM and a transformer encoder reproduce PyTorch's outputs, also at another
// batch size (the batch dim is dynamic); the CNN's parameters get gradients matching central
// finite differences in f64; and a few Adam steps on Fashion-MNIST lower the CNN's loss.
#include <gtest/gtest.h>

#ifdef EMBER_HAVE_ONNX

#include <cmath>
#include <filesystem>
#include <random>

#include "ember/data/image.h"
#include "ember/ember.h"
#include "ember/nn/loss.h"
#include "ember/onnx/onnx.h"
#include "ember/optim/adam.h"

using namespace ember;
namespace fs = std::filesystem;

namespace {

std::string model_dir(const std::string& name) { return std::string(EMBER_SOURCE_DIR) + "/tests/onnx/models/" + name; }

// Elementwise |a - b| <= atol + rtol |b|, with the worst element in the message.
void expect_close(const Array& got, const Array& want, double rtol, double atol, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  std::vector<double> g = cast(got, DType::F64).to_vector<double>();
  std::vector<double> w = cast(want, DType::F64).to_vector<double>();
  size_t worst = 0;
  double worst_excess = -1;
  for (size_t i = 0; i < g.size(); ++i) {
    double excess = std::abs(g[i] - w[i]) - (atol + rtol * std::abs(w[i]));
    if (excess > worst_excess || std::isnan(g[i])) worst_excess = std::isnan(g[i]) ? 1e300 : excess, worst = i;
  }
  EXPECT_LE(worst_excess, 0.0) << what << ": element " << worst << " is " << g[worst] << ", PyTorch " << w[worst];
}

class ExportedModelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ExportedModelTest, ReproducesPyTorchOutputs) {
  const std::string dir = model_dir(GetParam());
  onnx::Model model = onnx::load(dir + "/model.onnx");
  EXPECT_GE(model.graph().opset(), 17);
  Array x = onnx::load_tensor(dir + "/input_0.pb");
  Array want = onnx::load_tensor(dir + "/output_0.pb");
  std::vector<Array> out = model.forward(std::vector<Array>{x});
  ASSERT_EQ(out.size(), 1u);
  expect_close(out[0], want, 1e-4, 1e-5, GetParam());
  // The batch dim is dynamic: the first sample alone gives the first row of the output.
  Array one = model.forward(std::vector<Array>{narrow(x, 0, 0, 1)})[0];
  expect_close(one, narrow(want, 0, 0, 1), 1e-4, 1e-5, GetParam() + " (batch 1)");
}

// A captured forward (ember/capture.h) records once per batch size and its replays give what the
// eager forward gives, bit for bit, for new inputs, and PyTorch's values for the exported input.
// The dynamic batch dim makes the exported graphs compute reshape targets from Shape: those host
// reads depend only on the input's shape, so they do not stop the recording.
TEST_P(ExportedModelTest, CapturedForwardReplaysTheEagerForward) {
  const std::string dir = model_dir(GetParam());
  onnx::Model model = onnx::load(dir + "/model.onnx");
  model.eval();
  NoGradGuard no_grad;
  CapturedFunction forward = capture_module(model, [&](const std::vector<Array>& in) { return model.forward(in); });
  Array x = onnx::load_tensor(dir + "/input_0.pb");
  Array want = onnx::load_tensor(dir + "/output_0.pb");
  expect_close(forward({x})[0], want, 1e-4, 1e-5, GetParam() + " (recording)");
  for (int call = 0; call < 3; ++call) {
    Array fresh = add(x, full(x.shape(), 0.25 * (call + 1), {.dtype = x.dtype()}));
    std::vector<double> replayed = cast(forward({fresh})[0], DType::F64).to_vector<double>();
    std::vector<double> eager = cast(model.forward(std::vector<Array>{fresh})[0], DType::F64).to_vector<double>();
    EXPECT_EQ(replayed, eager) << GetParam() << " call " << call;
  }
  expect_close(forward({x})[0], want, 1e-4, 1e-5, GetParam() + " (replay)");
  expect_close(forward({narrow(x, 0, 0, 1)})[0], narrow(want, 0, 0, 1), 1e-4, 1e-5, GetParam() + " (batch 1)");
  CaptureStats s = forward.stats();
  const int batches = x.shape()[0] == 1 ? 1 : 2;  // the exported batch, and batch 1
  EXPECT_EQ(s.recordings, batches) << s.last_refusal;
  EXPECT_EQ(s.replays, 6 - batches);
}

INSTANTIATE_TEST_SUITE_P(Exported, ExportedModelTest,
                         ::testing::Values("resnet_cnn", "resnet_mnist", "lstm", "transformer_encoder"));

TEST(ExportedModelTest, CnnOpsAreThoseOfAResNet) {
  onnx::Model model = onnx::load(model_dir("resnet_cnn") + "/model.onnx");
  std::map<std::string, int> count;
  for (const onnx::Node& n : model.graph().nodes) ++count[n.op_type];
  EXPECT_EQ(count["Conv"], 6);  // stem, 2 per block, the downsampling shortcut
  EXPECT_EQ(count["BatchNormalization"], 6);
  EXPECT_EQ(count["Add"], 2);  // the residual connections
  EXPECT_EQ(count["MaxPool"], 1);
  EXPECT_EQ(count["Gemm"], 1);
}

// d(sum(out * r))/d(param) against central differences, in f64, for a few elements of a
// convolution weight, a BatchNorm scale and bias, and the linear head.
TEST(ExportedModelTest, CnnGradientsMatchFiniteDifferencesInF64) {
  onnx::Model model = onnx::load(model_dir("resnet_cnn") + "/model.onnx");
  model.to(DType::F64);
  Array x = cast(onnx::load_tensor(model_dir("resnet_cnn") + "/input_0.pb"), DType::F64);
  std::mt19937 gen(7);
  std::normal_distribution<double> normal;
  std::vector<double> r(20);
  for (double& v : r) v = normal(gen);
  Array weights = from_vector(r, {2, 10});
  auto loss_of = [&]() { return sum(mul(model.forward(std::vector<Array>{x})[0], weights)); };
  Gradients grads = loss_of().backward();
  int checked = 0;
  for (const nn::NamedParam& p : model.named_parameters()) {
    const std::string& n = p.name;
    bool pick = n.find("running") == std::string::npos &&
                (n.find("stem.0") != std::string::npos || n.find("block2.bn2") != std::string::npos ||
                 n.find("head") != std::string::npos || n.find("block1.conv1") != std::string::npos);
    if (!pick) continue;
    Array w0 = p.param.array();
    std::vector<double> w = w0.to_vector<double>();
    std::vector<double> g = w0.grad(grads).to_vector<double>();
    for (size_t i = 0; i < w.size(); i += std::max<size_t>(1, w.size() / 5)) {
      auto at = [&](double delta) {
        std::vector<double> v = w;
        v[i] += delta;
        p.param.set(from_vector(v, w0.shape()));
        double l = loss_of().item<double>();
        p.param.set(from_vector(w, w0.shape()));
        return l;
      };
      const double h = 1e-5;
      double fd = (at(h) - at(-h)) / (2 * h);
      EXPECT_NEAR(g[i], fd, 1e-6 * std::max(1.0, std::abs(fd))) << n << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GE(checked, 20);
}

// A few hundred Fashion-MNIST images, four epochs of Adam over batches of 32: the loss on those
// images drops clearly (starts near ln 10 = 2.3 with random weights), as it does in PyTorch.
TEST(ExportedModelTest, CnnFineTunesOnFashionMnist) {
  if (!fs::exists(data::FashionMnist::resolve_dir({}) + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "dataset-fashion-mnist not installed";
  onnx::Model model = onnx::load(model_dir("resnet_mnist") + "/model.onnx");
  // BatchNorm's running statistics are initializers too; fine-tuning keeps them, as PyTorch's
  // eval-mode BatchNorm would.
  for (const nn::NamedParam& p : model.named_parameters())
    if (p.name.find("running_") != std::string::npos) p.param.set_trainable(false);
  auto ds = data::FashionMnist::train();
  const int64_t n = 320, batch = 32;
  std::vector<float> pixels;
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < n; ++i) {
    data::LabeledImage item = ds->get(size_t(i));
    for (float v : item.image.pixels) pixels.push_back((v - 0.2860f) / 0.3530f);
    labels.push_back(item.label);
  }
  Array images = from_vector(pixels, {n, 1, 28, 28});
  Array targets = from_vector(labels, {n});
  auto loss_on = [&](int64_t start, int64_t len) {
    Array logits = model.forward(std::vector<Array>{narrow(images, 0, start, len)})[0];
    return nn::cross_entropy(logits, narrow(targets, 0, start, len));
  };
  double before = loss_on(0, n).item<double>();
  optim::Adam opt(model, {.lr = 1e-2});
  for (int epoch = 0; epoch < 4; ++epoch)
    for (int64_t s = 0; s < n; s += batch) opt.step(loss_on(s, batch).backward());
  double after = loss_on(0, n).item<double>();
  std::cout << "exported CNN on " << n << " Fashion-MNIST images: loss " << before << " -> " << after << "\n";
  EXPECT_GT(before, 2.0);
  EXPECT_LT(after, 0.75 * before);
  // tools/onnx/finetune_reference.py runs the same steps in PyTorch: 2.32425 -> 1.53565.
  EXPECT_NEAR(before, 2.32425, 1e-3);
  EXPECT_NEAR(after, 1.53565, 0.02);
}

}  // namespace

#endif  // EMBER_HAVE_ONNX
