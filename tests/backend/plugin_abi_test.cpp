// Plugin loading (ABI v2): the real plugins load and report their ABI and device properties; a
// plugin built for another ABI version (a future one, v1) or with a table too small is refused
// with a message that names the versions or sizes; a v2 plugin whose table ends before the
// optional fields works without them; unsupported dtypes are refused naming op, dtype, device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "runtime/registry.h"
#include "ember/ember.h"
#include "kir/builder.h"

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
    EXPECT_TRUE(b->supports(0, EMBER_SUPPORT_KIR, EMBER_KIR_ERF, EMBER_F32)) << name;
    EXPECT_TRUE(b->supports(0, EMBER_SUPPORT_KIR, EMBER_KIR_ERF, EMBER_F64)) << name;
    EXPECT_FALSE(b->supports(0, EMBER_SUPPORT_KIR, EMBER_KIR_NUM_OPS, EMBER_F32)) << name;
    EXPECT_TRUE(b->supports(0, EMBER_SUPPORT_LIBRARY, EMBER_LIB_MATMUL, EMBER_F32)) << name;
    EXPECT_FALSE(b->supports(0, EMBER_SUPPORT_LIBRARY, 9999, EMBER_F32)) << name;
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

TEST(PluginAbiTest, AbiV1PluginIsRefusedNamingItsVersion) {
  try {
    Backend::load_file(std::string(EMBER_TEST_PLUGIN_DIR) + "/libember_backend_v1abi.so", "v1abi");
    FAIL() << "an ABI v1 plugin was accepted";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("has ABI version 1 but this Ember needs version " + std::to_string(EMBER_BACKEND_ABI_VERSION)),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("rebuild the plugin"), std::string::npos) << msg;
  }
}

TEST(PluginAbiTest, TableSmallerThanTheRequiredFieldsIsRefused) {
  try {
    Backend::load_file(std::string(EMBER_TEST_PLUGIN_DIR) + "/libember_backend_shorttable.so", "short");
    FAIL() << "a 24-byte table was accepted";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("has a 24-byte table, smaller than the"), std::string::npos) << msg;
  }
}

TEST(PluginAbiTest, DevicePropertiesDescribeTheDevice) {
  for (const char* name : {"reference", "cpu"}) {
    auto b = Backend::load_file(std::string(EMBER_BUILD_LIB_DIR) + "/libember_backend_" + name + ".so", name);
    const ember_device_properties& p = b->properties(0);
    SCOPED_TRACE(p.name);
    const bool test_mode = std::string(name) == "reference" &&
                           (std::getenv("EMBER_REFERENCE_ASYNC") || std::getenv("EMBER_REFERENCE_WEAK"));
    EXPECT_STREQ(p.kind, test_mode ? "test" : "cpu") << name;
    EXPECT_EQ(p.async, std::string(name) == "reference" && std::getenv("EMBER_REFERENCE_ASYNC") ? 1u : 0u) << name;
    EXPECT_GT(std::strlen(p.name), 0u) << name;
    EXPECT_NE(p.dtypes & EMBER_DTYPE_BIT(EMBER_F64), 0u) << name;
    EXPECT_NE(p.dtypes & EMBER_DTYPE_BIT(EMBER_BF16), 0u) << name;
    EXPECT_EQ(p.index_bits, 64u) << name;
    EXPECT_EQ(p.host_visible, 1u) << name;
    // The threads one call keeps busy: the reference interpreter's one, the cpu plugin's pool
    // (OMP_NUM_THREADS when set; its name says the same count).
    if (std::string(name) == "reference") {
      EXPECT_EQ(p.host_threads, 1u);
    } else {
      EXPECT_GE(p.host_threads, 1u);
      EXPECT_NE(std::string(p.name).find(", " + std::to_string(p.host_threads) + " threads"), std::string::npos) << p.name;
      if (const char* omp = std::getenv("OMP_NUM_THREADS"); omp && std::atoi(omp) > 0) {
        EXPECT_EQ(p.host_threads, uint32_t(std::atoi(omp)));
      }
    }
    EXPECT_GT(p.memory_total, 0u) << name;
    EXPECT_GE(p.max_buffer_bytes, p.memory_total) << name;
    // A caller built against a shorter struct gets only the fields it has.
    ember_device_properties shorter;
    std::memset(&shorter, 0x5A, sizeof shorter);
    shorter.struct_size = offsetof(ember_device_properties, memory_total);
    ember_status st{};
    ASSERT_EQ(b->table().device_properties(0, &shorter, &st), EMBER_OK) << st.message;
    EXPECT_STREQ(shorter.name, p.name) << name;
    EXPECT_EQ(shorter.memory_total, 0x5A5A5A5A5A5A5A5Aull) << name;  // beyond its struct_size: untouched
    EXPECT_EQ(b->table().device_properties(7, &shorter, &st), EMBER_ERR_INVALID) << name;
  }
}

