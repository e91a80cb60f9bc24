// Convolution and pooling library calls as GLSL compute shaders (abi.h EMBER_LIB_CONV2D ...
// EMBER_LIB_MAX_POOL2D_BACKWARD), one pass each and one invocation per output element, in the
// order of the reference backend's loops (src/backend/reference/library.cpp); the convolution
// passes of larger layers as implicit GEMMs in the same order (below). The gradients that
// the reference computes as scatter-adds (backward data, pooling backward) are gathers here: each
// input element sums the taps or windows that read it, visited in the reference's order. f16 and
// bf16 compute in f32 and round at the store; f32 accumulates in f32 (as matmul), f64 in f64.
// A convolution whose sum per output is long (backward weights: N * OH * OW terms) runs a
// workgroup per output instead: invocation l takes terms l, l + WG, ... of the flattened sum, and
// a fixed shared-memory tree adds the partial sums (emit_glsl_library.h: lavapipe's loop budget).
//
// Launch words (emit_glsl_library.h Params, from word kZero + 1 on): the sizes and attributes
// named in each shader's declarations, then every tensor's offset and 4 strides (a bias: 1).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"  // GCC bug 105329 in std::string concatenation
#endif
#include <algorithm>
#include <array>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/common/emit_glsl_library.h"

namespace ember::emit::lib {

namespace {

// Offset of element (a, b, c, d) of rank-4 tensor `t` (declared by Params::tensor).
std::string at4(const std::string& t, const std::string& a, const std::string& b, const std::string& c,
                const std::string& d) {
  return t + "_o + (" + a + ") * " + t + "_s0 + (" + b + ") * " + t + "_s1 + (" + c + ") * " + t + "_s2 + (" + d +
         ") * " + t + "_s3";
}

// The point `id` as indices (a, b, c, d) of a row-major [A, B, C, D] grid.
std::string unravel4(const std::string& a, const std::string& b, const std::string& c, const std::string& d,
                     const std::string& B, const std::string& C, const std::string& D) {
  return "  int64_t " + d + " = id % " + D + ", rest = id / " + D + ";\n  int64_t " + c + " = rest % " + C +
         ";\n  rest /= " + C + ";\n  int64_t " + b + " = rest % " + B + ", " + a + " = rest / " + B + ";\n";
}

bool same_float_dtypes(const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc& out, bool out_is_index) {
  for (int32_t i = 0; i < n_in; ++i)
    if (in[i].dtype != in[0].dtype || !is_floating(in[i].dtype)) return false;
  return out_is_index ? out.dtype == EMBER_I64 : out.dtype == in[0].dtype;
}

// A convolution runs a workgroup per output when one invocation would loop more than kTreeAbove
// times (well inside lavapipe's budget of 65535), or more than kTreeFewAbove times with fewer
// than kFewOutputs outputs (then the direct pass would leave most of the device idle).
constexpr int64_t kTreeAbove = 32768, kTreeFewAbove = 2048, kFewOutputs = 16384;

// Convolutions as implicit GEMMs, through the tiled matmul's scheme (emit_glsl_library.cpp,
// matmul_tiled): a workgroup of 256 invocations per 64 x 64 (or 32 x 128) block of outputs (of
// one image, for the forward and the input gradient), 4 x 4 per invocation, both operands staged
// through shared memory 16 terms at a time, the second one gathered from its tensor (the virtual
// im2col matrix) with a validity flag. Every output still starts where the direct shader starts
// and adds its terms in the direct shader's order, and a term that the direct loops skip (a tap
// in the padding, or between the strides of a transposed read) is skipped here too, not
// multiplied by a zero: an infinite weight there would give NaN, and -0 sums would become +0. The
// staging and the 16 terms of a block are unrolled in the text, so lavapipe counts one loop
// iteration per block (its loop budget then allows about 960,000 terms: the weight gradient's sum
// over the batch and the image fits whole, in the direct shader's order). Measured on lavapipe
// (the Fashion-MNIST CNN's 32 -> 64 layer at 14 x 14, batch 16, 57.8 M multiply-adds): forward
// 0.96 s per call in the direct shader, 0.13 s here. Taken for ungrouped layers whose GEMM has at
// least 32 rows, 32 columns and 32 terms (a 1-channel 3 x 3 layer, 9 terms, was 2x slower than
// direct: most of each 16-term block is empty) and whose loop count fits lavapipe's budget, on
// targets with the tiled matmul's workgroup and int64. EMBER_VULKAN_CONV_DIRECT=1 turns them off.
int64_t gather_gemm_iterations(int64_t K) { return (K + 15) / 16 + 48; }

// Shared memory of a gather GEMM's TM x TN blocks: the staged operands, 16 x (TM + 1) and
// 16 x (TN + 1) values of `value_bytes`, and the validity flags (a bool taken as 4 bytes).
int64_t gather_gemm_shared_bytes(int TM, int TN, int64_t value_bytes) {
  return 16 * ((TM + 1) * value_bytes + (TN + 1) * (value_bytes + 4));
}

bool use_gather_gemm(int64_t rows, int64_t cols, int64_t terms, const ember_conv_attrs& a, const GlslTarget& target,
                     uint8_t dt) {
  return target.workgroup == 256 && target.int64 && a.groups == 1 && rows >= 32 && cols >= 32 && terms >= 32 &&
         gather_gemm_iterations(terms) <= 60000 &&
         gather_gemm_shared_bytes(64, 64, dt == EMBER_F64 ? 8 : 4) <= target.shared_bytes &&
         !std::getenv("EMBER_VULKAN_CONV_DIRECT");
}

// A gather GEMM over launch words M (rows), PP (columns per image) and K (terms), its statements
// given as GLSL text: `start`, the start value of row `o`; `a_load`, statements setting `wa` for
// row gi and term gka (both in range); `b_load`, statements setting `xv` and `ok` for column gj
// and term gkb of image n (in range); `finish`, statements for row o and column gj of image n,
// given the sum in `precise A y`. The tile id also picks the image n (0 where the GEMM covers the
// batch: images = 1). A term past K stages ok = false, so the 16 terms of the last block need no
// bound of their own.
struct GatherGemm {
  std::string what, A, start, a_load, b_load, finish;
  int64_t rows = 0, cols = 0, terms = 0, images = 1;
};

// Blocks of TM x TN outputs (TM x TN = 4096, 4 x 4 per invocation): 64 x 64, or 32 x 128 where
// that wastes fewer rows (rows % 64 in 1..32: a 32-channel layer's 64-row blocks are half empty)
// and its shared arrays fit the device (18.6 KB in f32, 29 KB in f64).
GlslPass gather_gemm_pass(const GatherGemm& g, const GlslTarget& target, const std::vector<uint8_t>& dts,
                          const Params& p) {
  const bool narrow = g.rows % 64 != 0 && g.rows % 64 <= 32 &&
                      gather_gemm_shared_bytes(32, 128, g.A == "double" ? 8 : 4) <= target.shared_bytes;
  const int TM = narrow ? 32 : 64, TN = 4096 / TM;
  const std::string A = g.A, sTM = S(TM), sTN = S(TN), tx_span = S(TN / 4) + "u";
  std::string b;
  b += "  int64_t tn = (PP + " + S(TN - 1) + ") / " + sTN + ", tm = (M + " + S(TM - 1) + ") / " + sTM + ";\n";
  b += "  int64_t tj = id % tn, rem = id / tn;\n  int64_t ti = rem % tm, n = rem / tm;\n";
  b += "  int64_t i0 = ti * " + sTM + ", j0 = tj * " + sTN + ";\n  uint tx = lid % " + tx_span + ", ty = lid / " +
       tx_span + ";\n";
  b += "  " + A + " acc[4][4];\n  for (int u = 0; u < 4; ++u) {\n    int64_t o = i0 + int64_t(ty * 4u + uint(u));\n";
  b += "    " + A + " start = " + g.start + ";\n    for (int v = 0; v < 4; ++v) acc[u][v] = start;\n  }\n";
  b += "  for (int64_t k0 = 0; k0 < K; k0 += 16) {\n";
  for (int q = 0; q < TM / 16; ++q) {  // the TM x 16 block of the first operand
    b += "    {\n      uint e = lid + " + S(256 * q) + "u, row = e / 16u, ka = e % 16u;\n";
    b += "      int64_t gi = i0 + int64_t(row), gka = k0 + int64_t(ka);\n";
    b += "      " + A + " wa = " + A + "(0);\n";
    b += "      if (gi < M && gka < K) {\n" + g.a_load + "      }\n      sa[ka][row] = wa;\n    }\n";
  }
  for (int q = 0; q < TN / 16; ++q) {  // the 16 x TN block of the second, gathered
    b += "    {\n      uint e = lid + " + S(256 * q) + "u, kb = e / " + sTN + "u, col = e % " + sTN + "u;\n";
    b += "      int64_t gj = j0 + int64_t(col), gkb = k0 + int64_t(kb);\n";
    b += "      " + A + " xv = " + A + "(0);\n      bool ok = false;\n";
    b += "      if (gj < PP && gkb < K) {\n" + g.b_load + "      }\n";
    b += "      sb[kb][col] = xv;\n      sv[kb][col] = ok;\n    }\n";
  }
  b += "    barrier();\n";
  for (int kk = 0; kk < 16; ++kk) {
    const std::string k = S(kk);
    b += "    {\n";
    for (int u = 0; u < 4; ++u)
      b += "      " + A + " a" + S(u) + " = sa[" + k + "][ty * 4u + " + S(u) + "u], b" + S(u) + " = sb[" + k +
           "][tx * 4u + " + S(u) + "u];\n";
    for (int v = 0; v < 4; ++v) {
      b += "      if (sv[" + k + "][tx * 4u + " + S(v) + "u]) {";
      for (int u = 0; u < 4; ++u) b += " acc[" + S(u) + "][" + S(v) + "] += b" + S(v) + " * a" + S(u) + ";";
      b += " }\n";
    }
    b += "    }\n";
  }
  b += "    barrier();\n  }\n";
  b += "  for (int u = 0; u < 4; ++u) for (int v = 0; v < 4; ++v) {\n";
  b += "    int64_t o = i0 + int64_t(ty * 4u + uint(u)), gj = j0 + int64_t(tx * 4u + uint(v));\n";
  b += "    if (o < M && gj < PP) {\n      precise " + A + " y = acc[u][v];\n" + g.finish + "    }\n  }\n";
  const std::string shared = "shared " + A + " sa[16][" + S(TM + 1) + "];\nshared " + A + " sb[16][" + S(TN + 1) +
                             "];\nshared bool sv[16][" + S(TN + 1) + "];\n";
  const int64_t tiles = (g.rows + TM - 1) / TM * ((g.cols + TN - 1) / TN) * g.images;
  return make_pass(g.what, target, dts, p, tiles, gather_gemm_iterations(g.terms), b, shared, /*tree=*/true);
}

// The words of a convolution's stride, padding and dilation (sh, sw, ph, pw, dh, dw).
void geometry_words(Params& p, const ember_conv_attrs& a) {
  const char* names[] = {"sh", "sw", "ph", "pw", "dh", "dw"};
  const int64_t values[] = {a.stride[0], a.stride[1], a.pad_begin[0], a.pad_begin[1], a.dilation[0], a.dilation[1]};
  for (int i = 0; i < 6; ++i) p.i64(names[i], values[i]);
}

// The words every convolution gather GEMM declares: its rows, columns and terms (M, PP, K), then
// the convolution's sizes and attributes.
void conv_words(Params& p, int64_t rows, int64_t cols, int64_t terms, const ember_tensor_desc& x,
                const ember_tensor_desc& w, const ember_tensor_desc& y, const ember_conv_attrs& a) {
  const char* names[] = {"M", "PP", "K", "H", "W", "OH", "OW", "KH", "KW"};
  const int64_t values[] = {rows, cols, terms, x.shape[2], x.shape[3], y.shape[2], y.shape[3], w.shape[2], w.shape[3]};
  for (int i = 0; i < 9; ++i) p.i64(names[i], values[i]);
  geometry_words(p, a);
}

// Declares the tensors of a gradient GEMM (its two inputs, then its output) as 4-D tensors named
// `names`; returns their dtypes (the pass's bindings).
std::vector<uint8_t> gradient_tensors(Params& p, const std::array<const char*, 3>& names,
                                      const std::array<const ember_tensor_desc*, 3>& ts) {
  std::vector<uint8_t> dts;
  for (int i = 0; i < 3; ++i) {
    p.tensor(names[size_t(i)], *ts[size_t(i)], 4);
    dts.push_back(uint8_t(ts[size_t(i)]->dtype));
  }
  return dts;
}

// Statements (indented by `ind`) decoding term or column `k` of an im2col matrix into its tap
// (c, kh, kw), ordered (c, kh, kw).
std::string tap_of(const std::string& k, const std::string& ind = "        ") {
  return ind + "int64_t kw = " + k + " % KW, r = " + k + " / KW;\n" + ind + "int64_t kh = r % KH, c = r / KH;\n";
}

// Statements of a b_load reading x[n, c, ih, iw] into xv where the tap is inside the image (ok).
std::string gathered_x(const ExprTable& t, uint8_t dt, const std::string& A, const std::string& n) {
  return "        if (ih >= 0 && ih < H && iw >= 0 && iw < W) {\n          ok = true;\n          xv = " + A + "(" +
         load(t, dt, 0, at4("x", n, "c", "ih", "iw")) + ");\n        }\n";
}

// The forward: y[n] = w [O, K] times x[n]'s im2col matrix [K, OH * OW], K = C * KH * KW ordered
// (c, kh, kw); rows start at the bias. `epi` as in conv() below.
GlslPass conv_forward_gemm(const ember_tensor_desc* in, int32_t n_in, int32_t n_conv, const ember_tensor_desc& y,
                           const ember_conv_attrs& a, const GlslTarget& target, const ember_epilogue_attrs* epi) {
  const ember_tensor_desc &x = in[0], &w = in[1];
  const uint8_t dt = uint8_t(in[0].dtype);
  const std::string A = compute_type(dt);
  std::unique_ptr<ExprTable> t = make_glsl_table(target);
  const int64_t K = x.shape[1] * w.shape[2] * w.shape[3], O = y.shape[1], PP = y.shape[2] * y.shape[3];
  Params p;
  conv_words(p, O, PP, K, x, w, y, a);
  p.tensor("x", x, 4);
  p.tensor("w", w, 4);
  if (n_conv == 3) p.tensor("b", in[2], 1);
  p.tensor("y", y, 4);
  for (int32_t k = n_conv; k < n_in; ++k) p.tensor("p" + S(k), in[k], 4);
  std::vector<uint8_t> dts;
  for (int32_t i = 0; i < n_in; ++i) dts.push_back(uint8_t(in[i].dtype));
  dts.push_back(uint8_t(y.dtype));
  const std::string start = n_conv == 3 ? "o < M ? " + A + "(" + load(*t, dt, 2, "b_o + o * b_s0") + ") : " + A + "(0)"
                                        : A + "(0)";
  const std::string a_load =
      tap_of("gka") + "        wa = " + A + "(" + load(*t, dt, 1, at4("w", "gi", "c", "kh", "kw")) + ");\n";
  const std::string b_load = tap_of("gkb") +
                             "        int64_t ih = (gj / OW) * sh - ph + kh * dh, iw = (gj % OW) * sw - pw + kw * dw;\n" +
                             gathered_x(*t, dt, A, "n");
  std::string finish = "      int64_t oh = gj / OW, ow = gj % OW;\n      int64_t out_at = " + at4("y", "n", "o", "oh", "ow") + ";\n";
  if (epi)
    finish += post_ops(*t, dt, *epi, [&](int k) {
      return load(*t, uint8_t(in[k].dtype), k, at4("p" + S(k), "n", "o", "oh", "ow"));
    }, "      ");
  finish += "      " + store(*t, dt, n_in, "out_at", compute_dtype(dt), "y") + "\n";
  return gather_gemm_pass({.what = epi ? "conv2d with epilogue (implicit GEMM)" : "conv2d (implicit GEMM)",
                           .A = A, .start = start, .a_load = a_load, .b_load = b_load, .finish = finish,
                           .rows = O, .cols = PP, .terms = K, .images = y.shape[0]},
                          target, dts, p);
}

// The gradient of the input: dx[n] = w^T [C, K] times dy[n] gathered [K, H * W], K = O * KH * KW
// ordered o ascending, then kh and kw descending (the direct shader's order); a term is the tap
// (oh, ow) that reads input pixel (ih, iw), where it exists.
GlslPass conv_backward_data_gemm(const ember_tensor_desc& dy, const ember_tensor_desc& w, const ember_tensor_desc& dx,
                                 const ember_conv_attrs& a, const GlslTarget& target) {
  const uint8_t dt = uint8_t(dy.dtype);
  const std::string A = compute_type(dt);
  std::unique_ptr<ExprTable> t = make_glsl_table(target);
  const int64_t K = dy.shape[1] * w.shape[2] * w.shape[3], C = dx.shape[1], PP = dx.shape[2] * dx.shape[3];
  Params p;
  conv_words(p, C, PP, K, dx, w, dy, a);
  const std::vector<uint8_t> dts = gradient_tensors(p, {"dy", "w", "dx"}, {&dy, &w, &dx});
  const std::string taps = "        int64_t kw = KW - 1 - gKK % KW, r = gKK / KW;\n"
                           "        int64_t kh = KH - 1 - r % KH, o = r / KH;\n";
  std::string a_load = taps;
  a_load += "        wa = " + A + "(" + load(*t, dt, 1, at4("w", "o", "gi", "kh", "kw")) + ");\n";
  std::string b_load = taps;
  b_load += "        int64_t th = gj / W + ph - kh * dh, tw = gj % W + pw - kw * dw;\n"
            "        if (th >= 0 && th % sh == 0 && th / sh < OH && tw >= 0 && tw % sw == 0 && tw / sw < OW) {\n"
            "          ok = true;\n"
            "          xv = " + A + "(" + load(*t, dt, 0, at4("dy", "n", "o", "th / sh", "tw / sw")) + ");\n        }\n";
  const auto replace_all = [](std::string s, const std::string& from, const std::string& to) {
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
    return s;
  };
  a_load = replace_all(a_load, "gKK", "gka");
  b_load = replace_all(b_load, "gKK", "gkb");
  const std::string finish = "      int64_t out_at = " + at4("dx", "n", "o", "gj / W", "gj % W") + ";\n      " +
                             store(*t, dt, 2, "out_at", compute_dtype(dt), "y") + "\n";
  return gather_gemm_pass({.what = "conv2d backward data (implicit GEMM)", .A = A, .start = A + "(0)",
                           .a_load = a_load, .b_load = b_load, .finish = finish,
                           .rows = C, .cols = PP, .terms = K, .images = dx.shape[0]},
                          target, dts, p);
}

// The gradient of the weights: dw [O, K'] = dy [O, N * OH * OW] times x's im2col matrix
// [N * OH * OW, K'], K' = C * KH * KW ordered (c, kh, kw); the sum runs over the whole batch, n,
// oh and ow ascending (the direct shader's order), skipping the taps in the padding. One GEMM for
// the batch: its blocks of 64 x 64 outputs are few workgroups (5 for a 32 -> 64 3 x 3 layer). That
// suits a CPU driver; a GPU would want the sum split over more workgroups (a workspace the
// library passes do not have yet).
GlslPass conv_backward_weights_gemm(const ember_tensor_desc& x, const ember_tensor_desc& dy,
                                    const ember_tensor_desc& dw, const ember_conv_attrs& a, const GlslTarget& target) {
  const uint8_t dt = uint8_t(x.dtype);
  const std::string A = compute_type(dt);
  std::unique_ptr<ExprTable> t = make_glsl_table(target);
  const int64_t O = dw.shape[0], PP = dw.shape[1] * dw.shape[2] * dw.shape[3];
  const int64_t K = dy.shape[0] * dy.shape[2] * dy.shape[3];
  Params p;
  conv_words(p, O, PP, K, x, dw, dy, a);
  const std::vector<uint8_t> dts = gradient_tensors(p, {"x", "dy", "dw"}, {&x, &dy, &dw});
  const std::string a_load = "        int64_t ow = gka % OW, r = gka / OW;\n        int64_t oh = r % OH, m = r / OH;\n"
                             "        wa = " + A + "(" + load(*t, dt, 1, at4("dy", "m", "gi", "oh", "ow")) + ");\n";
  const std::string b_load = tap_of("gj") +
                             "        int64_t ow = gkb % OW, s = gkb / OW;\n        int64_t oh = s % OH, m = s / OH;\n"
                             "        int64_t ih = oh * sh - ph + kh * dh, iw = ow * sw - pw + kw * dw;\n" +
                             gathered_x(*t, dt, A, "m");
  const std::string finish = tap_of("gj", "      ") +
                             "      int64_t out_at = " + at4("dw", "o", "c", "kh", "kw") + ";\n      " +
                             store(*t, dt, 2, "out_at", compute_dtype(dt), "y") + "\n";
  return gather_gemm_pass({.what = "conv2d backward weights (implicit GEMM)", .A = A, .start = A + "(0)",
                           .a_load = a_load, .b_load = b_load, .finish = finish, .rows = O, .cols = PP, .terms = K},
                          target, dts, p);
}

// `epi` (CONV2D_EPILOGUE, op is then EMBER_LIB_CONV2D): x, w[, bias], then the post-ops' operands
// (shaped as y, broadcast by their strides), applied to each output before its store.
bool conv(int32_t op, const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc& out,
          const ember_conv_attrs& a, const GlslTarget& target, std::vector<GlslPass>& passes, std::string* why,
          const ember_epilogue_attrs* epi = nullptr) {
  const bool fwd = op == EMBER_LIB_CONV2D;
  // The convolution's own inputs; an epilogue's operands follow them.
  const int32_t n_conv = epi ? 2 + (epi->has_bias ? 1 : 0) : n_in;
  if (n_conv > n_in || (n_conv != 2 && !(fwd && n_conv == 3))) return fail(why, "conv2d: wrong number of inputs");
  for (int32_t i = 0; i < n_in; ++i)
    if (in[i].rank != (fwd && i == 2 && n_conv == 3 ? 1 : 4)) return fail(why, "conv2d: operands must be 4-D (bias 1-D)");
  if (epi) {
    if (epi->n_ops < 1 || epi->n_ops > EMBER_MAX_POST_OPS) return fail(why, "conv2d epilogue: bad post-op count");
    for (int k = 0; k < epi->n_ops; ++k)
      if (epi->ops[k].kind < 0 || epi->ops[k].kind >= EMBER_POST_NUM_KINDS ||
          (ember_post_has_operand(epi->ops[k].kind) && (epi->ops[k].input < n_conv || epi->ops[k].input >= n_in)))
        return fail(why, "conv2d epilogue: an unknown post-op, or its operand is missing");
  }
  if (out.rank != 4 || !same_float_dtypes(in, n_in, out, false)) return fail(why, "conv2d: ranks or dtypes differ");
  if (a.groups < 1 || a.stride[0] < 1 || a.stride[1] < 1 || a.dilation[0] < 1 || a.dilation[1] < 1)
    return fail(why, "conv2d: bad attributes");
  // x [N, C, H, W], w [O, Cg, KH, KW], y [N, O, OH, OW] of whichever operands this call has.
  const ember_tensor_desc& x = op == EMBER_LIB_CONV2D_BACKWARD_DATA ? out : in[0];
  const ember_tensor_desc& w = op == EMBER_LIB_CONV2D_BACKWARD_WEIGHTS ? out : in[1];
  const ember_tensor_desc& y = fwd ? out : op == EMBER_LIB_CONV2D_BACKWARD_DATA ? in[0] : in[1];
  const uint8_t dt = uint8_t(in[0].dtype);
  const std::string A = compute_type(dt);
  std::unique_ptr<ExprTable> t = make_glsl_table(target);
  const int64_t N = x.shape[0], H = x.shape[2], W_ = x.shape[3], O = y.shape[1], OH = y.shape[2], OW = y.shape[3];
  const int64_t Cg = w.shape[1], KH = w.shape[2], KW = w.shape[3], Og = O / a.groups;
  if (fwd && use_gather_gemm(O, OH * OW, Cg * KH * KW, a, target, dt)) {
    passes.push_back(conv_forward_gemm(in, n_in, n_conv, out, a, target, epi));
    return true;
  }
  if (op == EMBER_LIB_CONV2D_BACKWARD_DATA && use_gather_gemm(x.shape[1], H * W_, O * KH * KW, a, target, dt)) {
    passes.push_back(conv_backward_data_gemm(in[0], in[1], out, a, target));
    return true;
  }
  if (op == EMBER_LIB_CONV2D_BACKWARD_WEIGHTS && use_gather_gemm(O, Cg * KH * KW, N * OH * OW, a, target, dt)) {
    passes.push_back(conv_backward_weights_gemm(in[0], in[1], out, a, target));
    return true;
  }
  // The sum of each output: its terms (flattened) and the iterations of the direct loop nest.
  int64_t terms, direct;
  if (fwd)
    terms = Cg * KH * KW, direct = Cg * (1 + KH * (1 + KW));
  else if (op == EMBER_LIB_CONV2D_BACKWARD_DATA)
    terms = Og * KH * KW, direct = Og * (1 + KH * (1 + KW));
  else
    terms = N * OH * OW, direct = N * (1 + OH * (1 + OW));
  const int64_t points = out.shape[0] * out.shape[1] * out.shape[2] * out.shape[3];
  const bool tree = direct > kTreeAbove || (direct > kTreeFewAbove && points < kFewOutputs);
  const int64_t WG = target.workgroup;
  const int64_t iterations = tree ? (terms + WG - 1) / WG + tree_iterations(target) : direct;
  Params p;
  p.i64("N", N);
  p.i64("C", x.shape[1]);
  p.i64("H", H);
  p.i64("W", W_);
  p.i64("O", O);
  p.i64("OH", OH);
  p.i64("OW", OW);
  p.i64("Cg", Cg);
  p.i64("KH", KH);
  p.i64("KW", KW);
  p.i64("Og", Og);
  geometry_words(p, a);
  p.i64("NR", terms);
  std::vector<uint8_t> dts;
  for (int32_t i = 0; i < n_in; ++i) dts.push_back(uint8_t(in[i].dtype));
  dts.push_back(uint8_t(out.dtype));
  // Tree passes: term r of the flattened sum, decoded into the loop indices (`decode`), and the
  // partial sums combined at the end.
  const std::string loop_r = "  for (int64_t r = int64_t(lid); r < NR; r += " + S(WG) + ") {\n";
  std::string b = "  int64_t zero = 0;\n";
  std::string init = A + "(0)";  // the sum's start (the bias)
  if (fwd) {
    // y[n, o, oh, ow] = bias[o] + sum over c, kh, kw of x[n, g Cg + c, ih, iw] w[o, c, kh, kw].
    p.tensor("x", in[0], 4);
    p.tensor("w", in[1], 4);
    if (n_conv == 3) p.tensor("b", in[2], 1);
    p.tensor("y", out, 4);
    for (int32_t k = n_conv; k < n_in; ++k) p.tensor("p" + S(k), in[k], 4);
    if (n_conv == 3) init = A + "(" + load(*t, dt, 2, "b_o + o * b_s0") + ")";
    b += unravel4("n", "o", "oh", "ow", "O", "OH", "OW");
    b += "  int64_t out_at = " + at4("y", "n", "o", "oh", "ow") + ";\n";
    b += "  int64_t ci0 = (o / Og) * Cg, ih0 = oh * sh - ph, iw0 = ow * sw - pw;\n";
    const std::string term = "acc += " + A + "(" + load(*t, dt, 0, at4("x", "n", "ci0 + c", "ih", "iw")) + ") * " + A +
                             "(" + load(*t, dt, 1, at4("w", "o", "c", "kh", "kw")) + ");\n";
    if (!tree) {
      b += "  " + A + " acc = " + init + ";\n";
      b += "  " + for_up("c", "zero", "Cg") + "\n";
      b += "    " + for_up("kh", "zero", "KH") + " {\n";
      b += "      int64_t ih = ih0 + kh * dh;\n      if (ih < 0 || ih >= H) continue;\n";
      b += "      " + for_up("kw", "zero", "KW") + " {\n";
      b += "        int64_t iw = iw0 + kw * dw;\n        if (iw < 0 || iw >= W) continue;\n";
      b += "        " + term + "      }\n    }\n";
    } else {
      b += "  " + A + " acc = " + A + "(0);\n" + loop_r;
      b += "    int64_t kw = r % KW, c = r / KW, kh = c % KH;\n    c /= KH;\n";
      b += "    int64_t ih = ih0 + kh * dh, iw = iw0 + kw * dw;\n";
      b += "    if (ih >= 0 && ih < H && iw >= 0 && iw < W) " + term + "  }\n";
    }
  } else if (op == EMBER_LIB_CONV2D_BACKWARD_DATA) {
    // dx[n, ci, ih, iw] = sum over the taps (o, oh, ow) that read it of dy[n, o, oh, ow] w[o, c, kh, kw]:
    // o ascending, then kh and kw descending (oh and ow ascending, the reference's order).
    p.tensor("dy", in[0], 4);
    p.tensor("w", in[1], 4);
    p.tensor("dx", out, 4);
    b += unravel4("n", "ci", "ih", "iw", "C", "H", "W");
    b += "  int64_t out_at = " + at4("dx", "n", "ci", "ih", "iw") + ";\n";
    b += "  int64_t c = ci % Cg, o0 = (ci / Cg) * Og, o1 = o0 + Og;\n";
    const std::string term = "acc += " + A + "(" + load(*t, dt, 0, at4("dy", "n", "o", "th / sh", "tw / sw")) + ") * " +
                             A + "(" + load(*t, dt, 1, at4("w", "o", "c", "kh", "kw")) + ");\n";
    if (!tree) {
      b += "  " + A + " acc = " + init + ";\n";
      b += "  " + for_up("o", "o0", "o1") + "\n";
      b += "    " + for_down("kh", "zero", "KH") + " {\n";
      b += "      int64_t th = ih + ph - kh * dh;\n      if (th < 0 || th % sh != 0 || th / sh >= OH) continue;\n";
      b += "      " + for_down("kw", "zero", "KW") + " {\n";
      b += "        int64_t tw = iw + pw - kw * dw;\n        if (tw < 0 || tw % sw != 0 || tw / sw >= OW) continue;\n";
      b += "        " + term + "      }\n    }\n";
    } else {
      b += "  " + A + " acc = " + A + "(0);\n" + loop_r;
      b += "    int64_t kw = r % KW, o = r / KW, kh = o % KH;\n    o = o0 + o / KH;\n";
      b += "    int64_t th = ih + ph - kh * dh, tw = iw + pw - kw * dw;\n";
      b += "    if (th >= 0 && th % sh == 0 && th / sh < OH && tw >= 0 && tw % sw == 0 && tw / sw < OW) " + term +
           "  }\n";
    }
  } else {
    // dw[o, c, kh, kw] = sum over n, oh, ow of dy[n, o, oh, ow] x[n, g Cg + c, ih, iw].
    p.tensor("x", in[0], 4);
    p.tensor("dy", in[1], 4);
    p.tensor("dw", out, 4);
    b += unravel4("o", "c", "kh", "kw", "Cg", "KH", "KW");
    b += "  int64_t out_at = " + at4("dw", "o", "c", "kh", "kw") + ";\n";
    b += "  int64_t ci = (o / Og) * Cg + c;\n";
    const std::string term = "acc += " + A + "(" + load(*t, dt, 1, at4("dy", "n", "o", "oh", "ow")) + ") * " + A + "(" +
                             load(*t, dt, 0, at4("x", "n", "ci", "ih", "iw")) + ");\n";
    b += "  " + A + " acc = " + init + ";\n";
    if (!tree) {
      b += "  " + for_up("n", "zero", "N") + "\n";
      b += "    " + for_up("oh", "zero", "OH") + " {\n";
      b += "      int64_t ih = oh * sh - ph + kh * dh;\n      if (ih < 0 || ih >= H) continue;\n";
      b += "      " + for_up("ow", "zero", "OW") + " {\n";
      b += "        int64_t iw = ow * sw - pw + kw * dw;\n        if (iw < 0 || iw >= W) continue;\n";
      b += "        " + term + "      }\n    }\n";
    } else {
      b += loop_r;
      b += "    int64_t ow = r % OW, n = r / OW, oh = n % OH;\n    n /= OH;\n";
      b += "    int64_t ih = oh * sh - ph + kh * dh, iw = ow * sw - pw + kw * dw;\n";
      b += "    if (ih >= 0 && ih < H && iw >= 0 && iw < W) " + term + "  }\n";
    }
  }
  std::string functions;
  std::string value = "acc", ind = "  ";
  if (tree) {
    functions = tree_shared(A, "part", target);
    b += tree_sum(A, "part", "acc", "total", target);
    b += "  if (lid == 0u) {\n";
    value = fwd ? init + " + total" : "total";
    ind = "    ";
  }
  if (epi) {  // y[n, o, oh, ow] through the post-ops
    b += ind + "precise " + A + " y = " + value + ";\n";
    b += post_ops(*t, dt, *epi, [&](int k) {
      return load(*t, uint8_t(in[k].dtype), k, at4("p" + S(k), "n", "o", "oh", "ow"));
    }, ind);
    value = "y";
  }
  b += ind + store(*t, dt, n_in, "out_at", compute_dtype(dt), value) + "\n";
  if (tree) b += "  }\n";
  passes.push_back(make_pass("library call conv2d (" + std::to_string(op) + ")", target, dts, p, points, iterations, b,
                             functions, tree));
  return true;
}

// The first maximum of window (oh, ow) of image `base` of x (NaN wins; first of equal values):
// sets bool have, A best, int64_t arg (ih * W + iw) in a block of its own.
std::string window_max(const ExprTable& t, uint8_t dt, int x_arg, const std::string& A) {
  std::string s;
  s += "bool have = false;\n" + A + " best = " + A + "(0);\nint64_t arg = 0;\n";
  s += "{\n  int64_t ih0 = oh * sh - ph, iw0 = ow * sw - pw;\n";
  s += "  " + for_up("kh", "zero", "KH") + " {\n";
  s += "    int64_t ih = ih0 + kh;\n    if (ih < 0 || ih >= H) continue;\n";
  s += "    " + for_up("kw", "zero", "KW") + " {\n";
  s += "      int64_t iw = iw0 + kw;\n      if (iw < 0 || iw >= W) continue;\n";
  s += "      " + A + " v = " + A + "(" + load(t, dt, x_arg, "xb + ih * x_s2 + iw * x_s3") + ");\n";
  s += "      if (!have || (isnan(v) && !isnan(best)) || v > best) { have = true; best = v; arg = ih * W + iw; }\n";
  s += "    }\n  }\n}\n";
  return s;
}

// The divisor of the average window (oh, ow): int64_t cnt.
const char* kAvgDivisor =
    "int64_t cnt;\n"
    "{\n"
    "  int64_t ih0 = oh * sh - ph, iw0 = ow * sw - pw;\n"
    "  if (include_pad != 0) {\n"
    "    cnt = clamp(H + peh - ih0, int64_t(0), KH) * clamp(W + pew - iw0, int64_t(0), KW);\n"
    "  } else {\n"
    "    cnt = max(min(ih0 + KH, H) - max(ih0, int64_t(0)), int64_t(0)) * max(min(iw0 + KW, W) - max(iw0, int64_t(0)), "
    "int64_t(0));\n"
    "  }\n"
    "}\n";

std::string indent(const std::string& s, const std::string& by) {
  std::string r;
  size_t i = 0;
  while (i < s.size()) {
    size_t e = s.find('\n', i);
    if (e == std::string::npos) e = s.size();
    r += by + s.substr(i, e - i) + "\n";
    i = e + 1;
  }
  return r;
}

// `indices`: max pooling's second output (i64, written by the same pass), or null.
bool pool(int32_t op, const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc& out,
          const ember_pool_attrs& a, const GlslTarget& target, std::vector<GlslPass>& passes, std::string* why,
          const ember_tensor_desc* indices = nullptr) {
  const bool backward = op == EMBER_LIB_AVG_POOL2D_BACKWARD || op == EMBER_LIB_MAX_POOL2D_BACKWARD;
  if (n_in != (op == EMBER_LIB_MAX_POOL2D_BACKWARD ? 2 : 1)) return fail(why, "pool2d: wrong number of inputs");
  for (int32_t i = 0; i < n_in; ++i)
    if (in[i].rank != 4) return fail(why, "pool2d: operands must be 4-D");
  if (out.rank != 4 || !same_float_dtypes(in, n_in, out, op == EMBER_LIB_MAX_POOL2D_INDICES))
    return fail(why, "pool2d: ranks or dtypes differ");
  if (a.stride[0] < 1 || a.stride[1] < 1 || a.kernel[0] < 1 || a.kernel[1] < 1)
    return fail(why, "pool2d: bad attributes");
  if (indices && (op != EMBER_LIB_MAX_POOL2D || indices->dtype != EMBER_I64 || indices->rank != 4 ||
                  !std::equal(indices->shape, indices->shape + 4, out.shape)))
    return fail(why, "pool2d: bad indices output");
  // x [N, C, H, W] and y [N, C, OH, OW] (y = dy for the gradients, whose output is dx).
  const ember_tensor_desc& x = backward ? out : in[0];
  const ember_tensor_desc& y = backward ? in[0] : out;
  const uint8_t dt = uint8_t(in[0].dtype);
  const std::string A = compute_type(dt);
  const std::string ninf = dt == EMBER_F64 ? "-e_infd()" : "-e_inff()";
  std::unique_ptr<ExprTable> t = make_glsl_table(target);
  Params p;
  p.i64("N", x.shape[0]);
  p.i64("C", x.shape[1]);
  p.i64("H", x.shape[2]);
  p.i64("W", x.shape[3]);
  p.i64("OH", y.shape[2]);
  p.i64("OW", y.shape[3]);
  p.i64("KH", a.kernel[0]);
  p.i64("KW", a.kernel[1]);
  p.i64("sh", a.stride[0]);
  p.i64("sw", a.stride[1]);
  p.i64("ph", a.pad_begin[0]);
  p.i64("pw", a.pad_begin[1]);
  p.i64("peh", a.pad_end[0]);
  p.i64("pew", a.pad_end[1]);
  p.i64("include_pad", a.count_include_pad);
  std::vector<uint8_t> dts;
  for (int32_t i = 0; i < n_in; ++i) dts.push_back(uint8_t(in[i].dtype));
  dts.push_back(uint8_t(out.dtype));
  if (indices) dts.push_back(EMBER_I64);
  std::string b = "  int64_t zero = 0;\n";
  const int64_t points = out.shape[0] * out.shape[1] * out.shape[2] * out.shape[3];
  // Loop iterations: a window scan, and for the gradients the windows containing an element.
  const int64_t scan = a.kernel[0] * (1 + a.kernel[1]);
  const int64_t wh = a.kernel[0] / a.stride[0] + 2, ww = a.kernel[1] / a.stride[1] + 2;
  const int64_t iterations = op == EMBER_LIB_AVG_POOL2D_BACKWARD   ? wh * (1 + ww)
                             : op == EMBER_LIB_MAX_POOL2D_BACKWARD ? wh * (1 + ww * (1 + scan))
                                                                   : scan;
  if (!backward) {
    p.tensor("x", in[0], 4);
    p.tensor("y", out, 4);
    if (indices) p.tensor("yi", *indices, 4);
    b += unravel4("n", "c", "oh", "ow", "C", "OH", "OW");
    b += "  int64_t out_at = " + at4("y", "n", "c", "oh", "ow") + ", xb = x_o + n * x_s0 + c * x_s1;\n";
    if (op == EMBER_LIB_AVG_POOL2D) {
      b += "  " + A + " s = " + A + "(0);\n";
      b += "  " + for_up("kh", "zero", "KH") + " {\n";
      b += "    int64_t ih = oh * sh - ph + kh;\n    if (ih < 0 || ih >= H) continue;\n";
      b += "    " + for_up("kw", "zero", "KW") + " {\n";
      b += "      int64_t iw = ow * sw - pw + kw;\n      if (iw < 0 || iw >= W) continue;\n";
      b += "      s += " + A + "(" + load(*t, dt, 0, "xb + ih * x_s2 + iw * x_s3") + ");\n    }\n  }\n";
      b += indent(kAvgDivisor, "  ");
      b += "  " + A + " r = cnt > 0 ? s / " + A + "(cnt) : " + A + "(0);\n";
      b += "  " + store(*t, dt, 1, "out_at", compute_dtype(dt), "r") + "\n";
    } else {
      b += indent(window_max(*t, dt, 0, A), "  ");
      if (op == EMBER_LIB_MAX_POOL2D) {
        b += "  if (!have) best = " + ninf + ";\n";
        b += "  " + store(*t, dt, 1, "out_at", compute_dtype(dt), "best") + "\n";
        if (indices)
          b += "  " + store(*t, EMBER_I64, 2, at4("yi", "n", "c", "oh", "ow"), EMBER_I64, "arg") + "\n";
      } else {
        b += "  " + store(*t, EMBER_I64, 1, "out_at", EMBER_I64, "arg") + "\n";
      }
    }
  } else {
    // dx[n, c, ih, iw]: the windows (oh, ow) containing (ih, iw), oh and ow ascending.
    p.tensor("dy", in[0], 4);
    if (op == EMBER_LIB_MAX_POOL2D_BACKWARD) p.tensor("x", in[1], 4);
    p.tensor("dx", out, 4);
    b += unravel4("n", "c", "ih_", "iw_", "C", "H", "W");
    b += "  int64_t out_at = " + at4("dx", "n", "c", "ih_", "iw_") + ";\n";
    b += "  int64_t lh = ih_ + ph - KH + 1, lw = iw_ + pw - KW + 1;\n";
    b += "  int64_t oh0 = lh <= 0 ? 0 : (lh + sh - 1) / sh, oh1 = min((ih_ + ph) / sh + 1, OH);\n";
    b += "  int64_t ow0 = lw <= 0 ? 0 : (lw + sw - 1) / sw, ow1 = min((iw_ + pw) / sw + 1, OW);\n";
    b += "  " + A + " acc = " + A + "(0);\n";
    if (op == EMBER_LIB_MAX_POOL2D_BACKWARD) b += "  int64_t xb = x_o + n * x_s0 + c * x_s1, self = ih_ * W + iw_;\n";
    b += "  " + for_up("oh", "oh0", "oh1") + "\n";
    b += "    " + for_up("ow", "ow0", "ow1") + " {\n";
    const std::string g = A + "(" + load(*t, dt, 0, at4("dy", "n", "c", "oh", "ow")) + ")";
    if (op == EMBER_LIB_AVG_POOL2D_BACKWARD) {
      b += indent(kAvgDivisor, "      ");
      b += "      if (cnt == 0) continue;\n";
      b += "      acc += " + g + " / " + A + "(cnt);\n";
    } else {
      b += indent(window_max(*t, dt, 1, A), "      ");
      b += "      if (have && arg == self) acc += " + g + ";\n";
    }
    b += "    }\n";
    b += "  " + store(*t, dt, n_in, "out_at", compute_dtype(dt), "acc") + "\n";
  }
  passes.push_back(
      make_pass("library call pool2d (" + std::to_string(op) + ")", target, dts, p, points, iterations, b));
  return true;
}

}  // namespace

bool conv_pool(int32_t op, const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out, int32_t n_out,
               const void* attrs, const GlslTarget& target, std::vector<GlslPass>& passes, std::string* why) {
  if (n_out != 1 && !(op == EMBER_LIB_MAX_POOL2D && n_out == 2))
    return fail(why, "convolution and pooling have one output (max pooling: one or two)");
  if (op == EMBER_LIB_CONV2D || op == EMBER_LIB_CONV2D_BACKWARD_DATA || op == EMBER_LIB_CONV2D_BACKWARD_WEIGHTS)
    return conv(op, in, n_in, out[0], *static_cast<const ember_conv_attrs*>(attrs), target, passes, why);
  if (op == EMBER_LIB_CONV2D_EPILOGUE) {
    const auto* epi = static_cast<const ember_epilogue_attrs*>(attrs);
    return conv(EMBER_LIB_CONV2D, in, n_in, out[0], epi->conv, target, passes, why, epi);
  }
  return pool(op, in, n_in, out[0], *static_cast<const ember_pool_attrs*>(attrs), target, passes, why,
              n_out == 2 ? &out[1] : nullptr);
}

}  // namespace ember::emit::lib
