// train::Learner: the training loop. It runs epochs over a train loader and (optionally) a valid
// loader, with metrics, a learning-rate scheduler, gradient clipping and accumulation, a live
// dashboard, checkpoints every epoch (resumable bit for bit), early stopping, a metrics log
// (metrics.jsonl), a summary table and an HTML report (report.html) in the run folder.
//
//   auto report = train::Learner(model, optim::Adam(model, {.lr = 1e-3}))
//                     .metrics({train::accuracy(), train::loss()})
//                     .checkpoints("runs/cnn")
//                     .epochs(3)
//                     .fit(train_loader, valid_loader);
//
// The optimizer (and scheduler) are held by reference: a temporary optimizer, as above, lives
// until the end of that one statement; keep a named optimizer if you keep the Learner.
//
// Determinism: at the start of epoch e the Learner calls manual_seed(mix(seed, e)) and
// loader.set_epoch(e), so unseeded random ops (dropout without a seed, augmentations) depend
// only on (seed, epoch). A checkpoint holds the model, the optimizer state, the scheduler's step
// count, the seed and the epoch, so a resumed run ends with the same parameters as an
// uninterrupted one. Checkpoints survive a crash at any moment: checkpoint.json is written last
// and names its files with sizes and CRC-32s, which resume verifies (falling back to the newest
// complete epoch; docs/semantics.md § What a checkpoint guarantees after a crash). (A Dropout module built with its own seed keeps a call counter that is not
// part of the model's state: leave the seed unset in models you resume.)
#pragma once

#include <concepts>
#include <cstdint>
#include <functional>
#include <iostream>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "ember/dist/data_parallel_options.h"
#include "ember/dist/sampler.h"
#include "ember/nn/module.h"
#include "ember/optim/grad_scaler.h"
#include "ember/optim/optimizer.h"
#include "ember/optim/lr_scheduler.h"
#include "ember/train/metrics.h"

namespace ember::dist {
class Communicator;  // ember/dist/communicator.h
}  // namespace ember::dist

namespace ember::train {

// One epoch's numbers: "train_loss", "valid_accuracy", "lr", "items_per_s", "epoch_s",
// "wait_fraction" (time the training loop waited for batches / train time), ...
struct EpochRecord {
  int64_t epoch = 0;  // 1-based
  std::map<std::string, double> values{};
  double get(const std::string& key, double fallback = 0) const {
    auto it = values.find(key);
    return it == values.end() ? fallback : it->second;
  }
};
// A smoothed training loss point for plots (global step, loss) and the learning rate the
// optimizer used at that step (NaN in checkpoints written before it was recorded).
struct StepPoint {
  int64_t step = 0;
  double loss = 0;
  double lr = std::numeric_limits<double>::quiet_NaN();
};

struct Report {
  std::vector<EpochRecord> history{};
  std::vector<StepPoint> steps{};
  bool stopped_early = false;
  bool resumed = false;        // started from a checkpoint
  int64_t epochs_done = 0;
  double seconds = 0;          // wall time of this fit call
  DType precision = DType::F32;  // Learner::precision
  int64_t skipped_steps = 0;     // optimizer steps the loss scaler skipped (f16), this fit call
  std::string run_dir{};         // empty without checkpoints()
  // The last epoch's value of a key (fallback if absent).
  double last(const std::string& key, double fallback = 0) const {
    return history.empty() ? fallback : history.back().get(key, fallback);
  }
  // The plain-text summary table (one row per epoch). max_width > 0: the columns are split into
  // several tables (each starting with the epoch column) so that no line is wider.
  std::string summary(size_t max_width = 0) const;
};

struct EarlyStopping {
  std::string metric = "valid_loss";  // any logged key; direction from the metric (loss: lower)
  int64_t patience = 3;               // epochs without improvement before stopping
  double min_delta = 0;               // smaller improvements do not count
};

enum class DashboardMode { Auto, Live, Plain, Off };  // Auto: Live on a terminal, else Plain

// A loader seen by the Learner: batches as (inputs, targets) arrays, epoch by epoch.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual size_t batches() const = 0;
  virtual size_t items() const = 0;
  virtual void start(uint64_t epoch) = 0;
  virtual bool next(Array& inputs, Array& targets) = 0;  // false at the end of the epoch
  virtual double wait_seconds() const = 0;                // waiting for batches this epoch
};

