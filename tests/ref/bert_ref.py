#!/usr/bin/python3
"""Independent plain-torch BERT masked-LM reference (spec: /work/shared/fixtures/README.md): generates random
fixture folders (`make`), re-checks existing ones (`check-fixture`), and mimics `zerotrain grad` (`grad`).
BERT MLM only (no T5, no pooler/NSP, no dropout); CPU, float32 (float64 only to measure round-off)."""
import argparse, json, math, os, sys
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import add_fixture_commands, TOL, grads_and_adamw, adamw_bounds, check, load_st, save_st  # noqa: E402

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)
MASK_MIN = float(torch.finfo(torch.float32).min)  # -3.4028234663852886e38, also used in float64 runs
STEP = {"optimizer": "AdamW", "lr": 0.001, "betas": [0.9, 0.999], "eps": 1e-08, "weight_decay": 0.01,
        "amsgrad": False, "steps": 1,
        "applies_to": "all parameters (including biases, LayerNorm weights and embeddings)"}
WEIGHTS = ("HF-style init (embeddings std 0.02, word embedding row pad_token_id zeroed) with nn.Linear weights "
           "std 0.1, LayerNorm weights 1+0.1*N(0,1), LayerNorm/linear biases and cls.predictions.bias 0.05*N(0,1)")


def encoder_shapes(c):
    """Parameter shapes of BertModel's embeddings and encoder layers (no pooler), in HF's names and order."""
    V, H, I = c["vocab_size"], c["hidden_size"], c["intermediate_size"]
    s = {"bert.embeddings.word_embeddings.weight": [V, H],
         "bert.embeddings.position_embeddings.weight": [c["max_position_embeddings"], H],
         "bert.embeddings.token_type_embeddings.weight": [c["type_vocab_size"], H],
         "bert.embeddings.LayerNorm.weight": [H], "bert.embeddings.LayerNorm.bias": [H]}
    for i in range(c["num_hidden_layers"]):
        p = f"bert.encoder.layer.{i}."
        for lin, o, n in [("attention.self.query", H, H), ("attention.self.key", H, H), ("attention.self.value", H, H),
                          ("attention.output.dense", H, H), ("intermediate.dense", I, H), ("output.dense", H, I)]:
            s[p + lin + ".weight"], s[p + lin + ".bias"] = [o, n], [o]
        for lnm in ("attention.output.LayerNorm", "output.LayerNorm"):
            s[p + lnm + ".weight"], s[p + lnm + ".bias"] = [H], [H]
        if c.get("position_embedding_type", "absolute") != "absolute":
            # BertSelfAttention: nn.Embedding(2 * max_position_embeddings - 1, attention_head_size)
            s[p + "attention.self.distance_embedding.weight"] = [2 * c["max_position_embeddings"] - 1,
                                                                 H // c["num_attention_heads"]]
    return s


def param_shapes(c):
    V, H = c["vocab_size"], c["hidden_size"]
    s = encoder_shapes(c)
    s.update({"cls.predictions.transform.dense.weight": [H, H], "cls.predictions.transform.dense.bias": [H],
              "cls.predictions.transform.LayerNorm.weight": [H], "cls.predictions.transform.LayerNorm.bias": [H],
              "cls.predictions.bias": [V]})
    if not c.get("tie_word_embeddings", True):  # BertLMPredictionHead.decoder: nn.Linear(H, V, bias=False), not tied
        s["cls.predictions.decoder.weight"] = [V, H]
    return s


def layer_norm(x, P, name, eps):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)  # biased
    return (x - mu) / torch.sqrt(var + eps) * P[name + ".weight"] + P[name + ".bias"]


def gelu(x):  # exact erf form
    return x * 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))


# transformers' ACT2FN (src/transformers/activations.py) for the names BertConfig.hidden_act
# takes here: GELUActivation (erf), NewGELUActivation, PytorchGELUTanh, nn.ReLU, nn.SiLU
ACT = {
    "gelu": gelu,
    "gelu_new": lambda x: 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0)))),
    "gelu_pytorch_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
    "relu": torch.relu,
    "silu": torch.nn.functional.silu,
    "swish": torch.nn.functional.silu,
}


