#!/usr/bin/python3
"""adafactor_ref.py - Adafactor as Hugging Face transformers' Adafactor.step computes it
(src/transformers/optimization.py, class Adafactor; Shazeer & Stern 2018), transcribed in
torch float32 on whole tensors, independently of zerotrain's C (which works on pieces of
tensors). transformers' defaults: eps (1e-30, 1e-3), clip_threshold 1.0, decay_rate -0.8,
beta1 None, weight_decay 0, scale_parameter, relative_step True, warmup_init False, lr None.

Per step, in upstream's order:
    step += 1; RMS = ||p|| / sqrt(numel)                  (the whole tensor)
    lr = (max(eps2, RMS) if scale_parameter else 1) *
         (min(1e-6 step if warmup_init else 1e-2, 1 / sqrt(step)) if relative_step else lr)
    beta2t = 1 - step^decay_rate; update = g^2 + eps1
    factored (ndim >= 2, over the last two dimensions [..., R, C]):
        exp_avg_sq_row [..., R] = beta2t row + (1 - beta2t) update.mean(dim=-1)
        exp_avg_sq_col [..., C] = beta2t col + (1 - beta2t) update.mean(dim=-2)
        update = rsqrt(row / row.mean(dim=-1, keepdim))[..., None] * rsqrt(col)[..., None, :] * g
    else: exp_avg_sq = beta2t v + (1 - beta2t) update; update = rsqrt(v) * g
    update /= max(1, rms(update) / clip_threshold); update *= lr   (rms: the whole tensor)
    beta1: exp_avg = beta1 exp_avg + (1 - beta1) update; update = exp_avg
    weight_decay: p += p * (-weight_decay * lr); p -= update

Writes tests/fixtures/adafactor/case.bin for tests/test_adafactor.c (little-endian):
  "ZTA2", u32 configs, u32 steps, u32 tensors; per tensor u32 ndim, u32 shape[4]
  per config: f32 lr (0: None), beta1 (-1: None), weight_decay; u32 relative_step,
    scale_parameter, warmup_init; per tensor f32 p0;
    per step: per tensor f32 g; then per tensor the expected p and its second moment
    (factored: exp_avg_sq_row then exp_avg_sq_col; else exp_avg_sq)
Usage: /usr/bin/python3 tests/ref/adafactor_ref.py tests/fixtures/adafactor/case.bin
"""
import math
import struct
import sys

import torch

torch.manual_seed(20261130)


