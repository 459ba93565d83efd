#!/usr/bin/python3
"""qmap_ref.py - bitsandbytes' dynamic quantization maps as torch computes them, for the unit
test (tests/test_adam8bit.c) to compare zerotrain's maps with, entry by entry, bit for bit.

create_dynamic_map below is bitsandbytes' (bitsandbytes/functional.py) with its defaults
(max_exponent_bits=7, total_bits=8) run by torch itself: float32 torch.linspace, float32 means,
a python float times a float32 tensor. torch's CPU linspace gives different last bits by the
CPU capability it dispatches to (see optimizer/quant.h), so the table is written for one
capability, chosen before torch is imported:

  ATEN_CPU_CAPABILITY=avx2 /usr/bin/python3 tests/ref/qmap_ref.py > tests/fixtures/adam8bit/qmap_avx2.txt

(likewise default, avx512; the machine must support the capability asked for). Output: two
lines, the signed map then the unsigned one, each 256 entries as 8 hex digits (float32 bits).
"""
import os
import struct
import sys

import torch


def create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8):
    data = []
    non_sign_bits = total_bits - 1
    additional_items = 2 ** (non_sign_bits - max_exponent_bits) - 1
    for i in range(max_exponent_bits):
        fraction_items = int(
            2 ** (i + non_sign_bits - max_exponent_bits) + 1
            if signed
            else 2 ** (i + non_sign_bits - max_exponent_bits + 1) + 1,
        )
        boundaries = torch.linspace(0.1, 1, fraction_items, dtype=torch.float32)
        means = (boundaries[:-1] + boundaries[1:]) / 2.0
        data += ((10 ** (-(max_exponent_bits - 1) + i)) * means).tolist()
        if signed:
            data += (-(10 ** (-(max_exponent_bits - 1) + i)) * means).tolist()
    if additional_items > 0:
        boundaries = torch.linspace(0.1, 1, additional_items + 1, dtype=torch.float32)
        means = (boundaries[:-1] + boundaries[1:]) / 2.0
        data += ((10 ** (-(max_exponent_bits - 1) + i)) * means).tolist()
        if signed:
            data += (-(10 ** (-(max_exponent_bits - 1) + i)) * means).tolist()
    data.append(0)
    data.append(1.0)
    assert len(data) == 2 ** total_bits
    gap = 256 - len(data)
    for i in range(gap):
        data.append(0)
    data.sort()
    return torch.tensor(data, dtype=torch.float32)


def main():
    want = os.environ.get("ATEN_CPU_CAPABILITY", "")
    got = torch.backends.cpu.get_cpu_capability() if hasattr(torch.backends, "cpu") and \
        hasattr(torch.backends.cpu, "get_cpu_capability") else \
        torch.__config__.show().split("CPU capability usage:")[1].split("\n")[0].strip()
    names = {"default": "NO AVX", "avx2": "AVX2", "avx512": "AVX512"}
    if want not in names or got != names[want]:
        sys.exit("qmap_ref.py: set ATEN_CPU_CAPABILITY to default, avx2 or avx512 (torch runs %r)"
                 % got)
    for signed in (True, False):
        m = create_dynamic_map(signed)
        print("".join("%08x" % struct.unpack("<I", struct.pack("<f", float(x)))[0] for x in m))


if __name__ == "__main__":
    main()
