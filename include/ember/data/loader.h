// DataLoader: batches of a dataset as tensors, built by worker threads ahead of the consumer.
//
//   auto loader = data::DataLoader(data::FashionMnist::train(), {.batch_size = 64, .shuffle = true, .workers = 2});
//   for (auto& [images, labels] : loader) { ... }   // images Tensor<4> [64, 1, 28, 28], labels Tensor<1, Int>
//
// Order: epoch e visits the items in permutation(size, mix(seed) + e) when shuffling, else in
// order; batch b holds positions [b * batch_size, (b + 1) * batch_size) of that order (the last
// one smaller unless drop_last). Batches reach the consumer in that order whatever the number of
// workers, and each item comes from dataset.get(i) after dataset.set_epoch(e), so a run is the
// same with 0, 1 or 8 workers. Each iteration (begin()) starts the next epoch; set_epoch chooses
// one. Workers build at most `prefetch` batches each ahead of the consumer; an exception thrown
// while building a batch is rethrown to the consumer at that batch.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "ember/data/csv.h"
#include "ember/data/dataset.h"
#include "ember/data/image.h"
#include "ember/tensor.h"

namespace ember::data {

struct LoaderOptions {
  size_t batch_size = 64;
  bool shuffle = false;
  size_t workers = 0;    // threads building batches; 0: built in the iterating thread
  size_t prefetch = 2;   // batches each worker may build ahead of the consumer
  bool drop_last = false;
  uint64_t seed = 0;     // shuffling seed (epoch e uses mix64(seed) + e)
  Device device = Device::cpu();
};

// A batch of inputs and targets; structured bindings give `auto& [x, y] = batch`.
template <int DI, int DT, TensorKind KT>
struct Batch {
  Tensor<DI> inputs{};
  Tensor<DT, KT> targets{};
};
using ImageBatch = Batch<4, 1, Int>;  // [N, C, H, W] floats, [N] class indices
using RowBatch = Batch<2, 2, Float>;  // [N, features], [N, targets]

// Default batchers: items -> one batch of tensors on a device.
template <class Item>
struct Collate;
template <>
struct Collate<LabeledImage> {
  using BatchType = ImageBatch;
  ImageBatch operator()(std::vector<LabeledImage>& items, Device device) const;
};
template <>
struct Collate<Row> {
  using BatchType = RowBatch;
  RowBatch operator()(std::vector<Row>& items, Device device) const;
};

// The order of epoch `epoch` (see the header comment).
std::vector<size_t> epoch_order(size_t n, bool shuffle, uint64_t seed, uint64_t epoch);

template <class Item, class BatchT = typename Collate<Item>::BatchType>
class DataLoader {
 public:
  using Batcher = std::function<BatchT(std::vector<Item>&, Device)>;
  using BatchType = BatchT;

  template <class P>
  DataLoader(P dataset, LoaderOptions opts = {}, Batcher batcher = Collate<Item>{})
      : ds_(DatasetPtr<Item>(std::move(dataset))), opts_(opts), batcher_(std::move(batcher)) {
    if (opts_.batch_size == 0) throw Error("DataLoader: batch_size must be positive");
  }

  // Batches per epoch.
  size_t size() const {
    size_t n = ds_->size(), b = opts_.batch_size;
    return opts_.drop_last ? n / b : (n + b - 1) / b;
  }
  // Items per epoch (without the dropped remainder).
  size_t num_items() const { return opts_.drop_last ? size() * opts_.batch_size : ds_->size(); }
  const LoaderOptions& options() const { return opts_; }
  const Dataset<Item>& dataset() const { return *ds_; }
  const DatasetPtr<Item>& dataset_ptr() const { return ds_; }
  const Batcher& batcher() const { return batcher_; }
  // The epoch the next iteration runs.
  void set_epoch(uint64_t e) { epoch_ = e; }
  uint64_t epoch() const { return epoch_; }
  // Seconds the consumer spent waiting for batches in the current (or last) epoch.
  double wait_seconds() const { return wait_s_; }

