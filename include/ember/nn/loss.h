// Losses, with PyTorch's semantics: cross-entropy (class indices or probabilities, label
// smoothing, ignore index, class weights), NLL, MSE, L1, smooth L1, Huber, BCE and BCE with
// logits; reductions none / mean / sum. Class scores are [N, C] or [N, C, d1, ...] (classes on
// dim 1) with integer targets [N] or [N, d1, ...]. Array forms return a rank-0 array for mean and
// sum; the typed forms return Tensor<1> of one element (ready for backward()).
#pragma once

#include "ember/nn/module.h"

namespace ember::nn {

enum class Reduction { None, Mean, Sum };

struct CrossEntropyOptions {
  Array weight{};                // [C] class weights (undefined: all ones)
  int64_t ignore_index = -100;  // targets equal to it add nothing (class-index targets only)
  double label_smoothing = 0;  // mixes the target with the uniform distribution
  Reduction reduction = Reduction::Mean;
};
struct NllOptions {
  Array weight{};
  int64_t ignore_index = -100;
  Reduction reduction = Reduction::Mean;
};
struct BceOptions {
  Array weight{};      // broadcast over the elements
  Array pos_weight{};  // [C] weight of positive examples (with logits only)
  Reduction reduction = Reduction::Mean;
};

// Integer target: class indices. Floating target (same shape as the scores): probabilities.
// A class index outside [0, C) (other than ignore_index) is an error, raised where the loss is
// computed (the first read, backward or step), naming the index, C and the caller's line.
Array cross_entropy(const Array& logits, const Array& target, const CrossEntropyOptions& opts = {},
                    Loc loc = Loc::current());
Array nll_loss(const Array& log_probs, const Array& target, const NllOptions& opts = {}, Loc loc = Loc::current());
Array mse_loss(const Array& input, const Array& target, Reduction reduction = Reduction::Mean, Loc loc = Loc::current());
Array l1_loss(const Array& input, const Array& target, Reduction reduction = Reduction::Mean, Loc loc = Loc::current());
// 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta.
Array smooth_l1_loss(const Array& input, const Array& target, double beta = 1.0,
                     Reduction reduction = Reduction::Mean, Loc loc = Loc::current());
// 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta).
Array huber_loss(const Array& input, const Array& target, double delta = 1.0, Reduction reduction = Reduction::Mean, Loc loc = Loc::current());
// Probabilities in [0, 1]; log terms are clamped at -100 as in PyTorch.
Array binary_cross_entropy(const Array& probs, const Array& target, const BceOptions& opts = {}, Loc loc = Loc::current());
Array binary_cross_entropy_with_logits(const Array& logits, const Array& target, const BceOptions& opts = {}, Loc loc = Loc::current());

// ---- typed forms (mean or sum reduction) -----------------------------------------------------
template <int D>
Tensor<1> cross_entropy(const Tensor<D>& logits, const Tensor<D - 1, Int>& target, const CrossEntropyOptions& opts = {},
                        Loc loc = Loc::current()) {
  return Tensor<1>(reshape(cross_entropy(logits.array(), target.array(), opts, loc), {-1}));
}
template <int D>
Tensor<1> cross_entropy(const Tensor<D>& logits, const Tensor<D>& target_probs, const CrossEntropyOptions& opts = {}) {
  return Tensor<1>(reshape(cross_entropy(logits.array(), target_probs.array(), opts), {-1}));
}
template <int D>
Tensor<1> nll_loss(const Tensor<D>& log_probs, const Tensor<D - 1, Int>& target, const NllOptions& opts = {},
                   Loc loc = Loc::current()) {
  return Tensor<1>(reshape(nll_loss(log_probs.array(), target.array(), opts, loc), {-1}));
}
template <int D>
Tensor<1> mse_loss(const Tensor<D>& input, const Tensor<D>& target) {
  return Tensor<1>(reshape(mse_loss(input.array(), target.array()), {1}));
}
template <int D>
Tensor<1> l1_loss(const Tensor<D>& input, const Tensor<D>& target) {
  return Tensor<1>(reshape(l1_loss(input.array(), target.array()), {1}));
}
template <int D>
Tensor<1> binary_cross_entropy_with_logits(const Tensor<D>& logits, const Tensor<D>& target, const BceOptions& opts = {}) {
  return Tensor<1>(reshape(binary_cross_entropy_with_logits(logits.array(), target.array(), opts), {-1}));
}

}  // namespace ember::nn
