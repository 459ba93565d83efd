#!/usr/bin/python3
"""adam8bit_ref.py - an independent numpy implementation of block-wise 8-bit AdamW, written
from the algorithm's description (issue 8, bitsandbytes' choices), not from zerotrain's C:

- maps: for exponent i = 0..6, the midpoints of evenly spaced boundaries on [0.1, 1]
  (2^i + 1 boundaries for the signed map, 2^(i+1) + 1 for the unsigned one) times 10^(i-6),
  both signs for the signed map, plus 0 and 1.0, sorted; float64, rounded to float32 once;
- per 256-element block of a tensor (blocks restart at each tensor): dequantize
  m = map_m[code] * absmax_m, v likewise; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
  new absmax = max |m|, max v over the block; p = (p + step_size * m / (sqrt(v) + eps c2))
  * (1 - lr wd); codes = nearest map value of m / absmax (ties to the lower index; an
  all-zero block gets the code of 0); c1 = 1 - b1^t, c2 = sqrt(1 - b2^t), step_size =
  -lr c2 / c1, everything in float32;
- a non-finite gradient: parameter unchanged, its m and v set to 0;
- tensors below min_8bit_size (4096 elements) keep fp32 m and v with the same update.

Writes the inputs and the expected state after every step to a binary file the C unit test
reads (tests/fixtures/adam8bit/case.bin):
  "ZTA8", u32 tensors, u32 steps, f32 lr, b1, b2, eps, wd
  per tensor: u32 n, u32 is_8bit, f32 p0[n]
  per step, per tensor: f32 g[n], then the expected f32 p[n] and
    8-bit: u8 cm[n], u8 cv[n], f32 am[nb], f32 av[nb];  fp32: f32 m[n], f32 v[n]
Usage: /usr/bin/python3 tests/ref/adam8bit_ref.py tests/fixtures/adam8bit/case.bin (Debian's numpy)
"""
import struct
import sys

import numpy as np

F = np.float32
BLOCK, MIN_8BIT = 256, 4096


def dynamic_map(signed):
    vals = []
    for i in range(7):
        items = 2 ** i + 1 if signed else 2 ** (i + 1) + 1
        bounds = [0.1 + 0.9 * j / (items - 1) for j in range(items)]
        scale = 10.0 ** (i - 6)
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            vals.append(scale * (lo + hi) / 2.0)
            if signed:
                vals.append(-scale * (lo + hi) / 2.0)
    vals += [0.0, 1.0]
    assert len(vals) == 256
    return np.array(sorted(vals), dtype=np.float64).astype(F)


def nearest(cmap, x):
    """index of the nearest code to each x (float32 distances; ties to the lower index)"""
    x = x.astype(F)
    hi = np.searchsorted(cmap, x, side="right")  # first code > x
    hi = np.clip(hi, 1, 255)
    lo = hi - 1
    dl = (x - cmap[lo]).astype(F)
    dh = (cmap[hi] - x).astype(F)
    idx = np.where(dl <= dh, lo, hi)
    idx = np.where(x <= cmap[0], 0, idx)
    idx = np.where(x >= cmap[255], 255, idx)
    return idx.astype(np.uint8)


def consts(lr, b1, b2, eps, t):
    c1 = F(1) - np.power(F(b1), F(t))
    c2 = np.sqrt(F(1) - np.power(F(b2), F(t)))
    return c1, c2, F(-F(lr) * c2 / c1), F(F(eps) * c2)


