#!/usr/bin/python3
"""Independent plain-torch RoBERTa / DistilBERT reference (masked LM and sequence classification): generates random
fixture folders (`make`), re-checks existing ones (`check-fixture`), and mimics `zerotrain grad` (`grad`).
Covers RobertaForMaskedLM, RobertaForSequenceClassification, DistilBertForMaskedLM and
DistilBertForSequenceClassification. Written from Hugging Face transformers' source:
  src/transformers/models/roberta/modeling_roberta.py (RobertaEmbeddings, create_position_ids_from_input_ids,
    RobertaSelfAttention/RobertaSelfOutput/RobertaIntermediate/RobertaOutput/RobertaLayer = the Bert* classes,
    RobertaLMHead, RobertaClassificationHead, RobertaForMaskedLM.forward, RobertaForSequenceClassification.forward),
  src/transformers/models/roberta/configuration_roberta.py (RobertaConfig = BertConfig with pad 1, bos 0, eos 2),
  src/transformers/models/distilbert/modeling_distilbert.py (Embeddings, MultiHeadSelfAttention, FFN,
    TransformerBlock, DistilBertForMaskedLM.forward, DistilBertForSequenceClassification.forward),
  src/transformers/models/distilbert/configuration_distilbert.py (DistilBertConfig),
  src/transformers/activations.py (ACT2FN, get_activation, gelu = GELUActivation = exact erf form).
Fixture conventions (layout, weights, tolerances, AdamW step) are bert_ref.py's / bert_cls_ref.py's
(spec: /work/shared/fixtures/README.md). Dropout probabilities are 0 (identity). CPU, float32 (float64 only to
measure round-off)."""
import argparse, json, math, os, sys
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import add_fixture_commands, TOL, grads_and_adamw, check, load_st, save_st  # noqa: E402
from bert_ref import ACT, MASK_MIN, STEP, layer_norm, linear, noise  # noqa: E402
# cls_loss: RobertaForSequenceClassification's and DistilBertForSequenceClassification's loss is BERT's code
from bert_cls_ref import add_label_args, cls_loss, label_setup, make_labels, num_labels  # noqa: E402

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

ARCH = {("roberta", "mlm"): "RobertaForMaskedLM", ("roberta", "cls"): "RobertaForSequenceClassification",
        ("distilbert", "mlm"): "DistilBertForMaskedLM", ("distilbert", "cls"): "DistilBertForSequenceClassification"}
# DistilBERT's LayerNorms are built with a literal eps=1e-12 (Embeddings.LayerNorm, TransformerBlock.sa_layer_norm /
# output_layer_norm, DistilBertForMaskedLM.vocab_layer_norm); DistilBertConfig has no layer_norm_eps key.
DISTILBERT_LN_EPS = 1e-12
# RobertaConfig defaults (configuration_roberta.py): pad_token_id=1, bos_token_id=0, eos_token_id=2; DistilBertConfig:
# pad_token_id=0. Both tie the output projection to the word embeddings (PretrainedConfig.tie_word_embeddings=True).
PAD = {"roberta": 1, "distilbert": 0}
FIRST_REAL_ID = {"roberta": 4, "distilbert": 1}  # real tokens avoid <s>=0 <pad>=1 </s>=2 <unk>=3 / [PAD]=0
WEIGHTS = ("HF-style init (embeddings std 0.02, nn.Embedding padding_idx rows zeroed: word embeddings row "
           "pad_token_id, and for RoBERTa also position embeddings row pad_token_id) with nn.Linear weights std 0.1, "
           "LayerNorm weights 1+0.1*N(0,1), LayerNorm/linear biases and the MLM output bias 0.05*N(0,1)")


def family_head(c):
    """(family, head) from config.json's model_type and architectures[0]."""
    fam = c.get("model_type")
    if fam not in PAD:
        raise SystemExit(f"family_ref.py: model_type {fam!r} is not roberta or distilbert")
    arch = (c.get("architectures") or [""])[0]
    for (f, h), name in ARCH.items():
        if f == fam and arch == name:
            return fam, h
    raise SystemExit(f"family_ref.py: architectures {c.get('architectures')!r} not supported for {fam}")


# ----------------------------------------------------------------------------------------------------------- shapes

