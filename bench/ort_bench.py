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
