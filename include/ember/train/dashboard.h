// The training dashboard and the HTML report.
//
// Live mode (a terminal): a block redrawn in place with ANSI escape codes (cursor up, clear to the
// end of the screen) at most 10 times a second: progress bars with ETA for train and valid, the
// current metrics and a small plot of the training loss and accuracy drawn with block characters.
// Finished epochs scroll above it. Every line fits the terminal's width (dashboard_layout.h lays
// the lines out); rates leave out each phase's first step and ETAs follow the current rate. Plain mode (CI logs, pipes): one line per ~10% of a phase (or
// every 15 s) and one line per epoch. No dependency beyond the standard library.
//
// write_html_report: one self-contained HTML file with inline SVG plots (train vs valid loss and
// accuracy, learning rate) and the summary table; it opens in any browser without a network.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ember/train/dashboard_layout.h"
#include "ember/train/learner.h"

namespace ember::train {

// True when `fd` is a terminal that understands ANSI codes (TERM set and not "dumb").
bool is_terminal(int fd);

class Dashboard {
 public:
  Dashboard(std::ostream& out, bool live, std::string title);
  // Starts a phase ("train" or "valid") of `steps` batches in epoch `epoch` (1-based) of `epochs`.
  void phase(const std::string& name, int64_t epoch, int64_t epochs, int64_t steps);
  // Progress within the phase; throttled unless `force`. metrics: shown name -> value text.
  void progress(int64_t step, int64_t items, const std::vector<std::pair<std::string, std::string>>& metrics,
                bool force = false);
  // Points for the live plots (training loss and running accuracy, by global step).
  void plot_point(double loss, double accuracy = -1);
  // Prints a finished epoch above the live block; eta_s: estimated time left for the whole run.
  void epoch_done(const EpochRecord& rec, double eta_s);
  // Prints a line above the live block (wrapped at words to the terminal's width in live mode).
  void message(const std::string& line);
  void finish();
  // false: the run has no validation phase (no "valid" bar).
  void show_validation(bool on) { state_.show_valid = on; }
  // The columns a live line may use: the terminal's width (TIOCGWINSZ on stdout or stderr, else
  // $COLUMNS, else 80), less one so that no line ends in the last column (where terminals differ
  // on when they wrap). Read at every redraw, so a resized terminal is followed. 0 in plain mode.
  size_t line_width() const;
  // For tests: a fixed terminal size instead of the real one, and a clock (seconds) instead of
  // the steady clock.
  void set_terminal_size(size_t columns, size_t rows) { fixed_cols_ = columns, fixed_rows_ = rows; }
  void set_clock(std::function<double()> seconds) { clock_ = std::move(seconds); }
  const DashboardState& state() const { return state_; }

 private:
  double now() const;
  void update_run_eta();
  void redraw();
  void clear_block();
  PhaseState& current() { return cur_valid_ ? state_.valid : state_.train; }
  RateMeter& meter() { return cur_valid_ ? valid_meter_ : train_meter_; }
  size_t terminal_rows() const;

  std::ostream& out_;
  bool live_;
  DashboardState state_;
  bool active_ = false, cur_valid_ = false;
  double phase_start_ = 0;
  RateMeter train_meter_, valid_meter_;
  // The settled values of the last finished phases, for the next epoch's first readings and ETAs.
  double last_train_rate_ = -1, last_train_sps_ = -1, last_valid_rate_ = -1, last_valid_sps_ = -1;
  double last_valid_s_ = -1;         // how long the last validation took
  std::vector<double> epoch_times_;  // finished epochs of this fit
  double known_eta_ = -1, known_eta_t_ = 0;  // the last run ETA that could be computed, and when
  std::vector<size_t> drawn_widths_;  // display widths of the block's lines on screen
  double last_draw_ = -1e300;
  int last_plain_decile_ = -1;
  size_t fixed_cols_ = 0, fixed_rows_ = 0;
  std::function<double()> clock_;
  std::chrono::steady_clock::time_point start_;
};

// The fields of a finished epoch's line: "epoch 1/3", "train loss 0.5389 acc 79.92%", "valid
// loss ...", other values, "lr 0.001", "17477 items/s", "0:01 (ETA 0:02)" (eta_s: the run's).
std::vector<std::string> epoch_line_fields(const EpochRecord& rec, int64_t epochs, double eta_s);

// "1:05" / "1:02:03".
std::string format_duration(double seconds);

// Axis ticks for the report's plots: a step of 1, 2 or 5 times a power of ten, the smallest with
// which [lo, hi] is covered by at most `max_intervals` intervals; the axis runs from the first
// tick (at or below lo) to the last (at or above hi). `integer`: the step is at least 1 (epochs).
struct AxisTicks {
  double step = 1, lo = 0, hi = 1;
  std::vector<double> values{};  // lo, lo + step, ..., hi
};
AxisTicks nice_ticks(double lo, double hi, int max_intervals = 5, bool integer = false);
// A tick's label with just the digits the step needs ("0.65", "0.0002", "60" for 0.6 with scale
// 100); zero reads "0".
std::string tick_label(double value, double step, double scale = 1);

// Writes the report (atomically). config: key/value settings shown at the top.
void write_html_report(const std::string& path, const Report& report, const std::string& title,
                       const std::map<std::string, std::string>& config);

}  // namespace ember::train
