// Backward rules of the library-backed ops (op_table/ops_library.def): convolution, pooling, sorting,
// scans, fused attention and the LSTM and GRU recurrences. Each is written with front-end ops,
// usually the op's own backward library call, so gradients are lazy and themselves
// differentiable (conv's backward ops have rules here too). sort / topk / cummax / cummin need no
// rule: their values are gathered by the index op, and gather's rule scatters the gradient back
// to the chosen positions.
#include <fmt/format.h>

#include "autograd/grad_math.h"
#include "autograd/grad_node.h"
#include "ops/make_array.h"

namespace ember {
// Suffix sums along dim (src/ops/library_ops.cpp): the gradient of cumsum.
Array cumsum_reverse(const Array& x, int dim, Loc loc = Loc::current());
// The gradients of fused attention's inputs (src/ops/fused_attention.cpp).
std::vector<Array> fused_attention_backward(const std::vector<Array>& in, const Array& o, const Array& lse,
                                            const Array& go, const Array& glse, double scale, bool causal,
                                            const std::vector<bool>& needs);
// The gradients of the LSTM recurrence's inputs gi, h0, c0, w_hh (src/ops/recurrence.cpp).
std::vector<Array> lstm_recurrence_backward(const std::vector<Array>& in, const Array& h, const Array& c,
                                            const Array& gates, const Array& gh, const Array& gc, bool reverse,
                                            const std::vector<bool>& needs);
// The gradients of the GRU recurrence's inputs gi, h0, w_hh, b_hh (src/ops/recurrence.cpp).
std::vector<Array> gru_recurrence_backward(const std::vector<Array>& in, const Array& h, const Array& gates,
                                           const Array& hn, const Array& gh, bool reverse,
                                           const std::vector<bool>& needs);
}  // namespace ember

