// report.html and the summary table: nice axis ticks (1, 2, 5 x 10^k, hand-computed cases), tick
// labels with just the digits the step needs, the legend outside the plot area, distinct
// swatches for the per-step and per-epoch training loss, the learning rate per step where the
// steps recorded it (metrics.jsonl and checkpoint.json too), and the summary split to a width.
#include <gtest/gtest.h>

#include <ember/ember.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "ember/train/dashboard.h"
#include "train/fixtures.h"

namespace ember::train {
namespace {

namespace fs = std::filesystem;

void expect_ticks(double lo, double hi, double step, std::vector<double> values, bool integer = false) {
  AxisTicks t = nice_ticks(lo, hi, 5, integer);
  EXPECT_DOUBLE_EQ(t.step, step) << "[" << lo << ", " << hi << "]";
  ASSERT_EQ(t.values.size(), values.size()) << "[" << lo << ", " << hi << "]";
  for (size_t i = 0; i < values.size(); ++i) EXPECT_NEAR(t.values[i], values[i], step * 1e-9) << i;
  EXPECT_DOUBLE_EQ(t.lo, t.values.front());
  EXPECT_DOUBLE_EQ(t.hi, t.values.back());
}

TEST(ReportTest, NiceTicksByHand) {
  // 0.342 / 5 = 0.068: 0.05 needs 8 intervals (12..20 x 0.05), 0.1 needs 4 (6..10 x 0.1).
  expect_ticks(0.633, 0.975, 0.1, {0.6, 0.7, 0.8, 0.9, 1.0});
  // 0.000762 / 5 = 0.00015: 0.0002 covers it in 4 intervals (0.000762 / 0.0002 = 3.81).
  expect_ticks(0, 0.000762, 0.0002, {0, 0.0002, 0.0004, 0.0006, 0.0008});
  // 2.09 / 5 = 0.418: 0.2 needs 11 intervals (1..12), 0.5 needs 5 (0 to 2.5).
  expect_ticks(0.21, 2.3, 0.5, {0, 0.5, 1.0, 1.5, 2.0, 2.5});
  // Across zero: step 2 needs 6 intervals (-2..4 x 2), 5 needs 3.
  expect_ticks(-3.2, 7.9, 5, {-5, 0, 5, 10});
  // A value on a tick stays the end of the axis: 0.5 .. 1.0 in 0.1 steps.
  expect_ticks(0.5, 1.0, 0.1, {0.5, 0.6, 0.7, 0.8, 0.9, 1.0});
  // Epochs (integer steps): [0.03, 2] -> 0, 1, 2; one epoch -> 0, 1, 2 around it; 1..12 -> step 5.
  expect_ticks(0.03, 2, 1, {0, 1, 2}, true);
  expect_ticks(1, 1, 1, {0, 1, 2}, true);
  expect_ticks(1, 12, 5, {0, 5, 10, 15}, true);
  // One value: a range of 10% either side, 0.45 .. 0.55 (0.02 would need 6 intervals, 22..28).
  expect_ticks(0.5, 0.5, 0.05, {0.45, 0.5, 0.55});
  EXPECT_THROW(nice_ticks(2, 1), Error);
  EXPECT_THROW(nice_ticks(0, NAN), Error);
}

TEST(ReportTest, TickLabelsHaveJustTheDigitsNeeded) {
  EXPECT_EQ(tick_label(0.65, 0.05), "0.65");
  EXPECT_EQ(tick_label(0.7, 0.05), "0.70");  // the axis's labels share the step's decimals
  EXPECT_EQ(tick_label(0.0002, 0.0002), "0.0002");
  EXPECT_EQ(tick_label(0.0008, 0.0002), "0.0008");
  EXPECT_EQ(tick_label(0.30000000000000004, 0.1), "0.3");
  EXPECT_EQ(tick_label(2.5, 0.5), "2.5");
  EXPECT_EQ(tick_label(15, 5), "15");
  EXPECT_EQ(tick_label(0, 0.0002), "0");
  EXPECT_EQ(tick_label(3e-18, 0.1), "0");  // rounding noise at zero
  EXPECT_EQ(tick_label(-5, 5), "-5");
  EXPECT_EQ(tick_label(0.6, 0.1, 100), "60");   // percent axes
  EXPECT_EQ(tick_label(0.65, 0.05, 100), "65");
}

Report hand_report(bool step_lr) {
  Report r;
  double acc[] = {0.633, 0.81, 0.975}, loss[] = {0.9, 0.5, 0.3}, lr[] = {0.001, 0.0005, 0.0001};
  for (int e = 0; e < 3; ++e) {
    EpochRecord rec;
    rec.epoch = e + 1;
    rec.values = {{"train_accuracy", acc[e]}, {"valid_accuracy", acc[e] - 0.01}, {"train_loss", loss[e]},
                  {"valid_loss", loss[e] + 0.05}, {"lr", lr[e]}, {"train_steps", 10}, {"items_per_s", 1000},
                  {"epoch_s", 2}, {"global_step", double(10 * (e + 1))}};
    r.history.push_back(rec);
  }
  for (int s = 2; s <= 30; s += 2) {
    StepPoint p{s, 1.0 / s};
    if (step_lr) p.lr = 0.001 * std::pow(0.9, s);
    r.steps.push_back(p);
  }
  r.epochs_done = 3;
  return r;
}

std::string read_all(const fs::path& p) {
  std::ifstream f(p);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

std::string write_report(const Report& r, const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("ember_report_" + name + "_" + std::to_string(::getpid()) + ".html");
  write_html_report(p.string(), r, "test", {{"model", "mlp"}});
  std::string text = read_all(p);
  fs::remove(p);
  return text;
}

// The SVG of the chart titled `title`.
std::string chart(const std::string& html, const std::string& title) {
  size_t t = html.find(">" + title + "</text>");
  EXPECT_NE(t, std::string::npos) << title;
  size_t start = html.rfind("<svg", t), end = html.find("</svg>", t);
  return html.substr(start, end - start);
}

TEST(ReportTest, HtmlTicksLegendAndSwatches) {
  std::string html = write_report(hand_report(true), "ticks");
  // Accuracy 0.623 .. 0.975: ticks 60% .. 100% every 10, no "63.3%" or "97.5%".
  std::string accuracy = chart(html, "Accuracy");
  for (const char* label : {">60%<", ">70%<", ">80%<", ">90%<", ">100%<"}) EXPECT_NE(accuracy.find(label), std::string::npos) << label;
  EXPECT_EQ(accuracy.find("63.3"), std::string::npos);
  // Every label of every axis has at most as many decimals as 0.0002 (the lr axis).
  std::regex label(">(-?[0-9]+(\\.[0-9]+)?)%?</text>");
  int labels = 0;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), label); it != std::sregex_iterator(); ++it, ++labels)
    EXPECT_LE((*it)[2].length(), 5) << (*it)[0];
  EXPECT_GT(labels, 20);
  // The legend sits in its own row above the plot area (which starts at y = 44).
  std::string loss = chart(html, "Loss");
  std::smatch m;
  for (const char* name : {"train \\(steps\\)", "train", "valid"}) {
    ASSERT_TRUE(std::regex_search(loss, m, std::regex("<text x='[0-9.]+' y='([0-9.]+)'>" + std::string(name) + "</text>")))
        << name;
    EXPECT_LT(std::stod(m[1]), 44) << name;
  }
  EXPECT_NE(loss.find("<rect x='66' y='44'"), std::string::npos);
  // Swatches: the per-step loss thin and faded, the per-epoch loss solid with a marker.
  ASSERT_TRUE(std::regex_search(loss, m, std::regex("<line [^>]*stroke-width='1' stroke-opacity='0.45'/><text[^>]*>train \\(steps\\)<")));
  ASSERT_TRUE(std::regex_search(
      loss, m, std::regex("<line [^>]*stroke='#1f77b4' stroke-width='2' stroke-opacity='1'/><circle [^>]*/><text[^>]*>train<")));
  // The learning rate per step: 15 points from the steps and each epoch's first step (3), in order.
  std::string lr = chart(html, "Learning rate");
  EXPECT_NE(lr.find(">lr (steps)<"), std::string::npos);
  ASSERT_TRUE(std::regex_search(lr, m, std::regex("points='([^']*)'")));
  std::string pts = m[1];
  EXPECT_EQ(std::count(pts.begin(), pts.end(), ','), 18);
  std::istringstream xs(pts);
  double last_x = -1, x, y;
  char comma;
  while (xs >> x >> comma >> y) {
    EXPECT_GT(x, last_x);
    last_x = x;
  }
  // Without per-step values (older checkpoints): per epoch.
  std::string lr_epochs = chart(write_report(hand_report(false), "epochs"), "Learning rate");
  EXPECT_NE(lr_epochs.find(">lr<"), std::string::npos);
  EXPECT_EQ(lr_epochs.find("(steps)"), std::string::npos);
}

