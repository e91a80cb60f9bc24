// A generator of random KIR programs for comparing backends (tests/backend/): loads of every
// dtype through contiguous, broadcast, transposed and stepped views, gathers, iota, random
// numbers (keys immediate or launch-time scalars), unary/binary/compare/select/cast ops, and
// reductions followed by phase-1 ops, on random iteration shapes; each output carries a magnitude
// bound and whether its value is exactly defined, and same_values compares two backends' bytes
// accordingly.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <sstream>

#include "backend/kir_harness.h"

namespace ember::testing {

using kir::Val;

// A generated value: its KIR handle, a bound on its magnitude, and whether both backends must
// produce it bit for bit (no transcendental or reassociated sum upstream).
struct GV {
  Val v;
  double bound = 1;
  bool exact = true;
};

inline constexpr int64_t kSizes[] = {1, 2, 3, 5, 7, 16, 31, 64, 100, 255, 256, 257, 511, 513, 1000, 1500};
inline constexpr DType kAllTypes[] = {DType::F32, DType::F64, DType::F16, DType::BF16,
                           DType::I32, DType::I64, DType::U8,  DType::Bool};

inline double type_limit(DType dt) {
  switch (dt) {
    case DType::I64: return 9.3e18;
    case DType::Bool: return 1;
    case DType::F16: return 65504;
    default: return 2.2e9;  // i32 / u8 registers hold 32-bit values
  }
}

class ProgramGen {
 public:
  explicit ProgramGen(uint64_t seed, bool iota_own_arg = false) : rng_(seed), iota_own_arg_(iota_own_arg) {}

  kir::Builder b;
  HLaunch L;
  struct Out {
    int arg;
    DType dt;
    double bound;
    bool exact;
  };
  std::vector<Out> outs;
  int64_t points = 0;

  void generate(bool reduction, bool big) {
    make_shape(reduction, big);
    int n_loads = 1 + rnd(3);
    for (int i = 0; i < n_loads; ++i) pool_.push_back(load_new(false));
    if (coin(0.25)) {  // iota and random numbers
      int arg = rnd(int(L.args.size()));
      if (iota_own_arg_) {  // an argument without a buffer, as the core makes them (abi.h)
        arg = b.add_arg(DType::I64);
        HArg h = make_view(DType::I64, false, false, 0);
        h.no_buffer = true;
        L.args.push_back(std::move(h));
      }
      Val it = b.iota(arg);
      GV g{it, double(max_index_), true};
      pool_.push_back(g);
      if (coin(0.7)) {
        DType dt = coin(0.5) ? DType::F32 : DType::F64;
        const uint64_t key = rng_();
        if (coin(0.5)) {  // the key as a launch-time scalar, as the core passes a random op's seed
          HArg k;
          k.dtype = DType::I64;
          k.no_buffer = true;
          k.offset = int64_t(key);
          k.strides.assign(L.shape.size(), 0);
          const int karg = b.add_arg(DType::I64);
          L.args.push_back(std::move(k));
          b.runtime_key = b.load_scalar(karg);
        }
        pool_.push_back({b.rand_uniform(it, key, rnd(3), dt), 1, true});
        b.runtime_key = kir::Val{};
      }
    }
    if (coin(0.2)) pool_.push_back(gather_new(false));
    int steps = 2 + rnd(10);
    for (int i = 0; i < steps; ++i) step();
    if (reduction) {
      std::vector<GV> accs;
      int n_acc = 1 + rnd(2);
      for (int i = 0; i < n_acc; ++i) {
        GV src = recent();
        if (auto a = accumulate(src)) accs.push_back(*a);
      }
      if (accs.empty()) accs.push_back(accumulate_sum(recent()));
      b.phase = 1;
      pool_ = accs;
      if (coin(0.3)) pool_.push_back(load_new(true));
      int steps1 = rnd(5);
      for (int i = 0; i < steps1; ++i) step();
    }
    int n_out = 1 + rnd(2);
    for (int i = 0; i < n_out; ++i) {
      GV v = i == 0 ? pool_.back() : recent();
      int arg = b.add_arg(v.v.dtype);
      L.args.push_back(make_output(v.v.dtype, reduction));
      b.store(arg, v.v);
      outs.push_back({arg, v.v.dtype, v.bound, v.exact});
    }
  }

