#!/usr/bin/python3
"""Independent plain-torch BertForSequenceClassification reference: generates random fixture folders (`make`),
re-checks existing ones (`check-fixture`), and mimics `zerotrain grad` (`grad`).
Written from Hugging Face transformers src/transformers/models/bert/modeling_bert.py (BertPooler,
BertForSequenceClassification.forward); the encoder is bert_ref.py's (post-LN, exact-erf GELU, key mask with
finfo.min). Dropout probabilities are 0 (identity). CPU, float32 (float64 only to measure round-off)."""
import argparse, json, os, sys
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import add_fixture_commands, TOL, grads_and_adamw, check, load_st, save_st  # noqa: E402
from bert_ref import (STEP, bert_config, encode, encoder_shapes, init_params, linear, load_folder,  # noqa: E402
                      make_batch, noise)

PROBLEM_TYPES = {"single": "single_label_classification", "multi": "multi_label_classification",
                 "regression": "regression", "infer": None}
WEIGHTS = ("HF-style init (embeddings std 0.02, word embedding row pad_token_id zeroed) with nn.Linear weights "
           "(encoder, bert.pooler.dense, classifier) std 0.1, LayerNorm weights 1+0.1*N(0,1), LayerNorm/linear "
           "biases 0.05*N(0,1)")


def num_labels(c):
    """PretrainedConfig: num_labels is len(id2label) when id2label is given (else the num_labels key, default 2)."""
    return len(c["id2label"]) if c.get("id2label") else int(c.get("num_labels", 2))


def param_shapes(c):
    H, N = c["hidden_size"], num_labels(c)
    s = encoder_shapes(c)
    s.update({"bert.pooler.dense.weight": [H, H], "bert.pooler.dense.bias": [H],
              "classifier.weight": [N, H], "classifier.bias": [N]})
    return s


def resolve_problem_type(c, labels):
    """BertForSequenceClassification.forward: config.problem_type, or when it is None inferred from num_labels and
    the labels' dtype (torch.long / torch.int -> single label)."""
    pt, n = c.get("problem_type"), num_labels(c)
    if pt is None:
        if n == 1:
            pt = "regression"
        elif n > 1 and (labels.dtype == torch.long or labels.dtype == torch.int):
            pt = "single_label_classification"
        else:
            pt = "multi_label_classification"
    if pt not in ("regression", "single_label_classification", "multi_label_classification"):
        raise ValueError(f"unknown problem_type {pt!r}")
    return pt


def cls_loss(c, logits, labels):
    """BertForSequenceClassification.forward's loss (RoBERTa's and DistilBERT's are the same code): MSELoss
    (squeezed when num_labels is 1), CrossEntropyLoss or BCEWithLogitsLoss by the resolved problem type."""
    n = num_labels(c)
    pt = resolve_problem_type(c, labels)
    if pt == "regression":
        if n == 1:
            loss = torch.nn.MSELoss()(logits.squeeze(), labels.squeeze())
        else:
            loss = torch.nn.MSELoss()(logits, labels)
    elif pt == "single_label_classification":
        loss = torch.nn.CrossEntropyLoss()(logits.view(-1, n), labels.view(-1))
    else:
        loss = torch.nn.BCEWithLogitsLoss()(logits, labels)
    return loss, pt


def forward(P, c, ids, mask, types, labels):
    x = encode(P, c, ids, mask, types)  # BertModel last_hidden_state [B, T, H]
    pooled = torch.tanh(linear(x[:, 0], P, "bert.pooler.dense"))  # BertPooler: first token, dense, tanh
    logits = linear(pooled, P, "classifier")  # self.dropout (p = 0) is the identity
    loss, pt = cls_loss(c, logits, labels)
    return loss, logits, pt


def to_torch_batch(batch, dtype):
    """input_ids/attention_mask/token_type_ids as long; labels keep an integer dtype (it decides the inferred
    problem type, as in HF), float labels are cast to the compute dtype."""
    bt = {k: torch.tensor(batch[k], dtype=torch.long) for k in ("input_ids", "attention_mask", "token_type_ids")}
    lab = torch.from_numpy(np.ascontiguousarray(batch["labels"]))
    bt["labels"] = lab if not torch.is_floating_point(lab) else lab.to(dtype)
    return bt


