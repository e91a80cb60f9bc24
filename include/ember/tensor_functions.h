// Typed free functions over Tensor<D, K> that need more than the class: the typed ember::grad
// (gradients with their inputs' ranks) and multinomial sampling. Included by ember/tensor.h.
//
//   auto [dx, dw] = grad(loss, x, w);                         // Tensor<2>, Tensor<2> for 2-D x, w
//   auto [dx] = grad(y, std::tuple{x}, {.create_graph = true}, dy);  // options, grad_output
//   Tensor<2, Int> idx = multinomial(probs, 5, /*replacement=*/true, /*seed=*/7);
#pragma once

#include <cstddef>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "ember/tensor.h"

namespace ember {

namespace detail {
template <class T>
struct IsFloatTensor : std::false_type {};
template <int D>
struct IsFloatTensor<Tensor<D, Float>> : std::true_type {};
}  // namespace detail

// Gradients of `output` (one element, or weighted by grad_output) with respect to the inputs of
// the tuple (leaves or intermediate results), each gradient with its input's rank. An input that
// output does not depend on is an error unless opts.allow_unused (an undefined Tensor) or
// opts.materialize_grads (zeros). As the untyped ember::grad (autograd.h).
template <int DOut, class... Inputs>
  requires(sizeof...(Inputs) >= 1 && (detail::IsFloatTensor<std::remove_cvref_t<Inputs>>::value && ...))
std::tuple<std::remove_cvref_t<Inputs>...> grad(const Tensor<DOut, Float>& output, const std::tuple<Inputs...>& inputs,
                                                BackwardOptions opts = {},
                                                const Tensor<DOut, Float>& grad_output = {}) {
  std::vector<Array> arrays = std::apply([](const auto&... t) { return std::vector<Array>{t.array()...}; }, inputs);
  std::vector<Array> grads = ember::grad(output.array(), arrays, opts, grad_output.array());
  return [&]<size_t... I>(std::index_sequence<I...>) {
    return std::tuple<std::remove_cvref_t<Inputs>...>(std::remove_cvref_t<Inputs>(grads[I])...);
  }(std::index_sequence_for<Inputs...>{});
}
// The common form: grad(loss, x, w) with default options.
template <int DOut, int... DIn>
  requires(sizeof...(DIn) >= 1)
std::tuple<Tensor<DIn, Float>...> grad(const Tensor<DOut, Float>& output, const Tensor<DIn, Float>&... inputs) {
  return grad(output, std::tuple<const Tensor<DIn, Float>&...>(inputs...));
}

// torch.multinomial on typed tensors: rows of weights [C] or [N, C] give indices
// [num_samples] or [N, num_samples] (see ember::multinomial in ops.h for the rules and errors).
template <int D>
  requires(D == 1 || D == 2)
Tensor<D, Int> multinomial(const Tensor<D, Float>& probs, int64_t num_samples, bool replacement = false,
                           std::optional<uint64_t> seed = std::nullopt, Loc loc = Loc::current()) {
  return Tensor<D, Int>(ember::multinomial(probs.array(), num_samples, replacement, seed, loc), loc);
}

}  // namespace ember
