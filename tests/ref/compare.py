#!/usr/bin/python3
"""Compare an implementation's output safetensors (loss, logits, grad.*, adamw.*) against a fixture's
expected.safetensors with the tolerance rules of /work/shared/fixtures/README.md. Also a module
(load_st/save_st/check). Needs only numpy; it does not compute anything about the model itself."""
import argparse, json, struct, sys
import numpy as np

TOL = {"loss": 1e-5, "logits": 1e-4, "grad": 1e-4, "adamw_lr": 1e-2, "adamw_tiny_lr": 2.002}
DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I64": np.int64, "I32": np.int32,
          "BF16": np.uint16, "U8": np.uint8}



def add_fixture_commands(sub):
    """The references' `check-fixture DIR` and `grad` (the interface of `zerotrain grad`) subcommands."""
    ck = sub.add_parser("check-fixture", help="recompute a fixture folder and compare with its expected values")
    ck.add_argument("dir")
    gr = sub.add_parser("grad", help="write loss/logits/grad.*/adamw.* like `zerotrain grad`")
    gr.add_argument("--model", required=True)
    gr.add_argument("--batch", required=True)
    gr.add_argument("--step")
    gr.add_argument("--out", required=True)
    gr.add_argument("--float64", action="store_true", help="compute in float64 (output still F32)")

def load_st(path):
    """Read a safetensors file into {name: numpy array} (BF16 is widened to float32)."""
    with open(path, "rb") as f:
        buf = f.read()
    n = struct.unpack("<Q", buf[:8])[0]
    out = {}
    for name, info in json.loads(buf[8:8 + n]).items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        a = np.frombuffer(buf[8 + n + b:8 + n + e], dtype=np.dtype(DTYPES[info["dtype"]]).newbyteorder("<"))
        if info["dtype"] == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        out[name] = a.reshape(info["shape"]).copy()
    return out


