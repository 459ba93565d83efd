#!/usr/bin/python3
"""adafactor_ref.py - Adafactor as Hugging Face transformers' Adafactor.step computes it
(Shazeer & Stern 2018; transformers' defaults eps (1e-30, 1e-3), clip_threshold 1.0,
decay_rate -0.8, beta1 None, relative_step, scale_parameter, warmup_init False), written in
torch on whole tensors, independently of zerotrain's C (which works on pieces of tensors):

    step += 1; rms_p = ||p|| / sqrt(numel)
    lr = (max(eps2, rms_p) if scale_parameter else 1) *
         (min(1e-6 step if warmup_init else 1e-2, 1 / sqrt(step)) if relative_step else lr)
    beta2t = 1 - step^decay_rate; x = g^2 + eps1
    matrix: row = beta2t row + (1 - beta2t) mean_cols(x); col likewise over the rows;
            u = g * rsqrt(row / mean(row))[:, None] * rsqrt(col)[None, :]
    vector: v = beta2t v + (1 - beta2t) x; u = g * rsqrt(v)
    u /= max(1, rms(u) / clip_threshold); u *= lr
    beta1: m = beta1 m + (1 - beta1) u; u = m
    p -= weight_decay * lr * p; p -= u

Writes tests/fixtures/adafactor/case.bin for tests/test_adafactor.c:
  "ZTAF", u32 configs, u32 steps
  per config: f32 lr, beta1 (-1: none), wd; u32 relative_step, scale_parameter, warmup_init;
    u32 rows, cols (matrix), u32 n (vector); f32 p0 matrix, p0 vector;
    per step: f32 g matrix, g vector, then the expected p matrix, p vector, row, col, v
Usage: /usr/bin/python3 tests/ref/adafactor_ref.py tests/fixtures/adafactor/case.bin
"""
import math
import struct
import sys

import torch

torch.manual_seed(20261130)


def rms(t):
    return t.norm(2) / (t.numel() ** 0.5)


class Ref:
    def __init__(self, p, lr, beta1, wd, rel, scale, warm):
        self.p, self.lr, self.beta1, self.wd = p.clone(), lr, beta1, wd
        self.rel, self.scale, self.warm = rel, scale, warm
        self.step = 0
        self.factored = p.dim() >= 2
        if self.factored:
            self.row = torch.zeros(p.shape[0])
            self.col = torch.zeros(p.shape[1])
        else:
            self.v = torch.zeros_like(p)
        self.m = torch.zeros_like(p)

    def update(self, g):
        self.step += 1
        rms_p = rms(self.p)
        rel_step = self.lr
        if self.rel:
            lo = 1e-6 * self.step if self.warm else 1e-2
            rel_step = min(lo, 1.0 / math.sqrt(self.step))
        lr = (max(1e-3, rms_p) if self.scale else 1.0) * rel_step
        beta2t = 1.0 - math.pow(self.step, -0.8)
        x = g ** 2 + 1e-30
        if self.factored:
            self.row.mul_(beta2t).add_(x.mean(dim=-1), alpha=1.0 - beta2t)
            self.col.mul_(beta2t).add_(x.mean(dim=-2), alpha=1.0 - beta2t)
            r = (self.row / self.row.mean(dim=-1, keepdim=True)).rsqrt_().unsqueeze(-1)
            c = self.col.unsqueeze(-2).rsqrt()
            u = torch.mul(r, c).mul_(g)
        else:
            self.v.mul_(beta2t).add_(x, alpha=1.0 - beta2t)
            u = self.v.rsqrt().mul(g)
        u.div_((rms(u) / 1.0).clamp_(min=1.0))
        u.mul_(lr)
        if self.beta1 >= 0:
            self.m.mul_(self.beta1).add_(u, alpha=1 - self.beta1)
            u = self.m
        if self.wd != 0:
            self.p.add_(self.p, alpha=-self.wd * float(lr))
        self.p.add_(-u)


def main():
    out = sys.argv[1]
    rows, cols, n = 48, 40, 40
    configs = [  # lr, beta1, wd, relative_step, scale_parameter, warmup_init
        (0.0, -1.0, 0.0, 1, 1, 0),    # transformers' defaults
        (1e-3, 0.9, 0.01, 0, 0, 0),   # a fixed lr, a first moment, weight decay
        (0.0, -1.0, 0.0, 1, 1, 1),    # warmup_init
    ]
    steps = 5
    with open(out, "wb") as f:
        f.write(b"ZTAF" + struct.pack("<II", len(configs), steps))
        for lr, beta1, wd, rel, scale, warm in configs:
            pm = torch.randn(rows, cols) * 0.05
            pv = torch.randn(n) * 0.05
            a = Ref(pm, lr, beta1, wd, rel, scale, warm)
            b = Ref(pv, lr, beta1, wd, rel, scale, warm)
            f.write(struct.pack("<3f3I3I", lr, beta1, wd, rel, scale, warm, rows, cols, n))
            f.write(pm.numpy().tobytes() + pv.numpy().tobytes())
            for _ in range(steps):
                gm = torch.randn(rows, cols) * 0.01
                gv = torch.randn(n) * 0.01
                gm[0, :5] = 0.0  # zero gradients: the eps1 floor
                a.update(gm)
                b.update(gv)
                f.write(gm.numpy().tobytes() + gv.numpy().tobytes())
                f.write(a.p.numpy().tobytes() + b.p.numpy().tobytes() + a.row.numpy().tobytes()
                        + a.col.numpy().tobytes() + b.v.numpy().tobytes())


if __name__ == "__main__":
    main()
