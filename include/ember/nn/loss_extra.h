// More losses with PyTorch's semantics: KL divergence (reductions incl. batchmean, log-space
// targets), cosine embedding and margin ranking. Array forms return a rank-0 array for reduced
// losses; the typed forms return Tensor<1> of one element.
#pragma once

#include "ember/nn/loss.h"

namespace ember::nn {

// Mean divides by the number of elements (PyTorch's default, kept for compatibility); BatchMean
// by the batch size (dim 0), which is the mathematical KL divergence of each sample, averaged.
enum class KlReduction { None, Mean, Sum, BatchMean };
struct KlDivOptions {
  KlReduction reduction = KlReduction::Mean;
  bool log_target = false;  // the target holds log-probabilities
};
// input: log-probabilities; target: probabilities (or log-probabilities with log_target), same
// shape. Pointwise target * (log target - input), 0 where target is 0.
Array kl_div(const Array& input, const Array& target, const KlDivOptions& opts = {}, Loc loc = Loc::current());

// input1, input2 [N, D] (or [D]); target [N] (or rank 0) of 1 / -1:
// 1 - cos(x1, x2) where target is 1, max(0, cos(x1, x2) - margin) where it is -1.
Array cosine_embedding_loss(const Array& input1, const Array& input2, const Array& target, double margin = 0,
                            Reduction reduction = Reduction::Mean, Loc loc = Loc::current());

// max(0, -target * (input1 - input2) + margin), elementwise (shapes broadcast).
Array margin_ranking_loss(const Array& input1, const Array& input2, const Array& target, double margin = 0,
                          Reduction reduction = Reduction::Mean, Loc loc = Loc::current());

// ---- typed forms -----------------------------------------------------------------------------
template <int D>
Tensor<1> kl_div(const Tensor<D>& input, const Tensor<D>& target, const KlDivOptions& opts = {}) {
  return Tensor<1>(reshape(kl_div(input.array(), target.array(), opts), {-1}));
}
inline Tensor<1> cosine_embedding_loss(const Tensor<2>& input1, const Tensor<2>& input2, const Tensor<1>& target,
                                       double margin = 0) {
  return Tensor<1>(reshape(cosine_embedding_loss(input1.array(), input2.array(), target.array(), margin), {1}));
}
inline Tensor<1> margin_ranking_loss(const Tensor<1>& input1, const Tensor<1>& input2, const Tensor<1>& target,
                                     double margin = 0) {
  return Tensor<1>(reshape(margin_ranking_loss(input1.array(), input2.array(), target.array(), margin), {1}));
}

}  // namespace ember::nn
