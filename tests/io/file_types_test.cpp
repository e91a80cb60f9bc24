// Every file reader refuses paths that are not regular files (a directory, a FIFO, a device) with
// an ember::Error naming the path, and never blocks on a FIFO: safetensors, IDX, CSV and images.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <ember/ember.h>
#include <filesystem>
#include <functional>
#include <future>

#include "ember/io/safetensors.h"
#include "test_util.h"

namespace ember {
namespace {

namespace fs = std::filesystem;

using ember::testing::error_of;

// One loader per reader, each given `path` as its file.
std::vector<std::pair<std::string, std::function<void(const std::string&)>>> readers() {
  return {{"safetensors", [](const std::string& p) { io::load_file(p); }},
          {"idx", [](const std::string& p) { data::read_idx(p); }},
          {"csv", [](const std::string& p) { data::CsvDataset::open(p); }},
          {"image", [](const std::string& p) { data::load_image(p); }}};
}

std::string fresh_dir(const std::string& name) {
  fs::path dir = fs::path(::testing::TempDir()) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

TEST(FileTypesTest, DirectoryGivenAsFileIsRefusedNamingThePath) {
  std::string dir = fresh_dir("ember_dir_as_file");
  for (auto& [name, read] : readers()) {
    std::string msg = error_of([&] { read(dir); });
    EXPECT_NE(msg.find(dir), std::string::npos) << name << ": " << msg;
    EXPECT_NE(msg.find("is a directory, not a regular file"), std::string::npos) << name << ": " << msg;
  }
}

TEST(FileTypesTest, FifoIsRefusedWithoutBlocking) {
  std::string path = fresh_dir("ember_fifo") + "/pipe";
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  for (auto& [name, read] : readers()) {
    auto result = std::async(std::launch::async, [&, read = read] { return error_of([&] { read(path); }); });
    if (result.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      ADD_FAILURE() << name << ": still blocked on the FIFO after 10 s";
      // Release the reader: a writer that opens and closes gives it end of file.
      int w = ::open(path.c_str(), O_WRONLY | O_NONBLOCK);
      if (w >= 0) ::close(w);
    }
    std::string msg = result.get();
    EXPECT_NE(msg.find(path), std::string::npos) << name << ": " << msg;
    EXPECT_NE(msg.find("is a FIFO"), std::string::npos) << name << ": " << msg;
  }
}

TEST(FileTypesTest, CharacterDeviceIsRefused) {
  for (auto& [name, read] : readers()) {
    std::string msg = error_of([&] { read("/dev/null"); });
    EXPECT_NE(msg.find("/dev/null: it is a character device, not a regular file"), std::string::npos) << name << ": " << msg;
  }
}

TEST(FileTypesTest, MissingFileNamesThePathAndTheReason) {
  for (auto& [name, read] : readers()) {
    std::string msg = error_of([&] { read("/nonexistent/ember-file"); });
    EXPECT_NE(msg.find("cannot open /nonexistent/ember-file: No such file or directory"), std::string::npos)
        << name << ": " << msg;
  }
}

}  // namespace
}  // namespace ember
