#!/usr/bin/env python3
"""Writes tests/nn/data/nn_attention_reference.txt: PyTorch's (float64) values and gradients for
attention and transformers (tests/nn/attention_test.cpp, tests/nn/transformer_test.cpp):
scaled dot-product attention, MultiheadAttention, TransformerEncoderLayer / DecoderLayer and their
stacks, sinusoidal and rotary position encodings.

Conventions (refutil.py): inputs are det(shape, a, b) (element i = sin(a * i + b)), which the C++
tests rebuild. Torch 1.13 has no F.scaled_dot_product_attention: its reference is the formula
softmax(q k^T * scale + mask) v written with torch ops below. Modules keep PyTorch's own
initialization (torch.manual_seed); their parameters are written as
  <case>.p.<name> values, <case>.s.<name> shape
which the C++ tests load through load_state_dict (so the names and layouts are PyTorch's), and
their gradients as <case>.g.<name>. Module losses: sum(y * det(y.shape, 0.29, 0.4)), plus
sum(w * det(w.shape, 0.31, 0.2)) for returned attention weights w.
Run with Debian's python3-torch:  /usr/bin/python3 tools/reference/nn_attention_reference.py
"""
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

from refutil import det, emit, lines, value_and_grads  # noqa: E402 (sets float64)
ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
torch.manual_seed(0)


def sdpa(q, k, v, attn_mask=None, is_causal=False, scale=None):
    """The formula of torch.nn.functional.scaled_dot_product_attention (no dropout)."""
    L, S = q.shape[-2], k.shape[-2]
    s = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ k.transpose(-2, -1) * s
    if is_causal:
        attn_mask = torch.ones(L, S, dtype=torch.bool).tril()
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    return torch.softmax(scores, dim=-1) @ v


def bool_mask(shape, a, b):
    """det(shape, a, b) > -0.3, with the first key always allowed (no fully masked row)."""
    m = det(shape, a, b) > -0.3
    m[..., 0] = True
    return m


def module_case(name, module, fn, inputs):
    """Emits the module's parameters (values, shapes), the output(s) and every gradient. Each
    parameter is first moved off PyTorch's initial value by 0.1 * det(...) (so zero biases and
    unit norm weights are exercised too)."""
    with torch.no_grad():
        for i, (pname, p) in enumerate(module.named_parameters()):
            p.add_(0.1 * det(p.shape, 0.3 + 0.07 * i, 0.2))
    for pname, p in module.named_parameters():
        emit(name + ".p." + pname, p)
        emit(name + ".s." + pname, list(p.shape))
    ins = [t.clone().requires_grad_() for t in inputs]
    module.zero_grad()
    out = fn(*ins)
    y, w = out if isinstance(out, tuple) else (out, None)
    loss = (y * det(y.shape, 0.29, 0.4)).sum()
    emit(name + ".y", y)
    if w is not None:
        loss = loss + (w * det(w.shape, 0.31, 0.2)).sum()
        emit(name + ".w", w)
    loss.backward()
    for i, t in enumerate(ins):
        emit(name + ".d" + str(i), t.grad)
    for pname, p in module.named_parameters():
        emit(name + ".g." + pname, p.grad)


# ---- scaled dot-product attention --------------------------------------------------------------
q = det((2, 3, 4, 5), 0.37, 0.1)
k = det((2, 3, 6, 5), 0.53, 0.7)
v = det((2, 3, 6, 4), 0.71, 0.2)
value_and_grads("sdpa.plain", lambda q, k, v: sdpa(q, k, v), [q, k, v])
value_and_grads("sdpa.scale", lambda q, k, v: sdpa(q, k, v, scale=0.3), [q, k, v])
value_and_grads("sdpa.causal", lambda q, k, v: sdpa(q, k, v, is_causal=True), [q, k, v])
value_and_grads("sdpa.bool", lambda q, k, v: sdpa(q, k, v, attn_mask=bool_mask((4, 6), 0.9, 0.3)), [q, k, v])
value_and_grads("sdpa.bool_bcast", lambda q, k, v: sdpa(q, k, v, attn_mask=bool_mask((2, 1, 1, 6), 0.8, 0.5)),
                [q, k, v])
