#!/usr/bin/python3
"""lamb_ref.py - LAMB as DeepSpeed's FusedLamb computes it, transcribed in torch float32 on
whole tensors, independently of zerotrain's C (which works on pieces of tensors).

Upstream: deepspeed/ops/lamb/fused_lamb.py (class FusedLamb: defaults lr 1e-3,
bias_correction True, betas (0.9, 0.999), eps 1e-8, eps_inside_sqrt False, weight_decay 0,
max_coeff 10.0, min_coeff 0.01; one call of the CUDA op per parameter tensor, state step += 1
first) and csrc/lamb/fused_lamb_cuda_kernel.cu (fused_lamb_cuda and its three kernels):
    step_size = lr * sqrt(bc2) / bc1 with bc1 = 1 - beta1^step, bc2 = 1 - beta2^step held in
                float (std::pow in double, stored into const float), or lr without correction
    part 1, per element:  scaled_grad = g / grad_scale
                          m = b1 * m + (1 - b1) * scaled_grad
                          v = b2 * v + (1 - b2) * scaled_grad * scaled_grad
                          denom = sqrtf(v) + eps   (mode 1; mode 0, eps_inside_sqrt:
                                                    sqrtf(v + eps))
                          update = m / denom + decay * p
                          sums: w_l2 += p * p, u_l2 += update * update
    part 3:               lamb_coeff = 1; if ||p|| != 0 and ||update|| != 0:
                              lamb_coeff = ||p|| / ||update|| clamped to max_coeff, then
                              min_coeff
                          p = p - step_size * lamb_coeff * update  (m, v, p as after part 1)
The kernel's scalars are float and its arithmetic fp32, so (1 - b1) is the float difference:
here every scalar is a float32 tensor. Its norms are fp32 block sums in CUDA's order; here
they are float64 sums (the order of a reduction is not part of the algorithm), rounded to
float32 before sqrtf as the kernel's T is float.

The engine multiplies gradients by its clipping factor; FusedLamb divides by its combined
scale. The cases use grad_scale 1 and 0.5 (multiplying by 0.5 and dividing by 2 give the
same bits).

Writes tests/fixtures/lamb/case.bin for tests/test_lamb.c (little-endian):
  "ZTL1", u32 configs, u32 steps, u32 tensors; per tensor u32 numel, u32 decay
  per config: f32 lr, beta1, beta2, eps, weight_decay, max_coeff, min_coeff, grad_multiplier;
    u32 bias_correction, eps_inside_sqrt; per tensor f32 p0[numel];
    per step: per tensor f32 g[numel]; then per tensor f32 coeff, p[numel];
    after the last step, per tensor f32 m[numel], v[numel]
Usage: /usr/bin/python3 tests/ref/lamb_ref.py tests/fixtures/lamb/case.bin
       /usr/bin/python3 tests/ref/lamb_ref.py check-engine MODEL.safetensors OUT.safetensors STEP.json
"""
import struct
import sys

import torch

torch.manual_seed(20261204)
F = torch.float32


def f32(x):
    return torch.tensor(x, dtype=F)


class FusedLambTensor:
    """One parameter tensor under FusedLamb (its state: step, exp_avg, exp_avg_sq)."""

    def __init__(self, p, lr=1e-3, bias_correction=True, betas=(0.9, 0.999), eps=1e-8,
                 eps_inside_sqrt=False, weight_decay=0.0, max_coeff=10.0, min_coeff=0.01):
        self.p = p.clone()
        self.m = torch.zeros_like(p)
        self.v = torch.zeros_like(p)
        self.step = 0
        self.h = dict(lr=lr, bias_correction=bias_correction, betas=betas, eps=eps,
                      mode=0 if eps_inside_sqrt else 1, decay=weight_decay,
                      max_coeff=max_coeff, min_coeff=min_coeff)

    def update(self, grad, scale=1.0):
        h = self.h
        self.step += 1
        b1, b2 = f32(h["betas"][0]), f32(h["betas"][1])
        one = f32(1.0)
        lr, eps, decay = f32(h["lr"]), f32(h["eps"]), f32(h["decay"])
        if h["bias_correction"]:
            # the op takes float beta1, beta2; std::pow(float, int) is double, stored into a
            # const float
            bc1 = f32(1.0 - float(b1) ** self.step)
            bc2 = f32(1.0 - float(b2) ** self.step)
            step_size = lr * torch.sqrt(bc2) / bc1
        else:
            step_size = lr
        # part 1
        sg = grad / f32(scale)
        self.m = b1 * self.m + (one - b1) * sg
        self.v = b2 * self.v + (one - b2) * sg * sg
        denom = torch.sqrt(self.v + eps) if h["mode"] == 0 else torch.sqrt(self.v) + eps
        upd = self.m / denom + decay * self.p
        w_l2 = f32(float((self.p.double() ** 2).sum()))
        u_l2 = f32(float((upd.double() ** 2).sum()))
        # part 3
        reg_w, reg_u = torch.sqrt(w_l2), torch.sqrt(u_l2)
        coeff = f32(1.0)
        if reg_w != 0 and reg_u != 0:
            coeff = reg_w / reg_u
            if coeff > f32(h["max_coeff"]):
                coeff = f32(h["max_coeff"])
            if coeff < f32(h["min_coeff"]):
                coeff = f32(h["min_coeff"])
        self.p = self.p - (step_size * coeff) * upd
        return float(coeff)


