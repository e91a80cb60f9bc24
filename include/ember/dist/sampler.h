// Distributed sampling: each rank sees its own shard of every epoch's order. The order is the
// DataLoader's (data::epoch_order: permutation(n, mix64(seed) + epoch) when shuffling), padded by
// repeating its start to a multiple of the number of ranks (or cut, with drop_last), and rank r
// takes positions r, r + size, r + 2 size, ... (as PyTorch's DistributedSampler). So with a
// per-rank batch of B / size, batch b of all ranks together holds exactly the items of batch b
// of a single process with batch B and the same seed.
//
//   auto mine = dist::shard(data::FashionMnist::train(), {.rank = comm->rank(), .size = comm->size(),
//                                                         .shuffle = true, .seed = 7});
//   data::DataLoader loader(mine, {.batch_size = 64 / comm->size()});   // shuffle off: shard() shuffles
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "ember/data/dataset.h"
#include "ember/data/loader.h"

namespace ember::dist {

struct ShardOptions {
  int rank = 0;
  int size = 1;
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_last = false;  // cut the order to a multiple of size instead of padding it
  // Without drop_last: repeat the order's start so that every rank gets the same count (training:
  // the same number of steps). false: no item twice, the first n % size ranks one item more
  // (evaluation, where the ranks' metrics are weighed by items).
  bool pad = true;
};

// The dataset positions rank opts.rank visits in epoch `epoch` (the same count on every rank
// unless pad is false).
std::vector<size_t> shard_order(size_t n, const ShardOptions& opts, uint64_t epoch);

// A view of `src` holding one rank's shard; the loader's set_epoch (each iteration) reshuffles it.
template <class Item>
class Sharded : public data::Dataset<Item> {
 public:
  Sharded(data::DatasetPtr<Item> src, ShardOptions opts) : src_(std::move(src)), opts_(opts) {
    order_ = shard_order(src_->size(), opts_, 0);
  }
  size_t size() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return order_.size();
  }
  Item get(size_t i) const override {
    size_t at;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (i >= order_.size())
        throw Error("dist::Sharded: index " + std::to_string(i) + " out of range (shard size " +
                    std::to_string(order_.size()) + ")");
      at = order_[i];
    }
    return src_->get(at);
  }
  void set_epoch(uint64_t epoch) const override {
    src_->set_epoch(epoch);
    std::lock_guard<std::mutex> lock(mu_);
    order_ = shard_order(src_->size(), opts_, epoch);
  }

 private:
  data::DatasetPtr<Item> src_;
  ShardOptions opts_;
  mutable std::mutex mu_;
  mutable std::vector<size_t> order_;
};

template <class P>
auto shard(P src, ShardOptions opts) {
  using Item = data::ItemOf<P>;
  return std::make_shared<Sharded<Item>>(data::DatasetPtr<Item>(std::move(src)), opts);
}

}  // namespace ember::dist
