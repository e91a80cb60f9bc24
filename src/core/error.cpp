// Source locations in error messages (include/ember/error.h): "file.cpp:40", the file without
// its folders.
#include "ember/error.h"

#include <fmt/format.h>

namespace ember {

std::string format_location(const Loc& loc) {
  std::string file = loc.file_name();
  size_t slash = file.find_last_of('/');
  if (slash != std::string::npos) file = file.substr(slash + 1);
  return fmt::format("{}:{}", file, loc.line());
}

}  // namespace ember
