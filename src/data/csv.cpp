// CsvDataset: a header of column names, then rows of numbers (finite floats), with errors that
// name the file, line and column.
#include "ember/data/csv.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include "io/read_file.h"

namespace ember::data {

namespace {

// Splits a line at the delimiter; each cell is trimmed of spaces, tabs and surrounding quotes.
// A carriage return is part of the line ending only at its end (CRLF files).
std::vector<std::string> split_line(std::string line, char delim) {
  if (!line.empty() && line.back() == '\r') line.pop_back();
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t end = line.find(delim, start);
    out.push_back(line.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  for (auto& s : out) {
    size_t a = s.find_first_not_of(" \t\""), b = s.find_last_not_of(" \t\"");
    s = a == std::string::npos ? "" : s.substr(a, b - a + 1);
  }
  return out;
}

bool blank(const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; }

// One cell as a float. Values beyond float's range are errors; values too small for it round to
// zero or a subnormal, as any float conversion does. NaN and infinity are refused: they would
// poison every loss they reach, and CSV files use them for missing values.
float parse_cell(const std::string& cell, const std::string& where) {
  if (cell.empty()) throw Error(where + ": empty field");
  const char* first = cell.data();
  const char* last = first + cell.size();
  float v = 0;
  auto [p, ec] = std::from_chars(first, last, v);
  if (ec == std::errc::result_out_of_range && p == last) {
    long double wide = 0;  // tells overflow from underflow
    auto [q, wide_ec] = std::from_chars(first, last, wide);
    if (wide_ec != std::errc() || q != last || std::fabs(wide) > std::numeric_limits<float>::max())
      throw Error(where + ": '" + cell + "' is out of float range (beyond +-3.4e38)");
    return float(wide);
  }
  if (ec != std::errc() || p != last) throw Error(where + ": '" + cell + "' is not a number");
  if (!std::isfinite(v)) throw Error(where + ": '" + cell + "' is not a finite number (NaN and infinity are refused)");
  return v;
}

}  // namespace

std::shared_ptr<CsvDataset> CsvDataset::open(const std::string& path, CsvOptions opts) {
  std::vector<uint8_t> bytes = io::detail::read_regular_file(path, "CsvDataset");
  return parse(std::string(bytes.begin(), bytes.end()), std::move(opts), path);
}

std::shared_ptr<CsvDataset> CsvDataset::parse(const std::string& text, CsvOptions opts, const std::string& name) {
  auto ds = std::shared_ptr<CsvDataset>(new CsvDataset());
  std::istringstream in(text.compare(0, 3, "\xEF\xBB\xBF") == 0 ? text.substr(3) : text);  // a UTF-8 byte order mark
  std::string line;
  size_t line_no = 0;
  std::vector<std::string> header;
  while (header.empty() && std::getline(in, line)) {
    ++line_no;
    if (!blank(line)) header = split_line(line, opts.delimiter);
  }
  if (header.empty()) throw Error(name + ": empty CSV (no header line)");
  std::string header_at = name + ": line " + std::to_string(line_no);
  std::map<std::string, size_t> column_of;
  for (size_t k = 0; k < header.size(); ++k) {
    if (header[k].empty()) throw Error(header_at + ": column " + std::to_string(k + 1) + " has no name");
    auto [it, fresh] = column_of.emplace(header[k], k);
    if (!fresh)
      throw Error(header_at + ": columns " + std::to_string(it->second + 1) + " and " + std::to_string(k + 1) +
                  " are both named '" + header[k] + "'");
  }
  std::vector<int> is_target(header.size(), 0);
  for (const std::string& t : opts.targets) {
    auto it = column_of.find(t);
    if (it == column_of.end()) throw Error(name + ": no target column named '" + t + "' in the header");
    if (is_target[it->second]) throw Error(name + ": target column '" + t + "' is named twice in the options");
    is_target[it->second] = 1;
  }
  for (size_t k = 0; k < header.size(); ++k) (is_target[k] ? ds->target_names_ : ds->feature_names_).push_back(header[k]);
  while (std::getline(in, line)) {
    ++line_no;
    if (blank(line)) continue;
    auto cells = split_line(line, opts.delimiter);
    std::string at = name + ": line " + std::to_string(line_no);
    if (cells.size() != header.size())
      throw Error(at + ": " + std::to_string(cells.size()) + " values, the header has " + std::to_string(header.size()) +
                  " columns");
    Row r;
    for (size_t k = 0; k < cells.size(); ++k) {
      float v = parse_cell(cells[k], at + ", column " + std::to_string(k + 1) + " ('" + header[k] + "')");
      (is_target[k] ? r.targets : r.features).push_back(v);
    }
    ds->rows_.push_back(std::move(r));
  }
  return ds;
}

}  // namespace ember::data
