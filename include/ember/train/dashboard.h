// The training dashboard and the HTML report.
//
// Live mode (a terminal): a block redrawn in place with ANSI escape codes (cursor up, clear to the
// end of the screen) at most 10 times a second: progress bars with ETA for train and valid, the
// current metrics and a small plot of the training loss and accuracy drawn with block characters.
// Finished epochs scroll above it. Plain mode (CI logs, pipes): one line per ~10% of a phase (or
// every 15 s) and one line per epoch. No dependency beyond the standard library.
//
// write_html_report: one self-contained HTML file with inline SVG plots (train vs valid loss and
// accuracy, learning rate) and the summary table; it opens in any browser without a network.
#pragma once

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>
#include <utility>
#include <vector>

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
  void message(const std::string& line);
  void finish();

 private:
  struct Phase {
    std::string name;
    int64_t steps = 0, step = 0, items = 0;
    std::chrono::steady_clock::time_point start;
    std::vector<std::pair<std::string, std::string>> metrics;
  };
  void redraw();
  void clear_block();
  std::string bar_line(const Phase& p) const;

  std::ostream& out_;
  bool live_;
  std::string title_;
  int64_t epoch_ = 0, epochs_ = 0;
  Phase train_, valid_;
  Phase* cur_ = nullptr;
  int lines_drawn_ = 0;
  std::chrono::steady_clock::time_point last_draw_{}, run_start_;
  int last_plain_decile_ = -1;
  std::vector<double> loss_pts_, acc_pts_;
  double eta_run_s_ = -1;
};

// "1:05" / "1:02:03".
std::string format_duration(double seconds);

// Writes the report (atomically). config: key/value settings shown at the top.
void write_html_report(const std::string& path, const Report& report, const std::string& title,
                       const std::map<std::string, std::string>& config);

}  // namespace ember::train
