// Replaying a reader's committed fuzz corpus (tools/fuzz/*_fuzz.cpp): files named valid_* must
// parse, fuzz_* (found by libFuzzer) may parse or raise ember::Error, every other file must raise
// ember::Error. Each failure is reported by file name; the counts let the caller check that the
// corpus is really there.
#pragma once

#include <gtest/gtest.h>

#include <ember/error.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace ember::testing {

struct CorpusCounts {
  int files = 0, parsed = 0, refused = 0;  // parsed: valid_* accepted; refused: others refused
};

inline CorpusCounts replay_corpus(const std::string& dir, const std::function<void(const std::vector<uint8_t>&)>& parse) {
  CorpusCounts counts;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    std::ifstream in(entry.path(), std::ios::binary);
    std::vector<uint8_t> bytes(std::istreambuf_iterator<char>(in), {});
    ++counts.files;
    bool ok = false;
    try {
      parse(bytes);
      ok = true;
    } catch (const Error&) {
    }
    if (name.rfind("valid_", 0) == 0) {
      EXPECT_TRUE(ok) << name << " was refused";
      counts.parsed += ok;
    } else if (name.rfind("fuzz_", 0) != 0) {
      EXPECT_FALSE(ok) << name << " was accepted";
      counts.refused += !ok;
    }
  }
  return counts;
}

}  // namespace ember::testing
