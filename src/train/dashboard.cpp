// The live terminal dashboard (ANSI escape codes) and its plain-text fallback: the state, the
// clock and the terminal size; dashboard_layout.cpp turns the state into lines.
#include "ember/train/dashboard.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <ostream>
#include <set>
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

Dashboard::Dashboard(std::ostream& out, bool live, std::string title)
    : out_(out), live_(live), start_(std::chrono::steady_clock::now()) {
  state_.title = std::move(title);
}

double Dashboard::now() const {
  if (clock_) return clock_();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

size_t Dashboard::line_width() const {
  if (!live_) return 0;
  size_t cols = fixed_cols_;
  winsize ws{};
  if (!cols && (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 || ::ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0))
    cols = ws.ws_col;
  if (!cols)
    if (const char* c = std::getenv("COLUMNS")) cols = size_t(std::max(0L, std::strtol(c, nullptr, 10)));
  if (!cols) cols = 80;
  return std::max<size_t>(cols, 2) - 1;
}

size_t Dashboard::terminal_rows() const {
  if (fixed_rows_) return fixed_rows_;
  winsize ws{};
  if ((::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 || ::ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0) && ws.ws_row)
    return ws.ws_row;
  if (const char* r = std::getenv("LINES"))
    if (long v = std::strtol(r, nullptr, 10); v > 0) return size_t(v);
  return 24;
}

void Dashboard::phase(const std::string& name, int64_t epoch, int64_t epochs, int64_t steps) {
  state_.epoch = epoch;
  state_.epochs = epochs;
  cur_valid_ = name == "valid";
  PhaseState& p = current();
  p = PhaseState{name, true, 0, steps, 0, -1, -1, {}};
  if (cur_valid_) valid_meter_.reset(last_valid_rate_, last_valid_sps_);
  else {
    train_meter_.reset(last_train_rate_, last_train_sps_);
    state_.valid = PhaseState{"valid"};  // "waiting" until this epoch's validation starts
  }
  p.items_per_s = meter().items_per_s();
  p.eta_s = meter().eta_s(steps);
  phase_start_ = now();
  active_ = true;
  last_plain_decile_ = -1;
  progress(0, 0, {}, true);
}

void Dashboard::progress(int64_t step, int64_t items, const std::vector<std::pair<std::string, std::string>>& metrics,
                         bool force) {
  if (!active_) return;
  PhaseState& p = current();
  double t = now() - phase_start_;
  meter().update(step, items, t);
  p.step = step;
  p.elapsed_s = t;
  p.items_per_s = meter().items_per_s();
  p.eta_s = meter().eta_s(p.steps);
  if (!metrics.empty()) p.metrics = metrics;
  if (step >= p.steps && p.steps > 0) {  // the phase is done: keep its settled values for the next epoch
    (cur_valid_ ? last_valid_rate_ : last_train_rate_) = p.items_per_s;
    (cur_valid_ ? last_valid_sps_ : last_train_sps_) = meter().seconds_per_step();
    if (cur_valid_) last_valid_s_ = t;
  }
  if (live_) {
    if (!force && now() - last_draw_ < 0.1) return;
    redraw();
    return;
  }
  // Plain: a line per 10% of the training phase (and at least every 15 s); validation is quick.
  if (cur_valid_) return;
  int decile = p.steps ? int(step * 10 / p.steps) : 10;
  if (step == 0 || (decile == last_plain_decile_ && now() - last_draw_ < 15)) return;
  if (decile == 10 && !force) return;  // the end of the phase is reported by epoch_done
  last_plain_decile_ = decile;
  last_draw_ = now();
  out_ << "epoch " << state_.epoch << "/" << state_.epochs << " " << phase_lines(p, 0, false).front() << "\n"
       << std::flush;
}

void Dashboard::update_run_eta() {
  double t = now();
  state_.elapsed_s = t;
  // A future epoch: its training steps at the current rate and a validation as long as the last
  // one; before any rate is known, the mean epoch time so far.
  double epoch_s = -1;
  if (train_meter_.seconds_per_step() >= 0) {
    epoch_s = train_meter_.seconds_per_step() * double(state_.train.steps) + std::max(0.0, last_valid_s_);
  } else if (!epoch_times_.empty()) {
    epoch_s = 0;
    for (double e : epoch_times_) epoch_s += e / double(epoch_times_.size());
  }
  // Within a phase: its ETA, and during training this epoch's validation (as long as the last one
  // took); between epochs (after epoch_done) nothing of the finished epoch is left.
  const PhaseState& p = cur_valid_ ? state_.valid : state_.train;
  double phase_eta = active_ ? p.eta_s : 0;
  double rest = active_ && !cur_valid_ && state_.show_valid ? std::max(0.0, last_valid_s_) : 0;
  int64_t epochs_left = state_.epochs - state_.epoch;
  double eta = run_eta_seconds(phase_eta, rest, epochs_left, epoch_s);
  if (eta >= 0) {
    known_eta_ = eta, known_eta_t_ = t;
  } else if (known_eta_ >= 0) {  // a phase's first step (no rate yet): the last estimate counts down
    eta = std::max(0.0, known_eta_ - (t - known_eta_t_));
  }
  state_.run_eta_s = eta;
}

void Dashboard::plot_point(double loss, double accuracy) {
  auto& lp = state_.loss;
  auto& ap = state_.accuracy;
  lp.push_back(loss);
  if (accuracy >= 0) ap.push_back(accuracy);
  if (lp.size() > 4096) {  // keep memory bounded: halve the resolution
    std::vector<double> a, b;
    for (size_t i = 0; i + 1 < lp.size(); i += 2) a.push_back((lp[i] + lp[i + 1]) / 2);
    for (size_t i = 0; i + 1 < ap.size(); i += 2) b.push_back((ap[i] + ap[i + 1]) / 2);
    lp = std::move(a);
    ap = std::move(b);
  }
}

void Dashboard::clear_block() {
  // Rows on screen now: a line drawn narrower than the terminal takes one; if the terminal has
  // since been narrowed (and reflowed the lines), more.
  size_t cols = line_width() + 1, rows = 0;
  for (size_t w : drawn_widths_) rows += std::max<size_t>(1, (w + cols - 1) / cols);
  if (rows > 0) out_ << "\x1b[" << rows << "F\x1b[J";
  drawn_widths_.clear();
}

void Dashboard::redraw() {
  last_draw_ = now();
  update_run_eta();
  size_t rows = terminal_rows();
  std::vector<std::string> lines = dashboard_lines(state_, line_width(), rows > 2 ? rows - 2 : 1);
  std::string text;
  std::vector<size_t> widths;
  for (const auto& l : lines) {
    text += l + "\n";
    widths.push_back(display_width(l));
  }
  clear_block();
  out_ << text << std::flush;
  drawn_widths_ = std::move(widths);
}

std::vector<std::string> epoch_line_fields(const EpochRecord& rec, int64_t epochs, double eta_s) {
  auto value = [](const std::string& k, double v) {
    std::ostringstream s;
    if (k.find("accuracy") != std::string::npos) s << std::fixed << std::setprecision(2) << v * 100 << "%";
    else if (k.size() >= 4 && k.compare(k.size() - 4, 4, "loss") == 0) s << std::fixed << std::setprecision(4) << v;
    else s << std::setprecision(4) << v;
    return s.str();
  };
  auto shown = [](std::string name) {  // "top3_accuracy" -> "top3_acc": the line fits 120 columns
    size_t at = name.rfind("accuracy");
    if (at != std::string::npos && at + 8 == name.size()) name.replace(at, 8, "acc");
    return name;
  };
  std::vector<std::string> fields = {"epoch " + std::to_string(rec.epoch) + "/" + std::to_string(epochs)};
  std::set<std::string> done = {"epoch_s", "items_per_s", "wait_fraction", "lr", "global_step", "train_steps"};
  for (const std::string prefix : {"train_", "valid_"}) {  // "train loss 0.5389 acc 79.92%"
    std::string field;
    auto add = [&](const std::string& k, double v) {
      // append, not a chain of +: g++ 12 reports a false -Wrestrict on the chain (an error in CI)
      field.append(" ").append(shown(k.substr(prefix.size()))).append(" ").append(value(k, v));
      done.insert(k);
    };
    if (rec.values.count(prefix + "loss")) add(prefix + "loss", rec.values.at(prefix + "loss"));
    for (const auto& [k, v] : rec.values)
      if (k.rfind(prefix, 0) == 0 && !done.count(k)) add(k, v);
    if (!field.empty()) fields.push_back(prefix.substr(0, 5) + field);
  }
  for (const auto& [k, v] : rec.values)  // the rest (loss_scale, skipped_steps, ...)
    if (!done.count(k)) fields.push_back(k + " " + value(k, v));
  std::ostringstream lr;
  lr << std::setprecision(3) << rec.get("lr");
  fields.push_back("lr " + lr.str());
  fields.push_back(std::to_string(int64_t(rec.get("items_per_s"))) + " items/s");
  fields.push_back(format_duration(rec.get("epoch_s")) + " (ETA " + format_duration(eta_s) + ")");
  return fields;
}

void Dashboard::epoch_done(const EpochRecord& rec, double eta_s) {
  epoch_times_.push_back(rec.get("epoch_s"));
  active_ = false;
  std::vector<std::string> fields = epoch_line_fields(rec, state_.epochs, eta_s);
  if (!live_) {
    std::string line;
    for (size_t i = 0; i < fields.size(); ++i) line += (i ? "  " : "") + fields[i];
    out_ << line << "\n" << std::flush;
    return;
  }
  clear_block();
  for (const auto& l : pack_fields(fields, line_width(), "  ", 2)) out_ << l << "\n";
  redraw();
}

void Dashboard::message(const std::string& line) {
  if (!live_) {
    out_ << line << "\n" << std::flush;
    return;
  }
  std::vector<std::string> words;
  std::istringstream in(line);
  for (std::string w; in >> w;) words.push_back(w);
  clear_block();
  for (const auto& l : pack_fields(words, line_width(), " ", 2)) out_ << l << "\n";
  redraw();
}

void Dashboard::finish() {
  if (live_) {
    clear_block();
    out_ << std::flush;
  }
  active_ = false;
}

}  // namespace ember::train