def param_shapes(c):
    """{name: shape} of the trainable parameters in HF's state-dict names (tied duplicates left out)."""
    fam, head = family_head(c)
    s = {}
    if fam == "roberta":
        V, H, I = c["vocab_size"], c["hidden_size"], c["intermediate_size"]
        s.update({"roberta.embeddings.word_embeddings.weight": [V, H],
                  "roberta.embeddings.position_embeddings.weight": [c["max_position_embeddings"], H],
                  "roberta.embeddings.token_type_embeddings.weight": [c["type_vocab_size"], H],
                  "roberta.embeddings.LayerNorm.weight": [H], "roberta.embeddings.LayerNorm.bias": [H]})
        for i in range(c["num_hidden_layers"]):
            p = f"roberta.encoder.layer.{i}."
            for lin, o, n in [("attention.self.query", H, H), ("attention.self.key", H, H),
                              ("attention.self.value", H, H), ("attention.output.dense", H, H),
                              ("intermediate.dense", I, H), ("output.dense", H, I)]:
                s[p + lin + ".weight"], s[p + lin + ".bias"] = [o, n], [o]
            for lnm in ("attention.output.LayerNorm", "output.LayerNorm"):
                s[p + lnm + ".weight"], s[p + lnm + ".bias"] = [H], [H]
        if head == "mlm":
            # RobertaLMHead: dense, layer_norm, decoder (weight tied to word embeddings, bias tied to lm_head.bias)
            s.update({"lm_head.dense.weight": [H, H], "lm_head.dense.bias": [H],
                      "lm_head.layer_norm.weight": [H], "lm_head.layer_norm.bias": [H], "lm_head.bias": [V]})
            if not c.get("tie_word_embeddings", True):  # PreTrainedModel.tie_weights skipped: its own decoder
                s["lm_head.decoder.weight"] = [V, H]
        else:  # RobertaClassificationHead (no pooler: RobertaModel(config, add_pooling_layer=False))
            N = num_labels(c)
            s.update({"classifier.dense.weight": [H, H], "classifier.dense.bias": [H],
                      "classifier.out_proj.weight": [N, H], "classifier.out_proj.bias": [N]})
    else:
        V, D, F = c["vocab_size"], c["dim"], c["hidden_dim"]
        s.update({"distilbert.embeddings.word_embeddings.weight": [V, D],
                  "distilbert.embeddings.position_embeddings.weight": [c["max_position_embeddings"], D],
                  "distilbert.embeddings.LayerNorm.weight": [D], "distilbert.embeddings.LayerNorm.bias": [D]})
        for i in range(c["n_layers"]):
            p = f"distilbert.transformer.layer.{i}."
            for lin, o, n in [("attention.q_lin", D, D), ("attention.k_lin", D, D), ("attention.v_lin", D, D),
                              ("attention.out_lin", D, D), ("ffn.lin1", F, D), ("ffn.lin2", D, F)]:
                s[p + lin + ".weight"], s[p + lin + ".bias"] = [o, n], [o]
            for lnm in ("sa_layer_norm", "output_layer_norm"):
                s[p + lnm + ".weight"], s[p + lnm + ".bias"] = [D], [D]
        if head == "mlm":  # vocab_projector.weight is tied to the word embeddings (not stored)
            s.update({"vocab_transform.weight": [D, D], "vocab_transform.bias": [D],
                      "vocab_layer_norm.weight": [D], "vocab_layer_norm.bias": [D], "vocab_projector.bias": [V]})
            if not c.get("tie_word_embeddings", True):
                s["vocab_projector.weight"] = [V, D]
        else:
            N = num_labels(c)
            s.update({"pre_classifier.weight": [D, D], "pre_classifier.bias": [D],
                      "classifier.weight": [N, D], "classifier.bias": [N]})
    return s


def init_shapes(shapes, g, zero_rows):
    """Random float32 weights for {name: shape} drawn from generator g in dict order (see WEIGHTS); zero_rows
    {name: row} zeroes an nn.Embedding padding_idx row as _init_weights does."""
    params = {}
    for name, shape in shapes.items():
        z = torch.randn(shape, generator=g)
        is_ln = "LayerNorm" in name or "layer_norm" in name
        if name.endswith("_embeddings.weight"):
            z = 0.02 * z
        elif is_ln and name.endswith(".weight"):
            z = 1.0 + 0.1 * z
        elif name.endswith(".weight"):
            z = 0.1 * z
        else:
            z = 0.05 * z
        if name in zero_rows:
            z[zero_rows[name]] = 0.0
        params[name] = z.numpy().astype(np.float32)
    return params


