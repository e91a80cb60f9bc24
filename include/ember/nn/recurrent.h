// Recurrent layers with PyTorch's semantics, parameter names and layouts: the cells RNNCell
// (tanh or relu), LSTMCell and GRUCell (one time step), and the sequence modules RNN, LSTM (with
// optional projections, proj_size) and GRU (several layers, bidirectional, batch_first, dropout
// between layers in training). Per layer and direction, one input-projection matmul over all time
// steps, then the loop over time: for LSTM (without proj_size) and GRU one library call each way
// where the device has it (ember/ops_library.h lstm_recurrence, gru_recurrence), otherwise
// differentiable per-step ops.
//
// Gate layouts as PyTorch: LSTM rows [i; f; g; o], GRU rows [r; z; n] with
// n = tanh(W_in x + b_in + r * (W_hn h + b_hn)). Parameters are named weight_ih_l{k},
// weight_hh_l{k}, bias_ih_l{k}, bias_hh_l{k}, weight_hr_l{k} (LSTM with proj_size), with the
// suffix _reverse for the backward direction, so a PyTorch state dict loads as is. Every
// parameter starts U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)); with a seed, the k-th parameter
// (in state-dict order) uses seed + k.
//
//   nn::LSTM lstm{{.input_size = 8, .hidden_size = 16, .num_layers = 2, .batch_first = true}};
//   nn::RecurrentOutput r = lstm.forward(x);  // x [N, L, 8]: r.output [N, L, 16], r.h_n, r.c_n [2, N, 16]
//
// Every module also has typed forms and a call operator: with x a Tensor<3> (batched; Tensor<2>
// unbatched) `auto [out, h_n, c_n] = lstm(x);` gives Tensor<3>s (Tensor<2>s), and the cells take
// and give Tensor<2> (Tensor<1> unbatched): `Tensor<2> h = gru_cell(x, h);`,
// `auto [h, c] = lstm_cell(x, {h, c});`.
#pragma once

#include <optional>
#include <vector>

#include "ember/nn/module.h"

namespace ember::nn {

// The ranks of the typed forms: 3 (cells: 2) batched, 2 (cells: 1) unbatched.
template <int D>
concept RecurrentRank = D == 2 || D == 3;
template <int D>
concept RecurrentCellRank = D == 1 || D == 2;

enum class RecurrentNonlinearity { Tanh, ReLU };  // RNN and RNNCell only

// Options of the cells. `nonlinearity` applies to RNNCell (LSTMCell and GRUCell reject ReLU).
struct RecurrentCellOptions {
  int64_t input_size = 0;
  int64_t hidden_size = 0;
  bool bias = true;
  RecurrentNonlinearity nonlinearity = RecurrentNonlinearity::Tanh;
  std::optional<uint64_t> seed{};  // parameter k (weight_ih, weight_hh, bias_ih, bias_hh) uses seed + k
  DType dtype = DType::F32;
  Device device = Device::cpu();

  std::string to_json() const;
  static RecurrentCellOptions from_json(const std::string& json);
};
using RNNCellOptions = RecurrentCellOptions;
using LSTMCellOptions = RecurrentCellOptions;
using GRUCellOptions = RecurrentCellOptions;

// Options of the sequence modules. `proj_size` is LSTM only (0: none; else h has proj_size
// features, projected by weight_hr [proj_size, hidden_size]); `nonlinearity` is RNN only.
struct RecurrentOptions {
  int64_t input_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 1;
  bool bias = true;
  bool batch_first = false;  // input and output [N, L, features] instead of [L, N, features]
  double dropout = 0;        // on each layer's output but the last, in training mode only
  bool bidirectional = false;
  int64_t proj_size = 0;
  RecurrentNonlinearity nonlinearity = RecurrentNonlinearity::Tanh;
  std::optional<uint64_t> seed{};          // initialization: parameter k (state-dict order) uses seed + k
  std::optional<uint64_t> dropout_seed{};  // as nn::Dropout: call k uses stream k; unset: global sequence
  DType dtype = DType::F32;
  Device device = Device::cpu();

  std::string to_json() const;
  static RecurrentOptions from_json(const std::string& json);
};
using RNNOptions = RecurrentOptions;
using LSTMOptions = RecurrentOptions;
using GRUOptions = RecurrentOptions;

// ---- cells ---------------------------------------------------------------------------------
// Input x [N, input_size] or unbatched [input_size]; states [N, hidden_size] (or [hidden_size]).
// An undefined state means zeros. weight_ih [G * hidden, input], weight_hh [G * hidden, hidden],
// biases [G * hidden] with G = 1 (RNN), 4 (LSTM), 3 (GRU).

class RNNCell : public Module {
 public:
  RNNCell() = default;
  explicit RNNCell(RecurrentCellOptions opts);
  Param<2> weight_ih, weight_hh;
  Param<1> bias_ih, bias_hh;  // absent when options.bias is false
  RecurrentCellOptions options;
  EMBER_MODULE(weight_ih, weight_hh, bias_ih, bias_hh)

