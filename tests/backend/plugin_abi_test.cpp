// Plugin loading: the real plugins load and report their ABI; a plugin built for another ABI
// version is refused with a message that names both versions; a missing file is a clear error.
#include <gtest/gtest.h>

#include <string>

#include "backend/registry.h"
#include "ember/ember.h"

namespace ember {
namespace {

TEST(PluginAbiTest, RealPluginsLoadWithTheCurrentAbi) {
  auto b = Backend::load_file(std::string(EMBER_BUILD_LIB_DIR) + "/libember_backend_reference.so", "reference");
  EXPECT_EQ(b->table().abi_version, EMBER_BACKEND_ABI_VERSION);
  EXPECT_EQ(b->table().abi_version, backend_abi_version());
  EXPECT_STREQ(b->table().name, "reference");
  EXPECT_GE(b->device_count(), 1);
}

TEST(PluginAbiTest, PluginsSayWhichOpsTheySupport) {
  for (const char* name : {"reference", "cpu"}) {
    std::string path = std::string(EMBER_BUILD_LIB_DIR) + "/libember_backend_" + name + ".so";
    auto b = Backend::load_file(path, name);
    ASSERT_NE(b->table().supports_op, nullptr) << name;
    EXPECT_EQ(b->table().supports_op(EMBER_SUPPORT_KIR, EMBER_KIR_ERF), 1) << name;
    EXPECT_EQ(b->table().supports_op(EMBER_SUPPORT_KIR, EMBER_KIR_NUM_OPS), 0) << name;
    EXPECT_EQ(b->table().supports_op(EMBER_SUPPORT_LIBRARY, EMBER_LIB_MATMUL), 1) << name;
    EXPECT_EQ(b->table().supports_op(EMBER_SUPPORT_LIBRARY, 9999), 0) << name;
  }
}

TEST(PluginAbiTest, WrongAbiVersionIsRefusedWithAClearMessage) {
  std::string path = std::string(EMBER_TEST_PLUGIN_DIR) + "/libember_backend_badabi.so";
  try {
    Backend::load_file(path, "badabi");
    FAIL() << "a plugin with ABI version 999 was accepted";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("ABI version 999"), std::string::npos) << msg;
    EXPECT_NE(msg.find("needs version " + std::to_string(EMBER_BACKEND_ABI_VERSION)), std::string::npos) << msg;
    EXPECT_NE(msg.find("libember_backend_badabi.so"), std::string::npos) << msg;
  }
}

TEST(PluginAbiTest, MissingPluginFileIsAClearError) {
  try {
    Backend::load_file("/nonexistent/libember_backend_x.so", "x");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot load /nonexistent/libember_backend_x.so"), std::string::npos)
        << e.what();
  }
}

TEST(PluginAbiTest, UnavailableDevicesSayWhy) {
  // No CUDA plugin is built on this machine: using the device must raise, not crash.
  if (Device::cuda().available()) GTEST_SKIP() << "a CUDA plugin is present";
  EXPECT_FALSE(Device::cuda().available());
  try {
    (void)zeros({2}, {.device = Device::cuda()}).to_vector<float>();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("libember_backend_cuda.so"), std::string::npos) << e.what();
  }
}

TEST(PluginAbiTest, VersionIsReported) { EXPECT_STREQ(version(), EMBER_VERSION_STRING); }

}  // namespace
}  // namespace ember
