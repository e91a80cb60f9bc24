#!/usr/bin/env python3
"""ONNX Runtime's side of the benchmark suite, for information (bench/run --ort-python PATH).

The same line protocol as ember_bench and torch_bench.py (one JSON object per line on
stdin/stdout): setup, run, check, info, quit. Inference workloads only: each one is an ONNX graph
built with onnx.helper (no export from torch), run by an InferenceSession on the CPU execution
provider with intra_op_num_threads = OMP_NUM_THREADS, inter_op_num_threads = 1, sequential
execution and all graph optimizations. Inputs use the same integer formula as Ember and
torch_bench.py, so the checksums of the three sides can be compared. Workload kinds without an
ONNX version (training, autograd, random numbers, host transfers, per-op overhead) answer setup
with {"ok": false, "unsupported": true}; the runner leaves their ORT cells empty.

Needs onnxruntime, onnx and numpy (e.g. python3 -m venv V && V/bin/pip install onnxruntime onnx
numpy); never a dependency of Ember, its tests or CI.
Spinning: ORT's default (intra-op worker threads spin briefly before sleeping), its best
configuration here: at 2 threads the batch-1 MLP took ~50 µs with it and ~140 µs without, while the
alternating Ember and PyTorch times did not change. EMBER_BENCH_ORT_SPIN=0 turns it off.
"""
import json
import math
import os
import sys
import time

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
except Exception as e:  # the runner skips the ORT columns
    print(json.dumps({"ok": False, "error": "onnxruntime/onnx/numpy not importable: %s" % e}), flush=True)
    sys.exit(3)

THREADS = int(os.environ.get("OMP_NUM_THREADS", "0") or 0)
SPIN = os.environ.get("EMBER_BENCH_ORT_SPIN", "1")
OPSET = 20  # Gelu (20), LayerNormalization (17), ReduceSum with axes as an input (13)
F32 = np.float32


def inp(shape, seed, scale=1.0):
    """torch_bench.py's inp: ((i·7919 + seed·104729) mod 1000) / 500 − 1, times scale, in float32."""
    shape = tuple(int(s) for s in shape)
    n = math.prod(shape)
    i = np.arange(n, dtype=np.int64)
    x = ((i * 7919 + seed * 104729) % 1000).astype(F32) / F32(500.0) - F32(1.0)
    if scale != 1.0:
        x = x * F32(scale)
    return np.ascontiguousarray(x.reshape(shape), dtype=F32)


def checksum(a):
    return float(np.asarray(a).astype(np.float64).sum())


class Graph:
    """A small builder over onnx.helper: graph inputs (fed per run), initializers (weights), nodes."""

    def __init__(self):
        self.nodes, self.inputs, self.inits, self.feeds = [], [], [], {}
        self.k = 0

    def input(self, name, value):
        self.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(value.shape)))
        self.feeds[name] = value
        return name

    def const(self, value, dtype=None):
        self.k += 1
        name = "c%d" % self.k
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype or F32), name))
        return name

    def op(self, op_type, *ins, **attrs):
        self.k += 1
        out = "t%d" % self.k
        self.nodes.append(helper.make_node(op_type, list(ins), [out], **attrs))
        return out

    def session(self, out, elem=TensorProto.FLOAT):
        g = helper.make_graph(self.nodes, "bench", self.inputs, [helper.make_tensor_value_info(out, elem, None)],
                              initializer=self.inits)
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="ember-bench")
        model.ir_version = 9  # ORT validates the model; the output's shape is left to its inference
        so = ort.SessionOptions()
        so.intra_op_num_threads = max(1, THREADS)
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.add_session_config_entry("session.intra_op.allow_spinning", SPIN)
        so.add_session_config_entry("session.inter_op.allow_spinning", SPIN)
        return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


class Case:
    """One workload: a session, its feeds, and the output of the last run."""

    def __init__(self, g, out, elem=TensorProto.FLOAT):
        self.sess = g.session(out, elem)
        self.feeds = g.feeds
        self.out = None

    def run(self):
        self.out = self.sess.run(None, self.feeds)[0]

    def check(self):
        return checksum(self.out)


def gelu_prims(g, x):
    """x·0.5·(erf(x/√2) + 1), as torch_bench.py's gelu_prims."""
    e = g.op("Erf", g.op("Div", x, g.const(math.sqrt(2.0))))
    return g.op("Mul", g.op("Mul", x, g.const(0.5)), g.op("Add", e, g.const(1.0)))


def chain10(g, x):
    h = g.op("Exp", g.op("Mul", x, g.const(0.1)))
    h = g.op("Tanh", g.op("Add", h, g.const(1.0)))
    h = g.op("Sigmoid", g.op("Mul", h, g.const(2.0)))
    h = g.op("Sub", g.op("Mul", h, h), g.const(0.5))
    return g.op("Abs", g.op("Add", h, x))