  std::string describe() const {
    std::ostringstream s;
    s << "shape [";
    for (size_t d = 0; d < L.shape.size(); ++d) s << (d ? "," : "") << L.shape[d];
    s << "] outer_rank " << L.outer_rank << "\n";
    for (size_t a = 0; a < L.args.size(); ++a) {
      s << "  arg" << a << " " << dtype_name(L.args[a].dtype) << " offset " << L.args[a].offset << " strides [";
      for (size_t d = 0; d < L.args[a].strides.size(); ++d) s << (d ? "," : "") << L.args[a].strides[d];
      s << "] gather " << L.args[a].gather_size << "x" << L.args[a].gather_stride << " elems "
        << L.args[a].bytes.size() / dtype_size(L.args[a].dtype) << "\n";
    }
    return s.str();
  }

 private:
  std::mt19937_64 rng_;
  bool iota_own_arg_ = false;
  std::vector<GV> pool_;
  int total_ = 0;
  int64_t n_reduce_ = 1;
  int64_t max_index_ = 1;

  int rnd(int n) { return int(rng_() % uint64_t(n)); }
  bool coin(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  double uni(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng_); }

  void make_shape(bool reduction, bool big) {
    int outer = rnd(4);
    int red = reduction ? 1 + rnd(2) : 0;
    if (!reduction && outer == 0 && coin(0.8)) outer = 1;
    total_ = outer + red;
    L.outer_rank = outer;
    L.reduce_rank = red;
    int64_t budget = big ? 160000 : 20000, prod = 1;
    for (int d = 0; d < total_; ++d) {
      int64_t s = kSizes[rnd(int(std::size(kSizes)))];
      if (prod * s > budget) s = std::max<int64_t>(1, budget / prod / (1 + rnd(4)));
      L.shape.push_back(s);
      prod *= s;
    }
    if (big && total_ > 0 && prod < 40000) {
      int d = rnd(total_);
      int64_t others = prod / L.shape[size_t(d)];
      L.shape[size_t(d)] = 40000 / others + 1 + rnd(3000);
    }
    if (reduction && coin(0.05)) L.shape[size_t(outer + rnd(red))] = 0;  // empty reduction
    if (!reduction && total_ > 0 && coin(0.02)) L.shape[0] = 0;           // empty launch
    n_reduce_ = 1;
    for (int d = outer; d < total_; ++d) n_reduce_ *= L.shape[size_t(d)];
    points = 1;
    for (int d = 0; d < total_; ++d) points *= L.shape[size_t(d)];
  }

  // An argument view over the launch dims: some dims broadcast, the rest laid out in a random
  // order with random steps; phase-1 and output arguments do not move along reduce dims.
  HArg make_view(DType dt, bool fixed_reduce, bool output, int64_t gather) {
    HArg a;
    a.dtype = dt;
    a.strides.assign(size_t(total_), 0);
    std::vector<int> dims;
    for (int d = 0; d < total_; ++d) {
      bool reduce_dim = d >= L.outer_rank;
      if (fixed_reduce && reduce_dim) continue;
      if (!output && L.shape[size_t(d)] > 1 && coin(0.2)) continue;
      dims.push_back(d);
    }
    if (gather > 0) dims.push_back(total_);  // the gathered axis
    int order = rnd(4);
    if (order == 1) std::reverse(dims.begin(), dims.end());
    if (order == 2) std::shuffle(dims.begin(), dims.end(), rng_);
    int64_t running = 1, extent = 0;
    bool empty = false;
    for (int i = int(dims.size()) - 1; i >= 0; --i) {
      int d = dims[size_t(i)];
      int64_t size = d == total_ ? gather : L.shape[size_t(d)];
      int64_t step = points <= 20000 && coin(0.15) ? 2 + rnd(2) : 1;
      int64_t stride = running * step;
      if (d == total_) a.gather_stride = stride;
      else a.strides[size_t(d)] = stride;
      if (size == 0) empty = true;
      else extent += (size - 1) * stride;
      running = stride * std::max<int64_t>(size, 1);
    }
    a.gather_size = gather;
    a.offset = rnd(4);
    int64_t elems = a.offset + (empty ? 0 : extent) + 1;
    a.bytes.assign(size_t(elems) * dtype_size(dt), 0);
    max_index_ = std::max(max_index_, elems);
    return a;
  }

