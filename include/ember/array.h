// Array: the untyped tensor handle (dynamic rank, runtime dtype and device). Cheap to copy: it
// shares one immutable graph node. Ops (ember/ops.h) check their inputs at the call and return
// a new lazy Array; data is computed when it is read or eval() is called.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "ember/device.h"
#include "ember/dtype.h"
#include "ember/error.h"
#include "ember/shape.h"

namespace ember {

struct Node;  // internal graph node (src/graph/node.h)

// A C++ number used as an operand. It is "weakly typed": it adopts the tensor's dtype unless it
// belongs to a higher category (see promote_with_scalar).
struct Scalar {
  DTypeCategory category = DTypeCategory::Floating;
  double f = 0;   // the value as a double
  int64_t i = 0;  // the value as an integer (exact for integral scalars)

  template <class T>
    requires std::is_arithmetic_v<T>
  Scalar(T v)  // NOLINT: implicit on purpose, so `x + 1` works
      : category(scalar_category<T>()), f(double(v)), i(static_cast<int64_t>(v)) {}
};

struct TensorOptions {
  std::optional<DType> dtype;  // unset: f32 for Array functions, the kind's default for Tensor<D, K>
  Device device = Device::cpu();
};

class Array {
 public:
  Array() = default;
  explicit Array(std::shared_ptr<Node> node) : node_(std::move(node)) {}

  bool defined() const { return node_ != nullptr; }
  const Shape& shape() const;
  int rank() const { return shape().rank(); }
  int64_t numel() const { return shape().numel(); }
  int64_t size(int dim) const;  // negative dims count from the end
  DType dtype() const;
  Device device() const;

  // Computes the value (and everything it depends on) now. Returns *this for chaining.
  const Array& eval() const;
  bool is_evaluated() const;

  // Host copies. The element type converts like cast(); reading waits for the value.
  template <class T>
  std::vector<T> to_vector() const {
    if constexpr (std::is_same_v<T, bool>) {  // std::vector<bool> has no data()
      std::vector<uint8_t> bytes(static_cast<size_t>(numel()));
      read_host(DType::Bool, bytes.data());
      return std::vector<bool>(bytes.begin(), bytes.end());
    } else {
      std::vector<T> out(static_cast<size_t>(numel()));
      read_host(dtype_of<T>(), out.data());
      return out;
    }
  }
  template <class T>
  T item() const {
    check_single_element();
    T v{};
    read_host(dtype_of<T>(), &v);
    return v;
  }
  // Prints like PyTorch: "tensor([[1., 2.], [3., 4.]])".
  std::string str() const;

  const std::shared_ptr<Node>& node() const { return node_; }

 private:
  void read_host(DType as, void* dst) const;
  void check_single_element() const;
  std::shared_ptr<Node> node_;
};

std::ostream& operator<<(std::ostream& os, const Array& a);

// Realizes several arrays together (one scheduling pass).
void eval(const std::vector<Array>& arrays);

}  // namespace ember
