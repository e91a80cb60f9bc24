// Learner::data_parallel on in-process ranks: 2 ranks x batch 32 end with the parameters (within
// the dist tests' 5e-6) and the epoch metrics of 1 process x batch 64; rank 0 alone prints and
// writes; a 2-rank checkpoint resumes on 1 process and a 1-process one on 2 ranks, ending where an
// uninterrupted 1-process run ends; ranks with different batch counts fail with both counts.
#include <gtest/gtest.h>
#include <unistd.h>

#include <ember/dist/in_process.h>
#include <ember/train/learner.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "dist/dp_fixture.h"

namespace ember::train {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using dist::fixture::Mlp;
using dist::fixture::Params;

fs::path fresh_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("ember_learner_dp_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p;
}

struct RunResult {
  Params params;
  Report report;
  std::string printed;
};

// 1 process, batch 64 (20 steps an epoch), the dist tests' seeds.
RunResult single(int64_t epochs, const std::string& dir = "", bool resume = false) {
  Mlp model(resume ? 77 : 1);  // a resumed model's own initialization must not matter
  optim::Adam opt(model, {.lr = 0.02});
  dist::fixture::Loader loader(dist::fixture::dataset(), {.batch_size = 64, .shuffle = true, .seed = 5},
                               dist::fixture::to_batch);
  std::ostringstream out;
  Learner l(model, opt);
  l.metrics({accuracy()}).dashboard(DashboardMode::Plain, out).epochs(epochs).seed(3).resume(resume);
  if (!dir.empty()) l.checkpoints(dir);
  RunResult r;
  r.report = l.fit(loader);
  r.params = dist::fixture::snapshot(model);
  r.printed = out.str();
  return r;
}

// `size` in-process ranks, batch 64 / size each over its shard; rank r's run folder is dirs[r].
std::vector<RunResult> ranks(int size, int64_t epochs, const std::vector<std::string>& dirs = {}, bool resume = false,
                       std::vector<size_t> batch = {}) {
  std::vector<RunResult> out(static_cast<size_t>(size));
  dist::run_in_process({.size = size, .timeout = 30s}, [&](dist::Communicator& comm) {
    size_t r = size_t(comm.rank());
    Mlp model(1 + uint64_t(r) * 100);  // rank 0's initialization is broadcast
    optim::Adam opt(model, {.lr = 0.02});
    auto mine = dist::shard(dist::fixture::dataset(), {.rank = comm.rank(), .size = size, .shuffle = true, .seed = 5});
    dist::fixture::Loader loader(mine, {.batch_size = batch.empty() ? size_t(64 / size) : batch[r]}, dist::fixture::to_batch);
    std::ostringstream printed;
    Learner l(model, opt);
    l.metrics({accuracy()}).dashboard(DashboardMode::Plain, printed).epochs(epochs).seed(3).resume(resume).data_parallel(comm);
    if (!dirs.empty()) l.checkpoints(dirs[r]);
    out[r].report = l.fit(loader);
    out[r].params = dist::fixture::snapshot(model);
    out[r].printed = printed.str();
  });
  return out;
}

TEST(LearnerDataParallelTest, TwoRanksMatchOneProcessWithTheDoubleBatch) {
  RunResult one = single(1);
  std::vector<RunResult> two = ranks(2, 1);
  EXPECT_TRUE(dist::fixture::bit_identical(two[0].params, two[1].params)) << "the ranks' parameters differ";
  double diff = dist::fixture::max_difference(one.params, two[0].params);
  EXPECT_LT(diff, 5e-6) << "2 ranks x 32 vs 1 process x 64 after 20 Adam steps";
  // The parameters moved: the comparison is not between two initializations.
  EXPECT_GT(dist::fixture::max_difference(one.params, dist::fixture::snapshot(Mlp(1))), 1e-2);
  // Epoch metrics over all 1,280 items, on every rank.
  for (const RunResult& r : two) {
    EXPECT_NEAR(r.report.last("train_loss"), one.report.last("train_loss"), 1e-5);
    EXPECT_NEAR(r.report.last("train_accuracy"), one.report.last("train_accuracy"), 1.0 / 1280 + 1e-9);
    EXPECT_EQ(r.report.last("train_steps"), 20);
  }
  EXPECT_NE(two[0].printed.find("train"), std::string::npos) << two[0].printed;
  EXPECT_EQ(two[1].printed, "") << "rank 1 printed";
}

TEST(LearnerDataParallelTest, RankZeroAloneWritesAndTwoRankCheckpointResumesOnOneProcess) {
  fs::path d0 = fresh_dir("r0"), d1 = fresh_dir("r1"), d_single = fresh_dir("single");
  std::vector<RunResult> two = ranks(2, 1, {d0.string(), d1.string()});
  ASSERT_TRUE(fs::exists(d0 / "checkpoint.json"));
  EXPECT_FALSE(fs::exists(d1)) << "rank 1 wrote its run folder";
  nlohmann::json j = nlohmann::json::parse(std::ifstream(d0 / "checkpoint.json"));
  EXPECT_EQ(j.at("ranks"), 2);
  EXPECT_EQ(j.at("global_step"), 20);
  EXPECT_NEAR(j.at("history").at(0).at("train_loss").get<double>(), two[0].report.last("train_loss"), 1e-12);

  RunResult resumed = single(2, d0.string(), true);
  EXPECT_TRUE(resumed.report.resumed);
  ASSERT_EQ(resumed.report.history.size(), 2u);
  RunResult straight = single(2);
  EXPECT_LT(dist::fixture::max_difference(straight.params, resumed.params), 5e-6);
  EXPECT_GT(dist::fixture::max_difference(straight.params, two[0].params), 1e-3) << "epoch 2 did not train";

  // And back: a 1-process checkpoint continued on 2 ranks.
  single(1, d_single.string());
  std::vector<RunResult> back = ranks(2, 2, {d_single.string(), d_single.string()}, true);
  EXPECT_TRUE(back[0].report.resumed && back[1].report.resumed);
  EXPECT_TRUE(dist::fixture::bit_identical(back[0].params, back[1].params));
  EXPECT_LT(dist::fixture::max_difference(straight.params, back[0].params), 5e-6);
  nlohmann::json k = nlohmann::json::parse(std::ifstream(d_single / "checkpoint.json"));
  EXPECT_EQ(k.at("epoch"), 2);
  EXPECT_EQ(k.at("ranks"), 2);
  for (const auto& p : {d0, d1, d_single}) fs::remove_all(p);
}

// Learner::shard_loaders: every rank passes the loaders one process would use; fit deals them
// over the ranks. Training ends within the tolerance above of one process (when the items divide
// over the ranks: otherwise the shards repeat a few items, as PyTorch's DistributedSampler), and
// validation sees every item once (1,280 over 3 ranks: 427, 427, 426), so its metrics are the one
// process's.
std::pair<RunResult, std::vector<RunResult>> with_loaders_for_one_process(int size, size_t batch) {
  auto run = [&](dist::Communicator* comm, uint64_t seed) {
    Mlp model(seed);
    optim::Adam opt(model, {.lr = 0.02});
    // 1,278 rows (a multiple of 2 and 3, so that no shard is padded): a partial last batch.
    dist::fixture::Loader train(data::take(dist::fixture::dataset(), 1278), {.batch_size = batch, .shuffle = true, .seed = 5},
                                dist::fixture::to_batch);
    dist::fixture::Loader valid(dist::fixture::dataset(), {.batch_size = 100}, dist::fixture::to_batch);
    std::ostringstream printed;
    Learner l(model, opt);
    l.metrics({accuracy()}).dashboard(DashboardMode::Plain, printed).epochs(2).seed(3);
    if (comm) l.data_parallel(*comm).shard_loaders();
    RunResult r;
    r.report = l.fit(train, valid);
    r.params = dist::fixture::snapshot(model);
    return r;
  };
  RunResult one = run(nullptr, 1);
  std::vector<RunResult> out(static_cast<size_t>(size));
  dist::run_in_process({.size = size, .timeout = 30s}, [&](dist::Communicator& comm) {
    out[size_t(comm.rank())] = run(&comm, 1 + uint64_t(comm.rank()) * 100);
  });
  return {one, out};
}

TEST(LearnerDataParallelTest, ShardLoadersDealsOneProcessLoadersOverTheRanks) {
  for (auto [size, batch] : {std::pair{2, size_t(64)}, std::pair{3, size_t(48)}}) {
    auto [one, ranks_] = with_loaders_for_one_process(size, batch);
    SCOPED_TRACE(std::to_string(size) + " ranks x batch " + std::to_string(batch / size_t(size)));
    for (const RunResult& r : ranks_) {
      EXPECT_TRUE(dist::fixture::bit_identical(r.params, ranks_[0].params));
      EXPECT_LT(dist::fixture::max_difference(one.params, r.params), 5e-6);
      EXPECT_EQ(r.report.last("train_steps"), one.report.last("train_steps"));
      EXPECT_NEAR(r.report.last("train_loss"), one.report.last("train_loss"), 1e-5);
      EXPECT_NEAR(r.report.last("valid_loss"), one.report.last("valid_loss"), 1e-5);
      EXPECT_NEAR(r.report.last("valid_accuracy"), one.report.last("valid_accuracy"), 1e-9);
    }
  }
}

TEST(LearnerDataParallelTest, ShardLoadersNeedsABatchSizeThatDividesOverTheRanks) {
  try {
    with_loaders_for_one_process(3, 64);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the batch size 64 does not divide over 3 ranks"), std::string::npos)
        << e.what();
  }
}

TEST(LearnerDataParallelTest, DifferentBatchCountsFailOnEveryRankWithBothCounts) {
  try {
    ranks(2, 1, {}, false, {32, 16});
    FAIL() << "no error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("different numbers of training batches in epoch 1 (rank 0: 20, rank 1: 40)"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace ember::train
