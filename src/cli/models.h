// The models of `ember train fashion-mnist`: a small CNN (the default) and an MLP. Their
// type_name() is stored in checkpoints, so `ember eval` knows which one to rebuild.
#pragma once

#include <ember/ember.h>

namespace ember::cli {

// conv(1->32) pool conv(32->64) pool fc(3136->128) dropout fc(128->10): ~0.42 M parameters.
struct FashionCnn : nn::Module {
  nn::Conv2d conv1{{.in = 1, .out = 32, .kernel = 3, .padding = 1}};
  nn::Conv2d conv2{{.in = 32, .out = 64, .kernel = 3, .padding = 1}};
  nn::Dropout drop{{.p = 0.25}};
  nn::Linear fc1{{.in = 64 * 7 * 7, .out = 128}};
  nn::Linear fc2{{.in = 128, .out = 10}};
  EMBER_MODULE(conv1, conv2, drop, fc1, fc2)
  std::string type_name() const override { return "fashion-cnn"; }

  Tensor<2> forward(const Tensor<4>& x) {
    auto h = max_pool2d(relu(conv1(x)), {.kernel = 2});  // [N, 32, 14, 14]
    h = max_pool2d(relu(conv2(h)), {.kernel = 2});       // [N, 64, 7, 7]
    return fc2(drop(relu(fc1(h.flatten<2>(1)))));
  }
};

// 784 -> 512 -> 256 -> 10 with ReLU.
struct FashionMlp : nn::Module {
  nn::Linear fc1{{.in = 784, .out = 512}};
  nn::Linear fc2{{.in = 512, .out = 256}};
  nn::Linear fc3{{.in = 256, .out = 10}};
  EMBER_MODULE(fc1, fc2, fc3)
  std::string type_name() const override { return "fashion-mlp"; }

  Tensor<2> forward(const Tensor<4>& x) { return fc3(relu(fc2(relu(fc1(x.flatten<2>(1)))))); }
};

}  // namespace ember::cli
