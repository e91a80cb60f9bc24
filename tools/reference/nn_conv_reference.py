#!/usr/bin/env python3
"""Writes tests/nn/data/nn_conv_reference.txt: PyTorch's (float64) values and gradients for the
convolution breadth of tests/nn/conv_breadth_test.cpp: conv_transpose1d / conv_transpose2d,
conv3d and interpolate (nearest, nearest-exact, linear, bilinear; size or scale_factor;
align_corners; recompute_scale_factor).

Same conventions as nn_reference.py: inputs are det(shape, a, b) (element i = sin(a * i + b)),
which the C++ tests rebuild; gradients are of sum(y * det(y.shape, 0.29, 0.4)). Each case also
writes "<name>.shape", the output's shape.
Run with Debian's python3-torch:  /usr/bin/python3 tools/reference/nn_conv_reference.py
"""
import os

import torch
import torch.nn.functional as F

from refutil import det, emit, lines, value_and_grads  # noqa: E402 (sets float64)
ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))


def case(prefix, fn, inputs):
    value_and_grads(prefix, fn, inputs)
    emit(prefix + ".shape", torch.tensor(list(fn(*inputs).shape), dtype=torch.float64))


def conv_case(prefix, conv, x, wshape, has_bias, kw):
    """Weight det(wshape, 0.53, 0.7) * 0.5, bias det((out,), 0.9, 0.4); out from the weight."""
    w = det(wshape, 0.53, 0.7) * 0.5
    if has_bias:
        out = wshape[1] * kw.get("groups", 1) if conv in (F.conv_transpose1d, F.conv_transpose2d) else wshape[0]
        b = det((out,), 0.9, 0.4)
        case(prefix, lambda x, w, b: conv(x, w, b, **kw), [x, w, b])
    else:
        case(prefix, lambda x, w: conv(x, w, None, **kw), [x, w])


# ---- transposed convolutions: weight [in, out / groups, k...] ---------------------------------
x2 = det((2, 4, 5, 4), 0.37, 0.1)
ct2_cases = {
    "basic": ((4, 6, 3, 3), True, {}),
    "stride_pad_outpad": ((4, 3, 3, 2), True, {"stride": (2, 3), "padding": (1, 0), "output_padding": (1, 2)}),
    "dil_groups": ((4, 3, 3, 3), False, {"stride": 2, "padding": 1, "dilation": (2, 1), "groups": 2}),
    # output_padding >= stride (allowed because it is < dilation): trailing rows/columns are bias only.
    "outpad_dilation": ((4, 2, 2, 3), True, {"dilation": 3, "output_padding": (2, 1), "groups": 4}),
    "big_padding": ((4, 2, 3, 3), True, {"stride": 3, "padding": (2, 3), "output_padding": 2}),
}
for name, (wshape, has_bias, kw) in ct2_cases.items():
    conv_case("ct2." + name, F.conv_transpose2d, x2, wshape, has_bias, kw)

x1 = det((2, 4, 7), 0.37, 0.1)
ct1_cases = {
    "basic": ((4, 5, 3), True, {}),
    "all": ((4, 3, 3), True, {"stride": 3, "padding": 2, "output_padding": 1, "dilation": 2, "groups": 2}),
    "outpad_dilation": ((4, 2, 2), False, {"dilation": 2, "output_padding": 1}),
}
for name, (wshape, has_bias, kw) in ct1_cases.items():
    conv_case("ct1." + name, F.conv_transpose1d, x1, wshape, has_bias, kw)

# ---- conv3d: weight [out, in / groups, kd, kh, kw] --------------------------------------------
x3 = det((2, 4, 5, 6, 5), 0.37, 0.1)
c3_cases = {
    "basic": ((6, 4, 3, 3, 2), True, {}),
    "stride_pad_dil": ((6, 4, 3, 2, 3), True, {"stride": (2, 1, 2), "padding": (1, 2, 0), "dilation": (2, 1, 2)}),
    "groups": ((6, 2, 2, 3, 3), False, {"padding": 1, "groups": 2, "stride": (1, 2, 1)}),
    "same": ((4, 4, 2, 3, 4), True, {"padding": "same", "dilation": (1, 2, 1)}),
    "depthwise": ((8, 1, 3, 1, 2), True, {"groups": 4, "stride": 2, "padding": (2, 0, 1)}),
}
for name, (wshape, has_bias, kw) in c3_cases.items():
    conv_case("c3." + name, F.conv3d, x3, wshape, has_bias, kw)

# ---- interpolate ------------------------------------------------------------------------------
xi1 = det((2, 3, 7), 0.37, 0.1)
xi2 = det((2, 3, 5, 4), 0.41, 0.2)
interp_cases = {
    # name: (input, kwargs)
    "nearest1d_size_up": (xi1, {"size": 12, "mode": "nearest"}),
    "nearest1d_size_down": (xi1, {"size": 4, "mode": "nearest"}),
    "nearest1d_scale": (xi1, {"scale_factor": 1.7, "mode": "nearest"}),
    "nearest1d_double": (xi1, {"scale_factor": 2, "mode": "nearest"}),
    "nearest2d_size": (xi2, {"size": (8, 7), "mode": "nearest"}),
    "nearest2d_scale": (xi2, {"scale_factor": (2.0, 1.5), "mode": "nearest"}),
    "nearest2d_scale_down": (xi2, {"scale_factor": 0.6, "mode": "nearest"}),
    "nearest2d_recompute": (xi2, {"scale_factor": (1.3, 2.7), "mode": "nearest", "recompute_scale_factor": True}),
    "nearest_exact2d_size": (xi2, {"size": (7, 3), "mode": "nearest-exact"}),
    "nearest_exact1d_scale": (xi1, {"scale_factor": 1.6, "mode": "nearest-exact"}),
    "linear_size": (xi1, {"size": 12, "mode": "linear", "align_corners": False}),
    "linear_size_ac": (xi1, {"size": 12, "mode": "linear", "align_corners": True}),
    "linear_scale": (xi1, {"scale_factor": 2.5, "mode": "linear", "align_corners": False}),
    "linear_scale_ac": (xi1, {"scale_factor": 1.5, "mode": "linear", "align_corners": True}),
    "linear_down": (xi1, {"scale_factor": 0.6, "mode": "linear", "align_corners": False}),
    "linear_one_ac": (xi1, {"size": 1, "mode": "linear", "align_corners": True}),
    "linear_recompute": (xi1, {"scale_factor": 1.7, "mode": "linear", "recompute_scale_factor": True}),
    "bilinear_size": (xi2, {"size": (8, 7), "mode": "bilinear", "align_corners": False}),
    "bilinear_size_ac": (xi2, {"size": (8, 7), "mode": "bilinear", "align_corners": True}),
    "bilinear_scale": (xi2, {"scale_factor": (1.5, 2.25), "mode": "bilinear", "align_corners": False}),
    "bilinear_scale_ac": (xi2, {"scale_factor": 1.7, "mode": "bilinear", "align_corners": True}),
    "bilinear_down": (xi2, {"size": (3, 2), "mode": "bilinear", "align_corners": False}),
}
for name, (xin, kw) in interp_cases.items():
    case("interp." + name, lambda x, kw=kw: F.interpolate(x, **kw), [xin])

with open(os.path.join(ROOT, "tests", "nn", "data", "nn_conv_reference.txt"), "w") as f:
    f.write("# generated by tools/reference/nn_conv_reference.py with torch " + torch.__version__ + "\n")
    f.write("\n".join(lines) + "\n")
print("wrote", len(lines), "reference lines")