namespace detail {
inline Array as_array(const Array& a) { return a; }
template <int D, class K>
Array as_array(const Tensor<D, K>& t) {
  return t.array();
}
template <class M, class R, class A>
A forward_arg(R (M::*)(A));
template <class M, class R, class A>
A forward_arg(R (M::*)(A) const);

// Adapts any loader with set_epoch/begin/end/size/num_items whose batches have .inputs/.targets.
template <class Loader>
class LoaderSource : public BatchSource {
 public:
  explicit LoaderSource(Loader& l) : l_(l) {}
  size_t batches() const override { return l_.size(); }
  size_t items() const override { return l_.num_items(); }
  void start(uint64_t epoch) override {
    it_.reset();
    l_.set_epoch(epoch);
    it_.emplace(l_.begin());
    first_ = true;
  }
  bool next(Array& inputs, Array& targets) override {
    if (!it_) return false;
    if (!first_) ++*it_;  // advance only now, so workers build while the previous batch computes
    first_ = false;
    if (*it_ == std::default_sentinel) {
      it_.reset();
      return false;
    }
    inputs = as_array((**it_).inputs);
    targets = as_array((**it_).targets);
    return true;
  }
  double wait_seconds() const override { return l_.wait_seconds(); }

 private:
  Loader& l_;
  std::optional<decltype(std::declval<Loader&>().begin())> it_;
  bool first_ = true;
};

template <class L>
struct IsDataLoader : std::false_type {};
template <class I, class B>
struct IsDataLoader<data::DataLoader<I, B>> : std::true_type {};

// This rank's part of a loader built for one process (Learner::shard_loaders). Training: the
// loader's own order (its shuffle, seed and drop_last) dealt over the ranks by dist::shard, batch
// size / ranks each, so that batch b of all ranks together is batch b of the one process.
// Evaluation: every item once (no padding), the same batch size.
template <class I, class B>
data::DataLoader<I, B> shard_loader(const data::DataLoader<I, B>& l, int rank, int size, bool training) {
  data::LoaderOptions o = l.options();
  dist::ShardOptions so{.rank = rank, .size = size, .shuffle = o.shuffle, .seed = o.seed,
                        .drop_last = training && o.drop_last, .pad = training};
  if (training) {
    if (o.batch_size % size_t(size) != 0)
      throw Error("Learner::shard_loaders: the batch size " + std::to_string(o.batch_size) + " does not divide over " +
                  std::to_string(size) + " ranks; choose a multiple of " + std::to_string(size));
    o.batch_size /= size_t(size);
  }
  o.shuffle = false;  // the shard shuffles (the same permutation as the one-process loader)
  return data::DataLoader<I, B>(dist::shard(l.dataset_ptr(), so), o, l.batcher());
}
}  // namespace detail

class Learner {
 public:
  using ForwardFn = std::function<Array(const Array& inputs)>;
  using LossFn = std::function<Array(const Array& output, const Array& targets)>;

  template <class Model>
    requires std::derived_from<Model, nn::Module>
  Learner(Model& model, optim::Optimizer& optimizer) : model_(&model), opt_(&optimizer) {
    forward_ = [&model](const Array& x) -> Array {
      using Arg = std::remove_cvref_t<decltype(detail::forward_arg(&Model::forward))>;
      return detail::as_array(model.forward(Arg(x)));
    };
  }
  // A temporary optimizer: valid until the end of the statement that made it.
  template <class Model>
    requires std::derived_from<Model, nn::Module>
  Learner(Model& model, optim::Optimizer&& optimizer) : Learner(model, static_cast<optim::Optimizer&>(optimizer)) {}

  // Metrics recorded for both phases (the loss is always recorded).
  Learner& metrics(std::vector<MetricPtr> list);
  // Run folder: checkpoints, metrics.jsonl, report.html, last.safetensors.
  Learner& checkpoints(std::string dir);
  Learner& epochs(int64_t n);
  // The seed behind shuffling-independent randomness (dropout, augmentations): see above.
  Learner& seed(uint64_t s);
  // Steps the scheduler after every epoch (or every optimizer step).
  Learner& scheduler(optim::LrScheduler& s, bool per_step = false);
  Learner& clip_grad_norm(double max_norm);
  // Sums the gradients of n batches (each loss scaled by 1/n) before each optimizer step.
  Learner& accumulate(int64_t n);
  Learner& early_stopping(EarlyStopping opts);
  // Continue from the run folder's newest complete checkpoint if there is one (see
  // docs/training.md § Resume): the settings (seed, accumulate, clipping, steps per epoch,
  // log_every and every config() entry but "epochs") must equal the checkpoint's, else fit throws
  // listing the differences; more or fewer epochs are allowed and recorded.
  Learner& resume(bool on = true);
  // Resume even when settings differ from the checkpoint's; each change (old and new value) is
  // recorded in checkpoint.json ("config_changes") and metrics.jsonl ({"type":"config_change"}).
  Learner& allow_config_change(bool on = true);
  // Default: cross-entropy for integer targets, mean squared error otherwise.
  Learner& loss(LossFn fn);
  Learner& forward(ForwardFn fn);
  Learner& dashboard(DashboardMode mode, std::ostream& out = std::cout);
  // A title and key/value settings for the dashboard and the HTML report.
  Learner& title(std::string t);
  Learner& config(std::map<std::string, std::string> kv);
  // Log a smoothed training-loss point every n steps (metrics.jsonl and the plots).
  Learner& log_every(int64_t n);
  // Stop after this many training batches per epoch (smoke runs); 0: all.
  Learner& max_steps_per_epoch(int64_t n);
  // Mixed precision (docs/training.md § Mixed precision): F32 (the default) trains in the
  // parameters' dtype; BF16 and F16 run forward passes (training and validation) inside
  // ember::autocast, so backward passes follow the same dtypes; F16 also scales the loss with an
  // optim::GradScaler (its options: `scaler`), skipping steps whose gradients overflow.
  // Parameters, their gradients, optimizer state and checkpoints stay f32 (master weights).
  // Throws for any other dtype.
  Learner& precision(DType dtype, optim::GradScalerOptions scaler = {});
  // Data-parallel training on comm's ranks (docs/distributed.md § The Learner): every rank calls
  // fit with loaders over its own shard (dist::shard, same seed on every rank); parameters are
  // broadcast from rank 0 after any resume, gradients averaged over ranks at each optimizer step
  // (accumulation stays local), epoch metrics averaged over all ranks' items; only rank 0 prints
  // and writes the run folder. Checkpoints hold no per-rank state (resume on any rank count).
  Learner& data_parallel(dist::Communicator& comm, dist::DataParallelOptions opts = {});
  // With data_parallel: fit takes the loaders one process would use (data::DataLoader) and deals
  // them over the ranks itself: rank r trains on its dist::shard of each epoch's order with
  // batch size / ranks (the batch size must be a multiple of the number of ranks) and validates
  // on items r, r + ranks, ... (each item once). Loaders already over a shard must not be
  // passed then (they would be sharded twice).
  Learner& shard_loaders(bool on = true);

