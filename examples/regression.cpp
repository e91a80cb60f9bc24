// Regression: an MLP learns y = sin(3 x1) + x2^2 from 2,000 noisy samples held in memory, with
// the Learner (mean squared error, a train/valid split, cosine learning rate).
//   ./build/release/bin/example-regression
#include <ember/ember.h>

#include <cmath>
#include <iostream>

using namespace ember;

struct Regressor : nn::Module {
  nn::Linear fc1{{.in = 2, .out = 64}};
  nn::Linear fc2{{.in = 64, .out = 64}};
  nn::Linear fc3{{.in = 64, .out = 1}};
  EMBER_MODULE(fc1, fc2, fc3)
  Tensor<2> forward(const Tensor<2>& x) { return fc3(tanh(fc2(tanh(fc1(x))))); }
};

int main() {
  std::vector<data::Row> rows;
  data::Rng rng(42);
  for (int i = 0; i < 2000; ++i) {
    float x1 = float(rng.uniform() * 2 - 1), x2 = float(rng.uniform() * 2 - 1);
    float noise = float(rng.uniform() - 0.5) * 0.05f;
    rows.push_back({{x1, x2}, {std::sin(3 * x1) + x2 * x2 + noise}});
  }
  auto [train_set, valid_set] = data::split(data::in_memory(rows), 0.8, /*seed=*/7);
  data::DataLoader train_loader(train_set, {.batch_size = 32, .shuffle = true});
  data::DataLoader valid_loader(valid_set, {.batch_size = 400});

  Regressor model;
  optim::Adam opt(model, {.lr = 3e-3});
  optim::CosineAnnealingLr sched(opt, {.t_max = 30});
  auto report = train::Learner(model, opt)
                    .loss([](const Array& out, const Array& y) { return nn::mse_loss(out, y); })
                    .scheduler(sched)
                    .early_stopping({.metric = "valid_loss", .patience = 5})
                    .epochs(30)
                    .fit(train_loader, valid_loader);
  std::cout << "valid mean squared error " << report.last("valid_loss") << "\n";
  return report.last("valid_loss") < 0.05 ? 0 : 1;
}
