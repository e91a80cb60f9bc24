// CsvDataset: a header of column names, then rows of numbers.
#include "ember/data/csv.h"

#include <charconv>
#include <fstream>
#include <sstream>

namespace ember::data {

namespace {
std::vector<std::string> split_line(const std::string& line, char delim) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : line) {
    if (c == delim) {
      out.push_back(cur);
      cur.clear();
    } else if (c != '\r') {
      cur += c;
    }
  }
  out.push_back(cur);
  for (auto& s : out) {
    size_t a = s.find_first_not_of(" \t\""), b = s.find_last_not_of(" \t\"");
    s = a == std::string::npos ? "" : s.substr(a, b - a + 1);
  }
  return out;
}
}  // namespace

std::shared_ptr<CsvDataset> CsvDataset::open(const std::string& path, CsvOptions opts) {
  std::ifstream f(path);
  if (!f) throw Error("CsvDataset: cannot open " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return parse(ss.str(), std::move(opts), path);
}

std::shared_ptr<CsvDataset> CsvDataset::parse(const std::string& text, CsvOptions opts, const std::string& name) {
  auto ds = std::shared_ptr<CsvDataset>(new CsvDataset());
  std::istringstream in(text);
  std::string line;
  size_t line_no = 0;
  std::vector<std::string> header;
  while (header.empty() && std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") != std::string::npos) header = split_line(line, opts.delimiter);
  }
  if (header.empty()) throw Error(name + ": empty CSV (no header line)");
  std::vector<int> is_target(header.size(), 0);
  for (const std::string& t : opts.targets) {
    size_t k = 0;
    while (k < header.size() && header[k] != t) ++k;
    if (k == header.size()) throw Error(name + ": no target column named '" + t + "' in the header");
    is_target[k] = 1;
  }
  for (size_t k = 0; k < header.size(); ++k) (is_target[k] ? ds->target_names_ : ds->feature_names_).push_back(header[k]);
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto cells = split_line(line, opts.delimiter);
    if (cells.size() != header.size())
      throw Error(name + ":" + std::to_string(line_no) + ": " + std::to_string(cells.size()) + " values, the header has " +
                  std::to_string(header.size()) + " columns");
    Row r;
    for (size_t k = 0; k < cells.size(); ++k) {
      float v = 0;
      auto [p, ec] = std::from_chars(cells[k].data(), cells[k].data() + cells[k].size(), v);
      if (ec != std::errc() || p != cells[k].data() + cells[k].size())
        throw Error(name + ":" + std::to_string(line_no) + ": column '" + header[k] + "': '" + cells[k] +
                    "' is not a number");
      (is_target[k] ? r.targets : r.features).push_back(v);
    }
    ds->rows_.push_back(std::move(r));
  }
  return ds;
}

}  // namespace ember::data
