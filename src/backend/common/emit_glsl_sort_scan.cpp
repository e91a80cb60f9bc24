// Sorting and scans along one dim as GLSL compute shaders (abi.h EMBER_LIB_ARGSORT, TOPK, CUMSUM,
// CUMPROD, CUMMAX_INDICES, CUMMIN_INDICES), semantics of the reference backend
// (src/backend/reference/library.cpp).
//
// Sorting: one invocation per element, which counts the elements of its row that come before it
// in the stable order (a NaN above every number; equal keys in index order) and writes its index
// at that rank (TOPK: only ranks below k). Scans: one invocation per row, walking it in order.
// Both loops are unrolled (emit_glsl_library.h: len / 16 loop iterations); floating sums
// and products accumulate in f64 on an f64 target (else f32) and round at each store, integers
// accumulate in 64 bits and wrap.
//
// Launch words (emit_glsl_library.h Params, from word kZero + 1 on): R (rank), dim, len (x's size along
// dim), kk (TOPK: k; ARGSORT: len), desc (ARGSORT / TOPK) or rev (CUMSUM reversed), x_o, y_o, then
// three arrays of 8 words: x's shape, x's strides, y's strides.
#include <string>
#include <vector>

#include "backend/common/emit_glsl_library.h"

namespace ember::emit::lib {

namespace {

// Offsets of the row of point `id`: ox, oy (the row's start in x and y), and for `with_index`
// the index i along dim (id then ranges over all of x's elements, else over its rows).
std::string row_offsets(int sh, int xs, int ys, bool with_index) {
  std::string s = std::string("  int64_t rem = id, ox = x_o, oy = y_o") + (with_index ? ", i = 0;\n" : ";\n");
  s += "  for (int d = int(R) - 1; d >= 0; --d) {\n";
  if (!with_index) s += "    if (d == int(dim)) continue;\n";
  s += "    int64_t n = P[" + S(sh) + " + d], q = rem % n;\n    rem /= n;\n";
  if (with_index) s += "    if (d == int(dim)) { i = q; continue; }\n";
  s += "    ox += q * P[" + S(xs) + " + d];\n    oy += q * P[" + S(ys) + " + d];\n  }\n";
  s += "  int64_t sx = P[" + S(xs) + " + int(dim)], sy = P[" + S(ys) + " + int(dim)];\n";
  return s;
}

}  // namespace

bool sort_scan(int32_t op, const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out, int32_t n_out,
               const void* attrs, const GlslTarget& target, std::vector<GlslPass>& passes, std::string* why) {
  if (n_in != 1 || n_out != 1) return fail(why, "sorting and scans take one input and one output");
  const ember_tensor_desc &x = in[0], &y = out[0];
  const bool sort = op == EMBER_LIB_ARGSORT || op == EMBER_LIB_TOPK;
  const int dim =
      sort ? static_cast<const ember_sort_attrs*>(attrs)->dim : static_cast<const ember_scan_attrs*>(attrs)->dim;
  if (x.rank < 1 || x.rank > 8 || y.rank != x.rank || dim < 0 || dim >= x.rank)
    return fail(why, "sort / scan: bad ranks or dim");
  for (int d = 0; d < x.rank; ++d)
    if (d != dim && x.shape[d] != y.shape[d]) return fail(why, "sort / scan: shapes differ");
  const uint8_t dt = uint8_t(x.dtype), ydt = uint8_t(y.dtype);
  const bool fl = is_floating(dt);
  const bool index_out = op != EMBER_LIB_CUMSUM && op != EMBER_LIB_CUMPROD;
  if (index_out ? ydt != EMBER_I64 : (fl ? ydt != dt : is_floating(ydt)))
    return fail(why, "sort / scan: unexpected output dtype");
  const int64_t len = x.shape[dim];
  int64_t numel = 1;
  for (int d = 0; d < x.rank; ++d) numel *= x.shape[d];
  std::unique_ptr<ExprTable> t = make_glsl_table(target);
  if (!t->storage_type(dt) || !t->storage_type(ydt))
    return fail(why, "sort / scan: dtype not available on this device");

  Params p;
  p.i64("R", x.rank);
  p.i64("dim", dim);
  p.i64("len", len);
  int64_t kk = len, flag = 0;
  if (sort) {
    const auto* a = static_cast<const ember_sort_attrs*>(attrs);
    if (op == EMBER_LIB_TOPK) kk = a->k;
    flag = a->descending != 0;
    if (kk < 0 || kk > len || y.shape[dim] != kk) return fail(why, "topk: bad k");
  } else {
    if (y.shape[dim] != len) return fail(why, "scan: shapes differ");
    flag = op == EMBER_LIB_CUMSUM && static_cast<const ember_scan_attrs*>(attrs)->reverse != 0;
  }
  p.i64("kk", kk);
  p.i64(sort ? "desc" : "rev", flag);
  p.i64("x_o", x.offset);
  p.i64("y_o", y.offset);
  int64_t shape[8] = {}, xst[8] = {}, yst[8] = {};
  for (int d = 0; d < x.rank; ++d) {
    shape[d] = x.shape[d];
    xst[d] = x.strides[d];
    yst[d] = y.strides[d];
  }
  const int sh = p.array(shape, 8), xs = p.array(xst, 8), ys = p.array(yst, 8);

  // The key type and its comparison "a < b" (a NaN above every number).
  const std::string K = fl ? compute_type(dt) : "int64_t";
  auto key = [&](const std::string& off) { return K + "(" + load(*t, dt, 0, off) + ")"; };
  std::string b = "  int64_t zero = 0;\n";
  std::string functions;
  int64_t points, iterations;
  if (sort) {
    functions = "bool key_less(" + K + " a, " + K + " b) { return " +
                (fl ? std::string("!isnan(a) && (isnan(b) || a < b)") : std::string("a < b")) + "; }\n";
    points = numel;
    iterations = x.rank + unrolled_iterations(len);
    b += row_offsets(sh, xs, ys, true);
    b += "  " + K + " vi = " + key("ox + i * sx") + ";\n  int64_t rank = 0;\n";
    // j comes before i: strictly before in the order, or tied (neither before the other) with j < i.
    b += unrolled("j", "zero", "len",
                  K + " vj = " + key("ox + j * sx") +
                      ";\nbool first = desc != 0 ? key_less(vi, vj) : key_less(vj, vi);\n"
                      "bool tied = !(desc != 0 ? key_less(vj, vi) : key_less(vi, vj));\n"
                      "if (first || (tied && j < i)) ++rank;",
                  "  ");
    b += "  if (rank < kk) " + store(*t, EMBER_I64, 1, "oy + rank * sy", EMBER_I64, "i") + "\n";
  } else {
    points = len > 0 ? numel / len : 0;
    iterations = x.rank + unrolled_iterations(len);
    b += row_offsets(sh, xs, ys, false);
    if (op == EMBER_LIB_CUMSUM || op == EMBER_LIB_CUMPROD) {
      const bool prod = op == EMBER_LIB_CUMPROD;
      const char* opr = prod ? " * " : " + ";
      std::string acc_t, value_t, x_val;
      uint8_t vdt;
      if (fl) {
        acc_t = target.float64 ? "double" : "float";
        vdt = target.float64 ? uint8_t(EMBER_F64) : uint8_t(EMBER_F32);
        x_val = acc_t + "(" + load(*t, dt, 0, "ox + i * sx") + ")";
        value_t = "acc";
      } else {
        acc_t = "uint64_t";
        vdt = EMBER_I64;
        x_val = "uint64_t(int64_t(" + load(*t, dt, 0, "ox + i * sx") + "))";
        value_t = "int64_t(acc)";
      }
      b += "  " + acc_t + " acc = " + acc_t + "(" + (prod ? "1" : "0") + ");\n";
      b += unrolled("s", "zero", "len",
                    "int64_t i = rev != 0 ? len - 1 - s : s;\nacc = acc" + std::string(opr) + x_val + ";\n" +
                        store(*t, ydt, 1, "oy + i * sy", vdt, value_t),
                    "  ");
    } else {
      // The latest of equal values; a NaN, once seen, stays.
      const bool mx = op == EMBER_LIB_CUMMAX_INDICES;
      b += "  int64_t best = 0;\n  " + K + " bv = " + K + "(0);\n";
      const std::string cmp = mx ? "v >= bv" : "v <= bv";
      b +=
          unrolled("i", "zero", "len",
                   K + " v = " + key("ox + i * sx") + ";\nbool take = i == 0 || " +
                       (fl ? "isnan(v) || (!isnan(bv) && " + cmp + ")" : cmp) + ";\nif (take) { best = i; bv = v; }\n" +
                       store(*t, EMBER_I64, 1, "oy + i * sy", EMBER_I64, "best"),
                   "  ");
    }
  }
  passes.push_back(make_pass("library call " + std::to_string(op) + " (sort / scan)", target, {dt, ydt}, p, points,
                             iterations, b, functions));
  return true;
}

}  // namespace ember::emit::lib
