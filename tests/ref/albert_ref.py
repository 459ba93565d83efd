#!/usr/bin/python3
"""Independent plain-torch ALBERT reference (masked LM, sequence classification, pretraining = MLM + SOP): generates
random fixture folders (`make`), re-checks existing ones (`check-fixture`), mimics `zerotrain grad` (`grad`) and checks
itself (`selftest`). Written from the upstream Python, not from zerotrain's C code:
  Hugging Face transformers src/transformers/models/albert/modeling_albert.py (read at qubvel/transformers 49235a00,
    a 2025 copy of main, and at huggingface/transformers 3c354ea2 / 00661e38, 2021): AlbertEmbeddings.forward,
    AlbertAttention.forward (eager; AlbertSdpaAttention is the same math), AlbertLayer.forward / ff_chunk,
    AlbertLayerGroup.forward, AlbertTransformer.forward (embedding_hidden_mapping_in, the group index
    int(i / (num_hidden_layers / num_hidden_groups))), AlbertModel.forward (extended mask (1 - m) * finfo.min,
    pooler = nn.Linear + Tanh on token 0), AlbertMLMHead.forward, AlbertSOPHead.forward,
    AlbertForMaskedLM / AlbertForSequenceClassification / AlbertForPreTraining .forward;
  src/transformers/models/albert/configuration_albert.py (AlbertConfig defaults: hidden_act "gelu_new",
    layer_norm_eps 1e-12, pad 0, bos 2, eos 3, classifier_dropout_prob 0.1, inner_group_num 1, num_hidden_groups 1);
  src/transformers/activations.py (gelu_new = NewGELUActivation, the tanh form);
  google-research/albert (commit b772393) create_pretraining_data.py (create_instances_from_document: the SOP rule, see
    sop_example) and run_pretraining.py (get_sentence_order_output: 2 classes, 0 = in order).
Fixture conventions (layout, weights, tolerances, AdamW step) are bert_ref.py's / family_ref.py's
(spec: /work/shared/fixtures/README.md). Dropout is the identity (make writes every dropout probability 0).
Outputs besides the README's: `logits.sop` (AlbertForPreTraining's sop_logits [B, 2]; compared like logits) and
`aux.*` (informative, skipped by compare.py). CPU, float32 (float64 only to measure round-off).

Only position_embedding_type "absolute" is implemented (the relative types exit with a message)."""
import argparse, json, math, os, sys
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import add_fixture_commands, TOL, grads_and_adamw, check, load_st, save_st  # noqa: E402
from bert_ref import ACT, MASK_MIN, STEP, layer_norm, linear, noise  # noqa: E402
from bert_ref import make_batch as bert_make_batch  # noqa: E402
from bert_cls_ref import add_label_args, cls_loss, label_setup, make_labels, num_labels  # noqa: E402
from family_ref import embedding, init_shapes  # noqa: E402  nn.Embedding(padding_idx=...) lookup (no gradient to that row)

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

ARCH = {"mlm": "AlbertForMaskedLM", "cls": "AlbertForSequenceClassification", "pretrain": "AlbertForPreTraining"}
# albert-base-v2's SentencePiece vocabulary: <pad> 0, <unk> 1, [CLS] 2, [SEP] 3, [MASK] 4 (AlbertConfig's
# bos_token_id 2 / eos_token_id 3 are [CLS] / [SEP]); make's real tokens are drawn from [FIRST_REAL_ID, vocab).
PAD_ID, CLS_ID, SEP_ID, MASK_ID, FIRST_REAL_ID = 0, 2, 3, 4, 5
WEIGHTS = ("HF-style init (embeddings std 0.02, word embedding row pad_token_id zeroed) with nn.Linear weights "
           "std 0.1, LayerNorm weights 1+0.1*N(0,1), LayerNorm/linear biases and the MLM output bias 0.05*N(0,1)")


def head_of(c, model_type="albert", arch_names=None):
    """'mlm' / 'cls' / 'pretrain' (ALBERT; electra_ref.py passes its own) from config.json's model_type and
    architectures[0]."""
    arch_names = arch_names or ARCH
    if c.get("model_type") != model_type:
        raise SystemExit(f"{model_type}_ref.py: model_type {c.get('model_type')!r} is not {model_type}")
    arch = (c.get("architectures") or [""])[0]
    for h, name in arch_names.items():
        if arch == name:
            return h
    raise SystemExit(f"{model_type}_ref.py: architectures {c.get('architectures')!r} not supported")


def layer_schedule(c):
    """The (group, inner layer) pairs AlbertTransformer.forward applies, in order:
        for i in range(num_hidden_layers):
            group_idx = int(i / (num_hidden_layers / num_hidden_groups))   # Python float division, truncated
            albert_layer_groups[group_idx] runs all of its inner_group_num AlbertLayers in order
    so there are num_hidden_layers * inner_group_num layer applications over num_hidden_groups * inner_group_num
    distinct AlbertLayers (e.g. L=4, G=2, inner=2: g0.0 g0.1 g0.0 g0.1 g1.0 g1.1 g1.0 g1.1)."""
    L, G, inner = c["num_hidden_layers"], c.get("num_hidden_groups", 1), c.get("inner_group_num", 1)
    out = []
    for i in range(L):
        g = int(i / (L / G))
        out += [(g, j) for j in range(inner)]
    return out