def layer_norm(g, x, w, b):
    return g.op("LayerNormalization", x, w, b, axis=-1, epsilon=1e-5)


def mlp_infer(p):
    """torch_bench.py's mlp_model (nn.Linear: y = x·Wᵀ + b; ReLU between) as Gemm nodes."""
    g = Graph()
    h = g.input("x", inp([p["batch"], p["in"]], 1))
    dims = [(p["in"], p["hidden"]), (p["hidden"], p["hidden"]), (p["hidden"], p["out"])]
    seed = 10
    for k, (i, o) in enumerate(dims):
        s = 1.0 / math.sqrt(i)
        h = g.op("Gemm", h, g.const(inp([o, i], seed, s)), g.const(inp([o], seed + 1, s)), transB=1)
        seed += 2
        if k < 2:
            h = g.op("Relu", h)
    return Case(g, h)


def encoder(p):
    """torch_bench.py's Encoder: post-norm layer, fused QKV projection, 4-head attention, GELU FFN."""
    B, S, D, H, Fd = p["batch"], p["seq"], p["dim"], p["heads"], p["ffn"]
    dh = D // H
    sd, sf = 1.0 / math.sqrt(D), 1.0 / math.sqrt(Fd)
    g = Graph()
    x = g.input("x", inp([B, S, D], 1))
    c = g.const
    qkv = g.op("Add", g.op("MatMul", x, c(inp([D, 3 * D], 2, sd))), c(inp([3 * D], 3, sd)))
    qkv = g.op("Transpose", g.op("Reshape", qkv, c([B, S, 3, H, dh], np.int64)), perm=[2, 0, 3, 1, 4])
    q, k, v = (g.op("Gather", qkv, c(j, np.int64), axis=0) for j in range(3))
    scores = g.op("Mul", g.op("MatMul", q, g.op("Transpose", k, perm=[0, 1, 3, 2])), c(1.0 / math.sqrt(dh)))
    att = g.op("Softmax", scores, axis=3)
    ctx = g.op("Reshape", g.op("Transpose", g.op("MatMul", att, v), perm=[0, 2, 1, 3]), c([B, S, D], np.int64))
    proj = g.op("Add", g.op("MatMul", ctx, c(inp([D, D], 4, sd))), c(inp([D], 5, sd)))
    h1 = layer_norm(g, g.op("Add", x, proj), c(inp([D], 10, 0.1) + F32(1.0)), c(inp([D], 11, 0.1)))
    f = g.op("Gelu", g.op("Add", g.op("MatMul", h1, c(inp([D, Fd], 6, sd))), c(inp([Fd], 7, sd))))
    ff = g.op("Add", g.op("MatMul", f, c(inp([Fd, D], 8, sf))), c(inp([D], 9, sf)))
    out = layer_norm(g, g.op("Add", h1, ff), c(inp([D], 12, 0.1) + F32(1.0)), c(inp([D], 13, 0.1)))
    return Case(g, out)


def params_by_name(shapes, seed):
    """ember_bench's set_params_by_name for {name: shape}: in name order, norm weights 1 + 0.1·u,
    everything else u / sqrt(last dim)."""
    out = {}
    for name in sorted(shapes):
        shape = shapes[name]
        if "norm" in name and name.endswith("weight"):
            out[name] = inp(shape, seed, 0.1) + F32(1.0)
        else:
            out[name] = inp(shape, seed, 1.0 / math.sqrt(shape[-1]))
        seed += 1
    return out