def step8(st, p, g, hp, t, mm, mv):
    lr, b1, b2, eps, wd = hp
    _, _, step_size, eps_c2 = consts(lr, b1, b2, eps, t)
    keep = F(1) - F(lr) * F(wd)
    n = p.size
    for b0 in range(0, n, BLOCK):
        sl = slice(b0, min(n, b0 + BLOCK))
        k = b0 // BLOCK
        gb = g[sl]
        fin = np.isfinite(gb)
        gz = np.where(fin, gb, F(0))
        m = mm[st["cm"][sl]] * F(st["am"][k])
        m = (m * F(b1) + (F(1) - F(b1)) * gz).astype(F)
        v = mv[st["cv"][sl]] * F(st["av"][k])
        v = (v * F(b2) + (F(1) - F(b2)) * gz * gz).astype(F)
        m = np.where(fin, m, F(0)).astype(F)
        v = np.where(fin, v, F(0)).astype(F)
        am, av = F(np.max(np.abs(m))), F(np.max(np.abs(v)))
        upd = ((p[sl] + step_size * (m / (np.sqrt(v) + eps_c2))) * keep).astype(F)
        p[sl] = np.where(fin, upd, p[sl])
        st["cm"][sl] = nearest(mm, m / am) if am > 0 else nearest(mm, np.zeros_like(m))
        st["cv"][sl] = nearest(mv, v / av) if av > 0 else nearest(mv, np.zeros_like(v))
        st["am"][k], st["av"][k] = am, av


def step32(st, p, g, hp, t):
    lr, b1, b2, eps, wd = hp
    _, _, step_size, eps_c2 = consts(lr, b1, b2, eps, t)
    keep = F(1) - F(lr) * F(wd)
    fin = np.isfinite(g)
    gz = np.where(fin, g, F(0))
    m = (st["m"] * F(b1) + (F(1) - F(b1)) * gz).astype(F)
    v = (st["v"] * F(b2) + (F(1) - F(b2)) * gz * gz).astype(F)
    upd = ((p + step_size * (m / (np.sqrt(v) + eps_c2))) * keep).astype(F)
    p[:] = np.where(fin, upd, p)
    st["m"] = np.where(fin, m, F(0)).astype(F)
    st["v"] = np.where(fin, v, F(0)).astype(F)


def main():
    out = sys.argv[1]
    rng = np.random.default_rng(20261130)
    hp = (1e-3, 0.9, 0.999, 1e-8, 0.01)
    sizes = [5000, 1000, 4096]  # a partial last block; below min_8bit_size; exactly at it
    steps = 4
    mm, mv = dynamic_map(True), dynamic_map(False)
    ps = [(rng.standard_normal(n) * 0.1).astype(F) for n in sizes]
    states = []
    for n in sizes:
        if n >= MIN_8BIT:
            nb = (n + BLOCK - 1) // BLOCK
            states.append({"cm": np.full(n, nearest(mm, np.zeros(1))[0], np.uint8),
                           "cv": np.full(n, nearest(mv, np.zeros(1))[0], np.uint8),
                           "am": np.zeros(nb, F), "av": np.zeros(nb, F)})
        else:
            states.append({"m": np.zeros(n, F), "v": np.zeros(n, F)})
    with open(out, "wb") as f:
        f.write(b"ZTA8" + struct.pack("<II5f", len(sizes), steps, *hp))
        for n, p in zip(sizes, ps):
            f.write(struct.pack("<II", n, int(n >= MIN_8BIT)) + p.tobytes())
        for t in range(1, steps + 1):
            for ti, (n, p, st) in enumerate(zip(sizes, ps, states)):
                g = (rng.standard_normal(n) * 0.01).astype(F)
                g[:7] = [1e-30, -1e-30, 1e-12, -1e-12, 0.0, -0.0, 3e-9]  # round to zero, signs
                if ti == 0 and t == 1:
                    g[512:768] = 0.0  # an all-zero block: absmax 0, the codes of 0
                if ti == 0 and t == 2:
                    g[300], g[301], g[302] = np.nan, np.inf, -np.inf  # non-finite
                if ti == 0 and t == 3:
                    g[256:512] = 0.0  # a block of zeros (after a reset: all-zero state)
                    g[300] = np.nan
                if n >= MIN_8BIT:
                    step8(st, p, g, hp, t, mm, mv)
                else:
                    step32(st, p, g, hp, t)
                f.write(g.tobytes() + p.tobytes())
                if n >= MIN_8BIT:
                    f.write(st["cm"].tobytes() + st["cv"].tobytes() + st["am"].tobytes() +
                            st["av"].tobytes())
                else:
                    f.write(st["m"].tobytes() + st["v"].tobytes())


if __name__ == "__main__":
    main()
