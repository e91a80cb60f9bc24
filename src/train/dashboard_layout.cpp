// The live dashboard's lines for a given width (pure: no clock, no terminal), the rate meter and
// the ETA arithmetic. train::Dashboard (dashboard.cpp) feeds them and prints the result.
#include "ember/train/dashboard_layout.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "ember/train/dashboard.h"

namespace ember::train {

namespace {
bool is_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Length in bytes of the ANSI CSI sequence at s[i] (ESC [ params final), 0 if none starts there.
size_t csi_length(std::string_view s, size_t i) {
  if (s[i] != '\x1b' || i + 1 >= s.size() || s[i + 1] != '[') return 0;
  size_t j = i + 2;
  while (j < s.size() && !(s[j] >= 0x40 && s[j] <= 0x7e)) ++j;
  return std::min(j + 1, s.size()) - i;
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

std::string rate_text(double items_per_s) {
  if (items_per_s < 0) return "-- items/s";
  return std::to_string(int64_t(std::llround(items_per_s))) + " items/s";
}

// A value label of at most 7 columns, right-aligned in 7.
std::string plot_label(double v, bool percent) {
  char b[32];
  if (percent) std::snprintf(b, sizeof b, "%.1f%%", v * 100);
  else std::snprintf(b, sizeof b, "%.3f", v);
  if (std::string_view(b).size() > 7) std::snprintf(b, sizeof b, "%.2g", v);
  std::string s = fit_width(b, 7);
  return std::string(7 - display_width(s), ' ') + s;
}

// A plot of `values` downsampled to at most `width` columns, `rows` rows high, block characters;
// each line is 9 + width columns ("  0.512 │▁▂▃…").
std::vector<std::string> block_plot(const std::vector<double>& values, size_t width, int rows, const std::string& label,
                                    bool percent) {
  static const char* eighths[] = {" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  std::vector<double> cols;
  size_t n = values.size(), w = std::min(n, width);
  for (size_t c = 0; c < w; ++c) {
    size_t lo = c * n / w, hi = std::max(lo + 1, (c + 1) * n / w);
    double s = 0;
    for (size_t i = lo; i < hi; ++i) s += values[i];
    cols.push_back(s / double(hi - lo));
  }
  double lo = cols.empty() ? 0 : *std::min_element(cols.begin(), cols.end());
  double hi = cols.empty() ? 1 : *std::max_element(cols.begin(), cols.end());
  if (hi - lo < 1e-12) hi = lo + 1e-12;
  std::vector<std::string> lines;
  for (int r = 0; r < rows; ++r) {
    std::string line = r == 0 ? plot_label(hi, percent)
                       : r == rows - 1 ? plot_label(lo, percent)
                       : r == rows / 2 ? std::string(7 - std::min<size_t>(7, label.size()), ' ') + label.substr(0, 7)
                                       : std::string(7, ' ');
    line += " │";
    for (double v : cols) {
      int level = int(std::lround((v - lo) / (hi - lo) * (rows * 8 - 1))) + 1;  // 1..rows*8
      line += eighths[std::clamp(level - (rows - 1 - r) * 8, 0, 8)];
    }
    line += std::string(width - cols.size(), ' ');
    lines.push_back(line);
  }
  return lines;
}

std::string bar_text(double frac, size_t width) {
  static const char* part[] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
  int filled = int(std::clamp(frac, 0.0, 1.0) * double(width) * 8);
  std::string bar;
  for (size_t i = 0; i < width; ++i) {
    int f = filled - int(i) * 8;
    bar += f >= 8 ? "█" : f > 0 ? part[f] : "·";
  }
  return bar;
}

std::string padded_name(const std::string& name) { return name + std::string(name.size() < 5 ? 5 - name.size() : 0, ' '); }
}  // namespace

size_t display_width(std::string_view s) {
  size_t cols = 0;
  for (size_t i = 0; i < s.size();) {
    if (size_t n = csi_length(s, i)) {
      i += n;
      continue;
    }
    if (!is_continuation(static_cast<unsigned char>(s[i]))) ++cols;
    ++i;
  }
  return cols;
}

std::string fit_width(std::string_view s, size_t width) {
  if (display_width(s) <= width) return std::string(s);
  std::string out;
  bool coloured = false;
  size_t cols = 0;
  for (size_t i = 0; i < s.size();) {
    if (size_t n = csi_length(s, i)) {
      out.append(s.substr(i, n));
      coloured = true;
      i += n;
      continue;
    }
    size_t len = 1;  // the code point's bytes
    while (i + len < s.size() && is_continuation(static_cast<unsigned char>(s[i + len]))) ++len;
    if (cols + 1 >= width) break;  // keep one column for the ellipsis
    out.append(s.substr(i, len));
    ++cols;
    i += len;
  }
  if (width > 0) out += "…";
  if (coloured) out += "\x1b[0m";
  return out;
}

std::vector<std::string> pack_fields(const std::vector<std::string>& fields, size_t width, const std::string& sep,
                                     size_t indent) {
  indent = std::min(indent, width / 2);
  std::vector<std::string> lines;
  std::string line;
  for (const auto& field : fields) {
    if (lines.empty() && line.empty()) {  // the first field has the whole first line
      line = fit_width(field, width);
      continue;
    }
    std::string f = fit_width(field, width - indent);
    if (display_width(line) + sep.size() + display_width(f) <= width) {
      line += sep + f;
    } else {
      lines.push_back(line);
      line = std::string(indent, ' ') + f;
    }
  }
  if (!line.empty()) lines.push_back(line);
  return lines;
}

void RateMeter::reset(double prior_items_per_s, double prior_seconds_per_step) {
  samples_.clear();
  prior_rate_ = prior_items_per_s;
  prior_sps_ = prior_seconds_per_step;
}

void RateMeter::update(int64_t step, int64_t items, double t) {
  if (step <= 0) return;
  if (!samples_.empty() && samples_.back().step >= step) samples_.pop_back();  // the same step again
  samples_.push_back({step, items, t});
  while (samples_.size() > kWindow + 1) samples_.pop_front();
}

double RateMeter::items_per_s() const {
  if (!has_window()) return prior_rate_;
  return double(samples_.back().items - samples_.front().items) / (samples_.back().t - samples_.front().t);
}

double RateMeter::seconds_per_step() const {
  if (has_window())
    return (samples_.back().t - samples_.front().t) / double(samples_.back().step - samples_.front().step);
  if (prior_sps_ >= 0) return prior_sps_;
  // One step: its time, warm-up and all (the only estimate there is).
  return samples_.empty() ? -1 : samples_.back().t / double(samples_.back().step);
}

double RateMeter::eta_s(int64_t steps) const {
  double sps = seconds_per_step();
  int64_t done = samples_.empty() ? 0 : samples_.back().step;
  return sps < 0 ? -1 : double(std::max<int64_t>(0, steps - done)) * sps;
}

double run_eta_seconds(double phase_eta_s, double rest_of_epoch_s, int64_t epochs_left, double epoch_s) {
  if (phase_eta_s < 0 || rest_of_epoch_s < 0) return -1;
  if (epochs_left <= 0) return phase_eta_s + rest_of_epoch_s;
  if (epoch_s < 0) return -1;
  return phase_eta_s + rest_of_epoch_s + double(epochs_left) * epoch_s;
}

std::vector<std::string> phase_lines(const PhaseState& p, size_t width, bool bar) {
  const std::string head = padded_name(p.name) + " ";
  const size_t max_bar = 30, min_bar = 10;
  if (!p.started) {
    // Before the phase starts (validation during training): no "0% 0/0".
    size_t bw = bar ? std::min(max_bar, width > head.size() + 8 ? width - head.size() - 8 : 0) : 0;
    std::string line = head + (bw ? "\x1b[2m" + bar_text(0, bw) + "\x1b[0m " : "") + "waiting";
    return {fit_width(line, width)};
  }
  double frac = p.steps ? double(p.step) / double(p.steps) : 0;
  char pct[64];
  std::snprintf(pct, sizeof pct, "%3d%% %lld/%lld", int(frac * 100), (long long)p.step, (long long)p.steps);
  std::vector<std::string> core = {pct, rate_text(p.items_per_s),
                                   format_duration(p.elapsed_s) + " < " + format_duration(p.eta_s)};
  std::vector<std::string> metrics;
  for (const auto& [k, v] : p.metrics) metrics.push_back(k + " " + v);
  if (!bar) {  // plain mode: one line, no width limit
    std::vector<std::string> all = core;
    all.insert(all.end(), metrics.begin(), metrics.end());
    return {head + join(all, "  ")};
  }
  auto bar_room = [&](const std::vector<std::string>& fields) -> long {
    return long(width) - long(head.size()) - 1 - long(display_width(join(fields, "  ")));
  };
  std::vector<std::string> first = core;
  first.insert(first.end(), metrics.begin(), metrics.end());
  std::vector<std::string> second;
  if (bar_room(first) < long(min_bar)) {  // the metrics go to a second line
    first = core;
    second = metrics;
  }
  while (first.size() > 1 && bar_room(first) < long(min_bar)) first.pop_back();  // then the times, the rate
  long room = bar_room(first);
  size_t bw = room >= 3 ? std::min<size_t>(max_bar, size_t(room)) : 0;
  std::vector<std::string> lines = {fit_width(head + (bw ? bar_text(frac, bw) + " " : "") + join(first, "  "), width)};
  if (!second.empty())
    for (auto& l : pack_fields(second, width > head.size() ? width - head.size() : width, "  ", 0))
      lines.push_back(fit_width(std::string(head.size(), ' ') + l, width));
  return lines;
}

std::vector<std::string> dashboard_lines(const DashboardState& s, size_t width, size_t max_rows) {
  std::vector<std::string> lines;
  std::vector<std::string> title = {"\x1b[1m" + s.title + "\x1b[0m"};
  if (s.epochs > 0) title.push_back("epoch " + std::to_string(s.epoch) + "/" + std::to_string(s.epochs));  // 0: before the first
  title.push_back("elapsed " + format_duration(s.elapsed_s));
  title.push_back("run ETA " + format_duration(s.run_eta_s));
  while (title.size() > 1 && display_width(join(title, "  ")) > width) title.pop_back();
  lines.push_back(fit_width(join(title, "  "), width));
  for (auto& l : phase_lines(s.train, width, true)) lines.push_back(l);
  if (s.show_valid)
    for (auto& l : phase_lines(s.valid, width, true)) lines.push_back(l);
  const int rows = 5;
  bool room = max_rows == 0 || lines.size() + rows <= max_rows;
  if (s.loss.empty() || !room || width < 20) return lines;
  // Two plots side by side (9 columns of labels each, 2 between) or the loss alone when narrow.
  bool two = !s.accuracy.empty() && width >= 60;
  size_t pw = std::min<size_t>(60, two ? (width - 20) / 2 : width - 9);
  auto a = block_plot(s.loss, pw, rows, "loss", false);
  std::vector<std::string> b;
  if (two) b = block_plot(s.accuracy, pw, rows, "acc", true);
  for (size_t r = 0; r < a.size(); ++r) {
    std::string line = "\x1b[36m" + a[r] + "\x1b[0m";
    if (two) line += "  \x1b[32m" + b[r] + "\x1b[0m";
    lines.push_back(fit_width(line, width));
  }
  return lines;
}

}  // namespace ember::train
