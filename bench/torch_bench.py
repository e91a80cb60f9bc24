#!/usr/bin/python3
"""PyTorch's side of the benchmark suite (bench/run drives it; bench/ember_bench.cpp is Ember's).

The same line protocol as ember_bench (one JSON object per line on stdin/stdout): setup, run,
check, info, quit. The runner starts this script under the peer's interpreter (the bench venv's
PyTorch 2.x by default, or Debian's /usr/bin/python3 with torch 1.13) with OMP_NUM_THREADS=N and
the OpenMP wait policy it picked for the workload (bench/peers.py); this script calls
torch.set_num_threads(N). Inputs use the same integer formula as Ember, so the checksums of the
sides can be compared.

setup takes options in "opts" (the peer's settings, bench/peers.py):
  adam: "auto" (fused where this torch has a CPU fused Adam, else foreach, else the for-loop),
        "fused", "foreach" or "loop" (training workloads);
  channels_last: true: convolution and pooling inputs (and weights) in channels-last layout;
  compile: true: the workload through torch.compile (torch >= 2); setup then makes the first,
        compiling call and answers its time as compile_s, so the timed reps exclude compilation.
        Workloads it cannot compile answer {"ok": false, "unsupported": true}.
The answer's "config" says what was used (e.g. "Adam fused").
"""
import copy
import inspect
import json
import math
import os
import re
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except Exception as e:  # the runner skips the peer
    print(json.dumps({"ok": False, "error": "torch not importable: %s" % e}), flush=True)
    sys.exit(3)

THREADS = int(os.environ.get("OMP_NUM_THREADS", "0") or 0)
if THREADS > 0:
    torch.set_num_threads(THREADS)
torch.set_grad_enabled(False)


def inp(shape, seed, scale=1.0):
    shape = tuple(shape)
    n = math.prod(shape)
    i = torch.arange(n, dtype=torch.int64)
    x = ((i * 7919 + seed * 104729) % 1000).to(torch.float32) / 500.0 - 1.0
    if scale != 1.0:
        x = x * scale
    return x.reshape(shape).contiguous()


def checksum(t):
    return float(t.double().sum().item())


# The options of the current setup (see the module comment) and what they turned into.
OPTS = {}
USED = []


def compiled(f):
    """f through torch.compile when the setup asked for it (the first call compiles)."""
    return torch.compile(f) if OPTS.get("compile") else f


def adam(params, lr, cls=None):
    """Adam (or cls, e.g. torch.optim.AdamW) at the peer's best setting: fused where this torch has a
    CPU fused Adam (torch >= 2.4), else foreach (a few multi-tensor kernels), else the per-parameter
    loop (torch 1.13 on CPU)."""
    cls = cls or torch.optim.Adam
    want = OPTS.get("adam", "auto")
    params = list(params)
    tries = {"auto": ["fused", "foreach", "loop"], "fused": ["fused"], "foreach": ["foreach"], "loop": ["loop"]}[want]
    for impl in tries:
        kw = {"fused": {"fused": True}, "foreach": {"foreach": True}, "loop": {"foreach": False}}[impl]
        try:
            probe = torch.zeros(2, requires_grad=True)
            probe.grad = torch.ones(2)
            cls([probe], lr=lr, **kw).step()  # older torch: TypeError or RuntimeError on CPU
            opt = cls(params, lr=lr, **kw)
        except (TypeError, RuntimeError, ValueError):
            continue
        USED.append(cls.__name__ + " " + impl)
        return opt
    raise RuntimeError("no Adam implementation '%s' in torch %s" % (want, torch.__version__))


def layout(t):
    """Channels-last (NHWC in memory) for 4-d convolution and pooling operands when asked."""
    if OPTS.get("channels_last") and t.dim() == 4:
        return t.contiguous(memory_format=torch.channels_last)
    return t


class Fn:
    def __init__(self, f):
        self.f = f
        self.out = None

    def run(self):
        self.out = self.f()

    def check(self):
        return checksum(self.out)


def gelu_prims(x):
    return x * 0.5 * (torch.erf(x / math.sqrt(2.0)) + 1.0)


def chain10(x):
    h = torch.exp(x * 0.1)
    h = torch.tanh(h + 1.0)
    h = torch.sigmoid(h * 2.0)
    h = h * h - 0.5
    return torch.abs(h + x)