  // h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh).
  Array forward(const Array& x, const Array& h = {}, Loc loc = Loc::current());
  template <int D>
    requires RecurrentCellRank<D>
  Tensor<D> forward(const Tensor<D>& x, const Tensor<D>& h = {}, Loc loc = Loc::current()) {
    return Tensor<D>(forward(x.array(), h.array(), loc));
  }
  template <int D>
    requires RecurrentCellRank<D>
  Tensor<D> operator()(const Tensor<D>& x, const Tensor<D>& h = {}, Loc loc = Loc::current()) {
    return forward(x, h, loc);
  }
  std::string type_name() const override { return "RNNCell"; }
  std::string config() const override { return options.to_json(); }
};

struct LSTMState {
  Array h{}, c{};
};
// The typed state of LSTMCell (undefined tensors mean zeros).
template <int D>
struct LSTMCellState {
  Tensor<D> h{}, c{};
};

class LSTMCell : public Module {
 public:
  LSTMCell() = default;
  explicit LSTMCell(RecurrentCellOptions opts);
  Param<2> weight_ih, weight_hh;
  Param<1> bias_ih, bias_hh;
  RecurrentCellOptions options;
  EMBER_MODULE(weight_ih, weight_hh, bias_ih, bias_hh)

  // c' = sigmoid(f) c + sigmoid(i) tanh(g), h' = sigmoid(o) tanh(c').
  LSTMState forward(const Array& x, const LSTMState& state = {}, Loc loc = Loc::current());
  template <int D>
    requires RecurrentCellRank<D>
  LSTMCellState<D> forward(const Tensor<D>& x, const LSTMCellState<D>& state = {}, Loc loc = Loc::current()) {
    LSTMState next = forward(x.array(), LSTMState{state.h.array(), state.c.array()}, loc);
    return {Tensor<D>(next.h), Tensor<D>(next.c)};
  }
  template <int D>
    requires RecurrentCellRank<D>
  LSTMCellState<D> operator()(const Tensor<D>& x, const LSTMCellState<D>& state = {}, Loc loc = Loc::current()) {
    return forward(x, state, loc);
  }
  std::string type_name() const override { return "LSTMCell"; }
  std::string config() const override { return options.to_json(); }
};

class GRUCell : public Module {
 public:
  GRUCell() = default;
  explicit GRUCell(RecurrentCellOptions opts);
  Param<2> weight_ih, weight_hh;
  Param<1> bias_ih, bias_hh;
  RecurrentCellOptions options;
  EMBER_MODULE(weight_ih, weight_hh, bias_ih, bias_hh)

  // h' = (1 - z) n + z h.
  Array forward(const Array& x, const Array& h = {}, Loc loc = Loc::current());
  template <int D>
    requires RecurrentCellRank<D>
  Tensor<D> forward(const Tensor<D>& x, const Tensor<D>& h = {}, Loc loc = Loc::current()) {
    return Tensor<D>(forward(x.array(), h.array(), loc));
  }
  template <int D>
    requires RecurrentCellRank<D>
  Tensor<D> operator()(const Tensor<D>& x, const Tensor<D>& h = {}, Loc loc = Loc::current()) {
    return forward(x, h, loc);
  }
  std::string type_name() const override { return "GRUCell"; }
  std::string config() const override { return options.to_json(); }
};

// ---- sequence modules ------------------------------------------------------------------------

// output: [L, N, D * H_out] ([N, L, ...] with batch_first, [L, D * H_out] unbatched), D = 2 when
// bidirectional, H_out = proj_size or hidden_size. h_n: [num_layers * D, N, H_out]; c_n (LSTM
// only, else undefined): [num_layers * D, N, hidden_size]. Unbatched input gives states without N.
struct RecurrentOutput {
  Array output{}, h_n{}, c_n{};
};
// The typed result: all three have the input's rank (c_n undefined but for LSTM).
template <int D>
struct RecurrentResult {
  Tensor<D> output{}, h_n{}, c_n{};
};

// The weights of one layer and direction (weight_hr only for an LSTM with proj_size).
struct RecurrentLayerWeights {
  Param<2> weight_ih{}, weight_hh{}, weight_hr{};
  Param<1> bias_ih{}, bias_hh{};
};

// The shared machinery of RNN, LSTM and GRU (use those).
class RecurrentBase : public Module {
 public:
  enum class Kind { RNN, LSTM, GRU };
  RecurrentOptions options;
  std::vector<RecurrentLayerWeights> weights;  // index layer * directions + direction

