#!/usr/bin/python3
"""adam8bit_ref.py - an independent numpy implementation of bitsandbytes' AdamW8bit, written
from bitsandbytes' own source, not from zerotrain's C:

- the maps: bitsandbytes' create_dynamic_map as torch computes it, read from the table
  tests/ref/qmap_ref.py wrote with torch (tests/fixtures/adam8bit/qmap_avx2.txt; see there
  why torch's CPU capability matters);
- 8-bit state (csrc/kernels.cu, kOptimizerStatic8bit2StateBlockwise<float, ADAM, 256, 1>,
  which optimizer_update_8bit_blockwise runs for "adam" with 256-element blocks): per block
  of a tensor, the loads padded to 256 (g with 0, state1 with code 128, state2 with code 0);
  where g is finite (isnan/isinf of g itself): g *= gnorm_scale,
  s2 = (code2[c2] * absmax2) * beta2 + ((1 - beta2) * g) * g,
  s1 = (code1[c1] * absmax1) * beta1 + (1 - beta1) * g; else s1 = s2 = 0; the new absmax is
  fmaxf from -FLT_MAX over |s| of all 256 (padding included); p += step_size * (s1 /
  (sqrt(s2) + correction2 * eps)), then p *= 1 - lr * wd when wd > 0, where g is finite;
  codes: quantize_2D<1>(s1 / absmax1) with the sign correction (signbit(code1[c]) !=
  signbit(s1): c + 1 if s1 > 0 else c - 1, in uint8), quantize_2D<0>(s2 / absmax2);
  correction1 = 1 - beta1^step, correction2 = sqrt(1 - beta2^step), step_size =
  -lr * correction2 / correction1. All float32. Where the kernel uses CUDA's approximate
  __powf and __fdividef, this uses C's powf (see powf below) and correctly rounded division;
  where it makes a NaN, CUDA's is positive (the canonical 0x7fffffff), so a NaN s1 counts as
  positive in the sign correction;
- quantize_2D transcribed: the binary search from pivot 127 over steps 64..1 (the first
  comparison against quadrants[1] = code[127], the second against quadrants[0 or 2] =
  code[63] or code[191], the same values as code[pivot]), lower starting at -1 (signed) or 0,
  upper at 1, then the float midpoints (upper + val) * 0.5f and (lower + val) * 0.5f;
- fp32 state (tensors below min_8bit_size = 4096): kOptimizer32bit2State<float, ADAM>:
  g = gnorm_scale * g; s1 = s1 * beta1 + (1 - beta1) * g; s2 = s2 * beta2 + (1 - beta2) *
  (g * g); p += step_size * (s1 / (sqrt(s2) + eps * correction2)), then the decay; except,
  as zerotrain's rule (the kernel has none), that a non-finite g * gnorm_scale leaves p and
  sets s1 = s2 = 0;
- the weight decay applies to tensors with the decay flag (a parameter group with wd = 0).

Fresh state: codes 0, absmax 0 (bitsandbytes allocates zeros); fp32 moments 0.

Writes the inputs and the expected state after every step to a binary file the C unit test
reads (tests/test_adam8bit.c, test_reference_fixture):
  "ZTA8", u32 version 2, u32 tensors, u32 steps, f32 lr, b1, b2, eps, wd, grad_scale
  per tensor: u32 n, u32 is_8bit, u32 decay, f32 p0[n]
  per step, per tensor: f32 g[n], then the expected f32 p[n] and
    8-bit: u8 cm[n], u8 cv[n], f32 am[nb], f32 av[nb];  fp32: f32 m[n], f32 v[n]
Usage: /usr/bin/python3 tests/ref/adam8bit_ref.py OUT [seed [steps [grad_scale [beta1]]]]
(Debian's numpy). Without the optional arguments: the committed case,
tests/fixtures/adam8bit/case.bin.
"""
import ctypes
import ctypes.util
import os
import struct
import sys

import numpy as np

F = np.float32
BLOCK, MIN_8BIT = 256, 4096
FLT_MAX = np.finfo(F).max


def load_maps():
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "fixtures", "adam8bit", "qmap_avx2.txt")
    lines = open(path).read().split()
    maps = []
    for line in lines[:2]:
        u = np.array([int(line[8 * i:8 * i + 8], 16) for i in range(256)], np.uint32)
        maps.append(u.view(F))
    return maps[0], maps[1]