value_and_grads("sdpa.float", lambda q, k, v, m: sdpa(q, k, v, attn_mask=m), [q, k, v, det((2, 1, 4, 6), 0.43, 0.9) * 2])
value_and_grads("sdpa.rank3", lambda q, k, v: sdpa(q, k, v, is_causal=True, scale=0.7),
                [det((3, 5, 4), 0.37, 0.1), det((3, 5, 4), 0.53, 0.7), det((3, 5, 2), 0.71, 0.2)])

# ---- MultiheadAttention ------------------------------------------------------------------------
qm = det((4, 2, 8), 0.37, 0.1)  # [L, N, E]
km = det((5, 2, 8), 0.53, 0.7)  # [S, N, E]
vm = det((5, 2, 8), 0.71, 0.2)


def mha_fn(m, **kw):
    return lambda q, k, v: m(q, k, v, **kw)


m = nn.MultiheadAttention(8, 2).eval()
module_case("mha.basic", m, mha_fn(m), [qm, km, vm])
m = nn.MultiheadAttention(8, 2, dropout=0.5).eval()  # eval: no dropout
module_case("mha.dropout_eval", m, mha_fn(m), [qm, km, vm])
m = nn.MultiheadAttention(8, 4, bias=False).eval()
module_case("mha.nobias", m, mha_fn(m, average_attn_weights=False), [qm, km, vm])
m = nn.MultiheadAttention(8, 2, kdim=6, vdim=3, batch_first=True).eval()
module_case("mha.kvdim", m, mha_fn(m, average_attn_weights=False),
            [det((2, 4, 8), 0.37, 0.1), det((2, 5, 6), 0.53, 0.7), det((2, 5, 3), 0.71, 0.2)])
m = nn.MultiheadAttention(8, 2).eval()
module_case("mha.bool_masks", m,
            mha_fn(m, attn_mask=~bool_mask((4, 5), 0.9, 0.3), key_padding_mask=torch.tensor(
                [[False, False, False, True, True], [False, True, False, False, False]])),
            [qm, km, vm])
module_case("mha.float3d_masks", m,
            mha_fn(m, attn_mask=det((4, 4, 5), 0.61, 0.2) * 2, key_padding_mask=torch.tensor(
                [[False, False, False, False, True], [False, False, True, False, False]])),
            [qm, km, vm])
module_case("mha.float_kpm", m, mha_fn(m, key_padding_mask=det((2, 5), 0.77, 0.4) * 3), [qm, km, vm])
module_case("mha.self", m, lambda x: m(x, x, x), [qm])
module_case("mha.no_weights", m, mha_fn(m, need_weights=False), [qm, km, vm])
m = nn.MultiheadAttention(8, 2).eval()
module_case("mha.unbatched", m, mha_fn(m, attn_mask=~bool_mask((2, 4, 5), 0.47, 0.8)),
            [det((4, 8), 0.37, 0.1), det((5, 8), 0.53, 0.7), det((5, 8), 0.71, 0.2)])

# ---- transformer layers and stacks -------------------------------------------------------------
def causal(n):
    return torch.triu(torch.full((n, n), float("-inf")), diagonal=1)


src = det((5, 2, 8), 0.37, 0.1)  # [L, N, E]
src_b = det((2, 5, 8), 0.37, 0.1)  # [N, L, E]
kpm5 = torch.tensor([[False, False, False, False, True], [False, False, True, False, False]])

layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16).eval()
module_case("enc.post_relu", layer, lambda x: layer(x, src_mask=causal(5), src_key_padding_mask=kpm5), [src])
layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, activation="gelu", batch_first=True,
                                   norm_first=True, layer_norm_eps=1e-3).eval()