class GeluGrad:
    def __init__(self, n):
        self.x = inp([n], 1).requires_grad_(True)
        self.g = inp([n], 2)
        self.dx = None
        self.f = compiled(gelu_prims)

    def run(self):
        with torch.enable_grad():
            self.x.grad = None
            y = self.f(self.x)
            y.backward(self.g)
            self.dx = self.x.grad

    def check(self):
        return checksum(self.dx)


class ToDevice:
    def __init__(self, n):
        self.h = inp([n], 1).numpy().copy()
        self.out = None

    def run(self):
        self.out = torch.from_numpy(self.h).clone()

    def check(self):
        return checksum(self.out)


class ToHost:
    def __init__(self, n):
        self.x = inp([n], 1)
        self.h = None

    def run(self):
        self.h = self.x.numpy().copy()

    def check(self):
        return float(self.h.astype("float64").sum())


class LazyOp:  # PyTorch is eager: this is one op executed on a tiny tensor
    def __init__(self, n, count):
        self.x = inp([n], 1)
        self.count = count
        self.last = None

    def run(self):
        x = self.x
        for _ in range(self.count):
            self.last = x + 1.0

    def check(self):
        return checksum(self.last)

    def units(self):
        return self.count


class TinyChain:
    def __init__(self, n, ops):
        self.x = inp([n], 1)
        self.ops = ops
        self.h = None
        self.chain = compiled(self.chain_eager)

    def chain_eager(self, y):
        for i in range(self.ops):
            y = y * 1.0001 if i % 2 == 0 else y + 0.001
        return y

    def run(self):
        self.h = self.chain(self.x).tolist()

    def check(self):
        return float(sum(self.h))


class TinyAutograd:
    def __init__(self, n):
        self.w = inp([n], 1).requires_grad_(True)
        self.x = inp([n], 2)
        self.h = None
        self.f = compiled(lambda w, x: (torch.tanh(w * x) + w).sum())

    def run(self):
        with torch.enable_grad():
            self.w.grad = None
            loss = self.f(self.w, self.x)
            loss.backward()
            self.h = self.w.grad.tolist()

    def check(self):
        return float(sum(self.h))


def mlp_model(n_in, hidden, n_out):
    """MLP n_in-hidden-hidden-n_out with the deterministic weights ember_bench's Mlp uses."""
    dims = [(n_in, hidden), (hidden, hidden), (hidden, n_out)]
    layers = []
    seed = 10
    for k, (i, o) in enumerate(dims):
        lin = torch.nn.Linear(i, o)
        s = 1.0 / math.sqrt(i)
        with torch.no_grad():
            lin.weight.copy_(inp([o, i], seed, s))
            lin.bias.copy_(inp([o], seed + 1, s))
        seed += 2
        layers.append(lin)
        if k < 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


class Stateful:
    """A training step: loss = self.fwd(*self.inputs), backward, the optimizer's step. Its compiling
    call (setup, torch.compile) must not count as a step: the parameters and the optimizer state
    are put back after it, so the checksum (the loss after the same number of steps on every side)
    still compares."""

    def snapshot(self):
        return copy.deepcopy(self.net.state_dict()), copy.deepcopy(self.opt.state_dict())

    def restore(self, snap):
        self.net.load_state_dict(snap[0])
        self.opt.load_state_dict(snap[1])

    def run(self):
        with torch.enable_grad():
            self.opt.zero_grad(set_to_none=True)
            loss = self.fwd(*self.inputs)
            loss.backward()
            self.opt.step()
            self.loss = loss.detach()

    def check(self):
        return float(self.loss.item())


class ClassifierStep(Stateful):
    """One training step of a classifier on a fixed batch x (labels i mod classes): cross-entropy,
    backward, Adam (the MLP and residual CNN rows; ember_bench's ClassifierStep)."""

    def __init__(self, net, x, classes):
        self.net = net
        self.x = x
        self.opt = adam(self.net.parameters(), 1e-3)
        self.labels = torch.arange(x.shape[0], dtype=torch.int64) % classes
        self.loss = None
        self.fwd = compiled(lambda x, y: F.cross_entropy(self.net(x), y))
        self.inputs = (self.x, self.labels)