  double fill_random(HArg& a) {
    size_t n = a.bytes.size() / dtype_size(a.dtype);
    double bound = 1;
    bool wide = coin(0.15);
    for (size_t i = 0; i < n; ++i) {
      double v;
      switch (a.dtype) {
        case DType::F32: case DType::F64: case DType::F16: case DType::BF16:
          v = coin(0.1) ? double(rnd(5) - 2) : uni(-2, 2);
          bound = 2;
          break;
        case DType::I32:
          v = wide ? double(int64_t(rng_() % 4000000000ull) - 2000000000) : double(rnd(201) - 100);
          bound = wide ? 2.1e9 : 100;
          break;
        case DType::I64:
          v = wide ? double(int64_t(rng_() >> 20) - (int64_t(1) << 43)) : double(rnd(201) - 100);
          bound = wide ? 1.8e13 : 100;
          break;
        case DType::U8: v = rnd(256); bound = 255; break;
        default: v = rnd(2); bound = 1; break;
      }
      put(a.bytes, a.dtype, i, v);
    }
    return bound;
  }

  HArg make_output(DType dt, bool reduction) {
    HArg a = make_view(dt, reduction, true, 0);
    return a;
  }

  GV load_new(bool phase1) {
    DType dt = kAllTypes[rnd(8)];
    int arg = b.add_arg(dt);
    HArg a = make_view(dt, phase1, false, 0);
    double bound = fill_random(a);
    L.args.push_back(std::move(a));
    return {b.load(arg), bound, true};
  }

  GV gather_new(bool phase1) {
    GV i = pick_int();
    int64_t size = 1 + rnd(20);
    Val idx = b.cast(i.v, DType::I64);
    idx = kir::rem(idx, b.constant_int(size, DType::I64));
    DType dt = kAllTypes[rnd(8)];
    int arg = b.add_arg(dt);
    HArg a = make_view(dt, phase1, false, size);
    double bound = fill_random(a);
    L.args.push_back(std::move(a));
    return {b.load_gather(arg, idx), bound, true};
  }

  GV recent() {
    size_t n = pool_.size();
    return pool_[n - 1 - size_t(rnd(int(std::min<size_t>(n, 3))))];
  }
  GV pick() { return pool_[size_t(rnd(int(pool_.size())))]; }
  GV pick_int() {
    std::vector<GV> c;
    for (auto& g : pool_)
      if (!is_floating(g.v.dtype)) c.push_back(g);
    if (c.empty()) return {b.constant_int(rnd(1000), DType::I64), 1000, true};
    return c[size_t(rnd(int(c.size())))];
  }
  // Another value of dtype dt: from the pool, else a constant.
  GV partner(DType dt, bool want_exact) {
    std::vector<GV> c;
    for (auto& g : pool_)
      if (g.v.dtype == dt && (g.exact || !want_exact)) c.push_back(g);
    if (!c.empty() && coin(0.7)) return c[size_t(rnd(int(c.size())))];
    if (is_floating(dt)) {
      double v = coin(0.5) ? double(rnd(7) - 3) : uni(-3, 3);
      return {b.constant(v, dt), 3, true};
    }
    if (dt == DType::Bool) return {b.constant_int(rnd(2), dt), 1, true};
    if (dt == DType::U8) return {b.constant_int(rnd(256), dt), 255, true};
    return {b.constant_int(rnd(101) - 50, dt), 50, true};
  }
  GV cond() {
    for (int tries = 0; tries < 4; ++tries) {
      GV g = pick();
      if (g.v.dtype == DType::Bool) return g;
    }
    GV x = pick();
    if (!x.exact) return {b.constant_int(rnd(2), DType::Bool), 1, true};
    GV y = partner(x.v.dtype, true);
    return {kir::lt(x.v, y.v), 1, true};
  }

