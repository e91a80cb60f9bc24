// Front ends of the LSTM and GRU recurrences (include/ember/ops_library.h): argument checks and
// one library node with three outputs (ops/make_array.h make_arrays): LSTM h and c after every step
// and the activated gates; GRU h, the gates and the recurrent part of n; the extra outputs are
// what the backward reads instead of recomputing. Also the gradients their autograd rules use
// (src/autograd/rules_library.cpp): a backward library node that runs backwards through time,
// plus one product for w_hh; or, when the gradient must be differentiable again (create_graph),
// the same formulas with plain ops over a forward recomputed from the inputs.
#include "runtime/registry.h"
#include "ember/autograd.h"
#include "ops/frontend.h"

namespace ember {

namespace {

struct Dims {
  int64_t L, N, H;
  DType dtype;
  Device device;
};

// The checks shared by both recurrences: gi [L, N, G·H], w_hh [G·H, H], the states [N, H] and the
// bias (GRU's b_hh, or null) [G·H], all of one floating dtype and one device.
Dims check_operands(const char* op, int64_t G, const Array& gi, const Array& w_hh,
                    std::initializer_list<std::pair<const char*, const Array*>> states, const Array* bias, Loc loc) {
  const NodePtr& gn = node_of(gi, op, loc);
  std::vector<const Array*> all{&gi, &w_hh};
  for (const auto& [name, a] : states) all.push_back(a);
  if (bias) all.push_back(bias);
  const Device dev = common_device(all, op, loc);
  const Shape& gs = gn->shape;
  if (gs.rank() != 3 || gs[2] % G != 0)
    fail(op, fmt::format("gi must be [L, N, {}H] (the input projection of all steps), got shape {}", G, gs.str()), loc);
  const int64_t L = gs[0], N = gs[1], H = gs[2] / G;
  const DType dt = gn->dtype;
  if (!is_floating(dt)) fail(op, fmt::format("needs floating operands, got gi of dtype {}", dtype_name(dt)), loc);
  auto check = [&](const char* name, const Array& a, const Shape& want, const char* form) {
    const NodePtr& n = node_of(a, op, loc);
    if (n->shape != want)
      fail(op, fmt::format("{} must be {} = {} for gi of shape {}, got {}", name, form, want.str(), gs.str(),
                           n->shape.str()),
           loc);
    if (n->dtype != dt)
      fail(op, fmt::format("{} has dtype {} but gi has {}; cast them to one dtype", name, dtype_name(n->dtype),
                           dtype_name(dt)),
           loc);
  };
  check("w_hh", w_hh, Shape{G * H, H}, G == 4 ? "[4H, H]" : "[3H, H]");
  for (const auto& [name, a] : states) check(name, *a, Shape{N, H}, "[N, H]");
  if (bias) check("b_hh", *bias, Shape{G * H}, "[3H]");
  return {L, N, H, dt, dev};
}

}  // namespace

LstmRecurrenceResult lstm_recurrence(const Array& gi, const Array& h0, const Array& c0, const Array& w_hh,
                                     TimeLoopOptions opts, Loc loc) {
  const auto [L, N, H, dt, dev] =
      check_operands("lstm_recurrence", 4, gi, w_hh, {{"h0", &h0}, {"c0", &c0}}, nullptr, loc);
  OpAttrs attrs{.params = RecurrenceAttrs{.reverse = opts.reverse}};
  const std::vector<OutputSpec> specs{{Shape{L, N, H}, dt}, {Shape{L, N, H}, dt}, {Shape{L, N, 4 * H}, dt}};
  std::vector<Array> outs = make_arrays(Op::LstmRecurrence, std::move(attrs), {gi, h0, c0, w_hh}, specs, dev, loc);
  return {outs[0], outs[1]};
}

Array gru_recurrence(const Array& gi, const Array& h0, const Array& w_hh, const Array& b_hh, TimeLoopOptions opts,
                     Loc loc) {
  const auto [L, N, H, dt, dev] = check_operands("gru_recurrence", 3, gi, w_hh, {{"h0", &h0}}, &b_hh, loc);
  OpAttrs attrs{.params = RecurrenceAttrs{.reverse = opts.reverse}};
  const std::vector<OutputSpec> specs{{Shape{L, N, H}, dt}, {Shape{L, N, 3 * H}, dt}, {Shape{L, N, H}, dt}};
  std::vector<Array> outs = make_arrays(Op::GruRecurrence, std::move(attrs), {gi, h0, w_hh, b_hh}, specs, dev, loc);
  return outs[0];
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

// The recurrent weight's gradient, the sum over t of db[t]^T h_prev[t] (db [L, N, G·H]): one
// product over all L · N rows, h_prev being h shifted by one step (h0 first in the order the
// steps ran).
Array weight_gradient(const Array& db, const Array& h, const Array& h0, bool reverse) {
  const Loc loc = Loc::current();
  const int64_t L = h.shape()[0], N = h.shape()[1], H = h.shape()[2], GH = db.shape()[2];
  const Array first = unsqueeze(h0, 0, loc);
  const Array h_prev = L == 1 ? first
                       : reverse ? cat({slice(h, 0, 1, L, 1, loc), first}, 0, loc)
                                 : cat({first, slice(h, 0, 0, L - 1, 1, loc)}, 0, loc);
  return matmul(transpose(reshape(db, Shape{L * N, GH}, loc), 0, 1, loc), reshape(h_prev, Shape{L * N, H}, loc), loc);
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
    if (needs[3]) grads[3] = weight_gradient(outs[0], h, in[1], reverse);
  }
  for (size_t i = 0; i < grads.size(); ++i)
    if (!needs[i]) grads[i] = Array();
  return grads;
}

namespace {

// GRU gradients with plain ops (differentiable again): the forward recomputed from the inputs,
// then the formulas of abi.h's EMBER_LIB_GRU_RECURRENCE_BACKWARD step by step.
std::vector<Array> gru_backward_plain(const std::vector<Array>& in, const Array& gh, bool reverse) {
  const Array &gi = in[0], &h0 = in[1], &w_hh = in[2], &b_hh = in[3];
  const int64_t L = gi.shape()[0];
  const Array w_t = transpose(w_hh, 0, 1);
  struct Step {
    Array r, z, n, hn, h_prev;
  };
  std::vector<Step> steps(static_cast<size_t>(L));
  Array h = h0;
  for (int64_t s = 0; s < L; ++s) {
    const int64_t t = reverse ? L - 1 - s : s;
    std::vector<Array> a = chunk(select(gi, 0, t), 3, 1);
    std::vector<Array> b = chunk(add(matmul(h, w_t), b_hh), 3, 1);
    Step& st = steps[size_t(t)];
    st.r = sigmoid(add(a[0], b[0]));
    st.z = sigmoid(add(a[1], b[1]));
    st.hn = b[2];
    st.n = tanh(add(a[2], mul(st.r, b[2])));
    st.h_prev = h;
    h = add(st.n, mul(st.z, sub(h, st.n)));
  }
  const Array one = scalar_like(1.0, gi, Loc::current());
  Array dh_next = zeros_like(h0), dw, dbias;
  std::vector<Array> dgi(static_cast<size_t>(L));
  for (int64_t s = L - 1; s >= 0; --s) {
    const int64_t t = reverse ? L - 1 - s : s;
    const Step& st = steps[size_t(t)];
    const Array dh = gh.defined() ? add(select(gh, 0, t), dh_next) : dh_next;
    const Array da_n = mul(mul(dh, sub(one, st.z)), sub(one, mul(st.n, st.n)));
    const Array da_r = mul(mul(da_n, st.hn), mul(st.r, sub(one, st.r)));
    const Array da_z = mul(mul(dh, sub(st.h_prev, st.n)), mul(st.z, sub(one, st.z)));
    dgi[size_t(t)] = cat({da_r, da_z, da_n}, 1);
    const Array db = cat({da_r, da_z, mul(da_n, st.r)}, 1);
    const Array dw_t = matmul(transpose(db, 0, 1), st.h_prev);
    dw = dw.defined() ? add(dw, dw_t) : dw_t;
    dbias = dbias.defined() ? add(dbias, sum(db, {0})) : sum(db, {0});
    dh_next = add(matmul(db, w_hh), mul(dh, st.z));
  }
  return {stack(dgi, 0), dh_next, dw, dbias};
}

}  // namespace

// Gradients of the GruRecurrence node (declared in rules_library.cpp). in = gi, h0, w_hh, b_hh;
// h, gates, hn its outputs and gh the gradient of h (undefined: zero).
std::vector<Array> gru_recurrence_backward(const std::vector<Array>& in, const Array& h, const Array& gates,
                                           const Array& hn, const Array& gh, bool reverse,
                                           const std::vector<bool>& needs) {
  const Loc loc = Loc::current();
  std::vector<Array> grads(4);
  if (grad_enabled()) {
    grads = gru_backward_plain(in, gh, reverse);
  } else if (gh.defined()) {
    const int64_t L = h.shape()[0], N = h.shape()[1], H = h.shape()[2];
    OpAttrs attrs{.params = RecurrenceAttrs{.reverse = reverse}};
    const DType dt = h.dtype();
    std::vector<Array> outs =
        make_arrays(Op::GruRecurrenceBackward, std::move(attrs), {gates, hn, h, in[1], in[2], gh},
                    {{Shape{L, N, 3 * H}, dt}, {Shape{L, N, 3 * H}, dt}, {Shape{N, H}, dt}}, h.device(), loc);
    grads = {outs[0], outs[2], Array(), Array()};
    if (needs[2]) grads[2] = weight_gradient(outs[1], h, in[1], reverse);
    if (needs[3]) grads[3] = sum(outs[1], {0, 1}, false, loc);
  }
  for (size_t i = 0; i < grads.size(); ++i)
    if (!needs[i]) grads[i] = Array();
  return grads;
}

namespace {

bool library_pair_available(Device device, DType dtype, int32_t forward, int32_t backward) {
  Backend* b = Backend::try_get(device.kind);
  if (!b || device.index < 0 || device.index >= b->device_count() || !is_floating(dtype)) return false;
  return b->supports(device.index, EMBER_SUPPORT_LIBRARY, forward, int32_t(dtype)) &&
         b->supports(device.index, EMBER_SUPPORT_LIBRARY, backward, int32_t(dtype));
}

}  // namespace

bool lstm_recurrence_available(Device device, DType dtype) {
  return library_pair_available(device, dtype, EMBER_LIB_LSTM_RECURRENCE, EMBER_LIB_LSTM_RECURRENCE_BACKWARD);
}
bool gru_recurrence_available(Device device, DType dtype) {
  return library_pair_available(device, dtype, EMBER_LIB_GRU_RECURRENCE, EMBER_LIB_GRU_RECURRENCE_BACKWARD);
}

}  // namespace ember
