#!/usr/bin/python3
"""bf16 training the way DeepSpeed runs it (deepspeed/runtime/bf16_optimizer.py, engine.py): an
independent plain-torch reference for `zerotrain grad` with "precision": "bf16".

DeepSpeed's bf16 path: the engine casts the module to bf16 (`module.bfloat16()`: each fp32
weight rounded to nearest even), the BF16_Optimizer keeps an fp32 master copy made from those
bf16 weights (`.clone().float()`), accumulates the gradients in fp32, runs the fp32 optimizer
(torch.optim.AdamW here) on the master, and copies the master back into the bf16 weights
(rounded to nearest even) for the next forward pass.

`make` writes a random BERT masked-LM case (tests/ref/bert_ref.py's shapes, weights and batch)
whose step.json asks for bf16, and expected.safetensors with two references of the same step:
  - mixed:  zerotrain's documented bf16 arithmetic, written here in plain torch from
            transformers' BertForMaskedLM (bert_ref.py's structure): bf16 weights; every
            activation a module stores rounded to bf16 (nearest even) where zerotrain keeps it
            (the embeddings' sum and LayerNorm, q, k, v, the attention probabilities and
            context, each linear layer's output, each residual sum, LayerNorm and GELU output,
            the head's transform) with everything between computed in fp32 on those values;
            the attention context multiplies v by the rounded probabilities, and the softmax's
            backward reads them; each linear layer's backward rounds its output gradient to
            bf16 before both products (as a bf16 module's autograd would hand it over), the
            other gradients flow in fp32; the logits `zerotrain grad` writes (all of them)
            stay fp32 -> loss, logits, grad.*;
  - module: the forward and backward of the bf16 module itself (every activation bf16, as on a
            GPU) -> module_grad.*.
`compare` checks zerotrain's output against them:
  - the logits against the mixed reference, row by row (a row: one position's V logits,
    relative distance ||a - e|| / ||e||): both compute the same roundings, but their fp32
    sums differ in order (~2^-23 relative), so a value within that of a bf16 rounding
    boundary (spacing 2^-8 relative) may round to the other neighbour; the values of its row
    that depend on it then move by about 2^-8 / sqrt(H) each, which moves some of them across
    a boundary too: a row is either untouched (its logits differ by the fp32 product's
    rounding, ~1e-7) or diverged (~2^-9 per element, measured up to 5e-3 with three layers).
    Few rows diverge (measured on 46 random shapes of one to three layers, both product paths:
    at most about a third of them, the median row at most 7e-8 away), while leaving out one
    kind of forward rounding moves every row by ~2^-8 (tried: the probabilities not rounded,
    the attention's residual sum not rounded: median rows 5e-3 to 8e-3 away). So the median
    row must lie within 2^-12 (2.4e-4: twenty times below those, three thousand times above
    the untouched rows). The loss and the gradient's distances to it are printed, not judged: a diverged
    labelled row moves them, and their noise is bf16's own (the bf16 module judges them,
    below); what each kernel rounds is pinned down by tests/test_hlayers.c, bit for bit;
  - adamw.*: the fp32 master after five torch.optim.AdamW steps (lr 1e-4, below half a bf16
    step of most weights, so only a master that accumulates moves them) on zerotrain's own
    gradient from the bf16-rounded weights, then each weight must be the bf16 rounding of a
    value within compare.py's fp32 AdamW bound of that master (rounding is monotonic:
    between the roundings of master - bound and master + bound);
  - module_grad.*: the whole gradient vector against the bf16 module's, normwise:
    ||g - g_bf16|| / ||g_bf16|| <= 2 sqrt(K) u. The bf16 module rounds the result of every
    operation to 8 bits of mantissa (u = 2^-8); a layer has about 30 rounded operations in its
    forward pass and as many in its backward pass, and the embeddings and the head about 20:
    K = 60 L + 20 on a path, whose independent roundings grow as sqrt(K) u (0.035 for L = 1,
    0.055 for L = 3); the bound is twice that.
`make --precision fp16` writes an fp16 case: the same mixed reference with fp16's rounding, the
loss's gradient scaled by a static loss scale (step.json's loss_scale: the largest power of
two from 2^16 down whose fp16 gradients stay finite, as the dynamic scaler would settle) and
each parameter's gradient rounded to fp16 (fp16's default accumulation dtype), then
unscaled. CPU torch has no fp16 matmul, LayerNorm or softmax, so there is no fp16 module:
the gradient is judged against the mixed reference within the same noise bound with u =
2^-11, and the logits rows within 2^-15 (2^-4 u, as bf16's 2^-12; measured on 20 one-layer
shapes and both product paths: median rows at most 1.8e-7 away). fp16's finer spacing makes
a rounding flip 8 times likelier (2^-23 / 2^-11), and with three layers most rows diverge
(measured: 70% of them, median 6e-4): the logits of deeper fp16 cases are printed, not
judged."""
import argparse, json, math, os, sys
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bert_ref  # noqa: E402
from compare import adamw_bounds, load_st, save_st  # noqa: E402

