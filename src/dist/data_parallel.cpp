// dist::DataParallel (ember/dist/data_parallel.h): parameter broadcast, bucketed gradient
// all-reduce in reverse parameter order, local gradient accumulation.
#include "ember/dist/data_parallel.h"

#include <chrono>
#include <unordered_map>

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
  const bool final_step = micro_ + 1 == opts_.accumulation_steps;
  BackwardOptions bo;
  std::vector<Started> started;
  std::vector<Array> ready;          // by parameter: its final gradient, once the walk reported it
  std::vector<size_t> missing;       // by bucket: parameters not reported yet
  size_t next = 0;                   // the next bucket to start (buckets start in order on every rank)
  const double scale = 1.0 / opts_.accumulation_steps;
  if (final_step) {
    // Start each bucket's all-reduce from inside the backward walk, as soon as its gradients are
    // final and every earlier bucket has started: the communicator thread then evaluates and
    // reduces it while this thread records the rest of the backward graph.
    std::unordered_map<const autograd::GradNode*, size_t> index;
    for (size_t k = 0; k < params_.size(); ++k) index[params_[k].param.array().grad_node().get()] = k;
    std::vector<size_t> bucket_of(params_.size());
    for (size_t b = 0; b < buckets_.size(); ++b) {
      missing.push_back(buckets_[b].size());
      for (size_t k : buckets_[b]) bucket_of[k] = b;
    }
    ready.resize(params_.size());
    bo.leaf_gradient_ready = [&, index = std::move(index), bucket_of](const autograd::GradNode* leaf, const Array& g) {
      auto it = index.find(leaf);
      if (it == index.end()) return;  // not a trainable parameter of this model
      ready[it->second] = g;
      --missing[bucket_of[it->second]];
      while (next < buckets_.size() && missing[next] == 0) {
        started.push_back(start_bucket(next, [&](size_t k) { return ready[k]; }, scale));
        ++next;
      }
    };
  }
  if (micro_ == 0) grads_ = loss.backward(bo);
  else loss.backward_into(grads_, bo);
  stats_.started_in_backward += int64_t(started.size());
  ++micro_;
  if (!final_step) {
    eval(grads_.arrays());  // the running sum stays a value, not a growing graph
    return false;
  }
  // The buckets the walk did not finish (parameters without a gradient count as zeros).
  for (; next < buckets_.size(); ++next)
    started.push_back(start_bucket(next, [&](size_t k) { return grads_.get(params_[k].param.array()); }, scale));
  finish_buckets(started, grads_);
  micro_ = 0;
  return true;
}

bool DataParallel::finish_accumulation() {
  if (micro_ == 0) return false;
  all_reduce_gradients(grads_, 1.0 / micro_);
  micro_ = 0;
  return true;
}

DataParallel::Started DataParallel::start_bucket(size_t b, const std::function<Array(size_t)>& grad_of, double scale) {
  std::vector<Array> flat;
  for (size_t k : buckets_[b]) {
    const Array& leaf = params_[k].param.array();
    Array g = grad_of(k);
    if (!g.defined()) g = zeros_like(leaf);
    flat.push_back(reshape(g, {-1}));
  }
  Array joined = flat.size() == 1 ? flat[0] : cat(flat, 0);
  if (scale != 1.0) joined = mul(joined, scale);
  joined.eval();  // queued now: this bucket computes while the previous one is reduced
  stats_.bytes += joined.numel() * int64_t(dtype_size(joined.dtype()));
  return {comm_.all_reduce(joined, ReduceOp::Mean), b};
}

void DataParallel::finish_buckets(std::vector<Started>& started, Gradients& grads) {
  auto t0 = std::chrono::steady_clock::now();
  for (auto& s : started) {
    Array reduced = s.result.wait();
    int64_t offset = 0;
    for (size_t k : buckets_[s.bucket]) {
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

void DataParallel::all_reduce_gradients(Gradients& grads, double scale) {
  std::vector<Started> started;
  for (size_t b = 0; b < buckets_.size(); ++b)
    started.push_back(start_bucket(b, [&](size_t k) { return grads.get(params_[k].param.array()); }, scale));
  finish_buckets(started, grads);
}

}  // namespace ember::dist