// The reference plugin built with a table that ends before the optional fields, started with
// two devices and weak capabilities (EMBER_REFERENCE_* are read when it is first used).
TEST(PluginAbiTest, PluginWithoutOptionalFieldsWorksAndWeakDevicesSayWhatTheyLack) {
  setenv("EMBER_REFERENCE_DEVICES", "2", 1);
  setenv("EMBER_REFERENCE_WEAK", "1", 1);
  auto b = Backend::load_file(std::string(EMBER_TEST_PLUGIN_DIR) + "/libember_backend_minimal.so", "minimal");
  ASSERT_EQ(b->device_count(), 2);
  unsetenv("EMBER_REFERENCE_DEVICES");
  unsetenv("EMBER_REFERENCE_WEAK");
  EXPECT_EQ(b->table().event_create, nullptr);
  EXPECT_EQ(b->table().buffer_copy, nullptr);
  EXPECT_EQ(b->properties(1).index_bits, 32u);
  EXPECT_EQ(b->properties(1).dtypes & EMBER_DTYPE_BIT(EMBER_F64), 0u);

  // Device 0 -> device 1 without buffer_copy or events: staged through the host.
  std::vector<float> values = {1.5f, -0.0f, std::numeric_limits<float>::quiet_NaN(), 4.0f};
  auto src = b->alloc(Device{DeviceKind::Reference, 0}, values.size() * sizeof(float));
  auto dst = b->alloc(Device{DeviceKind::Reference, 1}, values.size() * sizeof(float));
  b->write(*src, 0, values.data(), values.size() * sizeof(float));
  b->copy(*dst, 0, *src, sizeof(float), 3 * sizeof(float));
  std::vector<float> back(3);
  b->read(*dst, 0, back.data(), 3 * sizeof(float));
  EXPECT_TRUE(std::signbit(back[0]) && back[0] == 0.0f);
  EXPECT_TRUE(std::isnan(back[1]));
  EXPECT_EQ(back[2], 4.0f);
  b->synchronize(1);

  // f64 is missing on the weak device: compiling an f64 program names the op, dtype and device.
  kir::Builder kb;
  int out = kb.add_arg(DType::F64), in = kb.add_arg(DType::F64);
  kb.store(out, kb.load(in) + kb.load(in));
  ember_kir_program prog = kb.program("double_it");
  try {
    b->program(1, prog, kb.structure_hash());
    FAIL() << "an f64 program compiled on a device without f64";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("device minimal:1 does not support the KIR instruction 'load' on float64 (in double_it)"),
              std::string::npos) << msg;
  }
  // Buffers beyond the device's largest are refused, naming both sizes.
  try {
    b->alloc(Device{DeviceKind::Reference, 0}, size_t(1) << 30);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a buffer of 1073741824 bytes exceeds the device's largest buffer (67108864 bytes)"),
              std::string::npos) << e.what();
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
  // The CUDA plugin has no device here (it runs no kernels yet, and this machine has no driver):
  // using the device must raise, naming the plugin file and why it has no device, not crash.
  if (Device::cuda().available()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_FALSE(Device::cuda().available());
  try {
    (void)zeros({2}, {.device = Device::cuda()}).to_vector<float>();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("libember_backend_cuda.so"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("found no device"), std::string::npos) << e.what();
  }
}

TEST(PluginAbiTest, VersionIsReported) { EXPECT_STREQ(version(), EMBER_VERSION_STRING); }

}  // namespace
}  // namespace ember
