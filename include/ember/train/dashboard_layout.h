// The live dashboard's layout as pure functions: a state and a width in, the lines out. No clock,
// no terminal: train::Dashboard (dashboard.h) keeps the state, measures the time and the
// terminal's width and prints what these return. Every returned line fits the width it was given,
// counted in display columns (UTF-8 code points; ANSI escape sequences take none): wide terminals
// get longer bars and plots, narrow ones drop fields (metrics move to a second line, then the
// timings go, then the bar) and a line that still does not fit is cut with "…", never wrapped.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ember::train {

// Display columns of `s`: one per UTF-8 code point (the dashboard's block and box characters are
// all one column wide), none for ANSI CSI sequences (ESC [ ... final byte).
size_t display_width(std::string_view s);
// `s` cut to at most `width` columns; a cut line ends in "…" (and a colour reset if it had colour).
std::string fit_width(std::string_view s, size_t width);
// Greedy packing of fields, joined by `sep`, into lines of at most `width` columns; lines after the
// first start with `indent` spaces. A field wider than a line is cut with "…".
std::vector<std::string> pack_fields(const std::vector<std::string>& fields, size_t width, const std::string& sep = "  ",
                                     size_t indent = 2);

// Items per second and seconds per step over the last `kWindow` steps of a phase (a sliding
// window: a warm-up spread over several steps drops out, a changed rate shows within a few
// seconds), never counting the first step (its time holds the warm-up: the first batch's
// loading, kernel compilation). Until a second step exists it reports the prior (the same
// phase's settled values from the previous epoch), or nothing (< 0).
class RateMeter {
 public:
  static constexpr size_t kWindow = 32;
  void reset(double prior_items_per_s = -1, double prior_seconds_per_step = -1);
  // The phase has done `step` steps and `items` items after `t` seconds.
  void update(int64_t step, int64_t items, double t);
  double items_per_s() const;       // < 0: unknown
  double seconds_per_step() const;  // < 0: unknown
  // Seconds left for `steps` steps in all: (steps - step) * seconds_per_step; < 0: unknown.
  double eta_s(int64_t steps) const;

 private:
  struct Sample {
    int64_t step{}, items{};
    double t{};
  };
  bool has_window() const { return samples_.size() >= 2 && samples_.back().t > samples_.front().t; }
  std::deque<Sample> samples_;  // from step 1 on, at most kWindow + 1
  double prior_rate_ = -1, prior_sps_ = -1;
};

struct PhaseState {
  std::string name{};         // "train" or "valid"
  bool started = false;     // false: the bar reads "waiting"
  int64_t step = 0, steps = 0;
  double elapsed_s = 0;     // since the phase started; frozen when it ended
  double items_per_s = -1;  // smoothed (RateMeter); < 0: not known yet
  double eta_s = -1;        // time left in the phase; < 0: not known yet
  std::vector<std::pair<std::string, std::string>> metrics{};  // shown name -> value text
};

struct DashboardState {
  std::string title{};
  int64_t epoch = 0, epochs = 0;
  double elapsed_s = 0;   // since the fit started
  double run_eta_s = -1;  // time left for the whole run; < 0: not known yet
  PhaseState train{"train"}, valid{"valid"};
  bool show_valid = true;               // false: the run has no validation phase
  std::vector<double> loss{}, accuracy{};   // plot points (smoothed training loss, running accuracy)
};

// The live block: a title line, one or two lines per phase, and up to 5 rows of plots (left out
// when `max_rows` leaves no room for them; 0: no limit).
std::vector<std::string> dashboard_lines(const DashboardState& s, size_t width, size_t max_rows = 0);
// A phase as one or more lines of at most `width` columns, with a bar when `bar` (live mode).
std::vector<std::string> phase_lines(const PhaseState& p, size_t width, bool bar);
// The run ETA: the rest of the current phase, then the rest of this epoch (`rest_of_epoch_s`, e.g.
// the validation still to come), then `epochs_left` epochs of `epoch_s` each; < 0 when any part
// needed is unknown.
double run_eta_seconds(double phase_eta_s, double rest_of_epoch_s, int64_t epochs_left, double epoch_s);

}  // namespace ember::train
