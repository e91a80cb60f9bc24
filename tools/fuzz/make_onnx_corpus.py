#!/usr/bin/env python3
"""Writes tests/onnx/fuzz_corpus, the seed corpus of tools/fuzz/onnx_fuzz.cpp: tiny valid models
(valid_*: must load and run on zero inputs) and mutations of them that the loader must refuse
with ember::Error (truncations, sizes that disagree with the data, hostile shapes, a missing or
doubly produced value, a cycle, unknown operators and types, wrong attribute types). fuzz_*
files (added from libFuzzer runs) may go either way. tests/onnx/fuzz_corpus_test.cpp replays
every file. Developer tool: needs the onnx package (~/.cache/ember/bench-venv/bin/python)."""
import os
import struct

import numpy as np
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "tests", "onnx", "fuzz_corpus"))
os.makedirs(OUT, exist_ok=True)
F = TensorProto.FLOAT


def model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def vi(name, dims, t=F):
    return helper.make_tensor_value_info(name, t, dims)


def write(name, m):
    blob = m if isinstance(m, bytes) else m.SerializeToString()
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(blob)
    return blob


rng = np.random.default_rng(0)
w = numpy_helper.from_array(rng.standard_normal((2, 3)).astype(np.float32), "W")
b = numpy_helper.from_array(np.array([0.5, -0.25], np.float32), "b")
gemm = model([helper.make_node("Gemm", ["x", "W", "b"], ["h"], transB=1), helper.make_node("Relu", ["h"], ["y"])],
             [vi("x", [1, 3])], [vi("y", [1, 2])], [w, b])
gemm_bytes = write("valid_gemm_relu", gemm)

k = numpy_helper.from_array(rng.standard_normal((2, 1, 3, 3)).astype(np.float32), "k")
bn = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in
      (("s", [1, 2]), ("bb", [0, 1]), ("mu", [0.1, -0.1]), ("var", [1, 0.5]))]
