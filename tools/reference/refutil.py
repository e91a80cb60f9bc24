"""Helpers shared by the PyTorch reference scripts in this folder: deterministic inputs that the
C++ tests rebuild, the "name v1 v2 ..." lines the tests read, and the small MLP the optimizer
cases train. float64 throughout."""
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


# ---- the optimizer cases' model (nn_reference.py, nn_breadth_reference.py, optim_reference.py) --
# A 4-5-3 tanh MLP, weights det(...) * 0.5, trained on the mean squared error against MLP_Y on
# the inputs MLP_X; the C++ tests build the same model and data.
MLP_X = det((6, 4), 0.37, 0.1)
MLP_Y = det((6, 3), 0.61, 0.5)


def mlp():
    m = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))
    with torch.no_grad():
        m[0].weight.copy_(det((5, 4), 0.71, 0.3) * 0.5)
        m[0].bias.copy_(det((5,), 1.3, 0.2) * 0.5)
        m[2].weight.copy_(det((3, 5), 0.53, 0.7) * 0.5)
        m[2].bias.copy_(det((3,), 0.9, 0.4) * 0.5)
    return m


def mlp_loss(m):
    return torch.nn.functional.mse_loss(m(MLP_X), MLP_Y)


def mlp_trajectory(name, make, steps=5, before_step=None):
    """Trains a fresh mlp() for `steps` steps with the optimizer make(model) and emits
    "opt.<name>.losses" (the loss before each step) and "opt.<name>.<parameter>" (the parameters
    after the last step). before_step(model), if given, runs between backward and step."""
    m = mlp()
    opt = make(m)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = mlp_loss(m)
        loss.backward()
        if before_step is not None:
            before_step(m)
        opt.step()
        losses.append(loss.item())
    emit("opt." + name + ".losses", losses)
    for pname, p in m.named_parameters():
        emit("opt." + name + "." + pname, p)
