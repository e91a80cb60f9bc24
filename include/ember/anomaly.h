// Anomaly detection: a debug mode that finds the op that first produced a NaN or an infinity.
// While it is on, every floating-point node is computed as its own kernel and its output is
// checked; the first node whose output holds NaN/inf while none of its inputs does (log(0), 0/0,
// exp overflow, sqrt(-1), a gradient of sqrt at 0, ...) fails, and the next read or eval throws
// an ember::Error naming the op, its output's shape and dtype, how many values are NaN/inf and
// the user's line (for a gradient: "in the backward of sqrt created at model.cpp:12"). Values that
// only carry a NaN/inf along from an input (data the user gave, a constant) are not reported.
//
//   ember::DetectAnomalyGuard anomaly;        // or EMBER_DETECT_ANOMALY=1, or set_detect_anomaly(true)
//   auto loss = train_step(model, batch);     // throws at the read: "... log (at model.cpp:12) ..."
//
// The switch is process-wide, as PyTorch's AnomalyMode is: Ember computes nodes on device queue
// threads and may realize a thread's graph from another one (automatic evaluation, a read), so a
// per-thread switch would depend on which thread planned the work. The mode is read once per
// realization (work planned before the switch changed runs as it was planned). Off (the default)
// it costs a branch per realization, read, eval, op and backward step. Docs: docs/semantics.md,
// "Anomaly detection".
#pragma once

namespace ember {

// On when EMBER_DETECT_ANOMALY=1 was set at start-up, or after set_detect_anomaly(true).
bool detect_anomaly_enabled();
void set_detect_anomaly(bool on);

// Turns anomaly detection on (or `on`) for its lifetime, then restores the previous state.
class DetectAnomalyGuard {
 public:
  explicit DetectAnomalyGuard(bool on = true) : previous_(detect_anomaly_enabled()) { set_detect_anomaly(on); }
  ~DetectAnomalyGuard() { set_detect_anomaly(previous_); }
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace ember
