// Shared by Ember's benchmark cases (bench/ember_bench.cpp, bench/model_cases.cpp): the device
// they run on, the input formula both sides of the suite evaluate exactly, the checksum, the wait
// for the device's queue, the parameter initialization by name that torch_bench.py mirrors, and
// the Case interface.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ember/ember.h"

namespace ember_bench {

using namespace ember;
using json = nlohmann::json;

// The device the workloads run on: EMBER_BENCH_DEVICE ("cpu", "vulkan", "vulkan:1", ...; bench/run
// --device sets it), the CPU by default. Inputs, parameters and labels are created there.
inline Device bench_device() {
  static const Device d = [] {
    const char* e = std::getenv("EMBER_BENCH_DEVICE");
    return e && *e ? Device::parse(e) : Device::cpu();
  }();
  return d;
}
// `a` on the bench device, realized.
inline Array on_bench_device(const Array& a) {
  return (bench_device() == Device::cpu() ? a : to_device(a, bench_device())).eval();
}

// The shared input formula, f32, realized: values ((i * 7919 + seed * 104729) mod 1000) / 500 - 1
// (times scale) in row-major order, as torch_bench.py's inp.
inline Array input(const Shape& shape, int64_t seed, double scale = 1.0) {
  // One expression, so that no intermediate is held by a handle (held values become extra
  // kernel outputs).
  auto values = [&] {
    return sub(div(cast(rem(add(mul(arange(0, shape.numel(), 1, DType::I64), 7919), seed * 104729), 1000),
                        DType::F32),
                   500.0),
               1.0);
  };
  return on_bench_device(reshape(scale != 1.0 ? mul(values(), scale) : values(), shape));
}
inline std::vector<float> host_input(int64_t n, int64_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float((i * 7919 + seed * 104729) % 1000) / 500.0f - 1.0f;
  return v;
}
inline double checksum(const Array& a) { return sum(cast(a, DType::F64)).item<double>(); }

// Waits for the work queued on the bench device.
inline void wait_device() { synchronize(bench_device()); }

inline Shape shape_of(const json& j) {
  std::vector<int64_t> s = j.get<std::vector<int64_t>>();
  return Shape(s);
}

// One workload: its state lives between setup and the next setup, so the runner can interleave
// reps of Ember and of the peer.
struct Case {
  virtual ~Case() = default;
  virtual void run() = 0;          // one synchronized rep
  virtual double check() = 0;      // checksum of the last result
  virtual double units() { return 1; }  // a rep's time is divided by this (per-op timings)
};

// Parameters set from the shared formula in the order of their (PyTorch) names, so both sides
// start from the same values: norm weights 1 + 0.1·u, everything else u / sqrt(last dim).
inline void set_params_by_name(nn::Module& m, int64_t seed) {
  std::vector<nn::NamedParam> ps = m.named_parameters();
  std::sort(ps.begin(), ps.end(), [](const nn::NamedParam& a, const nn::NamedParam& b) { return a.name < b.name; });
  for (nn::NamedParam& p : ps) {
    const Shape& s = p.param.array().shape();
    bool norm_weight = p.name.find("norm") != std::string::npos && p.name.ends_with("weight");
    Array v = norm_weight ? add(input(s, seed, 0.1), 1.0)
                          : input(s, seed, 1.0 / std::sqrt(double(s[s.rank() - 1])));
    p.param.set(v.eval());
    ++seed;
  }
}

// The model workloads (training steps and inference, bench/model_cases.cpp); nullptr when `kind`
// is not one of them.
std::unique_ptr<Case> make_model_case(const std::string& kind, const json& p);

}  // namespace ember_bench