def resnet_infer(p):
    """bench/model_cases.cpp's ResNet in eval mode: Conv + BatchNormalization (running mean 0,
    variance 1) + Relu, three basic blocks with strided 1×1 shortcuts, global average pooling, Gemm."""
    w, classes, hw = p["width"], p["classes"], p["hw"]
    blocks = [(w, w, 1), (w, 2 * w, 2), (2 * w, 4 * w, 2)]
    shapes = {"stem.weight": [w, 3, 3, 3], "stem_norm.weight": [w], "stem_norm.bias": [w],
              "fc.weight": [classes, 4 * w], "fc.bias": [classes]}
    for i, (cin, cout, stride) in enumerate(blocks):
        b = "blocks.%d." % i
        shapes.update({b + "conv1.weight": [cout, cin, 3, 3], b + "conv2.weight": [cout, cout, 3, 3]})
        for n in ("norm1", "norm2") + (("down_norm.0",) if stride != 1 or cin != cout else ()):
            shapes.update({b + n + ".weight": [cout], b + n + ".bias": [cout]})
        if stride != 1 or cin != cout:
            shapes[b + "down_conv.0.weight"] = [cout, cin, 1, 1]
    P = params_by_name(shapes, 120)
    g = Graph()
    c = g.const

    def conv(x, name, stride, pad):
        k = P[name].shape[2]
        return g.op("Conv", x, c(P[name]), kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4)

    def bn(x, name):
        ch = P[name + ".weight"].shape[0]
        return g.op("BatchNormalization", x, c(P[name + ".weight"]), c(P[name + ".bias"]),
                    c(np.zeros(ch, F32)), c(np.ones(ch, F32)), epsilon=1e-5)

    h = g.op("Relu", bn(conv(g.input("x", inp([p["batch"], 3, hw, hw], 1)), "stem.weight", 1, 1), "stem_norm"))
    for i, (cin, cout, stride) in enumerate(blocks):
        b = "blocks.%d." % i
        y = g.op("Relu", bn(conv(h, b + "conv1.weight", stride, 1), b + "norm1"))
        y = bn(conv(y, b + "conv2.weight", 1, 1), b + "norm2")
        skip = bn(conv(h, b + "down_conv.0.weight", stride, 0), b + "down_norm.0") if stride != 1 or cin != cout else h
        h = g.op("Relu", g.op("Add", y, skip))
    h = g.op("Flatten", g.op("GlobalAveragePool", h), axis=1)
    return Case(g, g.op("Gemm", h, c(P["fc.weight"]), c(P["fc.bias"]), transB=1))


def gpt_infer(p):
    """bench/model_cases.cpp's Gpt: token and position embeddings, pre-norm causal layers (4-head
    attention with the in-projection split as PyTorch's, GELU feed-forward), final layer norm, head."""
    B, T, V, D, H, Fd, L = p["batch"], p["seq"], p["vocab"], p["dim"], p["heads"], p["ffn"], p["layers"]
    dh = D // H
    shapes = {"tok.weight": [V, D], "pos.weight": [T, D], "head.weight": [V, D], "head.bias": [V],
              "blocks.norm.weight": [D], "blocks.norm.bias": [D]}
    for i in range(L):
        b = "blocks.layers.%d." % i
        shapes.update({b + "self_attn.in_proj_weight": [3 * D, D], b + "self_attn.in_proj_bias": [3 * D],
                       b + "self_attn.out_proj.weight": [D, D], b + "self_attn.out_proj.bias": [D],
                       b + "linear1.weight": [Fd, D], b + "linear1.bias": [Fd], b + "linear2.weight": [D, Fd],
                       b + "linear2.bias": [D], b + "norm1.weight": [D], b + "norm1.bias": [D],
                       b + "norm2.weight": [D], b + "norm2.bias": [D]})
    P = params_by_name(shapes, 140)
    g = Graph()
    c = g.const
    tok = np.array([[(131 * bb + 7 * t + (t * t) % 11) % V for t in range(T)] for bb in range(B)], np.int64)
    g.inputs.append(helper.make_tensor_value_info("tokens", TensorProto.INT64, list(tok.shape)))
    g.feeds["tokens"] = tok
    h = g.op("Add", g.op("Gather", c(P["tok.weight"]), "tokens", axis=0), c(P["pos.weight"]))
    mask = np.triu(np.full((T, T), -np.inf, F32), 1)

    def linear(x, name):  # x·Wᵀ + b
        return g.op("Add", g.op("MatMul", x, c(np.ascontiguousarray(P[name + ".weight"].T))), c(P[name + ".bias"]))

    def heads(x):  # [B, T, D] -> [B, H, T, dh]
        return g.op("Transpose", g.op("Reshape", x, c([B, T, H, dh], np.int64)), perm=[0, 2, 1, 3])

    for i in range(L):
        b = "blocks.layers.%d." % i
        a = layer_norm(g, h, c(P[b + "norm1.weight"]), c(P[b + "norm1.bias"]))
        w, bias = P[b + "self_attn.in_proj_weight"], P[b + "self_attn.in_proj_bias"]
        q, k, v = (g.op("Add", g.op("MatMul", a, c(np.ascontiguousarray(w[j * D:(j + 1) * D].T))),
                        c(bias[j * D:(j + 1) * D])) for j in range(3))
        scores = g.op("Add", g.op("Mul", g.op("MatMul", heads(q), g.op("Transpose", heads(k), perm=[0, 1, 3, 2])),
                                  c(1.0 / math.sqrt(dh))), c(mask))
        ctx = g.op("MatMul", g.op("Softmax", scores, axis=3), heads(v))
        ctx = g.op("Reshape", g.op("Transpose", ctx, perm=[0, 2, 1, 3]), c([B, T, D], np.int64))
        h = g.op("Add", h, linear(ctx, b + "self_attn.out_proj"))
        f = g.op("Gelu", linear(layer_norm(g, h, c(P[b + "norm2.weight"]), c(P[b + "norm2.bias"])), b + "linear1"))
        h = g.op("Add", h, linear(f, b + "linear2"))
    h = layer_norm(g, h, c(P["blocks.norm.weight"]), c(P["blocks.norm.bias"]))
    return Case(g, linear(h, "head"))


