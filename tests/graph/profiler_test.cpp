// The profiler (ember/profiler.h): one record per kernel and library call with its ops and the
// user's line, host planning spans, a Chrome trace that parses, a summary table, and nothing
// recorded while it is off.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ember/ember.h"

namespace ember {
namespace {

Device test_device() { return Device::cpu().available() ? Device::cpu() : Device::reference(); }

std::vector<KernelRecord> device_records(const std::vector<KernelRecord>& all) {
  std::vector<KernelRecord> out;
  for (const KernelRecord& r : all)
    if (r.device != "host") out.push_back(r);
  return out;
}

TEST(ProfilerTest, RecordsEachKernelWithItsOpsAndLine) {
  Device d = test_device();
  Array x = normal({64, 256}, 0, 1, {.seed = 3, .device = d});
  Array w = normal({256, 32}, 0, 1, {.seed = 4, .device = d});
  x.eval();
  w.eval();
  synchronize();
  profiler_start();
  ASSERT_TRUE(profiler_running());
  Array gelu = mul(mul(x, 0.5), add(erf(mul(x, 0.7071067811865476)), 1.0));  // one fused kernel
  Array y = matmul(gelu, w);                                                  // one library call
  (void)sum(y).item<float>();
  std::vector<KernelRecord> records = profiler_stop();
  EXPECT_FALSE(profiler_running());

  std::vector<KernelRecord> dev = device_records(records);
  ASSERT_GE(dev.size(), 3u) << profile_summary(records);  // gelu, matmul, sum
  const KernelRecord* fused = nullptr;
  const KernelRecord* mm = nullptr;
  for (const KernelRecord& r : dev) {
    if (r.ops.find("erf") != std::string::npos) fused = &r;
    if (r.name == "matmul") mm = &r;
    EXPECT_GE(r.duration_ns, 0);
    EXPECT_EQ(r.device, d.str());
    EXPECT_FALSE(r.device_timed) << "a host device's calls do their work inside the call: host times";
  }
  ASSERT_NE(fused, nullptr) << profile_summary(records);
  EXPECT_EQ(fused->name, "fused kernel");
  EXPECT_EQ(fused->ops, "mul mul erf add mul");
  EXPECT_NE(fused->where.find("profiler_test.cpp"), std::string::npos) << fused->where;
  ASSERT_NE(mm, nullptr) << profile_summary(records);
  EXPECT_LE(fused->start_ns + fused->duration_ns, mm->start_ns + 1) << "the matmul reads the gelu";
  // The host's planning is recorded too, and records come in start order.
  EXPECT_TRUE(std::any_of(records.begin(), records.end(), [](const KernelRecord& r) { return r.name == "plan"; }));
  EXPECT_TRUE(std::is_sorted(records.begin(), records.end(),
                             [](const KernelRecord& a, const KernelRecord& b) { return a.start_ns < b.start_ns; }));

  std::string summary = profile_summary(records);
  EXPECT_NE(summary.find("fused kernel"), std::string::npos) << summary;
  EXPECT_NE(summary.find("matmul"), std::string::npos) << summary;
}

TEST(ProfilerTest, NothingIsRecordedWhileOff) {
  Device d = test_device();
  profiler_start();
  (void)profiler_stop();
  Array x = uniform({1000}, 0, 1, {.seed = 1, .device = d});
  (void)sum(exp(x)).item<float>();
  profiler_start();
  std::vector<KernelRecord> records = profiler_stop();
  EXPECT_TRUE(records.empty()) << profile_summary(records);
}

TEST(ProfilerTest, ChromeTraceParsesAndBadPathsFail) {
  Device d = test_device();
  profiler_start();
  Array x = uniform({4096}, 0, 1, {.seed = 2, .device = d});
  (void)sum(tanh(x)).item<float>();
  std::vector<KernelRecord> records = profiler_stop();
  ASSERT_FALSE(records.empty());
  std::string path = (std::filesystem::temp_directory_path() / "ember_profiler_test.json").string();
  write_chrome_trace(path, records);
  nlohmann::json j = nlohmann::json::parse(std::ifstream(path));
  // One complete event per record, in order; metadata events (the device tracks' names) after.
  ASSERT_GE(j["traceEvents"].size(), records.size());
  for (size_t i = j["traceEvents"].size(); i-- > records.size();) EXPECT_EQ(j["traceEvents"][i]["ph"], "M");
  for (size_t i = 0; i < records.size(); ++i) {
    const auto& e = j["traceEvents"][i];
    EXPECT_EQ(e["ph"], "X");
    EXPECT_EQ(e["pid"], records[i].device_timed ? 2 : 1);
    EXPECT_EQ(e["name"], records[i].name);
    EXPECT_NEAR(e["dur"].get<double>(), double(records[i].duration_ns) / 1e3, 1e-3);
    EXPECT_EQ(e["args"]["ops"], records[i].ops);
  }
  std::remove(path.c_str());
  try {
    write_chrome_trace("/nonexistent-dir/x/trace.json", records);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/x/trace.json"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ember
