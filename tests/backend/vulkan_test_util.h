// What the Vulkan tests share: whether vulkan:0 exists, and REQUIRE_VULKAN(), which skips a test
// without a Vulkan device (saying why) unless CI=true or EMBER_REQUIRE_VULKAN=1 (then it fails).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "runtime/registry.h"

namespace ember::testing {

inline bool vulkan_available(std::string* why) {
  Backend* b = Backend::try_get(DeviceKind::Vulkan, why);
  return b && b->device_count() > 0;
}

inline bool vulkan_required() {
  const char* ci = std::getenv("CI");
  const char* req = std::getenv("EMBER_REQUIRE_VULKAN");
  return (ci && std::strcmp(ci, "true") == 0) || (req && std::strcmp(req, "1") == 0);
}

}  // namespace ember::testing

#define REQUIRE_VULKAN()                                                                                \
  do {                                                                                                  \
    std::string why_;                                                                                   \
    if (!::ember::testing::vulkan_available(&why_)) {                                                   \
      if (::ember::testing::vulkan_required()) FAIL() << "no Vulkan device, and one is required: " << why_; \
      GTEST_SKIP() << "no Vulkan device: " << why_;                                                     \
    }                                                                                                   \
  } while (0)