class Adafactor:
    """One parameter's Adafactor.step, upstream's arithmetic (float32 tensors, Python floats
    for the step size's terms)."""

    def __init__(self, p, lr=None, eps=(1e-30, 1e-3), clip_threshold=1.0, decay_rate=-0.8,
                 beta1=None, weight_decay=0.0, scale_parameter=True, relative_step=True,
                 warmup_init=False):
        if lr is not None and relative_step:
            raise ValueError("Cannot combine manual `lr` and `relative_step=True` options")
        if warmup_init and not relative_step:
            raise ValueError("`warmup_init=True` requires `relative_step=True`")
        self.p = p.clone()
        self.g = dict(lr=lr, eps=eps, clip_threshold=clip_threshold, decay_rate=decay_rate,
                      beta1=beta1, weight_decay=weight_decay, scale_parameter=scale_parameter,
                      relative_step=relative_step, warmup_init=warmup_init)
        self.state = {}

    @staticmethod
    def _rms(t):
        return t.norm(2) / (t.numel() ** 0.5)

    def _get_lr(self):
        g, st = self.g, self.state
        rel_step_sz = g["lr"]
        if g["relative_step"]:
            min_step = 1e-6 * st["step"] if g["warmup_init"] else 1e-2
            rel_step_sz = min(min_step, 1.0 / math.sqrt(st["step"]))
        param_scale = 1.0
        if g["scale_parameter"]:
            param_scale = max(g["eps"][1], st["RMS"])
        return param_scale * rel_step_sz

    @staticmethod
    def _approx_sq_grad(row, col):
        r_factor = (row / row.mean(dim=-1, keepdim=True)).rsqrt_().unsqueeze(-1)
        c_factor = col.unsqueeze(-2).rsqrt()
        return torch.mul(r_factor, c_factor)

    def step(self, grad):
        g, st, p = self.g, self.state, self.p
        shape = grad.shape
        factored, first = len(shape) >= 2, g["beta1"] is not None
        if not st:
            st["step"] = 0
            if first:
                st["exp_avg"] = torch.zeros_like(grad)
            if factored:
                st["exp_avg_sq_row"] = torch.zeros(shape[:-1])
                st["exp_avg_sq_col"] = torch.zeros(shape[:-2] + shape[-1:])
            else:
                st["exp_avg_sq"] = torch.zeros_like(grad)
            st["RMS"] = 0
        st["step"] += 1
        st["RMS"] = self._rms(p)
        lr = self._get_lr()
        beta2t = 1.0 - math.pow(st["step"], g["decay_rate"])
        update = (grad ** 2) + g["eps"][0]
        if factored:
            row, col = st["exp_avg_sq_row"], st["exp_avg_sq_col"]
            row.mul_(beta2t).add_(update.mean(dim=-1), alpha=(1.0 - beta2t))
            col.mul_(beta2t).add_(update.mean(dim=-2), alpha=(1.0 - beta2t))
            update = self._approx_sq_grad(row, col)
            update.mul_(grad)
        else:
            v = st["exp_avg_sq"]
            v.mul_(beta2t).add_(update, alpha=(1.0 - beta2t))
            update = v.rsqrt().mul_(grad)
        update.div_((self._rms(update) / g["clip_threshold"]).clamp_(min=1.0))
        update.mul_(lr)
        if first:
            m = st["exp_avg"]
            m.mul_(g["beta1"]).add_(update, alpha=(1 - g["beta1"]))
            update = m
        if g["weight_decay"] != 0:
            p.add_(p, alpha=(-g["weight_decay"] * lr))
        p.add_(-update)

    def moments(self):
        st = self.state
        if "exp_avg_sq" in st:
            return [st["exp_avg_sq"]]
        return [st["exp_avg_sq_row"], st["exp_avg_sq_col"]]


def f32(t):
    return t.contiguous().numpy().astype("<f4").tobytes()


def main():
    out = sys.argv[1]
    # a matrix, a vector, a 3-D and a 4-D tensor (factored over their last two dimensions)
    shapes = [(48, 40), (40,), (4, 24, 20), (2, 3, 8, 12)]
    configs = [  # lr (None), beta1 (None), weight_decay, relative_step, scale_parameter, warmup_init
        (None, None, 0.0, True, True, False),  # 1: transformers' defaults
        (1e-3, None, 0.0, False, False, False),  # 2: "recommended T5 fine-tuning" settings
        (1e-3, 0.9, 0.01, False, True, False),  # 3a: a first moment, weight decay
        (None, 0.9, 0.0, True, True, True),  # 3b: warmup_init with a first moment
    ]
    steps = 5
    with open(out, "wb") as f:
        f.write(b"ZTA2" + struct.pack("<III", len(configs), steps, len(shapes)))
        for s in shapes:
            f.write(struct.pack("<5I", len(s), *(list(s) + [0] * (4 - len(s)))))
        for lr, beta1, wd, rel, scale, warm in configs:
            p0 = [torch.randn(s) * 0.05 for s in shapes]
            opt = [Adafactor(p, lr=lr, beta1=beta1, weight_decay=wd, relative_step=rel,
                             scale_parameter=scale, warmup_init=warm) for p in p0]
            f.write(struct.pack("<3f3I", lr or 0.0, -1.0 if beta1 is None else beta1, wd,
                                rel, scale, warm))
            f.write(b"".join(f32(p) for p in p0))
            for _ in range(steps):
                gs = [torch.randn(s) * 0.01 for s in shapes]
                gs[0][0, :5] = 0.0  # zero gradients: the eps1 floor
                gs[2][1, 3, :4] = 0.0
                for o, g in zip(opt, gs):
                    o.step(g)
                f.write(b"".join(f32(g) for g in gs))
                for o in opt:
                    f.write(f32(o.p) + b"".join(f32(m) for m in o.moments()))


if __name__ == "__main__":
    main()