def init_params(c, g):
    """Random float32 weights drawn from generator g in param_shapes order (see WEIGHTS). Zeroed rows follow
    _init_weights: `if module.padding_idx is not None: module.weight.data[module.padding_idx].zero_()`."""
    fam, _ = family_head(c)
    pad = c["pad_token_id"]
    zero_rows = {f"{fam}.embeddings.word_embeddings.weight": pad}
    if fam == "roberta":  # RobertaEmbeddings.position_embeddings = nn.Embedding(..., padding_idx=self.padding_idx)
        zero_rows["roberta.embeddings.position_embeddings.weight"] = pad
    return init_shapes(param_shapes(c), g, zero_rows)


# ---------------------------------------------------------------------------------------------------------- forward

def embedding(W, ids, padding_idx):
    """nn.Embedding(..., padding_idx=padding_idx) lookup: the value is W[ids] (whatever row padding_idx holds), but
    the lookups of padding_idx pass no gradient to W (torch's embedding backward skips that index)."""
    e = W[ids]
    if padding_idx is None:
        return e
    return torch.where((ids == padding_idx)[..., None], e.detach(), e)


def roberta_position_ids(ids, padding_idx):
    """modeling_roberta.create_position_ids_from_input_ids (past_key_values_length 0):
    mask = ids.ne(padding_idx); (cumsum(mask, dim=1) * mask) + padding_idx."""
    m = (ids != padding_idx).long()
    return torch.cumsum(m, dim=1) * m + padding_idx


def roberta_encode(P, c, ids, mask, types):
    """RobertaModel(add_pooling_layer=False) last_hidden_state [B, T, H]."""
    B, T = ids.shape
    H, nh, eps, pad = c["hidden_size"], c["num_attention_heads"], c["layer_norm_eps"], c["pad_token_id"]
    d = H // nh
    # RobertaEmbeddings.forward: position_ids from input_ids (padding_idx = config.pad_token_id);
    # inputs_embeds = word_embeddings(input_ids) (nn.Embedding padding_idx=pad_token_id);
    # embeddings = inputs_embeds + token_type_embeddings(token_type_ids) + position_embeddings(position_ids)
    # (position_embedding_type "absolute"; position_embeddings has padding_idx=pad_token_id too); LayerNorm; dropout.
    pos = roberta_position_ids(ids, pad)
    if int(pos.max()) >= c["max_position_embeddings"]:
        raise SystemExit(f"position id {int(pos.max())} >= max_position_embeddings {c['max_position_embeddings']} "
                         "(RoBERTa needs max_position_embeddings >= seq + pad_token_id + 1)")
    x = embedding(P["roberta.embeddings.word_embeddings.weight"], ids, pad) \
        + P["roberta.embeddings.token_type_embeddings.weight"][types] \
        + embedding(P["roberta.embeddings.position_embeddings.weight"], pos, pad)
    x = layer_norm(x, P, "roberta.embeddings.LayerNorm", eps)
    # ModuleUtilsMixin.get_extended_attention_mask: (1.0 - mask[:, None, None, :]) * torch.finfo(dtype).min, added
    # to the scores of every head and query (keys only).
    mask_term = ((1.0 - mask.to(x.dtype)) * MASK_MIN)[:, None, None, :]
    for i in range(c["num_hidden_layers"]):
        p = f"roberta.encoder.layer.{i}."
        # RobertaSelfAttention (copied from BertSelfAttention): transpose_for_scores; scores = q k^T / sqrt(d) + mask;
        # softmax; dropout (p=0); context = probs v, heads concatenated
        q, k, v = (linear(x, P, p + "attention.self." + n).view(B, T, nh, d).transpose(1, 2)
                   for n in ("query", "key", "value"))
        scores = q @ k.transpose(-1, -2) / math.sqrt(d) + mask_term
        ctx = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(B, T, H)
        # RobertaSelfOutput: LayerNorm(dropout(dense(ctx)) + input)
        x = layer_norm(x + linear(ctx, P, p + "attention.output.dense"), P, p + "attention.output.LayerNorm", eps)
        # RobertaIntermediate: ACT2FN[config.hidden_act](dense(x)); RobertaOutput: LayerNorm(dropout(dense(h)) + x)
        h = ACT[c["hidden_act"]](linear(x, P, p + "intermediate.dense"))
        x = layer_norm(x + linear(h, P, p + "output.dense"), P, p + "output.LayerNorm", eps)
    return x


