#!/usr/bin/env python3
"""The PyTorch side of tests/onnx/models_test.cpp CnnFineTunesOnFashionMnist: the same weights as
tests/onnx/models/resnet_mnist (rebuilt with export_models.py's seeds), the same 320 images, Adam
lr 1e-2, 4 epochs of batches of 32, eval-mode BatchNorm. Prints the loss before and after
(2.32425 -> 1.53565 with torch 2.15). Developer tool: ~/.cache/ember/bench-venv/bin/python."""
import gzip, numpy as np, torch, sys
sys.path.insert(0, __import__('os').path.dirname(__file__))
import export_models as em
torch.manual_seed(0)
gen = torch.Generator().manual_seed(1)
cnn = em.SmallResNet(); em.randomize_batchnorm(cnn, gen); torch.randn(2,3,16,16,generator=gen)
m = em.SmallResNet(in_channels=1, classes=10, width=8); em.randomize_batchnorm(m, gen)
img = np.frombuffer(gzip.open('/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz').read()[16:], np.uint8)[:320*784]
lab = np.frombuffer(gzip.open('/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz').read()[8:], np.uint8)[:320]
x = (torch.tensor(img, dtype=torch.float32).reshape(320,1,28,28)/255 - 0.2860)/0.3530
y = torch.tensor(lab, dtype=torch.int64)
m.eval()
opt = torch.optim.Adam(m.parameters(), lr=1e-2)
f = torch.nn.functional.cross_entropy
with torch.no_grad(): print('before', f(m(x), y).item())
for e in range(4):
    for s in range(0, 320, 32):
        opt.zero_grad(); l = f(m(x[s:s+32]), y[s:s+32]); l.backward(); opt.step()
with torch.no_grad(): print('after', f(m(x), y).item())