class MlpStep(ClassifierStep):
    def __init__(self, batch, n_in, hidden, n_out):
        super().__init__(mlp_model(n_in, hidden, n_out), inp([batch, n_in], 1), n_out)


class MlpInfer:
    """Batch-1 (or small-batch) MLP inference: forward only, result read to Python."""

    def __init__(self, batch, n_in, hidden, n_out):
        self.model = compiled(mlp_model(n_in, hidden, n_out))
        self.x = inp([batch, n_in], 1)
        self.out = None

    def run(self):
        with torch.no_grad():
            self.out = self.model(self.x).tolist()

    def check(self):
        return float(sum(sum(r) for r in self.out))


def set_params_by_name(module, seed):
    """The same values as ember_bench's set_params_by_name: parameters in name order, norm weights
    1 + 0.1·u, everything else u / sqrt(last dim)."""
    with torch.no_grad():
        for name, p in sorted(module.named_parameters(), key=lambda kv: kv[0]):
            if "norm" in name and name.endswith("weight"):
                p.copy_(inp(list(p.shape), seed, 0.1) + 1.0)
            else:
                p.copy_(inp(list(p.shape), seed, 1.0 / math.sqrt(p.shape[-1])))
            seed += 1


class EncoderTrain(Stateful):
    """One training step of nn.TransformerEncoderLayer (post-norm, GELU, no dropout): forward,
    loss = mean(out²), backward, Adam."""

    def __init__(self, B, S, D, H, Fd, precision="f32"):
        self.layer = torch.nn.TransformerEncoderLayer(D, H, Fd, dropout=0.0, activation="gelu", batch_first=True)
        set_params_by_name(self.layer, 40)
        self.net = self.layer
        self.opt = adam(self.layer.parameters(), 1e-4)
        self.x = inp([B, S, D], 1)
        self.loss = None
        low = {"f32": None, "bf16": torch.bfloat16, "f16": torch.float16}[precision]

        def fwd(x):
            # precision bf16/f16: the forward under torch.autocast (f32 master weights), as Ember's
            # AutocastGuard in ember_bench.cpp.
            with torch.autocast("cpu", dtype=low, enabled=low is not None):
                y = self.layer(x)
            y = y.float()
            return (y * y).mean()
        self.fwd = compiled(fwd)
        self.inputs = (self.x,)


class LstmLm(Stateful):
    """One training step of a character language model: embedding, multi-layer LSTM or GRU
    (batch_first), linear head, cross-entropy over every position, Adam (as ember_bench.cpp)."""

    def __init__(self, batch, seq, vocab, dim, hidden, layers, cell="lstm"):
        self.embed = torch.nn.Embedding(vocab, dim)
        rnn = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU}[cell]
        self.lstm = rnn(dim, hidden, num_layers=layers, batch_first=True)
        self.head = torch.nn.Linear(hidden, vocab)
        set_params_by_name(self.embed, 80)
        set_params_by_name(self.lstm, 90)
        set_params_by_name(self.head, 100)
        self.net = torch.nn.ModuleList([self.embed, self.lstm, self.head])
        self.opt = adam(self.net.parameters(), 1e-3)
        tok = [[(131 * b + 7 * t + (t * t) % 11) % vocab for t in range(seq + 1)] for b in range(batch)]
        t = torch.tensor(tok, dtype=torch.int64)
        self.tokens = t[:, :seq].contiguous()
        self.targets = t[:, 1:].reshape(-1).contiguous()
        self.vocab = vocab
        self.loss = None

        def fwd(tokens, targets):
            h = self.lstm(self.embed(tokens))[0]
            return torch.nn.functional.cross_entropy(self.head(h).reshape(-1, self.vocab), targets)
        self.fwd = compiled(fwd)
        self.inputs = (self.tokens, self.targets)



def pattern_tokens(batch, seq, vocab):
    """ember_bench's pattern_tokens: token[b, t] = (131 b + 7 t + t^2 mod 11) mod vocab."""
    tok = [[(131 * b + 7 * t + (t * t) % 11) % vocab for t in range(seq)] for b in range(batch)]
    return torch.tensor(tok, dtype=torch.int64)


