// Datasets: a Dataset<Item> has a size and returns item i (get must be safe to call from several
// threads at once: loader workers share one dataset). Datasets are composed through shared
// pointers, so every combinator below is cheap and keeps its source alive:
//
//   auto ds    = data::FashionMnist::train();                       // shared_ptr<FashionMnist>
//   auto [tr, va] = data::split(ds, 0.9, /*seed=*/1);               // 54,000 / 6,000
//   auto small = data::take(tr, 2000);                              // the first 2,000
//   auto pos   = data::filter(tr, [](const LabeledImage& s) { return s.label == 3; });
//   auto x2    = data::map(tr, [](LabeledImage s) { s.label *= 2; return s; });
//
// Random combinators (shuffle, split, augmentations) take a seed; their result depends only on
// (seed, index) and, for per-epoch randomness (augmentations), on the epoch the loader sets with
// set_epoch. So the data a run sees never depends on the number of loader threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ember/error.h"

namespace ember::data {

template <class ItemT>
class Dataset {
 public:
  using Item = ItemT;
  virtual ~Dataset() = default;
  virtual size_t size() const = 0;
  // Item i (0 <= i < size()); throws ember::Error when out of range. Thread-safe.
  virtual Item get(size_t i) const = 0;
  // Per-epoch randomness (augmentations). Wrappers forward it to their sources.
  virtual void set_epoch(uint64_t /*epoch*/) const {}

 protected:
  void check_index(size_t i, const char* what) const {
    if (i >= size())
      throw Error(std::string(what) + ": index " + std::to_string(i) + " out of range (size " + std::to_string(size()) +
                  ")");
  }
};

template <class Item>
using DatasetPtr = std::shared_ptr<const Dataset<Item>>;

// The item type of a dataset pointer (shared_ptr<FashionMnist> -> LabeledImage).
template <class P>
using ItemOf = typename std::remove_cvref_t<decltype(*std::declval<P>())>::Item;

// SplitMix64: the one mixing function behind every seeded choice in ember::data.
inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A small, portable random generator (results are the same with every standard library).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() { return mix64(state_++); }
  // Uniform in [0, n).
  uint64_t below(uint64_t n) { return n == 0 ? 0 : next() % n; }
  double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }

 private:
  uint64_t state_;
};

// A permutation of 0..n-1 from a seed (Fisher-Yates driven by Rng).
inline std::vector<size_t> permutation(size_t n, uint64_t seed) {
  std::vector<size_t> p(n);
  std::iota(p.begin(), p.end(), size_t(0));
  Rng rng(mix64(seed ^ 0x5348554646ULL));
  for (size_t i = n; i > 1; --i) std::swap(p[i - 1], p[rng.below(i)]);
  return p;
}

// ---- in memory --------------------------------------------------------------------------------
template <class Item>
class InMemory : public Dataset<Item> {
 public:
  explicit InMemory(std::vector<Item> items) : items_(std::move(items)) {}
  size_t size() const override { return items_.size(); }
  Item get(size_t i) const override {
    this->check_index(i, "InMemory");
    return items_[i];
  }

 private:
  std::vector<Item> items_;
};
template <class Item>
std::shared_ptr<InMemory<Item>> in_memory(std::vector<Item> items) {
  return std::make_shared<InMemory<Item>>(std::move(items));
}

// ---- mapped: fn(item) -> new item ---------------------------------------------------------------
template <class In, class Out>
class Mapped : public Dataset<Out> {
 public:
  Mapped(DatasetPtr<In> src, std::function<Out(In)> fn) : src_(std::move(src)), fn_(std::move(fn)) {}
  size_t size() const override { return src_->size(); }
  Out get(size_t i) const override { return fn_(src_->get(i)); }
  void set_epoch(uint64_t e) const override { src_->set_epoch(e); }

 private:
  DatasetPtr<In> src_;
  std::function<Out(In)> fn_;
};
template <class P, class F>
auto map(P src, F fn) {
  using In = ItemOf<P>;
  using Out = std::invoke_result_t<F, In>;
  return std::make_shared<Mapped<In, Out>>(DatasetPtr<In>(std::move(src)), std::function<Out(In)>(std::move(fn)));
}

// ---- index views: filtered, shuffled, partial -----------------------------------------------------
// Item k is item indices[k] of the source.
template <class Item>
class Indexed : public Dataset<Item> {
 public:
  Indexed(DatasetPtr<Item> src, std::vector<size_t> indices) : src_(std::move(src)), idx_(std::move(indices)) {
    for (size_t i : idx_)
      if (i >= src_->size()) throw Error("data: index view refers to item " + std::to_string(i) + " of " + std::to_string(src_->size()));
  }
  size_t size() const override { return idx_.size(); }
  Item get(size_t i) const override {
    this->check_index(i, "dataset view");
    return src_->get(idx_[i]);
  }
  void set_epoch(uint64_t e) const override { src_->set_epoch(e); }
  const std::vector<size_t>& indices() const { return idx_; }

 private:
  DatasetPtr<Item> src_;
  std::vector<size_t> idx_;
};

