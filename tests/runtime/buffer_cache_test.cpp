// The per-device caching allocator (src/runtime/buffer_cache.h): reuse of freed buffers of the
// same size, the cached bytes in memory_stats, the bound, and empty_cache().
#include <gtest/gtest.h>

#include "ember/ember.h"

namespace ember {
namespace {

TEST(BufferCacheTest, FreedBuffersAreReusedAndCounted) {
  Device d = Device::cpu().available() ? Device::cpu() : Device::reference();
  empty_cache(d);
  MemoryStats base = memory_stats(d);
  EXPECT_EQ(base.cached_bytes, 0);
  const int64_t n = 300000;  // 1.2 MB: above malloc's mmap threshold
  {
    Array a = full({n}, 1.5f, {.device = d});
    a.eval();
    EXPECT_EQ(memory_stats(d).live_bytes, base.live_bytes + n * 4);
  }
  MemoryStats freed = memory_stats(d);
  EXPECT_EQ(freed.live_bytes, base.live_bytes);
  EXPECT_GE(freed.cached_bytes, n * 4) << "the freed buffer is kept";
  {
    Array b = full({n}, 2.5f, {.device = d});  // the same size
    EXPECT_FLOAT_EQ(sum(b).item<float>(), 2.5f * float(n));
    EXPECT_LT(memory_stats(d).cached_bytes, freed.cached_bytes) << "reused from the cache";
  }
  empty_cache(d);
  EXPECT_EQ(memory_stats(d).cached_bytes, 0);
}

TEST(BufferCacheTest, ALoopReachesASteadyState) {
  Device d = Device::cpu().available() ? Device::cpu() : Device::reference();
  Array x = uniform({50000}, 0, 1, {.seed = 7, .device = d});
  x.eval();
  int64_t cached_after_warmup = 0;
  for (int i = 0; i < 20; ++i) {
    x = add(mul(x, 0.5), 0.25);
    x.eval();
    if (i == 4) cached_after_warmup = memory_stats(d).cached_bytes;
  }
  EXPECT_LE(memory_stats(d).cached_bytes, cached_after_warmup + 50000 * 4) << "no growth per step";
  EXPECT_NEAR(x.to_vector<float>()[0], 0.5, 0.01);
}

}  // namespace
}  // namespace ember
