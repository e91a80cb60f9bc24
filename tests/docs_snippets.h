// Keeps the C++ examples of a documentation page honest: every ```cpp block of the page must
// appear, line for line, in the test file that runs it (leading and trailing spaces and blank
// lines aside), so an example that stops compiling or computing what the page says fails a test.
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace ember::testing {

inline std::string trimmed(const std::string& line) {
  size_t begin = line.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  size_t end = line.find_last_not_of(" \t\r");
  return line.substr(begin, end - begin + 1);
}

// The non-blank lines of a file, trimmed; empty when the file cannot be read.
inline std::vector<std::string> trimmed_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (std::string t = trimmed(line); !t.empty()) lines.push_back(t);
  return lines;
}

// The ```cpp blocks of a Markdown file, each as its trimmed non-blank lines.
inline std::vector<std::vector<std::string>> cpp_blocks(const std::string& markdown_path) {
  std::ifstream in(markdown_path);
  std::vector<std::vector<std::string>> blocks;
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    std::string t = trimmed(line);
    if (!inside && t == "```cpp") {
      inside = true;
      blocks.emplace_back();
    } else if (inside && t == "```") {
      inside = false;
    } else if (inside && !t.empty()) {
      blocks.back().push_back(t);
    }
  }
  return blocks;
}

// The first line of each block of `markdown_path` that does not occur, as a run of consecutive
// lines, in `source_path` ("<no blocks>" when the page has none, "<unreadable>" for a bad path).
inline std::vector<std::string> snippets_missing_from(const std::string& markdown_path, const std::string& source_path) {
  std::vector<std::string> source = trimmed_lines(source_path);
  std::vector<std::vector<std::string>> blocks = cpp_blocks(markdown_path);
  if (source.empty()) return {"<unreadable> " + source_path};
  if (blocks.empty()) return {"<no blocks> " + markdown_path};
  std::vector<std::string> missing;
  for (const std::vector<std::string>& block : blocks) {
    bool found = false;
    for (size_t start = 0; !found && start + block.size() <= source.size(); ++start) {
      size_t k = 0;
      while (k < block.size() && source[start + k] == block[k]) ++k;
      found = k == block.size();
    }
    if (!found) missing.push_back(block.empty() ? "<empty block>" : block.front());
  }
  return missing;
}

}  // namespace ember::testing
