// Tensor<D, K>: the typed facade over Array. The rank D is a compile-time constant and the kind
// K (Float, Int, Bool) says which dtypes the tensor may hold, so rank mistakes and kind mistakes
// (gelu of a bool tensor) fail to compile. Reductions keep the rank (as in Burn); only squeeze,
// unsqueeze, reshape, flatten and the whole-tensor reductions change it, where the code says so.
#pragma once

#include <array>
#include <initializer_list>
#include <ostream>
#include <type_traits>
#include <utility>
#include <vector>

#include "ember/autograd.h"
#include "ember/ops.h"

namespace ember {

// ---- kinds --------------------------------------------------------------------------------
struct Float {
  static constexpr DType default_dtype = DType::F32;
  static constexpr const char* name = "Float";
  static bool accepts(DType t) { return is_floating(t); }
};
struct Int {
  static constexpr DType default_dtype = DType::I64;
  static constexpr const char* name = "Int";
  static bool accepts(DType t) { return is_integral(t); }
};
struct Bool {
  static constexpr DType default_dtype = DType::Bool;
  static constexpr const char* name = "Bool";
  static bool accepts(DType t) { return t == DType::Bool; }
};

template <class K>
concept TensorKind = std::is_same_v<K, Float> || std::is_same_v<K, Int> || std::is_same_v<K, Bool>;

namespace detail {
// The `kinds` and `result` columns of ember/elementwise_ops.def, for a tensor of kind K.
template <class K> inline constexpr bool accepts_Any = true;
template <class K> inline constexpr bool accepts_Float = std::is_same_v<K, Float>;
template <class K> inline constexpr bool accepts_Int = std::is_same_v<K, Int>;
template <class K> inline constexpr bool accepts_Bool = std::is_same_v<K, Bool>;
template <class K> inline constexpr bool accepts_Numeric = !std::is_same_v<K, Bool>;
template <class K> inline constexpr bool accepts_IntBool = !std::is_same_v<K, Float>;
template <class K> using result_Same = K;
template <class K> using result_Bool = Bool;
}  // namespace detail

// The kind of a sum or product: bool values are counted as integers.
template <class K>
using SumKind = std::conditional_t<std::is_same_v<K, Bool>, Int, K>;
// The C++ element type that from_data takes for each kind.
template <class K>
using ElementOf = std::conditional_t<std::is_same_v<K, Float>, double,
                                     std::conditional_t<std::is_same_v<K, Int>, int64_t, bool>>;

// Exactly D sizes: `Dims<2>{4, 3}`. Passing another number of sizes does not compile.
template <int D>
struct Dims {
  std::array<int64_t, size_t(D)> v{};
  template <class... I>
    requires(sizeof...(I) == size_t(D) && (std::is_integral_v<I> && ...))
  Dims(I... sizes) : v{int64_t(sizes)...} {}  // NOLINT: implicit, so `{4, 3}` works
  Shape shape() const { return Shape(std::vector<int64_t>(v.begin(), v.end())); }
};

// Nested initializer lists of depth D, for from_data.
template <class T, int D>
struct NestedList {
  using type = std::initializer_list<typename NestedList<T, D - 1>::type>;
};
template <class T>
struct NestedList<T, 1> {
  using type = std::initializer_list<T>;
};
template <class T>
struct NestedList<T, 0> {  // rank 0 has no nested-list form (from_data needs D >= 1)
  using type = T;
};

// The rank of a broadcast result (numpy and PyTorch rules: the shorter shape is padded with
// leading size-1 dims), so Tensor<2> + Tensor<3> is a Tensor<3>.
template <int A, int B>
inline constexpr int broadcast_rank = A > B ? A : B;
// The rank of matmul's result (torch.matmul): a 1-D left operand is a row and a 1-D right
// operand a column, each removed afterwards; batch dims broadcast.
template <int A, int B>
inline constexpr int matmul_rank = A == 1 && B == 1 ? 0 : A == 1 ? B - 1 : B == 1 ? A - 1 : broadcast_rank<A, B>;

// Records where an operator was used, so errors from `a + b` name the user's line.
template <class T>
struct Located {
  const T& value;
  Loc loc{};
  Located(const T& v, Loc l = Loc::current()) : value(v), loc(l) {}  // NOLINT: implicit on purpose
};

namespace detail {
[[noreturn]] void kind_mismatch(const char* kind, int rank, const Array& a, Loc loc);
template <class T, int D>
void flatten_nested(const typename NestedList<T, D>::type& list, std::vector<int64_t>& shape, int depth,
                    std::vector<T>& out, Loc loc);
void check_nested_size(size_t got, int64_t expected, int depth, Loc loc);
}  // namespace detail

template <int D, TensorKind K = Float>
class Tensor {
  static_assert(D >= 0 && D <= kMaxRank, "rank must be between 0 and 8");

 public:
  using Kind = K;
  static constexpr int rank = D;

  Tensor() = default;
  // Wraps an Array; throws if its rank is not D or its dtype does not belong to kind K.
  explicit Tensor(Array a, Loc loc = Loc::current()) : a_(std::move(a)) {
    if (a_.defined() && (a_.rank() != D || !K::accepts(a_.dtype()))) detail::kind_mismatch(K::name, D, a_, loc);
  }

