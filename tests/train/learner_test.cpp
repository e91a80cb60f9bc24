// The Learner: a short run learns (loss below a stated value), checkpoint + resume equals an
// uninterrupted run bit for bit, early stopping stops, and the metrics log and the HTML report
// are written and parse.
#include <gtest/gtest.h>

#include <ember/ember.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "train/fixtures.h"

namespace ember {
namespace {

namespace fs = std::filesystem;

using fixtures::Loader;
using fixtures::Net;
using fixtures::quadrants;
using fixtures::to_classes;

std::string tmp_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("ember_learner_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p.string();
}

TEST(LearnerTest, ShortRunLearns) {
  Net model;
  optim::Adam opt(model, {.lr = 0.02});
  Loader train(quadrants(512, 1), {.batch_size = 32, .shuffle = true, .workers = 2, .seed = 4}, to_classes);
  Loader valid(quadrants(256, 2), {.batch_size = 128}, to_classes);
  std::ostringstream out;
  auto rep = train::Learner(model, opt)
                 .metrics({train::accuracy(), train::top_k_accuracy(2)})
                 .epochs(6)
                 .dashboard(train::DashboardMode::Plain, out)
                 .fit(train, valid);
  ASSERT_EQ(rep.history.size(), 6u);
  std::cout << "train loss " << rep.history.front().get("train_loss") << " -> " << rep.last("train_loss")
            << ", valid accuracy " << rep.last("valid_accuracy") << "\n";
  EXPECT_LT(rep.last("valid_loss"), 0.25);  // stated target: below 0.25 (starts near ln 4 = 1.39)
  EXPECT_GT(rep.last("valid_accuracy"), 0.93);
  EXPECT_GE(rep.last("valid_top2_accuracy"), rep.last("valid_accuracy"));
  EXPECT_GT(rep.last("items_per_s"), 0);
  EXPECT_NE(out.str().find("epoch 6/6"), std::string::npos);
  EXPECT_NE(rep.summary().find("valid_accuracy"), std::string::npos);
}

// Trains `epochs` epochs in `dir` (resuming if asked) and returns the final parameters.
std::map<std::string, std::vector<float>> run(const std::string& dir, int64_t epochs, bool resume, uint64_t init_seed) {
  manual_seed(init_seed);  // a resumed run starts from other initial values: the checkpoint must win
  Net model;
  model.fc1 = nn::Linear({.in = 2, .out = 32, .seed = init_seed});
  optim::Adam opt(model, {.lr = 0.01});
  optim::StepLr sched(opt, {.step_size = 1, .gamma = 0.7});
  Loader train(quadrants(300, 5), {.batch_size = 16, .shuffle = true, .workers = 2, .seed = 8}, to_classes);
  Loader valid(quadrants(100, 6), {.batch_size = 50}, to_classes);
  std::ostringstream out;
  train::Learner(model, opt)
      .metrics({train::accuracy()})
      .checkpoints(dir)
      .epochs(epochs)
      .seed(77)
      .scheduler(sched)
      .accumulate(2)
      .clip_grad_norm(1.0)
      .resume(resume)
      .dashboard(train::DashboardMode::Plain, out)
      .fit(train, valid);
  std::map<std::string, std::vector<float>> state;
  for (auto& [k, v] : model.state_dict()) state[k] = v.to_vector<float>();
  return state;
}

TEST(LearnerTest, ResumeEqualsUninterruptedRunBitForBit) {
  std::string a = tmp_dir("a"), b = tmp_dir("b");
  auto full = run(a, 4, false, 1);
  run(b, 2, false, 1);  // "interrupted" after 2 epochs
  auto resumed = run(b, 4, true, 99);
  ASSERT_EQ(full.size(), resumed.size());
  for (auto& [k, v] : full) {
    ASSERT_EQ(v.size(), resumed[k].size()) << k;
    EXPECT_EQ(0, std::memcmp(v.data(), resumed[k].data(), v.size() * sizeof(float))) << k << " differs";
  }
  auto fresh = run(tmp_dir("c"), 4, false, 99);  // sanity: another init gives other weights
  EXPECT_NE(fresh["fc1.weight"], full["fc1.weight"]);
  // The checkpoint files of the last two epochs are kept, older ones removed.
  EXPECT_TRUE(fs::exists(fs::path(b) / "checkpoints/epoch-0004.model.safetensors"));
  EXPECT_FALSE(fs::exists(fs::path(b) / "checkpoints/epoch-0002.model.safetensors"));
  auto j = nlohmann::json::parse(std::ifstream(fs::path(b) / "checkpoint.json"));
  EXPECT_EQ(j["epoch"], 4);
  EXPECT_EQ(j["scheduler_steps"], 4);
  EXPECT_EQ(j["history"].size(), 4u);
}

TEST(LearnerTest, EarlyStoppingStops) {
  Net model;
  optim::Sgd opt(model, {.lr = 0.0});  // nothing improves
  Loader train(quadrants(64, 1), {.batch_size = 32}, to_classes);
  Loader valid(quadrants(64, 2), {.batch_size = 64}, to_classes);
  std::ostringstream out;
  auto rep = train::Learner(model, opt)
                 .epochs(20)
                 .early_stopping({.metric = "valid_loss", .patience = 2})
                 .dashboard(train::DashboardMode::Plain, out)
                 .fit(train, valid);
  EXPECT_TRUE(rep.stopped_early);
  EXPECT_EQ(rep.epochs_done, 3);  // epoch 1 sets the best, 2 and 3 do not improve
  EXPECT_NE(out.str().find("early stopping"), std::string::npos);
}

TEST(LearnerTest, WritesMetricsLogAndReport) {
  std::string dir = tmp_dir("log");
  Net model;
  optim::Adam opt(model, {.lr = 0.01});
  Loader train(quadrants(256, 1), {.batch_size = 16}, to_classes);
  Loader valid(quadrants(64, 2), {.batch_size = 64}, to_classes);
  std::ostringstream out;
  train::Learner(model, opt)
      .metrics({train::accuracy()})
      .checkpoints(dir)
      .epochs(2)
      .log_every(4)
      .dashboard(train::DashboardMode::Plain, out)
      .fit(train, valid);
  std::ifstream log(fs::path(dir) / "metrics.jsonl");
  std::string line;
  int epochs = 0, steps = 0;
  while (std::getline(log, line)) {
    auto j = nlohmann::json::parse(line);  // every line is JSON
    if (j["type"] == "epoch") {
      ++epochs;
      EXPECT_TRUE(j.contains("valid_accuracy"));
      EXPECT_TRUE(j.contains("lr"));
    } else {
      ++steps;
    }
  }
  EXPECT_EQ(epochs, 2);
  EXPECT_EQ(steps, 8);  // 16 steps per epoch, one point every 4
  std::ifstream html(fs::path(dir) / "report.html");
  std::string text((std::istreambuf_iterator<char>(html)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(text.find("</html>"), std::string::npos);
  size_t svgs = 0;
  for (size_t p = text.find("<svg"); p != std::string::npos; p = text.find("<svg", p + 1)) ++svgs;
  EXPECT_EQ(svgs, 3u);  // loss, accuracy, learning rate
  EXPECT_EQ(text.find("http://") == std::string::npos || text.find("xmlns='http://www.w3.org/2000/svg'") != std::string::npos, true);
  EXPECT_EQ(text.find("<script"), std::string::npos);  // no scripts, nothing fetched
  EXPECT_TRUE(fs::exists(fs::path(dir) / "last.safetensors"));
}

TEST(LearnerTest, FashionMnistSubsetLearns) {
  if (!fs::exists(data::FashionMnist::resolve_dir({}) + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "dataset-fashion-mnist not installed";
  struct Mlp : nn::Module {
    nn::Linear fc1{{.in = 784, .out = 64, .seed = 1}};
    nn::Linear fc2{{.in = 64, .out = 10, .seed = 2}};
    EMBER_MODULE_VISIT(fc1, fc2)  // a local class: no call operator (member template)
    Tensor<2> forward(const Tensor<4>& x) { return fc2(relu(fc1(x.flatten<2>(1)))); }
  };
  Mlp model;
  optim::Adam opt(model, {.lr = 2e-3});
  auto [tr, va] = data::split(data::take(data::FashionMnist::train(), 2400), 5.0 / 6.0);
  data::DataLoader train(tr, {.batch_size = 50, .shuffle = true, .workers = 2});
  data::DataLoader valid(va, {.batch_size = 200});
  std::ostringstream out;
  auto rep = train::Learner(model, opt).metrics({train::accuracy()}).epochs(2).dashboard(train::DashboardMode::Plain, out).fit(train, valid);
  std::cout << "Fashion-MNIST 2,000 images: valid loss " << rep.last("valid_loss") << ", accuracy "
            << rep.last("valid_accuracy") << "\n";
  EXPECT_LT(rep.last("valid_loss"), 0.8);  // stated target (starts near ln 10 = 2.3)
}

}  // namespace
}  // namespace ember
