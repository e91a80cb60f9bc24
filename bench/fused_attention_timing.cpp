// Timing of fused_attention against the plain composition softmax(q k^T * scale) v (matmul,
// softmax, matmul) on the CPU: forward time (best of `reps`), forward + backward time, and the
// device's peak memory of each. Used for docs/performance.md ("Fused attention") and for the
// length at which nn::scaled_dot_product_attention switches to the fused op.
//   cmake --build --preset release --target ember_attention_timing
//   OMP_NUM_THREADS=2 build/release/bin/ember_attention_timing [B] [E] [causal] [L ...]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "ember/ember.h"

using namespace ember;

namespace {

Array plain(const Array& q, const Array& k, const Array& v, bool causal) {
  const int64_t L = q.shape()[1], S = k.shape()[1];
  Array s = mul(matmul(q, transpose(k, 1, 2)), 1.0 / std::sqrt(double(q.shape()[2])));
  if (causal) {
    Array i = reshape(arange(0, L, 1, DType::I64), Shape{L, 1}), j = reshape(arange(0, S, 1, DType::I64), Shape{1, S});
    s = where(le(j, i), s, -INFINITY);
  }
  return matmul(softmax(s, -1), v);
}

struct Result {
  double ms;
  double peak_mb;
};

// Best time of `reps` runs of f (which returns the arrays to realize) and the peak memory above
// what was live before.
Result measure(const std::function<std::vector<Array>()>& f, int reps) {
  double best = 1e30, peak = 0;
  for (int r = 0; r < reps; ++r) {
    synchronize(Device::cpu());
    const int64_t base = memory_stats().live_bytes;
    reset_peak_memory();
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<Array> out = f();
    eval(out);
    synchronize(Device::cpu());
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, ms);
    peak = double(memory_stats().peak_bytes - base) / (1024.0 * 1024.0);
  }
  return {best, peak};
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t B = argc > 1 ? std::atoll(argv[1]) : 8, E = argc > 2 ? std::atoll(argv[2]) : 64;
  const bool causal = argc > 3 && std::atoi(argv[3]) != 0;
  std::vector<int64_t> lengths;
  for (int i = 4; i < argc; ++i) lengths.push_back(std::atoll(argv[i]));
  if (lengths.empty()) lengths = {32, 64, 128, 256, 512, 1024, 2048};
  std::printf("B=%lld E=%lld causal=%d f32 (%s)\n", (long long)B, (long long)E, int(causal),
              Device::cpu().str().c_str());
  std::printf("%6s | %10s %10s | %10s %10s | %9s %9s | %9s %9s\n", "L=S", "fused ms", "plain ms", "fused+bw",
              "plain+bw", "fused MiB", "plain MiB", "+bw MiB", "+bw MiB");
  for (int64_t L : lengths) {
    Array q = normal({B, L, E}), k = normal({B, L, E}), v = normal({B, L, E});
    eval({q, k, v});
    const int reps = L <= 256 ? 20 : L <= 1024 ? 5 : 3;
    const Result f = measure([&] { return std::vector<Array>{fused_attention(q, k, v, {.causal = causal})}; }, reps);
    const Result p = measure([&] { return std::vector<Array>{plain(q, k, v, causal)}; }, reps);
    Array qg = q.require_grad(), kg = k.require_grad(), vg = v.require_grad();
    auto grads = [&](const Array& y) {
      Gradients g = sum(y).backward();
      return std::vector<Array>{qg.grad(g), kg.grad(g), vg.grad(g)};
    };
    const Result fb = measure([&] { return grads(fused_attention(qg, kg, vg, {.causal = causal})); }, reps);
    const Result pb = measure([&] { return grads(plain(qg, kg, vg, causal)); }, reps);
    std::printf("%6lld | %10.3f %10.3f | %10.3f %10.3f | %9.2f %9.2f | %9.2f %9.2f\n", (long long)L, f.ms, p.ms,
                fb.ms, pb.ms, f.peak_mb, p.peak_mb, fb.peak_mb, pb.peak_mb);
  }
  return 0;
}