def run(c, params, batch, step, dtype=torch.float32):
    """Loss, logits, grads and one AdamW step; returns ({name: numpy array of `dtype`}, resolved problem type)."""
    P = {k: torch.tensor(v, dtype=dtype, requires_grad=True) for k, v in params.items()}
    bt = to_torch_batch(batch, dtype)
    loss, logits, pt = forward(P, c, bt["input_ids"], bt["attention_mask"], bt["token_type_ids"], bt["labels"])
    loss.backward()
    for p in P.values():  # unused by the forward (relative positions: the absolute table): a zero gradient
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    out = {"loss": loss.detach().reshape(1).numpy(), "logits": logits.detach().numpy()}
    grads_and_adamw(P, step, out)
    return out, pt


def make_labels(g, B, n, kind, ignored):
    """kind: single -> I64 [B] in [0, n) with `ignored` rows -100; multi -> F32 [B, n] of 0/1;
    regression -> F32 [B] (n == 1) or [B, n], standard normal."""
    if kind == "single":
        lab = torch.randint(0, n, (B,), generator=g).numpy().astype(np.int64)
        lab[torch.randperm(B, generator=g)[:ignored].numpy()] = -100
        return lab
    if kind == "multi":
        return (torch.rand((B, n), generator=g) < 0.5).numpy().astype(np.float32)
    return torch.randn((B,) if n == 1 else (B, n), generator=g).numpy().astype(np.float32)


def label_setup(a, c):
    """`make`'s labels from its options: (number of labels, kind of labels to write, rows ignored); c gains
    id2label, label2id and problem_type as PretrainedConfig writes them."""
    names = a.label_names.split(",") if a.label_names else [f"LABEL_{i}" for i in range(a.num_labels or 2)]
    n = len(names)
    assert len(set(names)) == n and n >= 1, "label names must be distinct"
    assert a.num_labels in (None, n), "--num-labels disagrees with --label-names"
    # which labels to write: the problem type's, or for `infer` the dtype HF's inference should see
    kind = {"single": "single", "multi": "multi", "regression": "regression"}.get(a.problem_type)
    if kind is None:
        kind = "regression" if n == 1 else {"int": "single", "float": "multi"}[a.infer_labels]
    assert not (kind == "single" and n < 2), "single-label classification needs at least 2 labels"
    ignored = a.ignored if a.ignored is not None else (1 if kind == "single" and a.batch >= 3 else 0)
    assert ignored == 0 or (kind == "single" and ignored < a.batch), "--ignored: single-label only, < batch rows"
    c.update({"id2label": {str(i): s for i, s in enumerate(names)}, "label2id": {s: i for i, s in enumerate(names)}})
    if PROBLEM_TYPES[a.problem_type]:
        c["problem_type"] = PROBLEM_TYPES[a.problem_type]
    return n, kind, ignored


def cmd_make(a):
    c = bert_config(a, "BertForSequenceClassification")
    c["classifier_dropout"] = None
    n, kind, ignored = label_setup(a, c)
    assert a.hidden % a.heads == 0 and a.seq <= a.max_pos and a.vocab >= 2, "inconsistent shape arguments"
    g = torch.Generator().manual_seed(a.seed)
    params = init_params(param_shapes(c), g, c["pad_token_id"])
    batch, lengths = make_batch(g, a.batch, a.seq, a.vocab, a.type_vocab)
    batch["labels"] = make_labels(g, a.batch, n, kind, ignored)  # replaces the masked-LM labels
    if a.left_pad:
        for b, L in enumerate(lengths):
            for k in ("input_ids", "attention_mask", "token_type_ids"):
                batch[k][b] = np.roll(batch[k][b], a.seq - L)
    o32, pt = run(c, params, batch, STEP, torch.float32)
    o64, _ = run(c, params, batch, STEP, torch.float64)
    obs = noise(o32, o64, STEP["lr"])
    fails, _ = check(o32, {k: v.astype(np.float32) for k, v in o64.items()}, STEP["lr"], True, True)
    if fails:  # the float64 result must pass against the float32 expected values
        sys.exit("make: float64 run does not agree with float32 expected values:\n" + "\n".join(fails))
    os.makedirs(a.out, exist_ok=True)
    meta = {"fixture": os.path.basename(os.path.normpath(a.out)), "generator": "zerotrain tests/ref/bert_cls_ref.py",
            "torch_version": torch.__version__, "generator_command": "bert_cls_ref.py " + " ".join(sys.argv[1:]),
            "seed": a.seed, "dtype": "float32", "device": "cpu", "deterministic_algorithms": True, "num_threads": 1,
            "tolerances": {"loss_rel": TOL["loss"], "logits_rel_to_max": TOL["logits"],
                           "grad_rel_to_max": TOL["grad"], "adamw_abs_in_units_of_lr": TOL["adamw_lr"]},
            "tolerance_definitions": "see /work/shared/fixtures/README.md (applied by tests/ref/compare.py)",
            "observed_float32_vs_float64": obs, "weights": WEIGHTS,
            "num_parameters": int(sum(v.size for v in params.values())), "num_parameter_tensors": len(params),
            "num_labels": n, "problem_type_in_config": c.get("problem_type"), "problem_type_resolved": pt,
            "labels_dtype": str(batch["labels"].dtype), "labels_shape": list(batch["labels"].shape),
            "num_ignored_rows": int((batch["labels"] == -100).sum()) if kind == "single" else 0,
            "row_lengths": lengths}
    for fn, obj, srt in (("config.json", c, True), ("step.json", STEP, False), ("meta.json", meta, False)):
        with open(os.path.join(a.out, fn), "w") as f:
            json.dump(obj, f, indent=2, sort_keys=srt)  # config.json keys sorted as HF's to_json_string does
            f.write("\n")
    save_st(os.path.join(a.out, "model.safetensors"), params, {"format": "pt"})
    save_st(os.path.join(a.out, "batch.safetensors"), batch)
    save_st(os.path.join(a.out, "expected.safetensors"), o32)
    print(f"make {a.out}: {pt} ({'config' if c.get('problem_type') else 'inferred'}), {n} labels, rows {lengths}, "
          f"labels {batch['labels'].dtype} {list(batch['labels'].shape)}, {meta['num_ignored_rows']} ignored, "
          f"loss {float(o32['loss'][0]):.6f}; float32 vs float64: " + ", ".join(f"{k} {v:.3g}" for k, v in obs.items()))


