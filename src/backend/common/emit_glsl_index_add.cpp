// Sums of rows at integer positions as GLSL compute shaders (abi.h EMBER_LIB_INDEX_ADD: the
// gradient of an embedding lookup or an index_select), with the reference backend's semantics
// (src/backend/reference/library.cpp) and its bits: out is zeroed, then for n = 0, 1, ..., N - 1
// in that order out[..., index[n], ...] += src[..., n, ...].
//
// Two passes: the first zeroes the output (an invocation per element); the second runs an
// invocation per position in the dims other than `dim` (an embedding's columns), which walks the
// index in order, so duplicates are summed in index order as on the reference backend: no atomics,
// the same bits on every run. An index outside [0, size) fails the call through the pass's own error
// word (GlslPass::check_name), with the value and S, like a gather. The walk is unrolled
// (emit_glsl_library.h) and split into passes of at most kChunk indices, each a dispatch of its
// own, so no invocation runs past lavapipe's loop limit.
//
// Floating dtypes the device computes in their own precision (f32; f64 where the device has it):
// each step rounds to the dtype, as the reference does. f16 and bf16, which the reference sums in
// f32 and rounds once, have no shader (the host fallback runs them).
//
// Launch words (emit_glsl_library.h Params, from word kZero + 1 on): R, dim, size (out's size
// along dim), lo and hi (the indices this pass walks), the three tensors' offsets, the index's stride,
// then three arrays of 8 words: out's shape, src's strides, out's strides.
#include <string>
#include <vector>

#include "backend/common/emit_glsl_library.h"

namespace ember::emit::lib {

namespace {
constexpr int64_t kChunk = int64_t(1) << 19;  // indices one accumulation pass walks at most
}  // namespace

bool index_add(const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out, int32_t n_out,
               const void* attrs, const GlslTarget& target, std::vector<GlslPass>& passes, std::string* why) {
  if (n_in != 2 || n_out != 1) return fail(why, "index_add takes src and index and gives one output");
  const ember_tensor_desc &src = in[0], &idx = in[1], &y = out[0];
  const int dim = static_cast<const ember_index_attrs*>(attrs)->dim;
  const uint8_t dt = uint8_t(src.dtype);
  if (src.rank < 1 || src.rank > 8 || y.rank != src.rank || dim < 0 || dim >= src.rank || idx.rank != 1 ||
      idx.dtype != EMBER_I64 || idx.shape[0] != src.shape[dim] || y.dtype != src.dtype)
    return fail(why, "index_add: bad operands");
  for (int d = 0; d < src.rank; ++d)
    if (d != dim && src.shape[d] != y.shape[d]) return fail(why, "index_add: shapes differ");
  if (dt != EMBER_F32 && !(dt == EMBER_F64 && target.float64))
    return fail(why, "index_add: no shader for this dtype (f16 and bf16 sum in f32: the host fallback runs them)");
  std::unique_ptr<ExprTable> t = make_glsl_table(target);
  const int64_t N = src.shape[dim], size = y.shape[dim];
  int64_t numel = 1;
  for (int d = 0; d < y.rank; ++d) numel *= y.shape[d];
  const int64_t columns = size > 0 ? numel / size : 0;

  // The same launch-word layout for both passes (one Params per pass: lo and hi differ).
  auto params = [&](int64_t lo, int64_t hi) {
    Params p;
    p.i64("R", y.rank);
    p.i64("dim", dim);
    p.i64("size", size);
    p.i64("lo", lo);
    p.i64("hi", hi);
    p.i64("src_o", src.offset);
    p.i64("idx_o", idx.offset);
    p.i64("y_o", y.offset);
    p.i64("idx_s", idx.strides[0]);
    int64_t shape[8] = {}, ss[8] = {}, ys[8] = {};
    for (int d = 0; d < y.rank; ++d) {
      shape[d] = y.shape[d];
      ss[d] = src.strides[d];
      ys[d] = y.strides[d];
    }
    p.array(shape, 8);
    p.array(ss, 8);
    p.array(ys, 8);
    return p;
  };
  // Word positions of the three arrays (after the header and the nine words above).
  const int sh = GlslLaunchWords::kZero + 1 + 9, ss = sh + 8, ys = ss + 8;
  const std::vector<uint8_t> dtypes = {dt, uint8_t(EMBER_I64), dt};
  const std::string T = compute_type(dt);

  // Pass 1: zeroes, an invocation per element of out.
  std::string zero = "  int64_t rem = id, oy = y_o;\n";
  zero += "  for (int d = int(R) - 1; d >= 0; --d) {\n";
  zero += "    int64_t n = P[" + S(sh) + " + d], q = rem % n;\n    rem /= n;\n    oy += q * P[" + S(ys) + " + d];\n  }\n";
  zero += "  " + store(*t, dt, 2, "oy", compute_dtype(dt), T + "(0)") + "\n";
  passes.push_back(make_pass("index_add (zero)", target, dtypes, params(0, 0), numel, y.rank, zero));

  // Pass 2 (one per chunk of the index): an invocation per column walks its indices in order.
  std::string walk = "  int64_t rem = id, os = src_o, oy = y_o;\n";
  walk += "  for (int d = int(R) - 1; d >= 0; --d) {\n    if (d == int(dim)) continue;\n";
  walk += "    int64_t n = P[" + S(sh) + " + d], q = rem % n;\n    rem /= n;\n";
  walk += "    os += q * P[" + S(ss) + " + d];\n    oy += q * P[" + S(ys) + " + d];\n  }\n";
  walk += "  int64_t s_src = P[" + S(ss) + " + int(dim)], s_y = P[" + S(ys) + " + int(dim)];\n";
  const std::string step =
      "int64_t row = " + load(*t, EMBER_I64, 1, "idx_o + n * idx_s") + ";\n" +
      "if (row < 0 || row >= size) e_fail(1u, EW(row), EW(size));\n" +
      "else " + store(*t, dt, 2, "oy + row * s_y", compute_dtype(dt),
                      load(*t, dt, 2, "oy + row * s_y") + " + " + load(*t, dt, 0, "os + n * s_src"));
  walk += unrolled("n", "lo", "hi", step, "  ");
  for (int64_t lo = 0; lo < N && columns > 0; lo += kChunk) {
    const int64_t hi = std::min(N, lo + kChunk);
    GlslPass pass = make_pass("index_add", target, dtypes, params(lo, hi), columns,
                              y.rank + unrolled_iterations(hi - lo), walk);
    pass.check_name = "index_add";  // as the core names the call's check
    passes.push_back(std::move(pass));
  }
  return true;
}

}  // namespace ember::emit::lib