module_case("enc.pre_gelu", layer, lambda x: layer(x), [src_b])
layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, activation="gelu").eval()
module_case("enc.post_gelu_boolmask", layer, lambda x: layer(x, src_mask=~bool_mask((5, 5), 0.9, 0.3)), [src])
# SwiGLU feed-forward (not in torch): linear1 8 -> 2 * 6, silu(first half) * second half, linear2 6 -> 8.
layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=12, activation=lambda t: F.silu(t[..., :6]) * t[..., 6:],
                                   batch_first=True, norm_first=True)
layer.linear2 = nn.Linear(6, 8)
layer.eval()
module_case("enc.pre_swiglu", layer, lambda x: layer(x, src_key_padding_mask=kpm5), [src_b])

tgt = det((4, 2, 8), 0.53, 0.7)
mem = det((5, 2, 8), 0.71, 0.2)
layer = nn.TransformerDecoderLayer(8, 2, dim_feedforward=16).eval()
module_case("dec.post_relu", layer,
            lambda t, m: layer(t, m, tgt_mask=causal(4), memory_key_padding_mask=kpm5), [tgt, mem])
layer = nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, activation="gelu", batch_first=True,
                                   norm_first=True).eval()
module_case("dec.pre_gelu", layer,
            lambda t, m: layer(t, m, memory_mask=det((4, 5), 0.61, 0.2) * 2,
                               tgt_key_padding_mask=torch.tensor([[False, False, False, True], [False] * 4])),
            [tgt.transpose(0, 1).contiguous(), mem.transpose(0, 1).contiguous()])

enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, batch_first=True, norm_first=True),
                            num_layers=2, norm=nn.LayerNorm(8)).eval()
module_case("enc.stack", enc, lambda x: enc(x, mask=causal(5)), [src_b])
dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, dim_feedforward=16), num_layers=2).eval()
module_case("dec.stack", dec, lambda t, m: dec(t, m, tgt_mask=causal(4), memory_key_padding_mask=kpm5), [tgt, mem])

# ---- positional encodings ----------------------------------------------------------------------
def sinusoid_table(n, d):
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    j = torch.arange(d)
    angle = pos / torch.pow(10000.0, (j - j % 2).to(torch.float64) / d)
    return torch.where(j % 2 == 0, torch.sin(angle), torch.cos(angle))


emit("pe.table", sinusoid_table(7, 5))
value_and_grads("pe.batch_first", lambda x: x + sinusoid_table(5, 6), [det((2, 5, 6), 0.37, 0.1)])
value_and_grads("pe.seq_first", lambda x: x + sinusoid_table(5, 6)[:, None, :], [det((5, 2, 6), 0.37, 0.1)])


def rotary(x, pos, base, interleaved):
    d = x.shape[-1]
    inv = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = pos.to(torch.float64)[:, None] * inv[None, :]
    c, s = torch.cos(ang), torch.sin(ang)
    if interleaved:
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).flatten(-2)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1)


xr = det((2, 3, 5, 6), 0.37, 0.1)
value_and_grads("rope.interleaved", lambda x: rotary(x, torch.arange(3, 8), 10000.0, True), [xr])
value_and_grads("rope.half", lambda x: rotary(x, torch.arange(3, 8), 10000.0, False), [xr])
value_and_grads("rope.positions", lambda x: rotary(x, torch.tensor([0, 2, 4, 7, 1]), 500.0, True), [xr])

# ---- write -------------------------------------------------------------------------------------
out = os.path.join(ROOT, "tests", "nn", "data", "nn_attention_reference.txt")
with open(out, "w") as f:
    f.write("# Generated by tools/reference/nn_attention_reference.py (PyTorch " + torch.__version__ + ", float64)\n")
    f.write("\n".join(lines) + "\n")
print("wrote", out, len(lines), "entries")