conv = model([helper.make_node("Conv", ["x", "k"], ["c"], pads=[1, 1, 1, 1]),
              helper.make_node("BatchNormalization", ["c", "s", "bb", "mu", "var"], ["n"]),
              helper.make_node("MaxPool", ["n"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
              helper.make_node("GlobalAveragePool", ["p"], ["y"])],
             [vi("x", [1, 1, 4, 4])], [vi("y", [1, 2, 1, 1])], [k] + bn)
conv_bytes = write("valid_conv_bn_pool", conv)

shape_fold = model([helper.make_node("Constant", [], ["shape"], value_ints=[2, 3]),
                    helper.make_node("ConstantOfShape", ["shape"], ["fill"],
                                     value=numpy_helper.from_array(np.array([2.5], np.float32))),
                    helper.make_node("Shape", ["x"], ["xs"]),
                    helper.make_node("Reshape", ["fill", "xs"], ["r"]),
                    helper.make_node("Add", ["x", "r"], ["y"])],
                   [vi("x", [2, 3])], [vi("y", [2, 3])])
write("valid_constant_folding", shape_fold)

softmax = model([helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
                 helper.make_node("Softmax", ["t"], ["s"], axis=-1),
                 helper.make_node("ReduceSum", ["s", "axes"], ["y"], keepdims=0)],
                [vi("x", [3, 2])], [vi("y", [2])], [numpy_helper.from_array(np.array([1], np.int64), "axes")])
write("valid_transpose_softmax_reduce", softmax)

lstm_w = numpy_helper.from_array(rng.standard_normal((1, 8, 3)).astype(np.float32), "Wl")
lstm_r = numpy_helper.from_array(rng.standard_normal((1, 8, 2)).astype(np.float32), "Rl")
lstm = model([helper.make_node("LSTM", ["x", "Wl", "Rl"], ["ys", "yh"], hidden_size=2)],
             [vi("x", [4, 1, 3])], [vi("yh", [1, 1, 2])], [lstm_w, lstm_r])
write("valid_lstm", lstm)

# Truncations of the valid files.
for cut in (1, 7, 20, len(gemm_bytes) // 2, len(gemm_bytes) - 1):
    write("truncated_gemm_%d" % cut, gemm_bytes[:cut])
for cut in (len(conv_bytes) // 3, len(conv_bytes) - 3):
    write("truncated_conv_%d" % cut, conv_bytes[:cut])
write("not_protobuf", b"\xff\xff\xff\xff not a model")

# An initializer whose dims disagree with its payload; one with hostile dims.
m = model(gemm.graph.node, gemm.graph.input, gemm.graph.output, [w, b])
m.graph.initializer[0].dims[:] = [2, 4]
write("initializer_size_mismatch", m)
m.graph.initializer[0].dims[:] = [1 << 40, 3]
write("initializer_huge_dims", m)
m.graph.initializer[0].dims[:] = [-2, -3]
write("initializer_negative_dims", m)
m = model(gemm.graph.node, gemm.graph.input, gemm.graph.output, [w, b])
m.graph.initializer[0].data_type = 99
write("initializer_unknown_type", m)

# A ConstantOfShape asking for 2^50 elements.
huge = model([helper.make_node("Constant", [], ["shape"], value_ints=[1 << 25, 1 << 25]),
              helper.make_node("ConstantOfShape", ["shape"], ["fill"]),
              helper.make_node("Add", ["x", "fill"], ["y"])], [vi("x", [1])], [vi("y", None)])
write("constant_of_shape_huge", huge)

write("missing_input", model([helper.make_node("Relu", ["nobody"], ["y"])], [vi("x", [2])], [vi("y", [2])]))
write("two_producers", model([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["y"])],
                             [vi("x", [2])], [vi("y", [2])]))
write("cycle", model([helper.make_node("Relu", ["b"], ["a"]), helper.make_node("Neg", ["a"], ["b"]),
                      helper.make_node("Add", ["x", "a"], ["y"])], [vi("x", [2])], [vi("y", [2])]))
write("unknown_operator", model([helper.make_node("FancyOp", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2])]))
write("undefined_output", model([helper.make_node("Relu", ["x"], ["h"])], [vi("x", [2])], [vi("y", [2])]))
write("transpose_bad_perm", model([helper.make_node("Transpose", ["c"], ["t"], perm=[0, 5]),
                                   helper.make_node("Add", ["x", "t"], ["y"])], [vi("x", [2, 2])], [vi("y", [2, 2])],
                                  [numpy_helper.from_array(np.zeros((2, 2), np.float32), "c")]))
write("reshape_bad_shape", model([helper.make_node("Reshape", ["c", "s"], ["r"]),
                                  helper.make_node("Add", ["x", "r"], ["y"])], [vi("x", [2])], [vi("y", [2])],
                                 [numpy_helper.from_array(np.zeros(6, np.float32), "c"),
                                  numpy_helper.from_array(np.array([4, -1], np.int64), "s")]))
m = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2])])
m.graph.input[0].type.tensor_type.elem_type = 23  # float4e2m1: no Ember dtype
write("input_unknown_type", m)
m = model([helper.make_node("Gemm", ["x", "W", "b"], ["y"], transB="yes")], [vi("x", [1, 3])], [vi("y", [1, 2])], [w, b])
write("attribute_wrong_type", m)
m = model([helper.make_node("Gather", ["c", "i"], ["g"]), helper.make_node("Add", ["x", "g"], ["y"])],
          [vi("x", [1])], [vi("y", [1])],
          [numpy_helper.from_array(np.zeros(3, np.float32), "c"), numpy_helper.from_array(np.array([7], np.int64), "i")])
write("gather_index_out_of_range", m)
# Raw data with a length that is not a multiple of the element size.
m = model(gemm.graph.node, gemm.graph.input, gemm.graph.output, [w, b])
m.graph.initializer[1].raw_data = struct.pack("<f", 1.0) + b"\x00\x00\x00"
write("raw_data_odd_length", m)
print("wrote", len(os.listdir(OUT)), "files to", OUT)
