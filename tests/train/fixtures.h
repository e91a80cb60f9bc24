// Shared by the Learner and checkpoint tests (and the checkpoint kill helper program): a tiny
// synthetic classification task (points in [-1, 1]^2 labelled by quadrant), its batcher and a
// small network with unseeded dropout, and one fixed training setup that checkpoints.
#pragma once

#include <ember/ember.h>

#include <ostream>
#include <string>

namespace ember::fixtures {

// Points in [-1, 1]^2 labelled by quadrant (targets: class index in a one-element Row target).
inline std::shared_ptr<data::InMemory<data::Row>> quadrants(int n, uint64_t seed) {
  std::vector<data::Row> rows;
  data::Rng rng(seed);
  for (int i = 0; i < n; ++i) {
    float a = float(rng.uniform() * 2 - 1), b = float(rng.uniform() * 2 - 1);
    rows.push_back({{a, b}, {float((a > 0) * 2 + (b > 0))}});
  }
  return data::in_memory(rows);
}

// Rows -> (features [N, 2], class indices [N]).
using ClassBatch = data::Batch<2, 1, Int>;
inline ClassBatch to_classes(std::vector<data::Row>& rows, Device device) {
  std::vector<float> x;
  std::vector<int64_t> y;
  for (auto& r : rows) {
    x.insert(x.end(), r.features.begin(), r.features.end());
    y.push_back(int64_t(r.targets[0]));
  }
  int64_t n = int64_t(rows.size());
  return {Tensor<2>(from_vector(x, {n, 2}, device)), Tensor<1, Int>(from_vector(y, {n}, device))};
}
using Loader = data::DataLoader<data::Row, ClassBatch>;

struct Net : nn::Module {
  nn::Linear fc1{{.in = 2, .out = 32, .seed = 1}};
  nn::Dropout drop{{.p = 0.1}};  // unseeded: the Learner reseeds the global generator per epoch
  nn::Linear fc2{{.in = 32, .out = 4, .seed = 3}};
  EMBER_MODULE(fc1, drop, fc2)
  Tensor<2> forward(const Tensor<2>& x) { return fc2(drop(relu(fc1(x)))); }
};

// One checkpointed run of the fixed setup (Adam, a step scheduler, accumulation, clipping, 2 loader
// workers); `config` is the Learner's config map. Returns the report.
struct CheckpointedRun {
  std::string dir;
  int64_t epochs = 3;
  bool resume = false;
  bool allow_config_change = false;
  int64_t accumulate = 2;
  std::map<std::string, std::string> config = {{"batch_size", "16"}};
  uint64_t init_seed = 1;
};
inline train::Report run_checkpointed(const CheckpointedRun& r, std::ostream& out) {
  manual_seed(r.init_seed);
  Net model;
  model.fc1 = nn::Linear({.in = 2, .out = 32, .seed = r.init_seed});
  optim::Adam opt(model, {.lr = 0.01});
  optim::StepLr sched(opt, {.step_size = 1, .gamma = 0.7});
  Loader train(quadrants(120, 5), {.batch_size = 16, .shuffle = true, .workers = 2, .seed = 8}, to_classes);
  Loader valid(quadrants(64, 6), {.batch_size = 32}, to_classes);
  return train::Learner(model, opt)
      .metrics({train::accuracy()})
      .checkpoints(r.dir)
      .epochs(r.epochs)
      .seed(77)
      .scheduler(sched)
      .accumulate(r.accumulate)
      .clip_grad_norm(1.0)
      .log_every(3)
      .config(r.config)
      .resume(r.resume)
      .allow_config_change(r.allow_config_change)
      .dashboard(train::DashboardMode::Plain, out)
      .fit(train, valid);
}

}  // namespace ember::fixtures
