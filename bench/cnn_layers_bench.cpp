// Per-layer timing of the Fashion-MNIST CNN's convolutions (src/cli/models.h) on the CPU backend:
// forward, backward-data and backward-weights of conv1 (1->32) and conv2 (32->64), 3x3, padding 1,
// batch 64, 28x28, f32, each as a fraction of its FLOP bound (2 * N * O * OH * OW * C * KH * KW
// FLOPs at the measured peak rate of a large f32 GEMM through the same oneDNN). Best of 20 runs
// (the machine may be shared). Build and run (threads from OMP_NUM_THREADS; EMBER_CONV_ALG=direct
// measures oneDNN's direct kernels instead of Winograd):
//   g++ -O2 -std=c++20 -Iinclude -Ibuild/release/include bench/cnn_layers_bench.cpp -Lbuild/release/lib
//       -lember -Wl,-rpath,$PWD/build/release/lib -o /tmp/cnn_layers_bench   (one line)
//   OMP_NUM_THREADS=2 /tmp/cnn_layers_bench
#include <ember/ember.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

using namespace ember;

static double best_ms(const std::function<Array()>& f, int reps = 20) {
  for (int i = 0; i < 3; ++i) f().eval();
  synchronize();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f().eval();
    synchronize();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t.front();  // the best run: the machine is shared, slower runs measure the neighbours
}

int main() {
  const Device dev = Device::cpu();
  auto rnd = [&](const Shape& s) { return normal(s, 0, 1, {.dtype = DType::F32, .device = dev}).eval(); };
  // Peak: a 2048^3 f32 GEMM (oneDNN, the same library as the convolutions).
  const int64_t M = 2048;
  Array a = rnd({M, M}), b = rnd({M, M});
  const double gemm_ms = best_ms([&] { return matmul(a, b); }, 10);
  const double peak = 2.0 * double(M * M * M) / (gemm_ms * 1e-3);  // FLOP/s
  std::printf("peak f32 GEMM (%lld^3): %.1f ms = %.1f GFLOP/s\n", (long long)M, gemm_ms, peak * 1e-9);
  struct L {
    const char* name;
    int64_t C, O;
  };
  const int64_t N = 64, H = 28, W = 28;
  const Conv2dOptions o{.padding = 1};
  std::printf("%-6s %-16s %9s %9s %9s %8s\n", "layer", "pass", "ms", "MFLOP", "bound ms", "of bound");
  for (L l : {L{"conv1", 1, 32}, L{"conv2", 32, 64}}) {
    Array x = rnd({N, l.C, H, W}), w = rnd({l.O, l.C, 3, 3}), bias = rnd({l.O}), dy = rnd({N, l.O, H, W});
    const double flop = 2.0 * double(N * l.O * H * W * l.C * 9);
    const double bound_ms = flop / peak * 1e3;
    auto row = [&](const char* pass, double ms) {
      std::printf("%-6s %-16s %9.3f %9.1f %9.3f %7.1f%%\n", l.name, pass, ms, flop * 1e-6, bound_ms, 100 * bound_ms / ms);
    };
    row("forward", best_ms([&] { return conv2d(x, w, bias, o); }));
    row("backward-data", best_ms([&] { return conv2d_backward_data(dy, w, x.shape(), o); }));
    row("backward-weights", best_ms([&] { return conv2d_backward_weights(x, dy, w.shape(), o); }));
  }
  synchronize();
  return 0;
}