torch.set_num_threads(1)
# five steps on the one gradient, lr below half a bf16 step of most weights (|w| > 0.05):
# only an fp32 master that accumulates the updates moves them, as it should
STEP = dict(bert_ref.STEP, precision="bf16", lr=1e-4, steps=5)
# the 16-bit format of this run (make --precision, or the case's step.json): bf16, or fp16
# with DeepSpeed's loss scaling at its first scale (2^16, fp16.initial_scale_power)
DT = torch.bfloat16
FP16_SCALE = 2.0 ** 16


def set_precision(name):
    global DT
    DT = torch.float16 if name == "fp16" else torch.bfloat16


def bf16(a):
    """fp32 array -> the fp32 values of its rounding to the run's 16-bit format (torch's round
    to nearest even; fp16 overflows to infinity)."""
    return torch.tensor(a, dtype=torch.float32).to(DT).to(torch.float32).numpy()


def rb(x):
    """x rounded to the 16-bit format (nearest even) in the forward pass, the gradient passed
    as it is."""
    return x + (x.to(DT).to(torch.float32) - x).detach()


class RoundGradLinear(torch.autograd.Function):
    """y = x W^T + b in fp32 on bf16 values; the backward rounds dy to bf16 first."""

    @staticmethod
    def forward(ctx, x, w, b):
        ctx.save_for_backward(x, w)
        return x @ w.T + b

    @staticmethod
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        d = dy.to(DT).to(torch.float32)
        d2, x2 = d.reshape(-1, d.shape[-1]), x.reshape(-1, x.shape[-1])
        return d @ w, d2.T @ x2, d2.sum(0)


class RoundedSoftmax(torch.autograd.Function):
    """softmax rounded to bf16; the backward reads the rounded probabilities."""

    @staticmethod
    def forward(ctx, s):
        p = torch.softmax(s, dim=-1).to(DT).to(torch.float32)
        ctx.save_for_backward(p)
        return p

    @staticmethod
    def backward(ctx, dp):
        (p,) = ctx.saved_tensors
        return p * (dp - (p * dp).sum(-1, keepdim=True))


