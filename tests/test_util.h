// Shared helpers for the tests: the devices every op test runs on, and value comparisons.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "ember/ops.h"

namespace ember::testing {

// The devices the op suite runs on: every backend whose plugin loads here (cpu and reference
// at least; vulkan/cuda when present).
inline std::vector<Device> test_devices() { return available_devices(); }

inline std::string device_test_name(const ::testing::TestParamInfo<Device>& info) {
  std::string s = info.param.str();
  for (char& c : s)
    if (c == ':') c = '_';
  return s;
}

// Element-wise closeness with a combined tolerance; NaNs must match NaNs.
inline ::testing::AssertionResult all_close(const std::vector<double>& got, const std::vector<double>& want,
                                            double rtol = 1e-5, double atol = 1e-6) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " vs expected " << want.size();
  for (size_t i = 0; i < got.size(); ++i) {
    double g = got[i], w = want[i];
    if (std::isnan(w) ? !std::isnan(g) : (std::isinf(w) ? g != w : std::fabs(g - w) > atol + rtol * std::fabs(w)))
      return ::testing::AssertionFailure() << "element " << i << ": got " << g << ", expected " << w;
  }
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult all_close(const Array& got, const std::vector<double>& want, double rtol = 1e-5,
                                            double atol = 1e-6) {
  return all_close(got.to_vector<double>(), want, rtol, atol);
}

// Runs f and returns the ember::Error message it throws; "<no error>" if it does not throw, and a
// marked message for any other exception type (which checks on the message then reject).
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ember::Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<not an ember::Error> ") + e.what();
  } catch (...) {
    return "<not an ember::Error>";
  }
  return "<no error>";
}

}  // namespace ember::testing
