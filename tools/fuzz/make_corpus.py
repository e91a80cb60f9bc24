#!/usr/bin/env python3
"""Writes the seed corpus of the safetensors fuzzer (tests/io/data/safetensors_corpus): valid
files of every dtype and malformed variants (truncations, bad lengths, bad JSON, wrong offsets,
overflowing shapes). Files named fuzz_* were added from a libFuzzer run. tests/io/safetensors_test.cpp
replays the corpus through the parser in CI; the
fuzzer (tools/fuzz/safetensors_fuzz.cpp) starts from it. Plain python3, no packages needed."""
import json
import os
import struct

OUT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "tests", "io", "data", "safetensors_corpus"))
os.makedirs(OUT, exist_ok=True)


def file_with(header, data=b"", length=None):
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    n = len(text) if length is None else length
    return struct.pack("<Q", n) + text + data


def write(name, blob):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(blob)


valid = file_with({"__metadata__": {"format": "pt"},
                   "a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
                   "b": {"dtype": "BF16", "shape": [3], "data_offsets": [16, 22]},
                   "c": {"dtype": "BOOL", "shape": [2], "data_offsets": [22, 24]}},
                  struct.pack("<4f", 1, 2, 3, 4) + b"\x80\x3f\x00\x40\x40\x40" + b"\x01\x00")
write("valid_mixed", valid)
write("valid_empty", file_with({}))
write("valid_scalar_f64", file_with({"s": {"dtype": "F64", "shape": [], "data_offsets": [0, 8]}}, struct.pack("<d", 3.5)))
write("valid_zero_size", file_with({"z": {"dtype": "I64", "shape": [0, 4], "data_offsets": [0, 0]}}))
write("valid_f16_i32_u8", file_with({"h": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]},
                                     "i": {"dtype": "I32", "shape": [1], "data_offsets": [4, 8]},
                                     "u": {"dtype": "U8", "shape": [3], "data_offsets": [8, 11]}},
                                    b"\x00\x3c\x00\xc0" + struct.pack("<i", -7) + b"\x01\x02\xff"))
for cut in (0, 4, 8, 20, len(valid) - 1):
    write("truncated_%d" % cut, valid[:cut])
write("length_too_big", file_with({}, length=1 << 40))
write("length_past_end", file_with({"a": 1}, length=500))
write("bad_json", file_with(b'{"a": {"dtype": "F32", '))
write("not_object", file_with([1, 2, 3]))
write("entry_not_object", file_with({"a": 5}))
write("missing_offsets", file_with({"a": {"dtype": "F32", "shape": [1]}}, b"\0" * 4))
write("bad_dtype", file_with({"a": {"dtype": "Q7", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4))
write("dtype_number", file_with({"a": {"dtype": 3, "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4))
write("size_mismatch", file_with({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 4]}}, b"\0" * 4))
write("offsets_reversed", file_with({"a": {"dtype": "F32", "shape": [0], "data_offsets": [4, 0]}}, b"\0" * 4))
write("offsets_past_end", file_with({"a": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}}, b"\0" * 4))
write("negative_shape", file_with({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, b"\0" * 4))
write("float_shape", file_with({"a": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}}, b"\0" * 4))
write("overflow_shape", file_with({"a": {"dtype": "F64", "shape": [2**62, 2**62, 16], "data_offsets": [0, 8]}}, b"\0" * 8))
write("huge_offsets", file_with({"a": {"dtype": "U8", "shape": [1], "data_offsets": [2**64 - 1, 2**64]}}, b"\0"))
write("rank_too_big", file_with({"a": {"dtype": "U8", "shape": [1] * 9, "data_offsets": [0, 1]}}, b"\0"))
write("metadata_not_strings", file_with({"__metadata__": {"k": [1]}}))
write("metadata_not_object", file_with({"__metadata__": "x"}))
write("bool_bytes", file_with({"b": {"dtype": "BOOL", "shape": [3], "data_offsets": [0, 3]}}, b"\x00\x07\xff"))
print("wrote", len(os.listdir(OUT)), "corpus files to", OUT)