def mixed_forward(P, c, ids, mask, types, labels):
    """BertForMaskedLM (bert_ref.py's, after modeling_bert.py) with zerotrain's bf16 roundings."""
    B, T = ids.shape
    H, nh, eps = c["hidden_size"], c["num_attention_heads"], c["layer_norm_eps"]
    d = H // nh
    lin = lambda x, n: RoundGradLinear.apply(x, P[n + ".weight"], P[n + ".bias"])  # noqa: E731
    ln = lambda x, n: bert_ref.layer_norm(x, P, n, eps)  # noqa: E731
    x = rb((P["bert.embeddings.word_embeddings.weight"][ids]
            + P["bert.embeddings.token_type_embeddings.weight"][types])
           + P["bert.embeddings.position_embeddings.weight"][:T])
    x = rb(ln(x, "bert.embeddings.LayerNorm"))
    mask_term = ((1.0 - mask.to(x.dtype)) * bert_ref.MASK_MIN)[:, None, None, :]
    for i in range(c["num_hidden_layers"]):
        p = f"bert.encoder.layer.{i}."
        q, k, v = (rb(lin(x, p + "attention.self." + n)).view(B, T, nh, d).transpose(1, 2)
                   for n in ("query", "key", "value"))
        probs = RoundedSoftmax.apply(q @ k.transpose(-1, -2) / math.sqrt(d) + mask_term)
        ctx = rb((probs @ v).transpose(1, 2).reshape(B, T, H))
        a = rb(rb(lin(ctx, p + "attention.output.dense")) + x)
        x = rb(ln(a, p + "attention.output.LayerNorm"))
        h = rb(bert_ref.gelu(rb(lin(x, p + "intermediate.dense"))))
        y = rb(rb(lin(h, p + "output.dense")) + x)
        x = rb(ln(y, p + "output.LayerNorm"))
    t = rb(bert_ref.gelu(rb(lin(x, "cls.predictions.transform.dense"))))
    t = rb(ln(t, "cls.predictions.transform.LayerNorm"))
    logits = RoundGradLinear.apply(t, P["bert.embeddings.word_embeddings.weight"],
                                   P["cls.predictions.bias"])
    lab = labels.reshape(-1)
    keep = lab != -100
    logp = torch.log_softmax(logits.reshape(-1, logits.shape[-1])[keep], dim=-1)
    return -logp.gather(1, lab[keep][:, None]).sum() / keep.sum(), logits


def mixed(c, params, batch, S=1.0):
    """The mixed reference's loss, logits and gradients on the rounded weights. fp16: the
    loss's gradient scaled by the loss scale S, each parameter's gradient (summed in fp32
    over its uses) rounded to fp16 as the engine keeps it, then divided by S."""
    P = {k: torch.tensor(bf16(v), requires_grad=True) for k, v in params.items()}
    bt = {k: torch.tensor(v, dtype=torch.long) for k, v in batch.items()}
    loss, logits = mixed_forward(P, c, bt["input_ids"], bt["attention_mask"],
                                 bt["token_type_ids"], bt["labels"])
    (loss * S).backward()
    out = {"loss": loss.detach().reshape(1).numpy(), "logits": logits.detach().numpy()}
    for k, p in P.items():
        g = p.grad if S == 1.0 else p.grad.to(DT).to(torch.float32) / S
        out["grad." + k] = g.numpy().copy()
    return out


def fp16_scale(c, params, batch):
    """The largest loss scale from 2^16 down (halving, as the dynamic scaler does after
    overflows) whose fp16 gradients are finite: the case's static fp16.loss_scale."""
    S = FP16_SCALE
    while S > 1.0 and not all(np.isfinite(v).all() for k, v in mixed(c, params, batch, S).items()
                              if k.startswith("grad.")):
        S /= 2.0
    return S


def master_steps(params, grads, step):
    """The fp32 master after step["steps"] AdamW steps on one gradient, from the rounded
    weights (as DeepSpeed makes its master from the bf16 module)."""
    master = {k: torch.tensor(bf16(v)) for k, v in params.items()}
    for k, p in master.items():
        p.grad = torch.tensor(np.asarray(grads[k], np.float32))
    opt = torch.optim.AdamW(list(master.values()), lr=step["lr"], betas=tuple(step["betas"]),
                            eps=step["eps"], weight_decay=step["weight_decay"], foreach=False)
    for _ in range(step["steps"]):
        opt.step()
    return {k: p.detach().numpy().copy() for k, p in master.items()}


