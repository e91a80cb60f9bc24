#!/usr/bin/env python3
"""PyTorch side-by-side reference for `ember train fashion-mnist`: the same models (src/cli/models.h),
the same normalization, Adam with a per-step cosine schedule to 5% of the rate, batch 64, test
evaluation every epoch. Reads the IDX files of Debian's dataset-fashion-mnist. Prints the time per
epoch and the test accuracy. Adam runs at PyTorch's best setting (--adam auto: fused where this
torch has a CPU fused Adam, torch >= 2.4; else foreach; else the per-parameter loop); the line
"optimizer: ..." says which. Run it as bench/run does (bench/peers.py picks the OpenMP wait policy:
OMP_WAIT_POLICY=ACTIVE at 2 threads for PyTorch 2.x here):

  OMP_NUM_THREADS=2 OMP_WAIT_POLICY=ACTIVE \
    ~/.cache/ember/bench-venv/bin/python tools/train_fashion_mnist_torch.py --model mlp --epochs 3
"""
import argparse
import gzip
import math
import os
import struct
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

DIR = os.environ.get("EMBER_FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")


def read_idx(name):
    with gzip.open(os.path.join(DIR, name + ".gz"), "rb") as f:
        data = f.read()
    rank = data[3]
    dims = struct.unpack(">" + "I" * rank, data[4:4 + 4 * rank])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.drop = nn.Dropout(0.25)
        self.fc1 = nn.Linear(64 * 7 * 7, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.conv1(x)), 2)
        h = F.max_pool2d(F.relu(self.conv2(h)), 2)
        return self.fc2(self.drop(F.relu(self.fc1(h.flatten(1)))))


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 512)
        self.fc2 = nn.Linear(512, 256)
        self.fc3 = nn.Linear(256, 10)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x.flatten(1))))))


def make_adam(params, lr, want):
    """(optimizer, implementation): the first of fused, foreach, loop that this torch runs on CPU."""
    params = list(params)
    for impl in (["fused", "foreach", "loop"] if want == "auto" else [want]):
        kw = {"fused": {"fused": True}, "foreach": {"foreach": True}, "loop": {"foreach": False}}[impl]
        try:
            probe = torch.zeros(2, requires_grad=True)
            probe.grad = torch.ones(2)
            torch.optim.Adam([probe], lr=lr, **kw).step()
        except (TypeError, RuntimeError, ValueError):
            continue
        return torch.optim.Adam(params, lr=lr, **kw), impl
    raise SystemExit(f"torch {torch.__version__} has no Adam '{want}' on CPU")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="cnn", choices=["cnn", "mlp"])
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--limit", type=int, default=0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--adam", default="auto", choices=["auto", "fused", "foreach", "loop"],
                   help="Adam implementation (auto: the fastest this torch has on CPU)")
    p.add_argument("--channels-last", action="store_true", help="CNN: images and weights in channels-last layout")
    a = p.parse_args()
    torch.manual_seed(a.seed)
    norm = lambda x: (torch.from_numpy(x.astype(np.float32) / 255.0).unsqueeze(1) - 0.2860) / 0.3530
    xtr, ytr = norm(read_idx("train-images-idx3-ubyte")), torch.from_numpy(read_idx("train-labels-idx1-ubyte").astype(np.int64))
    xte, yte = norm(read_idx("t10k-images-idx3-ubyte")), torch.from_numpy(read_idx("t10k-labels-idx1-ubyte").astype(np.int64))
    if a.limit:
        xtr, ytr = xtr[: a.limit], ytr[: a.limit]
    model = Cnn() if a.model == "cnn" else Mlp()
    if a.channels_last and a.model == "cnn":
        model = model.to(memory_format=torch.channels_last)
        xtr = xtr.contiguous(memory_format=torch.channels_last)
        xte = xte.contiguous(memory_format=torch.channels_last)
    opt, impl = make_adam(model.parameters(), a.lr, a.adam)
    steps = a.epochs * math.ceil(len(xtr) / a.batch_size)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps, eta_min=a.lr * 0.05)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {a.model}, "
          f"{sum(p.numel() for p in model.parameters())} parameters")
    print(f"optimizer: Adam {impl}" + (", channels-last" if a.channels_last and a.model == "cnn" else ""))
    for epoch in range(a.epochs):
        model.train()
        t0 = time.perf_counter()
        perm = torch.randperm(len(xtr))
        for i in range(0, len(xtr), a.batch_size):
            idx = perm[i:i + a.batch_size]
            loss = F.cross_entropy(model(xtr[idx]), ytr[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
        train_s = time.perf_counter() - t0
        model.eval()
        with torch.no_grad():
            correct = sum((model(xte[i:i + 500]).argmax(1) == yte[i:i + 500]).sum().item() for i in range(0, len(xte), 500))
        print(f"epoch {epoch + 1}: train {train_s:.1f} s ({len(xtr) / train_s:.0f} items/s), "
              f"test accuracy {100.0 * correct / len(xte):.2f}%, total {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
