// Fused scaled dot-product attention and its gradient as GLSL compute shaders (abi.h
// EMBER_LIB_FUSED_ATTENTION, EMBER_LIB_FUSED_ATTENTION_BACKWARD), with the reference backend's
// definitions (src/backend/reference/library.cpp): s = q k^T * scale (+ mask) (-inf where j > i
// if causal); lse = logsumexp_j s (-inf, and o = NaN, for a row with no finite score, and for a
// row with a NaN or +inf score, as the reference's sum then is NaN); o = sum_j exp(s_j - lse) v_j;
// backward p = exp(s - lse), ds = p (do . v_j - d) scale, dq = ds k, dk = ds^T q, dv = p^T do.
// A key with s = -inf (masked, or hidden by causality) has p = 0 and is skipped: it adds
// nothing (the reference multiplies its zero p by v or (dp - d) anyway, which differs only when
// those are infinite or NaN). Nothing L x S is stored: every invocation recomputes the scores it
// needs, keys hidden by causality without their dot products.
//
// Two shapes of passes. Head dims E, Ev <= kRegMax = 64 (the register variant): whole rows in
// registers, an invocation per query row forward (the running maximum and sum of exp in the
// online form, rescaled when the maximum grows; lse = max + log(sum), stored; then o from that
// lse), and backward an invocation per query row for dq and one per key for dk and dv together;
// every score is computed once per pass. Wider heads (the blocked variant): forward (1) an
// invocation per row for lse, (2) one per (row, block of kCols columns of Ev) for o (an f16 or
// bf16 output recomputes lse, its stored one being rounded; the core asks for f32 output);
// backward, one per (row, block of E) for dq, per (key, block of E) for dk, per (key, block of
// Ev) for dv. The dot products are unrolled in the
// text (emit_glsl_library.h `unrolled`), so the loops over keys or queries are the only long
// ones (lavapipe's loop budget). f16 and bf16 compute in f32 and round at the store (the forward's
// output and the backward's lse and d may be f32 instead: the core keeps them so), f32 in f32,
// f64 in f64 (glsl_f64_math.h's exp and log). Index arithmetic is 32-bit (uint), as GLSL array
// indices are; a last dim of stride 1 is addressed without its stride.
//
// Launch words (emit_glsl_library.h Params, from word kZero + 1 on): B, L, S, E, Ev, NC (column
// blocks of the pass), causal, scale (f64 or f32 bits), then q, k, v [, lse, d, do] [, mask]
// (offset and 3 strides; lse and d: 2), then each output (offset and the stride of its flat index):
// forward o, l (lse); backward dq, dk, dv.
#include <algorithm>
#include <string>
#include <vector>

#include "backend/common/emit_glsl_library.h"

