// The models of `ember train fashion-mnist` (src/cli/models.h: the CNN and the MLP) trained on
// vulkan:0 against the same training on the CPU, on real Fashion-MNIST images (Debian's
// dataset-fashion-mnist), and their checkpoints moved between the devices. The CLI run itself is
// too slow for a test on lavapipe (the CNN trains at ~6 images/s there and evaluates on 10,000
// test images), so this takes three steps of a few images.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "backend/vulkan_test_util.h"
#include "cli/models.h"
#include "ember/ember.h"

namespace ember {
namespace {

namespace fs = std::filesystem;

const Device kVk = Device::vulkan(0);

// The first `n` training images, normalized as `ember train` does, in batches of `batch`.
std::vector<data::ImageBatch> first_batches(size_t n, size_t batch) {
  auto images = data::augment(data::take(data::FashionMnist::train(), n), {data::normalize({0.2860f}, {0.3530f})}, 0);
  data::DataLoader loader(images, {.batch_size = batch});
  std::vector<data::ImageBatch> out;
  for (auto& b : loader) out.push_back(b);
  return out;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

// Model trained by Adam on `batches`, on the CPU and on vulkan:0 from one initial state (a
// checkpoint written on the CPU, loaded on vulkan:0). Each step's loss agrees to f32 rounding
// (the devices sum in other orders); then the Vulkan model's checkpoint, loaded by a model on the
// CPU, computes the Vulkan model's outputs, and the CPU model's checkpoint loaded on vulkan:0
// computes the CPU model's.
template <class Model>
void trains_as_on_the_cpu(const std::vector<data::ImageBatch>& batches, const fs::path& dir) {
  Model cpu_model, vk_model;
  save(cpu_model, (dir / "init.safetensors").string());
  load(vk_model, (dir / "init.safetensors").string());
  vk_model.to(kVk);
  optim::Adam cpu_opt(cpu_model, {.lr = 1e-3}), vk_opt(vk_model, {.lr = 1e-3});
  for (size_t step = 0; step < batches.size(); ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const data::ImageBatch& b = batches[step];
    manual_seed(100 + step);  // the same dropout masks on both devices (the same Philox streams)
    const Array cpu_loss = nn::cross_entropy(cpu_model.forward(b.inputs).array(), b.targets.array());
    manual_seed(100 + step);
    const Array vk_loss = nn::cross_entropy(vk_model.forward(b.inputs.to(kVk)).array(), b.targets.to(kVk).array());
    const double want = cpu_loss.item<double>(), got = vk_loss.item<double>();
    EXPECT_NEAR(got, want, 2e-5 * std::fabs(want)) << "loss";  // measured: within 2e-7
    cpu_opt.step(cpu_loss.backward());
    vk_opt.step(vk_loss.backward());
  }
  // The loss of the first batch fell: the model learned (it starts near ln 10 = 2.3).
  const data::ImageBatch& first = batches.front();
  cpu_model.eval();
  vk_model.eval();
  const Array after = nn::cross_entropy(vk_model.forward(first.inputs.to(kVk)).array(), first.targets.to(kVk).array());
  EXPECT_LT(after.item<double>(), 2.2);
  for (const bool from_vulkan : {true, false}) {
    SCOPED_TRACE(from_vulkan ? "saved on vulkan:0, loaded on the CPU" : "saved on the CPU, loaded on vulkan:0");
    Model& saved = from_vulkan ? vk_model : cpu_model;
    const fs::path file = dir / (from_vulkan ? "vulkan.safetensors" : "cpu.safetensors");
    save(saved, file.string());
    Model loaded;
    load(loaded, file.string());
    if (!from_vulkan) loaded.to(kVk);
    loaded.eval();
    const Device saved_on = from_vulkan ? kVk : Device::cpu(), loaded_on = from_vulkan ? Device::cpu() : kVk;
    const std::vector<double> want = saved.forward(first.inputs.to(saved_on)).array().template to_vector<double>();
    const std::vector<double> got = loaded.forward(first.inputs.to(loaded_on)).array().template to_vector<double>();
    EXPECT_LT(max_abs_diff(got, want), 1e-4) << "logits";
    // The parameters arrived exactly.
    auto a = saved.named_parameters(), c = loaded.named_parameters();
    ASSERT_EQ(a.size(), c.size());
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_EQ(a[i].param.array().template to_vector<float>(), c[i].param.array().template to_vector<float>()) << a[i].name;
  }
}

class VulkanTrainingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_VULKAN();
    if (!fs::exists(data::FashionMnist::resolve_dir({}) + "/train-images-idx3-ubyte.gz")) {
      if (::ember::testing::vulkan_required()) FAIL() << "dataset-fashion-mnist is not installed (scripts/setup.sh)";
      GTEST_SKIP() << "dataset-fashion-mnist not installed";
    }
    dir_ = fs::temp_directory_path() / ("ember_vulkan_training_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  fs::path dir_;
};

TEST_F(VulkanTrainingTest, FashionMlpTrainsAsOnTheCpuAndCheckpointsMoveBetweenDevices) {
  trains_as_on_the_cpu<cli::FashionMlp>(first_batches(96, 32), dir_);
}

// Three steps of 8 images: lavapipe runs this CNN's convolutions at ~60 M multiply-adds/s.
TEST_F(VulkanTrainingTest, FashionCnnTrainsAsOnTheCpuAndCheckpointsMoveBetweenDevices) {
  trains_as_on_the_cpu<cli::FashionCnn>(first_batches(24, 8), dir_);
}

}  // namespace
}  // namespace ember
