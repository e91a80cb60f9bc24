// Learner::precision: bf16 and f16 runs learn as well as f32 on the quadrant task, parameters and
// checkpoints stay f32, f16 records its loss scaler (and saves it with the checkpoint), a resume
// with another precision is refused, and bad dtypes are rejected.
#include <gtest/gtest.h>

#include <ember/ember.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ember/autocast.h"
#include "train/fixtures.h"

namespace ember {
namespace {

namespace fs = std::filesystem;
using fixtures::Loader;
using fixtures::Net;
using fixtures::quadrants;
using fixtures::to_classes;

struct PrecisionRun {
  train::Report rep;
  std::string out;
};

PrecisionRun train_quadrants(DType precision, const std::string& dir = "", bool resume = false) {
  manual_seed(1);
  Net model;
  optim::Adam opt(model, {.lr = 0.02});
  Loader train(quadrants(512, 1), {.batch_size = 32, .shuffle = true, .seed = 4}, to_classes);
  Loader valid(quadrants(256, 2), {.batch_size = 128}, to_classes);
  std::ostringstream out;
  train::Learner l(model, opt);
  l.metrics({train::accuracy()}).epochs(5).precision(precision).dashboard(train::DashboardMode::Plain, out);
  if (!dir.empty()) l.checkpoints(dir).resume(resume);
  PrecisionRun r{l.fit(train, valid), ""};
  r.out = out.str();
  for (auto& np : model.named_parameters()) EXPECT_EQ(np.param.array().dtype(), DType::F32) << np.name;
  return r;
}

TEST(LearnerPrecision, LowPrecisionRunsMatchF32) {
  PrecisionRun f32 = train_quadrants(DType::F32);
  PrecisionRun bf16 = train_quadrants(DType::BF16);
  PrecisionRun f16 = train_quadrants(DType::F16);
  const double a32 = f32.rep.last("valid_accuracy"), ab = bf16.rep.last("valid_accuracy"), ah = f16.rep.last("valid_accuracy");
  std::cout << "valid accuracy f32 " << a32 << ", bf16 " << ab << ", f16 " << ah << "\n";
  EXPECT_GT(a32, 0.93);
  EXPECT_NEAR(ab, a32, 0.03);
  EXPECT_NEAR(ah, a32, 0.03);
  EXPECT_EQ(bf16.rep.precision, DType::BF16);
  EXPECT_NE(bf16.rep.summary().find("precision: bfloat16\n"), std::string::npos);
  EXPECT_NE(f32.rep.summary().find("precision: float32\n"), std::string::npos);
  EXPECT_NE(f16.rep.summary().find("precision: float16 (dynamic loss scaling, 0 step(s) skipped)"), std::string::npos)
      << f16.rep.summary();
  EXPECT_NE(bf16.out.find("mixed precision: bfloat16 autocast, f32 master weights"), std::string::npos) << bf16.out;
  EXPECT_NE(f16.out.find("dynamic loss scaling (scale 65536)"), std::string::npos) << f16.out;
  EXPECT_EQ(f32.out.find("mixed precision"), std::string::npos);
  // f16 records its loss scale (2^16: no overflow, fewer than 2000 steps to grow) per epoch.
  EXPECT_EQ(f16.rep.last("loss_scale"), 65536);
  EXPECT_EQ(f16.rep.last("skipped_steps"), 0);
  EXPECT_EQ(bf16.rep.last("loss_scale", -1), -1);  // bf16 needs no scaler
  // The low-precision runs differ from f32 (the autocast path ran), but not by much.
  EXPECT_NE(bf16.rep.last("train_loss"), f32.rep.last("train_loss"));
}

TEST(LearnerPrecision, CheckpointsKeepF32AndTheScaler) {
  fs::path dir = fs::temp_directory_path() / ("ember_learner_precision_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  train_quadrants(DType::F16, dir.string());
  std::ifstream f(dir / "checkpoint.json");
  nlohmann::json j = nlohmann::json::parse(f);
  EXPECT_EQ(j.at("precision"), "float16");
  EXPECT_EQ(j.at("grad_scaler").at("scale").get<double>(), 65536);
  EXPECT_EQ(j.at("grad_scaler").at("skipped_steps").get<int64_t>(), 0);
  EXPECT_EQ(j.at("grad_scaler").at("growth_tracker").get<int64_t>(), 5 * 16);  // 512 / 32 steps per epoch
  EXPECT_EQ(j.at("settings").at("precision"), "float16");
  io::SafetensorsFile model = io::load_file((dir / "last.safetensors").string());
  ASSERT_FALSE(model.tensors.empty());
  for (auto& [name, t] : model.tensors) EXPECT_EQ(t.dtype(), DType::F32) << name;
  // Resuming in another precision is a settings change, refused by default.
  try {
    train_quadrants(DType::F32, dir.string(), true);
    FAIL() << "resume with another precision accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("precision: float16 -> (none)"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

TEST(LearnerPrecision, RejectsOtherDtypes) {
  Net model;
  optim::Adam opt(model, {.lr = 0.02});
  train::Learner l(model, opt);
  try {
    l.precision(DType::F64);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "Learner::precision: expected float32, bfloat16 or float16, got float64");
  }
  EXPECT_THROW(l.precision(DType::F16, {.growth_factor = 0.5}), Error);
}

}  // namespace
}  // namespace ember
