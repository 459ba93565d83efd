#!/usr/bin/env python3
"""make_corpus.py - writes the seed corpus of fuzz_safetensors into tests/fuzz/corpus/.
A few small valid files (every dtype, metadata, zero-size and scalar tensors) and a few
broken ones; it does not need the safetensors or torch packages. Run: python3 make_corpus.py"""
import json, os, struct

DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
SIZE = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
        "U8": 1, "BOOL": 1}


def build(tensors, meta=None, pad=True):
    """tensors: list of (name, dtype, shape, bytes) laid out back to back."""
    header, data = {}, b""
    if meta is not None:
        header["__metadata__"] = meta
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    if pad:
        h += b" " * (-(8 + len(h)) % 8)
    return struct.pack("<Q", len(h)) + h + data


def raw_header(h, data=b""):
    return struct.pack("<Q", len(h)) + h + data


def main():
    os.makedirs(DIR, exist_ok=True)
    f16 = struct.pack("<8H", 0x3C00, 0xC100, 0x7BFF, 0x0001, 0x03FF, 0x7C00, 0x8000, 0x7E00)
    bf16 = struct.pack("<4H", 0x3F80, 0xC020, 0x7F80, 0x7FC0)
    seeds = {
        "valid_empty": build([]),
        "valid_f32": build([("w", "F32", [2, 2], struct.pack("<4f", 1, -2.5, 0.5, 3))]),
        "valid_halves": build([("a.f16", "F16", [8], f16), ("b.bf16", "BF16", [2, 2], bf16)],
                              meta={"format": "pt"}),
        "valid_all_dtypes": build([(f"t{i}", d, [2], bytes(range(2 * s)))
                                   for i, (d, s) in enumerate(SIZE.items())]),
        "valid_zero_and_scalar": build([("empty", "F32", [0, 3], b""),
                                        ("scalar", "BF16", [], b"\x80\x3f"),
                                        ("odd", "U8", [3], b"\x01\x02\x03"),
                                        ("after.odd", "F16", [1], b"\x00\x3c")]),
        "valid_unicode": build([("caf\u00e9 \"q\"", "I8", [1], b"\x05")], meta={"k": "\u20ac"}),
        "bad_hole": raw_header(b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
                               b'"b":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}}', b"xyz"),
        "bad_overlap": raw_header(b'{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},'
                                  b'"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}',
                                  b"xyz"),
        "bad_utf8": raw_header(b'{"\xed\xa0\x80":{"dtype":"U8","shape":[1],'
                               b'"data_offsets":[0,1]}}', b"x"),
        "bad_truncated": build([("w", "F32", [4], bytes(16))])[:-5],
        "bad_dtype": raw_header(b'{"a":{"dtype":"F8","shape":[1],"data_offsets":[0,1]}}', b"x"),
    }
    for name, blob in seeds.items():
        with open(os.path.join(DIR, name + ".safetensors"), "wb") as fp:
            fp.write(blob)


if __name__ == "__main__":
    main()
