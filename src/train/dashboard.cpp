// The live terminal dashboard (ANSI escape codes) and its plain-text fallback.
#include "ember/train/dashboard.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <ostream>
#include <sstream>

namespace ember::train {

bool is_terminal(int fd) {
  if (!::isatty(fd)) return false;
  const char* term = std::getenv("TERM");
  return term && *term && std::strcmp(term, "dumb") != 0;
}

std::string format_duration(double s) {
  if (!(s >= 0) || s > 1e7) return "--:--";
  auto t = int64_t(s + 0.5);
  char buf[32];
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", (long long)(t / 3600), (long long)(t / 60 % 60), (long long)(t % 60));
  else std::snprintf(buf, sizeof buf, "%lld:%02lld", (long long)(t / 60), (long long)(t % 60));
  return buf;
}

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A plot of the last `width` values (downsampled), `rows` rows high, with block characters.
std::vector<std::string> block_plot(const std::vector<double>& values, int width, int rows, const std::string& label,
                                    bool percent) {
  static const char* eighths[] = {" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  std::vector<double> cols;
  if (!values.empty()) {
    size_t n = values.size();
    size_t w = std::min<size_t>(n, size_t(width));
    for (size_t c = 0; c < w; ++c) {
      size_t lo = c * n / w, hi = std::max(lo + 1, (c + 1) * n / w);
      double s = 0;
      for (size_t i = lo; i < hi; ++i) s += values[i];
      cols.push_back(s / double(hi - lo));
    }
  }
  double lo = cols.empty() ? 0 : *std::min_element(cols.begin(), cols.end());
  double hi = cols.empty() ? 1 : *std::max_element(cols.begin(), cols.end());
  if (hi - lo < 1e-12) hi = lo + 1e-12;
  auto fmt = [&](double v) {
    std::ostringstream os;
    os << std::fixed << std::setprecision(percent ? 1 : 3) << (percent ? v * 100 : v) << (percent ? "%" : "");
    std::string s = os.str();
    return std::string(s.size() < 7 ? 7 - s.size() : 0, ' ') + s;
  };
  std::vector<std::string> lines;
  for (int r = 0; r < rows; ++r) {
    std::string line = r == 0 ? fmt(hi) : r == rows - 1 ? fmt(lo) : (r == rows / 2 ? std::string(7 - std::min<size_t>(7, label.size()), ' ') + label.substr(0, 7) : std::string(7, ' '));
    line += " │";
    for (double v : cols) {
      int level = int(std::lround((v - lo) / (hi - lo) * (rows * 8 - 1))) + 1;  // 1..rows*8
      int cell = level - (rows - 1 - r) * 8;
      line += eighths[std::clamp(cell, 0, 8)];
    }
    line += std::string(size_t(width) - cols.size(), ' ');
    lines.push_back(line);
  }
  return lines;
}
}  // namespace

Dashboard::Dashboard(std::ostream& out, bool live, std::string title)
    : out_(out), live_(live), title_(std::move(title)), run_start_(Clock::now()) {}

void Dashboard::phase(const std::string& name, int64_t epoch, int64_t epochs, int64_t steps) {
  epoch_ = epoch;
  epochs_ = epochs;
  Phase& p = name == "valid" ? valid_ : train_;
  p = Phase{name, steps, 0, 0, Clock::now(), {}};
  if (name == "train") valid_ = Phase{"valid", 0, 0, 0, Clock::now(), {}};
  cur_ = &p;
  last_plain_decile_ = -1;
  progress(0, 0, {}, true);
}

void Dashboard::progress(int64_t step, int64_t items, const std::vector<std::pair<std::string, std::string>>& metrics,
                         bool force) {
  if (!cur_) return;
  cur_->step = step;
  cur_->items = items;
  if (!metrics.empty()) cur_->metrics = metrics;
  if (live_) {
    if (!force && since(last_draw_) < 0.1) return;
    redraw();
    return;
  }
  // Plain: a line per 10% of the training phase (and at least every 15 s); validation is quick.
  if (cur_ == &valid_) return;
  int decile = cur_->steps ? int(step * 10 / cur_->steps) : 10;
  if (step == 0 || (decile == last_plain_decile_ && since(last_draw_) < 15)) return;
  if (decile == 10 && !force) return;  // the end of the phase is reported by epoch_done
  last_plain_decile_ = decile;
  last_draw_ = Clock::now();
  out_ << "epoch " << epoch_ << "/" << epochs_ << " " << bar_line(*cur_) << "\n" << std::flush;
}

std::string Dashboard::bar_line(const Phase& p) const {
  std::ostringstream os;
  double frac = p.steps ? double(p.step) / double(p.steps) : 0;
  double el = since(p.start);
  double eta = p.step ? el / double(p.step) * double(p.steps - p.step) : -1;
  os << std::left << std::setw(5) << p.name << " ";
  if (live_) {
    const int width = 28;
    int filled = int(frac * width * 8);
    static const char* part[] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
    std::string bar;
    for (int i = 0; i < width; ++i) {
      int f = filled - i * 8;
      bar += f >= 8 ? "█" : f > 0 ? part[f] : "·";
    }
    os << bar << " ";
  }
  os << std::right << std::setw(3) << int(frac * 100) << "% " << p.step << "/" << p.steps;
  if (p.step) {
    os << "  " << int64_t(double(p.items) / std::max(el, 1e-9)) << " items/s  " << format_duration(el) << " < "
       << format_duration(eta);
  }
  for (const auto& [k, v] : p.metrics) os << "  " << k << " " << v;
  return os.str();
}

void Dashboard::plot_point(double loss, double accuracy) {
  loss_pts_.push_back(loss);
  if (accuracy >= 0) acc_pts_.push_back(accuracy);
  if (loss_pts_.size() > 4096) {  // keep memory bounded: halve the resolution
    std::vector<double> a, b;
    for (size_t i = 0; i + 1 < loss_pts_.size(); i += 2) a.push_back((loss_pts_[i] + loss_pts_[i + 1]) / 2);
    for (size_t i = 0; i + 1 < acc_pts_.size(); i += 2) b.push_back((acc_pts_[i] + acc_pts_[i + 1]) / 2);
    loss_pts_ = std::move(a);
    acc_pts_ = std::move(b);
  }
}

void Dashboard::clear_block() {
  if (lines_drawn_ > 0) out_ << "\x1b[" << lines_drawn_ << "F\x1b[J";
  lines_drawn_ = 0;
}

void Dashboard::redraw() {
  last_draw_ = Clock::now();
  std::ostringstream os;
  int lines = 0;
  os << "\x1b[1m" << title_ << "\x1b[0m  epoch " << epoch_ << "/" << epochs_ << "  elapsed "
     << format_duration(since(run_start_));
  if (eta_run_s_ >= 0) os << "  run ETA " << format_duration(eta_run_s_);
  os << "\n";
  ++lines;
  os << bar_line(train_) << "\n";
  os << bar_line(valid_) << "\n";
  lines += 2;
  if (!loss_pts_.empty()) {
    auto a = block_plot(loss_pts_, 40, 5, "loss", false);
    auto b = block_plot(acc_pts_, 40, 5, "acc", true);
    for (size_t r = 0; r < a.size(); ++r) {
      os << "\x1b[36m" << a[r] << "\x1b[0m";
      if (!acc_pts_.empty()) os << "  \x1b[32m" << b[r] << "\x1b[0m";
      os << "\n";
      ++lines;
    }
  }
  clear_block();
  out_ << os.str() << std::flush;
  lines_drawn_ = lines;
}

void Dashboard::epoch_done(const EpochRecord& rec, double eta_s) {
  eta_run_s_ = eta_s;
  std::ostringstream os;
  os << "epoch " << rec.epoch << "/" << epochs_;
  auto pct = [](double v) {
    std::ostringstream s;
    s << std::fixed << std::setprecision(2) << v * 100 << "%";
    return s.str();
  };
  for (const auto& [k, v] : rec.values) {
    if (k == "epoch_s" || k == "items_per_s" || k == "wait_fraction" || k == "lr" || k == "global_step" ||
        k == "train_steps")
      continue;
    std::ostringstream s;
    if (k.find("accuracy") != std::string::npos) s << pct(v);
    else s << std::setprecision(4) << v;
    os << "  " << k << " " << s.str();
  }
  os << "  lr " << std::setprecision(3) << rec.get("lr") << "  " << int64_t(rec.get("items_per_s")) << " items/s  "
     << format_duration(rec.get("epoch_s")) << "  (ETA " << format_duration(eta_s) << ")";
  message(os.str());
}

void Dashboard::message(const std::string& line) {
  if (live_) {
    clear_block();
    out_ << line << "\n";
    redraw();
  } else {
    out_ << line << "\n" << std::flush;
  }
}

void Dashboard::finish() {
  if (live_) {
    clear_block();
    out_ << std::flush;
  }
  cur_ = nullptr;
}

}  // namespace ember::train
