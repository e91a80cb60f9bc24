#!/usr/bin/env python3
"""PyTorch (float64) reference values for max pooling's gradient path (tests/nn/max_pool_test.cpp):
max_pool2d values and input gradients for the 2x2/stride-2 fast path, overlapping padded windows
and rectangular windows, plus a second derivative (the gradient of the gradient with respect to the
upstream gradient, which gathers it at each window's maximum).
Writes tests/nn/data/max_pool_backward.txt. Run: /usr/bin/python3 tools/reference/max_pool_backward_reference.py"""
import os

import torch
import torch.nn.functional as F

import refutil
from refutil import det, emit, value_and_grads

CASES = {
    "k2": dict(shape=(2, 3, 8, 6), kernel=2, stride=2, padding=0),
    "k2_odd": dict(shape=(2, 3, 7, 9), kernel=2, stride=2, padding=0),
    "k3s2p1": dict(shape=(2, 3, 7, 9), kernel=3, stride=2, padding=1),
    "k3s1p1": dict(shape=(1, 2, 6, 5), kernel=3, stride=1, padding=1),
    "rect": dict(shape=(2, 2, 6, 7), kernel=(2, 3), stride=(1, 2), padding=(1, 0)),
}

for name, c in CASES.items():
    x = det(c["shape"], 0.37, 0.1)
    fn = lambda t, c=c: F.max_pool2d(t, c["kernel"], stride=c["stride"], padding=c["padding"])
    value_and_grads("maxpool." + name, fn, [x])

# Second order: dx = d/dx sum(max_pool(x) * u); d/du sum(dx * v) = v gathered at the window maxima.
c = CASES["k3s2p1"]
x = det(c["shape"], 0.37, 0.1).requires_grad_()
y = F.max_pool2d(x, c["kernel"], stride=c["stride"], padding=c["padding"])
u = det(y.shape, 0.29, 0.4).requires_grad_()
(dx,) = torch.autograd.grad((y * u).sum(), x, create_graph=True)
v = det(x.shape, 0.61, 0.2)
(du,) = torch.autograd.grad((dx * v).sum(), u)
emit("maxpool.second.du", du)

out = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "nn", "data", "max_pool_backward.txt")
with open(out, "w") as f:
    f.write("# max pooling gradients, written by tools/reference/max_pool_backward_reference.py\n")
    f.write("\n".join(refutil.lines) + "\n")
