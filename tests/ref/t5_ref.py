#!/usr/bin/python3
"""Independent plain-torch T5ForConditionalGeneration reference (spec: /work/shared/fixtures/README.md, T5 section):
generates random fixture folders (`make`), re-checks existing ones (`check-fixture`), and mimics `zerotrain grad`
(`grad`). No dropout, no cache; CPU, float32 (float64 only to measure round-off). Optional batch tensor
`decoder_attention_mask` [B, Td]: decoder self-attention mask = causal * dmask[:, None, None, :] (as Hugging Face)."""
import argparse, json, math, os, sys
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import add_fixture_commands, TOL, grads_and_adamw, check, load_st, save_st  # noqa: E402
from bert_ref import STEP, noise  # noqa: E402  (same AdamW settings; float32-vs-float64 metrics via compare.py)

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)
MASK_MIN = float(torch.finfo(torch.float32).min)  # -3.4028234663852886e38, also used in float64 runs
WEIGHTS = ("HF T5 init (initializer_factor 1.0) with layer_norm weights 1+0.1*N(0,1), "
           "relative_attention_bias 0.5*N(0,1), untied lm_head std d_model**-0.5")


def gated(c):
    return c["feed_forward_proj"].startswith("gated-")


def param_shapes(c):
    """{name: (shape, init std or 'ln' / 'rab')} in a fixed generation order."""
    V, C, D, F, H = c["vocab_size"], c["d_model"], c["d_kv"], c["d_ff"], c["num_heads"]
    inner = H * D
    s = {"shared.weight": ([V, C], 1.0)}

    def attn(p, rab):
        s[p + "q.weight"] = ([inner, C], (C * D) ** -0.5)
        s[p + "k.weight"] = ([inner, C], C ** -0.5)
        s[p + "v.weight"] = ([inner, C], C ** -0.5)
        s[p + "o.weight"] = ([C, inner], inner ** -0.5)
        if rab:
            s[p + "relative_attention_bias.weight"] = ([c["relative_attention_num_buckets"], H], "rab")

    def ff(p):
        for wi in (("wi_0", "wi_1") if gated(c) else ("wi",)):
            s[p + "DenseReluDense." + wi + ".weight"] = ([F, C], C ** -0.5)
        s[p + "DenseReluDense.wo.weight"] = ([C, F], F ** -0.5)
        s[p + "layer_norm.weight"] = ([C], "ln")

    for i in range(c["num_layers"]):
        p = f"encoder.block.{i}.layer."
        attn(p + "0.SelfAttention.", i == 0)
        s[p + "0.layer_norm.weight"] = ([C], "ln")
        ff(p + "1.")
    s["encoder.final_layer_norm.weight"] = ([C], "ln")
    for i in range(c["num_decoder_layers"]):
        p = f"decoder.block.{i}.layer."
        attn(p + "0.SelfAttention.", i == 0)
        s[p + "0.layer_norm.weight"] = ([C], "ln")
        attn(p + "1.EncDecAttention.", False)
        s[p + "1.layer_norm.weight"] = ([C], "ln")
        ff(p + "2.")
    s["decoder.final_layer_norm.weight"] = ([C], "ln")
    if not c["tie_word_embeddings"]:
        s["lm_head.weight"] = ([V, C], C ** -0.5)
    return s


def rel_bucket(n, bidirectional, num_buckets, max_distance):
    """T5 relative position bucket of n = key - query (long tensor); the log is computed in float32."""
    bucket = torch.zeros_like(n)
    nb = num_buckets
    if bidirectional:
        nb //= 2
        bucket = bucket + (n > 0).long() * nb
        n = n.abs()
    else:
        n = torch.clamp(-n, min=0)
    max_exact = nb // 2
    large = max_exact + (torch.log(torch.clamp(n, min=1).to(torch.float32) / max_exact)
                         / math.log(max_distance / max_exact) * (nb - max_exact)).to(torch.long)  # truncation
    large = torch.clamp(large, max=nb - 1)
    return bucket + torch.where(n < max_exact, n, large)


def position_bias(P, name, c, Tq, Tk, bidirectional):
    """[1, heads, Tq, Tk] = relative_attention_bias[bucket(j - i)]."""
    rel = torch.arange(Tk)[None, :] - torch.arange(Tq)[:, None]
    b = rel_bucket(rel, bidirectional, c["relative_attention_num_buckets"], c["relative_attention_max_distance"])
    return P[name][b].permute(2, 0, 1)[None]


def t5_layer_norm(x, w, eps):  # no mean subtraction, no bias
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


