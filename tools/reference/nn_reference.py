#!/usr/bin/env python3
"""Writes the reference values of the neural-network tests, computed by PyTorch in float64:

  tests/nn/data/nn_reference.txt       layers, activations, norms, losses, optimizers, schedulers
  tests/io/data/torch_mlp.safetensors  a PyTorch model's state dict (torch names, f32)
  tests/io/data/torch_dtypes.safetensors  one tensor of every dtype Ember reads

Inputs and weights are deterministic formulas (sin of the element index) that the C++ tests
rebuild (tests/nn/nn_test_util.h), so the files hold only PyTorch's results. Run with Debian's
python3-torch:  /usr/bin/python3 tools/reference/nn_reference.py
PyTorch is used only to produce these files; it is not a test dependency. The safetensors files
are written by hand (8-byte little-endian header length, JSON header, raw data), so the
`safetensors` package is not needed either.
"""
import json
import math
import os
import struct

import torch
import torch.nn as nn
import torch.nn.functional as F

from refutil import det, emit, lines, mlp_trajectory, value_and_grads  # noqa: E402 (sets float64)
ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))


# ---- Linear ------------------------------------------------------------------------------------
x = det((4, 5), 0.37, 0.1)
W = det((3, 5), 0.71, 0.3)
b = det((3,), 1.3, 0.2)
value_and_grads("linear", lambda x, W, b: F.linear(x, W, b), [x, W, b])
x3 = det((2, 3, 5), 0.43, 0.2)
value_and_grads("linear3d", lambda x, W: F.linear(x, W), [x3, W])

# ---- activations -------------------------------------------------------------------------------
xa = det((3, 7), 0.61, 0.3) * 3
acts = {
    "relu": F.relu,
    "leaky_relu": lambda t: F.leaky_relu(t, 0.1),
    "elu": lambda t: F.elu(t, 0.7),
    "gelu": F.gelu,
    "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
    "silu": F.silu,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "softplus": lambda t: F.softplus(t, beta=2, threshold=5),
    "softmax": lambda t: F.softmax(t, dim=1),
    "log_softmax": lambda t: F.log_softmax(t, dim=0),
}
for name, fn in acts.items():
    value_and_grads("act." + name, fn, [xa])

# ---- convolution and pooling -------------------------------------------------------------------
xc = det((2, 4, 7, 6), 0.37, 0.1)
conv_cases = {
    # name: (weight shape, bias?, conv2d kwargs)
    "basic": ((6, 4, 3, 3), True, {}),
    "stride_pad": ((6, 4, 3, 3), True, {"stride": 2, "padding": 1}),
    "rect": ((5, 4, 3, 2), True, {"stride": (2, 1), "padding": (1, 0)}),
    "dilation_same": ((6, 4, 3, 3), True, {"dilation": 2, "padding": "same"}),
    "same_even": ((3, 4, 2, 4), True, {"padding": "same"}),
    "groups": ((6, 2, 3, 3), False, {"groups": 2, "padding": 1}),
    "depthwise": ((4, 1, 3, 3), True, {"groups": 4, "stride": 2}),
}
for name, (wshape, has_bias, kw) in conv_cases.items():
    wc = det(wshape, 0.53, 0.7) * 0.5
    if has_bias:
        bc = det((wshape[0],), 0.9, 0.4)
        value_and_grads("conv." + name, lambda x, w, b, kw=kw: F.conv2d(x, w, b, **kw), [xc, wc, bc])
    else:
        value_and_grads("conv." + name, lambda x, w, kw=kw: F.conv2d(x, w, None, **kw), [xc, wc])
value_and_grads("pool.max", lambda x: F.max_pool2d(x, 3, stride=2, padding=1), [xc])
value_and_grads("pool.avg", lambda x: F.avg_pool2d(x, 2, padding=1, count_include_pad=False), [xc])
value_and_grads("pool.avg_rect", lambda x: F.avg_pool2d(x, (3, 2), stride=(2, 2)), [xc])
value_and_grads("pool.adaptive", lambda x: F.adaptive_avg_pool2d(x, (3, 2)), [xc])
value_and_grads("pool.global", lambda x: x.mean(dim=(2, 3)), [xc])