# ----------------------------------------------------------------------------------------------------------- shapes

def param_shapes(c):
    """{name: shape} of the trainable parameters in HF's state-dict names (tied duplicates left out)."""
    head = head_of(c)
    V, E, H, I = c["vocab_size"], c["embedding_size"], c["hidden_size"], c["intermediate_size"]
    s = {"albert.embeddings.word_embeddings.weight": [V, E],
         "albert.embeddings.position_embeddings.weight": [c["max_position_embeddings"], E],
         "albert.embeddings.token_type_embeddings.weight": [c["type_vocab_size"], E],
         "albert.embeddings.LayerNorm.weight": [E], "albert.embeddings.LayerNorm.bias": [E],
         "albert.encoder.embedding_hidden_mapping_in.weight": [H, E],
         "albert.encoder.embedding_hidden_mapping_in.bias": [H]}
    for g in range(c.get("num_hidden_groups", 1)):
        for j in range(c.get("inner_group_num", 1)):
            p = f"albert.encoder.albert_layer_groups.{g}.albert_layers.{j}."
            for lin, o, n in [("attention.query", H, H), ("attention.key", H, H), ("attention.value", H, H),
                              ("attention.dense", H, H), ("ffn", I, H), ("ffn_output", H, I)]:
                s[p + lin + ".weight"], s[p + lin + ".bias"] = [o, n], [o]
            for lnm in ("attention.LayerNorm", "full_layer_layer_norm"):
                s[p + lnm + ".weight"], s[p + lnm + ".bias"] = [H], [H]
    if head in ("cls", "pretrain"):  # AlbertModel(config) with add_pooling_layer=True: self.pooler = nn.Linear(H, H)
        s["albert.pooler.weight"], s["albert.pooler.bias"] = [H, H], [H]
    if head in ("mlm", "pretrain"):
        # AlbertMLMHead: dense (H -> E), LayerNorm(E), decoder (E -> V, weight tied to the word embeddings unless
        # tie_word_embeddings is false; decoder.bias is the same Parameter as predictions.bias)
        s.update({"predictions.dense.weight": [E, H], "predictions.dense.bias": [E],
                  "predictions.LayerNorm.weight": [E], "predictions.LayerNorm.bias": [E], "predictions.bias": [V]})
        if not c.get("tie_word_embeddings", True):
            s["predictions.decoder.weight"] = [V, E]
    if head == "pretrain":  # AlbertSOPHead.classifier = nn.Linear(hidden_size, config.num_labels)
        s["sop_classifier.classifier.weight"], s["sop_classifier.classifier.bias"] = [num_labels(c), H], [num_labels(c)]
    if head == "cls":
        N = num_labels(c)
        s["classifier.weight"], s["classifier.bias"] = [N, H], [N]
    return s


def canonical_params(params, tied):
    """Drop or rename tied duplicates a checkpoint may carry. tied: {duplicate name: canonical name}; a duplicate
    without its canonical tensor is renamed to it, one beside it must hold the same values and is dropped."""
    params = dict(params)
    for dup, canon in tied.items():
        if dup in params:
            if canon not in params:
                params[canon] = params.pop(dup)
            elif np.array_equal(params[dup], params[canon]):
                del params[dup]
            else:
                raise SystemExit(f"{dup} differs from {canon}, to which it is tied")
    return params


def albert_tied(c):
    t = {"predictions.decoder.bias": "predictions.bias"}  # AlbertMLMHead: self.decoder.bias = self.bias
    if c.get("tie_word_embeddings", True):
        t["predictions.decoder.weight"] = "albert.embeddings.word_embeddings.weight"
    return t


# ---------------------------------------------------------------------------------------------------------- forward

