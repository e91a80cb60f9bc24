// Small Vulkan buffers are slices of shared slabs (src/backend/vulkan/small_buffers.h). Through
// the plugin's C table (no buffer cache in between): thousands of buffers of sizes around the
// slab's granularity and its size limit, written with their own patterns, freed in an
// interleaved order while work is queued, allocated again into the freed ranges, and copied
// between each other; every byte must read back as written (no two buffers share a byte). Kernels
// over neighbouring slices are covered by the whole Vulkan suite, which runs on slices.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "runtime/registry.h"
#include "backend/vulkan_test_util.h"

namespace ember {
namespace {

struct Owned {
  ember_buffer buffer = nullptr;
  size_t bytes = 0;
  uint8_t seed = 0;
};

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uint8_t(seed * 131 + i * 7 + (i >> 8));
  return v;
}

TEST(VulkanSmallBuffersTest, SlicesNeverShareBytesAcrossAllocateFreeAndCopy) {
  REQUIRE_VULKAN();
  Backend& be = Backend::get(DeviceKind::Vulkan);
  const ember_backend_v2& t = be.table();
  ember_queue q = be.queue(0);
  ember_status st{};
  std::mt19937 rng(7);
  const size_t sizes[] = {1, 3, 16, 255, 256, 257, 1000, 4096, 65537, 256 << 10, (256 << 10) + 1};
  std::vector<Owned> live;
  auto alloc = [&](size_t n, uint8_t seed) {
    Owned o{nullptr, n, seed};
    ASSERT_EQ(t.buffer_alloc(0, n, &o.buffer, &st), EMBER_OK) << st.message;
    const std::vector<uint8_t> p = pattern(n, seed);
    ASSERT_EQ(t.buffer_write(q, o.buffer, 0, p.data(), n, &st), EMBER_OK) << st.message;
    live.push_back(o);
  };
  auto check_all = [&](const char* when) {
    for (const Owned& o : live) {
      std::vector<uint8_t> got(o.bytes);
      ASSERT_EQ(t.buffer_read(q, o.buffer, 0, got.data(), o.bytes, &st), EMBER_OK) << st.message;
      ASSERT_EQ(got, pattern(o.bytes, o.seed)) << when << ": a buffer of " << o.bytes << " bytes was overwritten";
    }
  };
  // 3000 buffers: more than one slab's worth, the sizes interleaved.
  for (int i = 0; i < 3000; ++i) alloc(sizes[size_t(i) % std::size(sizes)] + size_t(rng() % 3), uint8_t(i));
  check_all("after allocating");
  // Free every other one (the frees are ordered behind queued writes), then allocate into the holes.
  std::vector<Owned> kept;
  for (size_t i = 0; i < live.size(); ++i) {
    if (i % 2) t.buffer_free(q, live[i].buffer);
    else kept.push_back(live[i]);
  }
  live = kept;
  for (int i = 0; i < 1500; ++i) alloc(sizes[size_t(i * 5) % std::size(sizes)], uint8_t(100 + i));
  // Copies between neighbours: the destination takes the source's pattern.
  for (size_t i = 0; i + 1 < live.size(); i += 7) {
    Owned &src = live[i], &dst = live[i + 1];
    const size_t n = std::min(src.bytes, dst.bytes);
    if (n != dst.bytes) continue;  // keep each buffer one pattern
    ASSERT_EQ(t.buffer_copy(q, dst.buffer, 0, src.buffer, 0, n, &st), EMBER_OK) << st.message;
    std::vector<uint8_t> p = pattern(src.bytes, src.seed);
    const std::vector<uint8_t> want(p.begin(), p.begin() + long(n));
    std::vector<uint8_t> got(n);
    ASSERT_EQ(t.buffer_read(q, dst.buffer, 0, got.data(), n, &st), EMBER_OK) << st.message;
    ASSERT_EQ(got, want);
    ASSERT_EQ(t.buffer_write(q, dst.buffer, 0, pattern(n, dst.seed).data(), n, &st), EMBER_OK);  // back to its own
  }
  check_all("after freeing, allocating again and copying");
  for (const Owned& o : live) t.buffer_free(q, o.buffer);
  ASSERT_EQ(t.queue_synchronize(q, &st), EMBER_OK) << st.message;
}

}  // namespace
}  // namespace ember