namespace ember::emit::lib {

namespace {

constexpr int kCols = 32;

struct Ctx {
  bool unit_q = false, unit_k = false, unit_v = false, unit_g = false;  // last-dim stride 1
  const ExprTable* t;
  uint8_t dt;  // q, k, v (and do)
  std::string A, exp, log, inf, nan;
  int mask_arg = -1;  // binding of the mask, -1 without
};

// An output: its binding, the prefix of its launch words (name_o, name_s0) and its dtype.
struct Out {
  int arg;
  std::string name;
  uint8_t dtype;
};

// Element (a, b, c) of rank-3 tensor x (uint index arithmetic).
std::string at3(const std::string& x, const std::string& a, const std::string& b, const std::string& c) {
  return x + "_o + uint(" + a + ") * " + x + "_s0 + uint(" + b + ") * " + x + "_s1 + uint(" + c + ") * " + x + "_s2";
}

// `A s` = the score of query i and key j of batch b (-inf, without the dot product, where
// causality hides the key).
std::string score(const Ctx& c, const std::string& ind) {
  const ExprTable& t = *c.t;
  std::string s = ind + c.A + " s = -" + c.inf + ";\n" + ind + "if (causal == 0 || j <= i) {\n";
  s += ind + "  uint qa = " + at3("q", "b", "i", "0") + ", ka = " + at3("k", "b", "j", "0") + ";\n";
  s += ind + "  " + c.A + " dot = " + c.A + "(0);\n";
  s += unrolled("e", "0", "E",
                "dot += " + c.A + "(" + load(t, c.dt, 0, "qa + uint(e) * q_s2") + ") * " + c.A + "(" +
                    load(t, c.dt, 1, "ka + uint(e) * k_s2") + ");",
                ind + "  ", "int");
  s += ind + "  s = dot * scale;\n";
  if (c.mask_arg >= 0) s += ind + "  s += " + c.A + "(" + load(t, c.dt, c.mask_arg, at3("m", "b", "i", "j")) + ");\n";
  s += ind + "}\n";
  return s;
}

// `A lse` of query row (b, i): the online maximum and sum of exp over the visible keys.
std::string row_lse(const Ctx& c) {
  std::string s = "  " + c.A + " mx = -" + c.inf + ", sum = " + c.A + "(0);\n";
  s += "  for (int j = 0, jend = causal != 0 ? min(S, i + 1) : S; j < jend; ++j) {\n" + score(c, "    ");
  s += "    if (s > mx) { sum = sum * " + c.exp + "(mx - s); mx = s; }\n";
  s += "    if (s != -" + c.inf + ") sum += " + c.exp + "(s - mx);\n  }\n";
  s += "  " + c.A + " lse = sum > " + c.A + "(0) ? mx + " + c.log + "(sum) : -" + c.inf + ";\n";
  return s;
}

// Registers acc[kCols] for columns col0 .. col0 + nc - 1 of the pass's row.
std::string acc_begin(const Ctx& c, const std::string& width) {
  std::string s = "  int col0 = blk * " + S(kCols) + ", nc = min(" + width + " - col0, " + S(kCols) + ");\n  " + c.A +
                  " acc[" + S(kCols) + "];\n";
  for (int u = 0; u < kCols; ++u) s += "  acc[" + S(u) + "] = " + c.A + "(0);\n";
  return s;
}
// acc[u] += f * x[base + (col0 + u) * stride] for the live columns (no loop).
std::string acc_add(const Ctx& c, const std::string& f, int arg, const std::string& base, const std::string& stride,
                    const std::string& ind) {
  std::string s;
  for (int u = 0; u < kCols; ++u)
    s += ind + "if (nc > " + S(u) + ") acc[" + S(u) + "] += " + f + " * " + c.A + "(" +
         load(*c.t, c.dt, arg, base + " + uint(col0 + " + S(u) + ") * " + stride) + ");\n";
  return s;
}
// y[y_o + (first + col0 + u) * y_s0] = value (of acc[u]) for the live columns.
std::string acc_store(const Ctx& c, const Out& y, const std::string& first, const std::string& value) {
  std::string s;
  for (int u = 0; u < kCols; ++u) {
    std::string v = value;
    for (size_t at = v.find("acc[u]"); at != std::string::npos; at = v.find("acc[u]"))
      v.replace(at, 6, "acc[" + S(u) + "]");
    s += "  if (nc > " + S(u) + ") " +
         store(*c.t, y.dtype, y.arg, y.name + "_o + (" + first + " + uint(col0 + " + S(u) + ")) * " + y.name + "_s0",
               compute_dtype(c.dt), v) +
         "\n";
  }
  return s;
}

// ---- the register variant (E, Ev <= kRegMax): whole rows in registers ---------------------------
constexpr int64_t kRegMax = 64;

int64_t reg_width(int64_t n) { return std::max<int64_t>(8, (n + 7) / 8 * 8); }

// `A name[w]` = row x[base + u * stride] for u < n (0 beyond; only the last 8 need the guard).
std::string regs_load(const Ctx& c, const std::string& name, int64_t w, const std::string& n, int arg,
                      const std::string& base, const std::string& stride, const std::string& ind) {
  std::string s = ind + c.A + " " + name + "[" + S(w) + "];\n";
  for (int64_t u = 0; u < w; ++u) {
    const std::string ld =
        c.A + "(" +
        load(*c.t, c.dt, arg, base + " + " + S(u) + "u" + (stride == "1" ? std::string() : " * " + stride)) + ")";
    if (u < w - 8)
      s += ind + name + "[" + S(u) + "] = " + ld + ";\n";
    else
      s += ind + "if (" + n + " > " + S(u) + ") " + name + "[" + S(u) + "] = " + ld + "; else " + name + "[" + S(u) +
           "] = " + c.A + "(0);\n";
  }
  return s;
}
// `A out` = sum over u < n of x[u] * (y), y an expression of u ("@" stands for u), in order.
std::string regs_dot(const Ctx& c, const std::string& out, int64_t w, const std::string& n, const std::string& x,
                     const std::string& y, const std::string& ind) {
  std::string s = ind + c.A + " " + out + " = " + c.A + "(0);\n";
  for (int64_t u = 0; u < w; ++u) {
    std::string yy = y;
    for (size_t at = yy.find('@'); at != std::string::npos; at = yy.find('@')) yy.replace(at, 1, S(u));
    const std::string term = out + " += " + x + "[" + S(u) + "] * " + yy + ";";
    s += ind + (u < w - 8 ? term : "if (" + n + " > " + S(u) + ") " + term) + "\n";
  }
  return s;
}
// acc[u] += f * (y) for u < n (no guard needed: columns past n are never stored).
std::string regs_axpy(const std::string& acc, int64_t w, const std::string& f, const std::string& y,
                      const std::string& ind) {
  std::string s;
  for (int64_t u = 0; u < w; ++u) {
    std::string yy = y;
    for (size_t at = yy.find('@'); at != std::string::npos; at = yy.find('@')) yy.replace(at, 1, S(u));
    s += ind + acc + "[" + S(u) + "] += " + f + " * " + yy + ";\n";
  }
  return s;
}
std::string regs_zero(const Ctx& c, const std::string& acc, int64_t w) {
  std::string s = "  " + c.A + " " + acc + "[" + S(w) + "];\n";
  for (int64_t u = 0; u < w; ++u) s += "  " + acc + "[" + S(u) + "] = " + c.A + "(0);\n";
  return s;
}
// Stores y[y_o + (first + u) * y_s0] = value(acc[u]) for u < n.
std::string regs_store(const Ctx& c, const Out& y, const std::string& acc, int64_t w, const std::string& n,
                       const std::string& first, const std::string& value) {
  std::string s;
  for (int64_t u = 0; u < w; ++u) {
    std::string v = value;
    const std::string r = acc + "[" + S(u) + "]";
    for (size_t at = v.find('@'); at != std::string::npos; at = v.find('@', at + r.size())) v.replace(at, 1, r);
    s += "  if (" + n + " > " + S(u) + ") " +
         store(*c.t, y.dtype, y.arg, y.name + "_o + (" + first + " + " + S(u) + "u) * " + y.name + "_s0",
               compute_dtype(c.dt), v) +
         "\n";
  }
  return s;
}
// `A s` = the score of (b, i, j) from q or k held in registers (`held` = "q": qr, else kr) and the
// other loaded as `A <other>r[w]` (kept for the caller).
std::string regs_score(const Ctx& c, bool q_held, int64_t we, const std::string& ind) {
  std::string s;
  if (q_held) {
    s += ind + "uint ka = " + at3("k", "b", "j", "0") + ";\n";
    s += regs_load(c, "kr", we, "E", 1, "ka", c.unit_k ? "1" : "k_s2", ind);
  } else {
    s += ind + "uint qa = " + at3("q", "b", "i", "0") + ";\n";
    s += regs_load(c, "qr", we, "E", 0, "qa", c.unit_q ? "1" : "q_s2", ind);
  }
  s += regs_dot(c, "dot", we, "E", "qr", "kr[@]", ind);
  s += ind + c.A + " s = dot * scale;\n";
  if (c.mask_arg >= 0) s += ind + "s += " + c.A + "(" + load(*c.t, c.dt, c.mask_arg, at3("m", "b", "i", "j")) + ");\n";
  return s;
}

int64_t blocks(int64_t n) { return (n + kCols - 1) / kCols; }

}  // namespace

bool attention(int32_t op, const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out, int32_t n_out,
               const void* attrs, const GlslTarget& target, std::vector<GlslPass>& passes, std::string* why) {
  const bool fwd = op == EMBER_LIB_FUSED_ATTENTION;
  const int32_t base_in = fwd ? 3 : 6;
  if (n_out != (fwd ? 2 : 3) || (n_in != base_in && n_in != base_in + 1))
    return fail(why, "fused attention: bad operand counts");
  const bool has_mask = n_in == base_in + 1;
  const ember_tensor_desc &q = in[0], &k = in[1], &v = in[2];
  const uint8_t dt = uint8_t(q.dtype);
  // f16 / bf16 operands may keep their statistics in f32: the forward's lse output, the backward's
  // lse and d (inputs 3 and 4).
  auto widened = [&](int32_t x) { return x == EMBER_F32 && is_half(dt); };
  for (int32_t a = 0; a < n_in; ++a) {
    const bool two = !fwd && (a == 3 || a == 4);
    if (in[a].rank != (two ? 2 : 3)) return fail(why, "fused attention: bad operand ranks");
    if (in[a].dtype != dt && !(two && widened(in[a].dtype))) return fail(why, "fused attention: operand dtypes differ");
  }
  if (!is_floating(dt)) return fail(why, "fused attention: operands must be floating");
  const int64_t B = q.shape[0], L = q.shape[1], E = q.shape[2], S_ = k.shape[1], Ev = v.shape[2];
  // The outputs, each addressed by its flat index (they are contiguous).
  auto shaped = [](const ember_tensor_desc& d, std::initializer_list<int64_t> dims) {
    if (d.rank != int32_t(dims.size())) return false;
    int i = 0;
    for (int64_t n : dims)
      if (d.shape[i++] != n) return false;
    return true;
  };
  const bool outputs_ok =
      fwd ? shaped(out[0], {B, L, Ev}) && (out[0].dtype == dt || widened(out[0].dtype)) && shaped(out[1], {B, L}) &&
                (out[1].dtype == dt || widened(out[1].dtype))
          : shaped(out[0], {B, L, E}) && shaped(out[1], {B, S_, E}) && shaped(out[2], {B, S_, Ev}) &&
                out[0].dtype == dt && out[1].dtype == dt && out[2].dtype == dt;
  if (!outputs_ok) return fail(why, "fused attention: bad outputs");
  const uint8_t lt = fwd ? uint8_t(out[1].dtype) : uint8_t(in[3].dtype), ddt = fwd ? lt : uint8_t(in[4].dtype);
  if (dt == EMBER_F64 && !has_f64_exp_log(target))
    return fail(why, "fused attention on float64 needs the f64 exp and log");
  if (B * std::max(L, S_) * std::max<int64_t>({E, Ev, 1}) >= (int64_t(1) << 31))
    return fail(why, "fused attention: too large for 32-bit indices");
  const auto* a = static_cast<const ember_attention_attrs*>(attrs);
  std::unique_ptr<ExprTable> t = make_glsl_table(target);
  Ctx c;
  c.t = t.get();
  c.dt = dt;
  const bool d64 = dt == EMBER_F64;
  c.A = compute_type(dt);
  c.exp = d64 ? "e_expd" : "e_expf";
  c.log = d64 ? "e_logd" : "e_logf";
  c.inf = d64 ? "e_infd()" : "e_inff()";
  c.nan = d64 ? "e_nand()" : "e_nanf()";
  c.mask_arg = has_mask ? base_in : -1;
  c.unit_q = q.strides[2] == 1;
  c.unit_k = k.strides[2] == 1;
  c.unit_v = v.strides[2] == 1;
  c.unit_g = !fwd && in[5].strides[2] == 1;
  const Out O{n_in, "o", uint8_t(out[0].dtype)}, LSE{n_in + 1, "l", lt};          // forward
  const Out DQ{n_in, "dq", dt}, DK{n_in + 1, "dk", dt}, DV{n_in + 2, "dv", dt};  // backward
  std::vector<uint8_t> dts;
  for (int32_t i = 0; i < n_in; ++i) dts.push_back(uint8_t(in[i].dtype));
  for (int32_t i = 0; i < n_out; ++i) dts.push_back(uint8_t(out[i].dtype));

  // The words of one pass (NC: its column blocks).
  auto params = [&](int64_t nc) {
    Params p;
    p.u32("B", B);
    p.i32("L", L);
    p.i32("S", S_);
    p.i32("E", E);
    p.i32("Ev", Ev);
    p.i32("NC", nc);
    p.i32("causal", a->causal != 0);
    p.real("scale", a->scale, d64);
    auto tensor = [&](const std::string& name, const ember_tensor_desc& x, int rank) {
      p.u32(name + "_o", x.offset);
      for (int d = 0; d < rank; ++d) p.u32(name + "_s" + S(d), x.strides[d]);
    };
    tensor("q", q, 3);
    tensor("k", k, 3);
    tensor("v", v, 3);
    if (!fwd) {
      tensor("lse", in[3], 2);
      tensor("dd", in[4], 2);
      tensor("g", in[5], 3);
    }
    if (has_mask) tensor("m", in[base_in], 3);
    for (int32_t i = 0; i < n_out; ++i) {
      const Out& y = fwd ? (i == 0 ? O : LSE) : (i == 0 ? DQ : i == 1 ? DK : DV);
      p.u32(y.name + "_o", out[i].offset);
      p.u32(y.name + "_s0", out[i].strides[out[i].rank - 1]);
    }
    return p;
  };
  const std::string& A = c.A;
  const std::string ninf = "-" + c.inf;
  // Loop iterations of the unrolled dot products (E and Ev terms).
  const int64_t ue = unrolled_iterations(E), uv = unrolled_iterations(Ev);
  // The point id as (block, row) and the row as (b, i) over [B, R].
  auto split = [](const std::string& i, const std::string& R) {
    return "  int blk = int(id % int64_t(NC));\n  uint row = uint(id / int64_t(NC));\n  int " + i +
           " = int(row % uint(" + R + "));\n  uint b = row / uint(" + R + ");\n";
  };
  const bool regs = E <= kRegMax && Ev <= kRegMax;
  const int64_t we = reg_width(E), wv = reg_width(Ev);
  if (fwd && regs) {
    // One invocation per query row, q[b, i] in registers: lse (online), then o.
    std::string b = "  uint row = uint(id);\n  int i = int(row % uint(L));\n  uint b = row / uint(L);\n";
    b += "  uint qa = " + at3("q", "b", "i", "0") + ";\n";
    b += regs_load(c, "qr", we, "E", 0, "qa", c.unit_q ? "1" : "q_s2", "  ");
    b += "  int jend = causal != 0 ? min(S, i + 1) : S;\n";
    b += "  " + A + " mx = " + ninf + ", sum = " + A + "(0);\n";
    b += "  for (int j = 0; j < jend; ++j) {\n" + regs_score(c, true, we, "    ");
    b += "    if (s > mx) { sum = sum * " + c.exp + "(mx - s); mx = s; }\n";
    b += "    if (s != " + ninf + ") sum += " + c.exp + "(s - mx);\n  }\n";
    b += "  " + A + " lse = sum > " + A + "(0) ? mx + " + c.log + "(sum) : " + ninf + ";\n";
    b += "  " + store(*t, lt, LSE.arg, "l_o + row * l_s0", compute_dtype(dt), "lse") + "\n";
    b += regs_zero(c, "acc", wv);
    b += "  if (lse > " + ninf + ")\n";
    b += "    for (int j = 0; j < jend; ++j) {\n" + regs_score(c, true, we, "      ");
    b += "      if (s == " + ninf + ") continue;\n";
    b += "      " + A + " pj = " + c.exp + "(s - lse);\n";
    b += "      uint va = " + at3("v", "b", "j", "0") + ";\n";
    b += regs_axpy("acc", wv, "pj", A + "(" + load(*t, dt, 2, c.unit_v ? "va + @u" : "va + @u * v_s2") + ")", "      ");
    b += "    }\n";
    b += regs_store(c, O, "acc", wv, "Ev", "row * uint(Ev)", "lse > " + ninf + " ? @ : " + c.nan);
    passes.push_back(make_pass("library call fused attention", target, dts, params(1), B * L, 2 * S_, b));
    return true;
  }
  if (!fwd && regs) {
    {  // dq: an invocation per query row, q[b, i] and do[b, i] in registers.
      std::string b = "  uint row = uint(id);\n  int i = int(row % uint(L));\n  uint b = row / uint(L);\n";
      b += "  uint qa = " + at3("q", "b", "i", "0") + ", ga = " + at3("g", "b", "i", "0") + ";\n";
      b += regs_load(c, "qr", we, "E", 0, "qa", c.unit_q ? "1" : "q_s2", "  ");
      b += regs_load(c, "gr", wv, "Ev", 5, "ga", c.unit_g ? "1" : "g_s2", "  ");
      b += "  " + A + " l = " + A + "(" + load(*t, lt, 3, "lse_o + b * lse_s0 + uint(i) * lse_s1") + ");\n";
      b += "  " + A + " dd = " + A + "(" + load(*t, ddt, 4, "dd_o + b * dd_s0 + uint(i) * dd_s1") + ");\n";
      b += regs_zero(c, "acc", we);
      b += "  for (int j = 0, jend = causal != 0 ? min(S, i + 1) : S; j < jend; ++j) {\n" +
           regs_score(c, true, we, "    ");
      b += "    if (s == " + ninf + ") continue;\n";
      b += "    " + A + " pj = " + c.exp + "(s - l);\n";
      b += "    uint va = " + at3("v", "b", "j", "0") + ";\n";
      b += regs_dot(c, "dp", wv, "Ev", "gr", A + "(" + load(*t, dt, 2, c.unit_v ? "va + @u" : "va + @u * v_s2") + ")",
                    "    ");
      b += "    " + A + " ds = pj * (dp - dd) * scale;\n";
      b += regs_axpy("acc", we, "ds", "kr[@]", "    ") + "  }\n";
      b += regs_store(c, DQ, "acc", we, "E", "row * uint(E)", "@");
      passes.push_back(make_pass("library call fused attention backward (dq)", target, dts, params(1), B * L, S_, b));
    }
    {  // dk and dv: an invocation per key, k[b, j] and v[b, j] in registers.
      std::string b = "  uint row = uint(id);\n  int j = int(row % uint(S));\n  uint b = row / uint(S);\n";
      b += "  uint ka = " + at3("k", "b", "j", "0") + ", va = " + at3("v", "b", "j", "0") + ";\n";
      b += regs_load(c, "kr", we, "E", 1, "ka", c.unit_k ? "1" : "k_s2", "  ");
      b += regs_load(c, "vr", wv, "Ev", 2, "va", c.unit_v ? "1" : "v_s2", "  ");
      b += regs_zero(c, "ak", we) + regs_zero(c, "av", wv);
      b += "  for (int i = causal != 0 ? j : 0; i < L; ++i) {\n" + regs_score(c, false, we, "    ");
      b += "    if (s == " + ninf + ") continue;\n";
      b += "    " + A + " pj = " + c.exp + "(s - " + A + "(" +
           load(*t, lt, 3, "lse_o + b * lse_s0 + uint(i) * lse_s1") + "));\n";
      b += "    uint ga = " + at3("g", "b", "i", "0") + ";\n";
      b += regs_load(c, "gr", wv, "Ev", 5, "ga", c.unit_g ? "1" : "g_s2", "    ");
      b += regs_dot(c, "dp", wv, "Ev", "gr", "vr[@]", "    ");
      b += "    " + A + " ds = pj * (dp - " + A + "(" + load(*t, ddt, 4, "dd_o + b * dd_s0 + uint(i) * dd_s1") +
           ")) * scale;\n";
      b += regs_axpy("ak", we, "ds", "qr[@]", "    ") + regs_axpy("av", wv, "pj", "gr[@]", "    ") + "  }\n";
      b += regs_store(c, DK, "ak", we, "E", "row * uint(E)", "@");
      b += regs_store(c, DV, "av", wv, "Ev", "row * uint(Ev)", "@");
      passes.push_back(
          make_pass("library call fused attention backward (dk, dv)", target, dts, params(1), B * S_, L, b));
    }
    return true;
  }
  if (fwd) {
    {  // lse[b, i]
      std::string b = "  uint row = uint(id);\n  int i = int(row % uint(L));\n  uint b = row / uint(L);\n";
      b += row_lse(c);
      b += "  " + store(*t, lt, LSE.arg, "l_o + row * l_s0", compute_dtype(dt), "lse") + "\n";
      passes.push_back(
          make_pass("library call fused attention (lse)", target, dts, params(1), B * L, S_ * (1 + ue), b));
    }
    // o[b, i, c] = sum over the visible keys of exp(s - lse) v[b, j, c].
    const int64_t nc = blocks(Ev);
    std::string b = split("i", "L");
    if (is_half(lt)) {  // the stored lse is rounded: computed again
      b += row_lse(c);
    } else {
      b += "  " + A + " lse = " + A + "(" + load(*t, lt, LSE.arg, "l_o + row * l_s0") + ");\n";
    }
    b += acc_begin(c, "Ev");
    b += "  int jend = causal != 0 ? min(S, i + 1) : S;\n";
    b += "  if (lse > " + ninf + ")\n";
    b += "    for (int j = 0; j < jend; ++j) {\n" + score(c, "      ");
    b += "      if (s == " + ninf + ") continue;\n";
    b += "      " + A + " pj = " + c.exp + "(s - lse);\n";
    b += "      uint va = " + at3("v", "b", "j", "0") + ";\n";
    b += acc_add(c, "pj", 2, "va", "v_s2", "      ");
    b += "    }\n";
    b += acc_store(c, O, "row * uint(Ev)", "lse > " + ninf + " ? acc[u] : " + c.nan);
    passes.push_back(make_pass("library call fused attention", target, dts, params(nc), B * L * nc,
                               S_ * (1 + ue) * (is_half(lt) ? 2 : 1), b));
    return true;
  }
  // Backward: p, dp and ds of the current (b, i, j), in the loop body (continue: p = 0).
  auto grads = [&](bool need_ds, const std::string& ind) {
    std::string s = score(c, ind);
    s += ind + "if (s == " + ninf + ") continue;\n";
    s += ind + A + " l = " + A + "(" + load(*t, lt, 3, "lse_o + b * lse_s0 + uint(i) * lse_s1") + ");\n";
    s += ind + A + " pj = " + c.exp + "(s - l);\n";
    if (need_ds) {
      s += ind + A + " dp = " + A + "(0);\n";
      s += ind + "uint ga = " + at3("g", "b", "i", "0") + ", vb = " + at3("v", "b", "j", "0") + ";\n";
      s += unrolled("cc", "0", "Ev",
                    "dp += " + A + "(" + load(*t, dt, 5, "ga + uint(cc) * g_s2") + ") * " + A + "(" +
                        load(*t, dt, 2, "vb + uint(cc) * v_s2") + ");",
                    ind, "int");
      s += ind + A + " ds = pj * (dp - " + A + "(" + load(*t, ddt, 4, "dd_o + b * dd_s0 + uint(i) * dd_s1") +
           ")) * scale;\n";
    }
    return s;
  };
  const int64_t nq = blocks(E), nv = blocks(Ev);
  {  // dq[b, i, e] = sum over j of ds k[b, j, e]
    std::string b = split("i", "L");
    b += acc_begin(c, "E");
    b += "  int jend = causal != 0 ? min(S, i + 1) : S;\n";
    b += "  for (int j = 0; j < jend; ++j) {\n" + grads(true, "    ");
    b += "    uint ka = " + at3("k", "b", "j", "0") + ";\n";
    b += acc_add(c, "ds", 1, "ka", "k_s2", "    ") + "  }\n";
    b += acc_store(c, DQ, "row * uint(E)", "acc[u]");
    passes.push_back(make_pass("library call fused attention backward (dq)", target, dts, params(nq), B * L * nq,
                               S_ * (1 + ue + uv), b));
  }
  {  // dk[b, j, e] = sum over i of ds q[b, i, e]
    std::string b = split("j", "S");
    b += acc_begin(c, "E");
    b += "  for (int i = causal != 0 ? j : 0; i < L; ++i) {\n" + grads(true, "    ");
    b += "    uint qa = " + at3("q", "b", "i", "0") + ";\n";
    b += acc_add(c, "ds", 0, "qa", "q_s2", "    ") + "  }\n";
    b += acc_store(c, DK, "row * uint(E)", "acc[u]");
    passes.push_back(make_pass("library call fused attention backward (dk)", target, dts, params(nq), B * S_ * nq,
                               L * (1 + ue + uv), b));
  }
  {  // dv[b, j, c] = sum over i of p do[b, i, c]
    std::string b = split("j", "S");
    b += acc_begin(c, "Ev");
    b += "  for (int i = causal != 0 ? j : 0; i < L; ++i) {\n" + grads(false, "    ");
    b += "    uint ga = " + at3("g", "b", "i", "0") + ";\n";
    b += acc_add(c, "pj", 5, "ga", "g_s2", "    ") + "  }\n";
    b += acc_store(c, DV, "row * uint(Ev)", "acc[u]");
    passes.push_back(
        make_pass("library call fused attention backward (dv)", target, dts, params(nv), B * S_ * nv, L * (1 + ue), b));
  }
  return true;
}

}  // namespace ember::emit::lib