  void visit(Visitor& v) override;
  std::string config() const override { return options.to_json(); }
  int64_t directions() const { return options.bidirectional ? 2 : 1; }

 protected:
  RecurrentBase() = default;
  RecurrentBase(RecurrentOptions opts, Kind kind);
  // x: see RecurrentOutput; h0 [num_layers * D, N, H_out], c0 (LSTM) [num_layers * D, N, hidden];
  // undefined states are zeros.
  RecurrentOutput run(const Array& x, const Array& h0, const Array& c0, Loc loc);
  // run() for the typed forms of RNN, LSTM and GRU: the tensors' arrays in (undefined tensors:
  // zero states), results of the input's rank out.
  template <int D>
    requires RecurrentRank<D>
  RecurrentResult<D> run_typed(const Tensor<D>& x, const Tensor<D>& h0, const Tensor<D>& c0, Loc loc) {
    const RecurrentOutput r = run(x.array(), h0.array(), c0.array(), loc);
    return {Tensor<D>(r.output), Tensor<D>(r.h_n), Tensor<D>(r.c_n)};
  }
  Kind kind_ = Kind::RNN;
  uint64_t dropout_calls_ = 0;
};

class RNN : public RecurrentBase {
 public:
  RNN() = default;
  explicit RNN(RecurrentOptions opts) : RecurrentBase(opts, Kind::RNN) {}
  RecurrentOutput forward(const Array& x, const Array& h0 = {}, Loc loc = Loc::current()) {
    return run(x, h0, {}, loc);
  }
  RecurrentOutput operator()(const Array& x, const Array& h0 = {}, Loc loc = Loc::current()) {
    return run(x, h0, {}, loc);
  }
  template <int D>
    requires RecurrentRank<D>
  RecurrentResult<D> forward(const Tensor<D>& x, const Tensor<D>& h0 = {}, Loc loc = Loc::current()) {
    return run_typed(x, h0, {}, loc);
  }
  template <int D>
    requires RecurrentRank<D>
  RecurrentResult<D> operator()(const Tensor<D>& x, const Tensor<D>& h0 = {}, Loc loc = Loc::current()) {
    return forward(x, h0, loc);
  }
  std::string type_name() const override { return "RNN"; }
};

class LSTM : public RecurrentBase {
 public:
  LSTM() = default;
  explicit LSTM(RecurrentOptions opts) : RecurrentBase(opts, Kind::LSTM) {}
  RecurrentOutput forward(const Array& x, const Array& h0 = {}, const Array& c0 = {}, Loc loc = Loc::current()) {
    return run(x, h0, c0, loc);
  }
  RecurrentOutput operator()(const Array& x, const Array& h0 = {}, const Array& c0 = {},
                             Loc loc = Loc::current()) {
    return run(x, h0, c0, loc);
  }
  template <int D>
    requires RecurrentRank<D>
  RecurrentResult<D> forward(const Tensor<D>& x, const Tensor<D>& h0 = {}, const Tensor<D>& c0 = {},
                                        Loc loc = Loc::current()) {
    return run_typed(x, h0, c0, loc);
  }
  template <int D>
    requires RecurrentRank<D>
  RecurrentResult<D> operator()(const Tensor<D>& x, const Tensor<D>& h0 = {}, const Tensor<D>& c0 = {},
                                        Loc loc = Loc::current()) {
    return forward(x, h0, c0, loc);
  }
  std::string type_name() const override { return "LSTM"; }
};

class GRU : public RecurrentBase {
 public:
  GRU() = default;
  explicit GRU(RecurrentOptions opts) : RecurrentBase(opts, Kind::GRU) {}
  RecurrentOutput forward(const Array& x, const Array& h0 = {}, Loc loc = Loc::current()) {
    return run(x, h0, {}, loc);
  }
  RecurrentOutput operator()(const Array& x, const Array& h0 = {}, Loc loc = Loc::current()) {
    return run(x, h0, {}, loc);
  }
  template <int D>
    requires RecurrentRank<D>
  RecurrentResult<D> forward(const Tensor<D>& x, const Tensor<D>& h0 = {}, Loc loc = Loc::current()) {
    return run_typed(x, h0, {}, loc);
  }
  template <int D>
    requires RecurrentRank<D>
  RecurrentResult<D> operator()(const Tensor<D>& x, const Tensor<D>& h0 = {}, Loc loc = Loc::current()) {
    return forward(x, h0, loc);
  }
  std::string type_name() const override { return "GRU"; }
};

}  // namespace ember::nn