def encode(P, c, ids, mask, types):
    """AlbertModel last_hidden_state [B, T, H]."""
    B, T = ids.shape
    H, nh, eps = c["hidden_size"], c["num_attention_heads"], c.get("layer_norm_eps", 1e-12)
    if H % nh:
        raise SystemExit("albert_ref.py: hidden_size must be a multiple of num_attention_heads (AlbertAttention.dense "
                         "is Linear(hidden_size, hidden_size) on heads * (hidden_size // heads) features)")
    if c.get("position_embedding_type", "absolute") != "absolute":
        raise SystemExit("albert_ref.py: only position_embedding_type 'absolute' is implemented")
    d = H // nh
    # AlbertEmbeddings.forward (= BertEmbeddings.forward in embedding_size E): word_embeddings (nn.Embedding
    # padding_idx=pad_token_id) + token_type_embeddings + position_embeddings(arange(T)); LayerNorm(E); dropout
    x = embedding(P["albert.embeddings.word_embeddings.weight"], ids, c.get("pad_token_id", 0)) \
        + P["albert.embeddings.token_type_embeddings.weight"][types] \
        + P["albert.embeddings.position_embeddings.weight"][:T]
    x = layer_norm(x, P, "albert.embeddings.LayerNorm", eps)
    # AlbertTransformer.forward: hidden_states = embedding_hidden_mapping_in(hidden_states)  (E -> H)
    x = linear(x, P, "albert.encoder.embedding_hidden_mapping_in")
    # AlbertModel.forward: extended_attention_mask = (1.0 - mask[:, None, None, :]) * torch.finfo(dtype).min (eager;
    # the SDPA path's _prepare_4d_attention_mask_for_sdpa gives the same additive mask), keys only
    mask_term = ((1.0 - mask.to(x.dtype)) * MASK_MIN)[:, None, None, :]
    act = ACT[c.get("hidden_act", "gelu_new")]  # AlbertLayer.activation = ACT2FN[config.hidden_act]
    for g, j in layer_schedule(c):
        p = f"albert.encoder.albert_layer_groups.{g}.albert_layers.{j}."
        # AlbertAttention.forward: q/k/v -> transpose_for_scores; scores = q k^T / sqrt(d) + mask; softmax; dropout;
        # context = probs v, transpose(2, 1).flatten(2); LayerNorm(hidden_states + dropout(dense(context)))
        q, k, v = (linear(x, P, p + "attention." + n).view(B, T, nh, d).transpose(1, 2)
                   for n in ("query", "key", "value"))
        scores = q @ k.transpose(-1, -2) / math.sqrt(d) + mask_term
        ctx = (torch.softmax(scores, dim=-1) @ v).transpose(2, 1).flatten(2)
        a = layer_norm(x + linear(ctx, P, p + "attention.dense"), P, p + "attention.LayerNorm", eps)
        # AlbertLayer.ff_chunk: ffn_output(activation(ffn(a))); full_layer_layer_norm(ffn_output + a)
        f = linear(act(linear(a, P, p + "ffn")), P, p + "ffn_output")
        x = layer_norm(f + a, P, p + "full_layer_layer_norm", eps)
    return x


def mlm_logits(P, c, x):
    """AlbertMLMHead.forward: dense (H -> E) -> ACT2FN[hidden_act] -> LayerNorm(E, eps=layer_norm_eps) -> decoder.
    (Older transformers built this LayerNorm as nn.LayerNorm(embedding_size), i.e. eps 1e-5; current code passes
    config.layer_norm_eps, which is what this follows.)"""
    t = ACT[c.get("hidden_act", "gelu_new")](linear(x, P, "predictions.dense"))
    t = layer_norm(t, P, "predictions.LayerNorm", c.get("layer_norm_eps", 1e-12))
    dec = P["albert.embeddings.word_embeddings.weight"] if c.get("tie_word_embeddings", True) \
        else P["predictions.decoder.weight"]
    return t @ dec.T + P["predictions.bias"]


def forward(P, c, bt):
    """(loss, {output name: tensor}, resolved problem type or None, {aux name: tensor})."""
    head = head_of(c)
    ids, mask, labels = bt["input_ids"], bt.get("attention_mask"), bt["labels"]
    if mask is None:  # AlbertModel.forward: attention_mask = torch.ones(input_shape)
        mask = torch.ones_like(ids)
    types = bt.get("token_type_ids")
    if types is None:  # the all-zero token_type_ids buffer
        types = torch.zeros_like(ids)
    x = encode(P, c, ids, mask, types)
    ce = torch.nn.CrossEntropyLoss()  # ignore_index -100, mean over the rest
    if head == "mlm":  # AlbertForMaskedLM.forward
        logits = mlm_logits(P, c, x)
        return ce(logits.view(-1, c["vocab_size"]), labels.view(-1)), {"logits": logits}, None, {}
    pooled = torch.tanh(linear(x[:, 0], P, "albert.pooler"))  # AlbertModel: pooler_activation(pooler(seq[:, 0]))
    if head == "cls":  # AlbertForSequenceClassification.forward: dropout(classifier_dropout_prob) -> classifier
        logits = linear(pooled, P, "classifier")
        loss, pt = cls_loss(c, logits, labels)
        return loss, {"logits": logits}, pt, {}
    # AlbertForPreTraining.forward: prediction_scores = predictions(sequence_output); sop_scores =
    # sop_classifier(pooled_output) (AlbertSOPHead: dropout(classifier_dropout_prob) -> classifier);
    # total_loss = CE(prediction_scores.view(-1, vocab_size), labels) + CE(sop_scores.view(-1, 2), sentence_order_label)
    if num_labels(c) != 2:
        raise SystemExit("albert_ref.py: AlbertForPreTraining needs num_labels 2 (its loss views sop_scores as "
                         "[-1, 2])")
    logits = mlm_logits(P, c, x)
    sop = linear(pooled, P, "sop_classifier.classifier")
    l_mlm = ce(logits.view(-1, c["vocab_size"]), labels.view(-1))
    l_sop = ce(sop.view(-1, 2), bt["sentence_order_label"].view(-1))
    return l_mlm + l_sop, {"logits": logits, "logits.sop": sop}, None, {"aux.loss_mlm": l_mlm, "aux.loss_sop": l_sop}


