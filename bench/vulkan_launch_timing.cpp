// Per-launch cost of the Vulkan plugin: many small kernels enqueued one realization each, then
// one wait. Three patterns: independent launches (each reads its own input and writes its own
// output: no ordering needed between them), a dependent chain (each reads the previous output:
// a barrier before each), and a cat (kernels write disjoint slabs of one buffer, then one reads
// it). Prints microseconds per launch, best of `reps`. Used for docs/backends.md (Vulkan); the
// plugin can be swapped with EMBER_PLUGIN_PATH to compare builds, and EMBER_VULKAN_DISABLE=
// push_descriptors,overlap_barriers turns the two mechanisms off one by one.
//   cmake --build --preset release --target ember_vulkan_launch_timing
//   build/release/bin/ember_vulkan_launch_timing [launches] [elements] [reps]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "ember/ember.h"

using namespace ember;

namespace {

const Device kVk = Device::vulkan(0);

// Best wall time of `reps` runs of f, in microseconds per launch.
double per_launch_us(const std::function<void()>& f, int launches, int reps) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    synchronize(kVk);
    const auto t0 = std::chrono::steady_clock::now();
    f();
    synchronize(kVk);
    const std::chrono::duration<double, std::micro> dt = std::chrono::steady_clock::now() - t0;
    best = std::min(best, dt.count() / launches);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const int launches = argc > 1 ? std::atoi(argv[1]) : 512;
  const int64_t n = argc > 2 ? std::atoll(argv[2]) : 256;
  const int reps = argc > 3 ? std::atoi(argv[3]) : 7;
  std::vector<Array> xs;
  for (int i = 0; i < launches; ++i) xs.push_back(full({n}, double(i % 7), {.device = kVk}));
  eval(xs);
  synchronize(kVk);
  std::vector<Array> outs(static_cast<size_t>(launches));
  auto independent = [&] {
    for (int i = 0; i < launches; ++i) outs[size_t(i)] = add(xs[size_t(i)], 1.0).eval();
  };
  auto chain = [&] {
    Array y = xs[0];
    for (int i = 0; i < launches; ++i) y = add(y, 1.0).eval();
    outs[0] = y;
  };
  auto slabs = [&] {
    std::vector<Array> parts;
    for (int i = 0; i < launches; ++i) parts.push_back(add(xs[size_t(i)], 1.0));
    outs[0] = sum(cat(parts, 0)).eval();  // launches + 1 kernels (the cat copies nothing)
  };
  for (int warm = 0; warm < 2; ++warm) {  // compile the shaders first
    independent();
    chain();
    slabs();
    synchronize(kVk);
  }
  std::printf("vulkan launch timing: %d launches of %lld elements (f32 add), best of %d\n", launches, (long long)n,
              reps);
  std::printf("  independent: %7.1f us/launch\n", per_launch_us(independent, launches, reps));
  std::printf("  chain:       %7.1f us/launch\n", per_launch_us(chain, launches, reps));
  std::printf("  cat slabs:   %7.1f us/launch\n", per_launch_us(slabs, launches + 1, reps));
  return 0;
}
