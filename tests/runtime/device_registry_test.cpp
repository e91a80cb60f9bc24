// The open device registry (src/core/device_kinds.h): a plugin file in a plugin folder is a
// device kind without any change to the core. The test plugins' folder holds the reference
// plugin built as libember_backend_minimal.so (tests/CMakeLists.txt) and three plugins the loader
// refuses; with EMBER_PLUGIN_PATH pointing there, "minimal" parses, prints, computes and is
// listed, and each refused one is listed with its reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "core/device_kinds.h"
#include "runtime/registry.h"
#include "ember/ember.h"
#include "test_util.h"

namespace ember {
namespace {

// EMBER_PLUGIN_PATH set for one test; the minimal plugin is configured as PluginAbiTest starts it
// (two weak devices: its settings are read once per process, whichever test loads it first).
struct TestPluginPath {
  TestPluginPath() {
    setenv("EMBER_PLUGIN_PATH", EMBER_TEST_PLUGIN_DIR, 1);
    setenv("EMBER_REFERENCE_DEVICES", "2", 1);
    setenv("EMBER_REFERENCE_WEAK", "1", 1);
  }
  ~TestPluginPath() {
    unsetenv("EMBER_PLUGIN_PATH");
    unsetenv("EMBER_REFERENCE_DEVICES");
    unsetenv("EMBER_REFERENCE_WEAK");
  }
};

TEST(DeviceRegistryTest, APluginFileIsADeviceKind) {
  TestPluginPath path;
  Device d = Device::parse("minimal:1");
  EXPECT_EQ(d.str(), "minimal:1");
  EXPECT_EQ(device_kind_name(d.kind), "minimal");
  EXPECT_GE(int(d.kind), 4);  // not one of the well-known kinds
  EXPECT_EQ(Device::parse("minimal:1"), d);  // the same value every time
  ASSERT_TRUE(d.available());
  std::vector<Device> devices = available_devices();
  EXPECT_NE(std::find(devices.begin(), devices.end(), d), devices.end());
  EXPECT_NE(std::find(devices.begin(), devices.end(), Device::cpu()), devices.end());
  // It computes like any device: exp and a sum on minimal:1, checked on the host.
  Array x = from_vector(std::vector<float>{0.0f, 1.0f, -2.0f, 0.5f}, {4}, d);
  Array y = sum(exp(x));
  EXPECT_EQ(y.device(), d);
  EXPECT_NEAR(y.item<float>(), 1.0 + std::exp(1.0) + std::exp(-2.0) + std::exp(0.5), 1e-5);
  EXPECT_EQ(to_device(x, Device::cpu()).to_vector<float>(), (std::vector<float>{0.0f, 1.0f, -2.0f, 0.5f}));
}

TEST(DeviceRegistryTest, RefusedPluginsAreListedWithTheirReason) {
  TestPluginPath path;
  std::vector<std::string> names;
  for (DeviceKind k : device_kinds()) names.push_back(device_kind_name(k));
  for (const char* n : {"cpu", "reference", "vulkan", "cuda", "minimal", "badabi", "v1abi", "shorttable"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  std::optional<DeviceKind> bad = find_device_kind("badabi");
  ASSERT_TRUE(bad);
  std::string why;
  EXPECT_EQ(Backend::try_get(*bad, &why), nullptr);
  EXPECT_NE(why.find("ABI version 999"), std::string::npos) << why;
  EXPECT_FALSE(Device::parse("v1abi").available());
}

TEST(DeviceRegistryTest, UnknownKindsNameTheKindsFound) {
  EXPECT_FALSE(find_device_kind("nosuchkind"));
  EXPECT_FALSE(find_device_kind("../etc"));  // not a plugin name: never a path
  std::string msg = ::ember::testing::error_of([] { Device::parse("nosuchkind:0"); });
  for (const char* part : {"unknown device 'nosuchkind:0'", "known kinds: cpu, reference, vulkan, cuda",
                           "libember_backend_<kind>.so"})
    EXPECT_NE(msg.find(part), std::string::npos) << msg;
}

}  // namespace
}  // namespace ember