def linear(x, P, name):
    return x @ P[name + ".weight"].T + P[name + ".bias"]


def encode(P, c, ids, mask, types):
    """BertModel's last hidden states [B, T, H] (embeddings + post-LN encoder layers, no pooler)."""
    B, T = ids.shape
    H, nh, eps = c["hidden_size"], c["num_attention_heads"], c["layer_norm_eps"]
    d = H // nh
    pet = c.get("position_embedding_type", "absolute")
    # BertEmbeddings.word_embeddings is nn.Embedding(padding_idx=pad_token_id): that row gets no gradient
    x = torch.nn.functional.embedding(ids, P["bert.embeddings.word_embeddings.weight"],
                                      padding_idx=c.get("pad_token_id", 0)) \
        + P["bert.embeddings.token_type_embeddings.weight"][types]
    if pet == "absolute":  # BertEmbeddings adds the position embeddings only then
        x = x + P["bert.embeddings.position_embeddings.weight"][:T]
    x = layer_norm(x, P, "bert.embeddings.LayerNorm", eps)
    mask_term = ((1.0 - mask.to(x.dtype)) * MASK_MIN)[:, None, None, :]  # keys only: [B,1,1,T]
    for i in range(c["num_hidden_layers"]):
        p = f"bert.encoder.layer.{i}."
        q, k, v = (linear(x, P, p + "attention.self." + n).view(B, T, nh, d).transpose(1, 2)
                   for n in ("query", "key", "value"))
        scores = q @ k.transpose(-1, -2)
        if pet != "absolute":  # BertSelfAttention: distance l - r, embedded, against q (and k)
            Pm = c["max_position_embeddings"]
            dist = torch.arange(T)[:, None] - torch.arange(T)[None, :]
            pe = P[p + "attention.self.distance_embedding.weight"][dist + Pm - 1]  # [T, T, d]
            scores = scores + torch.einsum("bhld,lrd->bhlr", q, pe)
            if pet == "relative_key_query":
                scores = scores + torch.einsum("bhrd,lrd->bhlr", k, pe)
        scores = scores / math.sqrt(d) + mask_term
        ctx = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(B, T, H)
        x = layer_norm(x + linear(ctx, P, p + "attention.output.dense"), P, p + "attention.output.LayerNorm", eps)
        h = ACT[c["hidden_act"]](linear(x, P, p + "intermediate.dense"))
        x = layer_norm(x + linear(h, P, p + "output.dense"), P, p + "output.LayerNorm", eps)
    return x


def forward(P, c, ids, mask, types, labels):
    eps = c["layer_norm_eps"]
    x = encode(P, c, ids, mask, types)
    t = layer_norm(ACT[c["hidden_act"]](linear(x, P, "cls.predictions.transform.dense")), P,
                   "cls.predictions.transform.LayerNorm", eps)
    # the decoder: tied to the word embeddings (PreTrainedModel.tie_weights) unless tie_word_embeddings is false
    dec = P["bert.embeddings.word_embeddings.weight"] if c.get("tie_word_embeddings", True) \
        else P["cls.predictions.decoder.weight"]
    logits = t @ dec.T + P["cls.predictions.bias"]
    lab = labels.reshape(-1)
    keep = lab != -100
    logp = torch.log_softmax(logits.reshape(-1, logits.shape[-1])[keep], dim=-1)
    loss = -logp.gather(1, lab[keep][:, None]).sum() / keep.sum()
    return loss, logits


def run(c, params, batch, step, dtype=torch.float32):
    """Loss, logits, grads and one AdamW step; returns {name: numpy array of `dtype`}."""
    P = {k: torch.tensor(v, dtype=dtype, requires_grad=True) for k, v in params.items()}
    bt = {k: torch.tensor(v, dtype=torch.long) for k, v in batch.items()}
    loss, logits = forward(P, c, bt["input_ids"], bt["attention_mask"], bt["token_type_ids"], bt["labels"])
    loss.backward()
    for p in P.values():  # a parameter the forward does not use (relative positions: the absolute table) has a
        if p.grad is None:  # zero gradient, as DeepSpeed's flat buffers give it, and AdamW still decays it
            p.grad = torch.zeros_like(p)
    out = {"loss": loss.detach().reshape(1).numpy(), "logits": logits.detach().numpy()}
    grads_and_adamw(P, step, out)
    return out