def save_st(path, tensors, metadata=None):
    """Write {name: numpy array} (float32/int64/...) as safetensors, tensors in name order."""
    rev = {np.dtype(v): k for k, v in DTYPES.items() if k != "BF16"}
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = dict(metadata)
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        raw = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": rev[a.dtype], "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-(8 + len(h)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def grads_and_adamw(P, step, out):
    """out gains grad.<name> (each parameter's .grad after backward) and adamw.<name> (the parameters after
    step["steps"] (default 1) torch.optim.AdamW steps with step.json's lr, betas, eps, weight_decay and
    amsgrad): the references' common ending of a fixture step. Returns out."""
    import torch
    out.update({"grad." + k: p.grad.numpy().copy() for k, p in P.items()})
    opt = torch.optim.AdamW(list(P.values()), lr=step["lr"], betas=tuple(step["betas"]), eps=step["eps"],
                            weight_decay=step["weight_decay"], amsgrad=step.get("amsgrad", False), foreach=False)
    for _ in range(step.get("steps", 1)):
        opt.step()
    out.update({"adamw." + k: p.detach().numpy().copy() for k, p in P.items()})
    return out


def adamw_bounds(b, g, lr):
    """Per-element allowed |a-b| for an adamw.<name> tensor with expected value b and expected grad g."""
    b32 = np.asarray(b, np.float32)
    bound = TOL["adamw_lr"] * lr + 4.0 * np.spacing(np.abs(b32)).astype(np.float64)
    ag = np.abs(np.asarray(g, np.float64))
    tiny = (ag <= 2e-4 * ag.max()) | (ag <= 1e-6) if ag.size else ag.astype(bool)
    return np.where(tiny, TOL["adamw_tiny_lr"] * lr, bound), tiny


def check(exp, act, lr=1e-3, require_adamw=False, require_logits=False):
    """Compare dicts of arrays. Returns (failures: list of str, worst: {kind: (metric, name)}).
    Metrics: loss/logits/grad as in the README (pass if <= tol); adamw: max(|a-b| / bound) (pass if <= 1)
    plus 'adamw_lr' = max |a-b| / lr over well-conditioned elements (informative)."""
    fails, worst = [], {}

    def note(kind, val, name):
        if kind not in worst or (not val <= worst[kind][0] and not np.isnan(worst[kind][0])):
            worst[kind] = (val, name)

    def first_bad(a, b, bad, val, metric):
        i = int(np.flatnonzero(bad)[0]) if bad.any() else int(np.nanargmax(np.abs(a - b)))
        nonfin = int((~np.isfinite(a)).sum())
        fails.append(f"FAIL {name}: max|a-b|={np.max(np.abs(a - b)):.4g} metric={metric:.4g} (tol {val})"
                     + (f" [{nonfin} non-finite values]" if nonfin else "")
                     + f" first bad flat index {i}: actual={a.flat[i]!r} expected={b.flat[i]!r}")

    gmax = max([np.abs(v).max() for k, v in exp.items() if k.startswith("grad.") and v.size] + [0.0])
    for name in sorted(exp):
        kind = name.split(".")[0] if "." in name else name
        if kind not in ("loss", "logits", "grad", "adamw"):
            continue
        if name not in act:
            if kind == "grad" or kind == "loss" or (kind == "adamw" and require_adamw) \
                    or (kind == "logits" and require_logits):
                fails.append(f"FAIL {name}: missing in actual")
            continue
        b = exp[name].astype(np.float64)
        a = act[name].astype(np.float64)
        if kind == "loss":
            a, b = a.reshape(-1), b.reshape(-1)
        if a.shape != b.shape:
            fails.append(f"FAIL {name}: shape {list(a.shape)} != expected {list(b.shape)}")
            continue
        d = np.abs(a - b)
        if kind in ("loss", "logits", "grad"):
            den = {"loss": np.abs(b).max(), "logits": np.abs(b).max(),
                   "grad": max(np.abs(b).max() if b.size else 0.0, 1e-3 * gmax)}[kind]
            den = max(den, 1e-30)
            m = float(np.max(d) / den) if d.size else 0.0
            if np.isnan(d).any():
                m = float("nan")
            note(kind, m, name)
            if not m <= TOL[kind]:
                first_bad(a, b, ~(d <= TOL[kind] * den), TOL[kind], m)
        else:
            g = exp.get("grad." + name[len("adamw."):])
            if g is None:
                fails.append(f"FAIL {name}: expected file has no grad.{name[6:]} to classify elements")
                continue
            bound, tiny = adamw_bounds(b, g, lr)
            ratio = float(np.max(d / bound)) if d.size else 0.0
            if np.isnan(d).any():
                ratio = float("nan")
            note("adamw", ratio, name)
            if (~tiny).any():
                note("adamw_lr", float(np.max(d[~tiny]) / lr), name)
            if not ratio <= 1.0:
                first_bad(a, b, ~(d <= bound), "1 (|a-b|/bound)", ratio)
    return fails, worst


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("expected")
    ap.add_argument("actual")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--require-adamw", action="store_true")
    ap.add_argument("--require-logits", action="store_true")
    args = ap.parse_args(argv)
    exp, act = load_st(args.expected), load_st(args.actual)
    fails, worst = check(exp, act, args.lr, args.require_adamw, args.require_logits)
    n = sum(1 for k in exp if k.split(".")[0] in ("loss", "logits", "grad", "adamw"))
    for line in fails:
        print(line)
    parts = [f"{k} {v[0]:.3g} ({v[1]})" for k, v in sorted(worst.items())]
    if fails:
        print(f"FAILED {args.actual} vs {args.expected}: {len(fails)} of {n} tensors failed; worst: " + "; ".join(parts))
        return 1
    print(f"OK {args.actual} vs {args.expected}: {n} tensors; worst metric per kind "
          f"(adamw = max |a-b|/bound, adamw_lr = max |a-b|/lr where grad not tiny): " + "; ".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
