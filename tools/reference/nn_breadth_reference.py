#!/usr/bin/env python3
"""Writes tests/nn/data/nn_breadth_reference.txt: PyTorch's (float64) values and gradients for the
second batch of layers, losses, optimizers and schedulers (Conv1d, 1-D pooling, GroupNorm,
InstanceNorm, PReLU, SELU, Mish, HardSigmoid, HardSwish, Softsign, SwiGLU, KL divergence, cosine
embedding and margin ranking losses, RMSprop, AdaGrad, Lion, multi-step / exponential / warm
restarts / one-cycle / Noam / sequential schedules).

Same conventions as nn_reference.py: inputs are det(shape, a, b) (element i = sin(a * i + b)),
which the C++ tests rebuild; gradients are of sum(y * det(y.shape, 0.29, 0.4)).
Run with Debian's python3-torch:  /usr/bin/python3 tools/reference/nn_breadth_reference.py
Lion is not in torch 1.13: its trajectory comes from the update rule of the paper (Chen et al.
2023, "Symbolic Discovery of Optimization Algorithms"), written below with torch tensors.
"""
import math
import os

import torch
import torch.nn.functional as F

from refutil import det, emit, lines, mlp_trajectory, value_and_grads  # noqa: E402 (sets float64)
ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))


# ---- Conv1d and 1-D pooling --------------------------------------------------------------------
x1 = det((2, 4, 9), 0.37, 0.1)
conv_cases = {
    "basic": ((6, 4, 3), True, {}),
    "stride_pad_dil": ((6, 4, 3), True, {"stride": 2, "padding": 1, "dilation": 2}),
    "groups": ((6, 2, 3), False, {"groups": 2, "padding": 1}),
    "same": ((5, 4, 4), True, {"padding": "same"}),
}
for name, (wshape, has_bias, kw) in conv_cases.items():
    wc = det(wshape, 0.53, 0.7) * 0.5
    if has_bias:
        bc = det((wshape[0],), 0.9, 0.4)
        value_and_grads("conv1d." + name, lambda x, w, b, kw=kw: F.conv1d(x, w, b, **kw), [x1, wc, bc])
    else:
        value_and_grads("conv1d." + name, lambda x, w, kw=kw: F.conv1d(x, w, None, **kw), [x1, wc])
value_and_grads("pool1d.max", lambda x: F.max_pool1d(x, 3, stride=2, padding=1), [x1])
value_and_grads("pool1d.avg", lambda x: F.avg_pool1d(x, 2, padding=1, count_include_pad=False), [x1])
value_and_grads("pool1d.adaptive", lambda x: F.adaptive_avg_pool1d(x, 4), [x1])

# ---- GroupNorm and InstanceNorm ----------------------------------------------------------------
xg = det((2, 6, 5), 0.41, 0.5) * 2
value_and_grads("groupnorm", lambda x, g, b: F.group_norm(x, 3, g, b, 1e-5),
                [xg, det((6,), 0.8, 1.1), det((6,), 0.6, 0.9)])
xg4 = det((2, 4, 3, 3), 0.33, 0.2) + 0.3
value_and_grads("groupnorm4d", lambda x: F.group_norm(x, 2, None, None, 1e-5), [xg4])
xi = det((2, 3, 7), 0.47, 0.6) * 2
value_and_grads("instancenorm1d", lambda x, g, b: F.instance_norm(x, weight=g, bias=b, eps=1e-5),
                [xi, det((3,), 0.5, 1.0), det((3,), 0.8, 0.3)])
xi4 = det((2, 3, 4, 4), 0.31, 0.9)
value_and_grads("instancenorm2d", lambda x: F.instance_norm(x, eps=1e-5), [xi4])

# ---- activations -------------------------------------------------------------------------------
xa = det((3, 8), 0.61, 0.3) * 3
acts = {
    "selu": F.selu,
    "mish": F.mish,
    "hardsigmoid": F.hardsigmoid,
    "hardswish": F.hardswish,
    "softsign": F.softsign,
    # SwiGLU as an activation: the last dim split in halves (a, b) -> silu(a) * b.
    "swiglu": lambda t: F.silu(t[..., :4]) * t[..., 4:],
}
for name, fn in acts.items():
    value_and_grads("act." + name, fn, [xa])
xp = det((2, 3, 5), 0.61, 0.3) * 3
value_and_grads("act.prelu", lambda x, w: F.prelu(x, w), [xp, det((3,), 0.7, 0.2) * 0.5])
value_and_grads("act.prelu1", lambda x, w: F.prelu(x, w), [xp, torch.tensor([0.25])])

# ---- losses ------------------------------------------------------------------------------------
lp = F.log_softmax(det((4, 5), 0.83, 0.2) * 2, dim=1)
tp = F.softmax(det((4, 5), 0.37, 0.9) * 3, dim=1)
for red in ["mean", "sum", "batchmean", "none"]:
    value_and_grads("kl." + red, lambda a, red=red: F.kl_div(a, tp, reduction=red), [lp])
