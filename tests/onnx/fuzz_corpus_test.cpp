// Replays the committed seed corpus of the ONNX loader's fuzzer (tools/fuzz/onnx_fuzz.cpp,
// written by tools/fuzz/make_onnx_corpus.py): valid_* models must load and run on zero inputs,
// fuzz_* files may load or be refused, every other file must be refused with ember::Error;
// nothing may crash or throw anything else. CI runs this under the sanitizers too.
#include <gtest/gtest.h>

#ifdef EMBER_HAVE_ONNX

#include <filesystem>
#include <fstream>

#include "ember/ember.h"
#include "ember/onnx/onnx.h"

using namespace ember;

namespace {

// Loads `bytes` and runs the model on zeros of its inputs' static shapes (what the fuzzer does).
void load_and_run(const std::string& bytes) {
  onnx::Model model = onnx::load_from_memory(bytes, {.max_bytes = 1 << 20});
  std::map<std::string, Array> inputs;
  for (const onnx::ValueInfo& in : model.graph().inputs)
    inputs[in.name] = zeros(Shape(in.dims), {.dtype = onnx::dtype_from_onnx(in.data_type, in.name)});
  // Read back: an op's error on bad data (an index out of range) is raised at the first read.
  for (auto& [name, value] : model.forward(inputs)) (void)cast(value, DType::F64).to_vector<double>();
}

TEST(OnnxFuzzCorpusTest, ReplaysWithTheOutcomeItsNamesAsk) {
  std::string dir = std::string(EMBER_SOURCE_DIR) + "/tests/onnx/fuzz_corpus";
  int files = 0, valid = 0, refused = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    std::ifstream in(entry.path(), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    ++files;
    std::string error;
    try {
      load_and_run(bytes);
    } catch (const Error& e) {
      error = e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << name << ": not an ember::Error: " << e.what();
      continue;
    }
    if (name.rfind("valid_", 0) == 0) {
      EXPECT_EQ(error, "") << name;
      ++valid;
    } else if (name.rfind("fuzz_", 0) != 0) {
      EXPECT_NE(error, "") << name << " was accepted";
      ++refused;
    }
  }
  EXPECT_GE(files, 25);
  EXPECT_GE(valid, 5);
  EXPECT_GE(refused, 20);
}

// The valid seeds compute what they should: Gemm + Relu of zeros is relu(b).
TEST(OnnxFuzzCorpusTest, ValidGemmSeedComputesRelu) {
  std::ifstream in(std::string(EMBER_SOURCE_DIR) + "/tests/onnx/fuzz_corpus/valid_gemm_relu", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  onnx::Model model = onnx::load_from_memory(bytes);
  EXPECT_EQ(model.forward({{"x", zeros({1, 3})}}).at("y").to_vector<float>(), (std::vector<float>{0.5f, 0.0f}));
}

}  // namespace

#endif  // EMBER_HAVE_ONNX
