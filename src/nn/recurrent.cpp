// Recurrent layers (include/ember/nn/recurrent.h): the one-step updates of RNN, LSTM and GRU over
// library ops (matmul, sigmoid, tanh, chunk), the cells, and the layer/direction/time loops of the
// sequence modules. The input projection x W_ih^T + b_ih is one matmul per layer and direction for
// all time steps; only the recurrent part h W_hh^T runs once per step. LSTM layers without a
// projection and GRU layers run their whole time loop as one library call (lstm_recurrence,
// gru_recurrence) where the device has it.
#include "ember/nn/recurrent.h"
#include "nn/layer_error.h"

#include <cmath>

#include "ember/autocast.h"
#include "ember/nn/dropout.h"
#include "ember/nn/init.h"
#include "ember/ops_library.h"
#include "nn/json_util.h"

namespace ember::nn {

namespace {

int64_t gate_count(RecurrentBase::Kind kind) {
  switch (kind) {
    case RecurrentBase::Kind::LSTM: return 4;
    case RecurrentBase::Kind::GRU: return 3;
    default: return 1;
  }
}

// The recurrent weights of one step (undefined arrays for absent parameters).
struct StepParams {
  Array w_hh, b_hh, w_hr;
};

// Under autocast the weight is cast before the transpose (as Linear does): autocast's cache then
// holds one low-precision copy of a recurrent weight for all time steps.
Array linear_t(const Array& x, const Array& w, const Array& b) {
  Array y = matmul(x, transpose(autocast_low(w), 0, 1));
  return b.defined() ? add(y, b) : y;
}

Array rnn_step(const Array& gi, const Array& h, const StepParams& p, RecurrentNonlinearity act) {
  Array a = add(gi, linear_t(h, p.w_hh, p.b_hh));
  return act == RecurrentNonlinearity::ReLU ? relu(a) : tanh(a);
}

LSTMState lstm_step(const Array& gi, const Array& h, const Array& c, const StepParams& p) {
  std::vector<Array> g = chunk(add(gi, linear_t(h, p.w_hh, p.b_hh)), 4, 1);  // i, f, g, o
  Array c1 = add(mul(sigmoid(g[1]), c), mul(sigmoid(g[0]), tanh(g[2])));
  Array h1 = mul(sigmoid(g[3]), tanh(c1));
  if (p.w_hr.defined()) h1 = matmul(h1, transpose(autocast_low(p.w_hr), 0, 1));
  return {h1, c1};
}

Array gru_step(const Array& gi, const Array& h, const StepParams& p) {
  std::vector<Array> a = chunk(gi, 3, 1);                              // input parts r, z, n
  std::vector<Array> b = chunk(linear_t(h, p.w_hh, p.b_hh), 3, 1);  // hidden parts (with b_hh)
  Array r = sigmoid(add(a[0], b[0]));
  Array z = sigmoid(add(a[1], b[1]));
  Array n = tanh(add(a[2], mul(r, b[2])));
  return add(n, mul(z, sub(h, n)));  // (1 - z) n + z h
}

// A state's dtype is its input's (which check_input_dtype has matched with the parameters').
void check_state_dtype(const char* what, const char* name, const Array& state, DType input_dtype) {
  if (state.dtype() != input_dtype)
    throw nn_error(fmt::format("{}: {} dtype {} does not match the input dtype {}", what, name,
                            dtype_name(state.dtype()), dtype_name(input_dtype)));
}

// U(-1/sqrt(hidden), 1/sqrt(hidden)); advances the seed for the next parameter.
Array recurrent_init(const Shape& shape, int64_t hidden, init::InitOptions& io) {
  double bound = 1.0 / std::sqrt(double(hidden));
  Array v = init::uniform(shape, -bound, bound, io);
  if (io.seed) io.seed = *io.seed + 1;
  return v;
}

const char* nonlinearity_name(RecurrentNonlinearity n) { return n == RecurrentNonlinearity::ReLU ? "relu" : "tanh"; }

RecurrentNonlinearity parse_nonlinearity(const json& j) {
  std::string s = "tanh";
  read_field(j, "nonlinearity", s);
  if (s == "tanh") return RecurrentNonlinearity::Tanh;
  if (s == "relu") return RecurrentNonlinearity::ReLU;
  throw nn_error(fmt::format("config field 'nonlinearity': expected \"tanh\" or \"relu\", got \"{}\"", s));
}

// ---- cells -----------------------------------------------------------------------------------

struct CellInput {
  Array x;
  bool unbatched = false;
};

void init_cell(const char* what, const RecurrentCellOptions& o, int64_t gates, Param<2>& w_ih, Param<2>& w_hh,
               Param<1>& b_ih, Param<1>& b_hh) {
  if (o.input_size <= 0 || o.hidden_size <= 0)
    throw nn_error(fmt::format("{}: input_size ({}) and hidden_size ({}) must be positive", what, o.input_size,
                            o.hidden_size));
  if (gates != 1 && o.nonlinearity != RecurrentNonlinearity::Tanh)
    throw nn_error(fmt::format("{}: the nonlinearity option is for RNNCell only", what));
  init::InitOptions io{.seed = o.seed, .dtype = o.dtype, .device = o.device};
  int64_t g = gates * o.hidden_size;
  w_ih = Param<2>(Tensor<2>(recurrent_init({g, o.input_size}, o.hidden_size, io)));
  w_hh = Param<2>(Tensor<2>(recurrent_init({g, o.hidden_size}, o.hidden_size, io)));
  if (o.bias) {
    b_ih = Param<1>(Tensor<1>(recurrent_init({g}, o.hidden_size, io)));
    b_hh = Param<1>(Tensor<1>(recurrent_init({g}, o.hidden_size, io)));
  }
}

// Checks x ([N, in] or [in]) and returns it as [N, in].
CellInput cell_input(const char* what, const Array& x, const RecurrentCellOptions& o, const ParamRef& weight_ih) {
  if ((x.rank() != 1 && x.rank() != 2) || x.size(-1) != o.input_size)
    throw nn_error(fmt::format("{}: expected input [N, {}] or [{}], got {}", what, o.input_size, o.input_size,
                            x.shape().str()));
  check_input_dtype(what, x, weight_ih, "weight_ih");
  return {x.rank() == 1 ? unsqueeze(x, 0) : x, x.rank() == 1};
}

// A state ([N, hidden] or [hidden] for unbatched input) as [N, hidden]; zeros when undefined.
Array cell_state(const char* what, const char* name, const Array& s, const CellInput& in, int64_t hidden) {
  int64_t n = in.x.size(0);
  if (!s.defined()) return zeros({n, hidden}, {.dtype = in.x.dtype(), .device = in.x.device()});
  Shape expect = in.unbatched ? Shape{hidden} : Shape{n, hidden};
  if (s.shape() != expect)
    throw nn_error(fmt::format("{}: expected {} of shape {}, got {}", what, name, expect.str(), s.shape().str()));
  check_state_dtype(what, name, s, in.x.dtype());
  return in.unbatched ? unsqueeze(s, 0) : s;
}

Array cell_output(const Array& h, const CellInput& in) { return in.unbatched ? squeeze(h, 0) : h; }

}  // namespace

RNNCell::RNNCell(RecurrentCellOptions opts) : options(opts) {
  init_cell("RNNCell", options, 1, weight_ih, weight_hh, bias_ih, bias_hh);
}

Array RNNCell::forward(const Array& x, const Array& h, Loc loc) {
  UserCall call("RNNCell", loc);
  CellInput in = cell_input("RNNCell", x, options, weight_ih);
  Array h0 = cell_state("RNNCell", "h", h, in, options.hidden_size);
  Array gi = linear_t(in.x, weight_ih.array(), bias_ih.defined() ? bias_ih.array() : Array());
  StepParams p{weight_hh.array(), bias_hh.defined() ? bias_hh.array() : Array(), {}};
  return cell_output(rnn_step(gi, h0, p, options.nonlinearity), in);
}

LSTMCell::LSTMCell(RecurrentCellOptions opts) : options(opts) {
  init_cell("LSTMCell", options, 4, weight_ih, weight_hh, bias_ih, bias_hh);
}

LSTMState LSTMCell::forward(const Array& x, const LSTMState& state, Loc loc) {
  UserCall call("LSTMCell", loc);
  CellInput in = cell_input("LSTMCell", x, options, weight_ih);
  Array h0 = cell_state("LSTMCell", "h", state.h, in, options.hidden_size);
  Array c0 = cell_state("LSTMCell", "c", state.c, in, options.hidden_size);
  Array gi = linear_t(in.x, weight_ih.array(), bias_ih.defined() ? bias_ih.array() : Array());
  StepParams p{weight_hh.array(), bias_hh.defined() ? bias_hh.array() : Array(), {}};
  LSTMState s = lstm_step(gi, h0, c0, p);
  return {cell_output(s.h, in), cell_output(s.c, in)};
}

GRUCell::GRUCell(RecurrentCellOptions opts) : options(opts) {
  init_cell("GRUCell", options, 3, weight_ih, weight_hh, bias_ih, bias_hh);
}

Array GRUCell::forward(const Array& x, const Array& h, Loc loc) {
  UserCall call("GRUCell", loc);
  CellInput in = cell_input("GRUCell", x, options, weight_ih);
  Array h0 = cell_state("GRUCell", "h", h, in, options.hidden_size);
  Array gi = linear_t(in.x, weight_ih.array(), bias_ih.defined() ? bias_ih.array() : Array());
  StepParams p{weight_hh.array(), bias_hh.defined() ? bias_hh.array() : Array(), {}};
  return cell_output(gru_step(gi, h0, p), in);
}

// ---- sequence modules ------------------------------------------------------------------------

namespace {
const char* kind_name(RecurrentBase::Kind kind) {
  switch (kind) {
    case RecurrentBase::Kind::LSTM: return "LSTM";
    case RecurrentBase::Kind::GRU: return "GRU";
    default: return "RNN";
  }
}
}  // namespace

RecurrentBase::RecurrentBase(RecurrentOptions opts, Kind kind) : options(opts), kind_(kind) {
  const char* what = kind_name(kind);
  const RecurrentOptions& o = options;
  if (o.input_size <= 0 || o.hidden_size <= 0 || o.num_layers <= 0)
    throw nn_error(fmt::format("{}: input_size ({}), hidden_size ({}) and num_layers ({}) must be positive", what,
                            o.input_size, o.hidden_size, o.num_layers));
  if (o.dropout < 0 || o.dropout > 1) throw nn_error(fmt::format("{}: dropout must be in [0, 1], got {}", what, o.dropout));
  if (o.proj_size != 0 && kind != Kind::LSTM)
    throw nn_error(fmt::format("{}: proj_size ({}) is for LSTM only", what, o.proj_size));
  if (o.proj_size < 0 || (o.proj_size > 0 && o.proj_size >= o.hidden_size))
    throw nn_error(fmt::format("{}: proj_size ({}) must be in [0, hidden_size ({}))", what, o.proj_size, o.hidden_size));
  if (kind != Kind::RNN && o.nonlinearity != RecurrentNonlinearity::Tanh)
    throw nn_error(fmt::format("{}: the nonlinearity option is for RNN only", what));
  int64_t g = gate_count(kind) * o.hidden_size;
  int64_t hout = o.proj_size > 0 ? o.proj_size : o.hidden_size;
  init::InitOptions io{.seed = o.seed, .dtype = o.dtype, .device = o.device};
  for (int64_t l = 0; l < o.num_layers; ++l) {
    int64_t in = l == 0 ? o.input_size : directions() * hout;
    for (int64_t d = 0; d < directions(); ++d) {
      RecurrentLayerWeights w;  // state-dict order: w_ih, w_hh, b_ih, b_hh, w_hr
      w.weight_ih = Param<2>(Tensor<2>(recurrent_init({g, in}, o.hidden_size, io)));
      w.weight_hh = Param<2>(Tensor<2>(recurrent_init({g, hout}, o.hidden_size, io)));
      if (o.bias) {
        w.bias_ih = Param<1>(Tensor<1>(recurrent_init({g}, o.hidden_size, io)));
        w.bias_hh = Param<1>(Tensor<1>(recurrent_init({g}, o.hidden_size, io)));
      }
      if (o.proj_size > 0) w.weight_hr = Param<2>(Tensor<2>(recurrent_init({o.proj_size, o.hidden_size}, o.hidden_size, io)));
      weights.push_back(w);
    }
  }
}

void RecurrentBase::visit(Visitor& v) {
  // By the weights that exist: a default-constructed module (a member assigned later) has none,
  // while its options still say one layer.
  const int64_t dirs = directions();
  for (size_t i = 0; i < weights.size(); ++i) {
    const int64_t l = int64_t(i) / dirs, d = int64_t(i) % dirs;
    RecurrentLayerWeights& w = weights[i];
    std::string suffix = "_l" + std::to_string(l) + (d == 1 ? "_reverse" : "");
    detail::visit_field(v, "weight_ih" + suffix, w.weight_ih);
    detail::visit_field(v, "weight_hh" + suffix, w.weight_hh);
    detail::visit_field(v, "bias_ih" + suffix, w.bias_ih);
    detail::visit_field(v, "bias_hh" + suffix, w.bias_hh);
    detail::visit_field(v, "weight_hr" + suffix, w.weight_hr);
  }
}

RecurrentOutput RecurrentBase::run(const Array& x, const Array& h0, const Array& c0, Loc loc) {
  const char* what = kind_name(kind_);
  UserCall call(what, loc);
  const RecurrentOptions& o = options;
  if (weights.empty()) throw nn_error(fmt::format("{}: the module was default-constructed (no options)", what));
  if ((x.rank() != 2 && x.rank() != 3) || x.size(-1) != o.input_size)
    throw nn_error(fmt::format("{}: expected input {} or unbatched [L, {}], got {}", what,
                            o.batch_first ? fmt::format("[N, L, {}]", o.input_size) : fmt::format("[L, N, {}]", o.input_size),
                            o.input_size, x.shape().str()));
  check_input_dtype(what, x, weights[0].weight_ih, "weight_ih_l0");
  if (kind_ != Kind::LSTM && c0.defined()) throw nn_error(fmt::format("{}: only LSTM takes a cell state c0", what));
  bool unbatched = x.rank() == 2;
  Array seq = unbatched ? unsqueeze(x, 1) : o.batch_first ? transpose(x, 0, 1) : x;  // [L, N, in]
  int64_t len = seq.size(0), n = seq.size(1), dirs = directions();
  if (len == 0) throw nn_error(fmt::format("{}: the input sequence is empty ({})", what, x.shape().str()));
  int64_t hout = o.proj_size > 0 ? o.proj_size : o.hidden_size;
  int64_t nstates = o.num_layers * dirs;
  // Initial states as [layers * dirs, N, size].
  auto initial = [&](const Array& s, int64_t size, const char* name) {
    if (!s.defined()) return zeros({nstates, n, size}, {.dtype = x.dtype(), .device = x.device()});
    Shape expect = unbatched ? Shape{nstates, size} : Shape{nstates, n, size};
    if (s.shape() != expect)
      throw nn_error(fmt::format("{}: expected {} of shape {}, got {}", what, name, expect.str(), s.shape().str()));
    check_state_dtype(what, name, s, x.dtype());
    return unbatched ? unsqueeze(s, 1) : s;
  };
  Array hs0 = initial(h0, hout, "h0");
  Array cs0 = kind_ == Kind::LSTM ? initial(c0, o.hidden_size, "c0") : Array();
  auto defined_or_none = [](const ParamRef& p) { return p.defined() ? p.array() : Array(); };

  // LSTM layers without a projection and GRU layers run their time loop as one library call where
  // the device has it (include/ember/ops_library.h lstm_recurrence, gru_recurrence; autocast keeps
  // the per-step ops, whose products it runs in low precision).
  const bool fused_lstm = kind_ == Kind::LSTM && o.proj_size == 0 && !autocast_dtype() &&
                          lstm_recurrence_available(x.device(), x.dtype());
  const bool fused_gru = kind_ == Kind::GRU && !autocast_dtype() && gru_recurrence_available(x.device(), x.dtype());

  std::vector<Array> hn, cn;
  Array layer_in = seq;
  for (int64_t l = 0; l < o.num_layers; ++l) {
    std::vector<Array> dir_out;
    for (int64_t d = 0; d < dirs; ++d) {
      int64_t idx = l * dirs + d;
      const RecurrentLayerWeights& w = weights[size_t(idx)];
      int64_t in = layer_in.size(2);
      Array h = select(hs0, 0, idx);
      Array c = cs0.defined() ? select(cs0, 0, idx) : Array();
      if (fused_lstm) {  // both biases in the input projection, then the whole time loop
        Array bias = defined_or_none(w.bias_ih);
        if (w.bias_hh.defined()) bias = bias.defined() ? add(bias, w.bias_hh.array()) : w.bias_hh.array();
        Array gi = reshape(linear_t(reshape(layer_in, {len * n, in}), w.weight_ih.array(), bias), {len, n, -1});
        LstmRecurrenceResult r = lstm_recurrence(gi, h, c, w.weight_hh.array(), {.reverse = d == 1});
        dir_out.push_back(r.h);
        hn.push_back(select(r.h, 0, d == 1 ? 0 : len - 1));
        cn.push_back(select(r.c, 0, d == 1 ? 0 : len - 1));
        continue;
      }
      if (fused_gru) {  // b_ih in the input projection; b_hh stays apart (r multiplies its n part)
        Array gi = reshape(linear_t(reshape(layer_in, {len * n, in}), w.weight_ih.array(), defined_or_none(w.bias_ih)),
                           {len, n, -1});
        Array b_hh = w.bias_hh.defined() ? w.bias_hh.array()
                                         : zeros({3 * o.hidden_size}, {.dtype = x.dtype(), .device = x.device()});
        Array hs = gru_recurrence(gi, h, w.weight_hh.array(), b_hh, {.reverse = d == 1});
        dir_out.push_back(hs);
        hn.push_back(select(hs, 0, d == 1 ? 0 : len - 1));
        continue;
      }
      // Input projection for all time steps at once: [L * N, in] x [in, G * H].
      Array gi = linear_t(reshape(layer_in, {len * n, in}), w.weight_ih.array(), defined_or_none(w.bias_ih));
      gi = reshape(gi, {len, n, -1});
      StepParams p{w.weight_hh.array(), defined_or_none(w.bias_hh), defined_or_none(w.weight_hr)};
      std::vector<Array> outs(static_cast<size_t>(len));
      for (int64_t s = 0; s < len; ++s) {
        int64_t t = d == 1 ? len - 1 - s : s;
        Array git = select(gi, 0, t);
        if (kind_ == Kind::LSTM) {
          LSTMState st = lstm_step(git, h, c, p);
          h = st.h;
          c = st.c;
        } else if (kind_ == Kind::GRU) {
          h = gru_step(git, h, p);
        } else {
          h = rnn_step(git, h, p, o.nonlinearity);
        }
        outs[size_t(t)] = h;
      }
      dir_out.push_back(stack(outs, 0));
      hn.push_back(h);
      if (c.defined()) cn.push_back(c);
    }
    layer_in = dirs == 2 ? cat(dir_out, 2) : dir_out[0];
    if (l + 1 < o.num_layers && o.dropout > 0 && is_training()) {
      std::optional<uint64_t> seed;
      if (o.dropout_seed) seed = *o.dropout_seed * 0x9E3779B97F4A7C15ull + dropout_calls_;
      ++dropout_calls_;
      layer_in = dropout(layer_in, o.dropout, true, seed);
    }
  }
  RecurrentOutput r;
  r.output = unbatched ? squeeze(layer_in, 1) : o.batch_first ? transpose(layer_in, 0, 1) : layer_in;
  r.h_n = stack(hn, 0);
  if (unbatched) r.h_n = squeeze(r.h_n, 1);
  if (!cn.empty()) {
    r.c_n = stack(cn, 0);
    if (unbatched) r.c_n = squeeze(r.c_n, 1);
  }
  return r;
}

// ---- JSON ------------------------------------------------------------------------------------

std::string RecurrentCellOptions::to_json() const {
  json j{{"input_size", input_size},
         {"hidden_size", hidden_size},
         {"bias", bias},
         {"nonlinearity", nonlinearity_name(nonlinearity)},
         {"dtype", std::string(dtype_name(dtype))},
         {"device", device.str()}};
  if (seed) j["seed"] = *seed;
  return j.dump();
}

RecurrentCellOptions RecurrentCellOptions::from_json(const std::string& text) {
  json j = parse_json(text, "RecurrentCellOptions");
  RecurrentCellOptions o;
  read_field(j, "input_size", o.input_size);
  read_field(j, "hidden_size", o.hidden_size);
  read_field(j, "bias", o.bias);
  o.nonlinearity = parse_nonlinearity(j);
  read_optional(j, "seed", o.seed);
  read_dtype(j, "dtype", o.dtype);
  read_device(j, "device", o.device);
  reject_unknown_keys(j, o.to_json(), "RecurrentCellOptions");
  return o;
}

std::string RecurrentOptions::to_json() const {
  json j{{"input_size", input_size},
         {"hidden_size", hidden_size},
         {"num_layers", num_layers},
         {"bias", bias},
         {"batch_first", batch_first},
         {"dropout", dropout},
         {"bidirectional", bidirectional},
         {"proj_size", proj_size},
         {"nonlinearity", nonlinearity_name(nonlinearity)},
         {"dtype", std::string(dtype_name(dtype))},
         {"device", device.str()}};
  if (seed) j["seed"] = *seed;
  if (dropout_seed) j["dropout_seed"] = *dropout_seed;
  return j.dump();
}

RecurrentOptions RecurrentOptions::from_json(const std::string& text) {
  json j = parse_json(text, "RecurrentOptions");
  RecurrentOptions o;
  read_field(j, "input_size", o.input_size);
  read_field(j, "hidden_size", o.hidden_size);
  read_field(j, "num_layers", o.num_layers);
  read_field(j, "bias", o.bias);
  read_field(j, "batch_first", o.batch_first);
  read_field(j, "dropout", o.dropout);
  read_field(j, "bidirectional", o.bidirectional);
  read_field(j, "proj_size", o.proj_size);
  o.nonlinearity = parse_nonlinearity(j);
  read_optional(j, "seed", o.seed);
  read_optional(j, "dropout_seed", o.dropout_seed);
  read_dtype(j, "dtype", o.dtype);
  read_device(j, "device", o.device);
  reject_unknown_keys(j, o.to_json(), "RecurrentOptions");
  return o;
}

}  // namespace ember::nn
