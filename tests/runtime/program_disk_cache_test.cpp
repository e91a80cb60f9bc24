// The core's compiled-program cache (src/runtime/program_disk_cache.h): round trips, checked
// loads (damage, hash collisions, other plugins), atomic concurrent stores, the size bound with
// least-recently-used eviction, the C services table plugins get, and a folder that cannot be used.
#include "runtime/program_disk_cache.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace ember {
namespace {

namespace fs = std::filesystem;
namespace pdc = program_disk_cache;
using namespace std::string_literals;

std::vector<uint8_t> bytes_of(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

std::string contents(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void overwrite(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

// A private cache folder and size bound for one test; restored afterwards.
class ProgramDiskCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("ember_pdc_test_" + std::to_string(::getpid()))).string();
    fs::remove_all(dir_);
    ::setenv("EMBER_CACHE_DIR", dir_.c_str(), 1);
    ::unsetenv("EMBER_CACHE_MAX_BYTES");
  }
  void TearDown() override {
    ::unsetenv("EMBER_CACHE_DIR");
    ::unsetenv("EMBER_CACHE_MAX_BYTES");
    std::error_code ec;
    fs::permissions(dir_, fs::perms::owner_all, ec);
    fs::remove_all(dir_, ec);
  }
  std::vector<std::string> entries() const {
    std::vector<std::string> v;
    for (const auto& e : fs::directory_iterator(dir_))
      if (e.path().extension() == ".bin") v.push_back(e.path().filename().string());
    std::sort(v.begin(), v.end());
    return v;
  }
  std::string dir_;
};

TEST_F(ProgramDiskCacheTest, StoredBytesComeBackWholeAndOnlyForTheirKeyAndPlugin) {
  EXPECT_EQ(pdc::folder(), dir_) << "EMBER_CACHE_DIR names the folder, created on first use";
  std::string payload(100000, '\0');
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = char(i * 131 + 7);
  const std::string key = "kernel source\n\0with a zero byte\ncompiler 1.2"s;
  const pdc::Counters c0 = pdc::counters();
  EXPECT_FALSE(pdc::load("cpu", key)) << "empty cache";
  ASSERT_TRUE(pdc::store("cpu", key, payload.data(), payload.size()));
  EXPECT_EQ(pdc::load("cpu", key), bytes_of(payload));
  EXPECT_FALSE(pdc::load("vulkan", key)) << "each plugin has its own entries";
  EXPECT_FALSE(pdc::load("cpu", key + " ")) << "another key";
  EXPECT_FALSE(pdc::load("cpu", key.substr(0, key.size() - 1)));
  const pdc::Counters c1 = pdc::counters();
  EXPECT_EQ(c1.stores, c0.stores + 1);
  EXPECT_EQ(c1.hits, c0.hits + 1);
  EXPECT_EQ(c1.misses, c0.misses + 4);
  // An empty payload is an entry too; storing again replaces.
  ASSERT_TRUE(pdc::store("cpu", "empty", nullptr, 0));
  EXPECT_EQ(pdc::load("cpu", "empty"), std::vector<uint8_t>{});
  ASSERT_TRUE(pdc::store("cpu", key, "new", 3));
  EXPECT_EQ(pdc::load("cpu", key), bytes_of("new"));
  EXPECT_EQ(entries().size(), 2u);
  // Names that cannot be file-name prefixes are refused, not stored somewhere else.
  for (const char* bad : {"", "../x", "CPU", "a/b", "cpu-1"}) {
    EXPECT_FALSE(pdc::store(bad, key, "x", 1)) << bad;
    EXPECT_FALSE(pdc::load(bad, key)) << bad;
  }
  EXPECT_EQ(entries().size(), 2u);
}

// Every byte of an entry is covered: a truncated file, a flipped bit anywhere (header, name, key,
// payload) or trailing garbage is a miss, and the next store replaces it.
TEST_F(ProgramDiskCacheTest, DamagedEntriesAreMissesAndAreReplaced) {
  const std::string key = "the key", payload = "SPIR-V or a shared object, say";
  ASSERT_TRUE(pdc::store("vulkan", key, payload.data(), payload.size()));
  const std::string path = pdc::entry_path("vulkan", key);
  const std::string whole = contents(path);
  ASSERT_EQ(whole.size(), 40 + 6 + key.size() + payload.size());
  std::vector<std::string> damaged;
  for (size_t at = 0; at < whole.size(); ++at) {
    std::string d = whole;
    d[at] ^= char(1 << (at % 8));
    damaged.push_back(d);
  }
  for (size_t n : {size_t(0), size_t(10), size_t(40), whole.size() - 1}) damaged.push_back(whole.substr(0, n));
  damaged.push_back(whole + "x");
  for (size_t i = 0; i < damaged.size(); ++i) {
    overwrite(path, damaged[i]);
    EXPECT_FALSE(pdc::load("vulkan", key)) << "damage " << i;
  }
  ASSERT_TRUE(pdc::store("vulkan", key, payload.data(), payload.size()));
  EXPECT_EQ(contents(path), whole);
  EXPECT_EQ(pdc::load("vulkan", key), bytes_of(payload));
}

// Two keys whose entries share a file name (a 64-bit hash collision, made here by copying one
// entry over the other's name) never give each other's bytes.
TEST_F(ProgramDiskCacheTest, AnEntryUnderAnotherKeysNameIsAMiss) {
  ASSERT_TRUE(pdc::store("cpu", "key A", "bytes of A", 10));
  ASSERT_TRUE(pdc::store("cpu", "key B", "bytes of B", 10));
  fs::copy_file(pdc::entry_path("cpu", "key A"), pdc::entry_path("cpu", "key B"), fs::copy_options::overwrite_existing);
  EXPECT_FALSE(pdc::load("cpu", "key B"));
  EXPECT_EQ(pdc::load("cpu", "key A"), bytes_of("bytes of A"));
  // The same for another plugin's entry under this plugin's name.
  ASSERT_TRUE(pdc::store("vulkan", "key A", "vk", 2));
  fs::copy_file(pdc::entry_path("vulkan", "key A"), pdc::entry_path("cpu", "key A"), fs::copy_options::overwrite_existing);
  EXPECT_FALSE(pdc::load("cpu", "key A"));
}

// Past EMBER_CACHE_MAX_BYTES the least recently used entries go, down to three quarters of the
// bound; a load counts as a use. Files the cache does not know are never removed.
TEST_F(ProgramDiskCacheTest, TheFolderIsBoundedAndForgetsTheLeastRecentlyUsed) {
  ::setenv("EMBER_CACHE_MAX_BYTES", "10K", 1);
  EXPECT_EQ(pdc::max_bytes(), 10240u);
  const std::string payload(1000, 'p');
  const size_t entry_bytes = 40 + 3 + 5 + payload.size();  // header, "cpu", "key N", payload
  fs::create_directories(dir_);
  overwrite(dir_ + "/notes.txt", std::string(20000, 'n'));  // not the cache's: kept, not counted
  // Ten entries (10,480 bytes in all would pass the bound on the tenth), each older than the next.
  const auto t0 = fs::file_time_type::clock::now() - std::chrono::hours(1);
  for (int i = 0; i < 9; ++i) {
    const std::string key = "key " + std::to_string(i);
    ASSERT_TRUE(pdc::store("cpu", key, payload.data(), payload.size()));
    fs::last_write_time(pdc::entry_path("cpu", key), t0 + std::chrono::minutes(i));
  }
  EXPECT_EQ(entries().size(), 9u);
  // Use entry 0 (the oldest) now: it becomes the most recently used.
  EXPECT_TRUE(pdc::load("cpu", "key 0"));
  ASSERT_TRUE(pdc::store("cpu", "key 9", payload.data(), payload.size()));
  // 10 entries = 10,480 > 10,240: evict 1, 2, 3 (oldest use first) until <= 7,680 = 7 entries.
  std::vector<std::string> kept;
  for (int i = 0; i < 10; ++i)
    if (fs::exists(pdc::entry_path("cpu", "key " + std::to_string(i)))) kept.push_back(std::to_string(i));
  EXPECT_EQ(kept, (std::vector<std::string>{"0", "4", "5", "6", "7", "8", "9"}));
  EXPECT_LE(kept.size() * entry_bytes, 7680u);
  EXPECT_TRUE(fs::exists(dir_ + "/notes.txt"));
  const pdc::Summary s = pdc::summary();
  EXPECT_EQ(s.folder, dir_);
  EXPECT_EQ(s.entries, 7);
  EXPECT_EQ(s.entry_bytes, 7 * entry_bytes);
  EXPECT_EQ(s.max_bytes, 10240u);
}

// The per-plugin caches this one replaced left files in the same folder: they count against the
// bound (oldest first) and `clear` removes them, with leftover temporaries, but nothing else.
TEST_F(ProgramDiskCacheTest, ClearRemovesEntriesLegacyFilesAndTemporariesOnly) {
  fs::create_directories(dir_);
  overwrite(dir_ + "/ember_0123456789abcdef.so", std::string(300, 's'));
  overwrite(dir_ + "/ember_0123456789abcdef.cpp", std::string(200, 'c'));
  overwrite(dir_ + "/vulkan_0123456789abcdef.spv", std::string(100, 'v'));
  overwrite(dir_ + "/cpu-0123456789abcdef.bin.123.0.tmp", "half written");
  overwrite(dir_ + "/README", "mine");
  ASSERT_TRUE(pdc::store("cpu", "k", "1234", 4));
  pdc::Summary s = pdc::summary();
  EXPECT_EQ(s.entries, 1);
  EXPECT_EQ(s.legacy_files, 3);
  EXPECT_EQ(s.legacy_bytes, 600u);
  const uint64_t freed = pdc::clear();
  EXPECT_EQ(freed, 600u + 12u + (40 + 3 + 1 + 4));
  EXPECT_EQ(pdc::summary().entries, 0);
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir_)) left.push_back(e.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"README"});
}

