#!/usr/bin/env python3
"""Writes the seed corpora of the fuzzers (tools/fuzz/*_fuzz.cpp):
  tests/io/data/safetensors_corpus  valid files of every dtype and malformed variants (truncations,
                                    bad lengths, bad JSON, wrong offsets, overlapping, aliased or
                                    gapped ranges, trailing bytes, duplicate keys, overflowing shapes)
  tests/data/idx_corpus             IDX files plain and gzip-compressed (multi-member, trailing
                                    garbage, bombs, overflowing dimensions, truncations)
  tests/data/csv_corpus             CSV text (BOM, CRLF, ragged rows, out-of-range numbers, NaN, ...)
Names say what the reader must do: valid_* must be accepted, fuzz_* (added from libFuzzer runs)
may go either way, every other file must be refused with ember::Error. The test suite replays
every file (tests/io/safetensors_test.cpp, tests/data/corpus_replay_test.cpp), so CI checks them
under the sanitizers too. Plain python3, no packages needed."""
import gzip
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
write("valid_bool_bytes", file_with({"b": {"dtype": "BOOL", "shape": [3], "data_offsets": [0, 3]}}, b"\x00\x07\xff"))
# What the reference implementation refuses: the ranges must tile the data section exactly.
write("overlap", file_with({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                            "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, b"\0" * 12))
write("aliased", file_with({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                            "b": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8))
write("gap", file_with({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
                        "b": {"dtype": "U8", "shape": [1], "data_offsets": [2, 3]}}, b"\0" * 3))
write("leading_gap", file_with({"a": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}}, b"\0" * 2))
write("trailing_bytes", file_with({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}, b"\0" * 5))
write("data_without_tensors", file_with({}, b"\0" * 4))
write("duplicate_key", file_with(b'{"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}, '
                                 b'"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}', b"\0"))
write("duplicate_metadata", file_with(b'{"__metadata__": {"k": "1"}, "__metadata__": {"k": "2"}}'))
write("duplicate_field", file_with(b'{"a": {"dtype": "U8", "dtype": "F32", "shape": [1], "data_offsets": [0, 1]}}', b"\0"))
write("overflow_zero_shape", file_with({"a": {"dtype": "F32", "shape": [0, 2**62, 2**62], "data_offsets": [0, 0]}}))
write("overflow_bytes", file_with({"a": {"dtype": "F64", "shape": [2**61], "data_offsets": [0, 8]}}, b"\0" * 8))
write("header_leading_space", file_with(b' {}'))
write("valid_unordered", file_with({"b": {"dtype": "U8", "shape": [2], "data_offsets": [1, 3]},
                                    "e": {"dtype": "F32", "shape": [0], "data_offsets": [1, 1]},
                                    "a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}, b"\1\2\3"))
print("wrote", len(os.listdir(OUT)), "corpus files to", OUT)

DATA = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data"))


def corpus(name):
    """The corpus folder, emptied of its seeds (fuzz_* files found by libFuzzer stay)."""
    path = os.path.join(DATA, name)
    os.makedirs(path, exist_ok=True)
    for f in os.listdir(path):
        if not f.startswith("fuzz_"):
            os.remove(os.path.join(path, f))
    return path


def gz(blob):
    return gzip.compress(blob, mtime=0)  # fixed time stamp: the files do not change between runs


def idx(type_code, dims, payload=b""):
    return bytes([0, 0, type_code, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + payload


IDX = corpus("idx_corpus")
idx_files = {
    "valid_u8": idx(0x08, [2, 3], bytes(range(6))),
    "valid_i8": idx(0x09, [3], b"\x01\xff\x80"),
    "valid_i16": idx(0x0B, [2], b"\x01\x02\xff\xfe"),
    "valid_i32": idx(0x0C, [1, 1], struct.pack(">i", -5)),
    "valid_f32": idx(0x0D, [2], struct.pack(">2f", 1.5, -2)),
    "valid_f64": idx(0x0E, [1], struct.pack(">d", 3.25)),
    "valid_empty": idx(0x08, [0, 28, 28]),
    "valid_labels.gz": gz(idx(0x08, [5], bytes([0, 9, 3, 3, 1]))),
    "valid_images.gz": gz(idx(0x08, [2, 4, 4], bytes(range(32)))),
    "valid_multi_member.gz": gz(idx(0x08, [4, 4], bytes(range(16)))[:10]) + gz(b"") +
                             gz(idx(0x08, [4, 4], bytes(range(16)))[10:]),
    "bad_magic": b"\x1f\x00\x08\x01" + struct.pack(">I", 1) + b"\0",
    "bad_type": idx(0x07, [1], b"\0"),
    "bad_rank0": idx(0x08, []),
    "truncated_header": idx(0x08, [2, 3])[:7],
    "truncated_data": idx(0x08, [2, 3], b"\0" * 5),
    "trailing_bytes": idx(0x08, [2], b"\0" * 3),
    "overflow_dims": idx(0x08, [1 << 20, 1 << 20, 1 << 24]),
    "overflow_zero_dims": idx(0x08, [0, 0xFFFFFFFF, 0xFFFFFFFF]),
    "huge_dims": idx(0x0E, [1 << 16, 1 << 16, 1 << 16]),
    "gzip_garbage_after.gz": gz(idx(0x08, [2], b"\1\2")) + b"junk",
    "gzip_bomb.gz": gz(idx(0x08, [4], b"\0" * (1 << 20))),
    "gzip_truncated.gz": gz(idx(0x08, [64], bytes(range(64))))[:20],
    "gzip_short_data.gz": gz(idx(0x08, [8], b"\0" * 4)),
    "gzip_header_only.gz": gz(b"\0\0"),
    "gzip_bad_crc.gz": gz(idx(0x08, [1], b"\7"))[:-8] + b"\0\0\0\0\1\0\0\0",
    "gzip_not_deflate.gz": b"\x1f\x8b" + b"\x55" * 20,
}
for name, blob in idx_files.items():
    with open(os.path.join(IDX, name), "wb") as f:
        f.write(blob)
print("wrote", len(idx_files), "corpus files to", IDX)

CSV = corpus("csv_corpus")
csv_files = {
    "valid_basic": "a,b,y\n1,2,3\n4,5.5,-6\n",
    "valid_crlf": "a,y\r\n1,2\r\n3,4\r\n",
    "valid_bom": "\ufeffy,x\n1,2\n",
    "valid_quoted_spaces": "\"a\" , \"y\"\n 1 , 2 \n\n",
    "valid_exponents": "a,y\n1e-50,1e30\n-0,3.4e38\n",
    "valid_header_only": "a,y\n",
    "bad_out_of_range": "a,y\n1e39,1\n",
    "bad_nan": "a,y\nnan,1\n",
    "bad_inf": "a,y\n1,-inf\n",
    "bad_empty_field": "a,y\n,1\n",
    "bad_ragged": "a,y\n1,2,3\n",
    "bad_duplicate_columns": "a,y,a\n1,2,3\n",
    "bad_unnamed_column": "a,,y\n1,2,3\n",
    "bad_no_header": "\n \n",
    "bad_no_target": "a,b\n1,2\n",
    "bad_inner_cr": "a,y\n1\r2,3\n",
    "bad_text": "a,y\nx,1\n",
}
for name, text in csv_files.items():
    with open(os.path.join(CSV, name), "wb") as f:
        f.write(text.encode())
print("wrote", len(csv_files), "corpus files to", CSV)
