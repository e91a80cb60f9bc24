#!/usr/bin/env python3
"""Exports small PyTorch models to ONNX for Ember's import tests (tests/onnx/models_test.cpp).

Developer tool, never a test dependency: run it with a Python that has torch + onnx, e.g.
  ~/.cache/ember/bench-venv/bin/python tools/onnx/export_models.py
It writes, per model, tests/onnx/models/<name>/ with model.onnx (opset 17, random weights from a
fixed seed), input_<i>.pb and PyTorch's output_<i>.pb (serialized TensorProtos, like the ONNX
node corpus). TrainingMode.PRESERVE on an eval-mode model keeps BatchNormalization nodes
(the default EVAL mode folds them into the convolutions). Uses the TorchScript exporter (dynamo=False): it needs no onnxscript and emits
plain opset-17 ops. The batch dim is dynamic (dim_param "batch"). Sizes are kept small so each file stays well under 300 KB."""
import os

import onnx
import onnx.numpy_helper
import torch
import torch.nn as nn

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "tests", "onnx", "models"))
OPSET = 17


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.skip = None
        if stride != 1 or cin != cout:
            self.skip = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (x if self.skip is None else self.skip(x)))


class SmallResNet(nn.Module):
    """conv-bn-relu stem, max pool, two residual blocks (one downsampling), global average pool,
    linear head."""

    def __init__(self, in_channels=3, classes=10, width=8):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(in_channels, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        self.pool = nn.MaxPool2d(2)
        self.block1 = Block(width, width, 1)
        self.block2 = Block(width, 2 * width, 2)
        self.head = nn.Linear(2 * width, classes)

    def forward(self, x):
        x = self.block2(self.block1(self.pool(self.stem(x))))
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class LstmTagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(input_size=6, hidden_size=8, num_layers=2, batch_first=True)
        self.out = nn.Linear(8, 4)

    def forward(self, x):
        y, _ = self.lstm(x)
        return self.out(y)


class TinyEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(16)

    def forward(self, x):
        return self.norm(self.encoder(x))


def randomize_batchnorm(model, gen):
    # Fresh BatchNorm statistics are 0/1, which would hide a wrong mean/variance order.
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=gen) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
            m.weight.data.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
            m.bias.data.copy_(torch.randn(m.num_features, generator=gen) * 0.1)


def export(name, model, inputs, input_names):
    folder = os.path.join(ROOT, name)
    os.makedirs(folder, exist_ok=True)
    model.eval()
    with torch.no_grad():
        outputs = model(*inputs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    path = os.path.join(folder, "model.onnx")
    torch.onnx.export(model, tuple(inputs), path, opset_version=OPSET, dynamo=False, input_names=input_names,
                      output_names=["output_%d" % i for i in range(len(outputs))], do_constant_folding=True,
                      dynamic_axes={n: {0: "batch"} for n in input_names},
                      training=torch.onnx.TrainingMode.PRESERVE)
    onnx.checker.check_model(onnx.load(path))
    for i, t in enumerate(inputs):
        with open(os.path.join(folder, "input_%d.pb" % i), "wb") as f:
            f.write(onnx.numpy_helper.from_array(t.numpy(), input_names[i]).SerializeToString())
    for i, t in enumerate(outputs):
        with open(os.path.join(folder, "output_%d.pb" % i), "wb") as f:
            f.write(onnx.numpy_helper.from_array(t.numpy(), "output_%d" % i).SerializeToString())
    print("%s: %d bytes, ops %s" % (name, os.path.getsize(path),
                                    sorted({n.op_type for n in onnx.load(path).graph.node})))


def main():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    cnn = SmallResNet()
    randomize_batchnorm(cnn, gen)
    export("resnet_cnn", cnn, [torch.randn(2, 3, 16, 16, generator=gen)], ["image"])
    # The fine-tuning test trains this one on Fashion-MNIST (28x28, one channel).
    mnist = SmallResNet(in_channels=1, classes=10, width=8)
    randomize_batchnorm(mnist, gen)
    export("resnet_mnist", mnist, [torch.randn(1, 1, 28, 28, generator=gen)], ["image"])
    export("lstm", LstmTagger(), [torch.randn(3, 5, 6, generator=gen)], ["sequence"])
    export("transformer_encoder", TinyEncoder(), [torch.randn(2, 7, 16, generator=gen)], ["tokens"])


if __name__ == "__main__":
    main()
