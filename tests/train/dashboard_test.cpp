// The live dashboard's layout (dashboard_layout.h): no line is wider than the width it was given
// at 200, 120, 80, 60 and below (display columns, the bars being UTF-8), the validation bar waits
// instead of reading "0% 0/0", rates leave out the first step, and the ETAs, checked against
// values worked out by hand with a fake clock, follow the current rate as time goes on.
#include <gtest/gtest.h>

#include <ember/ember.h>

#include <cmath>
#include <sstream>

#include "ember/train/dashboard.h"

namespace ember::train {
namespace {

// A state as in the middle of a run with a long title and all the usual fields.
DashboardState busy_state() {
  DashboardState s;
  s.title = "Fashion-MNIST CNN [bfloat16]";
  s.epoch = 3, s.epochs = 12;
  s.elapsed_s = 754, s.run_eta_s = 3725;
  s.train = PhaseState{"train", true, 512, 938, 301.5, 1234.4, 250.9,
                       {{"loss", "0.4321"}, {"accuracy", "84.12%"}, {"top3_accuracy", "97.80%"}}};
  s.valid = PhaseState{"valid"};  // not started yet in this epoch
  for (int i = 0; i < 900; ++i) {
    s.loss.push_back(2.3 * std::exp(-i / 200.0) + 0.3);
    s.accuracy.push_back(0.1 + 0.8 * (1 - std::exp(-i / 150.0)));
  }
  return s;
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string t;
  for (const auto& l : lines) t += l + "\n";
  return t;
}

TEST(DashboardLayoutTest, DisplayWidthCountsColumnsNotBytes) {
  EXPECT_EQ(display_width("train"), 5u);
  EXPECT_EQ(display_width("█▏·│"), 4u);  // 3 + 3 + 2 + 3 bytes
  EXPECT_EQ(std::string("█▏·│").size(), 11u);
  EXPECT_EQ(display_width("\x1b[1mbold\x1b[0m x"), 6u);
  EXPECT_EQ(fit_width("abcdef", 4), "abc…");
  EXPECT_EQ(fit_width("abcd", 4), "abcd");
  EXPECT_EQ(fit_width("██████", 3), "██…");
  EXPECT_EQ(fit_width("\x1b[36mabcdef\x1b[0m", 3), "\x1b[36mab…\x1b[0m");  // the colour is reset after the cut
}

TEST(DashboardLayoutTest, PackFieldsWrapsAtFieldsWithIndent) {
  auto lines = pack_fields({"epoch 1/2", "loss 0.5", "accuracy 80.00%", "lr 0.001"}, 24, "  ", 2);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "epoch 1/2  loss 0.5");      // 19 columns; with "  accuracy 80.00%" 36
  EXPECT_EQ(lines[1], "  accuracy 80.00%");        // 17; with "  lr 0.001" 27 > 24
  EXPECT_EQ(lines[2], "  lr 0.001");
  EXPECT_EQ(pack_fields({"a-very-long-field-name"}, 10)[0], "a-very-lo…");
}

TEST(DashboardLayoutTest, NoLineWiderThanTheTerminal) {
  DashboardState s = busy_state();
  for (size_t width : {200u, 120u, 80u, 79u, 60u, 40u, 25u, 12u}) {
    auto lines = dashboard_lines(s, width);
    for (const auto& l : lines) EXPECT_LE(display_width(l), width) << "width " << width << ": " << l;
    EXPECT_NE(lines[1].find("train"), std::string::npos) << width;
  }
  // Wide: one line per phase with the bar, the counts, the rate, the times and the metrics;
  // two plots of 60 columns (9 of labels each, 2 between).
  auto wide = dashboard_lines(s, 200);
  ASSERT_EQ(wide.size(), 1u + 1u + 1u + 5u);
  EXPECT_NE(wide[1].find("54% 512/938  1234 items/s  5:02 < 4:11  loss 0.4321  accuracy 84.12%  top3_accuracy 97.80%"),
            std::string::npos);
  std::string bar;  // 30 columns at 512/938 = 54.6%: 16 full cells, 3/8 of one (131 eighths), 13 empty
  for (int i = 0; i < 16; ++i) bar += "█";
  bar += "▍";
  for (int i = 0; i < 13; ++i) bar += "·";
  EXPECT_EQ(wide[1].rfind("train " + bar + "  54% 512/938", 0), 0u) << wide[1];
  EXPECT_EQ(display_width(wide[3]), 9u + 60 + 2 + 9 + 60);
  EXPECT_NE(wide[0].find("run ETA 1:02:05"), std::string::npos);
  // 80 columns: the metrics move to a second line under the bar; the plots narrow to 30 each.
  auto at80 = dashboard_lines(s, 80);
  ASSERT_EQ(at80.size(), 1u + 2u + 1u + 5u);
  EXPECT_NE(at80[1].find("54% 512/938  1234 items/s  5:02 < 4:11"), std::string::npos);
  EXPECT_EQ(at80[2], "      loss 0.4321  accuracy 84.12%  top3_accuracy 97.80%");
  EXPECT_EQ(display_width(at80[4]), 9u + 30 + 2 + 9 + 30);
  // 40 columns: the times and the rate give way so that the bar keeps 10 columns; one plot.
  auto at40 = dashboard_lines(s, 40);
  EXPECT_NE(at40[1].find("54% 512/938"), std::string::npos);
  EXPECT_EQ(at40[1].find("items/s"), std::string::npos);
  EXPECT_EQ(display_width(at40.back()), 40u);  // 9 + 31, the loss alone
  // Room for 4 rows only: no plots.
  EXPECT_EQ(dashboard_lines(s, 80, 4).size(), 4u);
}

TEST(DashboardLayoutTest, ValidationWaitsInsteadOfZeroOfZero) {
  DashboardState s = busy_state();
  for (size_t width : {120u, 80u, 30u}) {
    std::string text = join_lines(dashboard_lines(s, width));
    EXPECT_NE(text.find("valid"), std::string::npos);
    EXPECT_NE(text.find("waiting"), std::string::npos) << width;
    EXPECT_EQ(text.find("0/0"), std::string::npos) << width;
  }
  s.show_valid = false;  // a run without validation has no valid bar
  EXPECT_EQ(join_lines(dashboard_lines(s, 120)).find("valid"), std::string::npos);
}

TEST(DashboardLayoutTest, RateMeterLeavesOutTheFirstStep) {
  RateMeter m;
  m.reset();
  EXPECT_LT(m.items_per_s(), 0);  // nothing known
  m.update(1, 64, 3.0);           // the first step took 3 s (warm-up)
  EXPECT_LT(m.items_per_s(), 0);  // one step: no rate yet rather than 21 items/s
  EXPECT_DOUBLE_EQ(m.seconds_per_step(), 3.0);
  m.update(3, 192, 3.5);  // two more steps in 0.5 s: 128 items / 0.5 s
  EXPECT_DOUBLE_EQ(m.items_per_s(), 256.0);
  EXPECT_DOUBLE_EQ(m.seconds_per_step(), 0.25);
  EXPECT_DOUBLE_EQ(m.eta_s(10), 7 * 0.25);
  // The next epoch starts from the settled values until its own second step.
  m.reset(256.0, 0.25);
  m.update(1, 64, 2.0);
  EXPECT_DOUBLE_EQ(m.items_per_s(), 256.0);
  EXPECT_DOUBLE_EQ(m.eta_s(10), 9 * 0.25);
  // A warm-up over several steps leaves the window: steps 2..5 take 1 s each, then 0.1 s.
  m.reset();
  double t = 0;
  for (int s = 1; s <= 45; ++s) {
    t += s <= 5 ? 1.0 : 0.1;
    m.update(s, s * 10, t);
  }
  // The last 33 samples (steps 13..45): 32 steps in 3.2 s, 320 items. (Since step 1: 0.18 s.)
  EXPECT_NEAR(m.seconds_per_step(), 0.1, 1e-12);
  EXPECT_NEAR(m.items_per_s(), 100.0, 1e-9);
  EXPECT_DOUBLE_EQ(run_eta_seconds(2.25, 1.5, 2, 4.0), 2.25 + 1.5 + 8.0);
  EXPECT_LT(run_eta_seconds(-1, 0, 2, 4.0), 0);
  EXPECT_LT(run_eta_seconds(1, 0, 2, -1), 0);
  EXPECT_DOUBLE_EQ(run_eta_seconds(1, 0, 0, -1), 1.0);  // the last epoch: no per-epoch estimate needed
}

// A Dashboard on a fake clock: the phase and run ETAs by hand, advancing with each redraw.
TEST(DashboardTest, EtaFollowsTheRateAndAdvances) {
  std::ostringstream out;
  Dashboard d(out, true, "run");
  double t = 0;
  d.set_clock([&] { return t; });
  d.set_terminal_size(80, 24);
  d.phase("train", 1, 3, 10);  // 3 epochs of 10 steps of 32 items, validation after each
  t = 2.0;
  d.progress(1, 32, {}, true);  // warm-up step
  EXPECT_LT(d.state().train.items_per_s, 0);
  t = 2.5;
  d.progress(2, 64, {}, true);
  t = 3.0;
  d.progress(3, 96, {}, true);
  // 0.5 s per step since step 1; 7 steps left: 3.5 s. Epochs 2 and 3: 10 steps * 0.5 s each (no
  // validation seen yet): 13.5 s in all.
  EXPECT_DOUBLE_EQ(d.state().train.items_per_s, 64.0);
  EXPECT_DOUBLE_EQ(d.state().train.eta_s, 3.5);
  EXPECT_DOUBLE_EQ(d.state().run_eta_s, 13.5);
  EXPECT_DOUBLE_EQ(d.state().elapsed_s, 3.0);
  t = 4.0;
  d.progress(5, 160, {}, true);  // same rate: 5 steps left
  EXPECT_DOUBLE_EQ(d.state().train.eta_s, 2.5);
  EXPECT_DOUBLE_EQ(d.state().run_eta_s, 12.5);
  t = 6.5;
  d.progress(10, 320, {}, true);  // slower: (6.5 - 2) / 9 = 0.5 s per step still
  EXPECT_DOUBLE_EQ(d.state().train.eta_s, 0);
  EXPECT_DOUBLE_EQ(d.state().run_eta_s, 10.0);  // 2 epochs of 10 steps at 0.5 s
  d.phase("valid", 1, 3, 4);
  EXPECT_DOUBLE_EQ(d.state().train.elapsed_s, 6.5);  // frozen once the phase is over
  // No validation rate yet (its first step): the last run ETA counts down instead of "--:--".
  t = 7.0;
  d.progress(0, 0, {}, true);
  EXPECT_LT(d.state().valid.eta_s, 0);
  EXPECT_DOUBLE_EQ(d.state().run_eta_s, 9.5);
  t = 7.5;
  d.progress(4, 400, {}, true);
  EpochRecord rec;
  rec.epoch = 1;
  rec.values = {{"epoch_s", 7.5}, {"train_loss", 0.5}};
  d.epoch_done(rec, 15.0);
  // Between epochs: two epochs of 10 steps at the current 0.5 s and a validation of 1 s (the
  // rate, not epoch 1's 7.5 s with its 1.5 s of warm-up).
  EXPECT_DOUBLE_EQ(d.state().run_eta_s, 12.0);
  EXPECT_DOUBLE_EQ(d.state().train.elapsed_s, 6.5);
  // Epoch 2: the first reading is the settled rate of epoch 1 (64 items/s), not its warm-up.
  d.phase("train", 2, 3, 10);
  EXPECT_FALSE(d.state().valid.started);
  t = 9.0;
  d.progress(1, 32, {}, true);
  EXPECT_DOUBLE_EQ(d.state().train.items_per_s, 64.0);
  // 9 steps at 0.5 s, this epoch's validation (1 s, as in epoch 1) and one epoch of 5 + 1 s.
  EXPECT_DOUBLE_EQ(d.state().train.eta_s, 4.5);
  EXPECT_DOUBLE_EQ(d.state().run_eta_s, 4.5 + 1.0 + 6.0);
  d.finish();
}

// The printed output of a live Dashboard at 80x24: every line (ANSI codes removed) fits in 79
// columns, epoch summaries included; the block is cleared at the end.
TEST(DashboardTest, LiveOutputFitsTheTerminal) {
  std::ostringstream out;
  Dashboard d(out, true, "Fashion-MNIST CNN");
  double t = 0;
  d.set_clock([&] { return t; });
  d.set_terminal_size(80, 24);
  d.message("a note that is long enough to need wrapping at eighty columns, so it goes onto a second line here");
  for (int epoch = 1; epoch <= 2; ++epoch) {
    d.phase("train", epoch, 2, 20);
    for (int s = 1; s <= 20; ++s) {
      t += 0.2;
      d.plot_point(1.0 / s, 0.5 + s / 50.0);
      d.progress(s, s * 64, {{"loss", "0.1234"}, {"accuracy", "91.00%"}}, true);
    }
    d.phase("valid", epoch, 2, 5);
    for (int s = 1; s <= 5; ++s) d.progress(s, s * 100, {{"loss", "0.2000"}, {"accuracy", "90.00%"}}, true);
    EpochRecord rec;
    rec.epoch = epoch;
    rec.values = {{"train_accuracy", 0.91},     {"train_loss", 0.1234}, {"valid_accuracy", 0.9},
                  {"valid_loss", 0.2},          {"lr", 0.001},          {"items_per_s", 24904},
                  {"epoch_s", 4.0}};
    d.epoch_done(rec, 4.0 * (2 - epoch));
  }
  d.finish();
  std::string text = out.str(), plain;
  for (size_t i = 0; i < text.size(); ++i) {  // drop the escape sequences (colours, cursor moves)
    if (text[i] == '\x1b') {
      size_t j = i + 2;
      while (j < text.size() && !(text[j] >= 0x40 && text[j] <= 0x7e)) ++j;
      i = j;
      continue;
    }
    plain += text[i];
  }
  std::istringstream lines(plain);
  int n = 0;
  for (std::string l; std::getline(lines, l); ++n) EXPECT_LE(display_width(l), 79u) << l;
  EXPECT_GT(n, 100);
  // 79 columns: the epoch line up to the lr (exactly 79), then the rest indented.
  EXPECT_NE(plain.find("\nepoch 2/2  train loss 0.1234 acc 91.00%  valid loss 0.2000 acc 90.00%  lr 0.001\n"
                       "  24904 items/s  0:04 (ETA 0:00)\n"),
            std::string::npos);
  EXPECT_NE(plain.find("\n  a second line here\n"), std::string::npos);  // the note, wrapped at a word
  // finish() moved up over the last block and cleared it: the text ends with that escape.
  EXPECT_EQ(text.substr(text.size() - 4), "F\x1b[J");
}

TEST(DashboardTest, EpochLineGroupsThePhases) {
  EpochRecord rec;
  rec.epoch = 2;
  rec.values = {{"train_loss", 0.53891},    {"train_accuracy", 0.79921}, {"train_top3_accuracy", 0.951},
                {"valid_loss", 0.441},      {"valid_accuracy", 0.8367},  {"loss_scale", 32768},
                {"lr", 0.000525},           {"items_per_s", 17477.9},    {"epoch_s", 61},
                {"train_steps", 938},       {"global_step", 1876},       {"wait_fraction", 0.01}};
  auto f = epoch_line_fields(rec, 5, 183);
  std::vector<std::string> want = {"epoch 2/5",
                                   "train loss 0.5389 acc 79.92% top3_acc 95.10%",
                                   "valid loss 0.4410 acc 83.67%",
                                   "loss_scale 3.277e+04",
                                   "lr 0.000525",
                                   "17477 items/s",
                                   "1:01 (ETA 3:03)"};
  EXPECT_EQ(f, want);
  // The CLI's epoch line in one line of a 120-column terminal (119 usable): 9 + 30 + 30 + 13 + 15 + 17.
  rec.values.erase("train_top3_accuracy");
  rec.values.erase("loss_scale");
  auto lines = pack_fields(epoch_line_fields(rec, 5, 183), 119);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(display_width(lines[0]), 114u);
}

TEST(DashboardTest, PlainModeKeepsOneLinePerEpoch) {
  std::ostringstream out;
  Dashboard d(out, false, "run");
  double t = 0;
  d.set_clock([&] { return t; });
  d.phase("train", 1, 1, 10);
  for (int s = 1; s <= 10; ++s) {
    t += 1;
    d.progress(s, s * 10, {{"loss", "0.5"}}, s == 10);
  }
  EpochRecord rec;
  rec.epoch = 1;
  rec.values = {{"train_loss", 0.5}, {"lr", 0.01}, {"items_per_s", 10}, {"epoch_s", 10}};
  d.epoch_done(rec, 0);
  std::string text = out.str();
  EXPECT_NE(text.find("epoch 1/1 train  10% 1/10  -- items/s  0:01 < 0:09  loss 0.5\n"), std::string::npos);
  EXPECT_NE(text.find("epoch 1/1 train  20% 2/10  10 items/s  0:02 < 0:08  loss 0.5\n"), std::string::npos);
  EXPECT_NE(text.find("epoch 1/1  train loss 0.5000  lr 0.01  10 items/s  0:10 (ETA 0:00)\n"), std::string::npos);
  EXPECT_EQ(text.find("\x1b"), std::string::npos);  // no escape codes in plain mode
}

}  // namespace
}  // namespace ember::train
