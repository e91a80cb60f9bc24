// Fashion-MNIST with the API sketch's CNN and the Learner: live dashboard, checkpoints in
// runs/example-cnn, an HTML report at the end.
//   ./build/release/bin/example-fashion-cnn [epochs] [limit]
#include <ember/ember.h>

#include <cstdlib>

using namespace ember;

struct Cnn : nn::Module {
  nn::Conv2d conv1{{.in = 1, .out = 32, .kernel = 3}};
  nn::Conv2d conv2{{.in = 32, .out = 64, .kernel = 3}};
  nn::Dropout drop{{.p = 0.25}};
  nn::Linear fc1{{.in = 9216, .out = 128}};
  nn::Linear fc2{{.in = 128, .out = 10}};
  EMBER_MODULE(conv1, conv2, drop, fc1, fc2)

  Tensor<2> forward(const Tensor<4>& x) {
    auto h = relu(conv2(relu(conv1(x))));
    h = drop(max_pool2d(h, {.kernel = 2}));
    return fc2(relu(fc1(h.flatten<2>(1))));
  }
};

int main(int argc, char** argv) {
  int64_t epochs = argc > 1 ? std::atoll(argv[1]) : 1;
  size_t limit = argc > 2 ? size_t(std::atoll(argv[2])) : 60000;

  auto train_set = data::take(data::FashionMnist::train(), limit);
  data::DataLoader train_loader(train_set, {.batch_size = 64, .shuffle = true, .workers = 2});
  data::DataLoader valid_loader(data::FashionMnist::test(), {.batch_size = 500, .workers = 2});

  Cnn model;
  auto report = train::Learner(model, optim::Adam(model, {.lr = 1e-3}))
                    .metrics({train::accuracy(), train::loss()})
                    .checkpoints("runs/example-cnn")
                    .epochs(epochs)
                    .fit(train_loader, valid_loader);
  return report.last("valid_accuracy") > 0.5 ? 0 : 1;
}