  void step() {
    GV x = pick();
    GV r;
    bool ok = false;
    for (int tries = 0; tries < 6 && !ok; ++tries) {
      x = coin(0.6) ? recent() : pick();
      DType dt = x.v.dtype;
      if (is_floating(dt)) ok = float_op(x, r);
      else if (dt == DType::Bool) ok = bool_op(x, r);
      else ok = int_op(x, r);
    }
    if (ok) {
      r.bound = std::min(r.bound, 1e300);
      pool_.push_back(r);
    }
  }

  bool cast_op(const GV& x, GV& r) {
    DType to = kAllTypes[rnd(8)];
    if (to == x.v.dtype) return false;
    bool from_float = is_floating(x.v.dtype);
    // Casts that round to a coarse grid or truncate need an exactly known operand.
    bool coarse = to == DType::F16 || to == DType::BF16 || !is_floating(to);
    if (from_float && coarse && !x.exact) return false;
    double bound = is_floating(to) ? x.bound : std::min(x.bound, type_limit(to));
    if (to == DType::I32 || to == DType::U8) bound = from_float ? std::max(bound, 2.2e9) : bound;
    if (to == DType::U8) bound = 2.2e9;
    r = {b.cast(x.v, to), bound, x.exact};
    return true;
  }

  bool float_op(const GV& x, GV& r) {
    const DType dt = x.v.dtype;
    const double B = x.bound;
    switch (rnd(13)) {
      case 0: r = {-x.v, B, x.exact}; return true;
      case 1: r = {kir::abs(x.v), B, x.exact}; return true;
      case 2:
        if (!x.exact) return false;
        r = {coin(0.5) ? kir::floor(x.v) : kir::ceil(x.v), B + 1, true};
        return true;
      case 3:
        if (B > 10) return false;
        r = {kir::exp(x.v), std::exp(B), false};
        return true;
      case 4:
        if (coin(0.5)) r = {kir::log(kir::abs(x.v) + 0.5), std::log(B + 0.5) + 1, false};
        else r = {kir::sqrt(kir::abs(x.v)), std::sqrt(B), x.exact};
        return true;
      case 5: r = {coin(0.5) ? kir::tanh(x.v) : kir::erf(x.v), 1, false}; return true;
      case 6:
        if (B > 1000) return false;
        r = {coin(0.5) ? kir::sin(x.v) : kir::cos(x.v), 1, false};
        return true;
      case 7: case 8: case 9: {
        GV y = partner(dt, false);
        bool e = x.exact && y.exact;
        switch (rnd(9)) {
          case 0: r = {x.v + y.v, B + y.bound, e}; return true;
          case 1: r = {x.v - y.v, B + y.bound, e}; return true;
          case 2:
            if (B * y.bound > 1e6) return false;
            r = {x.v * y.v, B * y.bound, e};
            return true;
          case 3: r = {x.v / (kir::abs(y.v) + 0.5), 2 * B, e}; return true;
          case 4: r = {kir::max(x.v, y.v), std::max(B, y.bound), e}; return true;
          case 5: r = {kir::min(x.v, y.v), std::max(B, y.bound), e}; return true;
          case 6:
            if (!e) return false;
            r = {kir::floor_div(x.v, kir::abs(y.v) + 0.5), 2 * B + 1, true};
            return true;
          case 7:
            if (!e) return false;
            r = {kir::rem(x.v, kir::abs(y.v) + 0.5), y.bound + 0.5, true};
            return true;
          default: {
            if (B > 20) return false;
            const double exps[] = {0.5, 2, -1, 3};
            double c = exps[rnd(4)];
            r = {kir::pow(kir::abs(x.v) + 0.5, b.constant(c, dt)), std::pow(B + 0.5, 3) + 2, x.exact};
            return true;
          }
        }
      }
      case 10: {
        if (!x.exact) return false;
        GV y = partner(dt, true);
        const ember_kir_op ops[] = {EMBER_KIR_LT, EMBER_KIR_LE, EMBER_KIR_GT, EMBER_KIR_GE, EMBER_KIR_EQ, EMBER_KIR_NE};
        r = {b.emit(ops[rnd(6)], DType::Bool, x.v, y.v), 1, true};
        return true;
      }
      case 11: {
        GV c = cond();
        GV y = partner(dt, false);
        r = {kir::select(c.v, x.v, y.v), std::max(B, y.bound), x.exact && y.exact};
        return true;
      }
      default: return cast_op(x, r);
    }
  }

