// The run folder's checkpoint files (internal to the Learner): durable atomic writes (temporary
// file, fsync, rename, directory fsync), CRC-32 checksums, the cleanup of leftover temporary
// files, and finding the newest complete checkpoint on resume (repairing what an interrupted
// checkpoint write left behind). docs/semantics.md § What a checkpoint guarantees after a crash.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ember::train::checkpoint {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

// Test-only fault injection: with EMBER_TEST_CHECKPOINT_KILL_AFTER=N in the environment the
// process ends with _exit(86) right after the N-th checkpoint file operation (counted over the
// whole process; see step()). Unset (the normal case) a step costs one comparison.
constexpr int kKilledExitCode = 86;
void step(const char* what, const fs::path& file);

uint32_t crc32(const uint8_t* data, size_t size);

// A file named by checkpoint.json: path relative to the run folder, size and CRC-32.
struct FileEntry {
  std::string path;
  uint64_t size = 0;
  uint32_t crc32 = 0;
};
nlohmann::json to_json(const FileEntry& f);
FileEntry file_entry(const nlohmann::json& j);  // throws on a malformed entry

// Writes `bytes` to run_dir/rel as one durable unit: a temporary file (rel + ".tmp-XXXXXX",
// created with mode 0666 & ~umask), fsync, rename, fsync of the folder. Returns its entry.
FileEntry write_file(const fs::path& run_dir, const std::string& rel, const Bytes& bytes);
// The whole file (throws naming it; refuses anything but a regular file).
Bytes read_file(const fs::path& path);
// Whether run_dir/f.path exists with f's size and checksum; `bytes` receives its content.
bool matches(const fs::path& run_dir, const FileEntry& f, Bytes* bytes = nullptr, std::string* why = nullptr);

// Removes leftover temporary files of Ember's pattern (NAME.tmp-XXXXXX, six letters or digits)
// in the run folder and its checkpoints/ folder; returns their names.
std::vector<std::string> remove_temporaries(const fs::path& run_dir);

// The files of one epoch: checkpoints/epoch-NNNN.{model.safetensors,optim.safetensors,json}.
std::string epoch_stem(int64_t epoch);
// The epochs with any file in checkpoints/, ascending.
std::vector<int64_t> epochs_on_disk(const fs::path& run_dir);
void remove_epoch(const fs::path& run_dir, int64_t epoch);

// The checkpoint to resume from: the state (checkpoint.json's content), the model and optimizer
// files' bytes (verified), and what was found and repaired, one line each.
struct ResumePoint {
  nlohmann::json state;
  Bytes model, optimizer;
  std::vector<std::string> notes;
};
// Finds the newest epoch whose files all verify, among checkpoint.json and the epoch files, and
// repairs the folder to match it (checkpoint.json, last.safetensors, newer incomplete epoch files
// removed). Returns false when the folder holds no state file (checkpoint.json or an epoch's
// .json): no checkpoint was ever completed; throws naming the files when state files exist but
// none verifies.
bool find_resume_point(const fs::path& run_dir, ResumePoint& out);

}  // namespace ember::train::checkpoint
