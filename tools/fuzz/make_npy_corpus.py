#!/usr/bin/env python3
"""Writes tests/io/data/npy_corpus, the seed corpus of tools/fuzz/npy_fuzz.cpp and the files
tests/io/npy_test.cpp replays:
  valid_numpy_*   written by NumPy itself (numpy.save / numpy.lib.format.write_array): every
                  dtype Ember reads, C and Fortran order, big-endian, format versions 1.0-3.0,
                  scalar and empty arrays. Values: numpy.arange(n) reshaped (bool: odd
                  positions True), so the test computes what each must hold.
  valid_*         hand-made variants NumPy would also read (double quotes, other key order,
                  no trailing comma, unaligned header).
  bad_*           malformed files that must be refused with ember::Error.
A developer tool: needs NumPy (the bench venv has it: ~/.cache/ember/bench-venv/bin/python
tools/fuzz/make_npy_corpus.py); the tests only read the committed files."""
import io
import os
import struct

import numpy as np

OUT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "tests", "io", "data", "npy_corpus"))
os.makedirs(OUT, exist_ok=True)


def write(name, blob):
    with open(os.path.join(OUT, name + ".npy"), "wb") as f:
        f.write(blob)


def numpy_file(arr, version=None):
    buf = io.BytesIO()
    if version is None:
        np.save(buf, arr, allow_pickle=False)
    else:
        np.lib.format.write_array(buf, arr, version=version, allow_pickle=False)
    return buf.getvalue()


def values(shape, dtype):
    n = int(np.prod(shape)) if shape else 1
    a = np.arange(n).reshape(shape)
    return (a % 2 == 1) if dtype == "bool" else a.astype(dtype)


# NumPy-written files: name = valid_numpy_<dtype>_<shape>[_<variant>].
for dtype in ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
              "uint64", "bool"]:
    write(f"valid_numpy_{dtype}_2x3", numpy_file(values((2, 3), dtype)))
write("valid_numpy_float32_2x3x4_fortran", numpy_file(np.asfortranarray(values((2, 3, 4), "float32"))))
write("valid_numpy_float64_3x2_bigendian", numpy_file(values((3, 2), "float64").astype(">f8")))
write("valid_numpy_int32_5_bigendian", numpy_file(values((5,), "int32").astype(">i4")))
write("valid_numpy_int16_3_layout", numpy_file(np.array([1, -2, 3], np.int16)))
write("valid_numpy_float32_scalar", numpy_file(np.float32(0.0).reshape(())))
write("valid_numpy_float32_0x3", numpy_file(np.zeros((0, 3), np.float32)))
write("valid_numpy_int64_4_v2", numpy_file(values((4,), "int64"), version=(2, 0)))
write("valid_numpy_int64_4_v3", numpy_file(values((4,), "int64"), version=(3, 0)))


def hand(header, data, version=1, length=None):
    text = header.encode("latin1")
    n = len(text) if length is None else length
    pre = b"\x93NUMPY" + bytes([version, 0]) + (struct.pack("<H", n) if version == 1 else struct.pack("<I", n))
    return pre + text + data


six_f32 = struct.pack("<6f", 0, 1, 2, 3, 4, 5)
write("valid_hand_double_quotes", hand('{"descr": "<f4", "fortran_order": False, "shape": (2, 3)}\n', six_f32))
write("valid_hand_key_order", hand("{'shape': (2,3), 'fortran_order': False, 'descr': '<f4',}", six_f32))
write("bad_magic", b"\x93NUMPX" + hand("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", six_f32)[6:])
write("bad_version", hand("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", six_f32, version=9))
write("bad_truncated_preamble", b"\x93NUMPY\x01\x00\x10")
write("bad_header_length", hand("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", six_f32, length=60000))
write("bad_truncated_data", hand("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", six_f32[:-1]))
write("bad_trailing_data", hand("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", six_f32 + b"\0"))
write("bad_complex", hand("{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }", six_f32))
write("bad_structured", hand("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,), }", six_f32))
write("bad_string_dtype", hand("{'descr': '<U3', 'fortran_order': False, 'shape': (2,), }", six_f32))
write("bad_missing_shape", hand("{'descr': '<f4', 'fortran_order': False}", six_f32))
write("bad_unknown_key", hand("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}", six_f32))
write("bad_negative_dim", hand("{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 3), }", six_f32))
write("bad_overflowing_shape",
      hand("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16), }", six_f32))
write("bad_huge_dim", hand("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", six_f32))
write("bad_unterminated", hand("{'descr': '<f4, 'fortran_order': False, 'shape': (2, 3)", six_f32))
write("bad_fortran_value", hand("{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3), }", six_f32))
write("bad_text_after", hand("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } x", six_f32))
write("bad_empty", b"")
print("wrote", len(os.listdir(OUT)), "files to", OUT)