class ResidualBlock(torch.nn.Module):
    """ResNet's basic block, as bench/model_cases.cpp (same parameter names)."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.norm1 = torch.nn.BatchNorm2d(cout)
        self.conv2 = torch.nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.norm2 = torch.nn.BatchNorm2d(cout)
        down = stride != 1 or cin != cout
        self.down_conv = torch.nn.ModuleList([torch.nn.Conv2d(cin, cout, 1, stride, bias=False)] if down else [])
        self.down_norm = torch.nn.ModuleList([torch.nn.BatchNorm2d(cout)] if down else [])

    def forward(self, x):
        h = torch.relu(self.norm1(self.conv1(x)))
        h = self.norm2(self.conv2(h))
        skip = self.down_norm[0](self.down_conv[0](x)) if len(self.down_conv) else x
        return torch.relu(h + skip)


class ResNet(torch.nn.Module):
    """The CIFAR-shaped residual CNN of bench/model_cases.cpp."""

    def __init__(self, width, classes):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, width, 3, 1, 1, bias=False)
        self.stem_norm = torch.nn.BatchNorm2d(width)
        self.blocks = torch.nn.ModuleList([ResidualBlock(width, width, 1), ResidualBlock(width, 2 * width, 2),
                                           ResidualBlock(2 * width, 4 * width, 2)])
        self.fc = torch.nn.Linear(4 * width, classes)
        set_params_by_name(self, 120)

    def forward(self, x):
        h = torch.relu(self.stem_norm(self.stem(x)))
        for b in self.blocks:
            h = b(h)
        return self.fc(h.mean((2, 3)))


class ResNetTrain(ClassifierStep):
    """One training step of the residual CNN (batch statistics), cross-entropy, Adam."""

    def __init__(self, batch, width, classes, hw):
        net, x = ResNet(width, classes), inp([batch, 3, hw, hw], 1)
        if OPTS.get("channels_last"):
            net, x = net.to(memory_format=torch.channels_last), layout(x)
        super().__init__(net, x, classes)


class ResNetInfer:
    """Inference of the residual CNN (eval mode), logits read to Python."""

    def __init__(self, batch, width, classes, hw):
        net = ResNet(width, classes).eval()
        self.x = inp([batch, 3, hw, hw], 1)
        if OPTS.get("channels_last"):
            net = net.to(memory_format=torch.channels_last)
            self.x = layout(self.x)
        self.model = compiled(net)
        self.out = None

    def run(self):
        with torch.no_grad():
            self.out = self.model(self.x).tolist()

    def check(self):
        return float(sum(sum(r) for r in self.out))


CAUSAL_FLAG = "is_causal" in inspect.signature(torch.nn.TransformerEncoder.forward).parameters


class Gpt(torch.nn.Module):
    """The GPT-style decoder stack of bench/model_cases.cpp: token and learned position embeddings,
    pre-norm causal nn.TransformerEncoder layers with a final LayerNorm, a linear head."""

    def __init__(self, vocab, context, d, heads, ff, layers):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, d)
        self.pos = torch.nn.Embedding(context, d)
        layer = torch.nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, activation="gelu", batch_first=True,
                                                 norm_first=True)
        self.blocks = torch.nn.TransformerEncoder(layer, layers, norm=torch.nn.LayerNorm(d),
                                                  enable_nested_tensor=False)
        self.head = torch.nn.Linear(d, vocab)
        set_params_by_name(self, 140)

    def forward(self, tokens):
        T = tokens.shape[1]
        h = self.tok(tokens) + self.pos(torch.arange(T))
        mask = torch.nn.Transformer.generate_square_subsequent_mask(T)
        causal = {"is_causal": True} if CAUSAL_FLAG else {}  # torch >= 2.0: the mask is causal
        return self.head(self.blocks(h, mask=mask, **causal))


class GptTrain(Stateful):
    """One training step of the decoder stack: next-token cross-entropy, AdamW."""

    def __init__(self, batch, seq, vocab, d, heads, ff, layers):
        self.net = Gpt(vocab, seq, d, heads, ff, layers)
        self.opt = adam(self.net.parameters(), 3e-4, torch.optim.AdamW)
        t = pattern_tokens(batch, seq + 1, vocab)
        self.tokens = t[:, :seq].contiguous()
        self.targets = t[:, 1:].reshape(-1).contiguous()
        self.loss = None
        self.fwd = compiled(lambda x, y: F.cross_entropy(self.net(x).reshape(-1, vocab), y))
        self.inputs = (self.tokens, self.targets)


class GptInfer:
    """Inference of the decoder stack on a prompt of seq tokens per sequence, logits read back."""

    def __init__(self, batch, seq, vocab, d, heads, ff, layers):
        self.model = compiled(Gpt(vocab, seq, d, heads, ff, layers).eval())
        self.tokens = pattern_tokens(batch, seq, vocab)
        self.out = None

    def run(self):
        with torch.no_grad():
            self.out = self.model(self.tokens)

    def check(self):
        return checksum(self.out)


class LstmAutograd:
    """Autodiff overhead on a tiny LSTM: forward, backward, one gradient read to Python."""

    def __init__(self, batch, seq, n_in, hidden):
        self.lstm = torch.nn.LSTM(n_in, hidden)
        set_params_by_name(self.lstm, 60)
        self.x = inp([seq, batch, n_in], 1)
        self.g = None
        self.fwd = compiled(lambda x: self.lstm(x)[0].sum())

    def run(self):
        with torch.enable_grad():
            self.lstm.zero_grad(set_to_none=True)
            self.fwd(self.x).backward()
            self.g = self.lstm.weight_ih_l0.grad.tolist()

    def check(self):
        return float(sum(sum(r) for r in self.g))


class Encoder:
    def __init__(self, B, S, D, H, Fd):
        self.B, self.S, self.D, self.H = B, S, D, H
        sd, sf = 1.0 / math.sqrt(D), 1.0 / math.sqrt(Fd)
        self.x = inp([B, S, D], 1)
        self.wqkv, self.bqkv = inp([D, 3 * D], 2, sd), inp([3 * D], 3, sd)
        self.wo, self.bo = inp([D, D], 4, sd), inp([D], 5, sd)
        self.w1, self.b1 = inp([D, Fd], 6, sd), inp([Fd], 7, sd)
        self.w2, self.b2 = inp([Fd, D], 8, sf), inp([D], 9, sf)
        self.g1, self.be1 = inp([D], 10, 0.1) + 1.0, inp([D], 11, 0.1)
        self.g2, self.be2 = inp([D], 12, 0.1) + 1.0, inp([D], 13, 0.1)
        self.out = None
        self.body = compiled(self.forward)

    def run(self):
        self.out = self.body(self.x)

    def forward(self, x):
        B, S, D, H = self.B, self.S, self.D, self.H
        dh = D // H
        qkv = x @ self.wqkv + self.bqkv
        qkv = qkv.reshape(B, S, 3, H, dh).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = torch.softmax((q @ k.transpose(2, 3)) * (1.0 / math.sqrt(dh)), 3)
        ctx = (att @ v).permute(0, 2, 1, 3).reshape(B, S, D)
        h1 = F.layer_norm(x + (ctx @ self.wo + self.bo), (D,), self.g1, self.be1, 1e-5)
        ff = F.gelu(h1 @ self.w1 + self.b1) @ self.w2 + self.b2
        return F.layer_norm(h1 + ff, (D,), self.g2, self.be2, 1e-5)

    def check(self):
        return checksum(self.out)


# Workload kinds torch.compile is not asked to compile: random numbers (other numbers than eager),
# host transfers (nothing to compile) and the per-op overhead row (one eager op by definition).
NO_COMPILE = {"randn", "rand", "to_device", "to_host", "lazy_op"}
# Kinds that have convolution or pooling operands (the channels_last option).
CONV_KINDS = {"conv2d", "max_pool2d", "resnet_train", "resnet_infer"}


def make_case(kind, p):
    if OPTS.get("compile"):
        if not hasattr(torch, "compile"):
            raise Unsupported("torch %s has no torch.compile" % torch.__version__)
        if kind in NO_COMPILE:
            raise Unsupported("not compiled: %s" % kind)
    if OPTS.get("channels_last"):
        if kind not in CONV_KINDS:
            raise Unsupported("channels_last: not a convolution or pooling workload")
        USED.append("channels-last")
    case = make_case_eager(kind, p)
    if OPTS.get("compile") and isinstance(case, Fn):
        case.f = torch.compile(case.f)
    return case


class Unsupported(Exception):
    pass


def make_case_eager(kind, p):
    n = p.get("n")
    if kind == "tanh":
        x = inp([n], 1)
        return Fn(lambda: torch.tanh(x))
    if kind == "mul":
        a, b = inp([n], 1), inp([n], 2)
        return Fn(lambda: a * b)
    if kind == "matmul":
        a, b = inp(p["a"], 1, 0.1), inp(p["b"], 2, 0.1)
        return Fn(lambda: torch.matmul(a, b))
    if kind == "matmul_epilogue":
        a, b, bias = inp(p["a"], 1, 0.1), inp(p["b"], 2, 0.1), inp([p["b"][1]], 3)
        return Fn(lambda: F.gelu(torch.relu(a @ b) + bias))
    if kind == "sum":
        x, axis = inp(p["shape"], 1), p["axis"]
        return Fn(lambda: x.sum(axis))
    if kind == "argmin":
        x, axis = inp(p["shape"], 1), p["axis"]
        return Fn(lambda: torch.argmin(x, axis))
    if kind == "softmax":
        x, dim = inp(p["shape"], 1, 4.0), p["dim"]
        return Fn(lambda: torch.softmax(x, dim))
    if kind == "layer_norm":
        s = p["shape"]
        x, w, b = inp(s, 1, 2.0), inp([s[-1]], 2, 0.1) + 1.0, inp([s[-1]], 3, 0.1)
        return Fn(lambda: F.layer_norm(x, (s[-1],), w, b, 1e-5))
    if kind == "batch_norm_infer":
        s = p["shape"]
        C = s[1]
        x, w, b, m = inp(s, 1, 2.0), inp([C], 2, 0.1) + 1.0, inp([C], 3, 0.1), inp([C], 5, 0.2)
        v = inp([C], 4, 0.5) + 1.0
        return Fn(lambda: F.batch_norm(x, m, v, w, b, training=False, eps=1e-5))
    if kind == "conv2d":
        ws = p["w"]
        x = layout(inp(p["x"], 1))
        w = layout(inp(ws, 2, 1.0 / math.sqrt(ws[1] * ws[2] * ws[3])))
        b = inp([ws[0]], 3)
        return Fn(lambda: F.conv2d(x, w, b, stride=p["stride"], padding=p["pad"]))
    if kind == "max_pool2d":
        x = layout(inp(p["x"], 1))
        return Fn(lambda: F.max_pool2d(x, p["k"], p["stride"], p["pad"]))
    if kind == "gelu_prims":
        x = inp([n], 1, 3.0)
        return Fn(lambda: gelu_prims(x))
    if kind == "gelu_prims_grad":
        return GeluGrad(n)
    if kind == "gelu":
        x = inp([n], 1, 3.0)
        return Fn(lambda: F.gelu(x))
    if kind == "chain10":
        x = inp([n], 1, 3.0)
        return Fn(lambda: chain10(x))
    if kind == "randn":
        return Fn(lambda: torch.randn(n))
    if kind == "rand":
        return Fn(lambda: torch.rand(n))
    if kind == "to_device":
        return ToDevice(n)
    if kind == "to_host":
        return ToHost(n)
    if kind == "lazy_op":
        return LazyOp(n, p["count"])
    if kind == "tiny_chain":
        return TinyChain(n, p["ops"])
    if kind == "tiny_autograd":
        return TinyAutograd(n)
    if kind == "mlp_step":
        return MlpStep(p["batch"], p["in"], p["hidden"], p["out"])
    if kind == "mlp_infer":
        return MlpInfer(p["batch"], p["in"], p["hidden"], p["out"])
    if kind == "encoder_train":
        return EncoderTrain(p["batch"], p["seq"], p["dim"], p["heads"], p["ffn"], p.get("precision", "f32"))
    if kind == "lstm_lm":
        return LstmLm(p["batch"], p["seq"], p["vocab"], p["dim"], p["hidden"], p["layers"], p.get("cell", "lstm"))
    if kind == "resnet_train":
        return ResNetTrain(p["batch"], p["width"], p["classes"], p["hw"])
    if kind == "resnet_infer":
        return ResNetInfer(p["batch"], p["width"], p["classes"], p["hw"])
    if kind == "gpt_train":
        return GptTrain(p["batch"], p["seq"], p["vocab"], p["dim"], p["heads"], p["ffn"], p["layers"])
    if kind == "gpt_infer":
        return GptInfer(p["batch"], p["seq"], p["vocab"], p["dim"], p["heads"], p["ffn"], p["layers"])
    if kind == "lstm_autograd":
        return LstmAutograd(p["batch"], p["seq"], p["in"], p["hidden"])
    if kind == "encoder":
        return Encoder(p["batch"], p["seq"], p["dim"], p["heads"], p["ffn"])
    raise ValueError("no PyTorch version of workload kind '%s'" % kind)


def blas_library():
    """The BLAS library this process loaded (after a small matmul), from /proc/self/maps."""
    torch.ones(4, 4) @ torch.ones(4, 4)
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if "blas" in line.lower() and "/" in line}
        real = sorted({os.path.realpath(x) for x in libs})
        return ", ".join(real) if real else None
    except OSError:
        return None


def build_info():
    """What this torch really computes with: its build configuration (torch.__config__.show()),
    not the interpreter's system libraries. PyTorch 2.x wheels carry MKL (BLAS_INFO=mkl) and
    oneDNN inside libtorch_cpu; Debian's 1.13 calls the system libblas.so.3."""
    cfg = torch.__config__.show()
    info = {"blas_info": None, "mkl": None, "onednn": None, "cpu_capability": None, "openmp": None}
    m = re.search(r"BLAS_INFO=(\w+)", cfg)
    info["blas_info"] = m.group(1) if m else None
    m = re.search(r"Math Kernel Library Version ([\w.]+)", cfg)
    info["mkl"] = m.group(1) if m and torch.backends.mkl.is_available() else None
    m = re.search(r"(?:oneDNN|MKL-DNN) (v[\w.]+)", cfg)
    if torch.backends.mkldnn.is_available():
        info["onednn"] = m.group(1) if m else "yes"
    try:
        info["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    except AttributeError:  # torch < 2.1
        m = re.search(r"CPU capability usage: (\w+)", cfg)
        info["cpu_capability"] = m.group(1) if m else None
    m = re.search(r"OpenMP (\d+)", torch.__config__.parallel_info())
    info["openmp"] = m.group(1) if m else None
    return info


def main():
    case = None
    for line in sys.stdin:
        try:
            req = json.loads(line)
            cmd = req["cmd"]
            if cmd == "quit":
                break
            if cmd == "info":
                reply = {"threads": torch.get_num_threads(), "version": torch.__version__,
                         "python": sys.executable, "config": torch.__config__.parallel_info().splitlines()[:6],
                         "blas": blas_library(), "build": build_info(), "compile": hasattr(torch, "compile")}
            elif cmd == "setup":
                case = None
                OPTS.clear()
                OPTS.update(req.get("opts") or {})
                del USED[:]
                case = make_case(req["kind"], req.get("p", {}))
                reply = {"ok": True}
                if OPTS.get("compile"):
                    USED.append("torch.compile")
                    snap = case.snapshot() if isinstance(case, Stateful) else None
                    t0 = time.perf_counter()
                    try:
                        case.run()  # the compiling call
                    except Exception as e:
                        case = None
                        raise Unsupported("torch.compile failed: %s: %s" % (type(e).__name__, str(e)[:300]))
                    reply["compile_s"] = time.perf_counter() - t0
                    if snap:
                        case.restore(snap)
                reply["config"] = ", ".join(USED)
            elif cmd == "run":
                times = []
                units = case.units() if hasattr(case, "units") else 1
                for _ in range(int(req.get("reps", 1))):
                    t0 = time.perf_counter()
                    case.run()
                    times.append((time.perf_counter() - t0) / units)
                reply = {"times": times}
            elif cmd == "check":
                reply = {"checksum": case.check()}
            else:
                raise ValueError("unknown command " + cmd)
        except Unsupported as e:
            reply = {"ok": False, "unsupported": True, "error": str(e)}
        except Exception as e:
            reply = {"ok": False, "error": "%s: %s" % (type(e).__name__, e)}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