def quantize_2d(code, x, signed):
    """bitsandbytes' quantize_2D<SIGNED>, element for element over the array x"""
    x = np.asarray(x, F)
    pivot = np.full(x.shape, 127, np.int64)
    upper_pivot = np.full(x.shape, 255, np.int64)
    lower_pivot = np.zeros(x.shape, np.int64)
    lower = np.full(x.shape, F(-1.0) if signed else F(0.0), F)
    upper = np.full(x.shape, F(1.0), F)
    val = code[pivot]
    i = 64
    with np.errstate(invalid="ignore"):
        while i > 0:
            gt = x > val
            lower_pivot = np.where(gt, pivot, lower_pivot)
            lower = np.where(gt, val, lower)
            upper_pivot = np.where(gt, upper_pivot, pivot)
            upper = np.where(gt, upper, val)
            pivot = np.where(gt, pivot + i, pivot - i)
            val = code[pivot]
            i >>= 1
        gt = x > val
        mid_up = ((upper + val).astype(F) * F(0.5)).astype(F)
        mid_lo = ((lower + val).astype(F) * F(0.5)).astype(F)
        out = np.where(gt, np.where(x > mid_up, upper_pivot, pivot),
                       np.where(x < mid_lo, lower_pivot, pivot))
    return out.astype(np.uint8)


def sign_fix(code, c, s1):
    """the first moment's sign correction (a NaN s1 positive, as CUDA's)"""
    neg_s1 = np.signbit(s1) & ~np.isnan(s1)
    wrong = np.signbit(code[c]) != neg_s1
    with np.errstate(invalid="ignore"):
        moved = np.where(s1 > 0, c.astype(np.int64) + 1, c.astype(np.int64) - 1) % 256
    return np.where(wrong, moved, c).astype(np.uint8)


LIBM = ctypes.CDLL(ctypes.util.find_library("m"))
LIBM.powf.restype = ctypes.c_float
LIBM.powf.argtypes = [ctypes.c_float, ctypes.c_float]


def powf(x, y):
    """C's powf: the function kOptimizer32bit2State names (numpy's float32 power is a SIMD
    approximation here, and glibc's powf is not correctly rounded either: 1316 of 160000
    beta^t tried, so the reference calls the same function rather than a better one)"""
    return F(LIBM.powf(float(x), float(y)))


def consts(lr, b1, b2, eps, t):
    c1 = F(F(1) - powf(F(b1), F(t)))
    c2 = F(np.sqrt(F(F(1) - powf(F(b2), F(t)))))
    return c1, c2, F(F(-F(lr) * c2) / c1)


def step8(st, p, g, hp, t, decay, code1, code2):
    lr, b1, b2, eps, wd, gs = (F(x) for x in hp)
    _, c2, step_size = consts(lr, b1, b2, eps, t)
    n = p.size
    with np.errstate(all="ignore"):
        for b0 in range(0, n, BLOCK):
            valid = min(n, b0 + BLOCK) - b0
            k = b0 // BLOCK
            gv = np.zeros(BLOCK, F)
            gv[:valid] = g[b0:b0 + valid]
            c1s = np.full(BLOCK, 128, np.uint8)
            c1s[:valid] = st["cm"][b0:b0 + valid]
            c2s = np.zeros(BLOCK, np.uint8)
            c2s[:valid] = st["cv"][b0:b0 + valid]
            fin = ~np.isnan(gv) & ~np.isinf(gv)
            gg = (gv * gs).astype(F)
            s2 = (code2[c2s] * F(st["av"][k])).astype(F)
            s2 = (s2 * b2 + ((F(1) - b2) * gg).astype(F) * gg).astype(F)
            s1 = (code1[c1s] * F(st["am"][k])).astype(F)
            s1 = (s1 * b1 + (F(1) - b1) * gg).astype(F)
            s1 = np.where(fin, s1, F(0)).astype(F)
            s2 = np.where(fin, s2, F(0)).astype(F)
            a1 = F(np.fmax.reduce(np.abs(s1), initial=-FLT_MAX))
            a2 = F(np.fmax.reduce(np.abs(s2), initial=-FLT_MAX))
            st["am"][k], st["av"][k] = a1, a2
            pv = p[b0:b0 + valid].copy()
            upd = (pv + step_size * (s1[:valid] / (np.sqrt(s2[:valid]) + c2 * eps))).astype(F)
            if wd > 0 and decay:
                upd = (upd * F(F(1) - lr * wd)).astype(F)
            p[b0:b0 + valid] = np.where(fin[:valid], upd, pv)
            q1 = quantize_2d(code1, (s1 / a1).astype(F), True)
            q1 = sign_fix(code1, q1, s1)
            q2 = quantize_2d(code2, (s2 / a2).astype(F), False)
            st["cm"][b0:b0 + valid] = q1[:valid]
            st["cv"][b0:b0 + valid] = q2[:valid]


