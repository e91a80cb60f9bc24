#!/usr/bin/env python3
"""PyTorch side-by-side reference for `ember train fashion-mnist`: the same models (src/cli/models.h),
the same normalization, Adam with a per-step cosine schedule to 5% of the rate, batch 64, test
evaluation every epoch. Reads the IDX files of Debian's dataset-fashion-mnist. Prints the time per
epoch and the test accuracy. Run it at its best thread settings on this machine:

  OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 GOMP_SPINCOUNT=0 \
    /usr/bin/python3 tools/train_fashion_mnist_torch.py --model mlp --epochs 3
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


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="cnn", choices=["cnn", "mlp"])
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--limit", type=int, default=0)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    torch.manual_seed(a.seed)
    norm = lambda x: (torch.from_numpy(x.astype(np.float32) / 255.0).unsqueeze(1) - 0.2860) / 0.3530
    xtr, ytr = norm(read_idx("train-images-idx3-ubyte")), torch.from_numpy(read_idx("train-labels-idx1-ubyte").astype(np.int64))
    xte, yte = norm(read_idx("t10k-images-idx3-ubyte")), torch.from_numpy(read_idx("t10k-labels-idx1-ubyte").astype(np.int64))
    if a.limit:
        xtr, ytr = xtr[: a.limit], ytr[: a.limit]
    model = Cnn() if a.model == "cnn" else Mlp()
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    steps = a.epochs * math.ceil(len(xtr) / a.batch_size)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps, eta_min=a.lr * 0.05)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {a.model}, "
          f"{sum(p.numel() for p in model.parameters())} parameters")
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
