// ember::Error: the one exception type Ember throws. Messages name the op, the values involved
// and, where known, the user's source line that created the failing op.
#pragma once

#include <source_location>
#include <stdexcept>
#include <string>

namespace ember {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// "file.cpp:12" for a source location (file name without directories).
std::string format_location(const std::source_location& loc);

}  // namespace ember
