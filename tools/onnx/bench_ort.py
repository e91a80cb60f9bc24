#!/usr/bin/env python3
"""Ember against ONNX Runtime on the exported models (tests/onnx/models, tools/onnx/export_models.py):
batch-1 latency and batch-32 throughput of the CNN and the transformer encoder, at 1 and 2 threads,
both sides in one run (alternating round by round), printed as a markdown table with the ratio.

  ~/.cache/ember/bench-venv/bin/python tools/onnx/bench_ort.py [--ember build/release/bin/ember] [--reps 50]

Ember's side is `ember onnx-run MODEL --input NAME=FILE --repeat N` with OMP_NUM_THREADS=T (its
median of N runs after a first, compiling run); ORT's is an InferenceSession with
intra_op_num_threads=T, inter_op_num_threads=1, all graph optimizations, median of N runs after
warm-up. Each cell is the median over the rounds. Developer tool (needs onnxruntime + numpy)."""
import argparse
import os
import re
import statistics
import subprocess
import tempfile
import time

import numpy as np
import onnx.numpy_helper
import onnxruntime as ort

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
MODELS = {"resnet_cnn": ("image", (3, 16, 16)), "transformer_encoder": ("tokens", (7, 16))}


def ember_ms(binary, model, name, path, threads, reps):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    out = subprocess.run([binary, "onnx-run", model, "--input", "%s=%s" % (name, path), "--repeat", str(reps)],
                         env=env, capture_output=True, text=True, check=True).stdout
    return float(re.search(r"median ([0-9.]+) ms", out).group(1))


def ort_ms(model, name, x, threads, reps):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    for _ in range(5):
        sess.run(None, {name: x})
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        sess.run(None, {name: x})
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ember", default=os.path.join(ROOT, "build", "release", "bin", "ember"))
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    tmp = tempfile.mkdtemp()
    print("| model | batch | threads | Ember ms | ORT ms | Ember/ORT | note |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for model_name, (name, dims) in MODELS.items():
        model = os.path.join(ROOT, "tests", "onnx", "models", model_name, "model.onnx")
        for batch in (1, 32):
            x = rng.standard_normal((batch,) + dims).astype(np.float32)
            path = os.path.join(tmp, "%s_%d.pb" % (model_name, batch))
            with open(path, "wb") as f:
                f.write(onnx.numpy_helper.from_array(x, name).SerializeToString())
            for threads in (1, 2):
                e, o = [], []
                for _ in range(args.rounds):
                    e.append(ember_ms(args.ember, model, name, path, threads, args.reps))
                    o.append(ort_ms(model, name, x, threads, args.reps))
                em, om = statistics.median(e), statistics.median(o)
                what = "latency" if batch == 1 else "%.0f images/s Ember, %.0f ORT" % (batch * 1e3 / em, batch * 1e3 / om)
                print("| %s | %d | %d | %.3f | %.3f | %.2f | %s |" % (model_name, batch, threads, em, om, em / om, what),
                      flush=True)


if __name__ == "__main__":
    main()