// Many threads storing and loading the same keys: a load sees a whole entry or none (stores
// rename a finished temporary file into place), never a mixture.
TEST_F(ProgramDiskCacheTest, ConcurrentStoresAndLoadsSeeWholeEntries) {
  const std::string a(50000, 'a'), b(70000, 'b');
  std::atomic<int> torn{0}, hits{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 40; ++i) {
        const std::string& mine = (t + i) % 2 ? a : b;
        EXPECT_TRUE(pdc::store("cpu", "shared key", mine.data(), mine.size()));
        if (auto got = pdc::load("cpu", "shared key")) {
          ++hits;
          if (*got != bytes_of(a) && *got != bytes_of(b)) ++torn;
        }
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(torn.load(), 0);
  EXPECT_GT(hits.load(), 0);
  EXPECT_EQ(entries().size(), 1u) << "no temporary files left";
  for (const auto& e : fs::directory_iterator(dir_)) EXPECT_EQ(e.path().extension(), ".bin") << e.path();
}

// What plugins call (abi.h ember_host_services): the same cache through C.
TEST_F(ProgramDiskCacheTest, PluginsReachItThroughTheHostServicesTable) {
  const ember_host_services* h = pdc::host_services();
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->struct_size, sizeof(ember_host_services));
  const char key[] = {'k', '\0', 'y'};
  EXPECT_EQ(h->cache_store("cuda", key, sizeof key, "cubin", 5), 1);
  void* data = nullptr;
  size_t n = 0;
  ASSERT_EQ(h->cache_load("cuda", key, sizeof key, &data, &n), 1);
  EXPECT_EQ(std::string(static_cast<const char*>(data), n), "cubin");
  h->cache_free(data);
  EXPECT_EQ(h->cache_load("cuda", key, 1, &data, &n), 0) << "a key is all its bytes, zeros included";
  EXPECT_EQ(h->cache_load(nullptr, key, sizeof key, &data, &n), 0);
  EXPECT_EQ(h->cache_store("cuda", nullptr, 0, "x", 1), 0);
}

