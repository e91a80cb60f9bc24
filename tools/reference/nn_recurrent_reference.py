#!/usr/bin/env python3
"""Writes tests/nn/data/nn_recurrent_reference.txt: PyTorch's (float64) values and gradients for the
recurrent layers (RNNCell tanh/relu, LSTMCell, GRUCell; RNN, LSTM incl. proj_size, GRU with several
layers, both directions, batch_first, initial states, unbatched input).

Conventions as nn_reference.py: inputs are det(shape, a, b) (element i = sin(a * i + b)), which the
C++ tests rebuild. Parameter k of a module, in named_parameters() order (PyTorch's state-dict order:
per layer, per direction: weight_ih, weight_hh, bias_ih, bias_hh, weight_hr), is set to
det(shape, 0.3 + 0.05 k, 0.1 + 0.2 k) * 0.6. The differentiated loss is
sum(out * det(out.shape, 0.29, 0.4)) + sum(h_n * det(h_n.shape, 0.31, 0.2))
[+ sum(c_n * det(c_n.shape, 0.23, 0.5))]. Emitted per case: .y (output), .h, .c (final states),
.dx, .dh0, .dc0 (gradients of the input and the initial states), .grad.<parameter name>, .nparams.
Run with Debian's python3-torch:  /usr/bin/python3 tools/reference/nn_recurrent_reference.py
"""
import os

import torch
import torch.nn as nn

from refutil import det, emit, lines  # noqa: E402 (sets float64)
ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))


def set_weights(m):
    with torch.no_grad():
        for k, (_, p) in enumerate(m.named_parameters()):
            p.copy_(det(p.shape, 0.3 + 0.05 * k, 0.1 + 0.2 * k) * 0.6)


def emit_grads(prefix, m, leaves):
    for name, t in leaves:
        if t is not None:
            emit(prefix + ".d" + name, t.grad)
    n = 0
    for name, p in m.named_parameters():
        emit(prefix + ".grad." + name, p.grad)
        n += 1
    emit(prefix + ".nparams", float(n))


def leaf(t):
    return None if t is None else t.clone().requires_grad_()


# ---- cells: x [N, in], states [N, hidden] ------------------------------------------------------
def cell_case(prefix, cell, n=3, inp=3, hidden=4, lstm=False):
    set_weights(cell)
    x = leaf(det((n, inp), 0.37, 0.1))
    h = leaf(det((n, hidden), 0.43, 0.7) * 0.5)
    if lstm:
        c = leaf(det((n, hidden), 0.51, 0.3))
        h1, c1 = cell(x, (h, c))
        loss = (h1 * det(h1.shape, 0.31, 0.2)).sum() + (c1 * det(c1.shape, 0.23, 0.5)).sum()
        emit(prefix + ".h", h1)
        emit(prefix + ".c", c1)
    else:
        c = None
        h1 = cell(x, h)
        loss = (h1 * det(h1.shape, 0.31, 0.2)).sum()
        emit(prefix + ".h", h1)
    loss.backward()
    emit_grads(prefix, cell, [("x", x), ("h0", h), ("c0", c)])


cell_case("lstmcell", nn.LSTMCell(3, 4), lstm=True)
cell_case("grucell", nn.GRUCell(3, 4))
cell_case("rnncell_tanh", nn.RNNCell(3, 4))
cell_case("rnncell_relu", nn.RNNCell(3, 4, nonlinearity="relu"))
cell_case("grucell_nobias", nn.GRUCell(3, 4, bias=False))


# ---- sequence modules --------------------------------------------------------------------------
def seq_case(prefix, m, xshape, with_h0=True, lstm=False):
    """xshape as the module expects it; initial states det(...) when with_h0."""
    set_weights(m)
    x = leaf(det(xshape, 0.37, 0.1))
    dirs = 2 if m.bidirectional else 1
    unbatched = len(xshape) == 2
    n = 1 if unbatched else (xshape[0] if m.batch_first else xshape[1])
    hsize = m.proj_size if getattr(m, "proj_size", 0) > 0 else m.hidden_size
    sshape = lambda size: (m.num_layers * dirs, size) if unbatched else (m.num_layers * dirs, n, size)  # noqa: E731
    h0 = leaf(det(sshape(hsize), 0.43, 0.7) * 0.5) if with_h0 else None
    c0 = leaf(det(sshape(m.hidden_size), 0.51, 0.3)) if (with_h0 and lstm) else None
    if lstm:
        out, (hn, cn) = m(x, (h0, c0)) if with_h0 else m(x)
    else:
        out, hn = m(x, h0) if with_h0 else m(x)
        cn = None
    loss = (out * det(out.shape, 0.29, 0.4)).sum() + (hn * det(hn.shape, 0.31, 0.2)).sum()
    if cn is not None:
        loss = loss + (cn * det(cn.shape, 0.23, 0.5)).sum()
    loss.backward()
    emit(prefix + ".y", out)
    emit(prefix + ".h", hn)
    if cn is not None:
        emit(prefix + ".c", cn)
    emit_grads(prefix, m, [("x", x), ("h0", h0), ("c0", c0)])


# 2-layer bidirectional batch_first LSTM and GRU with initial states: N = 2, L = 5, in = 3, H = 4.
seq_case("lstm_bi", nn.LSTM(3, 4, num_layers=2, batch_first=True, bidirectional=True), (2, 5, 3), lstm=True)
seq_case("gru_bi", nn.GRU(3, 4, num_layers=2, batch_first=True, bidirectional=True), (2, 5, 3))
# RNN relu, 2 layers, no bias, sequence-first, zero initial state.
seq_case("rnn_relu", nn.RNN(3, 4, num_layers=2, nonlinearity="relu", bias=False), (6, 2, 3), with_h0=False)
# RNN tanh, 1 layer, bidirectional, with h0.
seq_case("rnn_tanh_bi", nn.RNN(3, 4, bidirectional=True), (4, 3, 3))
# LSTM with projections: 2 layers, bidirectional, proj_size 2.
seq_case("lstm_proj", nn.LSTM(3, 4, num_layers=2, bidirectional=True, proj_size=2), (4, 2, 3), lstm=True)
# Unbatched [L, in] input with states [layers * dirs, H].
seq_case("lstm_unbatched", nn.LSTM(3, 4, num_layers=1), (5, 3), lstm=True)
seq_case("gru_unbatched", nn.GRU(3, 4, num_layers=2, bidirectional=True), (5, 3))

path = os.path.join(ROOT, "tests", "nn", "data", "nn_recurrent_reference.txt")
with open(path, "w") as f:
    f.write("# generated by tools/reference/nn_recurrent_reference.py with torch " + torch.__version__ + " (float64)\n")
    f.write("\n".join(lines) + "\n")
print("wrote", len(lines), "lines to", path)