// The items for which pred is true (pred runs once over the whole source, here).
template <class P, class F>
auto filter(P src, F pred) {
  using Item = ItemOf<P>;
  std::vector<size_t> keep;
  for (size_t i = 0; i < src->size(); ++i)
    if (pred(src->get(i))) keep.push_back(i);
  return std::make_shared<Indexed<Item>>(DatasetPtr<Item>(std::move(src)), std::move(keep));
}
// The source in a fixed random order (one permutation for the seed).
template <class P>
auto shuffle(P src, uint64_t seed) {
  using Item = ItemOf<P>;
  auto perm = permutation(src->size(), seed);
  return std::make_shared<Indexed<Item>>(DatasetPtr<Item>(std::move(src)), std::move(perm));
}
// Items [begin, end) of the source.
template <class P>
auto partial(P src, size_t begin, size_t end) {
  using Item = ItemOf<P>;
  if (begin > end || end > src->size())
    throw Error("data::partial: range [" + std::to_string(begin) + ", " + std::to_string(end) +
                ") does not fit a dataset of " + std::to_string(src->size()));
  std::vector<size_t> idx(end - begin);
  std::iota(idx.begin(), idx.end(), begin);
  return std::make_shared<Indexed<Item>>(DatasetPtr<Item>(std::move(src)), std::move(idx));
}
// The first n items (all of them if n >= size).
template <class P>
auto take(P src, size_t n) {
  size_t s = src->size();
  return partial(std::move(src), 0, n < s ? n : s);
}
// Train / valid split: round(fraction * size) items for the first part, the rest for the second.
// seed 0 keeps the source order; another seed shuffles first.
template <class P>
auto split(P src, double fraction, uint64_t seed = 0) {
  using Item = ItemOf<P>;
  if (!(fraction >= 0 && fraction <= 1)) throw Error("data::split: fraction must be in [0, 1], got " + std::to_string(fraction));
  size_t n = src->size();
  std::vector<size_t> order(n);
  if (seed) order = permutation(n, seed);
  else std::iota(order.begin(), order.end(), size_t(0));
  size_t k = size_t(double(n) * fraction + 0.5);
  std::vector<size_t> a(order.begin(), order.begin() + long(k)), b(order.begin() + long(k), order.end());
  DatasetPtr<Item> s(std::move(src));
  return std::make_pair(std::make_shared<Indexed<Item>>(s, std::move(a)), std::make_shared<Indexed<Item>>(s, std::move(b)));
}

// ---- concatenated -------------------------------------------------------------------------------
template <class Item>
class Concat : public Dataset<Item> {
 public:
  explicit Concat(std::vector<DatasetPtr<Item>> parts) : parts_(std::move(parts)) {
    size_t total = 0;
    for (auto& p : parts_) ends_.push_back(total += p->size());
  }
  size_t size() const override { return ends_.empty() ? 0 : ends_.back(); }
  Item get(size_t i) const override {
    this->check_index(i, "Concat");
    size_t k = 0;
    while (i >= ends_[k]) ++k;
    return parts_[k]->get(i - (k ? ends_[k - 1] : 0));
  }
  void set_epoch(uint64_t e) const override {
    for (auto& p : parts_) p->set_epoch(e);
  }

 private:
  std::vector<DatasetPtr<Item>> parts_;
  std::vector<size_t> ends_;
};
template <class Item>
auto concat(std::vector<DatasetPtr<Item>> parts) {
  return std::make_shared<Concat<Item>>(std::move(parts));
}

// ---- windowed: item k is [src[k*stride], ..., src[k*stride + size - 1]] --------------------------
template <class Item>
class Windowed : public Dataset<std::vector<Item>> {
 public:
  Windowed(DatasetPtr<Item> src, size_t size, size_t stride) : src_(std::move(src)), size_(size), stride_(stride) {
    if (size_ == 0 || stride_ == 0) throw Error("data::window: size and stride must be positive");
  }
  size_t size() const override { return src_->size() < size_ ? 0 : (src_->size() - size_) / stride_ + 1; }
  std::vector<Item> get(size_t i) const override {
    this->check_index(i, "Windowed");
    std::vector<Item> out;
    out.reserve(size_);
    for (size_t j = 0; j < size_; ++j) out.push_back(src_->get(i * stride_ + j));
    return out;
  }
  void set_epoch(uint64_t e) const override { src_->set_epoch(e); }

 private:
  DatasetPtr<Item> src_;
  size_t size_, stride_;
};
template <class P>
auto window(P src, size_t size, size_t stride = 1) {
  using Item = ItemOf<P>;
  return std::make_shared<Windowed<Item>>(DatasetPtr<Item>(std::move(src)), size, stride);
}

// ---- randomly transformed: fn(item, rng) with rng seeded by (seed, epoch, index) -----------------
template <class Item>
class Transformed : public Dataset<Item> {
 public:
  using Fn = std::function<Item(Item, Rng&)>;
  Transformed(DatasetPtr<Item> src, Fn fn, uint64_t seed) : src_(std::move(src)), fn_(std::move(fn)), seed_(seed) {}
  size_t size() const override { return src_->size(); }
  Item get(size_t i) const override {
    Rng rng(mix64(mix64(seed_ ^ mix64(epoch_)) + i));
    return fn_(src_->get(i), rng);
  }
  void set_epoch(uint64_t e) const override {
    epoch_ = e;  // set by the loader between epochs, never while workers read
    src_->set_epoch(e);
  }

 private:
  DatasetPtr<Item> src_;
  Fn fn_;
  uint64_t seed_;
  mutable uint64_t epoch_ = 0;
};
template <class P, class F>
auto transform(P src, F fn, uint64_t seed) {
  using Item = ItemOf<P>;
  return std::make_shared<Transformed<Item>>(DatasetPtr<Item>(std::move(src)), typename Transformed<Item>::Fn(std::move(fn)), seed);
}

}  // namespace ember::data