# ------------------------------------------------------------------------------------------------ run / fixtures

def to_torch_batch(batch, dtype):
    """Integer arrays become long tensors (integer labels keep deciding an inferred problem type, as in HF); float
    arrays (float labels, noise) become `dtype`."""
    out = {}
    for k, v in batch.items():
        t = torch.from_numpy(np.ascontiguousarray(v))
        out[k] = t.to(dtype) if torch.is_floating_point(t) else t.long()
    return out


def run_model(forward_fn, params, batch, step, dtype):
    """forward_fn(P, bt) -> (loss, outputs, problem type, aux). Loss, outputs, grads of every parameter (a parameter
    the forward does not use gets a zero gradient, as in bert_ref.run) and `step["steps"]` AdamW steps.
    Returns ({name: numpy array}, problem type); aux integer tensors stay int64."""
    P = {k: torch.tensor(v, dtype=dtype, requires_grad=True) for k, v in params.items()}
    loss, outs, pt, aux = forward_fn(P, to_torch_batch(batch, dtype))
    loss.backward()
    for p in P.values():
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    out = {"loss": loss.detach().reshape(1).numpy()}
    out.update({k: v.detach().numpy() for k, v in outs.items()})
    out.update({k: v.detach().reshape(-1).numpy() if v.dim() == 0 else v.detach().numpy() for k, v in aux.items()})
    grads_and_adamw(P, step, out)
    return out, pt


def run(c, params, batch, step, dtype=torch.float32):
    return run_model(lambda P, bt: forward(P, c, bt), canonical_params(params, albert_tied(c)), batch, step, dtype)


def fixture_outputs(run_fn, lr):
    """float32 expected values, their float32-vs-float64 noise, and the check that float64 passes against them
    (the same procedure as bert_ref / family_ref `make`). run_fn(dtype) -> (out, problem type)."""
    o32, pt = run_fn(torch.float32)
    o64, _ = run_fn(torch.float64)
    obs = noise(o32, o64, lr)
    fails, _ = check(o32, {k: v.astype(np.float32) for k, v in o64.items()}, lr, True, True)
    if fails:
        sys.exit("make: float64 run does not agree with float32 expected values:\n" + "\n".join(fails))
    return o32, pt, obs


def fixture_meta(out_dir, script, seed, model_class, obs, params, extra):
    meta = {"fixture": os.path.basename(os.path.normpath(out_dir)), "generator": "zerotrain tests/ref/" + script,
            "torch_version": torch.__version__, "generator_command": script + " " + " ".join(sys.argv[1:]),
            "seed": seed, "dtype": "float32", "device": "cpu", "deterministic_algorithms": True, "num_threads": 1,
            "model_class": model_class,
            "tolerances": {"loss_rel": TOL["loss"], "logits_rel_to_max": TOL["logits"],
                           "grad_rel_to_max": TOL["grad"], "adamw_abs_in_units_of_lr": TOL["adamw_lr"]},
            "tolerance_definitions": "see /work/shared/fixtures/README.md (applied by tests/ref/compare.py)",
            "observed_float32_vs_float64": obs,
            "num_parameters": int(sum(v.size for v in params.values())), "num_parameter_tensors": len(params)}
    meta.update(extra)
    return meta


def write_fixture(out_dir, jsons, params, batch, expected):
    """jsons: [(file name, object, sort keys)] (config.json sorted as HF's to_json_string does); then
    model.safetensors, batch.safetensors, expected.safetensors."""
    os.makedirs(out_dir, exist_ok=True)
    for fn, obj, srt in jsons:
        with open(os.path.join(out_dir, fn), "w") as f:
            json.dump(obj, f, indent=2, sort_keys=srt)
            f.write("\n")
    save_st(os.path.join(out_dir, "model.safetensors"), params, {"format": "pt"})
    save_st(os.path.join(out_dir, "batch.safetensors"), batch)
    save_st(os.path.join(out_dir, "expected.safetensors"), expected)


def report_check(what, exp, out, out64, lr):
    """check-fixture's comparison and printout; returns the exit code."""
    fails, worst = check(exp, out, lr, True, True)
    obs = noise(exp, out64, lr)
    for line in fails:
        print(line)
    print(f"check-fixture {what}: {'FAILED' if fails else 'OK'}; reference vs expected worst: "
          + "; ".join(f"{k} {v[0]:.3g} ({v[1]})" for k, v in sorted(worst.items())))
    print("  expected (float32) vs this reference in float64: " + ", ".join(f"{k} {v:.3g}" for k, v in obs.items()))
    return 1 if fails else 0


def save_grad_output(path, out, with_adamw):
    """`zerotrain grad`'s output file: floats as F32 (adamw.* only with a step file), integer aux tensors as I64."""
    save_st(path, {k: (v.astype(np.float32) if v.dtype.kind == "f" else v.astype(np.int64))
                   for k, v in out.items() if with_adamw or not k.startswith("adamw.")})


