// Printing shapes, dtypes and devices with operator<< (std::cout << x.shape(), << x.dtype(),
// << x.device()), and dtype names in C-style formatting.
#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>

#include "ember/tensor.h"

namespace ember {
namespace {

template <class T>
std::string printed(const T& value) {
  std::ostringstream os;
  os << value;
  return os.str();
}

TEST(PrintShapeDTypeTest, ShapesPrintAsTheirDims) {
  EXPECT_EQ(printed(Shape{2, 3}), "[2, 3]");
  EXPECT_EQ(printed(Shape{}), "[]");
  EXPECT_EQ(printed(Shape{0, 1, 7}), "[0, 1, 7]");
  auto x = Tensor<3>::zeros({4, 1, 5});
  EXPECT_EQ(printed(x.shape()), "[4, 1, 5]");
  std::ostringstream os;
  os << "shape " << x.shape() << " dtype " << x.dtype();  // chains like any stream output
  EXPECT_EQ(os.str(), "shape [4, 1, 5] dtype float32");
}

TEST(PrintShapeDTypeTest, DTypesPrintTheirNames) {
  EXPECT_EQ(printed(DType::F32), "float32");
  EXPECT_EQ(printed(DType::F64), "float64");
  EXPECT_EQ(printed(DType::F16), "float16");
  EXPECT_EQ(printed(DType::BF16), "bfloat16");
  EXPECT_EQ(printed(DType::I32), "int32");
  EXPECT_EQ(printed(DType::I64), "int64");
  EXPECT_EQ(printed(DType::U8), "uint8");
  EXPECT_EQ(printed(DType::Bool), "bool");
  EXPECT_EQ(printed(Tensor<1, Int>::from_data({1, 2}).dtype()), "int64");
}

TEST(PrintShapeDTypeTest, DTypeNamesAreNullTerminatedForPrintf) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%s|%s|%s", dtype_name(DType::F32).data(), dtype_name(DType::BF16).data(),
                dtype_name(DType::Bool).data());
  EXPECT_STREQ(buffer, "float32|bfloat16|bool");
}

TEST(PrintShapeDTypeTest, DevicesPrintTheirNames) {
  EXPECT_EQ(printed(Device::cpu()), "cpu");
  EXPECT_EQ(printed(Device::reference()), "reference");
  EXPECT_EQ(printed(Device{DeviceKind::Cpu, 2}), "cpu:2");
  EXPECT_EQ(printed(Device::vulkan()), "vulkan:0");
  EXPECT_EQ(printed(Device::vulkan(1)), "vulkan:1");
  EXPECT_EQ(printed(Device::cuda()), "cuda:0");
  auto x = Tensor<2>::ones({2, 3});
  std::ostringstream os;
  os << x.shape() << " " << x.dtype() << " on " << x.device();
  EXPECT_EQ(os.str(), "[2, 3] float32 on cpu");
}

}  // namespace
}  // namespace ember