def module(c, params, batch):
    """The bf16 module's gradients (every tensor bf16), widened to fp32 as DeepSpeed
    accumulates them."""
    P = {k: torch.tensor(v).to(torch.bfloat16).requires_grad_(True) for k, v in params.items()}
    bert_ref.MASK_MIN = float(torch.finfo(torch.bfloat16).min)  # HF: finfo(dtype).min
    bt = {k: torch.tensor(v, dtype=torch.long) for k, v in batch.items()}
    loss, _ = bert_ref.forward(P, c, bt["input_ids"], bt["attention_mask"], bt["token_type_ids"],
                               bt["labels"])
    loss.backward()
    return {"module_grad." + k: p.grad.float().numpy().copy() for k, p in P.items()}


def cmd_make(a):
    c = bert_ref.bert_config(a, "BertForMaskedLM")
    g = torch.Generator().manual_seed(a.seed)
    params = bert_ref.init_params(bert_ref.param_shapes(c), g, c["pad_token_id"])
    batch, _ = bert_ref.make_batch(g, a.batch, a.seq, a.vocab, a.type_vocab)
    set_precision(a.precision)
    S = fp16_scale(c, params, batch) if a.precision == "fp16" else 1.0
    out = mixed(c, params, batch, S)
    if DT == torch.bfloat16:  # (CPU torch has no fp16 matmul, LayerNorm or softmax)
        out.update(module(c, params, batch))
    os.makedirs(a.out, exist_ok=True)
    step = dict(STEP, precision=a.precision)
    if a.precision == "fp16":
        step["loss_scale"] = S
    for fn, obj in (("config.json", c), ("step.json", step)):
        with open(os.path.join(a.out, fn), "w") as f:
            json.dump(obj, f, indent=2)
            f.write("\n")
    save_st(os.path.join(a.out, "model.safetensors"), params, {"format": "pt"})  # fp32, unrounded
    save_st(os.path.join(a.out, "batch.safetensors"), batch)
    save_st(os.path.join(a.out, "expected.safetensors"), out)
    return 0


def check_master(params, act, names, fails):
    """Each adamw.<name> of act must hold 16-bit values, each the rounding of a value within
    compare.py's fp32 AdamW bound of the master after STEP's steps on act's own gradient (from
    the rounded weights); failures appended to fails. Returns (weights, those rounded the other
    way at a boundary)."""
    master = master_steps(params, {n: act["grad." + n] for n in names}, STEP)
    flips = n_w = 0
    for name in names:
        m = master[name].astype(np.float64)
        got = act["adamw." + name].astype(np.float32)
        if (got != bf16(got)).any():
            fails.append(f"FAIL adamw.{name}: holds values that are not {DT}")
        bound, _ = adamw_bounds(master[name], act["grad." + name], STEP["lr"])
        lo, hi = bf16(m - bound), bf16(m + bound)
        okv = (got >= lo) & (got <= hi)
        n_w += got.size
        flips += int((got != bf16(master[name])).sum())
        if not okv.all():
            i = int(np.flatnonzero(~okv)[0])
            fails.append(f"FAIL adamw.{name}: element {i} is {got.flat[i]!r}; the master "
                         f"{m.flat[i]!r} +- {bound.flat[i]:.3g} rounds to [{lo.flat[i]!r}, "
                         f"{hi.flat[i]!r}]")
    return n_w, flips


def normwise(a, b):
    """||a - b|| / ||b|| over the pairs given (float64)."""
    num = sum(float(((np.asarray(x, np.float64) - y) ** 2).sum()) for x, y in zip(a, b))
    den = sum(float((np.asarray(y, np.float64) ** 2).sum()) for y in b)
    return (num / den) ** 0.5 if den > 0 else float("nan")


def row_tol():
    """The median logits row's allowed distance to the mixed reference (the docstring):
    2^-4 u, u the format's rounding unit (bf16 2^-8, fp16 2^-11)."""
    return 2.0 ** -12 if DT == torch.bfloat16 else 2.0 ** -15


