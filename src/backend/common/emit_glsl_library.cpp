// Library calls (abi.h EMBER_LIB_*) as GLSL compute shaders for the Vulkan plugin: each call is
// one or more passes (emit_glsl.h GlslPass) whose shaders read the call's tensors through their
// offsets and strides. The semantics are the reference backend's (src/backend/reference/
// library.cpp): same formulas, NaN rules and tie-breaking.
#include <string>
#include <vector>

#include "backend/common/emit_c.h"
#include "backend/common/emit_glsl.h"

namespace ember::emit {

namespace {

using W = GlslLaunchWords;

// Words of `n` tensors (offset and strides each) after the header.
void put_tensor(std::vector<int64_t>& words, int slot, const ember_tensor_desc& t) {
  int64_t* w = words.data() + W::kArgs + W::kPerArg * slot;
  w[W::kOffset] = t.offset;
  for (int d = 0; d < t.rank && d < 8; ++d) w[W::kStrides + d] = t.strides[d];
}

bool matmul(const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out, int32_t n_out,
            const GlslTarget& target, std::vector<GlslPass>& passes, std::string* why) {
  if (n_in != 2 || n_out != 1) {
    if (why) *why = "matmul takes 2 inputs and 1 output";
    return false;
  }
  const ember_tensor_desc &a = in[0], &b = in[1], &c = out[0];
  const int r = c.rank;
  if (r < 2 || r > 8 || a.rank != r || b.rank != r || a.dtype != c.dtype || b.dtype != c.dtype) {
    if (why) *why = "matmul: ranks or dtypes differ";
    return false;
  }
  GlslPass p;
  if (!emit_glsl_matmul(uint8_t(c.dtype), target, p.glsl, why)) return false;
  p.words.assign(size_t(W::words(3)), 0);
  p.points = 1;
  for (int d = 0; d < r; ++d) p.points *= c.shape[d];
  p.words[W::kPoints] = p.points;
  p.words[W::kRank] = r;
  p.words[2] = a.shape[r - 1];  // K
  for (int d = 0; d < r; ++d) p.words[size_t(W::kShape + d)] = c.shape[d];
  put_tensor(p.words, 0, a);
  put_tensor(p.words, 1, b);
  put_tensor(p.words, 2, c);
  passes.push_back(std::move(p));
  return true;
}

}  // namespace

bool glsl_library_supports(int32_t op, uint8_t dtype, const GlslTarget& target) {
  std::unique_ptr<ExprTable> t = make_glsl_table(target);
  switch (op) {
    case EMBER_LIB_MATMUL: return t->storage_type(dtype) && t->reg_type(dtype);
    default: return false;
  }
}

bool emit_glsl_library(int32_t op, const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out,
                       int32_t n_out, const void* attrs, const GlslTarget& target, std::vector<GlslPass>& passes,
                       std::string* why) {
  (void)attrs;
  passes.clear();
  switch (op) {
    case EMBER_LIB_MATMUL: return matmul(in, n_in, out, n_out, target, passes, why);
    default:
      if (why) *why = "library call " + std::to_string(op) + " has no Vulkan shader yet";
      return false;
  }
}

}  // namespace ember::emit