def noise(o32, o64, lr):
    """float32-vs-float64 differences in the README's metrics (float64 taken as truth)."""
    G = max(np.abs(v).max() for k, v in o64.items() if k.startswith("grad."))
    r = {"loss_rel": abs(float(o32["loss"][0]) - o64["loss"][0]) / abs(o64["loss"][0]),
         "logits_rel_to_max": np.abs(o32["logits"] - o64["logits"]).max() / np.abs(o64["logits"]).max(),
         "grad_rel_to_max_worst": max(np.abs(o32[k] - v).max() / max(np.abs(v).max(), 1e-3 * G)
                                      for k, v in o64.items() if k.startswith("grad.")),
         "adamw_abs_in_units_of_lr_worst_any_element": 0.0,
         "adamw_abs_in_units_of_lr_worst_well_conditioned": 0.0}
    for k, v in o64.items():
        if k.startswith("adamw."):
            d = np.abs(o32[k] - v) / lr
            tiny = adamw_bounds(o32[k], o32["grad." + k[6:]], lr)[1]
            r["adamw_abs_in_units_of_lr_worst_any_element"] = max(r["adamw_abs_in_units_of_lr_worst_any_element"], d.max())
            if (~tiny).any():
                r["adamw_abs_in_units_of_lr_worst_well_conditioned"] = max(
                    r["adamw_abs_in_units_of_lr_worst_well_conditioned"], d[~tiny].max())
    return {k: float(v) for k, v in r.items()}


def load_folder(d):
    with open(os.path.join(d, "config.json")) as f:
        c = json.load(f)
    with open(os.path.join(d, "step.json")) as f:
        step = json.load(f)
    return c, load_st(os.path.join(d, "model.safetensors")), load_st(os.path.join(d, "batch.safetensors")), step