  bool int_op(const GV& x, GV& r) {
    const DType dt = x.v.dtype;
    const double B = x.bound, lim = type_limit(dt);
    auto one = [&] { return b.constant_int(1, dt); };
    switch (rnd(11)) {
      case 0: r = {-x.v, B, true}; return true;
      case 1: r = {kir::abs(x.v), B, true}; return true;
      case 2: case 3: {
        GV y = partner(dt, true);
        switch (rnd(3)) {
          case 0: r = {x.v + y.v, std::min(lim, B + y.bound), true}; return true;
          case 1: r = {x.v - y.v, std::min(lim, B + y.bound), true}; return true;
          default: r = {x.v * y.v, std::min(lim, B * y.bound), true}; return true;
        }
      }
      case 4: {  // division-like with a divisor that is never zero
        GV y = partner(dt, true);
        Val d = kir::max(kir::abs(y.v), one());
        if (coin(0.3) && dt != DType::U8) d = -d;
        const ember_kir_op ops[] = {EMBER_KIR_DIV, EMBER_KIR_FLOORDIV, EMBER_KIR_REM};
        r = {b.emit(ops[rnd(3)], dt, x.v, d), B, true};
        return true;
      }
      case 5: {
        GV y = partner(dt, true);
        Val e = kir::min(kir::max(y.v, b.constant_int(0, dt)), b.constant_int(3, dt));
        r = {kir::pow(x.v, e), std::min(lim, B * B * B), true};
        return true;
      }
      case 6: {
        GV y = partner(dt, true);
        r = {coin(0.5) ? kir::max(x.v, y.v) : kir::min(x.v, y.v), std::max(B, y.bound), true};
        return true;
      }
      case 7: {
        GV y = partner(dt, true);
        const ember_kir_op ops[] = {EMBER_KIR_LT, EMBER_KIR_LE, EMBER_KIR_GT, EMBER_KIR_GE, EMBER_KIR_EQ, EMBER_KIR_NE};
        r = {b.emit(ops[rnd(6)], DType::Bool, x.v, y.v), 1, true};
        return true;
      }
      case 8: {
        GV c = cond();
        GV y = partner(dt, true);
        r = {kir::select(c.v, x.v, y.v), std::max(B, y.bound), true};
        return true;
      }
      default: return cast_op(x, r);
    }
  }

