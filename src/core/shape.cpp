// Shape helpers: element counts, strides, dim wrapping and broadcasting.
#include "ember/shape.h"

#include <fmt/format.h>

#include <algorithm>
#include <ostream>

#include "ember/error.h"

namespace ember {

// Element counts are checked: a product that overflows int64 (zeros({1 << 62, 4}) once gave
// numel 0) is an error, never a wrapped count.
int64_t Shape::numel() const {
  int64_t n = 1;
  for (int64_t d : *this)
    if (__builtin_mul_overflow(n, d, &n))
      throw Error(fmt::format("shape {}: the element count overflows 64 bits", str()));
  return n;
}

std::vector<int64_t> Shape::contiguous_strides() const {
  std::vector<int64_t> s(static_cast<size_t>(rank_));
  int64_t acc = 1;
  for (int i = rank_; i-- > 0;) {
    s[size_t(i)] = acc;
    const int64_t d = (*this)[i];
    if (__builtin_mul_overflow(acc, d > 0 ? d : 1, &acc))
      throw Error(fmt::format("shape {}: the strides overflow 64 bits", str()));
  }
  return s;
}

void check_extent(const Shape& shape, size_t element_bytes, const char* op) {
  int64_t n = 1;  // the product of the non-zero dims: strides must fit even when a dim is 0
  for (int64_t d : shape) {
    if (d < 0) throw Error(fmt::format("{}: negative size in shape {}", op, shape.str()));
    if (d > 0 && __builtin_mul_overflow(n, d, &n))
      throw Error(fmt::format("{}: shape {} has too many elements (the product of its dims overflows 64 bits)", op,
                              shape.str()));
  }
  int64_t bytes;
  const bool empty = std::find(shape.begin(), shape.end(), 0) != shape.end();
  if (!empty && __builtin_mul_overflow(n, int64_t(element_bytes), &bytes))
    throw Error(fmt::format("{}: shape {} of {}-byte elements needs more than 2^63 bytes", op, shape.str(),
                            element_bytes));
}

std::string Shape::str() const { return fmt::format("[{}]", fmt::join(begin(), end(), ", ")); }

std::ostream& operator<<(std::ostream& os, const Shape& shape) { return os << shape.str(); }

int wrap_dim(int dim, int rank, const char* op) {
  int lo = rank == 0 ? -1 : -rank, hi = rank == 0 ? 0 : rank - 1;
  if (dim < lo || dim > hi)
    throw Error(fmt::format("{}: dim {} is out of range for a tensor of rank {} (expected {} to {})",
                            op, dim, rank, lo, hi));
  return dim < 0 ? dim + (rank == 0 ? 1 : rank) : dim;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  if (a == b) return a;
  int r = std::max(a.rank(), b.rank());
  std::vector<int64_t> heap;
  int64_t small[kMaxRank];
  int64_t* out = small;
  if (r > kMaxRank) {
    heap.resize(size_t(r));
    out = heap.data();
  }
  for (int i = 0; i < r; ++i) {
    int ia = a.rank() - r + i, ib = b.rank() - r + i;
    int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1)
      throw Error(fmt::format("{}: shapes {} and {} cannot be broadcast (dim {}: {} vs {})", op,
                              a.str(), b.str(), i - r, da, db));
    out[i] = da == 1 ? db : da;
  }
  return Shape(std::span<const int64_t>(out, size_t(r)));
}

}  // namespace ember
