// ember::Error: the one exception type Ember throws. Messages name the op, the values involved
// and, where known, the user's source line that created the failing op.
#pragma once

#include <stdexcept>
#include <string>

namespace ember {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// The place in the user's code that called an op. Like std::source_location, but built on the
// compiler builtins that both g++ 12 and clang 14 provide (clang 14 cannot use libstdc++'s
// <source_location>). Taken as a defaulted last parameter, it records the caller's line.
struct Loc {
  const char* file = "";
  unsigned line_ = 0;
  static constexpr Loc current(const char* file = __builtin_FILE(), unsigned line = __builtin_LINE()) noexcept {
    return Loc{file, line};
  }
  constexpr const char* file_name() const noexcept { return file; }
  constexpr unsigned line() const noexcept { return line_; }
};

// "file.cpp:12" for a source location (file name without directories).
std::string format_location(const Loc& loc);

}  // namespace ember