# ---- normalization -----------------------------------------------------------------------------
def batchnorm_case(prefix, shape, c):
    bn = nn.BatchNorm1d(c, momentum=0.2) if len(shape) < 4 else nn.BatchNorm2d(c, momentum=0.2)
    with torch.no_grad():
        bn.weight.copy_(det((c,), 0.5, 1.0))
        bn.bias.copy_(det((c,), 0.8, 0.3))
    x1 = det(shape, 0.33, 0.1) * 2
    x2 = det(shape, 0.47, 0.6) + 0.5
    xg = x1.clone().requires_grad_()
    y = bn(xg)
    w = det(y.shape, 0.29, 0.4)
    (y * w).sum().backward()
    emit(prefix + ".y", y)
    emit(prefix + ".dx", xg.grad)
    emit(prefix + ".dweight", bn.weight.grad)
    emit(prefix + ".dbias", bn.bias.grad)
    bn(x2)
    emit(prefix + ".running_mean", bn.running_mean)
    emit(prefix + ".running_var", bn.running_var)
    bn.eval()
    emit(prefix + ".eval_y", bn(x2))


batchnorm_case("bn1d", (6, 4), 4)
batchnorm_case("bn1d3", (3, 4, 5), 4)
batchnorm_case("bn2d", (2, 3, 4, 4), 3)

xl = det((3, 4, 5), 0.41, 0.5)
gl = det((4, 5), 0.8, 1.1)
bl = det((4, 5), 0.6, 0.9)
value_and_grads("layernorm", lambda x, g, b: F.layer_norm(x, (4, 5), g, b, 1e-5), [xl, gl, bl])


def rms(x, g, eps):
    return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps) * g


gr = det((5,), 0.8, 1.1)
xr = det((3, 4, 5), 0.41, 0.5)
value_and_grads("rmsnorm", lambda x, g: rms(x, g, 1e-6), [xr, gr])

# ---- embedding ---------------------------------------------------------------------------------
We = det((6, 3), 0.9, 0.2)
We[0] = 0
idx = torch.tensor([[1, 0, 2], [5, 0, 1]])
value_and_grads("embedding", lambda w: F.embedding(idx, w, padding_idx=0), [We])

# ---- losses ------------------------------------------------------------------------------------
logits = det((5, 4), 0.83, 0.2) * 2
target = torch.tensor([0, 3, 1, 1, 2])
cw = torch.tensor([0.5, 1.0, 2.0, 1.5])
ce_cases = {
    "plain": {},
    "weight": {"weight": cw},
    "ignore": {"ignore_index": 1},
    "smooth": {"label_smoothing": 0.2},
    "all": {"weight": cw, "ignore_index": 1, "label_smoothing": 0.3},
    "sum": {"reduction": "sum", "label_smoothing": 0.1, "weight": cw},
    "none": {"reduction": "none", "label_smoothing": 0.1, "weight": cw, "ignore_index": 3},
}
for name, kw in ce_cases.items():
    value_and_grads("ce." + name, lambda z, kw=kw: F.cross_entropy(z, target, **kw), [logits])
probs = F.softmax(det((5, 4), 0.37, 0.9) * 3, dim=1)
value_and_grads("ce.probs", lambda z: F.cross_entropy(z, probs, label_smoothing=0.1), [logits])
value_and_grads("ce.probs_weight", lambda z: F.cross_entropy(z, probs, weight=cw, reduction="sum"), [logits])
logits3 = det((2, 4, 3), 0.57, 0.1) * 2
target3 = torch.tensor([[0, 3, 1], [2, 2, 0]])
value_and_grads("ce.spatial", lambda z: F.cross_entropy(z, target3, label_smoothing=0.1, weight=cw), [logits3])
value_and_grads("nll.weight", lambda z: F.nll_loss(F.log_softmax(z, 1), target, weight=cw, ignore_index=2), [logits])

pa = det((3, 5), 0.71, 0.2) * 2
pb = det((3, 5), 0.37, 0.8) * 2
value_and_grads("mse.mean", lambda a: F.mse_loss(a, pb), [pa])
value_and_grads("mse.sum", lambda a: F.mse_loss(a, pb, reduction="sum"), [pa])
value_and_grads("l1.mean", lambda a: F.l1_loss(a, pb), [pa])
value_and_grads("smooth_l1", lambda a: F.smooth_l1_loss(a, pb, beta=0.5), [pa])
value_and_grads("huber", lambda a: F.huber_loss(a, pb, delta=0.7, reduction="none"), [pa])
p_prob = torch.sigmoid(pa)
y01 = (det((3, 5), 0.53, 0.1) > 0).double()
bw = det((3, 5), 0.31, 0.2).abs() + 0.5
value_and_grads("bce", lambda p: F.binary_cross_entropy(p, y01, weight=bw), [p_prob])
posw = torch.tensor([0.5, 1.0, 2.0, 3.0, 1.5])
value_and_grads("bce_logits", lambda z: F.binary_cross_entropy_with_logits(z, y01, pos_weight=posw), [pa])
value_and_grads("bce_logits_none", lambda z: F.binary_cross_entropy_with_logits(z, y01, reduction="none"), [pa])

