// Learner::data_parallel and the hooks fit_sources calls on each rank (src/train/distributed_fit.h).
#include "train/distributed_fit.h"

#include "ember/ops.h"
#include "ember/train/learner.h"

namespace ember::train {

Learner& Learner::data_parallel(dist::Communicator& comm, dist::DataParallelOptions opts) {
  if (opts.accumulation_steps != 1)
    throw Error("Learner::data_parallel: set accumulation with Learner::accumulate (got accumulation_steps " +
                std::to_string(opts.accumulation_steps) + ")");
  comm_ = &comm;
  dp_opts_ = opts;
  return *this;
}

int Learner::comm_rank() const { return comm_->rank(); }
int Learner::comm_size() const { return comm_->size(); }

Learner& Learner::shard_loaders(bool on) {
  shard_loaders_ = on;
  return *this;
}

namespace distributed {

bool is_writer(const dist::Communicator* comm) { return comm == nullptr || comm->rank() == 0; }

void check_same_steps(dist::Communicator* comm, int64_t steps, const std::string& phase, int64_t epoch) {
  if (!comm || comm->size() == 1) return;
  std::vector<Array> all = comm->all_gather(from_vector(std::vector<int64_t>{steps}, {1})).wait();
  std::string counts;
  bool same = true;
  for (size_t r = 0; r < all.size(); ++r) {
    int64_t n = all[r].to_vector<int64_t>().at(0);
    same = same && n == steps;
    counts += (r ? ", rank " : "rank ") + std::to_string(r) + ": " + std::to_string(n);
  }
  if (!same)
    throw Error("Learner (data parallel): the ranks have different numbers of " + phase + " batches in epoch " +
                std::to_string(epoch) + " (" + counts +
                "); give every rank a loader over its dist::shard of the same dataset with the same batch size");
}

int64_t average_over_ranks(dist::Communicator* comm, std::map<std::string, double>& values, const std::string& prefix,
                           const std::vector<MetricPtr>& metrics, int64_t items) {
  if (!comm || comm->size() == 1) return items;
  std::vector<double> weighted;
  for (const auto& m : metrics) weighted.push_back(m->value() * double(items));
  weighted.push_back(double(items));
  std::vector<double> sums =
      comm->all_reduce(from_vector(weighted, {int64_t(weighted.size())}), dist::ReduceOp::Sum).wait().to_vector<double>();
  double total = sums.back();
  for (size_t i = 0; i < metrics.size(); ++i)
    values[prefix + metrics[i]->name()] = total > 0 ? sums[i] / total : 0.0;
  return int64_t(total);
}

}  // namespace distributed
}  // namespace ember::train
