// dist::DataParallel (ember/dist/data_parallel.h): parameter broadcast, bucketed gradient
// all-reduce in reverse parameter order, local gradient accumulation.
#include "ember/dist/data_parallel.h"

#include <chrono>

#include "ember/dist/sync_batch_norm.h"
#include "ember/ops.h"

namespace ember::dist {

DataParallel::DataParallel(Communicator& comm, nn::Module& model, DataParallelOptions opts)
    : comm_(comm), model_(model), opts_(opts) {
  if (opts_.accumulation_steps < 1)
    throw Error("dist::DataParallel: accumulation_steps must be at least 1, got " +
                std::to_string(opts_.accumulation_steps));
  if (!(opts_.bucket_mb > 0)) throw Error("dist::DataParallel: bucket_mb must be positive");
  for (auto& np : model_.named_parameters())
    if (np.param.trainable()) params_.push_back(np);
  // Buckets in reverse order; a bucket holds one dtype and device and about bucket_mb MiB.
  const double limit = opts_.bucket_mb * 1024 * 1024;
  std::vector<size_t> current;
  double bytes = 0;
  for (size_t k = params_.size(); k-- > 0;) {
    const Array& a = params_[k].param.array();
    double b = double(a.numel()) * double(dtype_size(a.dtype()));
    bool fits = !current.empty() && bytes + b <= limit && params_[current[0]].param.array().dtype() == a.dtype() &&
                params_[current[0]].param.array().device() == a.device();
    if (!current.empty() && !fits) {
      buckets_.push_back(std::move(current));
      current.clear();
      bytes = 0;
    }
    current.push_back(k);
    bytes += b;
  }
  if (!current.empty()) buckets_.push_back(std::move(current));
  if (opts_.sync_batch_norm) synchronize_batch_norm(model_, comm_);
  broadcast_parameters();
}

DataParallel::~DataParallel() {
  if (opts_.sync_batch_norm) desynchronize_batch_norm(model_);
}

void DataParallel::broadcast_parameters() {
  std::vector<nn::NamedParam> all = model_.named_parameters();
  if (opts_.broadcast_buffers)
    for (auto& b : model_.named_buffers()) all.push_back(b);
  std::vector<Pending<Array>> pending;
  for (auto& np : all) pending.push_back(comm_.broadcast(np.param.array().detach(), 0));
  for (size_t i = 0; i < all.size(); ++i) {
    Array v;
    try {
      v = pending[i].wait();
    } catch (const Error& e) {
      throw Error("dist::DataParallel: broadcasting '" + all[i].name + "' from rank 0: " + e.what());
    }
    all[i].param.set(v);
  }
}

bool DataParallel::backward(const Array& loss) {
  if (micro_ == 0) grads_ = loss.backward();
  else loss.backward_into(grads_);
  ++micro_;
  if (micro_ < opts_.accumulation_steps) {
    eval(grads_.arrays());  // the running sum stays a value, not a growing graph
    return false;
  }
  return finish_accumulation();
}

bool DataParallel::finish_accumulation() {
  if (micro_ == 0) return false;
  all_reduce_gradients(grads_, 1.0 / micro_);
  micro_ = 0;
  return true;
}

void DataParallel::all_reduce_gradients(Gradients& grads, double scale) {
  struct Started {
    Pending<Array> result;
    std::vector<size_t> members;
  };
  std::vector<Started> started;
  for (const auto& bucket : buckets_) {
    std::vector<Array> flat;
    for (size_t k : bucket) {
      const Array& leaf = params_[k].param.array();
      Array g = grads.get(leaf);
      if (!g.defined()) g = zeros_like(leaf);
      flat.push_back(reshape(g, {-1}));
    }
    Array joined = flat.size() == 1 ? flat[0] : cat(flat, 0);
    if (scale != 1.0) joined = mul(joined, scale);
    joined.eval();  // queued now: this bucket computes while the previous one is reduced
    stats_.bytes += joined.numel() * int64_t(dtype_size(joined.dtype()));
    started.push_back({comm_.all_reduce(joined, ReduceOp::Mean), bucket});
  }
  auto t0 = std::chrono::steady_clock::now();
  for (auto& s : started) {
    Array reduced = s.result.wait();
    int64_t offset = 0;
    for (size_t k : s.members) {
      const Array& leaf = params_[k].param.array();
      int64_t n = leaf.numel();
      Array g = reshape(slice(reduced, 0, offset, offset + n), leaf.shape());
      offset += n;
      grads.remove(leaf);
      grads.accumulate(leaf, g);
    }
  }
  stats_.wait_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stats_.buckets += int64_t(started.size());
  ++stats_.reductions;
}

}  // namespace ember::dist
