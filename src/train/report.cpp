// The summary table and the self-contained HTML report with inline SVG line plots (nice axis
// ticks, the legend above the plot area).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <set>
#include <sstream>

#include "ember/error.h"
#include "ember/train/dashboard.h"

namespace ember::train {

namespace {
bool is_fraction_key(const std::string& k) { return k.find("accuracy") != std::string::npos || k == "wait_fraction"; }

std::string cell(const std::string& key, double v) {
  std::ostringstream os;
  if (is_fraction_key(key)) os << std::fixed << std::setprecision(2) << v * 100 << "%";
  else if (key == "epoch_s") os << format_duration(v);
  else if (key == "items_per_s") os << int64_t(v);
  else if (key == "lr") os << std::setprecision(3) << v;
  else os << std::fixed << std::setprecision(4) << v;
  return os.str();
}

std::vector<std::string> columns(const Report& r) {
  std::vector<std::string> keys;
  std::set<std::string> seen;
  // Metrics first (train then valid), then the run statistics.
  for (const char* prefix : {"train_", "valid_"})
    for (const auto& rec : r.history)
      for (const auto& [k, v] : rec.values)
        if (k.rfind(prefix, 0) == 0 && k != "train_steps" && seen.insert(k).second) keys.push_back(k);
  for (const char* k : {"lr", "items_per_s", "epoch_s"})
    for (const auto& rec : r.history)
      if (rec.values.count(k) && seen.insert(k).second) keys.push_back(k);
  return keys;
}

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else if (c == '"') o += "&quot;";
    else o += c;
  }
  return o;
}

struct Series {
  std::string name, color;
  std::vector<std::pair<double, double>> pts;
  bool thin = false;
};

// The legend's swatch: the series' own line style, with a marker where the series has markers.
std::string swatch(const Series& s, bool markers, double x, double y) {
  std::ostringstream o;
  o << "<line x1='" << x << "' x2='" << x + 22 << "' y1='" << y << "' y2='" << y << "' stroke='" << s.color
    << "' stroke-width='" << (s.thin ? 1 : 2) << "' stroke-opacity='" << (s.thin ? 0.45 : 1) << "'/>";
  if (markers) o << "<circle cx='" << x + 11 << "' cy='" << y << "' r='3' fill='" << s.color << "'/>";
  return o.str();
}

// A line chart: axes with nice ticks, one polyline per series (thin and faded for dense per-step
// series, solid with markers for per-epoch ones), the legend in a row between the title and the
// plot area so that it never covers the data.
std::string svg_chart(const std::string& title, const std::vector<Series>& series, const std::string& xlabel,
                      bool percent) {
  const double W = 460, H = 270, L = 66, R = 14, T = 44, B = 40;
  double x0 = 1e300, x1 = -1e300, y0 = 1e300, y1 = -1e300;
  for (const auto& s : series)
    for (auto [x, y] : s.pts) {
      if (!std::isfinite(y)) continue;
      x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H << "' viewBox='0 0 " << W << " " << H
    << "' font-family='sans-serif' font-size='11'>\n";
  o << "<rect width='100%' height='100%' fill='white'/>\n";
  o << "<text x='" << W / 2 << "' y='16' text-anchor='middle' font-size='13' font-weight='bold'>" << esc(title) << "</text>\n";
  if (x0 > x1) {
    o << "<text x='" << W / 2 << "' y='" << H / 2 << "' text-anchor='middle' fill='#888'>no data</text></svg>\n";
    return o.str();
  }
  AxisTicks xt = nice_ticks(x0, x1, 5, true), yt = nice_ticks(y0, y1, 5);
  auto X = [&](double x) { return L + (x - xt.lo) / (xt.hi - xt.lo) * (W - L - R); };
  auto Y = [&](double y) { return H - B - (y - yt.lo) / (yt.hi - yt.lo) * (H - T - B); };
  o << "<rect x='" << L << "' y='" << T << "' width='" << W - L - R << "' height='" << H - T - B
    << "' fill='none' stroke='#999'/>\n";
  for (double yv : yt.values)
    o << "<line x1='" << L << "' x2='" << W - R << "' y1='" << Y(yv) << "' y2='" << Y(yv) << "' stroke='#eee'/>"
      << "<text x='" << L - 4 << "' y='" << Y(yv) + 4 << "' text-anchor='end'>"
      << (percent ? tick_label(yv, yt.step, 100) + "%" : tick_label(yv, yt.step)) << "</text>\n";
  for (double xv : xt.values)
    o << "<line x1='" << X(xv) << "' x2='" << X(xv) << "' y1='" << H - B << "' y2='" << H - B + 4 << "' stroke='#999'/>"
      << "<text x='" << X(xv) << "' y='" << H - B + 15 << "' text-anchor='middle'>" << tick_label(xv, xt.step)
      << "</text>\n";
  o << "<text x='" << (L + W - R) / 2 << "' y='" << H - 6 << "' text-anchor='middle'>" << esc(xlabel) << "</text>\n";
  double lx = L;
  for (const auto& s : series) {
    if (s.pts.empty()) continue;
    bool markers = s.pts.size() <= 40 && !s.thin;
    o << "<polyline fill='none' stroke='" << s.color << "' stroke-width='" << (s.thin ? 1 : 2)
      << "' stroke-opacity='" << (s.thin ? 0.45 : 1) << "' points='";
    for (auto [x, y] : s.pts)
      if (std::isfinite(y)) o << X(x) << "," << Y(y) << " ";
    o << "'/>\n";
    if (markers)
      for (auto [x, y] : s.pts)
        if (std::isfinite(y)) o << "<circle cx='" << X(x) << "' cy='" << Y(y) << "' r='3' fill='" << s.color << "'/>";
    o << swatch(s, markers, lx, 32) << "<text x='" << lx + 27 << "' y='" << 36 << "'>" << esc(s.name) << "</text>\n";
    lx += 27 + 6.5 * double(s.name.size()) + 16;  // ~6.5 px per character at 11 px sans-serif
  }
  o << "</svg>\n";
  return o.str();
}
}  // namespace

