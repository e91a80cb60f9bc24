#!/usr/bin/env python3
"""Writes NumPy .npy copies of the exported CNN's test data (tests/onnx/models/resnet_cnn/npy/:
input_0.npy, output_0.npy from the TensorProto files input_0.pb and output_0.pb beside
model.onnx), which the cli.onnx_run_npy test feeds to `ember onnx-run` to check the .npy
reader, writer and --compare on a real model. A developer tool (needs onnx and NumPy: the bench
venv, ~/.cache/ember/bench-venv/bin/python tools/onnx/pb_to_npy.py)."""
import os

import numpy as np
import onnx
from onnx import numpy_helper

MODEL = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "tests", "onnx", "models", "resnet_cnn"))
os.makedirs(os.path.join(MODEL, "npy"), exist_ok=True)
for name in ["input_0", "output_0"]:
    t = onnx.TensorProto()
    with open(os.path.join(MODEL, name + ".pb"), "rb") as f:
        t.ParseFromString(f.read())
    arr = numpy_helper.to_array(t)
    np.save(os.path.join(MODEL, "npy", name + ".npy"), arr)
    print(name, arr.dtype, arr.shape)