def attention(P, p, c, xq, xkv, bias):
    """Multi-head attention, scores q k^T (no 1/sqrt(d_kv)) + bias (position bias and/or mask term)."""
    B, Tq, _ = xq.shape
    Tk = xkv.shape[1]
    H, D = c["num_heads"], c["d_kv"]
    q = (xq @ P[p + "q.weight"].T).view(B, Tq, H, D).transpose(1, 2)
    k = (xkv @ P[p + "k.weight"].T).view(B, Tk, H, D).transpose(1, 2)
    v = (xkv @ P[p + "v.weight"].T).view(B, Tk, H, D).transpose(1, 2)
    w = torch.softmax(q @ k.transpose(-1, -2) + bias, dim=-1)
    ctx = (w @ v).transpose(1, 2).reshape(B, Tq, H * D)
    return ctx @ P[p + "o.weight"].T


def feed_forward(P, p, c, x):
    if gated(c):
        assert c["feed_forward_proj"] == "gated-gelu", c["feed_forward_proj"]
        h = gelu_tanh(x @ P[p + "wi_0.weight"].T) * (x @ P[p + "wi_1.weight"].T)
    else:
        assert c["feed_forward_proj"] == "relu", c["feed_forward_proj"]
        h = torch.relu(x @ P[p + "wi.weight"].T)
    return h @ P[p + "wo.weight"].T


def shift_right(labels, c):
    d = torch.full_like(labels, c["decoder_start_token_id"])
    d[:, 1:] = labels[:, :-1]
    return torch.where(d == -100, torch.full_like(d, c["pad_token_id"]), d)


def forward(P, c, ids, mask, labels, dmask=None):
    eps = c["layer_norm_epsilon"]
    dt = P["shared.weight"].dtype
    B, Te = ids.shape
    Td = labels.shape[1]
    emb = P["shared.weight"]
    # encoder
    enc_term = ((1.0 - mask.to(dt)) * MASK_MIN)[:, None, None, :]  # keys only: [B,1,1,Te]
    x = emb[ids]
    bias = position_bias(P, "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", c, Te, Te, True) \
        + enc_term
    for i in range(c["num_layers"]):
        p = f"encoder.block.{i}.layer."
        x = x + attention(P, p + "0.SelfAttention.", c, *(2 * [t5_layer_norm(x, P[p + "0.layer_norm.weight"], eps)]),
                          bias)
        x = x + feed_forward(P, p + "1.DenseReluDense.", c, t5_layer_norm(x, P[p + "1.layer_norm.weight"], eps))
    enc = t5_layer_norm(x, P["encoder.final_layer_norm.weight"], eps)
    # decoder
    causal = (torch.arange(Td)[None, :] <= torch.arange(Td)[:, None]).to(dt)[None, None]  # [1,1,Td,Td] j <= i
    m = causal if dmask is None else causal * dmask.to(dt)[:, None, None, :]
    x = emb[shift_right(labels, c)]
    bias = position_bias(P, "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", c, Td, Td, False) \
        + (1.0 - m) * MASK_MIN
    for i in range(c["num_decoder_layers"]):
        p = f"decoder.block.{i}.layer."
        h = t5_layer_norm(x, P[p + "0.layer_norm.weight"], eps)
        x = x + attention(P, p + "0.SelfAttention.", c, h, h, bias)
        x = x + attention(P, p + "1.EncDecAttention.", c, t5_layer_norm(x, P[p + "1.layer_norm.weight"], eps), enc,
                          enc_term)
        x = x + feed_forward(P, p + "2.DenseReluDense.", c, t5_layer_norm(x, P[p + "2.layer_norm.weight"], eps))
    y = t5_layer_norm(x, P["decoder.final_layer_norm.weight"], eps)
    if c["tie_word_embeddings"]:
        logits = (y * c["d_model"] ** -0.5) @ emb.T
    else:
        logits = y @ P["lm_head.weight"].T
    lab = labels.reshape(-1)
    keep = lab != -100
    logp = torch.log_softmax(logits.reshape(-1, logits.shape[-1])[keep], dim=-1)
    loss = -logp.gather(1, lab[keep][:, None]).sum() / keep.sum()
    return loss, logits


def run(c, params, batch, step, dtype=torch.float32):
    """Loss, logits, grads and one AdamW step; returns {name: numpy array of `dtype`}."""
    P = {k: torch.tensor(v, dtype=dtype, requires_grad=True) for k, v in params.items()}
    bt = {k: torch.tensor(v, dtype=torch.long) for k, v in batch.items()}
    loss, logits = forward(P, c, bt["input_ids"], bt["attention_mask"], bt["labels"], bt.get("decoder_attention_mask"))
    loss.backward()
    out = {"loss": loss.detach().reshape(1).numpy(), "logits": logits.detach().numpy()}
    grads_and_adamw(P, step, out)
    return out