  // ---- creation ------------------------------------------------------------------------------
  static Tensor zeros(Dims<D> shape, TensorOptions opts = {}, Loc loc = Loc::current()) {
    return Tensor(ember::zeros(shape.shape(), kinded(opts), loc), loc);
  }
  static Tensor ones(Dims<D> shape, TensorOptions opts = {}, Loc loc = Loc::current()) {
    return Tensor(ember::ones(shape.shape(), kinded(opts), loc), loc);
  }
  static Tensor full(Dims<D> shape, Scalar value, TensorOptions opts = {}, Loc loc = Loc::current()) {
    return Tensor(ember::full(shape.shape(), value, kinded(opts), loc), loc);
  }
  static Tensor zeros_like(const Tensor& t, Loc loc = Loc::current()) {
    return Tensor(ember::zeros(t.shape(), {t.dtype(), t.device()}, loc), loc);
  }
  static Tensor ones_like(const Tensor& t, Loc loc = Loc::current()) {
    return Tensor(ember::ones(t.shape(), {t.dtype(), t.device()}, loc), loc);
  }
  // Standard normal / uniform [low, high) samples (Float tensors).
  static Tensor randn(Dims<D> shape, RandomOptions opts = {}, Loc loc = Loc::current())
    requires std::is_same_v<K, Float>
  {
    return Tensor(normal(shape.shape(), 0, 1, opts, loc), loc);
  }
  static Tensor rand(Dims<D> shape, RandomOptions opts = {}, Loc loc = Loc::current())
    requires std::is_same_v<K, Float>
  {
    return Tensor(uniform(shape.shape(), 0, 1, opts, loc), loc);
  }
  static Tensor random_uniform(Dims<D> shape, double low, double high, RandomOptions opts = {},
                               Loc loc = Loc::current())
    requires std::is_same_v<K, Float>
  {
    return Tensor(uniform(shape.shape(), low, high, opts, loc), loc);
  }
  static Tensor arange(Scalar start, Scalar end, Scalar step = 1, TensorOptions opts = {},
                       Loc loc = Loc::current())
    requires(D == 1 && !std::is_same_v<K, Bool>)
  {
    return Tensor(ember::arange(start, end, step, kinded(opts).dtype, opts.device, loc), loc);
  }
  // From nested lists: Tensor<2>::from_data({{1, 2}, {3, 4}}). Ragged lists throw.
  static Tensor from_data(typename NestedList<ElementOf<K>, D>::type data, TensorOptions opts = {},
                          Loc loc = Loc::current())
    requires(D >= 1)
  {
    std::vector<int64_t> shape(static_cast<size_t>(D), -1);
    std::vector<ElementOf<K>> flat;
    detail::flatten_nested<ElementOf<K>, D>(data, shape, 0, flat, loc);
    return from_vector(flat, Shape(shape), opts, loc);
  }
  // From a flat vector in row-major order.
  template <class T>
  static Tensor from_vector(const std::vector<T>& data, const Shape& shape, TensorOptions opts = {},
                            Loc loc = Loc::current()) {
    if (int64_t(data.size()) != shape.numel())
      throw Error(fmt_size_error(data.size(), shape, loc));
    return Tensor(ember::cast(ember::from_vector(data, shape, opts.device, loc), *kinded(opts).dtype, loc), loc);
  }

  // ---- metadata -------------------------------------------------------------------------------
  const Array& array() const { return a_; }
  bool defined() const { return a_.defined(); }
  const Shape& shape() const { return a_.shape(); }
  std::array<int64_t, size_t(D)> dims() const {
    std::array<int64_t, size_t(D)> d{};
    for (int i = 0; i < D; ++i) d[size_t(i)] = a_.shape()[i];
    return d;
  }
  int64_t size(int dim) const { return a_.size(dim); }
  int64_t numel() const { return a_.numel(); }
  DType dtype() const { return a_.dtype(); }
  Device device() const { return a_.device(); }

  // ---- autograd (see ember/autograd.h) ----------------------------------------------------
  // This tensor as a leaf of differentiation (Float tensors).
  Tensor require_grad(bool on = true) const
    requires std::is_same_v<K, Float>
  {
    return Tensor(a_.require_grad(on));
  }
  bool requires_grad() const { return a_.requires_grad(); }
  Tensor detach() const { return Tensor(a_.detach()); }
  Gradients backward(BackwardOptions opts = {}) const { return a_.backward(opts); }
  // This leaf's gradient (an undefined tensor if the pass did not reach it).
  Tensor grad(const Gradients& grads) const { return Tensor(a_.grad(grads)); }

  // A copy on another device.
  Tensor to(Device device, Loc loc = Loc::current()) const { return Tensor(to_device(a_, device, loc), loc); }

  // ---- evaluation and host access -------------------------------------------------------------
  const Tensor& eval() const {
    a_.eval();
    return *this;
  }
  template <class T = std::conditional_t<std::is_same_v<K, Float>, float, ElementOf<K>>>
  std::vector<T> to_vector() const {
    return a_.to_vector<T>();
  }
  template <class T = std::conditional_t<std::is_same_v<K, Float>, float, ElementOf<K>>>
  T item() const {
    return a_.item<T>();
  }
  std::string str() const { return a_.str(); }
  friend std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.a_; }

  // ---- dtype and kind -------------------------------------------------------------------------
  Tensor to_dtype(DType dtype, Loc loc = Loc::current()) const { return Tensor(ember::cast(a_, dtype, loc), loc); }
  Tensor<D, Float> to_float(DType dtype = DType::F32, Loc loc = Loc::current()) const {
    return Tensor<D, Float>(ember::cast(a_, dtype, loc), loc);
  }
  Tensor<D, Int> to_int(DType dtype = DType::I64, Loc loc = Loc::current()) const {
    return Tensor<D, Int>(ember::cast(a_, dtype, loc), loc);
  }
  Tensor<D, Bool> to_bool(Loc loc = Loc::current()) const { return Tensor<D, Bool>(ember::cast(a_, DType::Bool, loc), loc); }

