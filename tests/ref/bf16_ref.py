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
  - exact:  the forward and backward in fp32 on the bf16-rounded weights (what zerotrain
            computes: bf16 parameters, fp32 arithmetic) -> loss, logits, grad.*; the master
            after five AdamW steps on that gradient (master.*; lr 1e-4, below half a bf16 step of
            most weights, so only a master that accumulates moves them) and the weights it rounds to (adamw.*);
  - module: the forward and backward of the bf16 module itself (every activation bf16, as on a
            GPU) -> module_grad.*.
`compare` checks zerotrain's output against them:
  - loss, logits, grad.*: compare.py's fp32 tolerances (the same arithmetic, different order);
  - adamw.*: bf16 values, each the bf16 rounding of a value within compare.py's fp32 AdamW
    bound of the reference master (rounding is monotonic: between the roundings of master -
    bound and master + bound). An fp32 step that may differ by its own tolerance may round to
    the other neighbour only where the master is that close to a rounding boundary;
  - module_grad.*: the whole gradient vector against the bf16 module's, normwise:
    ||g - g_bf16|| / ||g_bf16|| <= 2 sqrt(K) u. The bf16 module rounds the result of every
    operation to 8 bits of mantissa (u = 2^-8); a layer has about 30 rounded operations in its
    forward pass (3 projections, scores, softmax, context, output, 2 residual adds, 2 LayerNorms
    of ~7 operations, the FFN and GELU) and as many in its backward pass, and the embeddings
    and the head about 20: K = 60 L + 20 on a path, whose independent roundings grow as
    sqrt(K) u (0.035 for L = 1, 0.055 for L = 3); the bound is twice that. zerotrain's fp32
    arithmetic is the exact side, so the figure (reported) is the bf16 module's noise; the
    exact reference above is what pins zerotrain's arithmetic down."""
import argparse, json, os, sys
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bert_ref  # noqa: E402
from compare import TOL, adamw_bounds, check, load_st, save_st  # noqa: E402

torch.set_num_threads(1)
# five steps on the one gradient, lr below half a bf16 step of most weights (|w| > 0.05):
# only an fp32 master that accumulates the updates moves them, as it should
STEP = dict(bert_ref.STEP, precision="bf16", lr=1e-4, steps=5)


def bf16(a):
    """fp32 array -> the fp32 values of its bf16 rounding (torch's round to nearest even)."""
    return torch.tensor(a, dtype=torch.float32).to(torch.bfloat16).to(torch.float32).numpy()


def exact(c, params, batch, step):
    """fp32 forward/backward on the rounded weights, AdamW steps on the fp32 master."""
    rounded = {k: bf16(v) for k, v in params.items()}
    out = bert_ref.run(c, rounded, batch, dict(step, steps=0))  # loss, logits, grads
    P = {k: torch.tensor(v, requires_grad=False) for k, v in rounded.items()}
    master = [P[k].clone() for k in P]
    for p, k in zip(master, P):
        p.grad = torch.tensor(out["grad." + k])
    opt = torch.optim.AdamW(master, lr=step["lr"], betas=tuple(step["betas"]), eps=step["eps"],
                            weight_decay=step["weight_decay"], foreach=False)
    for _ in range(step["steps"]):
        opt.step()
    for p, k in zip(master, P):
        out["master." + k] = p.detach().numpy().copy()
        out["adamw." + k] = bf16(out["master." + k])
    return out


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
    out = exact(c, params, batch, STEP)
    out.update(module(c, params, batch))
    os.makedirs(a.out, exist_ok=True)
    for fn, obj in (("config.json", c), ("step.json", STEP)):
        with open(os.path.join(a.out, fn), "w") as f:
            json.dump(obj, f, indent=2)
            f.write("\n")
    save_st(os.path.join(a.out, "model.safetensors"), params, {"format": "pt"})  # fp32, unrounded
    save_st(os.path.join(a.out, "batch.safetensors"), batch)
    save_st(os.path.join(a.out, "expected.safetensors"), out)
    return 0


def cmd_compare(a):
    exp, act = load_st(os.path.join(a.dir, "expected.safetensors")), load_st(a.actual)
    lr = STEP["lr"]
    plain = {k: v for k, v in exp.items() if k.split(".")[0] in ("loss", "logits", "grad")}
    fails, worst = check(plain, act, lr, False, True)
    flips = n = 0
    for k in sorted(exp):
        if not k.startswith("master."):
            continue
        name = k[len("master."):]
        m = exp[k].astype(np.float64)
        got = act.get("adamw." + name)
        if got is None:
            fails.append(f"FAIL adamw.{name}: missing in actual")
            continue
        got = got.astype(np.float32)
        if (got.view(np.uint32) & 0xFFFF).any():
            fails.append(f"FAIL adamw.{name}: holds values that are not bf16")
        want = exp["adamw." + name].astype(np.float32)
        bound, _ = adamw_bounds(exp[k], exp["grad." + name], lr)
        lo, hi = bf16(m - bound), bf16(m + bound)
        okv = (got >= lo) & (got <= hi)
        n += got.size
        flips += int((got != want).sum())
        if not okv.all():
            i = int(np.flatnonzero(~okv)[0])
            fails.append(f"FAIL adamw.{name}: element {i} is {got.flat[i]!r}; the master "
                         f"{m.flat[i]!r} +- {bound.flat[i]:.3g} rounds to [{lo.flat[i]!r}, "
                         f"{hi.flat[i]!r}]")
    num = den = 0.0
    for k in exp:
        if k.startswith("module_grad."):
            g = act.get("grad." + k[len("module_grad."):])
            if g is not None:
                num += float(((g.astype(np.float64) - exp[k]) ** 2).sum())
                den += float((exp[k].astype(np.float64) ** 2).sum())
    rel = (num / den) ** 0.5 if den > 0 else float("nan")
    with open(os.path.join(a.dir, "config.json")) as f:
        L = json.load(f)["num_hidden_layers"]
    tol = 2.0 * (60.0 * L + 20.0) ** 0.5 * 2.0 ** -8
    if not rel <= tol:
        fails.append(f"FAIL gradients vs the bf16 module: normwise {rel:.4g} > {tol:.3g}")
    for line in fails:
        print(line)
    parts = [f"{k} {v[0]:.3g}" for k, v in sorted(worst.items())]
    print(f"{'FAILED' if fails else 'OK'}: " + "; ".join(parts) + f"; weights {n} "
          f"({flips} rounded the other way at a boundary); vs the bf16 module {rel:.4f} (bound {tol:.3f})")
    return 1 if fails else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("--out", required=True)
    m.add_argument("--seed", type=int, required=True)
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