def distilbert_encode(P, c, ids, mask):
    """DistilBertModel last_hidden_state [B, T, dim]."""
    B, T = ids.shape
    D, nh, pad = c["dim"], c["n_heads"], c["pad_token_id"]
    d = D // nh
    if c.get("sinusoidal_pos_embds"):
        raise SystemExit("family_ref.py: sinusoidal_pos_embds true is not implemented")
    # Embeddings.forward: word_embeddings (nn.Embedding padding_idx=config.pad_token_id) + position_embeddings
    # (no padding_idx) of position_ids = arange(seq_length); no token types; LayerNorm(eps=1e-12); dropout.
    x = embedding(P["distilbert.embeddings.word_embeddings.weight"], ids, pad) \
        + P["distilbert.embeddings.position_embeddings.weight"][:T]
    x = layer_norm(x, P, "distilbert.embeddings.LayerNorm", DISTILBERT_LN_EPS)
    act = ACT[c["activation"]]  # FFN.activation = get_activation(config.activation)
    key_masked = (mask == 0).view(B, 1, 1, T)  # MultiHeadSelfAttention: mask = (mask == 0).view(mask_reshp)
    for i in range(c["n_layers"]):
        p = f"distilbert.transformer.layer.{i}."
        # MultiHeadSelfAttention.forward: q, k, v = shape(q_lin/k_lin/v_lin(x)); q = q / sqrt(dim_per_head);
        # scores = q k^T; scores.masked_fill(mask, torch.finfo(scores.dtype).min); softmax; dropout(attention_dropout,
        # on the weights only); context = unshape(weights v); out_lin(context) -- no dropout after out_lin
        q, k, v = (linear(x, P, p + "attention." + n).view(B, T, nh, d).transpose(1, 2)
                   for n in ("q_lin", "k_lin", "v_lin"))
        q = q / math.sqrt(d)
        scores = (q @ k.transpose(2, 3)).masked_fill(key_masked, torch.finfo(q.dtype).min)
        ctx = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(B, T, D)
        sa = linear(ctx, P, p + "attention.out_lin")
        # TransformerBlock.forward: sa_output = sa_layer_norm(sa_output + x) (post-LN, eps 1e-12)
        x = layer_norm(sa + x, P, p + "sa_layer_norm", DISTILBERT_LN_EPS)
        # FFN.ff_chunk: dropout(lin2(activation(lin1(x)))); output_layer_norm(ffn_output + sa_output)
        f = linear(act(linear(x, P, p + "ffn.lin1")), P, p + "ffn.lin2")
        x = layer_norm(f + x, P, p + "output_layer_norm", DISTILBERT_LN_EPS)
    return x