AxisTicks nice_ticks(double lo, double hi, int max_intervals, bool integer) {
  if (!std::isfinite(lo) || !std::isfinite(hi) || lo > hi || max_intervals < 1)
    throw Error("nice_ticks: needs finite lo <= hi and max_intervals >= 1, got [" + std::to_string(lo) + ", " +
                std::to_string(hi) + "] and " + std::to_string(max_intervals));
  if (hi - lo <= 1e-12 * std::max(1.0, std::fabs(hi))) {  // one value: a range around it
    double d = integer ? 0.5 : std::max(std::fabs(lo) * 0.1, 1e-9);
    lo -= d, hi += d;
  }
  const double eps = 1e-9;
  int e = int(std::floor(std::log10((hi - lo) / max_intervals))) - 1;
  for (;; ++e)
    for (double m : {1.0, 2.0, 5.0}) {
      double step = m * std::pow(10.0, e);
      if (integer && step < 1) continue;
      double first = std::floor(lo / step + eps), last = std::ceil(hi / step - eps);
      if (last - first > max_intervals) continue;
      AxisTicks t;
      t.step = step;
      for (double i = first; i <= last; ++i) t.values.push_back(i * step);
      t.lo = t.values.front(), t.hi = t.values.back();
      if (t.values.size() == 1) t.hi = t.lo + step, t.values.push_back(t.hi);
      return t;
    }
}

std::string tick_label(double value, double step, double scale) {
  double v = value * scale, s = std::fabs(step * scale);
  if (std::fabs(v) < s * 1e-6) return "0";
  int decimals = s > 0 ? std::max(0, -int(std::floor(std::log10(s) + 1e-9))) : 0;
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", decimals, v);
  return b;
}

std::string Report::summary(size_t max_width) const {
  std::vector<std::string> keys = columns(*this);
  std::vector<std::vector<std::string>> rows;  // header, then one row per epoch; column 0: the epoch
  std::vector<std::string> head = {"epoch"};
  head.insert(head.end(), keys.begin(), keys.end());
  rows.push_back(head);
  for (const auto& rec : history) {
    std::vector<std::string> row = {std::to_string(rec.epoch)};
    for (const auto& k : keys) row.push_back(rec.values.count(k) ? cell(k, rec.values.at(k)) : "");
    rows.push_back(row);
  }
  std::vector<size_t> w(head.size(), 0);
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) w[i] = std::max(w[i], row[i].size());
  // Column groups that fit max_width, each after the epoch column.
  std::vector<std::vector<size_t>> groups;
  for (size_t i = 1; i < w.size(); ++i) {
    size_t used = w[0];
    if (!groups.empty())
      for (size_t c : groups.back()) used += 2 + w[c];
    if (groups.empty() || (max_width > 0 && used + 2 + w[i] > max_width)) groups.push_back({});
    groups.back().push_back(i);
  }
  if (groups.empty()) groups.push_back({});
  std::ostringstream os;
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<size_t> cols = {0};
    cols.insert(cols.end(), groups[g].begin(), groups[g].end());
    if (g) os << "\n";
    for (size_t r = 0; r < rows.size(); ++r) {
      for (size_t i = 0; i < cols.size(); ++i) os << (i ? "  " : "") << std::setw(int(w[cols[i]])) << rows[r][cols[i]];
      os << "\n";
      if (r == 0) {
        size_t total = 0;
        for (size_t c : cols) total += w[c] + 2;
        os << std::string(total - 2, '-') << "\n";
      }
    }
  }
  os << "precision: " << dtype_name(precision);
  if (precision == DType::F16) os << " (dynamic loss scaling, " << skipped_steps << " step(s) skipped)";
  os << "\n";
  return os.str();
}