  template <class TrainLoader, class ValidLoader>
  Report fit(TrainLoader& train, ValidLoader& valid) {
    if (sharding()) {
      auto&& t_mine = sharded(train, true);
      auto&& v_mine = sharded(valid, false);
      detail::LoaderSource<TrainLoader> t(t_mine);
      detail::LoaderSource<ValidLoader> v(v_mine);
      return fit_sources(t, &v);
    }
    detail::LoaderSource<TrainLoader> t(train);
    detail::LoaderSource<ValidLoader> v(valid);
    return fit_sources(t, &v);
  }
  template <class TrainLoader>
  Report fit(TrainLoader& train) {
    if (sharding()) {
      auto&& t_mine = sharded(train, true);
      detail::LoaderSource<TrainLoader> t(t_mine);
      return fit_sources(t, nullptr);
    }
    detail::LoaderSource<TrainLoader> t(train);
    return fit_sources(t, nullptr);
  }
  // Metrics over a loader in eval mode without gradients: {"loss": ..., "accuracy": ...}.
  template <class Loader>
  std::map<std::string, double> evaluate(Loader& loader) {
    detail::LoaderSource<Loader> s(loader);
    return evaluate_source(s);
  }

  Report fit_sources(BatchSource& train, BatchSource* valid);
  std::map<std::string, double> evaluate_source(BatchSource& source);

 private:
  // The communicator's rank and size (src/train/distributed_fit.cpp: this header only declares
  // dist::Communicator, so that it does not pull in the collectives).
  int comm_rank() const;
  int comm_size() const;
  bool sharding() const { return shard_loaders_ && comm_ && comm_size() > 1; }
  // A DataLoader: this rank's part (a new loader). Another loader type: an Error (it is returned
  // by reference only so that fit compiles for loaders that cannot be copied).
  template <class Loader>
  decltype(auto) sharded(Loader& l, bool training) const {
    if constexpr (detail::IsDataLoader<Loader>::value) {
      return detail::shard_loader(l, comm_rank(), comm_size(), training);
    } else {
      throw Error("Learner::shard_loaders: only data::DataLoader loaders can be sharded; pass loaders over "
                  "dist::shard instead and leave shard_loaders off");
      return (l);
    }
  }

  nn::Module* model_;
  optim::Optimizer* opt_;
  ForwardFn forward_;
  LossFn loss_;
  std::vector<MetricPtr> metrics_;
  std::string dir_;
  int64_t epochs_ = 1;
  uint64_t seed_ = 0;
  optim::LrScheduler* sched_ = nullptr;
  bool sched_per_step_ = false;
  std::optional<double> clip_;
  int64_t accumulate_ = 1;
  std::optional<EarlyStopping> early_;
  bool resume_ = false;
  bool allow_config_change_ = false;
  DashboardMode dash_ = DashboardMode::Auto;
  std::ostream* out_ = &std::cout;
  std::string title_ = "training";
  std::map<std::string, std::string> config_;
  int64_t log_every_ = 50;
  int64_t max_steps_ = 0;
  DType precision_ = DType::F32;
  optim::GradScalerOptions scaler_options_;
  dist::Communicator* comm_ = nullptr;  // data_parallel(): src/train/distributed_fit.cpp
  dist::DataParallelOptions dp_opts_;
  bool shard_loaders_ = false;
};

}  // namespace ember::train