  // Builds batch b of an order (used by the workers and by workers == 0).
  BatchT make_batch(const std::vector<size_t>& order, size_t b) const {
    size_t lo = b * opts_.batch_size, hi = std::min(lo + opts_.batch_size, order.size());
    std::vector<Item> items;
    items.reserve(hi - lo);
    for (size_t k = lo; k < hi; ++k) items.push_back(ds_->get(order[k]));
    return batcher_(items, opts_.device);
  }

 private:
  struct Slot {
    std::optional<BatchT> batch{};
    std::exception_ptr error{};
  };
  // One epoch in flight: the order, the workers and the finished batches.
  struct Run {
    const DataLoader* loader;
    std::vector<size_t> order{};
    size_t batches = 0;
    std::mutex mu;
    std::condition_variable cv;
    std::map<size_t, Slot> ready{};
    size_t next_to_make = 0, consumed = 0;
    bool stop = false;
    std::vector<std::thread> threads{};

    Run(const DataLoader* l, uint64_t epoch) : loader(l) {
      const LoaderOptions& o = l->opts_;
      l->ds_->set_epoch(epoch);
      order = epoch_order(l->ds_->size(), o.shuffle, o.seed, epoch);
      batches = l->size();
      for (size_t w = 0; w < o.workers; ++w) threads.emplace_back([this] { work(); });
    }
    ~Run() {
      {
        std::lock_guard<std::mutex> lock(mu);
        stop = true;
      }
      cv.notify_all();
      for (auto& t : threads) t.join();
    }
    void work() {
      size_t window = loader->opts_.workers * std::max<size_t>(1, loader->opts_.prefetch);
      for (;;) {
        size_t b;
        {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return stop || next_to_make >= batches || next_to_make < consumed + window; });
          if (stop || next_to_make >= batches) return;
          b = next_to_make++;
        }
        Slot slot;
        try {
          slot.batch.emplace(loader->make_batch(order, b));
        } catch (...) {
          slot.error = std::current_exception();
        }
        {
          std::lock_guard<std::mutex> lock(mu);
          ready.emplace(b, std::move(slot));
        }
        cv.notify_all();
      }
    }
    BatchT take(size_t b) {
      if (threads.empty()) return loader->make_batch(order, b);
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return ready.count(b) != 0; });
      Slot slot = std::move(ready.at(b));
      ready.erase(b);
      consumed = b + 1;
      lock.unlock();
      cv.notify_all();
      if (slot.error) std::rethrow_exception(slot.error);
      return std::move(*slot.batch);
    }
  };

 public:
  class Iterator {
   public:
    using value_type = BatchT;
    using difference_type = std::ptrdiff_t;
    Iterator() = default;
    Iterator(DataLoader* l, std::shared_ptr<Run> run) : loader_(l), run_(std::move(run)) { fetch(); }
    BatchT& operator*() { return *cur_; }
    BatchT* operator->() { return &*cur_; }
    Iterator& operator++() {
      ++index_;
      fetch();
      return *this;
    }
    void operator++(int) { ++*this; }
    bool operator==(std::default_sentinel_t) const { return !run_ || index_ >= run_->batches; }
    size_t index() const { return index_; }

   private:
    void fetch() {
      cur_.reset();
      if (!run_ || index_ >= run_->batches) {
        run_.reset();  // joins the workers
        return;
      }
      auto t0 = std::chrono::steady_clock::now();
      cur_.emplace(run_->take(index_));
      loader_->wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    DataLoader* loader_ = nullptr;
    std::shared_ptr<Run> run_;
    std::optional<BatchT> cur_;
    size_t index_ = 0;
  };

  // Starts epoch epoch() (then epoch() advances by one).
  Iterator begin() {
    wait_s_ = 0;
    return Iterator(this, std::make_shared<Run>(this, epoch_++));
  }
  std::default_sentinel_t end() const { return {}; }

 private:
  DatasetPtr<Item> ds_;
  LoaderOptions opts_;
  Batcher batcher_;
  uint64_t epoch_ = 0;
  double wait_s_ = 0;
};

template <class P>
DataLoader(P, LoaderOptions = {}) -> DataLoader<ItemOf<P>>;

}  // namespace ember::data