# ------------------------------------------------------------------------------------------------- SOP data rule

def sop_example(seg_a, seg_b, u, cls_id=CLS_ID, sep_id=SEP_ID):
    """ALBERT's sentence-order-prediction example from two consecutive segments A, B of one document.

    google-research/albert create_pretraining_data.py, create_instances_from_document (default
    --random_next_sentence=False): when the chunk holds at least two segments,
        elif not FLAGS.random_next_sentence and rng.random() < 0.5:
            is_random_next = True; ...; tokens_a, tokens_b = tokens_b, tokens_a      # swapped
        else: is_random_next = False                                                 # in order
    and write_instance_to_example_files: sentence_order_label = 1 if instance.is_random_next else 0.
    So u = rng.random() < 0.5 -> [CLS] B [SEP] A [SEP], label 1 (swapped); else [CLS] A [SEP] B [SEP], label 0.
    (run_pretraining.py get_sentence_order_output comments "0 is 'next sentence' and 1 is 'random sentence'";
    HF AlbertForPreTraining's docstring: "0 indicates original order (sequence A, then sequence B), 1 indicates
    switched order (sequence B, then sequence A)".) token_type_ids: 0 for [CLS], the first segment and its [SEP];
    1 for the second segment and the final [SEP].
    Not modelled here: a chunk of a single segment (B is then taken from a random other document, label 1),
    truncate_seq_pair, and the short_seq_prob target lengths.
    Returns (ids, token_type_ids, label)."""
    swapped = u < 0.5
    first, second = (list(seg_b), list(seg_a)) if swapped else (list(seg_a), list(seg_b))
    ids = [cls_id] + first + [sep_id] + second + [sep_id]
    types = [0] * (len(first) + 2) + [1] * (len(second) + 1)
    return ids, types, int(swapped)


def make_sop_batch(g, B, T, V):
    """AlbertForPreTraining rows: segments A, B of random real tokens through sop_example (row b's uniform is
    (b + U) / B, so a batch of >= 2 rows has both labels), padded with <pad> (mask 0) to T; one row full length;
    15-30% of each row's non-special tokens are MLM targets: labels = the token, input = [MASK]."""
    ri = lambda a, b: int(torch.randint(a, b, (1,), generator=g))  # noqa: E731  a <= x < b
    full = ri(0, B)
    ids = np.full((B, T), PAD_ID, np.int64)
    mask, types = np.zeros((B, T), np.int64), np.zeros((B, T), np.int64)
    labels = np.full((B, T), -100, np.int64)
    sol = np.zeros((B,), np.int64)
    lengths = []
    for b in range(B):
        L = T if b == full else ri(5, T + 1)
        la = ri(1, L - 3)
        seg = torch.randint(FIRST_REAL_ID, V, (L - 3,), generator=g).tolist()
        u = (b + float(torch.rand((), generator=g))) / B
        row, tt, sol[b] = sop_example(seg[:la], seg[la:], u)
        ids[b, :L], types[b, :L], mask[b, :L] = row, tt, 1
        real = [t for t in range(L) if row[t] not in (CLS_ID, SEP_ID)]
        frac = 0.15 + 0.15 * float(torch.rand((), generator=g))
        k = max(1, int(round(frac * len(real))))
        for t in torch.randperm(len(real), generator=g)[:k].tolist():
            labels[b, real[t]], ids[b, real[t]] = ids[b, real[t]], MASK_ID
        lengths.append(L)
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types, "labels": labels,
            "sentence_order_label": sol}, lengths


def albert_config(a):
    """config.json fields as AlbertConfig writes them (dropouts 0, plus tie flag and torch_dtype)."""
    return {"architectures": [ARCH[a.head]], "model_type": "albert", "vocab_size": a.vocab,
            "embedding_size": a.embedding, "hidden_size": a.hidden, "num_hidden_layers": a.layers,
            "num_hidden_groups": a.groups, "inner_group_num": a.inner, "num_attention_heads": a.heads,
            "intermediate_size": a.intermediate, "hidden_act": a.act, "hidden_dropout_prob": 0.0,
            "attention_probs_dropout_prob": 0.0, "max_position_embeddings": a.max_pos, "type_vocab_size": a.type_vocab,
            "initializer_range": 0.02, "layer_norm_eps": a.eps, "classifier_dropout_prob": 0.0,
            "position_embedding_type": "absolute", "pad_token_id": PAD_ID, "bos_token_id": CLS_ID,
            "eos_token_id": SEP_ID, "tie_word_embeddings": not a.untied, "torch_dtype": "float32"}