class Unsupported(Exception):
    pass


def make_case(kind, p):
    n = p.get("n")
    g = Graph()
    if kind == "tanh":
        return Case(g, g.op("Tanh", g.input("x", inp([n], 1))))
    if kind == "mul":
        return Case(g, g.op("Mul", g.input("a", inp([n], 1)), g.input("b", inp([n], 2))))
    if kind == "gelu_prims":
        return Case(g, gelu_prims(g, g.input("x", inp([n], 1, 3.0))))
    if kind == "gelu":  # ONNX Gelu (opset 20), exact erf form like F.gelu
        return Case(g, g.op("Gelu", g.input("x", inp([n], 1, 3.0))))
    if kind == "chain10":
        return Case(g, chain10(g, g.input("x", inp([n], 1, 3.0))))
    if kind == "matmul":  # both operands are graph inputs (no prepacking of a constant B)
        return Case(g, g.op("MatMul", g.input("a", inp(p["a"], 1, 0.1)), g.input("b", inp(p["b"], 2, 0.1))))
    if kind == "matmul_epilogue":
        mm = g.op("MatMul", g.input("a", inp(p["a"], 1, 0.1)), g.input("b", inp(p["b"], 2, 0.1)))
        return Case(g, g.op("Gelu", g.op("Add", g.op("Relu", mm), g.const(inp([p["b"][1]], 3)))))
    if kind == "sum":
        x = g.input("x", inp(p["shape"], 1))
        return Case(g, g.op("ReduceSum", x, g.const([p["axis"]], np.int64), keepdims=0))
    if kind == "argmin":  # select_last_index=0: the first minimum, as torch.argmin on CPU
        x = g.input("x", inp(p["shape"], 1))
        return Case(g, g.op("ArgMin", x, axis=p["axis"], keepdims=0), TensorProto.INT64)
    if kind == "softmax":
        return Case(g, g.op("Softmax", g.input("x", inp(p["shape"], 1, 4.0)), axis=p["dim"]))
    if kind == "layer_norm":
        s = p["shape"]
        x = g.input("x", inp(s, 1, 2.0))
        return Case(g, layer_norm(g, x, g.const(inp([s[-1]], 2, 0.1) + F32(1.0)), g.const(inp([s[-1]], 3, 0.1))))
    if kind == "conv2d":  # weights are initializers, as in an exported model
        ws, st, pd = p["w"], p["stride"], p["pad"]
        x = g.input("x", inp(p["x"], 1))
        w = g.const(inp(ws, 2, 1.0 / math.sqrt(ws[1] * ws[2] * ws[3])))
        return Case(g, g.op("Conv", x, w, g.const(inp([ws[0]], 3)), kernel_shape=ws[2:], strides=[st, st],
                            pads=[pd] * 4))
    if kind == "max_pool2d":
        k, st, pd = p["k"], p["stride"], p["pad"]
        return Case(g, g.op("MaxPool", g.input("x", inp(p["x"], 1)), kernel_shape=[k, k], strides=[st, st],
                            pads=[pd] * 4))
    if kind == "mlp_infer":
        return mlp_infer(p)
    if kind == "encoder":
        return encoder(p)
    if kind == "resnet_infer":
        return resnet_infer(p)
    if kind == "gpt_infer":
        return gpt_infer(p)
    raise Unsupported("no ONNX Runtime version of workload kind '%s'" % kind)


def main():
    case = None
    for line in sys.stdin:
        try:
            req = json.loads(line)
            cmd = req["cmd"]
            if cmd == "quit":
                break
            if cmd == "info":
                reply = {"threads": max(1, THREADS), "version": ort.__version__, "onnx": onnx.__version__,
                         "numpy": np.__version__, "providers": ["CPUExecutionProvider"], "spinning": SPIN == "1"}
            elif cmd == "setup":
                case = None
                p = req.get("p", {})
                if p.get("fusion") is False:
                    raise Unsupported("Ember-only variant (fusion off)")
                case = make_case(req["kind"], p)
                reply = {"ok": True}
            elif cmd == "run":
                times = []
                for _ in range(int(req.get("reps", 1))):
                    t0 = time.perf_counter()
                    case.run()
                    times.append(time.perf_counter() - t0)
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
