// Fashion-MNIST with an MLP, trained by hand: the loader, the loss, backward and the optimizer
// step, then the test accuracy and a saved model.
//   ./build/release/bin/example-fashion-mlp [epochs]
#include <ember/ember.h>

#include <cstdlib>
#include <iostream>

using namespace ember;

struct Mlp : nn::Module {
  nn::Linear fc1{{.in = 784, .out = 256}};
  nn::Linear fc2{{.in = 256, .out = 10}};
  EMBER_MODULE(fc1, fc2)
  Tensor<2> forward(const Tensor<4>& x) { return fc2(relu(fc1(x.flatten<2>(1)))); }
};

int main(int argc, char** argv) {
  int epochs = argc > 1 ? std::atoi(argv[1]) : 1;
  Mlp model;
  optim::Adam opt(model, {.lr = 1e-3});
  auto loader = data::DataLoader(data::FashionMnist::train(), {.batch_size = 64, .shuffle = true, .workers = 2});
  for (int epoch = 0; epoch < epochs; ++epoch) {
    double total = 0;
    for (auto& [images, labels] : loader) {
      auto loss = nn::cross_entropy(model.forward(images), labels);
      opt.step(loss.backward());
      total += loss.item();
    }
    std::cout << "epoch " << epoch + 1 << ": mean loss " << total / double(loader.size()) << "\n";
  }
  model.eval();
  int64_t correct = 0, seen = 0;
  auto test = data::DataLoader(data::FashionMnist::test(), {.batch_size = 1000});
  for (auto& [images, labels] : test) {
    auto hits = model.forward(images).argmax(1).squeeze<1>().equal(labels);
    correct += hits.to_int().sum().item();
    seen += labels.size(0);
  }
  std::cout << "test accuracy " << 100.0 * double(correct) / double(seen) << "%\n";
  save(model, "mlp.safetensors");
}
