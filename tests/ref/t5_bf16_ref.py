#!/usr/bin/python3
"""T5 in bf16 the way DeepSpeed runs it (deepspeed/runtime/bf16_optimizer.py): an independent
plain-torch reference for `zerotrain grad` on a T5 case whose step.json asks for bf16.

DeepSpeed casts the module to bf16 (`module.bfloat16()`), keeps an fp32 master made from the
bf16 weights, accumulates gradients in fp32 and runs the fp32 optimizer on the master, rounding
it back into the bf16 weights. The module here is tests/ref/t5_ref.py's T5ForConditionalGeneration
(written from transformers' modeling_t5.py) run on bf16 tensors: every operation's result is
rounded to bf16, as on a GPU (the mask term is finfo(bfloat16).min, as Hugging Face takes
finfo(dtype).min).

`make` writes t5_ref.py's random case (config, fp32 weights, batch) with step.json asking for
bf16 (five AdamW steps at lr 1e-4, as tests/ref/bf16_ref.py: below half a bf16 step of most
weights, so only a master that accumulates moves them), and expected_bf16.safetensors:
  - module_grad.*: the bf16 module's gradients, widened to fp32;
  - grad32.*: the fp32 model's gradients from the same rounded weights (printed, not judged).
`compare DIR ACTUAL` judges zerotrain's output:
  - gradients: the whole vector against the bf16 module's, normwise,
    ||g - g_bf16|| / ||g_bf16|| <= 2 sqrt(K) u, u = 2^-8. This is bf16_ref.py's argument: each of
    K rounded operations on a path adds an independent relative error of about u, so the sum
    grows as sqrt(K) u, and the bound is twice that. Count about 60 operations per block
    (forward and backward: the RMS norm's 6, four products and their gradients, scores, bias,
    softmax, context, the residual sum) and 90 per decoder block (its cross-attention adds
    half), plus 20 for the embeddings, the final norms and the head: K = 60 Le + 90 Ld + 20
    (0.10 for one block each, 0.14 for two);
  - adamw.*: every weight must be a bf16 value, and the bf16 rounding of a value within
    compare.py's fp32 AdamW bound of the fp32 master after the five steps on zerotrain's own
    gradient (bf16_ref.py's master_steps);
  - the loss and logits are printed against the module's (not judged: the module rounds
    differently from zerotrain's fp32-inside kernels, and its noise is what the gradient
    bound already judges)."""
import argparse, json, os, subprocess, sys
import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bf16_ref  # noqa: E402
import t5_ref  # noqa: E402
from compare import load_st, save_st  # noqa: E402

torch.set_num_threads(1)
U = 2.0 ** -8


def module_grads(c, params, batch, dtype):
    """loss, logits and gradients of t5_ref's model on `dtype` tensors of the bf16-rounded
    weights, widened to fp32"""
    P = {k: torch.tensor(bf16_ref.bf16(v)).to(dtype).requires_grad_(True) for k, v in params.items()}
    t5_ref.MASK_MIN = float(torch.finfo(dtype).min) if dtype == torch.bfloat16 else \
        float(torch.finfo(torch.float32).min)
    bt = {k: torch.tensor(v, dtype=torch.long) for k, v in batch.items()}
    loss, logits = t5_ref.forward(P, c, bt["input_ids"], bt["attention_mask"], bt["labels"],
                                  bt.get("decoder_attention_mask"))
    loss.backward()
    return (float(loss), logits.detach().float().numpy(),
            {k: p.grad.float().numpy().copy() for k, p in P.items()})


def cmd_make(a, rest):
    r = subprocess.run([sys.executable, os.path.join(HERE, "t5_ref.py"), "make", "--out", a.out,
                        "--seed", str(a.seed)] + rest, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("t5_ref.py make failed:\n" + r.stdout + r.stderr)
    c, params, batch, _ = t5_ref.load_folder(a.out)
    step = dict(bf16_ref.STEP)  # precision bf16, lr 1e-4, five steps
    with open(os.path.join(a.out, "step.json"), "w") as f:
        json.dump(step, f, indent=2)
        f.write("\n")
    loss, logits, g16 = module_grads(c, params, batch, torch.bfloat16)
    loss32, logits32, g32 = module_grads(c, params, batch, torch.float32)
    out = {"loss": np.array([loss], np.float32), "logits": logits,
           "loss32": np.array([loss32], np.float32), "logits32": logits32}
    out.update({"module_grad." + k: v for k, v in g16.items()})
    out.update({"grad32." + k: v for k, v in g32.items()})
    save_st(os.path.join(a.out, "expected_bf16.safetensors"), out)
    print(f"make {a.out}: module loss {loss:.5f}, fp32 loss {loss32:.5f}")
    return 0


def cmd_compare(a):
    with open(os.path.join(a.dir, "config.json")) as f:
        c = json.load(f)
    exp = load_st(os.path.join(a.dir, "expected_bf16.safetensors"))
    act = load_st(a.actual)
    params = load_st(os.path.join(a.dir, "model.safetensors"))
    names = sorted(k[len("module_grad."):] for k in exp if k.startswith("module_grad."))
    missing = [n for n in names if "grad." + n not in act or "adamw." + n not in act]
    if missing:
        print("FAIL: missing in actual: " + ", ".join(missing[:5]))
        return 1
    fails = []
    K = 60.0 * c["num_layers"] + 90.0 * c["num_decoder_layers"] + 20.0
    tol = 2.0 * K ** 0.5 * U
    rel = bf16_ref.normwise([act["grad." + n] for n in names], [exp["module_grad." + n] for n in names])
    rel32 = bf16_ref.normwise([act["grad." + n] for n in names], [exp["grad32." + n] for n in names])
    mod32 = bf16_ref.normwise([exp["module_grad." + n] for n in names], [exp["grad32." + n] for n in names])
    if not rel <= tol:
        fails.append(f"FAIL gradients vs the bf16 module: normwise {rel:.4g} > {tol:.3g}")
    n_w, flips = bf16_ref.check_master(params, act, names, fails)
    dl = abs(float(act["loss"][0]) - float(exp["loss"][0])) / abs(float(exp["loss"][0]))
    lg = bf16_ref.normwise([act["logits"]], [exp["logits"]])
    for line in fails[:20]:
        print(line)
    print(f"{'FAILED' if fails else 'OK'}: gradient vs the bf16 module {rel:.4f} (bound {tol:.3f}; "
          f"the module vs fp32 {mod32:.4f}, zerotrain vs fp32 {rel32:.4f}); weights {n_w} ({flips} "
          f"rounded the other way at a boundary); loss {dl:.2g}, logits {lg:.2g} from the module's "
          f"(not judged)")
    return 1 if fails else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make", help="t5_ref.py make's arguments; the case asks for bf16")
    m.add_argument("--out", required=True)
    m.add_argument("--seed", type=int, required=True)
    c = sub.add_parser("compare")
    c.add_argument("dir")
    c.add_argument("actual")
    a, rest = ap.parse_known_args()
    if a.cmd == "make":
        return cmd_make(a, rest)
    if rest:
        ap.error("unknown arguments: " + " ".join(rest))
    return cmd_compare(a)


if __name__ == "__main__":
    sys.exit(main())