def main(out):
    shapes = [(72, 64), (40,), (4, 6, 20), (40,)]  # 4608: two of the C's 4096-element chunks
    decays = [1, 0, 1, 0]
    zero_init = [False, False, False, True]  # a zero tensor: ||p|| = 0, the coefficient 1
    configs = [  # (FusedLamb keywords, gradient multiplier)
        (dict(), 1.0),  # FusedLamb's defaults
        (dict(lr=11e-3, weight_decay=0.01, bias_correction=False, max_coeff=0.3,
              min_coeff=0.01), 1.0),  # DeepSpeedExamples' bing_bert
        (dict(lr=2e-3, betas=(0.8, 0.99), eps=1e-6, eps_inside_sqrt=True, weight_decay=0.1,
              max_coeff=10.0, min_coeff=0.5), 0.5),
    ]
    steps = 5
    buf = bytearray(b"ZTL1")
    buf += struct.pack("<3I", len(configs), steps, len(shapes))
    for s, d in zip(shapes, decays):
        buf += struct.pack("<2I", int(torch.tensor(s).prod()), d)
    for kw, mult in configs:
        full = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, max_coeff=10.0,
                    min_coeff=0.01, bias_correction=True, eps_inside_sqrt=False)
        full.update(kw)
        buf += struct.pack("<8f", full["lr"], full["betas"][0], full["betas"][1], full["eps"],
                           full["weight_decay"], full["max_coeff"], full["min_coeff"], mult)
        buf += struct.pack("<2I", int(full["bias_correction"]), int(full["eps_inside_sqrt"]))
        opts = []
        for s, d, z in zip(shapes, decays, zero_init):
            p0 = torch.zeros(s, dtype=F) if z else 0.05 * torch.randn(s, dtype=F)
            kwt = dict(kw)
            if not d:
                kwt["weight_decay"] = 0.0
            opts.append(FusedLambTensor(p0, **kwt))
            buf += p0.numpy().astype("<f4").tobytes()
        for _ in range(steps):
            for o in opts:
                g = 0.01 * torch.randn(o.p.shape, dtype=F)
                buf += g.numpy().astype("<f4").tobytes()
                o._g = g
            for o in opts:
                c = o.update(o._g, 1.0 / mult)
                buf += struct.pack("<f", c)
                buf += o.p.numpy().astype("<f4").tobytes()
        for o in opts:  # the moments after the last step
            for t in (o.m, o.v):
                buf += t.numpy().astype("<f4").tobytes()
    with open(out, "wb") as f:
        f.write(buf)
    print(f"{out}: {len(configs)} configurations, {steps} steps, {len(shapes)} tensors, "
          f"{len(buf)} bytes")


def check_engine(model_st, out_st, step_json):
    """The engine's Lamb steps (`zerotrain grad --step` with "optimizer": "Lamb": k steps on
    one gradient, weight decay on every parameter) against FusedLamb applied here to the
    folder's weights with the engine's own gradient. Per tensor, |p - ref| within 1e-5 of the
    largest total step |ref - p0| plus 2^-21 |p| (fp32 rounding of the stored weights; the
    norms' sums may round differently in the last bit, moving the coefficient by an ulp)."""
    import json
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from compare import load_st
    st = json.load(open(step_json))
    w0, out = load_st(model_st), load_st(out_st)
    kw = dict(lr=st["lr"], betas=tuple(st.get("betas", (0.9, 0.999))), eps=st.get("eps", 1e-8),
              weight_decay=st.get("weight_decay", 0.0), max_coeff=st.get("max_coeff", 10.0),
              min_coeff=st.get("min_coeff", 0.01),
              bias_correction=st.get("bias_correction", True),
              eps_inside_sqrt=st.get("eps_inside_sqrt", False))
    worst, clamped, n = 0.0, 0, 0
    for k, p0 in w0.items():
        if "lamb." + k not in out:
            continue
        o = FusedLambTensor(torch.from_numpy(p0.astype("float32")), **kw)
        g = torch.from_numpy(out["grad." + k].astype("float32"))
        for _ in range(st.get("steps", 1)):
            c = o.update(g)
            clamped += c in (f32(kw["max_coeff"]).item(), f32(kw["min_coeff"]).item())
        ref, got = o.p.numpy(), out["lamb." + k]
        moved = abs(ref - p0).max()
        err = (abs(got - ref) - 2.0 ** -21 * abs(ref)).max()
        r = err / (1e-5 * moved) if moved > 0 else (0.0 if err <= 0 else float("inf"))
        worst = max(worst, r)
        n += 1
    print(f"Lamb in the engine against FusedLamb: {n} tensors, {clamped} clamped "
          f"coefficients, worst error / bound {worst:.3g}")
    return 0 if n == len(w0) and worst <= 1.0 else 1


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "check-engine":
        sys.exit(check_engine(*sys.argv[2:5]))
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/lamb/case.bin")