def step32(st, p, g, hp, t, decay):
    lr, b1, b2, eps, wd, gs = (F(x) for x in hp)
    _, c2, step_size = consts(lr, b1, b2, eps, t)
    with np.errstate(all="ignore"):
        gg = (gs * g).astype(F)
        fin = np.isfinite(gg)
        m = (st["m"] * b1 + (F(1) - b1) * gg).astype(F)
        v = (st["v"] * b2 + (F(1) - b2) * (gg * gg).astype(F)).astype(F)
        upd = (p + step_size * (m / (np.sqrt(v) + eps * c2))).astype(F)
        if wd > 0 and decay:
            upd = (upd * F(F(1) - lr * wd)).astype(F)
    p[:] = np.where(fin, upd, p)
    st["m"] = np.where(fin, m, F(0)).astype(F)
    st["v"] = np.where(fin, v, F(0)).astype(F)


def grads(rng, ti, n, t, steps):
    """the gradients of tensor ti at step t: ordinary values and every edge"""
    g = (rng.standard_normal(n) * 0.01).astype(F)
    g[:9] = [1e-30, -1e-30, 1e-12, -1e-12, 0.0, -0.0, 3e-9, -3e-9, 1e-38]
    if ti == 0:
        if t == 1:
            g[512:768] = 0.0  # an all-zero block of +0 on a fresh state
            g[768:1024] = -0.0  # and of -0
            g[1024:1280:2] = -0.0  # mixed signs of zero
            g[1025:1280:2] = 0.0
        if t == 2:
            g[300], g[301], g[302] = np.nan, np.inf, -np.inf  # non-finite: state reset
            g[1024:1280] = np.nan  # a whole block non-finite
        if t == 3:
            g[256:512] = 0.0  # zeros after a reset and on decayed state
            g[300] = np.nan
            g[1536] = F(3e38)  # g^2 overflows: absmax2 = inf
        if t == 4:
            g[1536:1792] = -g[1536:1792]
        g[n - (n % BLOCK or BLOCK):][::5] = -0.0  # the last block: zeros of both signs
    if ti == 1 and t >= 2:
        g[n - (n % BLOCK):] = np.nan  # a partial last block all non-finite (the padding decides)
    if ti == 2 and t % 2 == 0:
        g[:] = rng.standard_normal(n).astype(F) * F(10.0) ** rng.integers(-8, 3, n).astype(F)
    if n < MIN_8BIT and t == 2:
        g[5], g[6] = np.nan, -np.inf
    return g


def main():
    out = sys.argv[1]
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 20261201
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    gs = float(sys.argv[4]) if len(sys.argv) > 4 else 1.0
    b1 = float(sys.argv[5]) if len(sys.argv) > 5 else 0.9
    rng = np.random.default_rng(seed)
    hp = (1e-3, b1, 0.999, 1e-8, 0.01, gs)
    # a partial last block (5000 = 19 blocks + 136); 4097: one element in the last block; 4096
    # exactly; below min_8bit_size (fp32 state); a bias-like tensor without decay
    sizes = [5000, 4097, 4096, 1000, 300] if seed == 20261201 else \
        [int(x) for x in rng.integers(4096, 12000, 3)] + [int(rng.integers(1, 4096))]
    decays = [1, 1, 0, 1, 0] if seed == 20261201 else [1, 0, 1, 1]
    code1, code2 = load_maps()
    ps = [(rng.standard_normal(n) * 0.1).astype(F) for n in sizes]
    states = []
    for n in sizes:
        if n >= MIN_8BIT:
            nb = (n + BLOCK - 1) // BLOCK
            states.append({"cm": np.zeros(n, np.uint8), "cv": np.zeros(n, np.uint8),
                           "am": np.zeros(nb, F), "av": np.zeros(nb, F)})
        else:
            states.append({"m": np.zeros(n, F), "v": np.zeros(n, F)})
    with open(out, "wb") as f:
        f.write(b"ZTA8" + struct.pack("<III6f", 2, len(sizes), steps, *hp))
        for n, d, p in zip(sizes, decays, ps):
            f.write(struct.pack("<III", n, int(n >= MIN_8BIT), d) + p.tobytes())
        for t in range(1, steps + 1):
            for ti, (n, d, p, st) in enumerate(zip(sizes, decays, ps, states)):
                g = grads(rng, ti, n, t, steps)
                if n >= MIN_8BIT:
                    step8(st, p, g, hp, t, d, code1, code2)
                else:
                    step32(st, p, g, hp, t, d)
                f.write(g.tobytes() + p.tobytes())
                if n >= MIN_8BIT:
                    f.write(st["cm"].tobytes() + st["cv"].tobytes() + st["am"].tobytes() +
                            st["av"].tobytes())
                else:
                    f.write(st["m"].tobytes() + st["v"].tobytes())


if __name__ == "__main__":
    main()
