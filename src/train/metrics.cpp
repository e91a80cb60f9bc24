// Built-in metrics: loss, accuracy, top-k accuracy.
#include "ember/train/metrics.h"

#include "ember/ops.h"

namespace ember::train {

namespace {
class LossMetric : public Metric {
 public:
  std::string name() const override { return "loss"; }
  bool higher_is_better() const override { return false; }
  void reset() override { sum_ = n_ = 0; }
  void update(const StepData& s) override {
    sum_ += s.loss * double(s.batch_size);
    n_ += double(s.batch_size);
  }
  double value() const override { return n_ ? sum_ / n_ : 0; }
  MetricPtr clone() const override { return std::make_shared<LossMetric>(); }

 private:
  double sum_ = 0, n_ = 0;
};

class TopK : public Metric {
 public:
  explicit TopK(int64_t k) : k_(k) {
    if (k < 1) throw Error("top_k_accuracy: k must be at least 1");
  }
  std::string name() const override { return k_ == 1 ? "accuracy" : "top" + std::to_string(k_) + "_accuracy"; }
  bool is_fraction() const override { return true; }
  void reset() override { hit_ = n_ = 0; }
  void update(const StepData& s) override {
    if (s.output.rank() != 2)
      throw Error(name() + ": expects scores [N, C], got " + s.output.shape().str());
    Array hits;
    if (k_ == 1) {
      hits = eq(argmax(s.output, 1), cast(s.targets, DType::I64));
    } else {
      int64_t k = std::min<int64_t>(k_, s.output.size(1));
      Array idx = topk(s.output, k, 1).indices;
      hits = any(eq(idx, unsqueeze(cast(s.targets, DType::I64), 1)), {1});
    }
    hit_ += double(sum(cast(hits, DType::I64)).item<int64_t>());
    n_ += double(s.output.size(0));
  }
  double value() const override { return n_ ? hit_ / n_ : 0; }
  MetricPtr clone() const override { return std::make_shared<TopK>(k_); }

 private:
  int64_t k_;
  double hit_ = 0, n_ = 0;
};
}  // namespace

MetricPtr loss() { return std::make_shared<LossMetric>(); }
MetricPtr accuracy() { return std::make_shared<TopK>(1); }
MetricPtr top_k_accuracy(int64_t k) { return std::make_shared<TopK>(k); }

}  // namespace ember::train