# ---- optimizers: 5 steps of the 4-5-3 tanh MLP of refutil.py on an MSE loss ---------------------
opt_cases = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.1),
    "sgd_momentum": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01),
    "sgd_nesterov": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
    "adam": lambda p: torch.optim.Adam(p, lr=0.05, weight_decay=0.01),
    "adam_amsgrad": lambda p: torch.optim.Adam(p, lr=0.05, betas=(0.8, 0.9), amsgrad=True),
    "adamw": lambda p: torch.optim.AdamW(p, lr=0.05, weight_decay=0.1),
    "sgd_clip": lambda p: torch.optim.SGD(p, lr=0.5),
}
for name, make in opt_cases.items():
    clip = (lambda m: torch.nn.utils.clip_grad_norm_(m.parameters(), 0.05)) if name == "sgd_clip" else None
    mlp_trajectory(name, lambda m, make=make: make(m.parameters()), before_step=clip)

# ---- schedulers ---------------------------------------------------------------------------------
def lrs(make, n):
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([p], lr=0.1)
    s = make(opt)
    out = []
    for _ in range(n):
        opt.step()
        s.step()
        out.append(opt.param_groups[0]["lr"])
    return out


emit("sched.step", lrs(lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.5), 10))
emit("sched.cosine", lrs(lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=10, eta_min=0.01), 10))


def warmup_cosine(e, warmup=3, total=10, final=0.1):
    if e < warmup:
        return e / warmup
    prog = min(1.0, (e - warmup) / (total - warmup))
    return final + (1 - final) * (1 + math.cos(math.pi * prog)) / 2


emit("sched.warmup_cosine", lrs(lambda o: torch.optim.lr_scheduler.LambdaLR(o, warmup_cosine), 12))

with open(os.path.join(ROOT, "tests", "nn", "data", "nn_reference.txt"), "w") as f:
    f.write("# generated by tools/reference/nn_reference.py with torch " + torch.__version__ + "\n")
    f.write("\n".join(lines) + "\n")

# ---- safetensors files, written by hand -------------------------------------------------------
ST_DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.float16: "F16", torch.bfloat16: "BF16",
             torch.int32: "I32", torch.int64: "I64", torch.uint8: "U8", torch.bool: "BOOL"}


def raw_bytes(t):
    t = t.contiguous()
    if t.dtype == torch.bfloat16:  # numpy has no bf16: reinterpret as int16
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()


def write_safetensors(path, tensors, metadata=None):
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for k, t in tensors.items():
        data = raw_bytes(t)
        header[k] = {"dtype": ST_DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for d in blobs:
            f.write(d)


class TorchMlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8))
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        return self.head(F.relu(self.features(x)))


torch.manual_seed(0)
model = TorchMlp().float()
model.train()
for i in range(3):  # non-trivial running statistics
    model(det((5, 6), 0.3 + 0.1 * i, 0.2).float())
model.eval()
xin = det((4, 6), 0.45, 0.3).float()
out = model(xin)
io_dir = os.path.join(ROOT, "tests", "io", "data")
os.makedirs(io_dir, exist_ok=True)
write_safetensors(os.path.join(io_dir, "torch_mlp.safetensors"), model.state_dict(), {"format": "pt"})
with open(os.path.join(io_dir, "torch_mlp_output.txt"), "w") as f:
    f.write("# generated by tools/reference/nn_reference.py: TorchMlp (eval) on det((4, 6), 0.45, 0.3)\n")
    f.write("out " + " ".join(repr(float(v)) for v in out.detach().reshape(-1).tolist()) + "\n")

base = det((2, 3), 0.7, 0.1) * 100
dtypes = {
    "f32": base.float(), "f64": base, "f16": base.half(), "bf16": base.bfloat16(),
    "i32": base.int(), "i64": base.long(), "u8": (base.abs()).to(torch.uint8), "bool": base > 0,
}
write_safetensors(os.path.join(io_dir, "torch_dtypes.safetensors"), dtypes)
with open(os.path.join(io_dir, "torch_dtypes.txt"), "w") as f:
    f.write("# generated by tools/reference/nn_reference.py: values of torch_dtypes.safetensors as float64\n")
    for k, t in dtypes.items():
        f.write(k + " " + " ".join(repr(float(v)) for v in t.double().reshape(-1).tolist()) + "\n")
print("wrote", len(lines), "reference lines and the safetensors files")
