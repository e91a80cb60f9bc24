// Shape: the sizes of a tensor's dimensions, with helpers for element counts, contiguous
// strides, dimension wrapping and broadcasting.
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace ember {

inline constexpr int kMaxRank = 8;

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) { assign(dims.begin(), dims.size()); }
  explicit Shape(const std::vector<int64_t>& dims) { assign(dims.data(), dims.size()); }
  explicit Shape(std::span<const int64_t> dims) { assign(dims.data(), dims.size()); }
  Shape(const Shape& other) { assign(other.begin(), size_t(other.rank_)); }
  Shape(Shape&& other) noexcept { take(other); }
  Shape& operator=(const Shape& other) {
    if (this != &other) assign(other.begin(), size_t(other.rank_));
    return *this;
  }
  Shape& operator=(Shape&& other) noexcept {
    if (this != &other) take(other);
    return *this;
  }
  ~Shape() = default;

  int rank() const { return rank_; }
  int64_t operator[](int i) const { return data()[i]; }
  int64_t& operator[](int i) { return data()[i]; }
  int64_t numel() const;  // throws if the product overflows int64
  std::vector<int64_t> dims() const { return {begin(), end()}; }
  std::vector<int64_t> contiguous_strides() const;
  std::string str() const;  // "[2, 3]"

  const int64_t* begin() const { return data(); }
  const int64_t* end() const { return data() + rank_; }
  friend bool operator==(const Shape& a, const Shape& b) {
    if (a.rank_ != b.rank_) return false;
    for (int i = 0; i < a.rank_; ++i)
      if (a[i] != b[i]) return false;
    return true;
  }

 private:
  // Dims are stored inline up to kMaxRank (every tensor a user can make), so building a lazy
  // op allocates no memory for its shapes; higher ranks (internal only) go to the heap.
  const int64_t* data() const { return heap_ ? heap_.get() : inline_; }
  int64_t* data() { return heap_ ? heap_.get() : inline_; }
  void assign(const int64_t* dims, size_t n) {
    if (n > size_t(kMaxRank)) {
      if (!heap_ || size_t(rank_) < n) heap_ = std::make_unique<int64_t[]>(n);
    } else {
      heap_.reset();
    }
    rank_ = int(n);
    if (n > 0) std::memmove(data(), dims, n * sizeof(int64_t));  // <cstring>: lighter than <algorithm>
  }
  void take(Shape& other) {
    rank_ = other.rank_;
    if (other.heap_) heap_ = std::move(other.heap_);
    else {
      heap_.reset();
      if (rank_ > 0) std::memcpy(inline_, other.inline_, size_t(rank_) * sizeof(int64_t));
    }
    other.rank_ = 0;
  }

  int rank_ = 0;
  int64_t inline_[kMaxRank] = {};
  std::unique_ptr<int64_t[]> heap_;
};

// Prints str(): std::cout << x.shape() shows [2, 3].
std::ostream& operator<<(std::ostream& os, const Shape& shape);

// Throws naming `op` unless every dim is >= 0, the product of the non-zero dims fits int64 and
// so does its byte size with `element_bytes` per element (every node's shape is checked so).
void check_extent(const Shape& shape, size_t element_bytes, const char* op);
// Wraps a possibly negative dimension index into [0, rank); throws naming `op` when out of range.
int wrap_dim(int dim, int rank, const char* op);
// Broadcast two shapes (numpy rules); throws naming `op` and both shapes when incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// Several dims (axes) of a tensor, negative ones counting from the end: what every function that
// takes several dims takes (reductions, logsumexp, var/std, flip, permute's order). One dim
// converts (`sum(x, 1)`, as `argmax(x, 1)` takes one), and so does a braced list (`sum(x, {0, 2})`)
// or a vector of int or int64_t; empty means "every dim" for the reductions. Sizes (reshape,
// expand, repeat, pad) are int64_t lists or Shapes, never Axes. A bool does not convert
// (`sum(x, true)` would otherwise reduce dim 1).
class Axes {
 public:
  Axes() = default;
  Axes(int dim) : dims_{dim} {}                                // NOLINT: implicit on purpose
  Axes(std::initializer_list<int> dims) : dims_(dims) {}       // NOLINT
  Axes(std::vector<int> dims) : dims_(std::move(dims)) {}      // NOLINT
  Axes(const std::vector<int64_t>& dims) : dims_(dims.begin(), dims.end()) {}  // NOLINT
  Axes(bool) = delete;

  const std::vector<int>& vec() const { return dims_; }
  std::vector<int> take() && { return std::move(dims_); }  // the list, moved out
  operator const std::vector<int>&() const { return dims_; }  // NOLINT
  bool empty() const { return dims_.empty(); }
  size_t size() const { return dims_.size(); }
  int operator[](size_t i) const { return dims_[i]; }
  auto begin() const { return dims_.begin(); }
  auto end() const { return dims_.end(); }

 private:
  std::vector<int> dims_;
};

}  // namespace ember
