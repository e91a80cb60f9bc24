// ONNX RNN, GRU and LSTM: the time loop unrolled with matmuls and elementwise ops (so it
// differentiates and runs on any device). Gate orders as ONNX stores them: LSTM i, o, f, c
// (peepholes i, o, f), GRU z, r, h. Directions forward, reverse and bidirectional; layout 0
// ([seq, batch, ...]) and 1 ([batch, seq, ...]); sequence_lens (forward only: a finished
// batch entry keeps its state and outputs zeros); clip; GRU's linear_before_reset. Activations
// Sigmoid, Tanh, Relu (the default lists when the attribute is absent). An LSTM without
// peepholes, clip or sequence_lens and with the default activations, and such a GRU with
// linear_before_reset (PyTorch's formula, what its exporter writes), run each direction's time
// loop as one library call instead (lstm_recurrence / gru_recurrence, where the device has it):
// the gate rows reordered to PyTorch's order, the input projection one matmul over all steps.
#include <algorithm>

#include "ember/ops_library.h"
#include "onnx/op_registry.h"

namespace ember::onnx::detail {
namespace {

enum class Cell { Rnn, Gru, Lstm };

using Act = std::function<Array(const Array&)>;

Act activation(const OpContext& c, const std::string& name) {
  if (name == "Sigmoid") return [](const Array& x) { return sigmoid(x); };
  if (name == "Tanh") return [](const Array& x) { return tanh(x); };
  if (name == "Relu") return [](const Array& x) { return relu(x); };
  c.unsupported("activation '" + name + "'");
}

std::vector<Array> op_recurrent(const OpContext& c, Cell cell) {
  Array x = c.input(0);
  const Array& W = c.input(1);
  const Array& R = c.input(2);
  // Shapes are checked before any is indexed (a fuzzed file found a rank-1 X read out of bounds).
  auto expect_shape = [&](const Array& a, const std::string& what, std::vector<int64_t> dims) {
    bool ok = a.rank() == int(dims.size());
    for (size_t i = 0; ok && i < dims.size(); ++i) ok = dims[i] < 0 || a.shape()[int(i)] == dims[i];
    if (!ok) {
      std::string want;
      for (int64_t d : dims) want += (want.empty() ? "" : ", ") + (d < 0 ? std::string("?") : std::to_string(d));
      c.fail(what + " must have shape [" + want + "], got " + a.shape().str());
    }
  };
  expect_shape(x, "X", {-1, -1, -1});
  expect_shape(R, "R", {-1, -1, -1});
  const int64_t layout = c.attr_int("layout", 0);
  if (layout != 0 && layout != 1) c.fail("layout " + std::to_string(layout));
  if (layout == 1) x = transpose(x, 0, 1);  // to [seq, batch, input]
  const int64_t T = x.shape()[0], N = x.shape()[1];
  const int64_t H = c.attr_int("hidden_size", R.shape()[2]);
  if (H <= 0) c.fail("hidden_size " + std::to_string(H));
  const int gates = cell == Cell::Lstm ? 4 : cell == Cell::Gru ? 3 : 1;
  const std::string direction = c.attr_string("direction", "forward");
  const int dirs = direction == "bidirectional" ? 2 : 1;
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    c.fail("direction '" + direction + "'");
  expect_shape(W, "W", {dirs, gates * H, x.shape()[2]});
  expect_shape(R, "R", {dirs, gates * H, H});
  if (c.has_input(3)) expect_shape(c.input(3), "B", {dirs, 2 * gates * H});
  if (c.has_input(4)) expect_shape(c.input(4), "sequence_lens", {N});
  if (c.has_input(5)) expect_shape(c.input(5), "initial_h", {dirs, N, H});
  if (cell == Cell::Lstm && c.has_input(6)) expect_shape(c.input(6), "initial_c", {dirs, N, H});
  if (cell == Cell::Lstm && c.has_input(7)) expect_shape(c.input(7), "P", {dirs, 3 * H});
  if (c.attr_int("input_forget", 0) != 0) c.unsupported("input_forget");
  const double clip = c.attr_float("clip", 0.0);

  std::vector<std::string> names;
  if (const Attribute* a = c.attr("activations")) names = a->strings;
  std::vector<std::string> defaults = cell == Cell::Lstm  ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
                                      : cell == Cell::Gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                          : std::vector<std::string>{"Tanh"};
  if (c.has_attr("activation_alpha") || c.has_attr("activation_beta")) c.unsupported("activation_alpha / activation_beta");

  Array lens;
  if (c.has_input(4)) {
    if (direction != "forward") c.unsupported("sequence_lens with direction " + direction);
    lens = reshape(cast(c.input(4), DType::I64), Shape{N, 1});
  }
  // The library call's conditions (every direction alike).
  bool default_acts = true;
  for (size_t k = 0; k < names.size(); ++k) default_acts = default_acts && names[k] == defaults[k % defaults.size()];
  const bool fused = cell != Cell::Rnn && default_acts && clip <= 0 && !lens.defined() &&
                     !(cell == Cell::Lstm && c.has_input(7)) &&
                     (cell == Cell::Lstm ? lstm_recurrence_available(x.device(), x.dtype())
                                         : c.attr_int("linear_before_reset", 0) != 0 &&
                                               gru_recurrence_available(x.device(), x.dtype()));
  std::vector<Array> ys, hs, cs;
  for (int d = 0; d < dirs; ++d) {
    if (fused) {
      // Gate rows from ONNX's order (LSTM i, o, f, c; GRU z, r, h) to PyTorch's (i, f, g, o;
      // r, z, n): blocks of H along dim 0.
      const std::vector<int64_t> order = cell == Cell::Lstm ? std::vector<int64_t>{0, 2, 3, 1}
                                                            : std::vector<int64_t>{1, 0, 2};
      auto reorder = [&](const Array& m) {
        std::vector<Array> blocks;
        for (int64_t g : order) blocks.push_back(slice(m, 0, g * H, (g + 1) * H));
        return cat(blocks, 0);
      };
      const Array w = reorder(select(W, 0, d)), r = reorder(select(R, 0, d));
      Array wb, rb;
      if (c.has_input(3)) {
        const Array b = select(c.input(3), 0, d);
        wb = reorder(slice(b, 0, 0, gates * H));
        rb = reorder(slice(b, 0, gates * H, 2 * gates * H));
      }
      const TensorOptions like{.dtype = x.dtype(), .device = x.device()};
      const Array h0 = c.has_input(5) ? select(c.input(5), 0, d) : zeros(Shape{N, H}, like);
      const int64_t in = x.shape()[2];
      // The LSTM's two biases both go into the projection; the GRU's recurrent one stays apart.
      Array bias = wb;
      if (cell == Cell::Lstm && rb.defined()) bias = add(wb, rb);
      Array gi = matmul(reshape(x, Shape{T * N, in}), transpose(w, 0, 1));
      if (bias.defined()) gi = add(gi, bias);
      gi = reshape(gi, Shape{T, N, gates * H});
      const bool reverse = direction == "reverse" || d == 1;
      const int64_t last = reverse ? 0 : T - 1;
      if (cell == Cell::Lstm) {
        const Array c0 = c.has_input(6) ? select(c.input(6), 0, d) : zeros(Shape{N, H}, like);
        LstmRecurrenceResult res = lstm_recurrence(gi, h0, c0, r, {.reverse = reverse});
        ys.push_back(res.h);
        hs.push_back(select(res.h, 0, last));
        cs.push_back(select(res.c, 0, last));
      } else {
        const Array h = gru_recurrence(gi, h0, r, rb.defined() ? rb : zeros(Shape{3 * H}, like), {.reverse = reverse});
        ys.push_back(h);
        hs.push_back(select(h, 0, last));
      }
      continue;
    }
    std::vector<Act> act;
    for (size_t k = 0; k < defaults.size(); ++k) {
      size_t idx = size_t(d) * defaults.size() + k;
      act.push_back(activation(c, idx < names.size() ? names[idx] : defaults[k]));
    }
    Array w = select(W, 0, d), r = select(R, 0, d);  // [G*H, in], [G*H, H]
    Array wb, rb;
    if (c.has_input(3)) {
      Array b = select(c.input(3), 0, d);
      wb = slice(b, 0, 0, gates * H);
      rb = slice(b, 0, gates * H, 2 * gates * H);
    }
    Array h = c.has_input(5) ? select(c.input(5), 0, d) : zeros(Shape{N, H}, TensorOptions{.dtype = x.dtype(), .device = x.device()});
    Array cstate;
    if (cell == Cell::Lstm)
      cstate = c.has_input(6) ? select(c.input(6), 0, d) : zeros(Shape{N, H}, TensorOptions{.dtype = x.dtype(), .device = x.device()});
    Array p;
    if (cell == Cell::Lstm && c.has_input(7)) p = select(c.input(7), 0, d);
    const bool reverse = direction == "reverse" || d == 1;
    std::vector<Array> y(static_cast<size_t>(T));
    auto gate = [&](const Array& m, int g) { return slice(m, 1, g * H, (g + 1) * H); };
    auto clipped = [&](const Array& v) { return clip > 0 ? clamp(v, Scalar(-clip), Scalar(clip)) : v; };
    for (int64_t s = 0; s < T; ++s) {
      const int64_t t = reverse ? T - 1 - s : s;
      Array xt = select(x, 0, t);                              // [N, in]
      Array xw = matmul(xt, transpose(w, 0, 1));               // [N, G*H]
      if (wb.defined()) xw = add(xw, wb);
      Array hr = matmul(h, transpose(r, 0, 1));
      if (rb.defined()) hr = add(hr, rb);
      Array h_new, c_new;
      if (cell == Cell::Rnn) {
        h_new = act[0](clipped(add(xw, hr)));
      } else if (cell == Cell::Gru) {
        Array z = act[0](clipped(add(gate(xw, 0), gate(hr, 0))));
        Array rg = act[0](clipped(add(gate(xw, 1), gate(hr, 1))));
        Array cand;
        if (c.attr_int("linear_before_reset", 0) != 0) {
          cand = add(gate(xw, 2), mul(rg, gate(hr, 2)));
        } else {
          Array rh = matmul(mul(rg, h), transpose(slice(r, 0, 2 * H, 3 * H), 0, 1));
          if (rb.defined()) rh = add(rh, slice(rb, 0, 2 * H, 3 * H));
          cand = add(gate(xw, 2), rh);
        }
        Array hh = act[1](clipped(cand));
        h_new = add(mul(sub(1.0, z), hh), mul(z, h));
      } else {
        Array pre = add(xw, hr);
        Array pi = gate(pre, 0), po = gate(pre, 1), pf = gate(pre, 2), pc = gate(pre, 3);
        if (p.defined()) {
          pi = add(pi, mul(slice(p, 0, 0, H), cstate));
          pf = add(pf, mul(slice(p, 0, 2 * H, 3 * H), cstate));
        }
        Array i = act[0](clipped(pi)), f = act[0](clipped(pf)), g = act[1](clipped(pc));
        c_new = add(mul(f, cstate), mul(i, g));
        if (p.defined()) po = add(po, mul(slice(p, 0, H, 2 * H), c_new));
        Array o = act[0](clipped(po));
        h_new = mul(o, act[2](c_new));
      }
      if (lens.defined()) {
        Array live = lt(full(Shape{1, 1}, t, TensorOptions{.dtype = DType::I64, .device = x.device()}), lens);  // [N, 1]
        y[size_t(t)] = where(live, h_new, zeros_like(h_new));
        h = where(live, h_new, h);
        if (cell == Cell::Lstm) cstate = where(live, c_new, cstate);
      } else {
        y[size_t(t)] = h_new;
        h = h_new;
        if (cell == Cell::Lstm) cstate = c_new;
      }
    }
    ys.push_back(stack(y, 0));  // [T, N, H]
    hs.push_back(h);
    if (cell == Cell::Lstm) cs.push_back(cstate);
  }
  Array Y = stack(ys, 1);  // [T, dirs, N, H]
  Array Yh = stack(hs, 0); // [dirs, N, H]
  Array Yc = cell == Cell::Lstm ? stack(cs, 0) : Array();
  if (layout == 1) {
    Y = permute(Y, {2, 0, 1, 3});  // [N, T, dirs, H]
    Yh = transpose(Yh, 0, 1);
    if (Yc.defined()) Yc = transpose(Yc, 0, 1);
  }
  std::vector<Array> outs = {Y, Yh};
  if (cell == Cell::Lstm) outs.push_back(Yc);
  return outs;
}

const Registrar registrar({
    {"RNN", {[](const OpContext& c) { return op_recurrent(c, Cell::Rnn); }, 7}},
    {"GRU", {[](const OpContext& c) { return op_recurrent(c, Cell::Gru); }, 7}},
    {"LSTM", {[](const OpContext& c) { return op_recurrent(c, Cell::Lstm); }, 7}},
});

}  // namespace
}  // namespace ember::onnx::detail
