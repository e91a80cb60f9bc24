// The module system: EMBER_MODULE naming, shared parameters on copy, freezing, train/eval,
// devices and dtypes, summaries, configs as JSON, state dicts and their errors, containers.
#include <gtest/gtest.h>

#include "nn/nn_test_util.h"

namespace ember {
namespace {

using namespace ember::nn;

struct Block : Module {
  Linear fc{{.in = 4, .out = 3, .seed = 1}};
  BatchNorm1d bn{{.features = 3}};
  EMBER_MODULE(fc, bn)
};

struct Net : Module {
  Block block;
  std::vector<Linear> heads{Linear({.in = 3, .out = 2, .seed = 2}), Linear({.in = 3, .out = 1, .bias = false, .seed = 3})};
  Dropout drop{{.p = 0.5, .seed = 4}};
  EMBER_MODULE(block, heads, drop)
};

TEST(ModuleTest, NamesParametersAndBuffers) {
  Net net;
  std::vector<std::string> names;
  for (auto& np : net.named_parameters()) names.push_back(np.name);
  EXPECT_EQ(names, (std::vector<std::string>{"block.fc.weight", "block.fc.bias", "block.bn.weight", "block.bn.bias",
                                             "heads.0.weight", "heads.0.bias", "heads.1.weight"}));
  std::vector<std::string> buffers;
  for (auto& nb : net.named_buffers()) buffers.push_back(nb.name);
  EXPECT_EQ(buffers, (std::vector<std::string>{"block.bn.running_mean", "block.bn.running_var",
                                               "block.bn.num_batches_tracked"}));
  EXPECT_EQ(net.num_params(), 4 * 3 + 3 + 3 + 3 + 3 * 2 + 2 + 3);
  EXPECT_TRUE(net.block.fc.weight.array().requires_grad());
}

TEST(ModuleTest, CopiesShareParameters) {
  Net a;
  Net b = a;
  EXPECT_EQ(a.block.fc.weight.identity(), b.block.fc.weight.identity());
  b.block.fc.weight.set(zeros({3, 4}));
  EXPECT_EQ(a.block.fc.weight.value().sum().item(), 0.0f);
}

TEST(ModuleTest, SeededLayersAreReproducible) {
  Linear a({.in = 5, .out = 4, .seed = 9}), b({.in = 5, .out = 4, .seed = 9}), c({.in = 5, .out = 4, .seed = 10});
  EXPECT_EQ(a.weight.value().to_vector(), b.weight.value().to_vector());
  EXPECT_NE(a.weight.value().to_vector(), c.weight.value().to_vector());
}

TEST(ModuleTest, FreezeStopsGradients) {
  Net net;
  net.block.freeze();
  EXPECT_FALSE(net.block.fc.weight.trainable());
  EXPECT_FALSE(net.block.fc.weight.array().requires_grad());
  EXPECT_EQ(net.num_params(true), 3 * 2 + 2 + 3);
  Array x = ones({2, 4});
  Array y = net.heads[0].forward(net.block.fc.forward(x));
  Gradients g = sum(y).backward();
  EXPECT_FALSE(g.contains(net.block.fc.weight.array()));
  EXPECT_TRUE(g.contains(net.heads[0].weight.array()));
  net.unfreeze();
  EXPECT_TRUE(net.block.fc.weight.array().requires_grad());
}

TEST(ModuleTest, TrainEvalReachesSubmodules) {
  Net net;
  EXPECT_TRUE(net.drop.is_training());
  net.eval();
  EXPECT_FALSE(net.drop.is_training());
  EXPECT_FALSE(net.block.bn.is_training());
  Array x = ones({3, 3});
  EXPECT_EQ(net.drop.forward(x).to_vector<float>(), x.to_vector<float>());  // identity in eval
  net.train();
  EXPECT_TRUE(net.block.bn.is_training());
}

TEST(ModuleTest, ToDeviceAndDtype) {
  Net net;
  Device other = Device::reference();
  if (!other.available()) GTEST_SKIP() << "no reference backend";
  net.to(other);
  for (auto& np : net.named_parameters()) EXPECT_EQ(np.param.array().device(), other) << np.name;
  net.to(Device::cpu());
  net.to(DType::F64);
  EXPECT_EQ(net.block.fc.weight.array().dtype(), DType::F64);
  EXPECT_EQ(net.block.bn.num_batches_tracked.array().dtype(), DType::I64);  // integer buffers stay
  EXPECT_TRUE(net.block.fc.weight.array().requires_grad());
}

TEST(ModuleTest, SummaryListsNamesShapesCounts) {
  Net net;
  std::string s = net.summary();
  EXPECT_NE(s.find("block.fc.weight"), std::string::npos) << s;
  EXPECT_NE(s.find("[3, 4]"), std::string::npos) << s;
  EXPECT_NE(s.find("BatchNorm1d"), std::string::npos) << s;
  EXPECT_NE(s.find("Net: 32 parameters"), std::string::npos) << s;
}

TEST(ModuleTest, ConfigsAreJson) {
  Linear fc({.in = 784, .out = 512, .bias = false});
  EXPECT_EQ(fc.config(), R"({"bias":false,"device":"cpu","dtype":"float32","in":784,"out":512})");
  LinearOptions back = LinearOptions::from_json(fc.config());
  EXPECT_EQ(back.in, 784);
  EXPECT_EQ(back.out, 512);
  EXPECT_FALSE(back.bias);
  EXPECT_THROW(LinearOptions::from_json("{\"in\": \"x\"}"), Error);
  EXPECT_THROW(LinearOptions::from_json("not json"), Error);
  // Every layer's options survive a JSON round trip.
  Conv2dLayerOptions conv{.in = 3, .out = 8, .kernel = {3, 5}, .stride = 2, .padding = Padding2d::same(), .groups = 1, .seed = 4};
  Conv2dLayerOptions conv2 = Conv2dLayerOptions::from_json(conv.to_json());
  EXPECT_EQ(conv2.to_json(), conv.to_json());
  EXPECT_TRUE(conv2.padding.is_same);
  EXPECT_EQ(Conv2dLayerOptions::from_json(R"({"padding": [1, 2, 3, 4], "kernel": 3})").padding.right, 4);
  BatchNormOptions bn{.features = 7, .momentum = 0.3, .dtype = DType::F64};
  EXPECT_EQ(BatchNormOptions::from_json(bn.to_json()).to_json(), bn.to_json());
  LayerNormOptions ln{.shape = {4, 5}, .eps = 1e-3, .bias = false};
  EXPECT_EQ(LayerNormOptions::from_json(ln.to_json()).to_json(), ln.to_json());
  RMSNormOptions rms{.shape = {8}, .eps = 1e-6};
  EXPECT_EQ(RMSNormOptions::from_json(rms.to_json()).to_json(), rms.to_json());
  EmbeddingOptions emb{.num = 10, .dim = 4, .padding_idx = 0};
  EXPECT_EQ(EmbeddingOptions::from_json(emb.to_json()).to_json(), emb.to_json());
  DropoutOptions drop{.p = 0.3, .seed = 9};
  EXPECT_EQ(DropoutOptions::from_json(drop.to_json()).to_json(), drop.to_json());
  EXPECT_THROW(Conv2dLayerOptions::from_json(R"({"padding": [1, 2, 3]})"), Error);
  Sequential seq(Linear({.in = 2, .out = 3}), ReLU(), Dropout({.p = 0.1}));
  EXPECT_NE(seq.config().find(R"({"config":{"p":0.1},"type":"Dropout"})"), std::string::npos) << seq.config();
}

TEST(ModuleTest, StateDictRoundTripAndErrors) {
  Net a, b;
  b.load_state_dict(a.state_dict());
  EXPECT_EQ(a.heads[0].weight.value().to_vector(), b.heads[0].weight.value().to_vector());
  EXPECT_NE(a.heads[0].weight.identity(), b.heads[0].weight.identity());  // values copied, not slots

  StateDict s = a.state_dict();
  s.erase("heads.1.weight");
  s["extra.weight"] = zeros({1});
  s["heads.0.bias"] = zeros({5});
  try {
    b.load_state_dict(s);
    FAIL();
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("missing keys: heads.1.weight"), std::string::npos) << m;
    EXPECT_NE(m.find("unexpected keys: extra.weight"), std::string::npos) << m;
    EXPECT_NE(m.find("heads.0.bias (expected [2], got [5])"), std::string::npos) << m;
  }
  s.erase("heads.0.bias");
  EXPECT_THROW(b.load_state_dict(s), Error);
  StateDict partial{{"heads.0.bias", full({2}, 7.0)}};
  b.load_state_dict(partial, /*strict=*/false);
  EXPECT_EQ(b.heads[0].bias.value().to_vector(), (std::vector<float>{7, 7}));
}

TEST(ModuleTest, SequentialAndModuleList) {
  Sequential seq(Linear({.in = 3, .out = 4, .seed = 1}), Tanh(), Linear({.in = 4, .out = 2, .seed = 2}));
  std::vector<std::string> names;
  for (auto& np : seq.named_parameters()) names.push_back(np.name);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  Tensor<2> y = seq(Tensor<2>::ones({5, 3}));
  EXPECT_EQ(y.shape(), (Shape{5, 2}));
  Linear& first = seq.at<Linear>(0);
  Array manual = seq.at<Linear>(2).forward(tanh(first.forward(ones({5, 3}))));
  EXPECT_EQ(manual.to_vector<float>(), y.to_vector());
  EXPECT_THROW(seq.at<Linear>(1), Error);

  ModuleList<Linear> list;
  list.push_back(Linear({.in = 2, .out = 2})).push_back(Linear({.in = 2, .out = 2, .bias = false}));
  EXPECT_EQ(list.named_parameters().size(), 3u);
  EXPECT_EQ(list.named_parameters()[2].name, "1.weight");
}

// The model of docs/nn.md and the API sketch (smaller sizes).
struct SketchCnn : Module {
  Conv2d conv1{{.in = 1, .out = 4, .kernel = 3}};
  Conv2d conv2{{.in = 4, .out = 8, .kernel = 3}};
  Dropout drop{{.p = 0.25}};
  Linear fc1{{.in = 8 * 4 * 4, .out = 16}};
  Linear fc2{{.in = 16, .out = 10}};
  EMBER_MODULE(conv1, conv2, drop, fc1, fc2)

  Tensor<2> forward(const Tensor<4>& x) {
    auto h = relu(conv2(relu(conv1(x))));
    h = Tensor<4>(max_pool2d(h.array(), {.kernel = 2}));
    return fc2(relu(fc1(drop(h).flatten<2>(1))));
  }
};

TEST(ModuleTest, ApiSketchModelTrainsAStep) {
  SketchCnn model;
  model.to(Device::cpu());
  optim::Adam opt(model, {.lr = 1e-3});
  Tensor<4> images = Tensor<4>::randn({2, 1, 12, 12}, {.seed = 1});
  Tensor<1, Int> labels = Tensor<1, Int>::from_data({3, 7});
  auto loss = nn::cross_entropy(model.forward(images), labels);
  opt.step(loss.backward());
  EXPECT_EQ(opt.steps(), 1);
  std::string path = ::testing::TempDir() + "/sketch_cnn.safetensors";
  save(model, path);
  SketchCnn other;
  load(other, path);
  EXPECT_EQ(other.fc2.bias.value().to_vector(), model.fc2.bias.value().to_vector());
}

}  // namespace
}  // namespace ember
