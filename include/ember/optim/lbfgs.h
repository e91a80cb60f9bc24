// L-BFGS (torch.optim.LBFGS's semantics): a quasi-Newton method that builds its step from the
// last `history_size` pairs of parameter and gradient differences (the two-loop recursion) and
// re-evaluates the loss several times per step, so step() takes a closure:
//
//   optim::Lbfgs opt(model, {.lr = 1, .max_iter = 20, .line_search = optim::LineSearch::StrongWolfe});
//   for (int epoch = 0; epoch < 10; ++epoch)
//     double loss = opt.step([&] { return mse_loss(model.forward(x), y); });
//
// The closure computes the loss of the model's current parameters (a forward pass); the
// optimizer differentiates it. Unlike the first-order optimizers it is not an optim::Optimizer:
// it needs the closure, reads dot products back to the host every iteration (as PyTorch's does),
// and keeps one flat vector over all its parameters, which therefore share one dtype and device
// (PyTorch's LBFGS likewise has one parameter group). Full-batch problems are its use.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ember/autograd.h"
#include "ember/nn/module.h"

namespace ember::optim {

enum class LineSearch {
  None,         // the step is lr (the first one min(1, 1/|g|_1) lr), one evaluation per iteration
  StrongWolfe,  // a step satisfying the strong Wolfe conditions (c1 = 1e-4, c2 = 0.9; bracketing
                // and zoom with cubic interpolation, Nocedal & Wright algorithms 3.5-3.6)
};

struct LbfgsOptions {
  double lr = 1;
  int max_iter = 20;             // iterations per step()
  int max_eval = 0;              // loss evaluations per step(); 0: max_iter * 5 / 4
  double tolerance_grad = 1e-7;  // stop once max |g| is at most this
  double tolerance_change = 1e-9;  // stop once the loss or the step changes less than this
  int history_size = 100;
  LineSearch line_search = LineSearch::None;
};

class Lbfgs {
 public:
  using Closure = std::function<Array()>;
  Lbfgs(nn::Module& model, LbfgsOptions opts = {});
  Lbfgs(std::vector<nn::NamedParam> params, LbfgsOptions opts = {});
  Lbfgs(const Lbfgs&) = delete;
  Lbfgs& operator=(const Lbfgs&) = delete;

  // Up to max_iter iterations (fewer when a tolerance or max_eval stops it); returns the loss
  // of the first evaluation, at the parameters step() started from.
  double step(const Closure& closure);

  double lr() const { return options.lr; }
  void set_lr(double lr) { options.lr = lr; }
  int64_t iterations() const { return n_iter_; }       // over all steps
  int64_t evaluations() const { return func_evals_; }  // closure calls over all steps

  // "n_iter", "func_evals", "t", "H_diag", "prev_loss", "ro" (one per history pair) and, per
  // parameter, "<name>.d", "<name>.prev_flat_grad", "<name>.old_dirs" and "<name>.old_stps" (the
  // history, [pairs, ...shape]; absent while the history is empty).
  nn::StateDict state_dict() const;
  void load_state_dict(const nn::StateDict& state);
  std::string type_name() const { return "LBFGS"; }

  LbfgsOptions options;

 private:
  struct Entry {
    nn::NamedParam param{};
    int64_t offset = 0;
    int64_t numel = 0;
  };
  struct Evaluation {
    double loss{};
    Array grad{};  // flat
  };
  Evaluation evaluate(const Closure& closure);
  Array flat_params() const;
  void set_flat_params(const Array& flat);
  Array scalar(double v) const;  // a one-element array of the parameters' dtype and device
  double dot(const Array& a, const Array& b) const;
  double abs_max(const Array& a) const;
  Array two_loop(const Array& grad) const;  // -H g
  Evaluation strong_wolfe(const Closure& closure, const Array& x0, double& t, const Array& d, const Evaluation& at0,
                          double gtd0, int& evals);

  std::vector<Entry> entries_;
  int64_t numel_ = 0;
  DType dtype_ = DType::F32;
  Device device_;
  // Carried from step to step, as PyTorch's state.
  int64_t n_iter_ = 0, func_evals_ = 0;
  Array d_, prev_grad_;
  double t_ = 0, h_diag_ = 1, prev_loss_ = 0;
  std::vector<Array> old_dirs_, old_stps_;  // y and s of the pairs, oldest first
  std::vector<double> ro_;                  // 1 / (y . s)
};
using LBFGS = Lbfgs;

}  // namespace ember::optim