def load_folder(d):
    with open(os.path.join(d, "config.json")) as f:
        c = json.load(f)
    with open(os.path.join(d, "step.json")) as f:
        step = json.load(f)
    return c, load_st(os.path.join(d, "model.safetensors")), load_st(os.path.join(d, "batch.safetensors")), step


def make_batch(g, B, Te, Td, V, dec_mask):
    """input_ids in [2, V) ending with eos 1, 0 (pad) only where attention_mask is 0; labels in [2, V) ending with
    eos 1, -100 after the row's length and at least one -100 inside a row when Td >= 2; optional
    decoder_attention_mask (suffix zeros after the label length plus random interior zeros, position 0 always 1)."""
    ri = lambda lo, hi: int(torch.randint(lo, hi, (1,), generator=g))  # noqa: E731  lo <= x < hi
    ids, mask, labels = np.zeros((B, Te), np.int64), np.zeros((B, Te), np.int64), np.full((B, Td), -100, np.int64)
    full_e = ri(0, B) if B > 1 else -1   # B == 1: the single row may or may not be padded
    padded_e = (full_e + ri(1, B)) % B if B > 1 else -1
    full_d = ri(0, B)
    enc_len, dec_len = [], []
    for b in range(B):
        if b == full_e:
            L = Te
        elif b == padded_e:
            L = ri(1, max(Te - 1, 1) + 1)  # strictly padded when Te > 1
        elif B == 1:
            L = ri(max(1, Te // 2), Te + 1)
        else:
            L = ri(1, Te + 1)
        enc_len.append(L)
        mask[b, :L] = 1
        ids[b, :L] = torch.randint(2, V, (L,), generator=g).numpy()
        ids[b, L - 1] = 1
        Ld = Td if b == full_d else ri(1, Td + 1)
        dec_len.append(Ld)
        labels[b, :Ld] = torch.randint(2, V, (Ld,), generator=g).numpy()
        labels[b, Ld - 1] = 1
    # ignored labels inside sequences: one guaranteed (in the longest row), others with probability 0.3 per row
    inner = int(np.argmax(dec_len))
    for b in range(B):
        if dec_len[b] >= 2 and (b == inner or float(torch.rand((), generator=g)) < 0.3):
            labels[b, ri(0, dec_len[b] - 1)] = -100  # position < dec_len-1: eos stays, so every row keeps a label
    batch = {"input_ids": ids, "attention_mask": mask, "labels": labels}
    if dec_mask:
        dm = np.zeros((B, Td), np.int64)
        for b in range(B):
            dm[b, :dec_len[b]] = 1
            drop = (torch.rand(Td, generator=g) < 0.15).numpy()
            drop[0] = False
            dm[b, drop] = 0
        if Td >= 2 and dm.all():
            dm[ri(0, B), ri(1, Td)] = 0
        batch["decoder_attention_mask"] = dm
    return batch, enc_len, dec_len


def cmd_make(a):
    gated_ff = a.ff == "gated-gelu"
    c = {"architectures": ["T5ForConditionalGeneration"], "model_type": "t5", "vocab_size": a.vocab,
         "d_model": a.d_model, "d_kv": a.d_kv, "d_ff": a.d_ff, "num_heads": a.heads, "num_layers": a.layers,
         "num_decoder_layers": a.dec_layers, "relative_attention_num_buckets": a.buckets,
         "relative_attention_max_distance": a.max_distance, "dropout_rate": 0.0, "layer_norm_epsilon": a.eps,
         "initializer_factor": 1.0, "feed_forward_proj": a.ff, "dense_act_fn": "gelu_new" if gated_ff else "relu",
         "is_gated_act": gated_ff, "is_encoder_decoder": True, "use_cache": True, "pad_token_id": 0,
         "eos_token_id": 1, "decoder_start_token_id": 0, "tie_word_embeddings": bool(a.tie), "torch_dtype": "float32"}
    assert a.vocab >= 3 and min(a.d_model, a.d_kv, a.d_ff, a.heads, a.layers, a.dec_layers, a.batch, a.enc_len,
                                a.dec_len) >= 1, "inconsistent shape arguments"
    assert a.buckets >= 4 and a.max_distance > a.buckets // 2, "need num_buckets >= 4 and max_distance > num_buckets/2"
    g = torch.Generator().manual_seed(a.seed)
    params = {}
    for name, (shape, std) in param_shapes(c).items():
        z = torch.randn(shape, generator=g)
        z = 1.0 + 0.1 * z if std == "ln" else 0.5 * z if std == "rab" else std * z
        params[name] = z.numpy().astype(np.float32)
    batch, enc_len, dec_len = make_batch(g, a.batch, a.enc_len, a.dec_len, a.vocab, a.dec_mask)
    o32 = run(c, params, batch, STEP, torch.float32)
    o64 = run(c, params, batch, STEP, torch.float64)
    obs = noise(o32, o64, STEP["lr"])
    fails, _ = check(o32, {k: v.astype(np.float32) for k, v in o64.items()}, STEP["lr"], True, True)
    if fails:  # the float64 result must pass against the float32 expected values
        sys.exit("make: float64 run does not agree with float32 expected values:\n" + "\n".join(fails))
    os.makedirs(a.out, exist_ok=True)
    meta = {"fixture": os.path.basename(os.path.normpath(a.out)), "generator": "zerotrain tests/ref/t5_ref.py",
            "torch_version": torch.__version__, "generator_command": "t5_ref.py " + " ".join(sys.argv[1:]),
            "seed": a.seed, "dtype": "float32", "device": "cpu", "deterministic_algorithms": True, "num_threads": 1,
            "tolerances": {"loss_rel": TOL["loss"], "logits_rel_to_max": TOL["logits"],
                           "grad_rel_to_max": TOL["grad"], "adamw_abs_in_units_of_lr": TOL["adamw_lr"]},
            "tolerance_definitions": "see /work/shared/fixtures/README.md (applied by tests/ref/compare.py)",
            "observed_float32_vs_float64": obs, "weights": WEIGHTS,
            "num_parameters": int(sum(v.size for v in params.values())), "num_parameter_tensors": len(params),
            "num_label_tokens": int((batch["labels"] != -100).sum()), "encoder_row_lengths": enc_len,
            "decoder_row_lengths": dec_len, "decoder_attention_mask": bool(a.dec_mask)}
    for fn, obj in (("config.json", c), ("step.json", STEP), ("meta.json", meta)):
        with open(os.path.join(a.out, fn), "w") as f:
            json.dump(obj, f, indent=2)
            f.write("\n")
    save_st(os.path.join(a.out, "model.safetensors"), params, {"format": "pt"})
    save_st(os.path.join(a.out, "batch.safetensors"), batch)
    save_st(os.path.join(a.out, "expected.safetensors"), o32)
    print(f"make {a.out}: encoder rows {enc_len}, decoder rows {dec_len}, {meta['num_label_tokens']} labels, "
          f"loss {float(o32['loss'][0]):.6f}; float32 vs float64: " + ", ".join(f"{k} {v:.3g}" for k, v in obs.items()))


def cmd_check(a):
    c, params, batch, step = load_folder(a.dir)
    exp = load_st(os.path.join(a.dir, "expected.safetensors"))
    out = run(c, params, batch, step, torch.float32)
    fails, worst = check(exp, out, step["lr"], True, True)
    obs = noise(exp, run(c, params, batch, step, torch.float64), step["lr"])
    for line in fails:
        print(line)
    print(f"check-fixture {a.dir}: {'FAILED' if fails else 'OK'}; reference vs expected worst: "
          + "; ".join(f"{k} {v[0]:.3g} ({v[1]})" for k, v in sorted(worst.items())))
    print("  expected (float32) vs this reference in float64: " + ", ".join(f"{k} {v:.3g}" for k, v in obs.items()))
    return 1 if fails else 0


def cmd_grad(a):  # same interface as `zerotrain grad`
    c = json.load(open(os.path.join(a.model, "config.json")))
    step = json.load(open(a.step)) if a.step else dict(STEP, steps=0)
    out = run(c, load_st(os.path.join(a.model, "model.safetensors")), load_st(a.batch), step,
              torch.float64 if a.float64 else torch.float32)
    save_st(a.out, {k: v.astype(np.float32) for k, v in out.items() if a.step or not k.startswith("adamw.")})
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make", help="write a random fixture folder")
    m.add_argument("--out", required=True)
    m.add_argument("--seed", type=int, required=True)
    for flag, typ, dflt in [("--vocab", int, 512), ("--d-model", int, 64), ("--d-kv", int, 16), ("--d-ff", int, 128),
                            ("--heads", int, 4), ("--layers", int, 2), ("--dec-layers", int, 2),
                            ("--buckets", int, 32), ("--max-distance", int, 128), ("--tie", int, 1),
                            ("--batch", int, 2), ("--enc-len", int, 16), ("--dec-len", int, 8), ("--eps", float, 1e-6),
                            ("--dec-mask", int, 0)]:
        m.add_argument(flag, type=typ, default=dflt)
    m.add_argument("--ff", choices=["relu", "gated-gelu"], default="relu")
    add_fixture_commands(sub)
    a = ap.parse_args()
    return {"make": cmd_make, "check-fixture": cmd_check, "grad": cmd_grad}[a.cmd](a) or 0


if __name__ == "__main__":
    sys.exit(main())