def cmd_compare(a):
    with open(os.path.join(a.dir, "step.json")) as f:
        set_precision(json.load(f).get("precision", "bf16"))
    exp, act = load_st(os.path.join(a.dir, "expected.safetensors")), load_st(a.actual)
    params = load_st(os.path.join(a.dir, "model.safetensors"))
    fails, dist = [], {}
    names = sorted(k[len("grad."):] for k in exp if k.startswith("grad."))
    missing = [n for n in names if "grad." + n not in act or "adamw." + n not in act]
    for k in ("loss", "logits"):
        if k not in act:
            missing.append(k)
    if missing:
        print(f"FAIL: missing in actual: {', '.join(missing[:5])}")
        return 1
    # the logits row by row against the mixed reference; the loss and gradient's distances
    V = exp["logits"].shape[-1]
    ea, aa = exp["logits"].reshape(-1, V), act["logits"].reshape(-1, V)
    rows = np.linalg.norm(aa.astype(np.float64) - ea, axis=1) / np.maximum(np.linalg.norm(ea, axis=1), 1e-30)
    med, frac = float(np.median(rows)), float((rows > row_tol()).mean())
    with open(os.path.join(a.dir, "config.json")) as f:
        L = json.load(f)["num_hidden_layers"]
    judged = DT == torch.bfloat16 or L == 1  # (the docstring: fp16's flips cascade with depth)
    if judged and not med <= row_tol():
        fails.append(f"FAIL logits vs the mixed reference: the median row is {med:.3g} away "
                     f"(bound {row_tol():.3g}); {frac:.0%} of the rows beyond it")
    dist["loss"] = normwise([act["loss"]], [exp["loss"]])
    dist["grad"] = normwise([act["grad." + n] for n in names], [exp["grad." + n] for n in names])
    # the weights: the rounding of the master moved by AdamW on zerotrain's own gradient
    n_w, flips = check_master(params, act, names, fails)
    # the gradient against the bf16 module's (fp16: against the mixed reference, within the
    # noise fp16's roundings themselves make, the same bound with u = 2^-11)
    u = 2.0 ** -8 if DT == torch.bfloat16 else 2.0 ** -11
    tol = 2.0 * (60.0 * L + 20.0) ** 0.5 * u
    mod = sorted(k[len("module_grad."):] for k in exp if k.startswith("module_grad."))
    if mod:
        rel = normwise([act["grad." + n] for n in mod], [exp["module_grad." + n] for n in mod])
    else:
        rel = dist["grad"]
    against = "the bf16 module" if mod else "the fp16 mixed reference"
    if not rel <= tol:
        fails.append(f"FAIL gradients vs {against}: normwise {rel:.4g} > {tol:.3g}")
    for line in fails[:20]:
        print(line)
    print(f"{'FAILED' if fails else 'OK'}: logits vs the mixed reference: median row {med:.2g} "
          f"({'bound %.2g' % row_tol() if judged else 'not judged'}), {frac:.0%} of rows beyond; "
          f"loss {dist['loss']:.2g}, gradient "
          f"{dist['grad']:.2g} (not judged); weights {n_w} ({flips} rounded the other way at a "
          f"boundary); gradient vs {against} {rel:.4f} (bound {tol:.3f})")
    return 1 if fails else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("--out", required=True)
    m.add_argument("--seed", type=int, required=True)
    m.add_argument("--precision", choices=("bf16", "fp16"), default="bf16")
    for flag, typ, dflt in (("--vocab", int, 997), ("--hidden", int, 48), ("--layers", int, 2),
                            ("--heads", int, 4), ("--intermediate", int, 100), ("--max-pos", int, 40),
                            ("--type-vocab", int, 2), ("--batch", int, 3), ("--seq", int, 17),
                            ("--eps", float, 1e-12)):
        m.add_argument(flag, type=typ, default=dflt)
    c = sub.add_parser("compare")
    c.add_argument("dir")
    c.add_argument("actual")
    a = ap.parse_args()
    return cmd_make(a) if a.cmd == "make" else cmd_compare(a)


if __name__ == "__main__":
    sys.exit(main())
