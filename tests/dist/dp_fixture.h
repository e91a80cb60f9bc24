// The data-parallel test setup (tests/dist/data_parallel_test.cpp, sync_batch_norm_test.cpp and
// the MPI test program): a small MLP classifier (and one with batch norm), 1,280 synthetic rows
// (20 batches of 64), its batcher, loss, optimizers and a host snapshot of the parameters.
#pragma once

#include <ember/dist/communicator.h>
#include <ember/dist/data_parallel.h>
#include <ember/dist/sampler.h>
#include <ember/dist/sync_batch_norm.h>
#include <ember/ember.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

namespace ember::dist::fixture {

struct Mlp : nn::Module {
  nn::Linear fc1{{.in = 6, .out = 16, .seed = 1}};
  nn::Linear fc2{{.in = 16, .out = 3, .seed = 2}};
  EMBER_MODULE(fc1, fc2)
  explicit Mlp(uint64_t seed) {
    fc1 = nn::Linear({.in = 6, .out = 16, .seed = seed});
    fc2 = nn::Linear({.in = 16, .out = 3, .seed = seed + 1});
  }
  Tensor<2> forward(const Tensor<2>& x) { return fc2(tanh(fc1(x))); }
};

// Rows of 6 features; the class is the index of the largest of three feature sums.
inline std::shared_ptr<data::InMemory<data::Row>> dataset() {
  std::vector<data::Row> rows;
  data::Rng rng(11);
  for (int i = 0; i < 1280; ++i) {
    std::vector<float> f(6);
    for (auto& v : f) v = float(rng.uniform() * 2 - 1);
    float s0 = f[0] + f[1], s1 = f[2] + f[3], s2 = f[4] + f[5];
    float label = s0 >= s1 && s0 >= s2 ? 0.f : s1 >= s2 ? 1.f : 2.f;
    rows.push_back({f, {label}});
  }
  return data::in_memory(rows);
}

using Batch = data::Batch<2, 1, Int>;
inline Batch to_batch(std::vector<data::Row>& rows, Device device) {
  std::vector<float> x;
  std::vector<int64_t> y;
  for (auto& r : rows) {
    x.insert(x.end(), r.features.begin(), r.features.end());
    y.push_back(int64_t(r.targets[0]));
  }
  int64_t n = int64_t(rows.size());
  return {Tensor<2>(from_vector(x, {n, 6}, device)), Tensor<1, Int>(from_vector(y, {n}, device))};
}
using Loader = data::DataLoader<data::Row, Batch>;

inline Array loss(Mlp& model, const Tensor<2>& x, const Tensor<1, Int>& y) {
  return nn::cross_entropy(model.forward(x), y).array();
}

enum class OptimKind { Sgd, Adam };
inline std::unique_ptr<optim::Optimizer> make_optimizer(OptimKind kind, Mlp& model) {
  if (kind == OptimKind::Sgd) return std::make_unique<optim::Sgd>(model, optim::SgdOptions{.lr = 0.5, .momentum = 0.9});
  return std::make_unique<optim::Adam>(model, optim::AdamOptions{.lr = 0.02});
}

using Params = std::vector<std::vector<float>>;
inline Params snapshot(Mlp model) {
  Params out;
  for (auto& np : model.named_parameters()) out.push_back(np.param.array().to_vector<float>());
  return out;
}

// One data-parallel run on `comm`: batch 64 / size / accumulation per rank from its shard, 20
// optimizer steps; returns this rank's parameters.
inline Params train_data_parallel(Communicator& comm, OptimKind kind, int accumulation) {
  Mlp model(1 + uint64_t(comm.rank()) * 100);  // different initializations: rank 0's is broadcast
  model.to(comm.device());
  DataParallel dp(comm, model, {.accumulation_steps = accumulation});
  auto opt = make_optimizer(kind, model);
  auto mine = shard(dataset(), {.rank = comm.rank(), .size = comm.size(), .shuffle = true, .seed = 5});
  Loader loader(mine, {.batch_size = size_t(64 / comm.size() / accumulation), .device = comm.device()}, to_batch);
  int steps = 0;
  for (auto& [x, y] : loader) {
    if (dp.backward(loss(model, x, y))) {
      opt->step(dp.gradients());
      ++steps;
    }
  }
  for (auto& np : model.named_parameters())
    if (np.param.array().device() != comm.device())
      throw Error("train_data_parallel: " + np.name + " is on " + np.param.array().device().str() + ", not " +
                  comm.device().str());
  if (steps != 20 || dp.stats().reductions != 20)
    throw Error("train_data_parallel: " + std::to_string(steps) + " steps, expected 20");
  return snapshot(model);
}

// The single-process run: batch 64, one optimizer step per batch, 20 steps.
inline Params train_single_process(OptimKind kind) {
  Mlp model(1);
  auto opt = make_optimizer(kind, model);
  Loader loader(dataset(), {.batch_size = 64, .shuffle = true, .seed = 5}, to_batch);
  for (auto& [x, y] : loader) opt->step(loss(model, x, y).backward());
  return snapshot(model);
}

// The largest difference relative to the parameter's scale (at least 1).
inline double max_difference(const Params& a, const Params& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = 0; j < a[i].size(); ++j)
      worst = std::max(worst, std::abs(double(a[i][j]) - double(b[i][j])) / std::max(1.0, std::abs(double(a[i][j]))));
  return worst;
}

inline bool bit_identical(const Params& a, const Params& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].size() != b[i].size() || std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) != 0)
      return false;
  return true;
}

// Linear -> BatchNorm1d -> tanh -> Linear, for synchronized batch norm.
struct BatchNormNet : nn::Module {
  nn::Linear fc1{{.in = 6, .out = 16, .seed = 1}};
  nn::BatchNorm1d bn{{.features = 16}};
  nn::Linear fc2{{.in = 16, .out = 3, .seed = 2}};
  EMBER_MODULE(fc1, bn, fc2)
  Tensor<2> forward(const Tensor<2>& x) { return fc2(tanh(bn(fc1(x)))); }
};

// 20 SGD steps of global batch 64: one process (comm null), or comm's ranks with 64 / size rows
// each through DataParallel{.sync_batch_norm = sync}. Returns the parameters, then the running
// mean and variance.
inline Params train_batch_norm_net(Communicator* comm, bool sync) {
  BatchNormNet model;
  std::unique_ptr<DataParallel> dp;
  if (comm) dp = std::make_unique<DataParallel>(*comm, model, DataParallelOptions{.sync_batch_norm = sync});
  optim::Sgd opt(model, {.lr = 0.5, .momentum = 0.9});
  data::DatasetPtr<data::Row> ds;
  if (comm) ds = shard(dataset(), {.rank = comm->rank(), .size = comm->size(), .shuffle = true, .seed = 5});
  else ds = dataset();
  Loader loader(ds, {.batch_size = size_t(comm ? 64 / comm->size() : 64), .shuffle = !comm, .seed = 5}, to_batch);
  for (auto& [x, y] : loader) {
    Array l = nn::cross_entropy(model.forward(x), y).array();
    if (!dp) opt.step(l.backward());
    else if (dp->backward(l)) opt.step(dp->gradients());
  }
  Params out;
  for (auto& np : model.named_parameters()) out.push_back(np.param.array().to_vector<float>());
  out.push_back(model.bn.running_mean.array().to_vector<float>());
  out.push_back(model.bn.running_var.array().to_vector<float>());
  return out;
}

}  // namespace ember::dist::fixture
