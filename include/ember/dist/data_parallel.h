// Data-parallel training for hand-written loops: every rank holds the whole model, trains on its
// own shard of each batch (dist::shard), and averages gradients before the optimizer step, so
// the step is identical on every rank.
//
//   auto comm = dist::mpi_world();
//   Net model;                                   // any initialization: rank 0's wins
//   dist::DataParallel dp(*comm, model, {.accumulation_steps = 2});   // broadcasts parameters
//   optim::Adam opt(model, {.lr = 1e-3});        // after dp, which may replace parameter values
//   for (auto& [x, y] : loader)                  // loader over dist::shard(dataset, ...)
//     if (dp.backward(loss_of(model, x, y)))     // false on non-final micro-steps: no communication
//       opt.step(dp.gradients());                // the mean over ranks and micro-steps
//
// Gradients are flattened into buckets of about `bucket_mb` MiB, in reverse parameter order (the
// order backward produces them). On the last micro-step each bucket's all-reduce starts from
// inside the backward walk (BackwardOptions::leaf_gradient_ready) as soon as its gradients are
// final and every earlier bucket has started; the communicator thread then evaluates and reduces
// it while the walk records the rest, and the reduction of bucket k overlaps the computation of
// bucket k + 1 on the device. Buckets start in the same order on every rank.
#pragma once

#include <cstdint>
#include <vector>

#include "ember/autograd.h"
#include "ember/dist/communicator.h"
#include "ember/dist/data_parallel_options.h"
#include "ember/nn/module.h"

namespace ember::dist {

struct DataParallelStats {
  int64_t reductions = 0;  // gradient all-reduces (optimizer steps)
  int64_t buckets = 0;     // buckets sent in total
  int64_t bytes = 0;       // gradient bytes reduced in total
  double wait_s = 0;       // time spent waiting for the reductions after the last bucket started
  int64_t started_in_backward = 0;  // buckets whose all-reduce started inside the backward walk
};

class DataParallel {
 public:
  // Broadcasts rank 0's parameters (and buffers) to every rank. Every rank must construct it
  // with the same model structure; a mismatch is an Error naming both ranks' shapes.
  DataParallel(Communicator& comm, nn::Module& model, DataParallelOptions opts = {});
  // With sync_batch_norm, gives the model's batch norm layers their local statistics back.
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // Rank 0's parameters (and buffers if the options say so) to every rank.
  void broadcast_parameters();

  // One micro-step: adds loss's gradients to the local sum. On the last micro-step of
  // accumulation_steps it averages them over ranks and micro-steps and returns true: then step
  // the optimizer with gradients(). Non-final micro-steps communicate nothing.
  bool backward(const Array& loss);
  // Ends a shorter accumulation (an epoch's remainder): averages over the micro-steps made so
  // far. Every rank must call it at the same point. Returns false when there was nothing to do.
  bool finish_accumulation();
  // The averaged gradients after backward() returned true.
  const Gradients& gradients() const { return grads_; }
  int micro_step() const { return micro_; }

  // The lower-level step: replaces every trainable parameter's gradient in `grads` by its mean
  // over ranks, times `scale`. A parameter without a gradient on this rank counts as zeros.
  void all_reduce_gradients(Gradients& grads, double scale = 1.0);

  const DataParallelStats& stats() const { return stats_; }
  // The buckets: indices into the trainable parameters (model order), last parameter first.
  const std::vector<std::vector<size_t>>& buckets() const { return buckets_; }

 private:
  Communicator& comm_;
  nn::Module& model_;
  DataParallelOptions opts_;
  std::vector<nn::NamedParam> params_;  // trainable parameters, model order
  std::vector<std::vector<size_t>> buckets_;
  Gradients grads_;
  int micro_ = 0;
  DataParallelStats stats_;

  struct Started {
    Pending<Array> result;
    size_t bucket;
  };
  // Flattens bucket b's gradients (grad_of(k) for parameter k; undefined: zeros), scales them,
  // queues their evaluation and starts the all-reduce.
  Started start_bucket(size_t b, const std::function<Array(size_t)>& grad_of, double scale);
  // Waits for the reductions and puts each parameter's share back into grads.
  void finish_buckets(std::vector<Started>& started, Gradients& grads);
};

}  // namespace ember::dist