  // ---- arithmetic (numeric kinds) -------------------------------------------------------------
#define EMBER_TENSOR_BINARY(op_, fn)                                                                       \
  friend Tensor operator op_(Located<Tensor> a, const Tensor& b)                                          \
    requires(!std::is_same_v<K, Bool>)                                                                    \
  {                                                                                                        \
    return Tensor(ember::fn(a.value.a_, b.a_, a.loc), a.loc);                                             \
  }                                                                                                        \
  template <int D2>                                                                                        \
    requires(D2 != D && !std::is_same_v<K, Bool>)                                                          \
  friend Tensor<broadcast_rank<D, D2>, K> operator op_(Located<Tensor> a, const Tensor<D2, K>& b) {      \
    return Tensor<broadcast_rank<D, D2>, K>(ember::fn(a.value.a_, b.array(), a.loc), a.loc);              \
  }                                                                                                        \
  friend Tensor operator op_(Located<Tensor> a, Scalar b)                                                 \
    requires(!std::is_same_v<K, Bool>)                                                                    \
  {                                                                                                        \
    return Tensor(ember::fn(a.value.a_, b, a.loc), a.loc);                                                \
  }                                                                                                        \
  friend Tensor operator op_(Scalar a, Located<Tensor> b)                                                 \
    requires(!std::is_same_v<K, Bool>)                                                                    \
  {                                                                                                        \
    return Tensor(ember::fn(a, b.value.a_, b.loc), b.loc);                                                \
  }
  EMBER_TENSOR_BINARY(+, add)
  EMBER_TENSOR_BINARY(-, sub)
  EMBER_TENSOR_BINARY(*, mul)
#undef EMBER_TENSOR_BINARY
  // Division: Float tensors only (integer true division would change the kind; use floor_div).
  friend Tensor operator/(Located<Tensor> a, const Tensor& b)
    requires std::is_same_v<K, Float>
  {
    return Tensor(ember::div(a.value.a_, b.a_, a.loc), a.loc);
  }
  template <int D2>
    requires(D2 != D && std::is_same_v<K, Float>)
  friend Tensor<broadcast_rank<D, D2>, K> operator/(Located<Tensor> a, const Tensor<D2, K>& b) {
    return Tensor<broadcast_rank<D, D2>, K>(ember::div(a.value.a_, b.array(), a.loc), a.loc);
  }
  friend Tensor operator/(Located<Tensor> a, Scalar b)
    requires std::is_same_v<K, Float>
  {
    return Tensor(ember::div(a.value.a_, b, a.loc), a.loc);
  }
  friend Tensor operator/(Scalar a, Located<Tensor> b)
    requires std::is_same_v<K, Float>
  {
    return Tensor(ember::div(a, b.value.a_, b.loc), b.loc);
  }
  friend Tensor operator-(Located<Tensor> a)
    requires(!std::is_same_v<K, Bool>)
  {
    return Tensor(ember::neg(a.value.a_, a.loc), a.loc);
  }
  // In place: b must broadcast to this tensor's shape, so its rank is at most D.
  template <int D2>
    requires(D2 <= D)
  Tensor& operator+=(const Tensor<D2, K>& b) {
    return *this = *this + b;
  }
  template <int D2>
    requires(D2 <= D)
  Tensor& operator-=(const Tensor<D2, K>& b) {
    return *this = *this - b;
  }
  template <int D2>
    requires(D2 <= D)
  Tensor& operator*=(const Tensor<D2, K>& b) {
    return *this = *this * b;
  }
  Tensor& operator+=(Scalar b) { return *this = *this + b; }
  Tensor& operator-=(Scalar b) { return *this = *this - b; }
  Tensor& operator*=(Scalar b) { return *this = *this * b; }

  template <int D2>
  Tensor<broadcast_rank<D, D2>, K> max_pair(const Tensor<D2, K>& b, Loc loc = Loc::current()) const {
    return Tensor<broadcast_rank<D, D2>, K>(ember::maximum(a_, b.array(), loc), loc);
  }
  template <int D2>
  Tensor<broadcast_rank<D, D2>, K> min_pair(const Tensor<D2, K>& b, Loc loc = Loc::current()) const {
    return Tensor<broadcast_rank<D, D2>, K>(ember::minimum(a_, b.array(), loc), loc);
  }
  Tensor clamp(Scalar lo, Scalar hi, Loc loc = Loc::current()) const { return Tensor(ember::clamp(a_, lo, hi, loc), loc); }
  Tensor clamp_min(Scalar lo, Loc loc = Loc::current()) const { return Tensor(ember::clamp(a_, lo, std::nullopt, loc), loc); }
  Tensor clamp_max(Scalar hi, Loc loc = Loc::current()) const { return Tensor(ember::clamp(a_, std::nullopt, hi, loc), loc); }

