// Front end of the LSTM recurrence (include/ember/ops_library.h): argument checks and one
// LstmRecurrence library node with three outputs (graph/node.h make_arrays): h and c after every
// step, and the activated gates, which the backward reads instead of recomputing them. Also the
// gradient its autograd rule uses (src/autograd/rules_library.cpp): an LstmRecurrenceBackward
// library node that runs backwards through time, plus one product for w_hh; or, when the gradient
// must be differentiable again (create_graph), the same formulas with plain ops over a forward
// recomputed from the inputs.
#include "backend/registry.h"
#include "ember/autograd.h"
#include "ops/frontend.h"

namespace ember {

LstmRecurrenceResult lstm_recurrence(const Array& gi, const Array& h0, const Array& c0, const Array& w_hh,
                                     LstmRecurrenceOptions opts, Loc loc) {
  const char* op = "lstm_recurrence";
  const NodePtr& gn = node_of(gi, op, loc);
  const NodePtr& hn = node_of(h0, op, loc);
  const NodePtr& cn = node_of(c0, op, loc);
  const NodePtr& wn = node_of(w_hh, op, loc);
  const Device dev = common_device({&gi, &h0, &c0, &w_hh}, op, loc);
  const Shape &gs = gn->shape, &ws = wn->shape;
  if (gs.rank() != 3 || gs[2] % 4 != 0)
    fail(op, fmt::format("gi must be [L, N, 4H] (the input projection of all steps), got shape {}", gs.str()), loc);
  const int64_t L = gs[0], N = gs[1], H = gs[2] / 4;
  if (ws != Shape{4 * H, H})
    fail(op, fmt::format("w_hh must be [4H, H] = {} for gi of shape {}, got {}", Shape{4 * H, H}.str(), gs.str(),
                         ws.str()),
         loc);
  for (const auto& [name, n] : {std::pair{"h0", hn.get()}, std::pair{"c0", cn.get()}})
    if (n->shape != Shape{N, H})
      fail(op, fmt::format("{} must be [N, H] = {} for gi of shape {}, got {}", name, Shape{N, H}.str(), gs.str(),
                           n->shape.str()),
           loc);
  const DType dt = gn->dtype;
  if (!is_floating(dt))
    fail(op, fmt::format("needs floating operands, got gi of dtype {}", dtype_name(dt)), loc);
  for (const auto& [name, n] : {std::pair{"h0", hn.get()}, std::pair{"c0", cn.get()}, std::pair{"w_hh", wn.get()}})
    if (n->dtype != dt)
      fail(op, fmt::format("{} has dtype {} but gi has {}; cast them to one dtype", name, dtype_name(n->dtype),
                           dtype_name(dt)),
           loc);
  OpAttrs attrs{.params = RecurrenceAttrs{.reverse = opts.reverse}};
  std::vector<Array> outs = make_arrays(Op::LstmRecurrence, std::move(attrs), {gi, h0, c0, w_hh},
                                        {{Shape{L, N, H}, dt}, {Shape{L, N, H}, dt}, {Shape{L, N, 4 * H}, dt}}, dev, loc);
  return {outs[0], outs[1]};
}

namespace {

// The gradients with plain ops (differentiable again): the forward recomputed from the inputs,
// then the formulas of abi.h's EMBER_LIB_LSTM_RECURRENCE_BACKWARD step by step.
std::vector<Array> lstm_backward_plain(const std::vector<Array>& in, const Array& gh, const Array& gc, bool reverse) {
  const Array &gi = in[0], &h0 = in[1], &c0 = in[2], &w_hh = in[3];
  const int64_t L = gi.shape()[0];
  const Array w_t = transpose(w_hh, 0, 1);
  struct Step {
    Array i, f, g, o, c_prev, c, h_prev;
  };
  std::vector<Step> steps(static_cast<size_t>(L));
  Array h = h0, c = c0;
  for (int64_t s = 0; s < L; ++s) {
    const int64_t t = reverse ? L - 1 - s : s;
    std::vector<Array> a = chunk(add(select(gi, 0, t), matmul(h, w_t)), 4, 1);
    Step& st = steps[size_t(t)];
    st = {sigmoid(a[0]), sigmoid(a[1]), tanh(a[2]), sigmoid(a[3]), c, Array(), h};
    c = add(mul(st.f, c), mul(st.i, st.g));
    h = mul(st.o, tanh(c));
    st.c = c;
  }
  const Array one = scalar_like(1.0, gi, Loc::current());
  Array dh_next = zeros_like(h0), dc_next = zeros_like(c0), dw;
  std::vector<Array> da(static_cast<size_t>(L));
  for (int64_t s = L - 1; s >= 0; --s) {
    const int64_t t = reverse ? L - 1 - s : s;
    const Step& st = steps[size_t(t)];
    const Array dh = gh.defined() ? add(select(gh, 0, t), dh_next) : dh_next;
    const Array tc = tanh(st.c);
    Array dc = add(dc_next, mul(mul(dh, st.o), sub(one, mul(tc, tc))));
    if (gc.defined()) dc = add(dc, select(gc, 0, t));
    const Array da_t = cat({mul(mul(dc, st.g), mul(st.i, sub(one, st.i))),
                            mul(mul(dc, st.c_prev), mul(st.f, sub(one, st.f))),
                            mul(mul(dc, st.i), sub(one, mul(st.g, st.g))),
                            mul(mul(dh, tc), mul(st.o, sub(one, st.o)))},
                           1);
    da[size_t(t)] = da_t;
    const Array dw_t = matmul(transpose(da_t, 0, 1), st.h_prev);
    dw = dw.defined() ? add(dw, dw_t) : dw_t;
    dh_next = matmul(da_t, w_hh);
    dc_next = mul(dc, st.f);
  }
  return {stack(da, 0), dh_next, dc_next, dw};
}

}  // namespace

// Gradients of the LstmRecurrence node (declared in rules_library.cpp). in = gi, h0, c0, w_hh;
// h, c, gates its outputs and gh, gc the gradients of h and c (either may be undefined: zero).
std::vector<Array> lstm_recurrence_backward(const std::vector<Array>& in, const Array& h, const Array& c,
                                            const Array& gates, const Array& gh, const Array& gc, bool reverse,
                                            const std::vector<bool>& needs) {
  const Loc loc = Loc::current();
  std::vector<Array> grads(4);
  if (grad_enabled()) {
    grads = lstm_backward_plain(in, gh, gc, reverse);
  } else {
    const Array &c0 = in[2], &w_hh = in[3];
    const int64_t L = h.shape()[0], N = h.shape()[1], H = h.shape()[2];
    std::vector<Array> ins{gates, c, c0, w_hh, gh.defined() ? gh : zeros_like(h), gc.defined() ? gc : zeros_like(c)};
    OpAttrs attrs{.params = RecurrenceAttrs{.reverse = reverse}};
    const DType dt = h.dtype();
    std::vector<Array> outs = make_arrays(Op::LstmRecurrenceBackward, std::move(attrs), ins,
                                          {{Shape{L, N, 4 * H}, dt}, {Shape{N, H}, dt}, {Shape{N, H}, dt}},
                                          h.device(), loc);
    grads = {outs[0], outs[1], outs[2], Array()};
    if (needs[3]) {
      // dw_hh = sum over t of da[t]^T h_prev[t]: one product over all L * N rows, h_prev being h
      // shifted by one step (h0 first in the order the steps ran).
      const Array h0 = unsqueeze(in[1], 0, loc);
      const Array h_prev = L == 1 ? h0
                           : reverse ? cat({slice(h, 0, 1, L, 1, loc), h0}, 0, loc)
                                     : cat({h0, slice(h, 0, 0, L - 1, 1, loc)}, 0, loc);
      grads[3] = matmul(transpose(reshape(outs[0], Shape{L * N, 4 * H}, loc), 0, 1, loc),
                        reshape(h_prev, Shape{L * N, H}, loc), loc);
    }
  }
  for (size_t i = 0; i < grads.size(); ++i)
    if (!needs[i]) grads[i] = Array();
  return grads;
}

bool lstm_recurrence_available(Device device, DType dtype) {
  Backend* b = Backend::try_get(device.kind);
  if (!b || device.index < 0 || device.index >= b->device_count() || !is_floating(dtype)) return false;
  return b->supports(device.index, EMBER_SUPPORT_LIBRARY, EMBER_LIB_LSTM_RECURRENCE, int32_t(dtype)) &&
         b->supports(device.index, EMBER_SUPPORT_LIBRARY, EMBER_LIB_LSTM_RECURRENCE_BACKWARD, int32_t(dtype));
}

}  // namespace ember