TEST(ReportTest, SummarySplitsColumnsToTheWidth) {
  Report r = hand_report(false);
  std::string one = r.summary();
  std::istringstream a(one);
  std::string first;
  std::getline(a, first);
  EXPECT_EQ(first, "epoch  train_accuracy  train_loss  valid_accuracy  valid_loss      lr  items_per_s  epoch_s");
  std::string split = r.summary(60);
  std::istringstream b(split);
  std::vector<std::string> lines;
  for (std::string l; std::getline(b, l);) {
    EXPECT_LE(l.size(), 60u) << l;
    lines.push_back(l);
  }
  // Two tables of 3 epochs (header, rule, rows), a blank line between, then the precision.
  ASSERT_EQ(lines.size(), 5u + 1 + 5 + 1);
  EXPECT_EQ(lines[0], "epoch  train_accuracy  train_loss  valid_accuracy");  // 49; + valid_loss: 61
  EXPECT_EQ(lines[2], "    1          63.30%      0.9000          62.30%");
  EXPECT_EQ(lines[5], "");
  EXPECT_EQ(lines[6], "epoch  valid_loss      lr  items_per_s  epoch_s");
  EXPECT_EQ(lines[9], "    2      0.5500  0.0005         1000     0:02");
}

// A Learner with a per-step schedule records each logged step's lr (metrics.jsonl, the checkpoint)
// and a resumed run reads them back.
TEST(ReportTest, LearnerRecordsTheLrPerStep) {
  fs::path dir = fs::temp_directory_path() / ("ember_report_lr_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  auto fit = [&](int64_t epochs, bool resume) {
    fixtures::Net model;
    optim::Sgd opt(model, {.lr = 0.01});
    optim::StepLr sched(opt, {.step_size = 1, .gamma = 0.5});  // halves after every step
    fixtures::Loader train(fixtures::quadrants(128, 1), {.batch_size = 16}, fixtures::to_classes);
    std::ostringstream out;
    return Learner(model, opt)
        .scheduler(sched, true)
        .checkpoints(dir.string())
        .resume(resume)
        .epochs(epochs)
        .log_every(4)
        .dashboard(DashboardMode::Plain, out)
        .fit(train);
  };
  Report r = fit(1, false);
  // 8 steps; step k ran with 0.01 * 0.5^(k - 1): logged at steps 4 and 8.
  ASSERT_EQ(r.steps.size(), 2u);
  EXPECT_DOUBLE_EQ(r.steps[0].lr, 0.01 * std::pow(0.5, 3));
  EXPECT_DOUBLE_EQ(r.steps[1].lr, 0.01 * std::pow(0.5, 7));
  std::ifstream log(dir / "metrics.jsonl");
  std::vector<double> logged;
  for (std::string line; std::getline(log, line);) {
    auto j = nlohmann::json::parse(line);
    if (j.at("type") == "step") logged.push_back(j.at("lr").get<double>());
  }
  EXPECT_EQ(logged, (std::vector<double>{0.01 * std::pow(0.5, 3), 0.01 * std::pow(0.5, 7)}));
  auto ck = nlohmann::json::parse(read_all(dir / "checkpoint.json"));
  EXPECT_EQ(ck.at("steps").at(1).size(), 3u);
  Report resumed = fit(2, true);
  ASSERT_EQ(resumed.steps.size(), 4u);
  EXPECT_DOUBLE_EQ(resumed.steps[1].lr, 0.01 * std::pow(0.5, 7));
  EXPECT_DOUBLE_EQ(resumed.steps[3].lr, 0.01 * std::pow(0.5, 15));
  EXPECT_NE(read_all(dir / "report.html").find(">lr (steps)<"), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ember::train
