// Checkpoints after a crash: a stale last.safetensors or a truncated checkpoint.json is repaired
// from the epoch files on resume, leftover temporary files are removed, checkpoint files honor the
// umask, resume refuses changed settings (unless allowed, then records them), and a run killed
// after every single checkpoint file operation resumes to the same bytes as an uninterrupted run.
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "train/fixtures.h"

extern char** environ;

namespace ember {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using fixtures::CheckpointedRun;
using fixtures::run_checkpointed;

std::string fresh_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("ember_ckpt_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p.string();
}

std::string read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
void write_bytes(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary | std::ios::trunc) << text; }

// The keys of an epoch record that measure time (differ between any two runs).
bool is_timing_key(const std::string& k) {
  for (const char* t : {"items_per_s", "epoch_s", "wait_fraction"})
    if (k.find(t) != std::string::npos) return true;
  return false;
}
void strip_timing(json& j) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end();) {
      if (is_timing_key(it.key())) it = j.erase(it);
      else strip_timing(*it++);
    }
  } else if (j.is_array()) {
    for (auto& e : j) strip_timing(e);
  }
}
// metrics.jsonl with the timing values removed, one JSON text per line.
std::vector<std::string> metrics_lines(const fs::path& dir) {
  std::ifstream f(dir / "metrics.jsonl");
  std::vector<std::string> out;
  std::string line;
  while (std::getline(f, line)) {
    json j = json::parse(line);
    strip_timing(j);
    out.push_back(j.dump());
  }
  return out;
}

TEST(CheckpointTest, StaleLastModelIsRepairedOnResume) {
  // The crash: checkpoint.json (epoch 3) written, then killed before last.safetensors.
  std::string dir = fresh_dir("stale");
  std::ostringstream out;
  run_checkpointed({.dir = dir, .epochs = 2}, out);
  std::string epoch2 = read_bytes(fs::path(dir) / "last.safetensors");
  run_checkpointed({.dir = dir, .epochs = 3, .resume = true}, out);
  std::string epoch3 = read_bytes(fs::path(dir) / "checkpoints/epoch-0003.model.safetensors");
  ASSERT_NE(epoch2, epoch3);
  write_bytes(fs::path(dir) / "last.safetensors", epoch2);
  std::ostringstream log;
  auto rep = run_checkpointed({.dir = dir, .epochs = 3, .resume = true}, log);
  EXPECT_TRUE(rep.resumed);
  EXPECT_TRUE(read_bytes(fs::path(dir) / "last.safetensors") == epoch3) << "last.safetensors is not epoch 3's model";
  EXPECT_NE(log.str().find("rewrote it from checkpoints/epoch-0003.model.safetensors"), std::string::npos) << log.str();
}

TEST(CheckpointTest, TruncatedCheckpointJsonFallsBackToEpochFiles) {
  std::string dir = fresh_dir("truncated");
  std::ostringstream out;
  run_checkpointed({.dir = dir, .epochs = 3}, out);
  fs::path ckpt = fs::path(dir) / "checkpoint.json";
  std::string full = read_bytes(ckpt);
  std::string model3 = read_bytes(fs::path(dir) / "last.safetensors");
  write_bytes(ckpt, full.substr(0, full.size() / 2));
  // Epoch 3's model is damaged too: the newest complete checkpoint is epoch 2, so epoch 3 is
  // trained again and must give the same bytes.
  fs::path m3 = fs::path(dir) / "checkpoints/epoch-0003.model.safetensors";
  std::string damaged = read_bytes(m3);
  damaged[damaged.size() - 3] ^= 0x40;
  write_bytes(m3, damaged);
  std::ostringstream log;
  train::Report rep;
  ASSERT_NO_THROW(rep = run_checkpointed({.dir = dir, .epochs = 3, .resume = true}, log)) << log.str();
  EXPECT_NE(log.str().find("checkpoint.json is not a valid checkpoint state"), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("resuming from epoch 2"), std::string::npos) << log.str();
  EXPECT_EQ(rep.history.size(), 3u);
  EXPECT_TRUE(read_bytes(fs::path(dir) / "last.safetensors") == model3) << "epoch 3 trained again differs";
  EXPECT_EQ(json::parse(read_bytes(ckpt))["epoch"], 3);

  // Nothing to fall back to: an empty checkpoint.json is named in the error.
  fs::remove_all(fs::path(dir) / "checkpoints");
  write_bytes(ckpt, "");
  try {
    run_checkpointed({.dir = dir, .epochs = 3, .resume = true}, log);
    ADD_FAILURE() << "resume from an empty checkpoint.json did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("checkpoint.json is empty"), std::string::npos) << e.what();
  }
}