def forward(P, c, bt):
    """(loss, logits, resolved problem type or None for MLM)."""
    fam, head = family_head(c)
    ids, mask, labels = bt["input_ids"], bt["attention_mask"], bt["labels"]
    if fam == "roberta":
        types = bt.get("token_type_ids")
        if types is None:  # RobertaEmbeddings: token_type_ids default to the all-zero buffer
            types = torch.zeros_like(ids)
        x = roberta_encode(P, c, ids, mask, types)
        if head == "mlm":
            # RobertaLMHead.forward: dense -> gelu (activations.gelu = GELUActivation, the exact erf form, fixed:
            # NOT config.hidden_act) -> layer_norm (eps = config.layer_norm_eps) -> decoder (weight tied to the word
            # embeddings, bias = lm_head.bias)
            t = ACT["gelu"](linear(x, P, "lm_head.dense"))
            t = layer_norm(t, P, "lm_head.layer_norm", c["layer_norm_eps"])
            dec = P["roberta.embeddings.word_embeddings.weight"] if c.get("tie_word_embeddings", True) \
                else P["lm_head.decoder.weight"]
            logits = t @ dec.T + P["lm_head.bias"]
        else:
            # RobertaClassificationHead.forward: x = features[:, 0, :]; dropout; dense; tanh; dropout; out_proj
            # (dropout p = classifier_dropout if not None else hidden_dropout_prob; 0 here)
            t = torch.tanh(linear(x[:, 0, :], P, "classifier.dense"))
            logits = linear(t, P, "classifier.out_proj")
    else:
        x = distilbert_encode(P, c, ids, mask)
        if head == "mlm":
            # DistilBertForMaskedLM.forward: vocab_transform -> activation (get_activation(config.activation)) ->
            # vocab_layer_norm (eps 1e-12) -> vocab_projector (weight tied to the word embeddings, own bias)
            t = ACT[c["activation"]](linear(x, P, "vocab_transform"))
            t = layer_norm(t, P, "vocab_layer_norm", DISTILBERT_LN_EPS)
            dec = P["distilbert.embeddings.word_embeddings.weight"] if c.get("tie_word_embeddings", True) \
                else P["vocab_projector.weight"]
            logits = t @ dec.T + P["vocab_projector.bias"]
        else:
            # DistilBertForSequenceClassification.forward: hidden_state[:, 0] -> pre_classifier -> nn.ReLU() ->
            # dropout(seq_classif_dropout) -> classifier
            t = torch.relu(linear(x[:, 0], P, "pre_classifier"))
            logits = linear(t, P, "classifier")
    if head == "mlm":  # CrossEntropyLoss() (ignore_index -100, mean) over view(-1, vocab_size)
        loss = torch.nn.CrossEntropyLoss()(logits.view(-1, logits.shape[-1]), labels.view(-1))
        return loss, logits, None
    loss, pt = cls_loss(c, logits, labels)
    return loss, logits, pt


def to_torch_batch(batch, dtype):
    """input_ids / attention_mask (/ token_type_ids) as long; integer labels stay integer (their dtype decides an
    inferred problem type, as in HF), float labels are cast to the compute dtype."""
    bt = {k: torch.tensor(batch[k], dtype=torch.long) for k in ("input_ids", "attention_mask", "token_type_ids")
          if k in batch}
    lab = torch.from_numpy(np.ascontiguousarray(batch["labels"]))
    bt["labels"] = lab if not torch.is_floating_point(lab) else lab.to(dtype)
    return bt


def run(c, params, batch, step, dtype=torch.float32):
    """Loss, logits, grads and one AdamW step; returns ({name: numpy array of `dtype`}, resolved problem type)."""
    P = {k: torch.tensor(v, dtype=dtype, requires_grad=True) for k, v in params.items()}
    loss, logits, pt = forward(P, c, to_torch_batch(batch, dtype))
    loss.backward()
    out = {"loss": loss.detach().reshape(1).numpy(), "logits": logits.detach().numpy()}
    grads_and_adamw(P, step, out)
    return out, pt


# ------------------------------------------------------------------------------------------------------------ make