namespace ember::autograd {

using namespace math;  // NOLINT: operators for the rule formulas

namespace {

Array saved(GradNode& node, size_t k) { return k < node.saved_inputs.size() ? node.saved_inputs[k] : Array(); }

}  // namespace

std::vector<Array> library_rule(GradNode& node, const Array& g, const std::vector<Array>& extra_grads) {
  const OpAttrs& a = node.attrs;
  const auto& in = node.inputs;
  const Array x = saved(node, 0), y = saved(node, 1);
  switch (node.op) {
    // y = conv(x, w) = A_w x: dx = A_w^T dy (backward data), dw = backward weights, db = sum.
    case Op::Conv2d: {
      const Conv2dOptions o = a.get<Conv2dOptions>();
      std::vector<Array> r{in[0].fn ? conv2d_backward_data(g, y, in[0].shape, o) : Array(),
                           in[1].fn ? conv2d_backward_weights(x, g, in[1].shape, o) : Array()};
      if (in.size() == 3) r.push_back(in[2].fn ? sum(g, {0, 2, 3}) : Array());
      return r;
    }
    // dx = A_w^T dy is bilinear in (dy, w): <G, A_w^T dy> = <conv(G, w), dy>.
    case Op::Conv2dBackwardData: {
      const Conv2dOptions o = a.get<Conv2dOptions>();
      return {in[0].fn ? conv2d(g, y, o) : Array(),
              in[1].fn ? conv2d_backward_weights(g, x, in[1].shape, o) : Array()};
    }
    // dw = BW(x, dy) with <G, BW(x, dy)> = <conv(x, G), dy>.
    case Op::Conv2dBackwardWeights: {
      const Conv2dOptions o = a.get<Conv2dOptions>();
      return {in[0].fn ? conv2d_backward_data(y, g, in[0].shape, o) : Array(), in[1].fn ? conv2d(x, g, o) : Array()};
    }

    // Max pooling: the gradient goes to the first maximum of each window (one library call that
    // finds it again, instead of materializing indices and scattering).
    case Op::MaxPool2d: return {max_pool2d_backward(g, x, a.get<Pool2dOptions>())};
    // (Its indices output is i64: no gradient reaches it.)
    case Op::MaxPool2dWithIndices: return {max_pool2d_backward(g, x, a.get<Pool2dOptions>())};
    // dx = S_x dy is linear in dy, with S_x the scatter to each window's maximum: its adjoint
    // gathers G at those positions. Piecewise constant in x: a zero gradient there.
    case Op::MaxPool2dBackward: {
      const Shape& xs = in[1].shape;
      const Shape& ys = in[0].shape;
      Array dy;
      if (in[0].fn) {
        const Shape flat_x{xs[0], xs[1], xs[2] * xs[3]}, flat_y{ys[0], ys[1], ys[2] * ys[3]};
        Array idx = reshape(max_pool2d_indices(y, a.get<Pool2dOptions>()), flat_y);
        dy = reshape(gather(reshape(g, flat_x), 2, idx), ys);
      }
      return {dy, in[1].fn ? zeros(xs, {g.dtype(), g.device()}) : Array()};
    }
    // Average pooling is linear: its gradient is its adjoint, and the adjoint's gradient is it.
    case Op::AvgPool2d: return {avg_pool2d_backward(g, in[0].shape, a.get<Pool2dOptions>())};
    case Op::AvgPool2dBackward: return {avg_pool2d(g, a.get<Pool2dOptions>())};

    // Scans: out_i = sum_{j <= i} x_j, so dx_j = sum_{i >= j} g_i (a reverse cumsum), and back.
    case Op::Cumsum: {
      const ScanAttrs& s = a.get<ScanAttrs>();
      return {s.reverse ? cumsum(g, int(s.dim)) : cumsum_reverse(g, int(s.dim))};
    }
    // out_i = prod_{j <= i} x_j: dx_j = sum_{i >= j} g_i out_i / x_j. Exact for inputs without
    // zeros (a zero gives inf/NaN, as the formula divides by it).
    case Op::Cumprod: return {cumsum_reverse(g * node.output(), int(a.get<ScanAttrs>().dim)) / x};

    // Fused attention (outputs o and lse) recomputes the probabilities from the saved lse.
    case Op::FusedAttention: {
      std::vector<bool> needs;
      for (const auto& e : in) needs.push_back(e.fn != nullptr);
      const AttentionAttrs& att = a.get<AttentionAttrs>();
      const Array o = node.output();
      return fused_attention_backward(node.saved_inputs, o, output_of(o, 1), g, extra_grads.at(0), att.scale,
                                      att.causal, needs);
    }

    // The LSTM recurrence (outputs h, c, gates) runs backwards through time from the saved gates.
    // The gates are internal (the front end does not return them), so no gradient reaches them.
    case Op::LstmRecurrence: {
      std::vector<bool> needs;
      for (const auto& e : in) needs.push_back(e.fn != nullptr);
      const Array h = node.output();
      return lstm_recurrence_backward(node.saved_inputs, h, output_of(h, 1), output_of(h, 2), g, extra_grads.at(0),
                                      a.get<RecurrenceAttrs>().reverse, needs);
    }
    // The GRU recurrence (outputs h, gates, hn): the same, with only h returned to users.
    case Op::GruRecurrence: {
      std::vector<bool> needs;
      for (const auto& e : in) needs.push_back(e.fn != nullptr);
      const Array h = node.output();
      return gru_recurrence_backward(node.saved_inputs, h, output_of(h, 1), output_of(h, 2), g,
                                     a.get<RecurrenceAttrs>().reverse, needs);
    }

    // Sums of src's rows at the index (index_add): each row's gradient is g's row at its index.
    case Op::IndexAdd: return {index_select(g, int(a.get<AxisAttrs>().dim), y), Array()};

    default:
      throw Error(fmt::format("backward: no gradient rule for op {} (created at {})", op_name(node.op),
                              format_location(node.loc)));
  }
}

}  // namespace ember::autograd