def cmd_make(a):
    assert a.hidden % a.heads == 0 and a.seq <= a.max_pos and a.vocab > FIRST_REAL_ID and a.seq >= 5, \
        "inconsistent shape arguments"
    assert 1 <= a.groups <= a.layers and a.inner >= 1, "need 1 <= --groups <= --layers and --inner >= 1"
    c = albert_config(a)
    n = kind = ignored = None
    if a.head == "cls":
        n, kind, ignored = label_setup(a, c)
    elif a.label_names or a.num_labels is not None or a.ignored is not None:
        sys.exit("make: --num-labels / --label-names / --ignored are for --head cls")
    g = torch.Generator().manual_seed(a.seed)
    params = init_shapes(param_shapes(c), g, {"albert.embeddings.word_embeddings.weight": PAD_ID})
    if a.head == "pretrain":
        batch, lengths = make_sop_batch(g, a.batch, a.seq, a.vocab)
    else:
        batch, lengths = bert_make_batch(g, a.batch, a.seq, a.vocab, a.type_vocab)
        if a.head == "cls":
            batch["labels"] = make_labels(g, a.batch, n, kind, ignored)  # replaces the masked-LM labels
    o32, pt, obs = fixture_outputs(lambda dt: run(c, params, batch, STEP, dt), STEP["lr"])
    extra = {"weights": WEIGHTS, "row_lengths": lengths, "layer_schedule": [f"{g_}.{j}" for g_, j in layer_schedule(c)]}
    if a.head in ("mlm", "pretrain"):
        extra["num_label_tokens"] = int((batch["labels"] != -100).sum())
    if a.head == "pretrain":
        extra["sentence_order_label"] = batch["sentence_order_label"].tolist()
        extra["sop_rule"] = ("albert_ref.sop_example: u < 0.5 -> [CLS] B [SEP] A [SEP] label 1, else [CLS] A [SEP] B "
                             "[SEP] label 0; MLM targets: input [MASK] (4), label = the token")
    if a.head == "cls":
        extra.update({"num_labels": n, "problem_type_in_config": c.get("problem_type"), "problem_type_resolved": pt,
                      "labels_dtype": str(batch["labels"].dtype), "labels_shape": list(batch["labels"].shape)})
    meta = fixture_meta(a.out, "albert_ref.py", a.seed, ARCH[a.head], obs, params, extra)
    write_fixture(a.out, [("config.json", c, True), ("step.json", STEP, False), ("meta.json", meta, False)],
                  params, batch, o32)
    print(f"make {a.out}: {ARCH[a.head]}, layers {extra['layer_schedule']}, rows {lengths}, loss "
          f"{float(o32['loss'][0]):.6f}; float32 vs float64: " + ", ".join(f"{k} {v:.3g}" for k, v in obs.items()))


def load_folder(d):
    with open(os.path.join(d, "config.json")) as f:
        c = json.load(f)
    step = dict(STEP, steps=0)
    if os.path.exists(os.path.join(d, "step.json")):
        with open(os.path.join(d, "step.json")) as f:
            step = json.load(f)
    return c, load_st(os.path.join(d, "model.safetensors")), step


def cmd_check(a):
    c, params, step = load_folder(a.dir)
    batch = load_st(os.path.join(a.dir, "batch.safetensors"))
    exp = load_st(os.path.join(a.dir, "expected.safetensors"))
    out, pt = run(c, params, batch, step, torch.float32)
    out64, _ = run(c, params, batch, step, torch.float64)
    return report_check(f"{a.dir} ({ARCH[head_of(c)]}{', ' + pt if pt else ''})", exp, out, out64, step["lr"])


def cmd_grad(a):  # same interface as `zerotrain grad`
    c, params, step = load_folder(a.model)
    if a.step:
        with open(a.step) as f:
            step = json.load(f)
    else:
        step = dict(STEP, steps=0)
    out, _ = run(c, params, load_st(a.batch), step, torch.float64 if a.float64 else torch.float32)
    save_grad_output(a.out, out, bool(a.step))
    return 0


# ------------------------------------------------------------------------------------------------------ selftest

def fd_check(loss_fn, params, g, per_tensor=2, h=1e-5, skip_rows=None):
    """Central finite differences in float64 against autograd for `per_tensor` random elements of every tensor.
    loss_fn(P) -> scalar; params {name: float64 numpy}. skip_rows {name: row}: elements of that row are not
    probed (an nn.Embedding padding_idx row, to which HF deliberately passes no gradient).
    Returns (worst |fd - autograd| / max(|autograd| over all, 1e-12), name of the worst tensor, elements probed)."""
    P = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in params.items()}
    loss_fn(P).backward()
    grads = {k: (p.grad if p.grad is not None else torch.zeros_like(p)) for k, p in P.items()}
    G = max(float(v.abs().max()) for v in grads.values())
    worst, worst_name, count = 0.0, "", 0
    with torch.no_grad():
        Q = {k: p.detach().clone() for k, p in P.items()}
        for name, t in Q.items():
            flat = t.view(-1)
            cols = t.shape[-1] if t.dim() > 1 else 1
            for _ in range(per_tensor):
                i = int(torch.randint(0, flat.numel(), (1,), generator=g))
                if skip_rows and name in skip_rows and t.dim() > 1 and i // cols == skip_rows[name]:
                    i = (i + cols) % flat.numel()
                old = float(flat[i])
                flat[i] = old + h
                lp = float(loss_fn(Q))
                flat[i] = old - h
                lm = float(loss_fn(Q))
                flat[i] = old
                err = abs((lp - lm) / (2 * h) - float(grads[name].view(-1)[i])) / max(G, 1e-12)
                count += 1
                if err > worst:
                    worst, worst_name = err, name
    return worst, worst_name, count