def make_batch(g, B, T, V, fam, pad_frac):
    """bert_ref.make_batch's rows (one full row, one short 'heavy' row, random lengths; 15-30% of the real tokens
    labelled with random targets in [0, V)) for RoBERTa / DistilBERT: padded positions (mask 0) hold pad_token_id;
    real tokens are drawn from [FIRST_REAL_ID, V) except that about pad_frac of them are pad_token_id (at least one
    in the batch when pad_frac > 0), which exercises nn.Embedding's padding_idx gradient rule and, for RoBERTa,
    create_position_ids_from_input_ids. RoBERTa gets all-zero token_type_ids; DistilBERT has none."""
    pad, lo = PAD[fam], FIRST_REAL_ID[fam]
    ri = lambda a, b: int(torch.randint(a, b, (1,), generator=g))  # noqa: E731  a <= x < b
    full = ri(0, B)
    heavy = (full + ri(1, B)) % B if B > 1 else -1
    ids = np.full((B, T), pad, np.int64)
    mask = np.zeros((B, T), np.int64)
    labels = np.full((B, T), -100, np.int64)
    lengths = []
    for b in range(B):
        L = T if b == full else ri(1, max(1, T // 4) + 1) if b == heavy else ri(1, T + 1)
        lengths.append(L)
        mask[b, :L] = 1
        ids[b, :L] = torch.randint(lo, V, (L,), generator=g).numpy()
        inside = (torch.rand((L,), generator=g) < pad_frac).numpy()
        ids[b, :L][inside] = pad
        frac = 0.15 + 0.15 * float(torch.rand((), generator=g))
        k = max(1 if b == full else 0, int(round(frac * L)))
        pos = torch.randperm(L, generator=g)[:k].numpy()
        labels[b, pos] = torch.randint(0, V, (k,), generator=g).numpy()
    if pad_frac > 0 and not ((ids == pad) & (mask == 1)).any():
        ids[full, ri(0, T)] = pad
    batch = {"input_ids": ids, "attention_mask": mask, "labels": labels}
    if fam == "roberta":
        batch["token_type_ids"] = np.zeros((B, T), np.int64)
    return batch, lengths


def family_config(a):
    """config.json fields as RobertaConfig / DistilBertConfig write them (plus tie flags and torch_dtype)."""
    arch = ARCH[(a.family, a.head)]
    if a.family == "roberta":
        # RobertaConfig(BertConfig): BertConfig's keys; pad_token_id=1, bos_token_id=0, eos_token_id=2;
        # roberta-base: layer_norm_eps 1e-05, type_vocab_size 1, classifier_dropout null
        return {"architectures": [arch], "model_type": "roberta", "vocab_size": a.vocab, "hidden_size": a.hidden,
                "num_hidden_layers": a.layers, "num_attention_heads": a.heads, "intermediate_size": a.intermediate,
                "hidden_act": a.act, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
                "max_position_embeddings": a.max_pos, "type_vocab_size": a.type_vocab, "initializer_range": 0.02,
                "layer_norm_eps": a.eps, "pad_token_id": PAD["roberta"], "bos_token_id": 0, "eos_token_id": 2,
                "position_embedding_type": "absolute", "classifier_dropout": None,
                "tie_word_embeddings": not a.untied, "torch_dtype": "float32"}
    # DistilBertConfig.__init__ keys (vocab_size, max_position_embeddings, sinusoidal_pos_embds, n_layers, n_heads,
    # dim, hidden_dim, dropout, attention_dropout, activation, initializer_range, qa_dropout, seq_classif_dropout,
    # pad_token_id=0). "tie_weights_" is the legacy key of the distilbert-base-* hub configs (not read by the
    # class); the tying HF applies follows PretrainedConfig.tie_word_embeddings (default true).
    return {"architectures": [arch], "model_type": "distilbert", "vocab_size": a.vocab,
            "max_position_embeddings": a.max_pos, "sinusoidal_pos_embds": False, "n_layers": a.layers,
            "n_heads": a.heads, "dim": a.hidden, "hidden_dim": a.intermediate, "dropout": 0.0,
            "attention_dropout": 0.0, "activation": a.act, "initializer_range": 0.02, "qa_dropout": 0.0,
            "seq_classif_dropout": 0.0, "pad_token_id": PAD["distilbert"], "tie_weights_": True,
            "tie_word_embeddings": not a.untied, "torch_dtype": "float32"}


def cmd_make(a):
    fam, head = a.family, a.head
    if fam == "distilbert":
        if a.eps is not None and a.eps != DISTILBERT_LN_EPS:
            sys.exit("make: DistilBERT's LayerNorm eps is fixed at 1e-12 upstream (no config key); drop --eps")
        if a.type_vocab not in (None, 0):
            sys.exit("make: DistilBERT has no token type embeddings; drop --type-vocab")
    else:
        a.eps = 1e-5 if a.eps is None else a.eps
        a.type_vocab = 1 if a.type_vocab is None else a.type_vocab
    pad = PAD[fam]
    assert a.hidden % a.heads == 0 and a.vocab > FIRST_REAL_ID[fam], "inconsistent shape arguments"
    if fam == "roberta":
        assert a.max_pos >= a.seq + pad + 1, "RoBERTa: --max-pos must be >= seq + pad_token_id + 1 (= seq + 2)"
    else:
        assert a.max_pos >= a.seq, "--max-pos must be >= --seq"
    c = family_config(a)
    kind = n = ignored = None
    if head == "cls":
        n, kind, ignored = label_setup(a, c)
    elif a.left_pad or a.label_names or a.num_labels is not None or a.ignored is not None:
        sys.exit("make: --left-pad / --num-labels / --label-names / --ignored are for --head cls")
    g = torch.Generator().manual_seed(a.seed)
    params = init_params(c, g)
    batch, lengths = make_batch(g, a.batch, a.seq, a.vocab, fam, a.pad_inside)
    if head == "cls":
        batch["labels"] = make_labels(g, a.batch, n, kind, ignored)  # replaces the masked-LM labels
        if a.left_pad:
            for b, L in enumerate(lengths):
                for k in ("input_ids", "attention_mask", "token_type_ids"):
                    if k in batch:
                        batch[k][b] = np.roll(batch[k][b], a.seq - L)
    o32, pt = run(c, params, batch, STEP, torch.float32)
    o64, _ = run(c, params, batch, STEP, torch.float64)
    obs = noise(o32, o64, STEP["lr"])
    fails, _ = check(o32, {k: v.astype(np.float32) for k, v in o64.items()}, STEP["lr"], True, True)
    if fails:  # the float64 result must pass against the float32 expected values
        sys.exit("make: float64 run does not agree with float32 expected values:\n" + "\n".join(fails))
    os.makedirs(a.out, exist_ok=True)
    ids, mask = batch["input_ids"], batch["attention_mask"]
    meta = {"fixture": os.path.basename(os.path.normpath(a.out)), "generator": "zerotrain tests/ref/family_ref.py",
            "torch_version": torch.__version__, "generator_command": "family_ref.py " + " ".join(sys.argv[1:]),
            "seed": a.seed, "dtype": "float32", "device": "cpu", "deterministic_algorithms": True, "num_threads": 1,
            "model_class": ARCH[(fam, head)],
            "tolerances": {"loss_rel": TOL["loss"], "logits_rel_to_max": TOL["logits"],
                           "grad_rel_to_max": TOL["grad"], "adamw_abs_in_units_of_lr": TOL["adamw_lr"]},
            "tolerance_definitions": "see /work/shared/fixtures/README.md (applied by tests/ref/compare.py)",
            "observed_float32_vs_float64": obs, "weights": WEIGHTS,
            "num_parameters": int(sum(v.size for v in params.values())), "num_parameter_tensors": len(params),
            "row_lengths": lengths, "left_pad": bool(a.left_pad),
            "pad_token_id_inside_real_tokens": int(((ids == pad) & (mask == 1)).sum())}
    if fam == "roberta":
        meta["position_ids"] = roberta_position_ids(torch.tensor(ids), pad).tolist()
    if head == "mlm":
        meta["num_label_tokens"] = int((batch["labels"] != -100).sum())
    else:
        meta.update({"num_labels": n, "problem_type_in_config": c.get("problem_type"), "problem_type_resolved": pt,
                     "labels_dtype": str(batch["labels"].dtype), "labels_shape": list(batch["labels"].shape),
                     "num_ignored_rows": int((batch["labels"] == -100).sum()) if kind == "single" else 0})
    for fn, obj, srt in (("config.json", c, True), ("step.json", STEP, False), ("meta.json", meta, False)):
        with open(os.path.join(a.out, fn), "w") as f:
            json.dump(obj, f, indent=2, sort_keys=srt)  # config.json keys sorted as HF's to_json_string does
            f.write("\n")
    save_st(os.path.join(a.out, "model.safetensors"), params, {"format": "pt"})
    save_st(os.path.join(a.out, "batch.safetensors"), batch)
    save_st(os.path.join(a.out, "expected.safetensors"), o32)
    what = (f"{meta['num_label_tokens']} labels" if head == "mlm" else
            f"{pt} ({'config' if c.get('problem_type') else 'inferred'}), {n} labels, labels {batch['labels'].dtype} "
            f"{list(batch['labels'].shape)}, {meta['num_ignored_rows']} ignored")
    print(f"make {a.out}: {ARCH[(fam, head)]}, rows {lengths}, {meta['pad_token_id_inside_real_tokens']} pad ids "
          f"inside, {what}, loss {float(o32['loss'][0]):.6f}; float32 vs float64: "
          + ", ".join(f"{k} {v:.3g}" for k, v in obs.items()))


def load_folder(d):
    with open(os.path.join(d, "config.json")) as f:
        c = json.load(f)
    with open(os.path.join(d, "step.json")) as f:
        step = json.load(f)
    return c, load_st(os.path.join(d, "model.safetensors")), load_st(os.path.join(d, "batch.safetensors")), step


def cmd_check(a):
    c, params, batch, step = load_folder(a.dir)
    exp = load_st(os.path.join(a.dir, "expected.safetensors"))
    out, pt = run(c, params, batch, step, torch.float32)
    fails, worst = check(exp, out, step["lr"], True, True)
    obs = noise(exp, run(c, params, batch, step, torch.float64)[0], step["lr"])
    for line in fails:
        print(line)
    what = ARCH[family_head(c)] + (f", {pt}" if pt else "")
    print(f"check-fixture {a.dir} ({what}): {'FAILED' if fails else 'OK'}; reference vs expected worst: "
          + "; ".join(f"{k} {v[0]:.3g} ({v[1]})" for k, v in sorted(worst.items())))
    print("  expected (float32) vs this reference in float64: " + ", ".join(f"{k} {v:.3g}" for k, v in obs.items()))
    return 1 if fails else 0


def cmd_grad(a):  # same interface as `zerotrain grad`
    with open(os.path.join(a.model, "config.json")) as f:
        c = json.load(f)
    step = dict(STEP, steps=0)
    if a.step:
        with open(a.step) as f:
            step = json.load(f)
    out, _ = run(c, load_st(os.path.join(a.model, "model.safetensors")), load_st(a.batch), step,
                 torch.float64 if a.float64 else torch.float32)
    save_st(a.out, {k: v.astype(np.float32) for k, v in out.items() if a.step or not k.startswith("adamw.")})
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make", help="write a random fixture folder")
    m.add_argument("--out", required=True)
    m.add_argument("--seed", type=int, required=True)
    m.add_argument("--family", choices=("roberta", "distilbert"), required=True)
    m.add_argument("--head", choices=("mlm", "cls"), required=True,
                   help="mlm: *ForMaskedLM; cls: *ForSequenceClassification")
    for flag, typ, dflt, hlp in [
            ("--vocab", int, 512, None), ("--hidden", int, 64, "hidden_size / dim"),
            ("--layers", int, 2, "num_hidden_layers / n_layers"), ("--heads", int, 4, "num_attention_heads / n_heads"),
            ("--intermediate", int, 256, "intermediate_size / hidden_dim"), ("--max-pos", int, 64, None),
            ("--batch", int, 2, None), ("--seq", int, 16, None)]:
        m.add_argument(flag, type=typ, default=dflt, help=hlp)
    m.add_argument("--type-vocab", type=int, help="RoBERTa type_vocab_size (default 1; batch token types are 0)")
    m.add_argument("--eps", type=float, help="RoBERTa layer_norm_eps (default 1e-5); DistilBERT's is fixed 1e-12")
    m.add_argument("--act", choices=sorted(ACT), default="gelu", help="RoBERTa hidden_act / DistilBERT activation")
    m.add_argument("--untied", action="store_true", help="mlm: tie_word_embeddings false (the decoder's own weight)")
    m.add_argument("--pad-inside", type=float, default=0.05,
                   help="fraction of real (mask 1) tokens set to pad_token_id (at least one if > 0)")
    add_label_args(m, "cls: ")
    m.add_argument("--left-pad", action="store_true",
                   help="cls: pad rows on the left (the head reads position 0, a padded one, as HF's does; RoBERTa's "
                        "position ids still count real tokens from pad_token_id + 1, DistilBERT's stay 0..T-1)")
    add_fixture_commands(sub)
    a = ap.parse_args()
    return {"make": cmd_make, "check-fixture": cmd_check, "grad": cmd_grad}[a.cmd](a) or 0


if __name__ == "__main__":
    sys.exit(main())
