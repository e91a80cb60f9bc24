// PointerTable: a map from pointers (graph nodes, autograd nodes) to small values, for the passes
// that visit every node of a graph on each realization or backward (realize's walk, the plan
// cache's structure key, epilogue folding, the backward order). It is open-addressed and cleared
// in constant time, so a table kept by the caller (thread_local) is reused without allocating:
// std::unordered_map allocated one hash node per entry, thousands per training step of a small
// model. Values must be trivially destructible (clear() forgets them without destroying them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

namespace ember {

struct Node;

template <class Key, class V>
class PointerTable {
  static_assert(std::is_trivially_destructible_v<V>, "PointerTable forgets values without destroying them");

 public:
  // Forgets every entry; keeps the memory.
  void clear() {
    used_ = 0;
    if (++generation_ == 0) {  // wrapped: stale slots could look current
      for (Slot& s : slots_) s.generation = 0;
      generation_ = 1;
    }
  }

  // Room for `n` entries without growing.
  void reserve(size_t n) {
    if (2 * n > slots_.size()) grow(2 * n);
  }

  // The value of `key`, default-constructed when it is new.
  V& operator[](const Key* key) { return *insert(key).first; }

  // The value of `key` and whether it was new.
  std::pair<V*, bool> insert(const Key* key) {
    if (2 * (used_ + 1) > slots_.size()) grow(2 * (used_ + 1));
    Slot* s = probe(key);
    if (s->generation == generation_) return {&s->value, false};
    s->generation = generation_;
    s->key = key;
    s->value = V{};
    ++used_;
    return {&s->value, true};
  }

  // The value of `key`, or nullptr.
  V* find(const Key* key) {
    if (slots_.empty()) return nullptr;
    Slot* s = probe(key);
    return s->generation == generation_ ? &s->value : nullptr;
  }

  size_t size() const { return used_; }

 private:
  struct Slot {
    const Key* key = nullptr;
    uint32_t generation = 0;  // the slot holds an entry when equal to the table's
    V value{};
  };

  // The slot holding `key`, or the empty slot where it goes (linear probing; the table is at
  // most half full, so one exists).
  Slot* probe(const Key* key) {
    const size_t mask = slots_.size() - 1;
    size_t i = size_t((uint64_t(reinterpret_cast<uintptr_t>(key)) >> 4) * 0x9e3779b97f4a7c15ull >> 20) & mask;
    for (;; i = (i + 1) & mask) {
      Slot& s = slots_[i];
      if (s.generation != generation_ || s.key == key) return &s;
    }
  }

  void grow(size_t at_least) {
    size_t n = 64;
    while (n < at_least) n *= 2;
    if (n <= slots_.size()) return;
    std::vector<Slot> old = std::move(slots_);
    const uint32_t old_generation = generation_;
    slots_.assign(n, Slot{});
    generation_ = 1;
    for (Slot& s : old)
      if (s.generation == old_generation) {
        Slot* t = probe(s.key);
        *t = s;
        t->generation = generation_;
      }
  }

  std::vector<Slot> slots_;
  uint32_t generation_ = 1;
  size_t used_ = 0;
};

template <class V>
using NodeTable = PointerTable<Node, V>;

}  // namespace ember
