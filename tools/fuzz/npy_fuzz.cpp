// libFuzzer target for the .npy reader (ember::io::parse_npy): any input must parse or raise
// ember::Error, never crash, read out of bounds or allocate what the file does not hold (the
// data size is checked against the file before anything is copied). Built as
// safetensors_fuzz.cpp says, target ember_npy_fuzz:
//   ./build/fuzz/bin/ember_npy_fuzz tests/io/data/npy_corpus -max_len=4096 -rss_limit_mb=2048
// The seed corpus comes from tools/fuzz/make_npy_corpus.py; tests/io/npy_test.cpp replays it.
#include <cstddef>
#include <cstdint>

#include "ember/error.h"
#include "ember/io/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    ember::Array a = ember::io::parse_npy(data, size);
    (void)a.to_bytes();
  } catch (const ember::Error&) {
  }
  return 0;
}