  bool bool_op(const GV& x, GV& r) {
    switch (rnd(5)) {
      case 0: r = {kir::logical_not(x.v), 1, true}; return true;
      case 1: {
        GV y = partner(DType::Bool, true);
        r = {coin(0.5) ? kir::logical_and(x.v, y.v) : kir::logical_or(x.v, y.v), 1, true};
        return true;
      }
      case 2: {
        GV y = pick();
        GV z = partner(y.v.dtype, false);
        r = {kir::select(x.v, y.v, z.v), std::max(y.bound, z.bound), y.exact && z.exact};
        return true;
      }
      default: return cast_op(x, r);
    }
  }

  std::optional<GV> accumulate(const GV& x) {
    const DType dt = x.v.dtype;
    const double n = double(std::max<int64_t>(n_reduce_, 1));
    bool fl = is_floating(dt);
    switch (rnd(6)) {
      case 0: case 1:
        if (dt == DType::Bool) return std::nullopt;
        return accumulate_sum(x);
      case 2:
        if (dt == DType::Bool) return std::nullopt;
        if (fl && (n_reduce_ > 16 || x.bound > 2)) return std::nullopt;
        return GV{b.acc_prod(x.v), fl ? std::pow(std::max(x.bound, 1.0), n) : type_limit(dt), !fl};
      case 3:
        if (!fl && dt != DType::I64 && n_reduce_ == 0) return std::nullopt;
        return GV{coin(0.5) ? b.acc_max(x.v) : b.acc_min(x.v), x.bound, x.exact};
      default:
        if (!x.exact) return std::nullopt;
        return GV{coin(0.5) ? b.acc_argmax(x.v) : b.acc_argmin(x.v), n, true};
    }
  }
  GV accumulate_sum(const GV& x) {
    const DType dt = x.v.dtype;
    Val v = x.v;
    double bound = x.bound;
    if (dt == DType::Bool) v = b.cast(v, DType::I32);
    bool fl = is_floating(dt);
    return {b.acc_sum(v), fl ? bound * double(std::max<int64_t>(n_reduce_, 1)) : type_limit(v.dtype), !fl};
  }
};

// Relative precision of inexact results of each dtype.
inline double precision(DType dt) {
  switch (dt) {
    case DType::F64: return 1e-11;
    case DType::F16: return 2e-3;
    case DType::BF16: return 1.6e-2;
    default: return 2e-5;
  }
}

inline ::testing::AssertionResult same_values(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, DType dt,
                                       double bound, bool exact) {
  size_t n = got.size() / dtype_size(dt);
  // Inexact values come from f32 or f64 computations (f16/bf16 compute in f32) and may be
  // stored into a wider dtype: never expect more than f32 precision from them.
  double eps = std::max(precision(dt), 2e-5);
  for (size_t i = 0; i < n; ++i) {
    double g = element(got, dt, i), w = element(want, dt, i);
    bool ok;
    if (std::isnan(w) || std::isnan(g)) ok = std::isnan(w) && std::isnan(g);
    else if (exact || std::isinf(w)) ok = g == w;
    else ok = std::fabs(g - w) <= eps * std::max(1.0, bound) + eps * std::fabs(w);
    if (!ok)
      return ::testing::AssertionFailure() << "element " << i << ": cpu " << g << ", reference " << w
                                           << (exact ? " (exact)" : " (bound ") << (exact ? "" : std::to_string(bound))
                                           << (exact ? "" : ")");
  }
  return ::testing::AssertionSuccess();
}


// Every output of generated program `g` on one backend (`got`) against the reference (`want`):
// an empty string when they agree, else which output differs and how.
inline std::string first_output_mismatch(const ProgramGen& g, const std::vector<std::vector<uint8_t>>& got,
                                         const std::vector<std::vector<uint8_t>>& want) {
  for (const auto& o : g.outs) {
    auto r = same_values(got[size_t(o.arg)], want[size_t(o.arg)], o.dt, o.bound, o.exact);
    if (!r) return "output arg" + std::to_string(o.arg) + " " + std::string(dtype_name(o.dt)) + ": " + r.message();
  }
  return {};
}

}  // namespace ember::testing
