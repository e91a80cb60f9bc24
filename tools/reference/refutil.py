"""Helpers shared by the PyTorch reference scripts in this folder: deterministic inputs that the
C++ tests rebuild, and the "name v1 v2 ..." lines the tests read. float64 throughout."""
import math

import torch

torch.set_default_dtype(torch.float64)

lines = []


def det(shape, a, b):
    """Element i of a tensor of `shape` is sin(a * i + b) (row-major index)."""
    n = math.prod(shape)
    return torch.tensor([math.sin(a * i + b) for i in range(n)]).reshape(shape)


def emit(name, t):
    if not torch.is_tensor(t):
        t = torch.tensor(t)
    flat = t.detach().reshape(-1).tolist()
    lines.append(name + " " + " ".join(repr(float(v)) for v in flat))


def value_and_grads(prefix, fn, inputs):
    """fn(*inputs) -> y; loss = sum(y * w) with w = det(y.shape, 0.29, 0.4); emits y and grads."""
    ins = [t.clone().requires_grad_() for t in inputs]
    y = fn(*ins)
    w = det(y.shape, 0.29, 0.4)
    (y * w).sum().backward()
    emit(prefix + ".y", y)
    for i, t in enumerate(ins):
        emit(prefix + ".d" + str(i), t.grad)
