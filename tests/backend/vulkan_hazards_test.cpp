// The Vulkan plugin's barrier decisions without a device: the hazard tracker (which recorded
// accesses a new command must wait for: read-after-write, write-after-write, write-after-read,
// never read-after-read or disjoint ranges) and the byte ranges a KIR launch argument can touch
// (offsets, negative strides, gathers, unknown dtypes and overflow: the whole buffer) and the ranges
// of library calls' tensor descriptors.
#include <gtest/gtest.h>

#include "backend/vulkan/access_ranges.h"
#include "backend/vulkan/hazards.h"

namespace ember::vk {
namespace {

BufferAccess rd(uint64_t buffer, uint64_t begin, uint64_t end) { return {buffer, begin, end, false}; }
BufferAccess wr(uint64_t buffer, uint64_t begin, uint64_t end) { return {buffer, begin, end, true}; }

TEST(VulkanHazardsTest, OnlyOverlapsWithAWriteConflict) {
  HazardTracker t;
  const BufferAccess first[] = {rd(1, 0, 64), wr(2, 0, 32)};
  EXPECT_FALSE(t.conflicts(first, 2)) << "nothing recorded yet";
  t.record(first, 2);
  const BufferAccess raw = rd(2, 16, 48), waw = wr(2, 31, 40), war = wr(1, 60, 70);
  EXPECT_EQ(t.conflict(&raw, 1), Hazard::ReadAfterWrite);
  EXPECT_EQ(t.conflict(&waw, 1), Hazard::WriteAfterWrite);
  EXPECT_EQ(t.conflict(&war, 1), Hazard::WriteAfterRead);
  const BufferAccess rar = rd(1, 0, 64), disjoint = wr(2, 32, 64), other = wr(3, 0, 64);
  EXPECT_FALSE(t.conflicts(&rar, 1)) << "read after read";
  EXPECT_FALSE(t.conflicts(&disjoint, 1)) << "a write next to a write ([0, 32) then [32, 64))";
  EXPECT_FALSE(t.conflicts(&other, 1)) << "another buffer";
  // One conflicting access among several is enough.
  const BufferAccess mixed[] = {rd(1, 0, 8), other, rd(2, 0, 4)};
  EXPECT_TRUE(t.conflicts(mixed, 3));
  t.clear();  // a barrier: nothing before it conflicts any more
  EXPECT_TRUE(t.empty());
  EXPECT_FALSE(t.conflicts(&raw, 1));
}

TEST(VulkanHazardsTest, SlabsOfOneBufferAreIndependentUntilOneCommandReadsThemAll) {
  HazardTracker t;
  for (uint64_t slab = 0; slab < 4; ++slab) {  // four kernels, each writing its slab of buffer 7
    const BufferAccess a[] = {rd(uint64_t(10 + slab), 0, 400), wr(7, slab * 400, (slab + 1) * 400)};
    EXPECT_FALSE(t.conflicts(a, 2)) << "slab " << slab;
    t.record(a, 2);
  }
  const BufferAccess reduce[] = {rd(7, 0, 1600), wr(8, 0, 4)};
  EXPECT_TRUE(t.conflicts(reduce, 2));
}

TEST(VulkanHazardsTest, CoveredAccessesAreNotRecordedTwice) {
  HazardTracker t;
  const BufferAccess w = wr(1, 0, 100), r = rd(1, 10, 20), r2 = rd(2, 0, 50), r3 = rd(2, 0, 50);
  t.record(&w, 1);
  t.record(&r, 1);  // inside the write
  t.record(&r2, 1);
  t.record(&r3, 1);  // the same read again
  EXPECT_EQ(t.size(), 2u);
  const BufferAccess empty = wr(5, 8, 8);
  t.record(&empty, 1);
  EXPECT_EQ(t.size(), 2u) << "an empty range touches nothing";
  const BufferAccess wider = wr(2, 0, 60);  // a write over a recorded read: kept
  t.record(&wider, 1);
  EXPECT_EQ(t.size(), 3u);
}

ember_kir_launch launch_1d(int64_t n, const ember_kir_arg* arg) {
  ember_kir_launch l{};
  l.outer_rank = 1;
  l.shape[0] = n;
  l.n_args = 1;
  l.args = arg;
  return l;
}

TEST(VulkanHazardsTest, ArgumentRangesFollowOffsetsStridesAndGathers) {
  ember_kir_arg a{};
  a.offset = 10;
  a.strides[0] = 1;
  ember_kir_launch l = launch_1d(5, &a);
  ByteRange r = kir_arg_range(l, a, 4, 1024);  // f32 elements 10..14
  EXPECT_EQ(r.begin, 40u);
  EXPECT_EQ(r.end, 60u);
  a.strides[0] = -2;  // elements 10, 8, ..., 2
  a.offset = 10;
  r = kir_arg_range(l, a, 8, 1024);
  EXPECT_EQ(r.begin, 16u);
  EXPECT_EQ(r.end, 88u);
  a.strides[0] = 0;  // a broadcast scalar
  r = kir_arg_range(l, a, 4, 1024);
  EXPECT_EQ(r.begin, 40u);
  EXPECT_EQ(r.end, 44u);
  a.gather_size = 3;  // plus a gathered axis of 3 with stride 100
  a.gather_stride = 100;
  r = kir_arg_range(l, a, 4, 4096);
  EXPECT_EQ(r.begin, 40u);
  EXPECT_EQ(r.end, 844u);
  // A reduction: outer dim [4] and reduce dim [6], row-major.
  ember_kir_arg x{};
  x.strides[0] = 6;
  x.strides[1] = 1;
  ember_kir_launch red{};
  red.outer_rank = 1;
  red.reduce_rank = 1;
  red.shape[0] = 4;
  red.shape[1] = 6;
  red.n_args = 1;
  red.args = &x;
  r = kir_arg_range(red, x, 4, 96);
  EXPECT_EQ(r.begin, 0u);
  EXPECT_EQ(r.end, 96u);
}

TEST(VulkanHazardsTest, NarrowElementsWidenToWordsAndDoubtfulRangesAreTheWholeBuffer) {
  ember_kir_arg a{};
  a.offset = 5;
  a.strides[0] = 1;
  ember_kir_launch l = launch_1d(2, &a);
  ByteRange r = kir_arg_range(l, a, 1, 64);  // bytes 5..6 of a u8 buffer: the word [4, 8)
  EXPECT_EQ(r.begin, 4u);
  EXPECT_EQ(r.end, 8u);
  r = kir_arg_range(l, a, 0, 64);  // an element size the table does not know
  EXPECT_EQ(r.begin, 0u);
  EXPECT_EQ(r.end, 64u);
  a.strides[0] = int64_t(1) << 62;  // (2 - 1) * 2^62 elements of 8 bytes overflow the byte count
  r = kir_arg_range(l, a, 8, 64);
  EXPECT_EQ(r.begin, 0u);
  EXPECT_EQ(r.end, 64u);
  a.strides[0] = 1;
  a.offset = 1000;  // past the buffer: clipped to it (empty)
  r = kir_arg_range(l, a, 4, 64);
  EXPECT_EQ(r.begin, r.end);
  EXPECT_EQ(storage_bytes(EMBER_BF16), 2u);
  EXPECT_EQ(storage_bytes(EMBER_I64), 8u);
  EXPECT_EQ(storage_bytes(EMBER_BOOL), 1u);
  EXPECT_EQ(storage_bytes(99), 0u);
}

TEST(VulkanHazardsTest, LibraryTensorRangesFollowTheirDescriptors) {
  ember_tensor_desc t{};
  t.dtype = EMBER_F32;
  t.rank = 2;
  t.offset = 100;  // a [3, 4] slab at element 100 of a larger buffer (a cat's)
  t.shape[0] = 3;
  t.shape[1] = 4;
  t.strides[0] = 4;
  t.strides[1] = 1;
  ByteRange r = tensor_range(t, 4096);
  EXPECT_EQ(r.begin, 400u);
  EXPECT_EQ(r.end, 448u);
  t.strides[0] = 1;  // transposed view of a [4, 3] tensor: the same elements
  t.strides[1] = 3;
  r = tensor_range(t, 4096);
  EXPECT_EQ(r.begin, 400u);
  EXPECT_EQ(r.end, 448u);
  t.shape[1] = 0;  // no elements: touches nothing
  r = tensor_range(t, 4096);
  EXPECT_EQ(r.begin, r.end);
  t.shape[1] = 4;
  t.dtype = 77;  // unknown: the whole buffer
  r = tensor_range(t, 4096);
  EXPECT_EQ(r.begin, 0u);
  EXPECT_EQ(r.end, 4096u);
}

}  // namespace
}  // namespace ember::vk
