// Shape: the sizes of a tensor's dimensions, with helpers for element counts, contiguous
// strides, dimension wrapping and broadcasting.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <string>
#include <vector>

namespace ember {

inline constexpr int kMaxRank = 8;

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  int rank() const { return int(dims_.size()); }
  int64_t operator[](int i) const { return dims_[size_t(i)]; }
  int64_t& operator[](int i) { return dims_[size_t(i)]; }
  int64_t numel() const;  // throws if the product overflows int64
  const std::vector<int64_t>& dims() const { return dims_; }
  std::vector<int64_t> contiguous_strides() const;
  std::string str() const;  // "[2, 3]"

  auto begin() const { return dims_.begin(); }
  auto end() const { return dims_.end(); }
  friend bool operator==(const Shape&, const Shape&) = default;

 private:
  std::vector<int64_t> dims_;
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

}  // namespace ember
