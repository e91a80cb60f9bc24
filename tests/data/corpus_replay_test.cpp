// Replays the committed fuzz corpora of the IDX/gzip and CSV readers (tools/fuzz/make_corpus.py,
// tools/fuzz/{idx,csv}_fuzz.cpp): valid_* files must be read, fuzz_* files may be read or refused,
// every other file must be refused with ember::Error; nothing may crash or throw anything else.
// CI runs this under AddressSanitizer and UBSan too.
#include <gtest/gtest.h>

#include <ember/ember.h>

#include <filesystem>
#include <fstream>

#include "data/readers_internal.h"
#include "nn/nn_test_util.h"

namespace ember::data {
namespace {

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// Feeds every file of the corpus to `read`, checking the outcome its name asks for.
void replay(const std::string& corpus, const std::function<void(const std::vector<uint8_t>&, const std::string&)>& read) {
  std::string dir = ember::testing::tests_dir() + "/data/" + corpus;
  int files = 0, valid = 0, refused = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    std::vector<uint8_t> bytes = read_bytes(entry.path().string());
    ++files;
    std::string error;
    try {
      read(bytes, name);
    } catch (const Error& e) {
      error = e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << name << ": not an ember::Error: " << e.what();
      continue;
    }
    if (starts_with(name, "valid_")) {
      EXPECT_EQ(error, "") << name;
      ++valid;
    } else if (!starts_with(name, "fuzz_")) {
      EXPECT_NE(error, "") << name << " was accepted";
      EXPECT_NE(error.find(name), std::string::npos) << "the error does not name the file: " << error;
      ++refused;
    }
  }
  EXPECT_GE(files, 15) << dir;
  EXPECT_GE(valid, 5) << dir;
  EXPECT_GE(refused, 10) << dir;
}

TEST(CorpusReplayTest, IdxCorpus) {
  replay("idx_corpus", [](const std::vector<uint8_t>& bytes, const std::string& name) {
    IdxArray a = detail::decode_idx(bytes.data(), bytes.size(), name);
    // The declared shape and the data agree: every element converts.
    EXPECT_EQ(a.values<float>().size(), size_t(a.numel())) << name;
  });
  // A known file decodes to known values.
  IdxArray multi = read_idx(ember::testing::tests_dir() + "/data/idx_corpus/valid_multi_member.gz");
  std::vector<int64_t> want(16);
  for (size_t i = 0; i < want.size(); ++i) want[i] = int64_t(i);
  EXPECT_EQ(multi.values<int64_t>(), want);
}

TEST(CorpusReplayTest, CsvCorpus) {
  replay("csv_corpus", [](const std::vector<uint8_t>& bytes, const std::string& name) {
    auto ds = CsvDataset::parse(std::string(bytes.begin(), bytes.end()), {.targets = {"y"}}, name);
    for (size_t i = 0; i < ds->size(); ++i) EXPECT_EQ(ds->get(i).targets.size(), 1u) << name;
  });
  auto bom = CsvDataset::open(ember::testing::tests_dir() + "/data/csv_corpus/valid_bom", {.targets = {"y"}});
  EXPECT_EQ(bom->get(0).targets, (std::vector<float>{1}));
  EXPECT_EQ(bom->get(0).features, (std::vector<float>{2}));
}

}  // namespace
}  // namespace ember::data