void write_html_report(const std::string& path, const Report& r, const std::string& title,
                       const std::map<std::string, std::string>& config) {
  auto epoch_series = [&](const std::string& key, const std::string& name, const std::string& color) {
    Series s{name, color, {}, false};
    for (const auto& rec : r.history)
      if (rec.values.count(key)) s.pts.emplace_back(double(rec.epoch), rec.values.at(key));
    return s;
  };
  // Step losses are placed on the epoch axis (step / steps per epoch).
  Series steps{"train (steps)", "#1f77b4", {}, true};
  double steps_per_epoch = r.history.empty() ? 0 : r.history.front().get("train_steps", 0);
  for (const auto& p : r.steps)
    if (steps_per_epoch > 0) steps.pts.emplace_back(double(p.step) / steps_per_epoch, p.loss);

  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>" << esc(title) << "</title>\n<style>"
    << "body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse;margin:12px 0}"
    << "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f3f3f3}"
    << ".plots{display:flex;flex-wrap:wrap;gap:12px}.kv td{text-align:left}</style></head><body>\n";
  o << "<h1>" << esc(title) << "</h1>\n<table class='kv'>";
  for (const auto& [k, v] : config) o << "<tr><td>" << esc(k) << "</td><td>" << esc(v) << "</td></tr>";
  o << "<tr><td>epochs run</td><td>" << r.epochs_done << (r.stopped_early ? " (stopped early)" : "")
    << (r.resumed ? " (resumed)" : "") << "</td></tr></table>\n<div class='plots'>\n";
  o << svg_chart("Loss", {steps, epoch_series("train_loss", "train", "#1f77b4"), epoch_series("valid_loss", "valid", "#d62728")},
                 "epoch", false);
  bool has_acc = false;
  for (const auto& rec : r.history) has_acc |= rec.values.count("train_accuracy") > 0;
  if (has_acc)
    o << svg_chart("Accuracy",
                   {epoch_series("train_accuracy", "train", "#1f77b4"), epoch_series("valid_accuracy", "valid", "#d62728")},
                   "epoch", true);
  // The learning rate per step where the steps recorded it (per-step schedules), else per epoch.
  // An epoch's "lr" is the one its first step used: it joins the step series at that step.
  Series lr_steps{"lr (steps)", "#2ca02c", {}, false};
  for (const auto& p : r.steps)
    if (steps_per_epoch > 0 && std::isfinite(p.lr)) lr_steps.pts.emplace_back(double(p.step) / steps_per_epoch, p.lr);
  if (!lr_steps.pts.empty()) {
    for (const auto& rec : r.history)
      if (rec.values.count("lr")) lr_steps.pts.emplace_back(double(rec.epoch - 1) + 1 / steps_per_epoch, rec.get("lr"));
    std::stable_sort(lr_steps.pts.begin(), lr_steps.pts.end());
  }
  o << svg_chart("Learning rate", {lr_steps.pts.empty() ? epoch_series("lr", "lr", "#2ca02c") : lr_steps}, "epoch", false);
  o << "</div>\n<h2>Epochs</h2>\n<table><tr><th>epoch</th>";
  std::vector<std::string> keys = columns(r);
  for (const auto& k : keys) o << "<th>" << esc(k) << "</th>";
  o << "</tr>\n";
  for (const auto& rec : r.history) {
    o << "<tr><td>" << rec.epoch << "</td>";
    for (const auto& k : keys) o << "<td>" << (rec.values.count(k) ? cell(k, rec.values.at(k)) : "") << "</td>";
    o << "</tr>\n";
  }
  o << "</table>\n<p style='color:#888'>Written by Ember's train::Learner.</p>\n</body></html>\n";
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw Error("report: cannot write " + tmp);
    f << o.str();
    if (!f.flush()) throw Error("report: cannot write " + tmp);
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace ember::train
