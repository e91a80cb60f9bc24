// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): the
// counter-based generator behind Ember's random ops. Element i of a draw is a pure function of
// (seed, i), which makes results independent of thread counts and backends. Shared by all
// backends so that they produce identical bits.
#pragma once

#include <cstdint>

namespace ember::philox {

struct Block {
  uint32_t w[4];
};

// The block of element `counter`: its four 32-bit words are the draws of streams 0-3 (f32) or,
// in pairs, of streams 0-1 (f64), so one block serves both uniforms of a normal.
inline Block philox4x32_10(uint64_t counter, uint64_t key) {
  uint32_t c0 = uint32_t(counter), c1 = uint32_t(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = uint32_t(key), k1 = uint32_t(key >> 32);
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = uint64_t(0xD2511F53u) * c0;
    uint64_t p1 = uint64_t(0xCD9E8D57u) * c2;
    uint32_t n0 = uint32_t(p1 >> 32) ^ c1 ^ k0;
    uint32_t n2 = uint32_t(p0 >> 32) ^ c3 ^ k1;
    c1 = uint32_t(p1);
    c3 = uint32_t(p0);
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return Block{{c0, c1, c2, c3}};
}

// Uniform in [0, 1): 24 random bits of word `stream` (0-3) for f32; 53 bits of words 2·stream
// and 2·stream + 1 (stream 0-1) for f64.
inline float uniform_f32(uint64_t counter, uint32_t stream, uint64_t key) {
  return float(philox4x32_10(counter, key).w[stream & 3u] >> 8) * (1.0f / 16777216.0f);
}
inline double uniform_f64(uint64_t counter, uint32_t stream, uint64_t key) {
  Block b = philox4x32_10(counter, key);
  const uint32_t hi = b.w[(2u * stream) & 3u], lo = b.w[(2u * stream + 1u) & 3u];
  uint64_t bits = ((uint64_t(hi) << 32) | lo) >> 11;
  return double(bits) * (1.0 / 9007199254740992.0);
}

}  // namespace ember::philox
