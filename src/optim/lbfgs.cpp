// L-BFGS (include/ember/optim/lbfgs.h). The iteration, its stopping rules and its first step size
// follow torch.optim.LBFGS's documented behaviour, so a run without line search retraces
// PyTorch's; the strong Wolfe line search is Nocedal & Wright's (Numerical Optimization, 2nd ed.,
// algorithms 3.5 and 3.6 with the cubic interpolation of eq. 3.59).
#include "ember/optim/lbfgs.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace ember::optim {

// `a` computed now: history vectors and intermediate directions are used many times, and lazy
// chains over the iterations would grow without bound.
static Array realized(Array a) {
  a.eval();
  return a;
}

static void check(const LbfgsOptions& o) {
  if (!(o.lr > 0)) throw Error(fmt::format("LBFGS: learning rate must be > 0, got {}", o.lr));
  if (o.max_iter < 1) throw Error(fmt::format("LBFGS: max_iter must be >= 1, got {}", o.max_iter));
  if (o.max_eval < 0) throw Error(fmt::format("LBFGS: max_eval must be >= 0 (0: max_iter * 5 / 4), got {}", o.max_eval));
  if (o.history_size < 1) throw Error(fmt::format("LBFGS: history_size must be >= 1, got {}", o.history_size));
  if (!(o.tolerance_grad >= 0) || !(o.tolerance_change >= 0))
    throw Error(fmt::format("LBFGS: tolerance_grad ({}) and tolerance_change ({}) must be >= 0", o.tolerance_grad,
                            o.tolerance_change));
}

Lbfgs::Lbfgs(nn::Module& model, LbfgsOptions opts) : Lbfgs(model.named_parameters(), opts) {}

Lbfgs::Lbfgs(std::vector<nn::NamedParam> params, LbfgsOptions opts) : options(opts) {
  check(opts);
  std::set<const nn::Slot*> seen;
  for (auto& np : params) {
    if (!np.param.defined() || !seen.insert(np.param.identity()).second) continue;
    const Array& v = np.param.array();
    if (entries_.empty()) {
      dtype_ = v.dtype();
      device_ = v.device();
    }
    if (!is_floating(v.dtype()))
      throw Error(fmt::format("LBFGS: parameter {} has dtype {}; only floating parameters can be optimized", np.name,
                              dtype_name(v.dtype())));
    if (v.dtype() != dtype_ || v.device() != device_)
      throw Error(fmt::format("LBFGS: parameter {} is {} on {}, the first is {} on {}; L-BFGS keeps one flat vector, "
                              "so its parameters share one dtype and device",
                              np.name, dtype_name(v.dtype()), v.device().str(), dtype_name(dtype_), device_.str()));
    entries_.push_back({.param = np, .offset = numel_, .numel = v.numel()});
    numel_ += v.numel();
  }
  if (entries_.empty()) throw Error("LBFGS: no parameters to optimize");
}

Array Lbfgs::scalar(double v) const {
  // Read at run time by the fused kernels (as Optimizer::step_scalar): the step sizes and
  // history coefficients change every iteration and must not each compile a program.
  return cast(from_vector(std::vector<double>{v}, Shape{}, device_), dtype_);
}

double Lbfgs::dot(const Array& a, const Array& b) const { return ember::dot(a, b).item<double>(); }
double Lbfgs::abs_max(const Array& a) const { return max(abs(a)).item<double>(); }

Array Lbfgs::flat_params() const {
  std::vector<Array> parts;
  for (const Entry& e : entries_) parts.push_back(reshape(e.param.param.array().detach(), {e.numel}));
  return parts.size() == 1 ? contiguous(parts[0]) : cat(parts, 0);
}

void Lbfgs::set_flat_params(const Array& flat) {
  std::vector<Array> values;
  for (const Entry& e : entries_) {
    const Shape shape = e.param.param.array().shape();
    e.param.param.set(reshape(slice(flat, 0, e.offset, e.offset + e.numel), shape));
    values.push_back(e.param.param.array());
  }
  eval(values);  // the parameters never build a chain over the iterations
}

