// Small text helpers for ember::dist error messages ("rank 1", "ranks 1, 2", "2.5 s").
#pragma once

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace ember::dist::detail {

inline std::string rank_list(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

inline std::string seconds_text(std::chrono::milliseconds t) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", double(t.count()) / 1000.0);
  return buf;
}

}  // namespace ember::dist::detail
