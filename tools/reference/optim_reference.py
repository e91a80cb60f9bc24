#!/usr/bin/env python3
"""Writes tests/optim/data/optim_reference.txt: PyTorch's (float64) trajectories for the
optimizers added after nn_breadth_reference.py (Adadelta, Adamax, NAdam, RAdam, L-BFGS), on the
4-5-3 tanh MLP that nn_reference.py and nn_breadth_reference.py train too (refutil.py: weights
det(...) * 0.5, mean squared error against det((6, 3), 0.61, 0.5) on inputs det((6, 4), 0.37, 0.1)).

For each case: "opt.<name>.losses" (the loss before each step) and "opt.<name>.<parameter>" (the
parameters after the last step). NAdam's and RAdam's decoupled_weight_decay needs torch >= 2.1;
the file's first line records the torch version that wrote it. The committed file was written
with torch 2.15.0+cu132 (the PyPI wheel, run on the CPU) under Python 3.11.

Run with a PyTorch 2.x virtual environment (Debian's python3-torch is 1.13):
  python3 -m venv /work/venv-torch2 && /work/venv-torch2/bin/pip install torch numpy
  /work/venv-torch2/bin/python tools/reference/optim_reference.py
"""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

from refutil import MLP_X, MLP_Y, det, emit, lines, mlp, mlp_trajectory  # noqa: E402 (sets float64)

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))


def groups(m):
    """The first layer with its own rate and weight decay, the second with the optimizer's."""
    return [{"params": m[0].parameters(), "lr": 0.01, "weight_decay": 0.2}, {"params": m[2].parameters()}]


O = torch.optim
# name -> (steps, make(model) -> optimizer). RAdam rectifies only once rho_t > 5: from step 6
# with beta2 = 0.9 or 0.95, so its cases run 8 steps.
opt_cases = {
    "adadelta": (5, lambda m: O.Adadelta(m.parameters(), weight_decay=0.01)),  # lr 1.0, rho 0.9
    "adadelta_max": (5, lambda m: O.Adadelta(m.parameters(), lr=0.5, rho=0.95, eps=1e-4, maximize=True)),
    "adamax": (5, lambda m: O.Adamax(m.parameters(), lr=0.05, betas=(0.8, 0.99), weight_decay=0.01)),
    "nadam": (5, lambda m: O.NAdam(m.parameters(), lr=0.05, weight_decay=0.01)),
    "nadam_decoupled": (5, lambda m: O.NAdam(m.parameters(), lr=0.05, betas=(0.85, 0.99), weight_decay=0.1,
                                             momentum_decay=0.01, decoupled_weight_decay=True)),
    "nadam_groups": (5, lambda m: O.NAdam(groups(m), lr=0.05, decoupled_weight_decay=True)),
    "radam": (8, lambda m: O.RAdam(m.parameters(), lr=0.05, betas=(0.9, 0.9), weight_decay=0.01)),
    "radam_decoupled": (8, lambda m: O.RAdam(m.parameters(), lr=0.05, betas=(0.9, 0.95), weight_decay=0.1,
                                             decoupled_weight_decay=True)),
}
for name, (steps, make) in opt_cases.items():
    mlp_trajectory(name, make, steps)


# ---- L-BFGS ---------------------------------------------------------------------------------------
# Without line search: 3 step() calls of at most 4 iterations each with a history of 3 pairs, so
# the history is truncated and carried from one step() to the next. "losses" are the values
# step() returns (the loss at its start); "counts" are the iterations and evaluations after each.
def lbfgs_run(make, steps, model, x, y):
    opt = make(model.parameters())
    losses, counts = [], []

    def closure():
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        return loss

    for _ in range(steps):
        losses.append(opt.step(closure).item())
        st = opt.state[opt._params[0]]
        counts += [st["n_iter"], st["func_evals"]]
    return losses, counts


for name, make in {
    "lbfgs": lambda p: O.LBFGS(p, lr=0.5, max_iter=4, history_size=3),
    "lbfgs_default": lambda p: O.LBFGS(p),  # lr 1, max_iter 20, history 100
}.items():
    m = mlp()
    losses, counts = lbfgs_run(make, 3, m, MLP_X, MLP_Y)
    emit("opt." + name + ".losses", losses)
    emit("opt." + name + ".counts", counts)
    for pname, p in m.named_parameters():
        emit("opt." + name + "." + pname, p)

# Strong Wolfe on linear least squares (convex, one minimizer): Ember's line search is its own
# (Nocedal & Wright's algorithms), so its trajectory differs from PyTorch's, but both must reach
# the least-squares solution, given here by torch.linalg.lstsq.
# (A det tensor's columns span only sin and cos of one frequency: the powers make the design
# matrix [xl, 1] full rank, singular values 5.7 to 1.4.)
xl = det((12, 4), 0.37, 0.1) ** 3 + det((12, 4), 1.91, 0.3) ** 2
yl = det((12, 2), 0.61, 0.5)
sol = torch.linalg.lstsq(torch.cat([xl, torch.ones(12, 1)], 1), yl).solution  # [5, 2]
emit("lstsq.weight", sol[:4].T)
emit("lstsq.bias", sol[4])
lin = nn.Linear(4, 2)
with torch.no_grad():
    lin.weight.copy_(det((2, 4), 0.71, 0.3) * 0.5)
    lin.bias.copy_(det((2,), 1.3, 0.2) * 0.5)
losses, counts = lbfgs_run(lambda p: O.LBFGS(p, line_search_fn="strong_wolfe"), 2, lin, xl, yl)
emit("opt.lbfgs_wolfe_lstsq.losses", losses)
emit("opt.lbfgs_wolfe_lstsq.min_loss", [F.mse_loss(xl @ sol[:4] + sol[4], yl).item()])
for pname, p in lin.named_parameters():
    emit("opt.lbfgs_wolfe_lstsq." + pname, p)

with open(os.path.join(ROOT, "tests", "optim", "data", "optim_reference.txt"), "w") as f:
    f.write("# generated by tools/reference/optim_reference.py with torch " + torch.__version__ + "\n")
    f.write("\n".join(lines) + "\n")
print("wrote", len(lines), "reference lines")