TEST(CheckpointTest, LeftoverTemporariesAreRemovedAndFilesHonorTheUmask) {
  std::string dir = fresh_dir("tmp");
  fs::create_directories(fs::path(dir) / "checkpoints");
  for (const char* name : {"last.safetensors.tmp-Ab3xYz", "checkpoints/epoch-0001.model.safetensors.tmp-q1W2e3",
                           "notes.tmp-keep", "data.tmp-1234567", "mine.txt"})
    write_bytes(fs::path(dir) / name, "x");
  mode_t old = ::umask(027);
  std::ostringstream log;
  run_checkpointed({.dir = dir, .epochs = 1}, log);
  ::umask(old);
  EXPECT_FALSE(fs::exists(fs::path(dir) / "last.safetensors.tmp-Ab3xYz"));
  EXPECT_FALSE(fs::exists(fs::path(dir) / "checkpoints/epoch-0001.model.safetensors.tmp-q1W2e3"));
  EXPECT_TRUE(fs::exists(fs::path(dir) / "notes.tmp-keep"));   // not Ember's pattern
  EXPECT_TRUE(fs::exists(fs::path(dir) / "data.tmp-1234567"));  // seven characters: not Ember's
  EXPECT_TRUE(fs::exists(fs::path(dir) / "mine.txt"));
  EXPECT_NE(log.str().find("removed 2 leftover temporary file(s)"), std::string::npos) << log.str();
  // 0666 & ~027 = 0640, as for any file this process creates.
  for (const char* name : {"checkpoint.json", "last.safetensors", "checkpoints/epoch-0001.model.safetensors",
                           "checkpoints/epoch-0001.optim.safetensors", "checkpoints/epoch-0001.json"}) {
    struct stat st {};
    ASSERT_EQ(::stat((fs::path(dir) / name).c_str(), &st), 0) << name;
    EXPECT_EQ(st.st_mode & 0777, 0640u) << name;
  }
}

TEST(CheckpointTest, ResumeRefusesChangedSettingsUnlessAllowed) {
  std::string dir = fresh_dir("config");
  std::ostringstream out;
  run_checkpointed({.dir = dir, .epochs = 1}, out);
  try {
    run_checkpointed({.dir = dir, .epochs = 2, .resume = true, .accumulate = 1, .config = {{"batch_size", "32"}}}, out);
    ADD_FAILURE() << "resume with another batch size did not throw";
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("batch_size: 16 -> 32"), std::string::npos) << what;
    EXPECT_NE(what.find("accumulate: 2 -> 1"), std::string::npos) << what;
    EXPECT_EQ(what.find("epochs"), std::string::npos) << what;  // more epochs are allowed
  }
  // Refused: nothing was trained or rewritten.
  EXPECT_EQ(json::parse(read_bytes(fs::path(dir) / "checkpoint.json"))["epoch"], 1);
  // More epochs alone: accepted, recorded.
  auto rep = run_checkpointed({.dir = dir, .epochs = 2, .resume = true}, out);
  EXPECT_EQ(rep.history.size(), 2u);
  // An explicit change: accepted and recorded in checkpoint.json and metrics.jsonl.
  rep = run_checkpointed({.dir = dir, .epochs = 3, .resume = true, .allow_config_change = true,
                          .config = {{"batch_size", "32"}}}, out);
  EXPECT_EQ(rep.history.size(), 3u);
  json j = json::parse(read_bytes(fs::path(dir) / "checkpoint.json"));
  ASSERT_EQ(j["config_changes"].size(), 2u) << j["config_changes"].dump();
  EXPECT_EQ(j["config_changes"][0]["after_epoch"], 1);
  EXPECT_EQ(j["config_changes"][0]["changes"]["epochs"]["old"], "1");
  EXPECT_EQ(j["config_changes"][0]["changes"]["epochs"]["new"], "2");
  EXPECT_EQ(j["config_changes"][1]["after_epoch"], 2);
  EXPECT_EQ(j["config_changes"][1]["changes"]["batch_size"]["old"], "16");
  EXPECT_EQ(j["config_changes"][1]["changes"]["batch_size"]["new"], "32");
  EXPECT_EQ(j["config"]["batch_size"], "32");
  int changes = 0;
  for (const auto& line : metrics_lines(dir)) changes += json::parse(line)["type"] == "config_change";
  EXPECT_EQ(changes, 2);
}

