// The CPU convolution's kept weight layouts (src/backend/cpu/reordered_weights.h): a slot is reused
// only for byte-identical weights at the same address, weights that keep changing stop being
// copied (and are tried again every 64th call), and the per-thread budget evicts only slots not
// used recently.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/reordered_weights.h"

namespace ember::cpu {
namespace {

// The scratch the cache falls back to (GrowingBuffer's interface).
struct Scratch {
  std::vector<unsigned char> bytes;
  void* get(size_t n) {
    if (bytes.size() < n) bytes.resize(n);
    return bytes.data();
  }
};

// One convolution call: the "reorder" writes the plain bytes reversed into use.data.
// `stamp`: the weights' write stamp (0: unknown, compared byte for byte).
void call(ReorderedWeights& cache, uint64_t entry, std::vector<float>& w, Scratch& scratch, bool want_ready,
          uint64_t stamp = 0) {
  const size_t bytes = w.size() * sizeof(float);
  ReorderedWeights::Use use = cache.use(entry, w.data(), bytes, stamp, bytes, scratch);
  ASSERT_NE(use.data, nullptr);
  EXPECT_EQ(use.ready, want_ready);
  if (!use.ready) {
    for (size_t i = 0; i < w.size(); ++i) static_cast<float*>(use.data)[i] = w[w.size() - 1 - i];
    if (use.slot) ReorderedWeights::keep(use.slot, w.data(), stamp);
  }
  for (size_t i = 0; i < w.size(); ++i) EXPECT_EQ(static_cast<float*>(use.data)[i], w[w.size() - 1 - i]) << i;
}

TEST(CpuReorderedWeights, ReusedOnlyForTheSameBytes) {
  ReorderedWeights cache;
  Scratch scratch;
  std::vector<float> w = {1, 2, 3, 4};
  call(cache, 1, w, scratch, false);
  call(cache, 1, w, scratch, true);
  call(cache, 2, w, scratch, false);  // another primitive: its own slot
  w[3] = -0.0f;                       // new bytes at the same address (+0 and -0 differ too)
  call(cache, 1, w, scratch, false);
  call(cache, 1, w, scratch, true);
  w[3] = 0.0f;
  call(cache, 1, w, scratch, false);
}

// holds(): yes only for a kept slot of the same primitive, address and bytes (the convolution
// then skips its finiteness scan of the weights and use() its comparison).
TEST(CpuReorderedWeights, HoldsAnswersForTheKeptBytesOnly) {
  ReorderedWeights cache;
  Scratch scratch;
  std::vector<float> w = {1, 2, 3, 4};
  const size_t bytes = w.size() * sizeof(float);
  EXPECT_FALSE(cache.holds(1, w.data(), bytes, 0));
  call(cache, 1, w, scratch, false);
  EXPECT_TRUE(cache.holds(1, w.data(), bytes, 0));
  EXPECT_FALSE(cache.holds(2, w.data(), bytes, 0));      // another primitive
  EXPECT_FALSE(cache.holds(1, w.data(), bytes - 4, 0));  // other sizes
  ReorderedWeights::Use use = cache.use(1, w.data(), bytes, 0, bytes, scratch, /*same_as_kept=*/true);
  EXPECT_TRUE(use.ready);
  EXPECT_EQ(static_cast<float*>(use.data)[0], 4.0f);
  w[1] = std::numeric_limits<float>::infinity();  // changed in place: not held
  EXPECT_FALSE(cache.holds(1, w.data(), bytes, 0));
}

// Write stamps (common/host_memory.h): the same stamp is trusted without reading the bytes (the
// buffer had no write since); a new stamp on the same bytes is a hit found by comparing, and the
// slot takes that stamp; a new stamp on new bytes is a miss.
TEST(CpuReorderedWeights, TheSameWriteStampSkipsTheComparison) {
  ReorderedWeights cache;
  Scratch scratch;
  std::vector<float> w = {1, 2, 3, 4};
  const size_t bytes = w.size() * sizeof(float);
  call(cache, 1, w, scratch, false, 7);
  EXPECT_TRUE(cache.holds(1, w.data(), bytes, 7));
  // Bytes changed behind the stamp's back (which the plugin's writers never do): still held, which
  // shows that no comparison ran.
  w[0] = 9;
  EXPECT_TRUE(cache.holds(1, w.data(), bytes, 7));
  EXPECT_FALSE(cache.holds(1, w.data(), bytes, 8));  // a new stamp compares, and the bytes differ
  w[0] = 1;
  EXPECT_TRUE(cache.holds(1, w.data(), bytes, 8));   // rewritten with the same values
  w[0] = 9;
  EXPECT_TRUE(cache.holds(1, w.data(), bytes, 8));   // the slot took stamp 8
  call(cache, 1, w, scratch, false, 10);             // new stamp, new bytes: reordered again
  call(cache, 1, w, scratch, true, 10);
  EXPECT_TRUE(cache.holds(1, w.data(), bytes, 0));   // no stamp: compared (the kept copy is {9, 2, 3, 4})
  w[0] = 1;
  EXPECT_FALSE(cache.holds(1, w.data(), bytes, 0));
  EXPECT_TRUE(cache.holds(1, w.data(), bytes, 10));  // a comparison without a stamp kept stamp 10
}

TEST(CpuReorderedWeights, ChangingWeightsStopBeingCopiedAndAreRetried) {
  ReorderedWeights cache;
  Scratch scratch;
  std::vector<float> w = {1, 2, 3, 4};
  call(cache, 1, w, scratch, false);
  for (int step = 0; step < 5; ++step) {  // training: new weights every call
    w[0] += 1;
    call(cache, 1, w, scratch, false);
  }
  // The weights now stay: the slot holds no copy of them until its periodic retry.
  int calls = 0;
  bool ready = false;
  for (; calls < 200 && !ready; ++calls) {
    const size_t bytes = w.size() * sizeof(float);
    ReorderedWeights::Use use = cache.use(1, w.data(), bytes, 0, bytes, scratch);
    ready = use.ready;
    if (!ready) {
      for (size_t i = 0; i < w.size(); ++i) static_cast<float*>(use.data)[i] = w[w.size() - 1 - i];
      if (use.slot) ReorderedWeights::keep(use.slot, w.data(), 0);
    }
    for (size_t i = 0; i < w.size(); ++i) EXPECT_EQ(static_cast<float*>(use.data)[i], w[w.size() - 1 - i]);
  }
  EXPECT_TRUE(ready);
  EXPECT_GT(calls, 2);
  EXPECT_LE(calls, 66);
  call(cache, 1, w, scratch, true);
}

TEST(CpuReorderedWeights, TheBudgetKeepsWhatFits) {
  ReorderedWeights cache;
  Scratch scratch;
  // Weights of 8 MiB each (16 MiB per slot with the plain copy): four fit the 64 MiB budget.
  std::vector<std::vector<float>> ws(5, std::vector<float>(size_t(2) << 20, 1.0f));
  for (size_t k = 0; k < ws.size(); ++k) ws[k][0] = float(k);
  for (int round = 0; round < 2; ++round)
    for (size_t k = 0; k < ws.size(); ++k) {
      const size_t bytes = ws[k].size() * sizeof(float);
      ReorderedWeights::Use use = cache.use(k + 1, ws[k].data(), bytes, 0, bytes, scratch);
      // Round 0: nothing kept yet. Round 1: the first four were kept; the fifth never fit, and
      // nothing was evicted for it (the others were used within the last calls).
      EXPECT_EQ(use.ready, round == 1 && k < 4) << round << " " << k;
      if (use.slot) {
        std::memset(use.data, 0, bytes);
        ReorderedWeights::keep(use.slot, ws[k].data(), 0);
      }
      if (!use.ready && !use.slot) {
        EXPECT_EQ(use.data, scratch.bytes.data());
      }
    }
}

}  // namespace
}  // namespace ember::cpu