value_and_grads("kl.log_target", lambda a: F.kl_div(a, tp.log(), reduction="batchmean", log_target=True), [lp])

ca = det((4, 5), 0.71, 0.2)
cb = det((4, 5), 0.37, 0.8)
cy = torch.tensor([1.0, -1.0, 1.0, -1.0])
value_and_grads("cosine_embedding.mean", lambda a, b: F.cosine_embedding_loss(a, b, cy, margin=0.2), [ca, cb])
value_and_grads("cosine_embedding.none",
                lambda a, b: F.cosine_embedding_loss(a, b, cy, margin=-0.3, reduction="none"), [ca, cb])
ma = det((6,), 0.71, 0.2)
mb = det((6,), 0.37, 0.8)
my = torch.tensor([1.0, -1.0, 1.0, 1.0, -1.0, -1.0])
value_and_grads("margin_ranking.mean", lambda a, b: F.margin_ranking_loss(a, b, my, margin=0.3), [ma, mb])
value_and_grads("margin_ranking.sum", lambda a, b: F.margin_ranking_loss(a, b, my, reduction="sum"), [ma, mb])


# ---- optimizers: 5 steps of the 4-5-3 tanh MLP of refutil.py ----------------------------------
class Lion(torch.optim.Optimizer):
    """The update rule of the Lion paper: c = b1 m + (1 - b1) g; p -= lr (sign(c) + wd p);
    m = b2 m + (1 - b2) g."""

    def __init__(self, params, lr, betas=(0.9, 0.99), weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                state = self.state[p]
                if not state:
                    state["exp_avg"] = torch.zeros_like(p)
                m = state["exp_avg"]
                c = m * b1 + p.grad * (1 - b1)
                p.mul_(1 - group["lr"] * group["weight_decay"])
                p.add_(torch.sign(c), alpha=-group["lr"])
                m.mul_(b2).add_(p.grad, alpha=1 - b2)


opt_cases = {
    "rmsprop": lambda m: torch.optim.RMSprop(m.parameters(), lr=0.01, alpha=0.9, weight_decay=0.01),
    "rmsprop_centered": lambda m: torch.optim.RMSprop(m.parameters(), lr=0.01, momentum=0.9, centered=True),
    "adagrad": lambda m: torch.optim.Adagrad(m.parameters(), lr=0.1, lr_decay=0.01, weight_decay=0.01,
                                             initial_accumulator_value=0.1),
    "lion": lambda m: Lion(m.parameters(), lr=0.01, betas=(0.9, 0.99), weight_decay=0.1),
    # Parameter groups: the first layer with its own rate and weight decay.
    "groups": lambda m: torch.optim.Adam([{"params": m[0].parameters(), "lr": 0.01, "weight_decay": 0.1},
                                          {"params": m[2].parameters()}], lr=0.05),
}
for name, make in opt_cases.items():
    mlp_trajectory(name, make)


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


S = torch.optim.lr_scheduler
emit("sched.multistep", lrs(lambda o: S.MultiStepLR(o, milestones=[2, 5, 7], gamma=0.5), 10))
emit("sched.exponential", lrs(lambda o: S.ExponentialLR(o, gamma=0.9), 10))
emit("sched.warm_restarts", lrs(lambda o: S.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=0.01), 16))
emit("sched.warm_restarts1", lrs(lambda o: S.CosineAnnealingWarmRestarts(o, T_0=4), 10))
emit("sched.one_cycle", lrs(lambda o: S.OneCycleLR(o, max_lr=0.5, total_steps=12, pct_start=0.3,
                                                     cycle_momentum=False), 11))
emit("sched.one_cycle_linear", lrs(lambda o: S.OneCycleLR(o, max_lr=0.5, total_steps=10, pct_start=0.25,
                                                            anneal_strategy="linear", div_factor=10,
                                                            final_div_factor=100, cycle_momentum=False), 9))
emit("sched.linear", lrs(lambda o: S.LinearLR(o, start_factor=0.2, end_factor=0.9, total_iters=4), 6))


def noam(step, d_model=64, warmup=4):
    step = max(step, 1)
    return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


emit("sched.noam", lrs(lambda o: S.LambdaLR(o, noam), 10))
emit("sched.sequential", lrs(lambda o: S.SequentialLR(
    o, [S.LinearLR(o, start_factor=0.1, total_iters=3), S.ExponentialLR(o, gamma=0.8)], milestones=[3]), 8))

with open(os.path.join(ROOT, "tests", "nn", "data", "nn_breadth_reference.txt"), "w") as f:
    f.write("# generated by tools/reference/nn_breadth_reference.py with torch " + torch.__version__ + "\n")
    f.write("\n".join(lines) + "\n")
print("wrote", len(lines), "reference lines")
