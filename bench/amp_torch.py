#!/usr/bin/env python3
"""PyTorch side of the mixed-precision comparison (docs/performance.md § Mixed precision): one
training epoch of the Fashion-MNIST CNN and MLP of `ember train` (src/cli/models.h: same layers,
batch 64, Adam lr 1e-3, normalized pixels) on the first N training images, in f32 and under
torch.autocast("cpu", dtype=torch.bfloat16), then the test accuracy. A developer tool, never a test
dependency. Run with the bench venv:

    ~/.cache/ember/bench-venv/bin/python bench/amp_torch.py --model cnn --limit 5000 --threads 2
"""
import argparse
import gzip
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

DATA = "/usr/share/datasets/fashion-mnist"


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(split, limit=None):
    prefix = "train" if split == "train" else "t10k"
    x = idx(f"{DATA}/{prefix}-images-idx3-ubyte.gz")
    y = idx(f"{DATA}/{prefix}-labels-idx1-ubyte.gz")
    if limit:
        x, y = x[:limit], y[:limit]
    x = (torch.from_numpy(x.astype(np.float32) / 255.0) - 0.2860) / 0.3530
    return x.unsqueeze(1), torch.from_numpy(y.astype(np.int64))


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


def run(model_kind, precision, x, y, xt, yt, epochs):
    torch.manual_seed(1)
    model = Cnn() if model_kind == "cnn" else Mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    low = precision == "bf16"
    times = []
    for epoch in range(epochs):
        g = torch.Generator().manual_seed(epoch)
        perm = torch.randperm(len(x), generator=g)
        model.train()
        t0 = time.perf_counter()
        for i in range(0, len(x), 64):
            b = perm[i:i + 64]
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=low):
                loss = F.cross_entropy(model(x[b]), y[b])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        times.append(time.perf_counter() - t0)
    model.eval()
    correct = 0
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=low):
        for i in range(0, len(xt), 500):
            correct += (model(xt[i:i + 500]).argmax(1) == yt[i:i + 500]).sum().item()
    return times, correct / len(xt)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="cnn", choices=["cnn", "mlp"])
    ap.add_argument("--limit", type=int, default=5000)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    x, y = load("train", args.limit)
    xt, yt = load("test")
    for precision in ("f32", "bf16"):
        times, acc = run(args.model, precision, x, y, xt, yt, args.epochs)
        print(f"torch {torch.__version__} {args.model} {precision}: epoch {min(times):.2f} s "
              f"({args.limit / min(times):.0f} images/s), test accuracy {acc * 100:.2f}%")


if __name__ == "__main__":
    main()