// No usable folder (an unwritable one, or the cache switched off): loads miss, stores do nothing,
// nothing throws, and the reason is visible in summary().
TEST_F(ProgramDiskCacheTest, WithoutAUsableFolderNothingIsStored) {
  if (::geteuid() == 0) {
    // root writes through permissions, so the unwritable case is a folder below a file
    ::setenv("EMBER_CACHE_DIR", "/dev/null/ember", 1);
  } else {
    fs::create_directories(dir_);
    fs::permissions(dir_, fs::perms::owner_read | fs::perms::owner_exec);
  }
  EXPECT_FALSE(pdc::store("cpu", "k", "x", 1));
  EXPECT_FALSE(pdc::load("cpu", "k"));
  pdc::Summary s = pdc::summary();
  EXPECT_EQ(s.folder, "");
  EXPECT_FALSE(s.tried.empty());
  ::setenv("EMBER_CACHE_DIR", dir_.c_str(), 1);
  std::error_code ec;
  fs::permissions(dir_, fs::perms::owner_all, ec);
  ::setenv("EMBER_CACHE_MAX_BYTES", "0", 1);
  EXPECT_EQ(pdc::folder(), "") << "EMBER_CACHE_MAX_BYTES=0 turns the cache off";
  EXPECT_FALSE(pdc::store("cpu", "k", "x", 1));
  ::setenv("EMBER_CACHE_MAX_BYTES", "12Q", 1);
  EXPECT_EQ(pdc::max_bytes(), uint64_t(1) << 30) << "a bad size keeps the default (with a warning)";
  ::setenv("EMBER_CACHE_MAX_BYTES", "2M", 1);
  EXPECT_EQ(pdc::max_bytes(), uint64_t(2) << 20);
}

}  // namespace
}  // namespace ember
