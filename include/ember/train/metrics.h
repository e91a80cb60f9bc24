// Metrics for the training loop. A Metric accumulates over the batches of one phase (train or
// valid) and reports one number; the Learner keeps a fresh copy (clone) per phase and logs it as
// "<phase>_<name>" ("train_loss", "valid_accuracy"). Write your own by deriving from Metric:
//
//   struct MeanAbsError : train::Metric {
//     double sum = 0, n = 0;
//     std::string name() const override { return "mae"; }
//     bool higher_is_better() const override { return false; }
//     void reset() override { sum = n = 0; }
//     void update(const train::StepData& s) override {
//       sum += ember::sum(ember::abs(ember::sub(s.output, s.targets))).item<double>(); n += double(s.output.numel());
//     }
//     double value() const override { return n ? sum / n : 0; }
//     train::MetricPtr clone() const override { return std::make_shared<MeanAbsError>(); }
//   };
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ember/array.h"

namespace ember::train {

// What a metric sees after each batch. output and targets are detached (no gradient history).
struct StepData {
  const Array& output;  // model output, e.g. logits [N, C]
  const Array& targets;
  double loss = 0;      // the batch's mean loss
  int64_t batch_size = 0;
};

class Metric {
 public:
  virtual ~Metric() = default;
  virtual std::string name() const = 0;
  virtual bool higher_is_better() const { return true; }
  // Shown as a percentage (accuracy) rather than a plain number.
  virtual bool is_fraction() const { return false; }
  virtual void reset() = 0;
  virtual void update(const StepData& step) = 0;
  virtual double value() const = 0;
  // A fresh metric of the same kind and options (the Learner keeps one per phase).
  virtual std::shared_ptr<Metric> clone() const = 0;
};
using MetricPtr = std::shared_ptr<Metric>;

// The mean loss over the items of a phase (always recorded, whether listed or not).
MetricPtr loss();
// The fraction of items whose highest-scoring class (argmax over dim 1) is the target.
MetricPtr accuracy();
// The fraction of items whose target is among the k highest scores ("top5_accuracy").
MetricPtr top_k_accuracy(int64_t k);

}  // namespace ember::train