def tiny_config(head, **kw):
    c = {"architectures": [ARCH[head]], "model_type": "albert", "vocab_size": 23, "embedding_size": 6,
         "hidden_size": 8, "num_hidden_layers": 4, "num_hidden_groups": 2, "inner_group_num": 2,
         "num_attention_heads": 2, "intermediate_size": 12, "hidden_act": "gelu_new", "max_position_embeddings": 10,
         "type_vocab_size": 2, "layer_norm_eps": 1e-12, "pad_token_id": 0, "tie_word_embeddings": True}
    c.update(kw)
    return c


def cmd_selftest(a):
    fails = []

    def ok(cond, msg):
        print(("ok   " if cond else "FAIL ") + msg)
        if not cond:
            fails.append(msg)

    # 1. group indexing (AlbertTransformer.forward)
    sched = layer_schedule({"num_hidden_layers": 4, "num_hidden_groups": 2, "inner_group_num": 2})
    ok(sched == [(0, 0), (0, 1), (0, 0), (0, 1), (1, 0), (1, 1), (1, 0), (1, 1)],
       f"L=4 G=2 inner=2 schedule {' '.join(f'{x}.{y}' for x, y in sched)}")
    groups = lambda L, G: [x for x, _ in layer_schedule({"num_hidden_layers": L, "num_hidden_groups": G})]  # noqa
    ok(groups(3, 2) == [0, 0, 1] and groups(5, 2) == [0, 0, 0, 1, 1] and groups(12, 1) == [0] * 12
       and groups(4, 4) == [0, 1, 2, 3], f"int(i / (L / G)): L=3 G=2 {groups(3, 2)}, L=5 G=2 {groups(5, 2)}, "
       f"L=4 G=4 {groups(4, 4)}")
    # numerically: the L=4 G=2 inner=2 encoder equals the 8 layer applications spelled out with separate copies of
    # the 4 distinct layers, and every distinct layer gets a gradient
    g = torch.Generator().manual_seed(1)
    c = tiny_config("mlm")
    params = init_shapes(param_shapes(c), g, {"albert.embeddings.word_embeddings.weight": 0})
    ids = torch.tensor([[2, 7, 9, 4, 3, 0], [2, 5, 6, 11, 12, 3]])
    mask = (ids != 0).long()
    types = torch.tensor([[0, 0, 0, 1, 1, 0], [0, 0, 0, 0, 1, 1]])
    P = {k: torch.tensor(v, dtype=torch.float64) for k, v in params.items()}
    x_sched = encode(P, c, ids, mask, types)
    c8 = dict(c, num_hidden_layers=8, num_hidden_groups=8, inner_group_num=1)
    P8 = {k: v for k, v in P.items() if ".albert_layer_groups." not in k}
    for n, (gg, j) in enumerate(sched):  # layer n of an 8-group, 1-inner model = copy of group gg's layer j
        src, dst = f"albert_layer_groups.{gg}.albert_layers.{j}.", f"albert_layer_groups.{n}.albert_layers.0."
        P8.update({k.replace(src, dst): v.clone() for k, v in P.items() if src in k})
    ok(torch.allclose(x_sched, encode(P8, c8, ids, mask, types), atol=0, rtol=1e-14),
       "L=4 G=2 inner=2 encoder == the 8 applications unrolled with copied layers")
    bt = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types,
          "labels": torch.tensor([[-100, 8, -100, 9, -100, -100], [-100, -100, 6, -100, 12, -100]])}
    out, _ = run(c, params, {k: v.numpy() for k, v in bt.items()}, dict(STEP, steps=0), torch.float64)
    used = {f"{gg}.{j}": float(np.abs(out[f"grad.albert.encoder.albert_layer_groups.{gg}.albert_layers.{j}.ffn.weight"])
                               .max()) for gg, j in sorted(set(sched))}
    ok(all(v > 0 for v in used.values()), "each distinct AlbertLayer gets a gradient: "
       + ", ".join(f"{k} {v:.2g}" for k, v in used.items()))

    # 2. tied decoder really shared: tied grad of the word embeddings == untied (word + decoder) grads
    cu = dict(c, tie_word_embeddings=False)
    pu = dict(params, **{"predictions.decoder.weight": params["albert.embeddings.word_embeddings.weight"].copy()})
    ou, _ = run(cu, pu, {k: v.numpy() for k, v in bt.items()}, dict(STEP, steps=0), torch.float64)
    w = "grad.albert.embeddings.word_embeddings.weight"
    ok(abs(float(out["loss"][0]) - float(ou["loss"][0])) < 1e-14 and np.allclose(
        out[w], ou[w] + ou["grad.predictions.decoder.weight"], rtol=1e-12, atol=1e-15),
       "tied decoder: grad(word_embeddings) == untied grad(word_embeddings) + grad(predictions.decoder.weight)")
    ok(np.abs(ou["grad.predictions.decoder.weight"]).max() > 0 and not np.array_equal(out[w], ou[w]),
       "the decoder contributes to the tied gradient")

    # 3. SOP rule
    ids_s, tt_s, lab_s = sop_example([10, 11], [20], 0.3)
    ids_o, tt_o, lab_o = sop_example([10, 11], [20], 0.7)
    ok((ids_s, tt_s, lab_s) == ([2, 20, 3, 10, 11, 3], [0, 0, 0, 1, 1, 1], 1)
       and (ids_o, tt_o, lab_o) == ([2, 10, 11, 3, 20, 3], [0, 0, 0, 0, 1, 1], 0),
       "sop_example: u=0.3 -> [CLS] B [SEP] A [SEP] label 1; u=0.7 -> [CLS] A [SEP] B [SEP] label 0")

    # 4. pretraining loss = MLM CE + SOP CE
    cp = tiny_config("pretrain")
    pp = init_shapes(param_shapes(cp), g, {"albert.embeddings.word_embeddings.weight": 0})
    sb, _ = make_sop_batch(g, 3, 8, cp["vocab_size"])
    op, _ = run(cp, pp, sb, dict(STEP, steps=0), torch.float64)
    lm = torch.nn.functional.cross_entropy(torch.tensor(op["logits"]).view(-1, cp["vocab_size"]),
                                           torch.tensor(sb["labels"]).view(-1))
    ls = torch.nn.functional.cross_entropy(torch.tensor(op["logits.sop"]), torch.tensor(sb["sentence_order_label"]))
    ok(abs(float(op["loss"][0]) - float(lm + ls)) < 1e-12 and op["logits.sop"].shape == (3, 2),
       f"AlbertForPreTraining loss {float(op['loss'][0]):.6f} == MLM CE {float(lm):.6f} + SOP CE {float(ls):.6f}; "
       f"sentence_order_label {sb['sentence_order_label'].tolist()}")

    # 5. gradients vs central finite differences (float64) for the three heads
    for head in ("mlm", "cls", "pretrain"):
        ch = tiny_config(head, hidden_act="gelu_new" if head != "cls" else "gelu")
        if head == "cls":
            ch.update({"id2label": {"0": "A", "1": "B", "2": "C"}, "problem_type": "single_label_classification"})
        ph = init_shapes(param_shapes(ch), g, {"albert.embeddings.word_embeddings.weight": 0})
        bh = dict(sb) if head == "pretrain" else {k: v.numpy() for k, v in bt.items()}
        if head == "cls":
            bh["labels"] = np.array([2, 0], np.int64)
        tb = to_torch_batch(bh, torch.float64)
        worst, name, n = fd_check(lambda Q: forward(Q, ch, tb)[0], {k: v.astype(np.float64) for k, v in ph.items()},
                                  g, skip_rows={"albert.embeddings.word_embeddings.weight": 0})
        ok(worst < 1e-7, f"{ARCH[head]}: autograd vs finite differences, {n} elements of {len(ph)} tensors, worst "
           f"|diff|/max|grad| {worst:.2e} ({name})")
    print(f"selftest: {'FAILED' if fails else 'OK'} ({len(fails)} failed)")
    return 1 if fails else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make", help="write a random fixture folder")
    m.add_argument("--out", required=True)
    m.add_argument("--seed", type=int, required=True)
    m.add_argument("--head", choices=sorted(ARCH), required=True,
                   help="mlm: AlbertForMaskedLM; cls: AlbertForSequenceClassification; pretrain: AlbertForPreTraining")
    for flag, typ, dflt, hlp in [
            ("--vocab", int, 512, None), ("--embedding", int, 16, "embedding_size"), ("--hidden", int, 64, None),
            ("--layers", int, 4, "num_hidden_layers"), ("--groups", int, 2, "num_hidden_groups"),
            ("--inner", int, 2, "inner_group_num"), ("--heads", int, 4, None), ("--intermediate", int, 128, None),
            ("--max-pos", int, 64, None), ("--type-vocab", int, 2, None), ("--batch", int, 2, None),
            ("--seq", int, 16, None), ("--eps", float, 1e-12, "layer_norm_eps")]:
        m.add_argument(flag, type=typ, default=dflt, help=hlp)
    m.add_argument("--act", choices=sorted(ACT), default="gelu_new", help="hidden_act (AlbertConfig default gelu_new)")
    m.add_argument("--untied", action="store_true", help="mlm/pretrain: tie_word_embeddings false")
    add_label_args(m, "cls: ")
    add_fixture_commands(sub)
    sub.add_parser("selftest", help="group indexing, tying, SOP rule, loss sum, finite-difference gradients")
    a = ap.parse_args()
    return {"make": cmd_make, "check-fixture": cmd_check, "grad": cmd_grad, "selftest": cmd_selftest}[a.cmd](a) or 0


if __name__ == "__main__":
    sys.exit(main())