def cmd_check(a):
    c, params, batch, step = load_folder(a.dir)
    exp = load_st(os.path.join(a.dir, "expected.safetensors"))
    out, pt = run(c, params, batch, step, torch.float32)
    fails, worst = check(exp, out, step["lr"], True, True)
    obs = noise(exp, run(c, params, batch, step, torch.float64)[0], step["lr"])
    for line in fails:
        print(line)
    print(f"check-fixture {a.dir} ({pt}): {'FAILED' if fails else 'OK'}; reference vs expected worst: "
          + "; ".join(f"{k} {v[0]:.3g} ({v[1]})" for k, v in sorted(worst.items())))
    print("  expected (float32) vs this reference in float64: " + ", ".join(f"{k} {v:.3g}" for k, v in obs.items()))
    return 1 if fails else 0


def cmd_grad(a):  # same interface as `zerotrain grad`
    c = json.load(open(os.path.join(a.model, "config.json")))
    step = json.load(open(a.step)) if a.step else dict(STEP, steps=0)
    out, _ = run(c, load_st(os.path.join(a.model, "model.safetensors")), load_st(a.batch), step,
                 torch.float64 if a.float64 else torch.float32)
    save_st(a.out, {k: v.astype(np.float32) for k, v in out.items() if a.step or not k.startswith("adamw.")})
    return 0


def add_label_args(m, scope=""):
    """`make`'s label options (scope: a prefix for their help, e.g. "cls: ")."""
    m.add_argument("--num-labels", type=int, help=scope + "number of labels (default 2, or len(--label-names))")
    m.add_argument("--label-names", help=scope + "comma-separated id2label names (default LABEL_0, LABEL_1, ...)")
    m.add_argument("--problem-type", choices=sorted(PROBLEM_TYPES), default="single",
                   help=scope + "config.json problem_type; infer: no problem_type key, HF infers it from num_labels "
                        "and the labels' dtype")
    m.add_argument("--infer-labels", choices=("int", "float"), default="int",
                   help=scope + "with --problem-type infer and num_labels > 1: I64 labels (-> single label) or F32 "
                        "0/1 labels (-> multi label)")
    m.add_argument("--ignored", type=int, help=scope + "single label: rows labelled -100 (default 1 if batch >= 3)")


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
    m.add_argument("--pos-type", choices=("absolute", "relative_key", "relative_key_query"), default="absolute",
                   help="position_embedding_type (bert_ref.encode computes the relative scores)")
    add_label_args(m)
    m.add_argument("--left-pad", action="store_true",
                   help="pad rows on the left (the mask 0 ... 0 1 ... 1; positions stay 0 ... T-1 and the pooler "
                        "reads position 0, a padded one, as HF's does)")
    add_fixture_commands(sub)
    a = ap.parse_args()
    if a.cmd == "make" and a.num_labels is None and not a.label_names:
        a.num_labels = 2
    return {"make": cmd_make, "check-fixture": cmd_check, "grad": cmd_grad}[a.cmd](a) or 0


if __name__ == "__main__":
    sys.exit(main())