  // ---- the elementwise op table (ember/elementwise_ops.def) --------------------------------------
  // t.fn() for unary ops; t.fn(other) (any rank, broadcast) and t.fn(scalar) for binary ones. The
  // table's `kinds` column says which kinds have the op (t.exp() of an Int tensor does not
  // compile), its `result` column the result's kind (comparisons and predicates: Bool).
#define EMBER_TENSOR_UNARY_Plain(fn, kinds, result)                        \
  Tensor<D, detail::result_##result<K>> fn(Loc loc = Loc::current()) const \
    requires(detail::accepts_##kinds<K>)                                   \
  {                                                                        \
    return Tensor<D, detail::result_##result<K>>(ember::fn(a_, loc), loc); \
  }
#define EMBER_TENSOR_UNARY_Rounding(fn, kinds, result) EMBER_TENSOR_UNARY_Plain(fn, kinds, result)
#define EMBER_TENSOR_UNARY_Params(fn, kinds, result)  // with parameters: written below
#define EMBER_TENSOR_UNARY_Cast(fn, kinds, result)
#define EMBER_UNARY_OP(Name, fn, rule, form, kinds, result, ...) EMBER_TENSOR_UNARY_##form(fn, kinds, result)
#define EMBER_BINARY_OP(Name, fn, rule, kinds, result, ...)                                                    \
  template <int D2>                                                                                          \
    requires(detail::accepts_##kinds<K>)                                                                     \
  Tensor<broadcast_rank<D, D2>, detail::result_##result<K>> fn(const Tensor<D2, K>& b, Loc loc = Loc::current()) \
      const {                                                                                                \
    return Tensor<broadcast_rank<D, D2>, detail::result_##result<K>>(ember::fn(a_, b.array(), loc), loc);    \
  }                                                                                                          \
  Tensor<D, detail::result_##result<K>> fn(Scalar b, Loc loc = Loc::current()) const                       \
    requires(detail::accepts_##kinds<K>)                                                                     \
  {                                                                                                          \
    return Tensor<D, detail::result_##result<K>>(ember::fn(a_, b, loc), loc);                               \
  }
#include "ember/elementwise_ops.def"
#undef EMBER_TENSOR_UNARY_Plain
#undef EMBER_TENSOR_UNARY_Rounding
#undef EMBER_TENSOR_UNARY_Params
#undef EMBER_TENSOR_UNARY_Cast
  // The table's ops with parameters (form Params) and cast (same kind: the dtype must belong to K).
  Tensor softplus(double beta = 1, double threshold = 20, Loc loc = Loc::current()) const
    requires std::is_same_v<K, Float>
  {
    return Tensor(ember::softplus(a_, beta, threshold, loc), loc);
  }
  Tensor leaky_relu(double slope = 0.01, Loc loc = Loc::current()) const
    requires std::is_same_v<K, Float>
  {
    return Tensor(ember::leaky_relu(a_, slope, loc), loc);
  }
  Tensor elu(double alpha = 1, Loc loc = Loc::current()) const
    requires std::is_same_v<K, Float>
  {
    return Tensor(ember::elu(a_, alpha, loc), loc);
  }
  Tensor cast(DType dtype, Loc loc = Loc::current()) const { return Tensor(ember::cast(a_, dtype, loc), loc); }

  // ---- comparisons under Burn's names ---------------------------------------------------------
#define EMBER_TENSOR_COMPARE(name, fn)                                                                      \
  template <int D2>                                                                                          \
  Tensor<broadcast_rank<D, D2>, Bool> name(const Tensor<D2, K>& b, Loc loc = Loc::current()) const {        \
    return Tensor<broadcast_rank<D, D2>, Bool>(ember::fn(a_, b.array(), loc), loc);                         \
  }                                                                                                          \
  Tensor<D, Bool> name(Scalar b, Loc loc = Loc::current()) const { return Tensor<D, Bool>(ember::fn(a_, b, loc), loc); }
  EMBER_TENSOR_COMPARE(equal, eq)
  EMBER_TENSOR_COMPARE(not_equal, ne)
  EMBER_TENSOR_COMPARE(greater, gt)
  EMBER_TENSOR_COMPARE(greater_equal, ge)
  EMBER_TENSOR_COMPARE(lower, lt)
  EMBER_TENSOR_COMPARE(lower_equal, le)
#undef EMBER_TENSOR_COMPARE
  // Where mask is true take `other`, else this (Burn's mask_where / mask_fill).
  Tensor mask_where(const Tensor<D, Bool>& mask, const Tensor& other, Loc loc = Loc::current()) const {
    return Tensor(where(mask.array(), other.a_, a_, loc), loc);
  }
  Tensor mask_fill(const Tensor<D, Bool>& mask, Scalar value, Loc loc = Loc::current()) const {
    return Tensor(where(mask.array(), value, a_, loc), loc);
  }

  // ---- reductions: *_dim keeps the rank; the whole-tensor forms give one element --------------
  Tensor<1, SumKind<K>> sum(Loc loc = Loc::current()) const { return whole<SumKind<K>>(ember::sum(a_, {}, false, loc), loc); }
  Tensor<D, SumKind<K>> sum_dim(int dim, Loc loc = Loc::current()) const {
    return Tensor<D, SumKind<K>>(ember::sum(a_, {dim}, true, loc), loc);
  }
  Tensor<D, SumKind<K>> sum_dims(Axes dims, Loc loc = Loc::current()) const {
    return Tensor<D, SumKind<K>>(ember::sum(a_, std::move(dims), true, loc), loc);
  }
  Tensor<1, SumKind<K>> prod(Loc loc = Loc::current()) const { return whole<SumKind<K>>(ember::prod(a_, {}, false, loc), loc); }
  Tensor<D, SumKind<K>> prod_dim(int dim, Loc loc = Loc::current()) const {
    return Tensor<D, SumKind<K>>(ember::prod(a_, {dim}, true, loc), loc);
  }
  Tensor<1, K> mean(Loc loc = Loc::current()) const
    requires std::is_same_v<K, Float>
  {
    return whole<K>(ember::mean(a_, {}, false, loc), loc);
  }
  Tensor mean_dim(int dim, Loc loc = Loc::current()) const
    requires std::is_same_v<K, Float>
  {
    return Tensor(ember::mean(a_, {dim}, true, loc), loc);
  }
  Tensor mean_dims(Axes dims, Loc loc = Loc::current()) const
    requires std::is_same_v<K, Float>
  {
    return Tensor(ember::mean(a_, std::move(dims), true, loc), loc);
  }
  Tensor<1, K> max(Loc loc = Loc::current()) const { return whole<K>(ember::max(a_, {}, false, loc), loc); }
  Tensor max_dim(int dim, Loc loc = Loc::current()) const { return Tensor(ember::max(a_, {dim}, true, loc), loc); }
  Tensor<1, K> min(Loc loc = Loc::current()) const { return whole<K>(ember::min(a_, {}, false, loc), loc); }
  Tensor min_dim(int dim, Loc loc = Loc::current()) const { return Tensor(ember::min(a_, {dim}, true, loc), loc); }
  Tensor<D, Int> argmax(int dim, Loc loc = Loc::current()) const {
    return Tensor<D, Int>(ember::argmax(a_, dim, true, loc), loc);
  }
  Tensor<D, Int> argmin(int dim, Loc loc = Loc::current()) const {
    return Tensor<D, Int>(ember::argmin(a_, dim, true, loc), loc);
  }
  // The extreme along dim (kept as size 1) and its index (Burn's max_dim_with_indices).
  std::pair<Tensor, Tensor<D, Int>> max_dim_with_indices(int dim, Loc loc = Loc::current()) const {
    ValuesIndices r = max_with_indices(a_, dim, true, loc);
    return {Tensor(r.values, loc), Tensor<D, Int>(r.indices, loc)};
  }
  std::pair<Tensor, Tensor<D, Int>> min_dim_with_indices(int dim, Loc loc = Loc::current()) const {
    ValuesIndices r = min_with_indices(a_, dim, true, loc);
    return {Tensor(r.values, loc), Tensor<D, Int>(r.indices, loc)};
  }
  Tensor<1, Bool> any(Loc loc = Loc::current()) const { return whole<Bool>(ember::any(a_, {}, false, loc), loc); }
  Tensor<1, Bool> all(Loc loc = Loc::current()) const { return whole<Bool>(ember::all(a_, {}, false, loc), loc); }
  Tensor<D, Bool> any_dim(int dim, Loc loc = Loc::current()) const { return Tensor<D, Bool>(ember::any(a_, {dim}, true, loc), loc); }
  Tensor<D, Bool> all_dim(int dim, Loc loc = Loc::current()) const { return Tensor<D, Bool>(ember::all(a_, {dim}, true, loc), loc); }
  // Variance / standard deviation along dim (kept as size 1), dividing by n - correction.
  Tensor var_dim(int dim, int64_t correction = 1, Loc loc = Loc::current()) const
    requires std::is_same_v<K, Float>
  {
    return Tensor(ember::var(a_, {dim}, correction, true, loc), loc);
  }
  Tensor std_dim(int dim, int64_t correction = 1, Loc loc = Loc::current()) const
    requires std::is_same_v<K, Float>
  {
    return Tensor(ember::std(a_, {dim}, correction, true, loc), loc);
  }
  Tensor<1, K> var(int64_t correction = 1, Loc loc = Loc::current()) const
    requires std::is_same_v<K, Float>
  {
    return whole<K>(ember::var(a_, {}, correction, false, loc), loc);
  }

  // ---- movement: views ------------------------------------------------------------------------
  template <int N>
  Tensor<N, K> reshape(Dims<N> shape, Loc loc = Loc::current()) const {
    return Tensor<N, K>(ember::reshape(a_, shape.shape(), loc), loc);
  }
  template <int Dim>
    requires(D > 0)
  Tensor<D - 1, K> squeeze(Loc loc = Loc::current()) const {
    static_assert(Dim >= -D && Dim < D, "squeeze: dim out of range for this rank");
    return Tensor<D - 1, K>(ember::squeeze(a_, Dim, loc), loc);
  }
  template <int Dim>
    requires(D < kMaxRank)
  Tensor<D + 1, K> unsqueeze(Loc loc = Loc::current()) const {
    static_assert(Dim >= -(D + 1) && Dim <= D, "unsqueeze: dim out of range for this rank");
    return Tensor<D + 1, K>(ember::unsqueeze(a_, Dim, loc), loc);
  }
  // Flattens dims start_dim .. start_dim + (D - N) into one, giving rank N.
  template <int N>
    requires(N >= 1 && N <= D)
  Tensor<N, K> flatten(int start_dim = 0, Loc loc = Loc::current()) const {
    return Tensor<N, K>(ember::flatten(a_, start_dim, start_dim + (D - N), loc), loc);
  }
  Tensor permute(std::array<int, size_t(D)> dims, Loc loc = Loc::current()) const {
    return Tensor(ember::permute(a_, std::vector<int>(dims.begin(), dims.end()), loc), loc);
  }
  // Swaps the last two dims.
  Tensor transpose(Loc loc = Loc::current()) const
    requires(D >= 2)
  {
    return Tensor(ember::transpose(a_, -2, -1, loc), loc);
  }
  Tensor swap_dims(int dim0, int dim1, Loc loc = Loc::current()) const {
    return Tensor(ember::transpose(a_, dim0, dim1, loc), loc);
  }
  Tensor slice(int dim, int64_t start, int64_t end, int64_t step = 1, Loc loc = Loc::current()) const {
    return Tensor(ember::slice(a_, dim, start, end, step, loc), loc);
  }
  Tensor narrow(int dim, int64_t start, int64_t length, Loc loc = Loc::current()) const {
    return Tensor(ember::slice(a_, dim, start, start + length, 1, loc), loc);
  }
  template <int N>
    requires(N >= D)
  Tensor<N, K> expand(Dims<N> shape, Loc loc = Loc::current()) const {
    return Tensor<N, K>(ember::expand(a_, shape.shape(), loc), loc);
  }
  Tensor contiguous(Loc loc = Loc::current()) const { return Tensor(ember::contiguous(a_, loc), loc); }
  static Tensor cat(const std::vector<Tensor>& xs, int dim, Loc loc = Loc::current()) {
    std::vector<Array> as;
    for (const Tensor& t : xs) as.push_back(t.a_);
    return Tensor(ember::cat(as, dim, loc), loc);
  }

  // ---- indexing -------------------------------------------------------------------------------
  Tensor gather(int dim, const Tensor<D, Int>& index, Loc loc = Loc::current()) const {
    return Tensor(ember::gather(a_, dim, index.array(), loc), loc);
  }
  // The entries `index` along dim (index_select).
  Tensor select(int dim, const Tensor<1, Int>& index, Loc loc = Loc::current()) const {
    return Tensor(index_select(a_, dim, index.array(), loc), loc);
  }

  // x with src written at index along dim (repeated indices: the last wins).
  Tensor scatter(int dim, const Tensor<D, Int>& index, const Tensor& src, Loc loc = Loc::current()) const {
    return Tensor(ember::scatter(a_, dim, index.array(), src.a_, loc), loc);
  }
  // x with slice(dim, start, end, step) replaced by value (broadcast to the region).
  Tensor slice_assign(int dim, int64_t start, int64_t end, const Tensor& value, int64_t step = 1,
                      Loc loc = Loc::current()) const {
    return Tensor(ember::slice_assign(a_, dim, start, end, step, value.a_, loc), loc);
  }
  // The entry `index` of dim, which is removed.
  Tensor<D - 1, K> select_index(int dim, int64_t index, Loc loc = Loc::current()) const
    requires(D >= 1)
  {
    return Tensor<D - 1, K>(ember::select(a_, dim, index, loc), loc);
  }
  // Elements of the flattened tensor at index (any rank N).
  template <int N>
  Tensor<N, K> take(const Tensor<N, Int>& index, Loc loc = Loc::current()) const {
    return Tensor<N, K>(ember::take(a_, index.array(), loc), loc);
  }
  // Data-dependent shapes (these synchronize).
  Tensor<1, K> masked_select(const Tensor<D, Bool>& mask, Loc loc = Loc::current()) const {
    return Tensor<1, K>(ember::masked_select(a_, mask.array(), loc), loc);
  }
  Tensor<2, Int> nonzero(Loc loc = Loc::current()) const { return Tensor<2, Int>(ember::nonzero(a_, loc), loc); }

  // ---- more movement ------------------------------------------------------------------------
  Tensor movedim(int source, int destination, Loc loc = Loc::current()) const {
    return Tensor(ember::movedim(a_, source, destination, loc), loc);
  }
  Tensor flip(Axes dims, Loc loc = Loc::current()) const { return Tensor(ember::flip(a_, std::move(dims), loc), loc); }
  Tensor roll(int64_t shift, int dim, Loc loc = Loc::current()) const { return Tensor(ember::roll(a_, shift, dim, loc), loc); }
  // Joins tensors of one shape along a new dim: rank D + 1.
  static Tensor<D + 1, K> stack(const std::vector<Tensor>& xs, int dim = 0, Loc loc = Loc::current())
    requires(D < kMaxRank)
  {
    std::vector<Array> as;
    for (const Tensor& t : xs) as.push_back(t.a_);
    return Tensor<D + 1, K>(ember::stack(as, dim, loc), loc);
  }
  std::vector<Tensor> split(int64_t size, int dim = 0, Loc loc = Loc::current()) const {
    return wrap_all(ember::split(a_, size, dim, loc), loc);
  }
  std::vector<Tensor> split_sizes(const std::vector<int64_t>& sizes, int dim = 0, Loc loc = Loc::current()) const {
    return wrap_all(ember::split(a_, sizes, dim, loc), loc);
  }
  std::vector<Tensor> chunk(int64_t chunks, int dim = 0, Loc loc = Loc::current()) const {
    return wrap_all(ember::chunk(a_, chunks, dim, loc), loc);
  }
  // Each dim repeated repeats[d] times (same rank; Burn's repeat).
  Tensor repeat(std::array<int64_t, size_t(D)> repeats, Loc loc = Loc::current()) const {
    return Tensor(ember::repeat(a_, std::vector<int64_t>(repeats.begin(), repeats.end()), loc), loc);
  }
  // (before, after) pairs from the last dim, as torch.nn.functional.pad.
  Tensor pad(const std::vector<int64_t>& pads, PadMode mode = PadMode::Constant, Scalar value = 0,
             Loc loc = Loc::current()) const {
    return Tensor(ember::pad(a_, pads, mode, value, loc), loc);
  }
  Tensor tril(int64_t diagonal = 0, Loc loc = Loc::current()) const
    requires(D >= 2)
  {
    return Tensor(ember::tril(a_, diagonal, loc), loc);
  }
  Tensor triu(int64_t diagonal = 0, Loc loc = Loc::current()) const
    requires(D >= 2)
  {
    return Tensor(ember::triu(a_, diagonal, loc), loc);
  }

  // ---- more creation -------------------------------------------------------------------------
  static Tensor full_like(const Tensor& t, Scalar value, Loc loc = Loc::current()) {
    return Tensor(ember::full_like(t.a_, value, std::nullopt, loc), loc);
  }
  static Tensor linspace(Scalar start, Scalar end, int64_t steps, TensorOptions opts = {}, Loc loc = Loc::current())
    requires(D == 1 && !std::is_same_v<K, Bool>)
  {
    return Tensor(ember::linspace(start, end, steps, kinded(opts), loc), loc);
  }
  static Tensor eye(int64_t n, TensorOptions opts = {}, Loc loc = Loc::current())
    requires(D == 2)
  {
    return Tensor(ember::eye(n, std::nullopt, kinded(opts), loc), loc);
  }
  static Tensor randint(int64_t low, int64_t high, Dims<D> shape, RandintOptions opts = {}, Loc loc = Loc::current())
    requires std::is_same_v<K, Int>
  {
    return Tensor(ember::randint(low, high, shape.shape(), opts, loc), loc);
  }
  static Tensor randperm(int64_t n, RandintOptions opts = {}, Loc loc = Loc::current())
    requires(D == 1 && std::is_same_v<K, Int>)
  {
    return Tensor(ember::randperm(n, opts, loc), loc);
  }
  // One-hot encoding: rank D + 1 (Int tensors of class indices).
  Tensor<D + 1, Int> one_hot(int64_t num_classes, Loc loc = Loc::current()) const
    requires(std::is_same_v<K, Int> && D < kMaxRank)
  {
    return Tensor<D + 1, Int>(ember::one_hot(a_, num_classes, std::nullopt, loc), loc);
  }

  // ---- contraction ----------------------------------------------------------------------------
  Tensor<0, K> dot(const Tensor& b, Loc loc = Loc::current()) const
    requires(D == 1 && !std::is_same_v<K, Bool>)
  {
    return Tensor<0, K>(ember::dot(a_, b.a_, loc), loc);
  }
  Tensor<2, K> outer(const Tensor& b, Loc loc = Loc::current()) const
    requires(D == 1 && !std::is_same_v<K, Bool>)
  {
    return Tensor<2, K>(ember::outer(a_, b.a_, loc), loc);
  }
  Tensor<1, K> mv(const Tensor<1, K>& v, Loc loc = Loc::current()) const
    requires(D == 2 && !std::is_same_v<K, Bool>)
  {
    return Tensor<1, K>(ember::mv(a_, v.array(), loc), loc);
  }
  Tensor bmm(const Tensor& b, Loc loc = Loc::current()) const
    requires(D == 3 && !std::is_same_v<K, Bool>)
  {
    return Tensor(ember::bmm(a_, b.a_, loc), loc);
  }
  // Matrix product as torch.matmul: over the last two dims, batch dims broadcast (a [3, 4] by
  // b [2, 4, 5] is [2, 3, 5]); a 1-D operand is a row (left) or column (right), then removed.
  template <int D2>
    requires(D >= 1 && D2 >= 1 && !std::is_same_v<K, Bool>)
  Tensor<matmul_rank<D, D2>, K> matmul(const Tensor<D2, K>& b, Loc loc = Loc::current()) const {
    return Tensor<matmul_rank<D, D2>, K>(ember::matmul(a_, b.array(), loc), loc);
  }

  // ---- library ops (ember/ops_library.h): convolution, pooling, sorting, scans -----------------
  // x [N, C, H, W] with weight [O, C / groups, KH, KW] (and bias [O]).
  Tensor conv2d(const Tensor<4, Float>& weight, Conv2dOptions opts = {}, Loc loc = Loc::current()) const
    requires(D == 4 && std::is_same_v<K, Float>)
  {
    return Tensor(ember::conv2d(a_, weight.array(), opts, loc), loc);
  }
  Tensor conv2d(const Tensor<4, Float>& weight, const Tensor<1, Float>& bias, Conv2dOptions opts = {},
                Loc loc = Loc::current()) const
    requires(D == 4 && std::is_same_v<K, Float>)
  {
    return Tensor(ember::conv2d(a_, weight.array(), bias.array(), opts, loc), loc);
  }
  // x [N, C, L] with weight [O, C / groups, K] (and bias [O]).
  Tensor conv1d(const Tensor<3, Float>& weight, Conv1dOptions opts = {}, Loc loc = Loc::current()) const
    requires(D == 3 && std::is_same_v<K, Float>)
  {
    return Tensor(ember::conv1d(a_, weight.array(), opts, loc), loc);
  }
  Tensor conv1d(const Tensor<3, Float>& weight, const Tensor<1, Float>& bias, Conv1dOptions opts = {},
                Loc loc = Loc::current()) const
    requires(D == 3 && std::is_same_v<K, Float>)
  {
    return Tensor(ember::conv1d(a_, weight.array(), bias.array(), opts, loc), loc);
  }
  // [N, C, H, W] or unbatched [C, H, W].
  Tensor max_pool2d(Pool2dOptions opts, Loc loc = Loc::current()) const
    requires((D == 3 || D == 4) && std::is_same_v<K, Float>)
  {
    return Tensor(ember::max_pool2d(a_, opts, loc), loc);
  }
  Tensor avg_pool2d(Pool2dOptions opts, Loc loc = Loc::current()) const
    requires((D == 3 || D == 4) && std::is_same_v<K, Float>)
  {
    return Tensor(ember::avg_pool2d(a_, opts, loc), loc);
  }
  // PyTorch's shorthand: x.max_pool2d(2) is {.kernel = 2} (stride = kernel).
  Tensor max_pool2d(int64_t kernel, Loc loc = Loc::current()) const
    requires((D == 3 || D == 4) && std::is_same_v<K, Float>)
  {
    return max_pool2d(Pool2dOptions{.kernel = kernel}, loc);
  }
  Tensor avg_pool2d(int64_t kernel, Loc loc = Loc::current()) const
    requires((D == 3 || D == 4) && std::is_same_v<K, Float>)
  {
    return avg_pool2d(Pool2dOptions{.kernel = kernel}, loc);
  }
  Tensor adaptive_avg_pool2d(IntPair output_size, Loc loc = Loc::current()) const
    requires((D == 3 || D == 4) && std::is_same_v<K, Float>)
  {
    return Tensor(ember::adaptive_avg_pool2d(a_, output_size, loc), loc);
  }
  // [N, C, L] or unbatched [C, L].
  Tensor max_pool1d(Pool1dOptions opts, Loc loc = Loc::current()) const
    requires((D == 2 || D == 3) && std::is_same_v<K, Float>)
  {
    return Tensor(ember::max_pool1d(a_, opts, loc), loc);
  }
  Tensor avg_pool1d(Pool1dOptions opts, Loc loc = Loc::current()) const
    requires((D == 2 || D == 3) && std::is_same_v<K, Float>)
  {
    return Tensor(ember::avg_pool1d(a_, opts, loc), loc);
  }
  // Values and i64 indices: `auto [values, indices] = x.sort(1);`
  std::pair<Tensor, Tensor<D, Int>> sort(int dim = -1, bool descending = false, Loc loc = Loc::current()) const {
    ValuesIndices r = ember::sort(a_, dim, descending, loc);
    return {Tensor(r.values, loc), Tensor<D, Int>(r.indices, loc)};
  }
  Tensor<D, Int> argsort(int dim = -1, bool descending = false, Loc loc = Loc::current()) const {
    return Tensor<D, Int>(ember::argsort(a_, dim, descending, loc), loc);
  }
  std::pair<Tensor, Tensor<D, Int>> topk(int64_t k, int dim = -1, bool largest = true, Loc loc = Loc::current()) const {
    ValuesIndices r = ember::topk(a_, k, dim, largest, true, loc);
    return {Tensor(r.values, loc), Tensor<D, Int>(r.indices, loc)};
  }
  Tensor<D, SumKind<K>> cumsum(int dim, Loc loc = Loc::current()) const {
    return Tensor<D, SumKind<K>>(ember::cumsum(a_, dim, loc), loc);
  }
  Tensor<D, SumKind<K>> cumprod(int dim, Loc loc = Loc::current()) const {
    return Tensor<D, SumKind<K>>(ember::cumprod(a_, dim, loc), loc);
  }
  std::pair<Tensor, Tensor<D, Int>> cummax(int dim, Loc loc = Loc::current()) const {
    ValuesIndices r = ember::cummax(a_, dim, loc);
    return {Tensor(r.values, loc), Tensor<D, Int>(r.indices, loc)};
  }
  std::pair<Tensor, Tensor<D, Int>> cummin(int dim, Loc loc = Loc::current()) const {
    ValuesIndices r = ember::cummin(a_, dim, loc);
    return {Tensor(r.values, loc), Tensor<D, Int>(r.indices, loc)};
  }

 private:
  static TensorOptions kinded(TensorOptions opts) {
    if (!opts.dtype) opts.dtype = K::default_dtype;
    return opts;
  }
  template <class K2>
  static Tensor<1, K2> whole(Array a, Loc loc) {
    return Tensor<1, K2>(ember::reshape(a, Shape{1}, loc), loc);
  }
  static std::string fmt_size_error(size_t got, const Shape& shape, Loc loc);
  static std::vector<Tensor> wrap_all(const std::vector<Array>& as, Loc loc) {
    std::vector<Tensor> out;
    for (const Array& a : as) out.push_back(Tensor(a, loc));
    return out;
  }

  Array a_;
};

// ---- free functions in the style of the API sketch --------------------------------------------
// The op table as free functions: fn(t) for unary ops; fn(a, b) (any ranks), fn(a, scalar) and
// fn(scalar, a) for binary ones, with the kinds and result kinds of the members above.
#define EMBER_TENSOR_FREE_UNARY_Plain(fn, kinds, result)                                   \
  template <int D, class K>                                                                 \
    requires(detail::accepts_##kinds<K>)                                                    \
  Tensor<D, detail::result_##result<K>> fn(const Tensor<D, K>& x, Loc loc = Loc::current()) { \
    return x.fn(loc);                                                                       \
  }
#define EMBER_TENSOR_FREE_UNARY_Rounding(fn, kinds, result) EMBER_TENSOR_FREE_UNARY_Plain(fn, kinds, result)
#define EMBER_TENSOR_FREE_UNARY_Params(fn, kinds, result)  // written below
#define EMBER_TENSOR_FREE_UNARY_Cast(fn, kinds, result)
#define EMBER_UNARY_OP(Name, fn, rule, form, kinds, result, ...) EMBER_TENSOR_FREE_UNARY_##form(fn, kinds, result)
#define EMBER_BINARY_OP(Name, fn, rule, kinds, result, ...)                                                  \
  template <int DA, int DB, class K>                                                                       \
    requires(detail::accepts_##kinds<K>)                                                                   \
  Tensor<broadcast_rank<DA, DB>, detail::result_##result<K>> fn(const Tensor<DA, K>& a, const Tensor<DB, K>& b, \
                                                                 Loc loc = Loc::current()) {               \
    return a.fn(b, loc);                                                                                   \
  }                                                                                                        \
  template <int D, class K>                                                                                \
    requires(detail::accepts_##kinds<K>)                                                                   \
  Tensor<D, detail::result_##result<K>> fn(const Tensor<D, K>& a, Scalar b, Loc loc = Loc::current()) {  \
    return a.fn(b, loc);                                                                                   \
  }                                                                                                        \
  template <int D, class K>                                                                                \
    requires(detail::accepts_##kinds<K>)                                                                   \
  Tensor<D, detail::result_##result<K>> fn(Scalar a, const Tensor<D, K>& b, Loc loc = Loc::current()) {  \
    return Tensor<D, detail::result_##result<K>>(ember::fn(a, b.array(), loc), loc);                      \
  }
#include "ember/elementwise_ops.def"
#undef EMBER_TENSOR_FREE_UNARY_Plain
#undef EMBER_TENSOR_FREE_UNARY_Rounding
#undef EMBER_TENSOR_FREE_UNARY_Params
#undef EMBER_TENSOR_FREE_UNARY_Cast
template <int D>
Tensor<D, Float> softplus(const Tensor<D, Float>& x, double beta = 1, double threshold = 20, Loc loc = Loc::current()) {
  return x.softplus(beta, threshold, loc);
}
template <int D>
Tensor<D, Float> leaky_relu(const Tensor<D, Float>& x, double slope = 0.01, Loc loc = Loc::current()) {
  return x.leaky_relu(slope, loc);
}
template <int D>
Tensor<D, Float> elu(const Tensor<D, Float>& x, double alpha = 1, Loc loc = Loc::current()) {
  return x.elu(alpha, loc);
}
template <int D, class K>
Tensor<D, K> cast(const Tensor<D, K>& x, DType dtype, Loc loc = Loc::current()) {
  return x.cast(dtype, loc);
}
// cond, a and b broadcast together (any ranks).
template <int DC, int DA, int DB, class K>
Tensor<broadcast_rank<DC, broadcast_rank<DA, DB>>, K> where(const Tensor<DC, Bool>& cond, const Tensor<DA, K>& a,
                                                            const Tensor<DB, K>& b, Loc loc = Loc::current()) {
  return Tensor<broadcast_rank<DC, broadcast_rank<DA, DB>>, K>(ember::where(cond.array(), a.array(), b.array(), loc), loc);
}
template <int DA, int DB, class K>
  requires(DA >= 1 && DB >= 1 && !std::is_same_v<K, Bool>)
Tensor<matmul_rank<DA, DB>, K> matmul(const Tensor<DA, K>& a, const Tensor<DB, K>& b, Loc loc = Loc::current()) {
  return a.matmul(b, loc);
}

// Library ops as free functions: conv2d(x, w, {.stride = 2}), max_pool2d(h, {.kernel = 2}).
inline Tensor<4, Float> conv2d(const Tensor<4, Float>& x, const Tensor<4, Float>& w, Conv2dOptions opts = {},
                               Loc loc = Loc::current()) {
  return x.conv2d(w, opts, loc);
}
inline Tensor<4, Float> conv2d(const Tensor<4, Float>& x, const Tensor<4, Float>& w, const Tensor<1, Float>& b,
                               Conv2dOptions opts = {}, Loc loc = Loc::current()) {
  return x.conv2d(w, b, opts, loc);
}
template <int D>
Tensor<D, Float> max_pool2d(const Tensor<D, Float>& x, Pool2dOptions opts, Loc loc = Loc::current()) {
  return x.max_pool2d(opts, loc);
}
template <int D>
Tensor<D, Float> avg_pool2d(const Tensor<D, Float>& x, Pool2dOptions opts, Loc loc = Loc::current()) {
  return x.avg_pool2d(opts, loc);
}
template <int D>
Tensor<D, Float> max_pool2d(const Tensor<D, Float>& x, int64_t kernel, Loc loc = Loc::current()) {
  return x.max_pool2d(kernel, loc);
}
template <int D>
Tensor<D, Float> avg_pool2d(const Tensor<D, Float>& x, int64_t kernel, Loc loc = Loc::current()) {
  return x.avg_pool2d(kernel, loc);
}

// ---- implementation details -------------------------------------------------------------------
namespace detail {
template <class T, int D>
void flatten_nested(const typename NestedList<T, D>::type& list, std::vector<int64_t>& shape, int depth,
                    std::vector<T>& out, Loc loc) {
  check_nested_size(list.size(), shape[size_t(depth)], depth, loc);
  shape[size_t(depth)] = int64_t(list.size());
  if constexpr (D == 1) {
    out.insert(out.end(), list.begin(), list.end());
  } else {
    for (const auto& inner : list) flatten_nested<T, D - 1>(inner, shape, depth + 1, out, loc);
    if (list.size() == 0)  // an empty outer list: the inner sizes are 0 too
      for (size_t d = size_t(depth) + 1; d < shape.size(); ++d)
        if (shape[d] < 0) shape[d] = 0;
  }
}
}  // namespace detail

template <int D, TensorKind K>
std::string Tensor<D, K>::fmt_size_error(size_t got, const Shape& shape, Loc loc) {
  return "from_vector: " + std::to_string(got) + " values for shape " + shape.str() + " (" +
         std::to_string(shape.numel()) + " elements) (at " + format_location(loc) + ")";
}

}  // namespace ember

#include "ember/tensor_functions.h"  // typed grad and multinomial (they need the whole class)
