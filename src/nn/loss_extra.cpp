// More losses (include/ember/nn/loss_extra.h), written with ember ops so they differentiate.
#include "ember/nn/loss_extra.h"
#include "nn/layer_error.h"

#include <fmt/format.h>

namespace ember::nn {

static Array reduce(const Array& loss, Reduction r) {
  switch (r) {
    case Reduction::None: return loss;
    case Reduction::Mean: return mean(loss);
    case Reduction::Sum: return sum(loss);
  }
  return loss;
}

Array kl_div(const Array& input, const Array& target, const KlDivOptions& opts, Loc loc) {
  UserCall call("kl_div", loc);
  if (input.shape() != target.shape())
    throw nn_error(fmt::format("kl_div: input {} and target {} must have the same shape", input.shape().str(),
                            target.shape().str()));
  Array pointwise;
  if (opts.log_target) {
    pointwise = mul(exp(target), sub(target, input));
  } else {
    // xlogy: 0 where the target is 0 (the log's argument is made safe there, so no NaN gradient).
    Array positive = gt(target, 0.0);
    Array safe_log = log(where(positive, target, 1.0));
    pointwise = where(positive, mul(target, sub(safe_log, input)), 0.0);
  }
  switch (opts.reduction) {
    case KlReduction::None: return pointwise;
    case KlReduction::Mean: return mean(pointwise);
    case KlReduction::Sum: return sum(pointwise);
    case KlReduction::BatchMean:
      return input.rank() == 0 ? sum(pointwise) : div(sum(pointwise), double(input.size(0)));
  }
  return pointwise;
}

Array cosine_embedding_loss(const Array& input1, const Array& input2, const Array& target, double margin,
                            Reduction reduction, Loc loc) {
  UserCall call("cosine_embedding_loss", loc);
  if (input1.shape() != input2.shape() || (input1.rank() != 1 && input1.rank() != 2) ||
      target.rank() != input1.rank() - 1 || (target.rank() == 1 && target.size(0) != input1.size(0)))
    throw nn_error(fmt::format("cosine_embedding_loss: expected inputs [N, D] and target [N] (or [D] and a scalar), "
                            "got {}, {} and {}",
                            input1.shape().str(), input2.shape().str(), target.shape().str()));
  constexpr double kEps = 1e-12;  // PyTorch's: added to each squared magnitude
  int d = input1.rank() - 1;
  Array dot = sum(mul(input1, input2), {d});
  Array mag1 = add(sum(mul(input1, input1), {d}), kEps);
  Array mag2 = add(sum(mul(input2, input2), {d}), kEps);
  Array cos = div(dot, sqrt(mul(mag1, mag2)));
  Array pos = where(eq(target, 1.0), sub(1.0, cos), 0.0);
  Array neg = where(eq(target, -1.0), clamp(sub(cos, margin), 0.0, std::nullopt), 0.0);
  return reduce(add(pos, neg), reduction);
}

Array margin_ranking_loss(const Array& input1, const Array& input2, const Array& target, double margin,
                          Reduction reduction, Loc loc) {
  UserCall call("margin_ranking_loss", loc);
  Array loss = clamp(add(mul(neg(target), sub(input1, input2)), margin), 0.0, std::nullopt);
  return reduce(loss, reduction);
}

}  // namespace ember::nn