Lbfgs::Evaluation Lbfgs::evaluate(const Closure& closure) {
  // The closure records its graph even though step() itself runs without gradients.
  const bool was_enabled = grad_enabled();
  set_grad_enabled(true);
  Array loss;
  try {
    loss = closure();
  } catch (...) {
    set_grad_enabled(was_enabled);
    throw;
  }
  set_grad_enabled(was_enabled);
  if (!loss.defined() || loss.numel() != 1)
    throw Error(fmt::format("LBFGS: the closure must return the loss, one element (got {})",
                            loss.defined() ? loss.shape().str() : std::string("an undefined array")));
  Gradients grads = loss.backward();
  NoGradGuard no_grad;
  std::vector<Array> parts;
  for (const Entry& e : entries_) {
    Array g = e.param.param.trainable() ? grads.get(e.param.param.array()) : Array();
    if (!g.defined()) g = zeros({e.numel}, {.dtype = dtype_, .device = device_});  // unused: no gradient
    else if (g.dtype() != dtype_) g = cast(g, dtype_);
    parts.push_back(reshape(g, {e.numel}));
  }
  Array flat = parts.size() == 1 ? contiguous(parts[0]) : cat(parts, 0);
  eval({flat, loss});
  return {loss.item<double>(), flat};
}

// The two-loop recursion: -H g with H the inverse Hessian estimate of the stored pairs, scaled
// by H_diag = (y . s) / (y . y) of the newest.
Array Lbfgs::two_loop(const Array& grad) const {
  const size_t k = old_dirs_.size();
  std::vector<double> alpha(k);
  Array q = neg(grad);
  for (size_t j = k; j-- > 0;) {
    alpha[j] = dot(old_stps_[j], q) * ro_[j];
    q = realized(sub(q, mul(old_dirs_[j], scalar(alpha[j]))));
  }
  Array r = mul(q, scalar(h_diag_));
  for (size_t j = 0; j < k; ++j) {
    double beta = dot(old_dirs_[j], r) * ro_[j];
    r = realized(add(r, mul(old_stps_[j], scalar(alpha[j] - beta))));
  }
  return r;
}

// The minimizer of the cubic through (x1, f1, g1) and (x2, f2, g2), clamped to [lo, hi]; the
// middle of [lo, hi] where the cubic has none.
static double cubic_minimizer(double x1, double f1, double g1, double x2, double f2, double g2, double lo, double hi) {
  const double d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2);
  const double disc = d1 * d1 - g1 * g2;
  if (!(disc >= 0)) return (lo + hi) / 2;
  const double d2 = std::copysign(std::sqrt(disc), x2 - x1);
  const double x = x2 - (x2 - x1) * (g2 + d2 - d1) / (g2 - g1 + 2 * d2);
  if (!std::isfinite(x)) return (lo + hi) / 2;
  return std::clamp(x, lo, hi);
}

Lbfgs::Evaluation Lbfgs::strong_wolfe(const Closure& closure, const Array& x0, double& t, const Array& d,
                                      const Evaluation& at0, double gtd0, int& evals) {
  constexpr double c1 = 1e-4, c2 = 0.9;
  constexpr int max_ls = 25;
  const double d_max = abs_max(d);
  struct Point {
    double t, f, gtd;
    Evaluation e;
  };
  auto at = [&](double step) {
    set_flat_params(add(x0, mul(d, scalar(step))));
    Evaluation e = evaluate(closure);
    ++evals;
    double gtd = dot(e.grad, d);
    return Point{step, e.loss, gtd, e};
  };
  auto sufficient = [&](const Point& p) { return p.f <= at0.loss + c1 * p.t * gtd0; };
  auto curvature = [&](const Point& p) { return std::fabs(p.gtd) <= -c2 * gtd0; };

  // Bracketing (algorithm 3.5): grow the step until it overshoots, the slope turns, or it is
  // accepted.
  Point prev{0, at0.loss, gtd0, at0};
  Point cur = at(t);
  Point lo, hi;
  bool bracketed = false;
  for (int i = 1;; ++i) {
    if (!sufficient(cur) || (i > 1 && cur.f >= prev.f)) {
      lo = prev, hi = cur, bracketed = true;
      break;
    }
    if (curvature(cur)) {
      t = cur.t;
      return cur.e;
    }
    if (cur.gtd >= 0) {
      lo = cur, hi = prev, bracketed = true;
      break;
    }
    if (i >= max_ls) break;
    const double next = cubic_minimizer(prev.t, prev.f, prev.gtd, cur.t, cur.f, cur.gtd,
                                        cur.t + 0.01 * (cur.t - prev.t), cur.t * 10);
    prev = cur;
    cur = at(next);
  }
  if (!bracketed) {
    t = cur.t;
    return cur.e;
  }
  // Zoom (algorithm 3.6): shrink [lo, hi] (lo: the best point satisfying the sufficient
  // decrease) until a point meets both conditions. Interpolations within 10% of an end are
  // replaced by the middle, so the interval keeps shrinking.
  for (int i = 0; i < max_ls; ++i) {
    const double a = std::min(lo.t, hi.t), b = std::max(lo.t, hi.t);
    if ((b - a) * d_max < options.tolerance_change) break;
    double next = cubic_minimizer(lo.t, lo.f, lo.gtd, hi.t, hi.f, hi.gtd, a, b);
    if (std::min(next - a, b - next) < 0.1 * (b - a)) next = (a + b) / 2;
    Point p = at(next);
    if (!sufficient(p) || p.f >= lo.f) {
      hi = p;
    } else {
      if (curvature(p)) {
        t = p.t;
        return p.e;
      }
      if (p.gtd * (hi.t - lo.t) >= 0) hi = lo;
      lo = p;
    }
  }
  t = lo.t;
  return lo.e;
}

