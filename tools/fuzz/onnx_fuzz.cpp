// libFuzzer target for the ONNX loader (src/onnx): any bytes must load or raise ember::Error,
// never crash, hang, read out of bounds or allocate without bound. A model that loads is run
// once on zero inputs when it is small (static input dims, few nodes), so the op builders see
// the fuzzed attributes too. Built only on request, with clang:
//   cmake -S . -B build/fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang \
//         -DEMBER_FUZZ=ON -DEMBER_SANITIZE=address,undefined
//   cmake --build build/fuzz --target ember_onnx_fuzz
//   ./build/fuzz/bin/ember_onnx_fuzz tests/onnx/fuzz_corpus -max_len=4096 -rss_limit_mb=2048
// The seed corpus is written by tools/fuzz/make_onnx_corpus.py; tests/onnx/fuzz_corpus_test.cpp
// replays it. docs/onnx.md records the runs.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "ember/ember.h"
#include "ember/onnx/onnx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    ember::onnx::Model model = ember::onnx::load_from_memory(
        std::string(reinterpret_cast<const char*>(data), size), {.max_bytes = 1 << 20});
    if (model.graph().nodes.size() > 16) return 0;
    // Legal but large folded constants (a 2^26-element ConstantOfShape) only cost memory and time
    // at forward: skip those, to keep the fuzzer fast and within -rss_limit_mb.
    for (const auto& p : model.named_parameters())
      if (p.param.array().numel() > (1 << 20)) return 0;
    for (const auto& p : model.named_buffers())
      if (p.param.array().numel() > (1 << 20)) return 0;
    std::map<std::string, ember::Array> inputs;
    for (const ember::onnx::ValueInfo& in : model.graph().inputs) {
      int64_t numel = 1;
      for (int64_t d : in.dims) {
        if (d < 0 || d > 64) return 0;
        numel *= d;
      }
      if (!in.has_shape || numel > 4096) return 0;
      ember::DType dtype = ember::onnx::dtype_from_onnx(in.data_type, in.name);
      inputs[in.name] = ember::zeros(ember::Shape(in.dims), {.dtype = dtype});
    }
    // Read back: an op's error on bad data (an index out of range) is raised at the first read.
    for (auto& [name, value] : model.forward(inputs))
      (void)ember::cast(value, ember::DType::F64).to_vector<double>();
  } catch (const ember::Error&) {
  }
  return 0;
}