def make_batch(g, B, T, V, TT):
    ri = lambda lo, hi: int(torch.randint(lo, hi, (1,), generator=g))  # noqa: E731  lo <= x < hi
    full = ri(0, B)
    heavy = (full + ri(1, B)) % B if B > 1 else -1
    ids, mask, types, labels = (np.zeros((B, T), np.int64) for _ in range(4))
    labels[:] = -100
    lengths = []
    for b in range(B):
        L = T if b == full else ri(1, max(1, T // 4) + 1) if b == heavy else ri(1, T + 1)
        lengths.append(L)
        mask[b, :L] = 1
        ids[b, :L] = torch.randint(1, V, (L,), generator=g).numpy()
        if TT > 1:  # TT-1 random segment boundaries inside the real tokens -> types 0,1,..
            cuts = torch.randint(1, max(L, 2), (TT - 1,), generator=g).numpy()
            types[b, :L] = (np.arange(L)[:, None] >= cuts[None, :]).sum(1)
        frac = 0.15 + 0.15 * float(torch.rand((), generator=g))
        k = max(1 if b == full else 0, int(round(frac * L)))
        pos = torch.randperm(L, generator=g)[:k].numpy()
        labels[b, pos] = torch.randint(0, V, (k,), generator=g).numpy()
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types, "labels": labels}, lengths


def init_params(shapes, g, pad_token_id):
    """Random float32 weights for {name: shape} drawn from generator g in dict order (see WEIGHTS)."""
    params = {}
    for name, shape in shapes.items():
        z = torch.randn(shape, generator=g)
        if "embeddings" in name and "LayerNorm" not in name:
            z = 0.02 * z
        elif "LayerNorm.weight" in name:
            z = 1.0 + 0.1 * z
        elif name.endswith(".weight"):
            z = 0.1 * z
        else:
            z = 0.05 * z
        if name == "bert.embeddings.word_embeddings.weight":
            z[pad_token_id] = 0.0
        params[name] = z.numpy().astype(np.float32)
    return params


def bert_config(a, architecture):
    """config.json fields of a BertConfig from `make`'s shape arguments."""
    return {"architectures": [architecture], "model_type": "bert", "vocab_size": a.vocab, "hidden_size": a.hidden,
            "num_hidden_layers": a.layers, "num_attention_heads": a.heads, "intermediate_size": a.intermediate,
            "hidden_act": getattr(a, "act", "gelu"), "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
            "max_position_embeddings": a.max_pos, "type_vocab_size": a.type_vocab, "initializer_range": 0.02,
            "layer_norm_eps": a.eps, "pad_token_id": 0,
            "position_embedding_type": getattr(a, "pos_type", "absolute"),
            "tie_word_embeddings": not getattr(a, "untied", False), "torch_dtype": "float32"}


def cmd_make(a):
    c = bert_config(a, "BertForMaskedLM")
    assert a.hidden % a.heads == 0 and a.seq <= a.max_pos and a.vocab >= 2, "inconsistent shape arguments"
    g = torch.Generator().manual_seed(a.seed)
    params = init_params(param_shapes(c), g, c["pad_token_id"])
    batch, lengths = make_batch(g, a.batch, a.seq, a.vocab, a.type_vocab)
    o32 = run(c, params, batch, STEP, torch.float32)
    o64 = run(c, params, batch, STEP, torch.float64)
    obs = noise(o32, o64, STEP["lr"])
    fails, _ = check(o32, {k: v.astype(np.float32) for k, v in o64.items()}, STEP["lr"], True, True)
    if fails:  # the float64 result must pass against the float32 expected values
        sys.exit("make: float64 run does not agree with float32 expected values:\n" + "\n".join(fails))
    os.makedirs(a.out, exist_ok=True)
    meta = {"fixture": os.path.basename(os.path.normpath(a.out)), "generator": "zerotrain tests/ref/bert_ref.py",
            "torch_version": torch.__version__, "generator_command": "bert_ref.py " + " ".join(sys.argv[1:]),
            "seed": a.seed, "dtype": "float32", "device": "cpu", "deterministic_algorithms": True, "num_threads": 1,
            "tolerances": {"loss_rel": TOL["loss"], "logits_rel_to_max": TOL["logits"],
                           "grad_rel_to_max": TOL["grad"], "adamw_abs_in_units_of_lr": TOL["adamw_lr"]},
            "tolerance_definitions": "see /work/shared/fixtures/README.md (applied by tests/ref/compare.py)",
            "observed_float32_vs_float64": obs, "weights": WEIGHTS,
            "num_parameters": int(sum(v.size for v in params.values())), "num_parameter_tensors": len(params),
            "num_label_tokens": int((batch["labels"] != -100).sum()), "row_lengths": lengths}
    for fn, obj in (("config.json", c), ("step.json", STEP), ("meta.json", meta)):
        with open(os.path.join(a.out, fn), "w") as f:
            json.dump(obj, f, indent=2)
            f.write("\n")
    save_st(os.path.join(a.out, "model.safetensors"), params, {"format": "pt"})
    save_st(os.path.join(a.out, "batch.safetensors"), batch)
    save_st(os.path.join(a.out, "expected.safetensors"), o32)
    print(f"make {a.out}: rows {lengths}, {meta['num_label_tokens']} labels, loss {float(o32['loss'][0]):.6f}; "
          "float32 vs float64: " + ", ".join(f"{k} {v:.3g}" for k, v in obs.items()))


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
    for flag, typ, dflt in [("--vocab", int, 512), ("--hidden", int, 64), ("--layers", int, 2), ("--heads", int, 4),
                            ("--intermediate", int, 256), ("--max-pos", int, 64), ("--type-vocab", int, 2),
                            ("--batch", int, 2), ("--seq", int, 16), ("--eps", float, 1e-12)]:
        m.add_argument(flag, type=typ, default=dflt)
    m.add_argument("--act", choices=sorted(ACT), default="gelu", help="hidden_act")
    m.add_argument("--untied", action="store_true", help="tie_word_embeddings false (the decoder's own weight)")
    m.add_argument("--pos-type", choices=("absolute", "relative_key", "relative_key_query"), default="absolute",
                   help="position_embedding_type")
    add_fixture_commands(sub)
    a = ap.parse_args()
    return {"make": cmd_make, "check-fixture": cmd_check, "grad": cmd_grad}[a.cmd](a) or 0


if __name__ == "__main__":
    sys.exit(main())