double Lbfgs::step(const Closure& closure) {
  const LbfgsOptions& o = options;
  const int max_eval = o.max_eval > 0 ? o.max_eval : o.max_iter * 5 / 4;
  Evaluation cur = evaluate(closure);
  ++func_evals_;
  int evals = 1;
  const double first_loss = cur.loss;
  NoGradGuard no_grad;
  if (abs_max(cur.grad) <= o.tolerance_grad) return first_loss;  // already optimal

  for (int iter = 1; iter <= o.max_iter; ++iter) {
    ++n_iter_;
    if (n_iter_ == 1) {
      d_ = neg(cur.grad);
      old_dirs_.clear(), old_stps_.clear(), ro_.clear();
      h_diag_ = 1;
    } else {
      // The newest pair: y = g - g_prev, s = t d. Pairs without positive curvature are skipped.
      Array y = realized(sub(cur.grad, prev_grad_));
      Array s = realized(mul(d_, scalar(t_)));
      const double ys = dot(y, s);
      if (ys > 1e-10) {
        if (int(old_dirs_.size()) == o.history_size) {
          old_dirs_.erase(old_dirs_.begin()), old_stps_.erase(old_stps_.begin()), ro_.erase(ro_.begin());
        }
        old_dirs_.push_back(y), old_stps_.push_back(s), ro_.push_back(1.0 / ys);
        h_diag_ = ys / dot(y, y);
      }
      d_ = two_loop(cur.grad);
    }
    prev_grad_ = cur.grad;
    prev_loss_ = cur.loss;
    // The very first step is scaled down by the gradient's size (no curvature known yet).
    t_ = n_iter_ == 1 ? std::min(1.0, 1.0 / sum(abs(cur.grad)).item<double>()) * o.lr : o.lr;
    const double gtd = dot(cur.grad, d_);
    if (gtd > -o.tolerance_change) break;  // not a descent direction any more

    int ls_evals = 0;
    bool optimal = false;
    if (o.line_search == LineSearch::StrongWolfe) {
      Array x0 = realized(flat_params());
      cur = strong_wolfe(closure, x0, t_, d_, cur, gtd, ls_evals);
      set_flat_params(add(x0, mul(d_, scalar(t_))));
      optimal = abs_max(cur.grad) <= o.tolerance_grad;
    } else {
      set_flat_params(add(flat_params(), mul(d_, scalar(t_))));
      if (iter != o.max_iter) {  // the last iteration's loss is the next step()'s first
        cur = evaluate(closure);
        ls_evals = 1;
        optimal = abs_max(cur.grad) <= o.tolerance_grad;
      }
    }
    evals += ls_evals;
    func_evals_ += ls_evals;
    if (iter == o.max_iter || evals >= max_eval || optimal) break;
    if (abs_max(d_) * std::fabs(t_) <= o.tolerance_change) break;  // the step is too small
    if (std::fabs(cur.loss - prev_loss_) < o.tolerance_change) break;
  }
  return first_loss;
}

// ---- state ---------------------------------------------------------------------------------

