// Per-launch cost of the Vulkan plugin: many small kernels enqueued one realization each, then
// one wait. Three patterns: independent launches (each reads its own input and writes its own
// output: no ordering needed between them), a dependent chain (each reads the previous output:
// a barrier before each), and a cat (kernels write disjoint slabs of one buffer, then one reads
// it). Prints microseconds per launch, each the best of `reps`: the host's time to enqueue (the
// core's realization and the plugin's recording; the driver runs the work meanwhile), the wall
// time until the work is done, and the process CPU time (all threads, the driver's too). Used for docs/backends.md (Vulkan); the
// plugin can be swapped with EMBER_PLUGIN_PATH to compare builds, and EMBER_VULKAN_DISABLE=
// push_descriptors,overlap_barriers turns the two mechanisms off one by one.
//   cmake --build --preset release --target ember_vulkan_launch_timing
//   build/release/bin/ember_vulkan_launch_timing [launches] [elements] [reps]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <cstdlib>
#include <functional>
#include <vector>

#include "ember/ember.h"

using namespace ember;

namespace {

const Device kVk = Device::vulkan(0);

double cpu_us() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e6 + double(t.tv_nsec) / 1e3;
}

struct PerLaunch {
  double enqueue_us = 1e30, wall_us = 1e30, cpu_us = 1e30;
};

// Best wall and CPU time of `reps` runs of f, in microseconds per launch.
PerLaunch per_launch(const std::function<void()>& f, int launches, int reps) {
  PerLaunch best;
  for (int r = 0; r < reps; ++r) {
    synchronize(kVk);
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_us();
    f();
    const std::chrono::duration<double, std::micro> enqueued = std::chrono::steady_clock::now() - t0;
    synchronize(kVk);
    const std::chrono::duration<double, std::micro> dt = std::chrono::steady_clock::now() - t0;
    best.enqueue_us = std::min(best.enqueue_us, enqueued.count() / launches);
    best.wall_us = std::min(best.wall_us, dt.count() / launches);
    best.cpu_us = std::min(best.cpu_us, (cpu_us() - c0) / launches);
  }
  return best;
}

void report(const char* what, const PerLaunch& t) {
  std::printf("  %-12s enqueue %6.1f  wall %6.1f  cpu %6.1f  us/launch\n", what, t.enqueue_us, t.wall_us, t.cpu_us);
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
  report("independent", per_launch(independent, launches, reps));
  report("chain", per_launch(chain, launches, reps));
  report("cat-slabs", per_launch(slabs, launches + 1, reps));
  return 0;
}
