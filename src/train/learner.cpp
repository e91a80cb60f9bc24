// The Learner's loop: epochs, metrics, scheduler, clipping, accumulation, dashboard, checkpoints
// (with resume and its settings check; the files themselves: checkpoint.cpp), early stopping, the
// metrics log and the report.
#include "ember/train/learner.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <limits>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ember/autocast.h"
#include "ember/dist/data_parallel.h"
#include "ember/data/dataset.h"
#include "ember/io/safetensors.h"
#include "ember/nn/loss.h"
#include "ember/ops.h"
#include "ember/train/dashboard.h"
#include "train/checkpoint.h"
#include "train/distributed_fit.h"

namespace ember::train {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

Learner& Learner::metrics(std::vector<MetricPtr> list) { metrics_ = std::move(list); return *this; }
Learner& Learner::checkpoints(std::string dir) { dir_ = std::move(dir); return *this; }
Learner& Learner::epochs(int64_t n) {
  if (n < 1) throw Error("Learner::epochs: need at least 1, got " + std::to_string(n));
  epochs_ = n;
  return *this;
}
Learner& Learner::seed(uint64_t s) { seed_ = s; return *this; }
Learner& Learner::scheduler(optim::LrScheduler& s, bool per_step) { sched_ = &s; sched_per_step_ = per_step; return *this; }
Learner& Learner::clip_grad_norm(double max_norm) { clip_ = max_norm; return *this; }
Learner& Learner::accumulate(int64_t n) {
  if (n < 1) throw Error("Learner::accumulate: need at least 1 batch, got " + std::to_string(n));
  accumulate_ = n;
  return *this;
}
Learner& Learner::early_stopping(EarlyStopping opts) { early_ = std::move(opts); return *this; }
Learner& Learner::resume(bool on) { resume_ = on; return *this; }
Learner& Learner::allow_config_change(bool on) { allow_config_change_ = on; return *this; }
Learner& Learner::loss(LossFn fn) { loss_ = std::move(fn); return *this; }
Learner& Learner::forward(ForwardFn fn) { forward_ = std::move(fn); return *this; }
Learner& Learner::dashboard(DashboardMode mode, std::ostream& out) { dash_ = mode; out_ = &out; return *this; }
Learner& Learner::title(std::string t) { title_ = std::move(t); return *this; }
Learner& Learner::config(std::map<std::string, std::string> kv) { config_ = std::move(kv); return *this; }
Learner& Learner::precision(DType dtype, optim::GradScalerOptions scaler) {
  if (dtype != DType::F32 && dtype != DType::BF16 && dtype != DType::F16)
    throw Error(fmt::format("Learner::precision: expected float32, bfloat16 or float16, got {}", dtype_name(dtype)));
  optim::GradScaler check(scaler);  // validates the options now, not at fit
  precision_ = dtype;
  scaler_options_ = scaler;
  return *this;
}
Learner& Learner::log_every(int64_t n) { log_every_ = std::max<int64_t>(1, n); return *this; }
Learner& Learner::max_steps_per_epoch(int64_t n) { max_steps_ = n; return *this; }

namespace {
Array default_loss(const Array& out, const Array& targets) {
  if (is_integral(targets.dtype())) return nn::cross_entropy(out, targets);
  return nn::mse_loss(out, targets);
}

std::vector<MetricPtr> instances(const std::vector<MetricPtr>& list) {
  std::vector<MetricPtr> out = {loss()};
  for (const auto& m : list)
    if (m && m->name() != "loss") out.push_back(m->clone());
  return out;
}

std::string metric_text(const Metric& m) {
  std::ostringstream os;
  if (m.is_fraction()) os << std::fixed << std::setprecision(2) << m.value() * 100 << "%";
  else os << std::fixed << std::setprecision(4) << m.value();
  return os.str();
}

json record_json(const EpochRecord& r) {
  json j = {{"type", "epoch"}, {"epoch", r.epoch}};
  for (const auto& [k, v] : r.values) j[k] = v;
  return j;
}
// A metrics.jsonl step line: the smoothed loss and the learning rate of that step.
json step_json(const StepPoint& p) {
  json j = {{"type", "step"}, {"step", p.step}, {"loss", p.loss}};
  if (!std::isnan(p.lr)) j["lr"] = p.lr;
  return j;
}
EpochRecord record_from(const json& j) {
  EpochRecord r;
  r.epoch = j.at("epoch").get<int64_t>();
  for (auto it = j.begin(); it != j.end(); ++it)
    if (it.value().is_number() && it.key() != "epoch") r.values[it.key()] = it.value().get<double>();
  return r;
}

// The global generator's seed for an epoch (dropout without a seed, other unseeded draws).
uint64_t epoch_seed(uint64_t seed, int64_t epoch) { return data::mix64(seed ^ 0x4c4541524eULL) + uint64_t(epoch); }

// One setting that differs between a checkpoint and this run.
struct Change {
  std::string key, old_value, new_value;
};
std::string setting_text(const json& v) { return v.is_null() ? "(none)" : v.is_string() ? v.get<std::string>() : v.dump(); }

// The differences between the settings stored in a checkpoint and this run's, key by key.
std::vector<Change> differences(const json& stored, const json& now) {
  std::vector<Change> out;
  std::set<std::string> keys;
  for (auto it = stored.begin(); it != stored.end(); ++it) keys.insert(it.key());
  for (auto it = now.begin(); it != now.end(); ++it) keys.insert(it.key());
  for (const auto& k : keys) {
    json a = stored.contains(k) ? stored.at(k) : json(nullptr), b = now.contains(k) ? now.at(k) : json(nullptr);
    if (a != b) out.push_back({k, setting_text(a), setting_text(b)});
  }
  return out;
}

checkpoint::Bytes as_bytes(const std::string& text) { return checkpoint::Bytes(text.begin(), text.end()); }

// The metrics log line of recorded setting changes.
json change_line(const json& change) { return {{"type", "config_change"}, {"after_epoch", change.at("after_epoch")}, {"changes", change.at("changes")}}; }
}  // namespace

std::map<std::string, double> Learner::evaluate_source(BatchSource& source) {
  LossFn lossf = loss_ ? loss_ : LossFn(default_loss);
  auto ms = instances(metrics_);
  bool was_training = model_->is_training();
  model_->eval();
  NoGradGuard no_grad;
  std::optional<AutocastGuard> mixed;
  if (precision_ != DType::F32) mixed.emplace(AutocastOptions{.dtype = precision_});
  source.start(0);
  Array x, y;
  while (source.next(x, y)) {
    Array out = forward_(x);
    Array l = lossf(out, y);
    ember::eval({out, l});
    StepData sd{out, y, l.item<double>(), x.size(0)};
    for (auto& m : ms) m->update(sd);
  }
  model_->train(was_training);
  std::map<std::string, double> res;
  for (auto& m : ms) res[m->name()] = m->value();
  return res;
}

Report Learner::fit_sources(BatchSource& train, BatchSource* valid) {
  auto t_fit = Clock::now();
  LossFn lossf = loss_ ? loss_ : LossFn(default_loss);
  Report rep;
  rep.run_dir = dir_;
  rep.precision = precision_;
  // Mixed precision: one autocast scope over the fit (backward passes switch it off themselves;
  // optimizer updates and metrics see f32 parameters and gradients, which no policy changes).
  std::optional<AutocastGuard> mixed;
  if (precision_ != DType::F32) mixed.emplace(AutocastOptions{.dtype = precision_});
  std::optional<optim::GradScaler> scaler;
  if (precision_ == DType::F16) scaler.emplace(scaler_options_);
  std::vector<MetricPtr> tm = instances(metrics_), vm = instances(metrics_);

  // Early stopping: direction from the metric's name.
  bool higher_better = false;
  if (early_) {
    std::string key = early_->metric;
    for (const char* p : {"train_", "valid_"})
      if (key.rfind(p, 0) == 0) key = key.substr(std::strlen(p));
    for (auto& m : tm)
      if (m->name() == key) higher_better = m->higher_is_better();
  }
  double best = std::numeric_limits<double>::quiet_NaN();
  int64_t bad_epochs = 0, start_epoch = 0, global_step = 0, sched_steps = 0;

  fs::path dir(dir_);
  const bool writer = distributed::is_writer(comm_);  // data parallel: rank 0 alone prints and writes
  std::vector<std::string> notes;  // shown once the dashboard is up
  json config_changes = json::array();
  // The settings a resume must match (config "epochs" and epochs() may change).
  json settings = {{"seed", seed_}, {"accumulate", accumulate_}, {"clip_grad_norm", clip_ ? json(*clip_) : json(nullptr)},
                   {"max_steps_per_epoch", max_steps_}, {"log_every", log_every_}};
  for (const auto& [k, v] : config_)
    if (k != "epochs") settings["config." + k] = v;
  if (precision_ != DType::F32) settings["precision"] = std::string(dtype_name(precision_));
  if (writer && !dir_.empty()) {
    fs::create_directories(dir / "checkpoints");
    auto removed = checkpoint::remove_temporaries(dir);
    if (!removed.empty()) {
      std::string list;
      for (const auto& r : removed) list += " " + r;
      notes.push_back("checkpoint: removed " + std::to_string(removed.size()) +
                      " leftover temporary file(s) of an interrupted write:" + list);
    }
  }
  checkpoint::ResumePoint rp;
  bool have_checkpoint = resume_ && !dir_.empty() && checkpoint::find_resume_point(dir, rp);
  notes.insert(notes.end(), rp.notes.begin(), rp.notes.end());
  if (have_checkpoint) {
    const json& j = rp.state;
    json stored = j.contains("settings") ? j.at("settings") : json::object();
    std::vector<Change> diff = differences(stored, settings);
    if (!diff.empty() && !allow_config_change_) {
      std::string text = "Learner::resume: the checkpoint in " + dir_ + " (epoch " + std::to_string(j.at("epoch").get<int64_t>()) +
                         ") was made with other settings (checkpoint -> this run):";
      for (const auto& c : diff) text += "\n  " + (c.key.rfind("config.", 0) == 0 ? c.key.substr(7) : c.key) + ": " + c.old_value + " -> " + c.new_value;
      text += "\nresume with the checkpoint's settings, or allow the change (Learner::allow_config_change, ember train --allow-config-change)";
      throw Error(text);
    }
    int64_t stored_epochs = j.value("epochs", int64_t(0));
    json change = {{"after_epoch", j.at("epoch")}, {"changes", json::object()}};
    if (stored_epochs != 0 && stored_epochs != epochs_)
      change["changes"]["epochs"] = {{"old", std::to_string(stored_epochs)}, {"new", std::to_string(epochs_)}};
    for (const auto& c : diff)
      change["changes"][c.key.rfind("config.", 0) == 0 ? c.key.substr(7) : c.key] = {{"old", c.old_value}, {"new", c.new_value}};
    if (j.contains("config_changes")) config_changes = j.at("config_changes");

    const std::string model_file = j.at("files").at("model").at("path").get<std::string>();
    const std::string opt_file = j.at("files").at("optimizer").at("path").get<std::string>();
    try {
      model_->load_state_dict(io::parse(rp.model.data(), rp.model.size()).tensors, true);
    } catch (const Error& e) {
      throw Error(std::string(e.what()) + " (loading " + (dir / model_file).string() + ")");
    }
    io::SafetensorsFile of = io::parse(rp.optimizer.data(), rp.optimizer.size());
    auto kind = of.metadata.find("ember.optimizer");
    if (kind != of.metadata.end() && kind->second != opt_->type_name())
      throw Error("Learner::resume: " + (dir / opt_file).string() + " holds " + kind->second + " state, not " + opt_->type_name());
    opt_->load_state_dict(of.tensors);
    if (scaler && j.contains("grad_scaler")) {
      const json& gs = j.at("grad_scaler");
      scaler->load_state_dict({{"scale", full(Shape{}, gs.at("scale").get<double>(), {DType::F64})},
                               {"growth_tracker", full(Shape{}, gs.at("growth_tracker").get<double>(), {DType::F64})},
                               {"skipped_steps", full(Shape{}, gs.at("skipped_steps").get<double>(), {DType::F64})}});
    }
    start_epoch = j.at("epoch").get<int64_t>();
    global_step = j.at("global_step").get<int64_t>();
    sched_steps = j.at("scheduler_steps").get<int64_t>();
    if (sched_) {
      if (sched_->epoch() != 0) throw Error("Learner::resume: the scheduler must be fresh (it has stepped already)");
      for (int64_t i = 0; i < sched_steps; ++i) sched_->step();
    }
    for (const auto& r : j.at("history")) rep.history.push_back(record_from(r));
    for (const auto& p : j.at("steps")) {  // [step, loss] or, since the lr is recorded, [step, loss, lr]
      StepPoint sp{p.at(0).get<int64_t>(), p.at(1).get<double>()};
      if (p.size() > 2 && p.at(2).is_number()) sp.lr = p.at(2).get<double>();
      rep.steps.push_back(sp);
    }
    const json& es = j.at("early_stopping");
    best = es.at("best").is_null() ? std::numeric_limits<double>::quiet_NaN() : es.at("best").get<double>();
    bad_epochs = es.at("bad_epochs").get<int64_t>();
    rep.stopped_early = j.at("stopped_early").get<bool>();
    rep.resumed = true;
    if (!change["changes"].empty()) {
      config_changes.push_back(change);
      std::string text = "settings changed on resume:";
      for (auto it = change["changes"].begin(); it != change["changes"].end(); ++it)
        text += " " + it.key() + " " + it.value()["old"].get<std::string>() + " -> " + it.value()["new"].get<std::string>() + ";";
      notes.push_back(text.substr(0, text.size() - 1) + " (recorded in checkpoint.json and metrics.jsonl)");
    }
  } else if (writer && !dir_.empty()) {
    // A fresh run: the checkpoints of an earlier run in this folder would otherwise be mixed
    // with this run's on a later resume.
    auto old_epochs = checkpoint::epochs_on_disk(dir);
    bool had = fs::exists(dir / "checkpoint.json") || !old_epochs.empty();
    for (int64_t e : old_epochs) checkpoint::remove_epoch(dir, e);
    fs::remove(dir / "checkpoint.json");
    if (resume_) notes.push_back("no complete checkpoint in " + dir_ + ": starting from the beginning");
    else if (had) notes.push_back("a fresh run: removed the checkpoints of an earlier run in " + dir_);
  }
  // Data parallel: every rank has loaded the same checkpoint (or none); rank 0's values win anyway.
  std::optional<dist::DataParallel> dp;
  if (comm_) dp.emplace(*comm_, *model_, dp_opts_);
  // The metrics log: rewritten from the restored history, then appended to.
  std::ofstream log;
  if (writer && !dir_.empty()) {
    log.open(dir / "metrics.jsonl", std::ios::trunc);
    size_t si = 0;
    for (const auto& rec : rep.history) {
      for (; si < rep.steps.size() && rep.steps[si].step <= int64_t(rec.get("global_step")); ++si)
        log << step_json(rep.steps[si]).dump() << "\n";
      log << record_json(rec).dump() << "\n";
      for (const auto& c : config_changes)
        if (c.at("after_epoch").get<int64_t>() == rec.epoch) log << change_line(c).dump() << "\n";
    }
    log.flush();
  }

  std::ostringstream null_sink;
  bool live = dash_ == DashboardMode::Live || (dash_ == DashboardMode::Auto && out_ == &std::cout && is_terminal(1));
  std::ostream& out = dash_ == DashboardMode::Off || !writer ? static_cast<std::ostream&>(null_sink) : *out_;
  Dashboard dash(out, live, precision_ == DType::F32 ? title_ : title_ + " [" + std::string(dtype_name(precision_)) + "]");
  dash.show_validation(valid != nullptr);
  for (const auto& n : notes) dash.message(n);
  if (precision_ == DType::BF16) dash.message("mixed precision: bfloat16 autocast, f32 master weights");
  if (scaler)
    dash.message(fmt::format("mixed precision: float16 autocast, f32 master weights, dynamic loss scaling (scale {})",
                             scaler->scale_value()));
  if (rep.resumed) dash.message("resuming " + dir_ + " after epoch " + std::to_string(start_epoch));
  for (const auto& p : rep.steps) dash.plot_point(p.loss);

  std::vector<double> epoch_times;
  for (int64_t epoch = start_epoch; epoch < epochs_ && !rep.stopped_early; ++epoch) {
    auto t_epoch = Clock::now();
    // Random ops (dropout) draw different values on each rank of a data-parallel run, as on one
    // process each item of the global batch gets its own mask; rank 0 keeps the single-process seed.
    const int rank = comm_ ? comm_->rank() : 0;
    manual_seed(rank == 0 ? epoch_seed(seed_, epoch) : data::mix64(epoch_seed(seed_, epoch) ^ uint64_t(rank)));
    model_->train();
    for (auto& m : tm) m->reset();
    train.start(uint64_t(epoch));
    int64_t nb = int64_t(train.batches());
    if (max_steps_ > 0) nb = std::min(nb, max_steps_);
    distributed::check_same_steps(comm_, nb, "training", epoch + 1);
    dash.phase("train", epoch + 1, epochs_, nb);
    Gradients acc;
    int64_t in_acc = 0, step = 0, items = 0;
    double ema = std::numeric_limits<double>::quiet_NaN();
    double lr_used = opt_->lr();
    double step_lr = lr_used;  // the lr of the last optimizer step (per-step schedules change it)
    Array x, y;
    while (step < nb && train.next(x, y)) {
      Array outp = forward_(x);
      Array l = lossf(outp, y);
      Array scaled = accumulate_ > 1 ? mul(l, 1.0 / double(accumulate_)) : l;
      if (scaler) scaled = scaler->scale(scaled);
      Array outd = outp.detach();
      ember::eval({l, outd});  // forward once; backward reuses the realized values
      double lv = l.item<double>();
      if (in_acc == 0) acc = scaled.backward();
      else scaled.backward_into(acc);
      ++in_acc;
      if (in_acc == accumulate_ || step + 1 == nb) {
        // The mean over ranks first (every rank then sees the same gradients, so a loss-scaler
        // skip is the same decision everywhere), then unscaling, clipping and the step.
        if (dp) dp->all_reduce_gradients(acc);
        if (scaler) {
          // Unscaled before clipping; a step with inf/NaN gradients is skipped and the scale backs off.
          std::vector<nn::ParamRef> params = model_->parameters();
          scaler->unscale(acc, params);
          if (clip_) optim::clip_grad_norm(acc, params, *clip_);
          scaler->step(*opt_, acc, params);
        } else {
          if (clip_) optim::clip_grad_norm(acc, model_->parameters(), *clip_);
          opt_->step(acc);
        }
        step_lr = opt_->lr();
        acc = Gradients();
        in_acc = 0;
        if (sched_ && sched_per_step_) {
          sched_->step();
          ++sched_steps;
        }
      }
      int64_t bs = x.size(0);
      StepData sd{outd, y, lv, bs};
      for (auto& m : tm) m->update(sd);
      ++step;
      ++global_step;
      items += bs;
      ema = std::isnan(ema) ? lv : 0.9 * ema + 0.1 * lv;
      if (global_step % log_every_ == 0) {
        rep.steps.push_back({global_step, ema, step_lr});
        if (log.is_open()) log << step_json(rep.steps.back()).dump() << "\n";
        double acc_now = -1;
        for (auto& m : tm)
          if (m->name() == "accuracy") acc_now = m->value();
        dash.plot_point(ema, acc_now);
      }
      std::vector<std::pair<std::string, std::string>> shown;
      for (auto& m : tm) shown.emplace_back(m->name(), metric_text(*m));
      dash.progress(step, items, shown, step == nb);
    }
    double train_s = std::chrono::duration<double>(Clock::now() - t_epoch).count();
    EpochRecord rec;
    rec.epoch = epoch + 1;
    for (auto& m : tm) rec.values["train_" + m->name()] = m->value();
    rec.values["lr"] = lr_used;
    items = distributed::average_over_ranks(comm_, rec.values, "train_", tm, items);
    rec.values["items_per_s"] = double(items) / std::max(train_s, 1e-9);
    rec.values["wait_fraction"] = train.wait_seconds() / std::max(train_s, 1e-9);
    rec.values["train_steps"] = double(step);
    rec.values["global_step"] = double(global_step);
    if (scaler) {
      rec.values["loss_scale"] = scaler->scale_value();
      rec.values["skipped_steps"] = double(scaler->skipped_steps());
    }

    if (valid) {
      for (auto& m : vm) m->reset();
      model_->eval();
      NoGradGuard no_grad;
      valid->start(uint64_t(epoch));
      int64_t vb = int64_t(valid->batches()), vstep = 0, vitems = 0;
      dash.phase("valid", epoch + 1, epochs_, vb);
      while (valid->next(x, y)) {
        Array outp = forward_(x);
        Array l = lossf(outp, y);
        ember::eval({outp, l});
        StepData sd{outp, y, l.item<double>(), x.size(0)};
        for (auto& m : vm) m->update(sd);
        ++vstep;
        vitems += x.size(0);
        std::vector<std::pair<std::string, std::string>> shown;
        for (auto& m : vm) shown.emplace_back(m->name(), metric_text(*m));
        dash.progress(vstep, vitems, shown, vstep == vb);
      }
      for (auto& m : vm) rec.values["valid_" + m->name()] = m->value();
      distributed::average_over_ranks(comm_, rec.values, "valid_", vm, vitems);
      model_->train();
    }
    if (sched_ && !sched_per_step_) {
      sched_->step();
      ++sched_steps;
    }
    rec.values["epoch_s"] = std::chrono::duration<double>(Clock::now() - t_epoch).count();
    rep.history.push_back(rec);

    if (early_) {
      auto it = rec.values.find(early_->metric);
      if (it == rec.values.end()) throw Error("early stopping: no metric named '" + early_->metric + "' in the epoch record");
      double v = it->second;
      bool better = std::isnan(best) || (higher_better ? v > best + early_->min_delta : v < best - early_->min_delta);
      if (better) {
        best = v;
        bad_epochs = 0;
      } else if (++bad_epochs >= early_->patience) {
        rep.stopped_early = true;
      }
    }
    if (log.is_open()) {
      log << record_json(rec).dump() << "\n";
      log.flush();
    }
    if (writer && !dir_.empty()) {
      // The checkpoint sequence (docs/semantics.md § What a checkpoint guarantees after a crash):
      // the epoch's data files, its state file, last.safetensors, then checkpoint.json (the
      // commit point), each written durably; then the files of older epochs are removed.
      std::string stem = checkpoint::epoch_stem(epoch + 1);
      checkpoint::Bytes model_bytes =
          io::serialize(model_->state_dict(), {{"format", "pt"}, {"ember.module", model_->type_name()}});
      auto model_entry = checkpoint::write_file(dir, stem + ".model.safetensors", model_bytes);
      auto opt_entry = checkpoint::write_file(
          dir, stem + ".optim.safetensors", io::serialize(opt_->state_dict(), {{"ember.optimizer", opt_->type_name()}}));
      json j;
      j["format"] = "ember.checkpoint.v2";
      j["epoch"] = epoch + 1;
      j["epochs"] = epochs_;
      j["files"] = {{"model", checkpoint::to_json(model_entry)}, {"optimizer", checkpoint::to_json(opt_entry)}};
      j["last"] = checkpoint::to_json({"last.safetensors", model_entry.size, model_entry.crc32});
      j["model"] = model_entry.path;
      j["optimizer"] = opt_entry.path;
      j["scheduler_steps"] = sched_steps;
      j["global_step"] = global_step;
      j["seed"] = seed_;
      j["ranks"] = comm_ ? comm_->size() : 1;  // a record only: nothing in a checkpoint is per rank
      j["rng"] = {{"manual_seed_next_epoch", epoch_seed(seed_, epoch + 1)}};
      j["history"] = json::array();
      for (const auto& r : rep.history) j["history"].push_back(record_json(r));
      j["steps"] = json::array();
      for (const auto& p : rep.steps)
        j["steps"].push_back(std::isnan(p.lr) ? json{p.step, p.loss} : json{p.step, p.loss, p.lr});
      j["early_stopping"] = {{"best", std::isnan(best) ? json(nullptr) : json(best)}, {"bad_epochs", bad_epochs}};
      j["stopped_early"] = rep.stopped_early;
      j["config"] = config_;
      j["settings"] = settings;
      j["config_changes"] = config_changes;
      j["precision"] = std::string(dtype_name(precision_));
      if (scaler)
        j["grad_scaler"] = {{"scale", scaler->scale_value()}, {"growth_tracker", scaler->growth_tracker()},
                            {"skipped_steps", scaler->skipped_steps()}};
      checkpoint::Bytes state = as_bytes(j.dump(1));
      checkpoint::write_file(dir, stem + ".json", state);
      checkpoint::write_file(dir, "last.safetensors", model_bytes);
      checkpoint::write_file(dir, "checkpoint.json", state);  // the commit point
      for (int64_t e : checkpoint::epochs_on_disk(dir))  // keep the files of the last two epochs
        if (e != epoch + 1 && e != epoch) checkpoint::remove_epoch(dir, e);
    }
    epoch_times.push_back(rec.values["epoch_s"]);
    double mean_epoch = 0;
    for (double t : epoch_times) mean_epoch += t / double(epoch_times.size());
    dash.epoch_done(rec, mean_epoch * double(epochs_ - epoch - 1));
    if (rep.stopped_early)
      dash.message("early stopping: " + early_->metric + " has not improved for " + std::to_string(bad_epochs) + " epochs");
  }
  dash.finish();
  rep.epochs_done = int64_t(rep.history.size());
  rep.skipped_steps = scaler ? scaler->skipped_steps() : 0;
  rep.seconds = std::chrono::duration<double>(Clock::now() - t_fit).count();
  out << "\n" << rep.summary(dash.line_width());
  if (writer && !dir_.empty()) {
    std::map<std::string, std::string> shown_config = config_;
    shown_config.emplace("precision", std::string(dtype_name(precision_)));
    write_html_report((dir / "report.html").string(), rep, title_, shown_config);
    out << "run folder " << dir_ << ":\n  last.safetensors, checkpoint.json, metrics.jsonl, report.html\n";
  }
  out << std::flush;
  return rep;
}

}  // namespace ember::train