nn::StateDict Lbfgs::state_dict() const {
  nn::StateDict out;
  out["n_iter"] = from_vector<int64_t>({n_iter_}, {1});
  out["func_evals"] = from_vector<int64_t>({func_evals_}, {1});
  out["t"] = from_vector<double>({t_}, {1});
  out["H_diag"] = from_vector<double>({h_diag_}, {1});
  out["prev_loss"] = from_vector<double>({prev_loss_}, {1});
  const int64_t pairs = int64_t(ro_.size());
  out["num_pairs"] = from_vector<int64_t>({pairs}, {1});
  if (pairs > 0) out["ro"] = from_vector<double>(ro_, {pairs});
  auto per_param = [&](const std::string& name, const Array& flat) {
    for (const Entry& e : entries_)
      out[e.param.name + "." + name] = reshape(slice(flat, 0, e.offset, e.offset + e.numel), e.param.param.array().shape());
  };
  auto history = [&](const std::string& name, const std::vector<Array>& vs) {
    if (vs.empty()) return;
    Array stacked = stack(vs, 0);  // [pairs, numel]
    for (const Entry& e : entries_) {
      std::vector<int64_t> dims{pairs};
      for (int64_t s : e.param.param.array().shape().dims()) dims.push_back(s);
      out[e.param.name + "." + name] = reshape(slice(stacked, 1, e.offset, e.offset + e.numel), Shape(dims));
    }
  };
  if (d_.defined()) per_param("d", d_);
  if (prev_grad_.defined()) per_param("prev_flat_grad", prev_grad_);
  history("old_dirs", old_dirs_);
  history("old_stps", old_stps_);
  return out;
}

void Lbfgs::load_state_dict(const nn::StateDict& state) {
  std::vector<std::string> problems;
  std::set<std::string> used;
  auto number = [&](const std::string& key) -> double {
    auto it = state.find(key);
    used.insert(key);
    if (it == state.end() || it->second.numel() != 1) {
      problems.push_back("missing key: " + key);
      return 0;
    }
    return it->second.item<double>();
  };
  const int64_t n_iter = int64_t(number("n_iter")), func_evals = int64_t(number("func_evals"));
  const double t = number("t"), h_diag = number("H_diag"), prev_loss = number("prev_loss");
  const int64_t pairs = int64_t(number("num_pairs"));
  std::vector<double> ro;
  if (pairs > 0) {
    auto it = state.find("ro");
    used.insert("ro");
    if (it == state.end() || it->second.numel() != pairs) problems.push_back(fmt::format("missing key: ro ({} values)", pairs));
    else ro = it->second.to_vector<double>();
  }
  // A flat vector from the per-parameter slices "<name>.<key>" ([rows, ...shape] with rows > 0).
  auto gather = [&](const std::string& key, int64_t rows) -> Array {
    std::vector<Array> parts;
    for (const Entry& e : entries_) {
      const std::string full = e.param.name + "." + key;
      auto it = state.find(full);
      used.insert(full);
      if (it == state.end()) {
        problems.push_back("missing key: " + full);
        continue;
      }
      const int64_t want = (rows > 0 ? rows : 1) * e.numel;
      if (it->second.numel() != want) {
        problems.push_back(fmt::format("mis-shaped key: {} ({} elements, expected {})", full, it->second.numel(), want));
        continue;
      }
      Array v = it->second;
      if (v.dtype() != dtype_) v = cast(v, dtype_);
      if (v.device() != device_) v = to_device(v, device_);
      parts.push_back(rows > 0 ? reshape(v, {rows, e.numel}) : reshape(v, {e.numel}));
    }
    if (parts.size() != entries_.size()) return Array();
    Array flat = parts.size() == 1 ? contiguous(parts[0]) : cat(parts, rows > 0 ? 1 : 0);
    return realized(flat);
  };
  Array d, prev_grad, dirs, stps;
  if (n_iter > 0) {
    d = gather("d", 0);
    prev_grad = gather("prev_flat_grad", 0);
  }
  if (pairs > 0) {
    dirs = gather("old_dirs", pairs);
    stps = gather("old_stps", pairs);
  }
  for (const auto& [key, v] : state)
    if (!used.count(key)) problems.push_back("unexpected key: " + key);
  if (!problems.empty()) {
    std::string msg = "LBFGS::load_state_dict: the state does not match this optimizer:";
    for (const std::string& p : problems) msg += "\n  " + p;
    throw Error(msg);
  }
  n_iter_ = n_iter, func_evals_ = func_evals, t_ = t, h_diag_ = h_diag, prev_loss_ = prev_loss;
  d_ = d, prev_grad_ = prev_grad, ro_ = ro;
  old_dirs_.clear(), old_stps_.clear();
  for (int64_t j = 0; j < pairs; ++j) {
    old_dirs_.push_back(realized(reshape(slice(dirs, 0, j, j + 1), {numel_})));
    old_stps_.push_back(realized(reshape(slice(stps, 0, j, j + 1), {numel_})));
  }
}

}  // namespace ember::optim
