// Helpers of the IDX reader tests (idx_test.cpp, idx_hardening_test.cpp): an IDX file's bytes.
#pragma once

#include <cstdint>
#include <vector>

namespace ember::data::testing {

// The bytes of an IDX file: magic (type, rank), big-endian dims, then the payload as given.
inline std::vector<uint8_t> idx_bytes(uint8_t type, std::vector<uint32_t> dims, std::vector<uint8_t> payload) {
  std::vector<uint8_t> b = {0, 0, type, uint8_t(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(uint8_t(d >> s));
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

}  // namespace ember::data::testing