// Runs the kill helper program (tests/train/checkpoint_kill_helper.cpp); returns its exit code.
int run_helper(const std::string& dir, int64_t epochs, bool resume, int64_t kill_after) {
  std::vector<std::string> args = {EMBER_CHECKPOINT_KILL_HELPER, dir, std::to_string(epochs), resume ? "resume" : "fresh"};
  std::vector<std::string> env_text = {"EMBER_CPU_TIER=0"};
  if (kill_after > 0) env_text.push_back("EMBER_TEST_CHECKPOINT_KILL_AFTER=" + std::to_string(kill_after));
  for (char** e = environ; *e; ++e) {
    std::string s = *e;
    if (s.rfind("EMBER_CPU_TIER=", 0) != 0 && s.rfind("EMBER_TEST_CHECKPOINT_KILL_AFTER=", 0) != 0) env_text.push_back(s);
  }
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), envp.data()) != 0) return -1;
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(CheckpointTest, KillAtEveryCheckpointStepThenResumeIsBitIdentical) {
  const int64_t epochs = 3;
  std::string ref = fresh_dir("kill_ref");
  ASSERT_EQ(run_helper(ref, epochs, false, 0), 0);
  std::vector<std::string> compared = {"last.safetensors", "checkpoints/epoch-0003.model.safetensors",
                                       "checkpoints/epoch-0003.optim.safetensors",
                                       "checkpoints/epoch-0002.model.safetensors"};
  std::map<std::string, std::string> want;
  for (const auto& f : compared) want[f] = read_bytes(fs::path(ref) / f);
  json want_state = json::parse(read_bytes(fs::path(ref) / "checkpoint.json"));
  strip_timing(want_state);
  auto want_metrics = metrics_lines(ref);
  ASSERT_FALSE(want_metrics.empty());

  // The sequence per epoch: 5 files (epoch model, optimizer, state; last.safetensors;
  // checkpoint.json), each in 3 steps (part written, written + synced, renamed + folder synced);
  // after epoch 3, the 3 files of epoch 1 are removed.
  const int64_t expected_steps = epochs * 5 * 3 + 3;
  int64_t n = 1;
  for (;; ++n) {
    std::string dir = fresh_dir("kill_" + std::to_string(n));
    int rc = run_helper(dir, epochs, false, n);
    if (rc == 0) break;  // the run ended before step n: every step has been tried
    ASSERT_EQ(rc, 86) << "kill at step " << n;
    ASSERT_EQ(run_helper(dir, epochs, true, 0), 0) << "resume after a kill at step " << n;
    for (const auto& f : compared)
      EXPECT_TRUE(read_bytes(fs::path(dir) / f) == want[f]) << f << " differs after a kill at step " << n;
    json state = json::parse(read_bytes(fs::path(dir) / "checkpoint.json"));
    strip_timing(state);
    EXPECT_EQ(state, want_state) << "checkpoint.json after a kill at step " << n;
    EXPECT_EQ(metrics_lines(dir), want_metrics) << "metrics.jsonl after a kill at step " << n;
    EXPECT_FALSE(fs::exists(fs::path(dir) / "checkpoints/epoch-0001.json")) << n;
    for (const auto& e : fs::recursive_directory_iterator(dir))
      EXPECT_EQ(e.path().string().find(".tmp-"), std::string::npos) << e.path() << " left after step " << n;
    fs::remove_all(dir);
    if (n > 2 * expected_steps) break;
  }
  EXPECT_EQ(n - 1, expected_steps) << "checkpoint steps in a " << epochs << "-epoch run";
  fs::remove_all(ref);
}

}  // namespace
}  // namespace ember
