#!/usr/bin/python3
"""Independent plain-torch ELECTRA reference: discriminator (ElectraForPreTraining), generator (ElectraForMaskedLM),
ElectraForSequenceClassification, and the joint generator + discriminator pretraining step. Generates random fixture
folders (`make`), re-checks existing ones (`check-fixture`), mimics `zerotrain grad` (`grad`) and checks itself
(`selftest`). Written from the upstream Python, not from zerotrain's C code:
  Hugging Face transformers src/transformers/models/electra/modeling_electra.py (read at qubvel/transformers
    49235a00, a 2025 copy of main): ElectraEmbeddings.forward, ElectraModel.forward (embeddings_project exists iff
    embedding_size != hidden_size; get_extended_attention_mask = (1 - m) * finfo.min), ElectraSelfAttention /
    ElectraSelfOutput / ElectraIntermediate / ElectraOutput / ElectraLayer (= the Bert* classes, names
    electra.encoder.layer.N.*), ElectraDiscriminatorPredictions, ElectraGeneratorPredictions,
    ElectraClassificationHead, ElectraForPreTraining / ElectraForMaskedLM / ElectraForSequenceClassification .forward,
    load_tf_weights_in_electra (how the TF scopes map onto HF names, below);
  src/transformers/models/electra/configuration_electra.py (ElectraConfig: embedding_size, hidden_act "gelu",
    layer_norm_eps 1e-12, pad 0, classifier_dropout);
  google-research/electra (commit 8a46635) run_pretraining.py (PretrainingModel.__init__, _get_masked_lm_output,
    _get_discriminator_output, _get_fake_data, get_token_logits, get_softmax_output, get_generator_config),
    pretrain/pretrain_helpers.py (mask, unmask, scatter_update, sample_from_softmax), configure_pretraining.py
    (gen_weight 1.0, disc_weight 50.0, mask_prob 0.15, temperature 1.0, generator_hidden_size 0.25,
    generator_layers 1.0, untied_generator_embeddings False), model/modeling.py (BertModel: the "electra/embeddings"
    variable scope, embeddings_project, gelu = the exact erf form).

The joint pretraining step (a folder with electra_pretraining.json; see joint_forward):
  generator input  = `input_ids` (masked: [MASK] at most masked positions), labels = original ids at the masked
                     positions, -100 elsewhere (HF's MLM convention)
  generator loss   = CrossEntropy(generator logits, labels) (mean over labels != -100; google divides by
                     sum(weights) + 1e-6)
  replacements     = `replacement_ids` from the batch, or sampled from the generator's logits at the masked positions
                     with the batch's uniform noise `gumbel_uniform` [B, T, V]:
                     argmax(logits / temperature - log(-log(u + 1e-9) + 1e-9))   (sample_from_softmax; no gradient)
  discriminator input = the original ids with the masked positions replaced (unmask + scatter_update)
  discriminator labels = masked and replacement != original (_get_fake_data: masked * (1 - (updated == original)))
  discriminator loss = BCEWithLogits mean over attention_mask == 1 (ElectraForPreTraining; google divides by
                     sum(input_mask) + 1e-6)
  loss = gen_weight (1) * generator loss + disc_weight (50) * discriminator loss
Shared tensors. google's BertModel builds the token lookup and embedding_postprocessor of both networks in the
variable scope "electra/embeddings" (untied_generator_embeddings False), so the generator and the discriminator share
word_embeddings, position_embeddings, token_type_embeddings AND the embedding LayerNorm (gamma, beta); each network
has its own embeddings_project (scopes "generator/..." and "electra/..."), encoder, and head, and the generator's output
projection is the shared word embedding table (get_token_logits(..., model.get_embedding_table(), ...)) with its own
output_bias (google's get_token_logits uses the generator's hidden_act there, HF's ElectraGeneratorPredictions a
fixed "gelu"; equal for ELECTRA's default "gelu", the erf form in both). HF has no joint class; its converter load_tf_weights_in_electra loads TF "electra/embeddings/*" into
the generator's electra.embeddings.* as well ("electra/embeddings/" -> "generator/embeddings/" -> "electra/...") and
ElectraForMaskedLM ties generator_lm_head.weight to electra.embeddings.word_embeddings (_tied_weights_keys).
(The paper's weight-sharing section speaks of the token and positional embeddings -- quoted from memory,
not re-read here; the code shares the whole scope, and this reference follows the code.)
In a joint folder the discriminator's tensors have their HF names, the generator's carry the prefix "generator."
and every generator.electra.embeddings.* tensor absent from model.safetensors IS the discriminator's tensor of the
same name (make stores none of them; --gen-own-embedding-layernorm keeps the generator's own LayerNorm). The
gradient of a shared tensor sums both networks' uses (README's tied rule).

Outputs besides the README's: joint: `logits` = discriminator logits [B, T], `logits.generator` [B, T, V] (compared
like logits), aux.* (informative: the two losses, replacement ids, discriminator input and labels).
Dropout is the identity (make writes 0). Only position_embedding_type "absolute" is implemented."""
import argparse, json, math, os, sys
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import add_fixture_commands, load_st  # noqa: E402
from bert_ref import ACT, MASK_MIN, STEP, layer_norm, linear  # noqa: E402
from bert_ref import make_batch as bert_make_batch  # noqa: E402
from bert_cls_ref import add_label_args, cls_loss, label_setup, make_labels, num_labels  # noqa: E402
from family_ref import embedding, init_shapes  # noqa: E402
import albert_ref  # noqa: E402
from albert_ref import (canonical_params, fd_check, fixture_meta, fixture_outputs,  # noqa: E402
                        load_folder, report_check, run_model, save_grad_output, to_torch_batch, write_fixture)

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

ARCH = {"disc": "ElectraForPreTraining", "mlm": "ElectraForMaskedLM", "cls": "ElectraForSequenceClassification"}
# BERT's uncased WordPiece ids, which ELECTRA's vocabulary is: [PAD] 0, [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103
PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID, FIRST_REAL_ID = 0, 100, 101, 102, 103, 104
JOINT_FILE, GEN_CONFIG_FILE, GEN_PREFIX = "electra_pretraining.json", "generator_config.json", "generator."
# configure_pretraining.PretrainingConfig defaults used by the joint step
PRETRAIN_DEFAULTS = {"gen_weight": 1.0, "disc_weight": 50.0, "temperature": 1.0, "mask_prob": 0.15,
                     "generator_hidden_size": 0.25, "generator_layers": 1.0, "disallow_correct": False}
WEIGHTS = ("HF-style init (embeddings std 0.02, word embedding row pad_token_id zeroed) with nn.Linear weights std 0.1 "
           "(embeddings_project included), LayerNorm weights 1+0.1*N(0,1), LayerNorm/linear biases and "
           "generator_lm_head.bias 0.05*N(0,1)")


def head_of(c):
    return albert_ref.head_of(c, "electra", ARCH)


def generator_config(disc, hidden_frac=0.25, layers_frac=1.0):
    """The generator's config from the discriminator's: google-research/electra run_pretraining.py
    get_generator_config with configure_pretraining.py's generator_hidden_size (0.25) and generator_layers (1.0):
        hidden_size        = int(round(disc hidden_size * generator_hidden_size))
        num_hidden_layers  = int(round(disc num_hidden_layers * generator_layers))
        intermediate_size  = 4 * hidden_size
        num_attention_heads = max(1, hidden_size // 64)
    everything else (embedding_size: the shared table's width, vocab, eps, act, ...) copied. round() is Python 3's
    (halves to even). With 64-wide heads and a 4 H FFN this is the paper's "multiplier for hidden-size, FFN-size, and
    num-attention-heads" (Table 6: 1/4 small and large, 1/3 base): electra-base (768, 12 heads, 3072) at 1/3 gives
    google/electra-base-generator's 256 / 4 / 1024. Note google/electra-small-generator on the Hub is NOT the 1/4
    generator (its model card warns it is the discriminator's size)."""
    g = dict(disc)
    g["hidden_size"] = int(round(disc["hidden_size"] * hidden_frac))
    g["num_hidden_layers"] = int(round(disc["num_hidden_layers"] * layers_frac))
    g["intermediate_size"] = 4 * g["hidden_size"]
    g["num_attention_heads"] = max(1, g["hidden_size"] // 64)
    g["architectures"] = [ARCH["mlm"]]
    return g


# ----------------------------------------------------------------------------------------------------------- shapes

def param_shapes(c, head=None):
    """{name: shape} in HF's state-dict names for one network (tied duplicates left out)."""
    head = head or head_of(c)
    V, E, H, I = c["vocab_size"], c["embedding_size"], c["hidden_size"], c["intermediate_size"]
    s = {"electra.embeddings.word_embeddings.weight": [V, E],
         "electra.embeddings.position_embeddings.weight": [c["max_position_embeddings"], E],
         "electra.embeddings.token_type_embeddings.weight": [c["type_vocab_size"], E],
         "electra.embeddings.LayerNorm.weight": [E], "electra.embeddings.LayerNorm.bias": [E]}
    if E != H:  # ElectraModel.__init__: if config.embedding_size != config.hidden_size: embeddings_project
        s["electra.embeddings_project.weight"], s["electra.embeddings_project.bias"] = [H, E], [H]
    for i in range(c["num_hidden_layers"]):
        p = f"electra.encoder.layer.{i}."
        for lin, o, n in [("attention.self.query", H, H), ("attention.self.key", H, H), ("attention.self.value", H, H),
                          ("attention.output.dense", H, H), ("intermediate.dense", I, H), ("output.dense", H, I)]:
            s[p + lin + ".weight"], s[p + lin + ".bias"] = [o, n], [o]
        for lnm in ("attention.output.LayerNorm", "output.LayerNorm"):
            s[p + lnm + ".weight"], s[p + lnm + ".bias"] = [H], [H]
    if head == "disc":  # ElectraDiscriminatorPredictions: dense (H -> H), dense_prediction (H -> 1)
        s.update({"discriminator_predictions.dense.weight": [H, H], "discriminator_predictions.dense.bias": [H],
                  "discriminator_predictions.dense_prediction.weight": [1, H],
                  "discriminator_predictions.dense_prediction.bias": [1]})
    elif head == "mlm":  # ElectraGeneratorPredictions: dense (H -> E), LayerNorm(E); generator_lm_head (E -> V)
        s.update({"generator_predictions.dense.weight": [E, H], "generator_predictions.dense.bias": [E],
                  "generator_predictions.LayerNorm.weight": [E], "generator_predictions.LayerNorm.bias": [E],
                  "generator_lm_head.bias": [V]})
        if not c.get("tie_word_embeddings", True):
            s["generator_lm_head.weight"] = [V, E]
    else:  # ElectraClassificationHead: dense (H -> H), out_proj (H -> num_labels)
        N = num_labels(c)
        s.update({"classifier.dense.weight": [H, H], "classifier.dense.bias": [H],
                  "classifier.out_proj.weight": [N, H], "classifier.out_proj.bias": [N]})
    return s


def joint_shapes(cd, cg, own_ln=False):
    """Discriminator (ElectraForPreTraining) names + "generator." + generator (ElectraForMaskedLM) names, without the
    shared generator.electra.embeddings.* tensors (with own_ln the generator keeps its own embedding LayerNorm)."""
    if cd["embedding_size"] != cg["embedding_size"] or cd["vocab_size"] != cg["vocab_size"]:
        raise SystemExit("electra_ref.py: shared embeddings need equal embedding_size and vocab_size")
    s = param_shapes(cd, "disc")
    for k, v in param_shapes(cg, "mlm").items():
        if k.startswith("electra.embeddings.") and not (own_ln and ".LayerNorm." in k):
            continue
        s[GEN_PREFIX + k] = v
    return s


def generator_view(P):
    """The generator's {HF name: tensor}: its "generator."-prefixed tensors, and the discriminator's tensor object for
    every electra.embeddings.* it does not have (so autograd sums both uses into one gradient)."""
    Pg = {k[len(GEN_PREFIX):]: v for k, v in P.items() if k.startswith(GEN_PREFIX)}
    for k, v in P.items():
        if k.startswith("electra.embeddings.") and k not in Pg:
            Pg[k] = v
    return Pg


def electra_tied(c, prefix=""):
    return {prefix + "generator_lm_head.weight": "electra.embeddings.word_embeddings.weight"} \
        if c.get("tie_word_embeddings", True) else {}


# ---------------------------------------------------------------------------------------------------------- forward

def encode(P, c, ids, mask, types):
    """ElectraModel last_hidden_state [B, T, H]."""
    B, T = ids.shape
    H, nh, eps = c["hidden_size"], c["num_attention_heads"], c.get("layer_norm_eps", 1e-12)
    if H % nh:
        raise SystemExit("electra_ref.py: hidden_size must be a multiple of num_attention_heads")
    if c.get("position_embedding_type", "absolute") != "absolute":
        raise SystemExit("electra_ref.py: only position_embedding_type 'absolute' is implemented")
    d = H // nh
    # ElectraEmbeddings.forward (= BertEmbeddings.forward in embedding_size): word_embeddings (padding_idx =
    # pad_token_id) + token_type_embeddings + position_embeddings(arange(T)); LayerNorm(E); dropout
    x = embedding(P["electra.embeddings.word_embeddings.weight"], ids, c.get("pad_token_id", 0)) \
        + P["electra.embeddings.token_type_embeddings.weight"][types] \
        + P["electra.embeddings.position_embeddings.weight"][:T]
    x = layer_norm(x, P, "electra.embeddings.LayerNorm", eps)
    if c["embedding_size"] != H:  # ElectraModel.forward: if hasattr(self, "embeddings_project")
        x = linear(x, P, "electra.embeddings_project")
    mask_term = ((1.0 - mask.to(x.dtype)) * MASK_MIN)[:, None, None, :]  # get_extended_attention_mask, keys only
    act = ACT[c.get("hidden_act", "gelu")]
    for i in range(c["num_hidden_layers"]):
        p = f"electra.encoder.layer.{i}."
        # ElectraSelfAttention (= BertSelfAttention): scores = q k^T / sqrt(d) + mask; softmax; dropout; probs v
        q, k, v = (linear(x, P, p + "attention.self." + n).view(B, T, nh, d).transpose(1, 2)
                   for n in ("query", "key", "value"))
        scores = q @ k.transpose(-1, -2) / math.sqrt(d) + mask_term
        ctx = (torch.softmax(scores, dim=-1) @ v).permute(0, 2, 1, 3).reshape(B, T, H)
        # ElectraSelfOutput: LayerNorm(dropout(dense(ctx)) + input); ElectraIntermediate: act(dense);
        # ElectraOutput: LayerNorm(dropout(dense(h)) + attention_output)
        x = layer_norm(linear(ctx, P, p + "attention.output.dense") + x, P, p + "attention.output.LayerNorm", eps)
        h = act(linear(x, P, p + "intermediate.dense"))
        x = layer_norm(linear(h, P, p + "output.dense") + x, P, p + "output.LayerNorm", eps)
    return x


def disc_logits(P, c, x):
    """ElectraDiscriminatorPredictions.forward: dense -> get_activation(config.hidden_act) -> dense_prediction ->
    squeeze(-1): [B, T]."""
    h = ACT[c.get("hidden_act", "gelu")](linear(x, P, "discriminator_predictions.dense"))
    return linear(h, P, "discriminator_predictions.dense_prediction").squeeze(-1)


def disc_loss(logits, labels, mask):
    """ElectraForPreTraining.forward with attention_mask: active = mask == 1; BCEWithLogitsLoss (mean) of
    logits[active] against labels[active].float()."""
    active = mask == 1
    return torch.nn.BCEWithLogitsLoss()(logits[active], labels[active].to(logits.dtype))


def gen_logits(P, c, x):
    """ElectraGeneratorPredictions.forward: dense (H -> E) -> get_activation("gelu") (the exact erf form, fixed, not
    hidden_act) -> LayerNorm(E, eps=layer_norm_eps); then generator_lm_head (weight tied to the word embeddings
    unless tie_word_embeddings is false, own bias)."""
    t = layer_norm(ACT["gelu"](linear(x, P, "generator_predictions.dense")), P, "generator_predictions.LayerNorm",
                   c.get("layer_norm_eps", 1e-12))
    W = P["electra.embeddings.word_embeddings.weight"] if c.get("tie_word_embeddings", True) \
        else P["generator_lm_head.weight"]
    return t @ W.T + P["generator_lm_head.bias"]


def types_mask(bt):
    ids = bt["input_ids"]
    mask = bt.get("attention_mask")
    types = bt.get("token_type_ids")
    return (torch.ones_like(ids) if mask is None else mask), (torch.zeros_like(ids) if types is None else types)


def forward(P, c, bt):
    """One network: (loss, {output: tensor}, problem type or None, {})."""
    head = head_of(c)
    ids, labels = bt["input_ids"], bt["labels"]
    mask, types = types_mask(bt)
    x = encode(P, c, ids, mask, types)
    if head == "disc":
        logits = disc_logits(P, c, x)
        return disc_loss(logits, labels, mask), {"logits": logits}, None, {}
    if head == "mlm":  # ElectraForMaskedLM.forward: CrossEntropyLoss() over view(-1, vocab_size)
        logits = gen_logits(P, c, x)
        return torch.nn.CrossEntropyLoss()(logits.view(-1, c["vocab_size"]), labels.view(-1)), {"logits": logits}, \
            None, {}
    # ElectraClassificationHead.forward: x = features[:, 0, :]; dropout; dense; get_activation("gelu") ("although
    # BERT uses tanh here, it seems Electra authors used gelu here"); dropout; out_proj
    logits = linear(ACT["gelu"](linear(x[:, 0, :], P, "classifier.dense")), P, "classifier.out_proj")
    loss, pt = cls_loss(c, logits, labels)
    return loss, {"logits": logits}, pt, {}


def sample_replacements(logits, u, temperature=1.0, disallow=None):
    """pretrain_helpers.sample_from_softmax on logits / temperature (run_pretraining.py _get_fake_data): with
    disallow_correct, disallow = one_hot(the original ids) and logits -= 1000 * disallow; uniform_noise u;
    gumbel = -log(-log(u + 1e-9) + 1e-9); one_hot(argmax(softmax(logits + gumbel))) -- the argmax of
    logits / temperature - 1000 disallow + gumbel (the softmax does not move it; ties go to the first index).
    Called on detached logits (tf.stop_gradient). disallow: the original ids [B, T], or None."""
    x = logits / temperature
    if disallow is not None:
        x = x - 1000.0 * torch.nn.functional.one_hot(disallow.clamp(min=0), x.shape[-1]).to(x.dtype)
    return torch.argmax(x - torch.log(-torch.log(u + 1e-9) + 1e-9), dim=-1)


# ------------------------------------------------------------------ zerotrain's sampling noise (Philox 4x32-10)

PHILOX_KAT = [((0, 0, 0, 0), (0, 0), (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
              ((0xffffffff,) * 4, (0xffffffff,) * 2, (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
              ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xa4093822, 0x299f31d0),
               (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1))]


def philox4x32(ctr, key):
    """Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011; Random123's
    philox4x32): ctr [n, 4], key [n, 2] uint32 arrays -> [n, 4]. Checked against Random123's known answers
    (PHILOX_KAT) by selftest."""
    M0, M1, W0, W1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57), np.uint32(0x9E3779B9), np.uint32(0xBB67AE85)
    c = [np.asarray(ctr, np.uint32)[:, i].copy() for i in range(4)]
    k0, k1 = (np.asarray(key, np.uint32)[:, i].copy() for i in range(2))
    with np.errstate(over="ignore"):
        for r in range(10):
            p0, p1 = M0 * c[0].astype(np.uint64), M1 * c[2].astype(np.uint64)
            hi0, lo0 = (p0 >> np.uint64(32)).astype(np.uint32), p0.astype(np.uint32)
            hi1, lo1 = (p1 >> np.uint64(32)).astype(np.uint32), p1.astype(np.uint32)
            c = [hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0]
            k0, k1 = k0 + W0, k1 + W1
    return np.stack(c, axis=1)


def zerotrain_uniforms(seed, sample, position, n):
    """The uniforms [n] zerotrain's joint pretraining samples position `position` of sample `sample` with, as
    its docs/architecture.md specifies the stream (common/rng.h's keying): element e of stream s is word
    e % 4 of Philox block ctr = (e // 4 low 32 bits, e // 4 high 32 bits, s, sample low 32 bits), key =
    (seed low 32 bits, seed high 32 bits ^ sample high 32 bits); s = position << 8 | 21
    (ZT_RNG_ELECTRA_SAMPLE); uniform = (word >> 8) * 2^-24."""
    blocks = np.arange((n + 3) // 4, dtype=np.uint64)
    ctr = np.stack([blocks.astype(np.uint32), (blocks >> np.uint64(32)).astype(np.uint32),
                    np.full(len(blocks), (position << 8) | 21, np.uint32),
                    np.full(len(blocks), sample & 0xffffffff, np.uint32)], axis=1)
    key = np.tile(np.array([seed & 0xffffffff, ((seed >> 32) ^ (sample >> 32)) & 0xffffffff], np.uint32),
                  (len(blocks), 1))
    words = philox4x32(ctr, key).reshape(-1)[:n]
    return (words >> np.uint32(8)).astype(np.float32) * np.float32(2.0 ** -24)


def zerotrain_samples(g_logits, labels, seed, first_sample=0, temperature=1.0, disallow=False):
    """zerotrain's replacements [B, T] (-100 where not masked): sample_from_softmax's argmax with the uniforms
    above, in float32 as zerotrain computes it (disallow: disallow_correct, the original id less 1000)."""
    B, T, V = g_logits.shape
    out = np.full((B, T), -100, np.int64)
    for b in range(B):
        for t in range(T):
            if labels[b, t] == -100:
                continue
            u = zerotrain_uniforms(seed, first_sample + b, t, V)
            g = -np.log(-np.log(u + np.float32(1e-9)) + np.float32(1e-9))
            x = np.asarray(g_logits[b, t], np.float32) / np.float32(temperature)
            if disallow:
                x[labels[b, t]] -= np.float32(1000.0)
            out[b, t] = int(np.argmax(x + g))
    return out


def cmd_samples(a):
    """`samples`: does an implementation's aux.replacement_ids follow from its logits.generator by
    zerotrain_samples? (the sampler checked apart from the networks, which `grad` checks)"""
    o, bt = load_st(a.out), load_st(a.batch)
    want = zerotrain_samples(o["logits.generator"], bt["labels"], a.seed, a.first_sample, a.temperature,
                             a.disallow_correct)
    got = o["aux.replacement_ids"]
    bad = int((want != got).sum())
    n = int((bt["labels"] != -100).sum())
    print(f"samples: {n - bad} of {n} masked positions as zerotrain_samples gives them "
          f"({int(((got != -100) & (got != bt['labels'])).sum())} differ from the original)")
    return 1 if bad or n == 0 else 0


def joint_forward(P, cd, cg, pre, bt):
    """The ELECTRA pretraining step (see the module docstring). P: joint parameters (discriminator names +
    "generator."-prefixed generator names). Returns (loss, outputs, None, aux)."""
    ids, labels = bt["input_ids"], bt["labels"]
    mask, types = types_mask(bt)
    masked = labels != -100
    if bool(masked[:, 0].any()):  # google: position 0 is [CLS] (never a candidate); scatter_update ignores it
        raise SystemExit("electra_ref.py: joint step: labels at position 0 must be -100")
    Pg = generator_view(P)
    g_logits = gen_logits(Pg, cg, encode(Pg, cg, ids, mask, types))  # _get_masked_lm_output on masked_inputs
    g_loss = torch.nn.CrossEntropyLoss()(g_logits.view(-1, cg["vocab_size"]), labels.view(-1))
    if "replacement_ids" in bt:
        rep = bt["replacement_ids"]
    elif "gumbel_uniform" in bt:
        rep = sample_replacements(g_logits.detach(), bt["gumbel_uniform"], pre.get("temperature", 1.0),
                                  labels if pre.get("disallow_correct", False) else None)
    else:
        raise SystemExit("electra_ref.py: a joint batch needs replacement_ids or gumbel_uniform")
    # _get_fake_data: unmask (original ids back at the masked positions), scatter the sampled ids there;
    # labels = masked * (updated != original)
    d_ids = torch.where(masked, rep, ids)
    d_labels = (masked & (d_ids != labels)).long()
    d_logits = disc_logits(P, cd, encode(P, cd, d_ids, mask, types))
    d_loss = disc_loss(d_logits, d_labels, mask)
    loss = pre.get("gen_weight", 1.0) * g_loss + pre.get("disc_weight", 50.0) * d_loss
    aux = {"aux.loss_generator": g_loss, "aux.loss_discriminator": d_loss,
           "aux.replacement_ids": torch.where(masked, rep, torch.full_like(rep, -100)),
           "aux.disc_input_ids": d_ids, "aux.disc_labels": d_labels}
    return loss, {"logits": d_logits, "logits.generator": g_logits}, None, aux


# ------------------------------------------------------------------------------------------------ run / fixtures

def run(c, params, batch, step, dtype=torch.float32):
    return run_model(lambda P, bt: forward(P, c, bt), canonical_params(params, electra_tied(c)), batch, step, dtype)


def run_joint(cd, cg, pre, params, batch, step, dtype=torch.float32):
    own = GEN_PREFIX + "electra.embeddings.word_embeddings.weight"  # a generator with its own table projects with it
    tied = {GEN_PREFIX + k: (own if own in params else v) for k, v in electra_tied(cg).items()}
    return run_model(lambda P, bt: joint_forward(P, cd, cg, pre, bt), canonical_params(params, tied), batch, step,
                     dtype)


def load_any(d):
    """(runner(params, batch, step, dtype), description, params, step) for a model folder: joint when it has
    electra_pretraining.json (with generator_config.json), else the single network of config.json."""
    c, params, step = load_folder(d)
    if os.path.exists(os.path.join(d, JOINT_FILE)):
        with open(os.path.join(d, JOINT_FILE)) as f:
            pre = dict(PRETRAIN_DEFAULTS, **json.load(f))
        with open(os.path.join(d, GEN_CONFIG_FILE)) as f:
            cg = json.load(f)
        return (lambda p, b, s, dt: run_joint(c, cg, pre, p, b, s, dt)), "ELECTRA joint pretraining step", params, step
    return (lambda p, b, s, dt: run(c, p, b, s, dt)), ARCH[head_of(c)], params, step


def electra_config(a, head):
    """config.json fields as ElectraConfig writes them (dropouts 0, plus tie flag and torch_dtype)."""
    return {"architectures": [ARCH[head]], "model_type": "electra", "vocab_size": a.vocab,
            "embedding_size": a.embedding, "hidden_size": a.hidden, "num_hidden_layers": a.layers,
            "num_attention_heads": a.heads, "intermediate_size": a.intermediate, "hidden_act": a.act,
            "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0, "max_position_embeddings": a.max_pos,
            "type_vocab_size": a.type_vocab, "initializer_range": 0.02, "layer_norm_eps": a.eps,
            "summary_type": "first", "summary_use_proj": True, "summary_activation": "gelu",
            "summary_last_dropout": 0.0, "position_embedding_type": "absolute", "classifier_dropout": None,
            "pad_token_id": PAD_ID, "tie_word_embeddings": not a.untied, "torch_dtype": "float32"}


def make_joint_batch(g, B, T, V, mask_prob):
    """Rows [CLS] A [SEP] B [SEP] of random real tokens (types 0 / 1), [PAD] (mask 0) after; one row full length.
    Masked positions follow pretrain_helpers.mask: candidates = real tokens other than [CLS] [SEP] [MASK];
    num_to_predict = max(1, min(N, round(num_tokens * mask_prob))) with num_tokens = sum(attention_mask),
    N = max_predictions_per_seq = int((mask_prob + 0.005) * T) (configure_pretraining), round half to even as
    tf.round; each masked input becomes [MASK] with probability 0.85 (tf.less(uniform, 0.85)) and keeps its token
    otherwise. Difference: positions are drawn without replacement (google's tf.random.categorical draws with
    replacement and scatter_update collapses duplicates). Returns (batch without replacements, lengths)."""
    ri = lambda a, b: int(torch.randint(a, b, (1,), generator=g))  # noqa: E731
    full = ri(0, B)
    N = int((mask_prob + 0.005) * T)
    ids = np.full((B, T), PAD_ID, np.int64)
    mask, types = np.zeros((B, T), np.int64), np.zeros((B, T), np.int64)
    labels = np.full((B, T), -100, np.int64)
    lengths = []
    for b in range(B):
        L = T if b == full else ri(5, T + 1)
        la = ri(1, L - 3)
        seg = torch.randint(FIRST_REAL_ID, V, (L - 3,), generator=g).tolist()
        ids[b, :L] = [CLS_ID] + seg[:la] + [SEP_ID] + seg[la:] + [SEP_ID]
        types[b, la + 2:L], mask[b, :L] = 1, 1
        cand = [t for t in range(L) if ids[b, t] not in (CLS_ID, SEP_ID, MASK_ID)]
        k = min(len(cand), max(1, min(N, int(torch.round(torch.tensor(L * mask_prob))))))
        for t in torch.randperm(len(cand), generator=g)[:k].tolist():
            labels[b, cand[t]] = ids[b, cand[t]]
            if float(torch.rand((), generator=g)) < 0.85:
                ids[b, cand[t]] = MASK_ID
        lengths.append(L)
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types, "labels": labels}, lengths


def cmd_make(a):
    assert a.hidden % a.heads == 0 and a.seq <= a.max_pos and a.seq >= 5, "inconsistent shape arguments"
    assert a.vocab > FIRST_REAL_ID, f"--vocab must exceed {FIRST_REAL_ID} (BERT's special ids up to [MASK] 103)"
    head = a.head
    c = electra_config(a, "disc" if head == "joint" else head)
    n = kind = ignored = None
    if head == "cls":
        n, kind, ignored = label_setup(a, c)
    elif a.label_names or a.num_labels is not None or a.ignored is not None:
        sys.exit("make: --num-labels / --label-names / --ignored are for --head cls")
    g = torch.Generator().manual_seed(a.seed)
    pad_row = {"electra.embeddings.word_embeddings.weight": PAD_ID}
    extra = {"weights": WEIGHTS}
    jsons = [("config.json", c, True)]
    if head != "joint":
        params = init_shapes(param_shapes(c), g, pad_row)
        batch, lengths = bert_make_batch(g, a.batch, a.seq, a.vocab, a.type_vocab)
        if head == "disc":  # ElectraForPreTraining labels: 0 original, 1 replaced, [B, T] (padded ones included)
            batch["labels"] = (torch.rand((a.batch, a.seq), generator=g) < 0.3).numpy().astype(np.int64)
        elif head == "cls":
            batch["labels"] = make_labels(g, a.batch, n, kind, ignored)
        runner = lambda dt: run(c, params, batch, STEP, dt)  # noqa: E731
        model_class = ARCH[head]
    else:
        cg = generator_config(c, a.gen_hidden, a.gen_layers)
        if cg["hidden_size"] % cg["num_attention_heads"]:
            sys.exit(f"make: generator hidden_size {cg['hidden_size']} not a multiple of its heads")
        pre = dict(PRETRAIN_DEFAULTS, generator_hidden_size=a.gen_hidden, generator_layers=a.gen_layers,
                   mask_prob=a.mask_prob)
        params = init_shapes(joint_shapes(c, cg, a.gen_own_embedding_layernorm), g, pad_row)
        batch, lengths = make_joint_batch(g, a.batch, a.seq, a.vocab, a.mask_prob)
        u = torch.rand((a.batch, a.seq, a.vocab), generator=g)
        # one masked position whose noise favours the original token, so that a replacement equal to the original
        # (discriminator label 0 at a masked position) occurs
        b0, t0 = [int(x) for x in np.argwhere(batch["labels"] != -100)[0]]
        u[b0, t0, int(batch["labels"][b0, t0])] = 1.0 - 1e-7
        batch["gumbel_uniform"] = u.numpy().astype(np.float32)
        reps = {}
        for dt in (torch.float32, torch.float64):  # the sampled ids must not depend on the precision
            out, _ = run_joint(c, cg, pre, params, batch, dict(STEP, steps=0), dt)
            reps[dt] = out["aux.replacement_ids"]
        if not np.array_equal(reps[torch.float32], reps[torch.float64]):
            sys.exit("make: float32 and float64 sampling disagree (a near tie); try another --seed")
        batch["replacement_ids"] = reps[torch.float32]
        runner = lambda dt: run_joint(c, cg, pre, params, batch, STEP, dt)  # noqa: E731
        model_class = "ElectraForPreTraining + ElectraForMaskedLM (joint pretraining step)"
        jsons += [(GEN_CONFIG_FILE, cg, True), (JOINT_FILE, pre, True)]
        shared = [k for k in param_shapes(cg, "mlm") if k.startswith("electra.embeddings.")
                  and GEN_PREFIX + k not in params]
        extra.update({"generator_config_rule": "google-research/electra run_pretraining.get_generator_config: hidden "
                      "int(round(H * generator_hidden_size)), layers int(round(L * generator_layers)), intermediate "
                      "4 * hidden, heads max(1, hidden // 64)",
                      "pretraining": pre,
                      "shared_with_discriminator": shared,
                      "generator_own": sorted(k for k in params if k.startswith(GEN_PREFIX + "electra.embeddings."))})
    o32, pt, obs = fixture_outputs(runner, STEP["lr"])
    extra["row_lengths"] = lengths
    if head in ("mlm", "joint"):
        extra["num_label_tokens"] = int((batch["labels"] != -100).sum())
    if head == "joint":
        extra.update({"num_replaced": int(o32["aux.disc_labels"].sum()),
                      "num_masked_same_as_original": int(((batch["labels"] != -100) &
                                                          (o32["aux.disc_labels"] == 0)).sum()),
                      "loss_generator": float(o32["aux.loss_generator"][0]),
                      "loss_discriminator": float(o32["aux.loss_discriminator"][0])})
    if head == "cls":
        extra.update({"num_labels": n, "problem_type_in_config": c.get("problem_type"), "problem_type_resolved": pt,
                      "labels_dtype": str(batch["labels"].dtype), "labels_shape": list(batch["labels"].shape)})
    meta = fixture_meta(a.out, "electra_ref.py", a.seed, model_class, obs, params, extra)
    write_fixture(a.out, jsons + [("step.json", STEP, False), ("meta.json", meta, False)], params, batch, o32)
    print(f"make {a.out}: {model_class}, rows {lengths}, loss {float(o32['loss'][0]):.6f}"
          + (f" (generator {extra['loss_generator']:.6f}, discriminator {extra['loss_discriminator']:.6f}, "
             f"{extra['num_replaced']} replaced, {extra['num_masked_same_as_original']} masked kept)"
             if head == "joint" else "")
          + "; float32 vs float64: " + ", ".join(f"{k} {v:.3g}" for k, v in obs.items()))


def cmd_check(a):
    runner, what, params, step = load_any(a.dir)
    batch = load_st(os.path.join(a.dir, "batch.safetensors"))
    exp = load_st(os.path.join(a.dir, "expected.safetensors"))
    out, pt = runner(params, batch, step, torch.float32)
    out64, _ = runner(params, batch, step, torch.float64)
    return report_check(f"{a.dir} ({what}{', ' + pt if pt else ''})", exp, out, out64, step["lr"])


def cmd_grad(a):  # same interface as `zerotrain grad`
    runner, _, params, step = load_any(a.model)
    if a.step:
        with open(a.step) as f:
            step = json.load(f)
    else:
        step = dict(STEP, steps=0)
    out, _ = runner(params, load_st(a.batch), step, torch.float64 if a.float64 else torch.float32)
    save_grad_output(a.out, out, bool(a.step))
    return 0


# ------------------------------------------------------------------------------------------------------ selftest

def tiny_config(head, **kw):
    c = {"architectures": [ARCH[head]], "model_type": "electra", "vocab_size": 110, "embedding_size": 6,
         "hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 12,
         "hidden_act": "gelu", "max_position_embeddings": 10, "type_vocab_size": 2, "layer_norm_eps": 1e-12,
         "pad_token_id": 0, "tie_word_embeddings": True}
    c.update(kw)
    return c


def cmd_selftest(a):
    fails = []

    def ok(cond, msg):
        print(("ok   " if cond else "FAIL ") + msg)
        if not cond:
            fails.append(msg)

    for ctr, key, want in PHILOX_KAT:
        ok(tuple(int(x) for x in philox4x32([ctr], [key])[0]) == want, "Philox4x32-10 known answer %s" % (ctr,))
    u = zerotrain_uniforms(42, 3, 5, 4096)
    ok(bool((u >= 0).all() and (u < 1).all() and abs(float(u.mean()) - 0.5) < 0.02), "uniforms in [0, 1), mean 1/2")
    lg = torch.randn(1, 1, 6).numpy()
    p_soft = torch.softmax(torch.tensor(lg[0, 0]), 0).numpy()
    cnt = np.bincount([zerotrain_samples(lg, np.zeros((1, 1), np.int64), 7, k)[0, 0] for k in range(3000)],
                      minlength=6)
    chi2 = float((((cnt - 3000 * p_soft) ** 2) / (3000 * p_soft)).sum())
    ok(chi2 < 20.5, "Gumbel-max samples follow the softmax (chi2 %.2f < 20.5, 5 dof, p 0.001)" % chi2)
    lab = np.array([[int(np.argmax(lg[0, 0]))]])  # the likeliest token as the original: never drawn with disallow
    dis = [zerotrain_samples(lg, lab, 7, k, disallow=True)[0, 0] for k in range(300)]
    tl = torch.tensor(lg).expand(300, 1, 6)
    tu = torch.rand(300, 1, 6, dtype=torch.float64).float()
    ok(lab[0, 0] not in dis and int((sample_replacements(tl, tu, 1.0, torch.tensor(lab).expand(300, 1)) ==
                                     int(lab[0, 0])).sum()) == 0,
       "disallow_correct: the original token is never sampled (zerotrain_samples and sample_replacements)")

    # 1. generator config rule
    small = {"hidden_size": 256, "num_hidden_layers": 12, "num_attention_heads": 4, "intermediate_size": 1024}
    base = {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072}
    key = lambda c: (c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"], c["intermediate_size"])  # noqa
    gs, gb = generator_config(small), generator_config(base, 0.33333)
    ok(key(gs) == (64, 12, 1, 256) and key(gb) == (256, 12, 4, 1024),
       f"generator_config: small 1/4 -> {key(gs)} (H, L, heads, I); base 0.33333 -> {key(gb)} "
       "(= google/electra-base-generator's config.json)")

    # 2. Gumbel sampling follows the softmax
    g = torch.Generator().manual_seed(5)
    lg = torch.tensor([1.0, 0.0, -1.0, 2.0, 0.5], dtype=torch.float64)
    draws = sample_replacements(lg.expand(40000, 5), torch.rand((40000, 5), generator=g, dtype=torch.float64))
    freq = torch.bincount(draws, minlength=5).double() / 40000
    dev = float((freq - torch.softmax(lg, 0)).abs().max())
    ok(dev < 0.01, f"sample_from_softmax: 40000 draws, max |frequency - softmax| {dev:.4f}")
    t2 = sample_replacements(lg.expand(40000, 5), torch.rand((40000, 5), generator=g, dtype=torch.float64), 2.0)
    dev2 = float((torch.bincount(t2, minlength=5).double() / 40000 - torch.softmax(lg / 2, 0)).abs().max())
    ok(dev2 < 0.01, f"temperature 2: max |frequency - softmax(logits / 2)| {dev2:.4f}")

    # tiny joint model and batch
    cd = tiny_config("disc")
    cg = generator_config(cd, 0.5)  # hidden 4, 1 head, I 16, embedding_size 6 (-> embeddings_project 6 -> 4)
    pre = dict(PRETRAIN_DEFAULTS)
    params = init_shapes(joint_shapes(cd, cg), g, {"electra.embeddings.word_embeddings.weight": 0})
    ids = torch.tensor([[101, 103, 105, 102, 107, 103, 102, 0], [101, 104, 103, 106, 103, 102, 108, 102]])
    labels = torch.tensor([[-100, 109, 105, -100, -100, 104, -100, -100],
                           [-100, -100, 107, -100, 105, -100, 108, -100]])
    bt = {"input_ids": ids, "attention_mask": (ids != 0).long(), "labels": labels,
          "token_type_ids": torch.tensor([[0, 0, 0, 0, 1, 1, 1, 0], [0, 0, 0, 0, 0, 0, 1, 1]]),
          "replacement_ids": torch.tensor([[-100, 104, 105, -100, -100, 109, -100, -100],
                                           [-100, -100, 104, -100, 105, -100, 101, -100]])}
    bn = {k: v.numpy() for k, v in bt.items()}
    s0 = dict(STEP, steps=0)
    oj, _ = run_joint(cd, cg, pre, params, bn, s0, torch.float64)

    # 3. discriminator input / labels
    exp_ids = torch.where(labels != -100, bt["replacement_ids"], ids).numpy()
    exp_lab = ((labels != -100) & (bt["replacement_ids"] != labels)).long().numpy()
    ok(np.array_equal(oj["aux.disc_input_ids"], exp_ids) and np.array_equal(oj["aux.disc_labels"], exp_lab)
       and oj["aux.disc_labels"][0, 2] == 0 and oj["aux.disc_labels"][1, 4] == 0 and oj["aux.disc_labels"].sum() == 4,
       f"discriminator input = originals with the replacements at masked positions; labels {exp_lab.tolist()} "
       "(masked positions whose replacement equals the original are 0: (0, 2) input kept, (1, 4) input [MASK])")

    # 4. joint loss = gen CE + 50 * disc BCE, each equal to the standalone HF heads on the right inputs
    Pg = {k[len(GEN_PREFIX):]: v for k, v in params.items() if k.startswith(GEN_PREFIX)}
    Pg.update({k: v for k, v in params.items() if k.startswith("electra.embeddings.")})
    og, _ = run(cg, Pg, {k: bn[k] for k in ("input_ids", "attention_mask", "token_type_ids", "labels")}, s0,
                torch.float64)
    Pd = {k: v for k, v in params.items() if not k.startswith(GEN_PREFIX)}
    od, _ = run(cd, Pd, {"input_ids": exp_ids, "attention_mask": bn["attention_mask"],
                         "token_type_ids": bn["token_type_ids"], "labels": exp_lab}, s0, torch.float64)
    lj, lgen, ldis = float(oj["loss"][0]), float(og["loss"][0]), float(od["loss"][0])
    ok(abs(lj - (lgen + 50 * ldis)) < 1e-12 * abs(lj),
       f"joint loss {lj:.6f} == ElectraForMaskedLM {lgen:.6f} + 50 x ElectraForPreTraining {ldis:.6f}")
    bce = torch.nn.functional.binary_cross_entropy_with_logits(
        torch.tensor(od["logits"])[bt["attention_mask"] == 1],
        torch.tensor(exp_lab)[bt["attention_mask"] == 1].double())
    ok(abs(float(bce) - ldis) < 1e-14, "discriminator loss = BCE-with-logits mean over attention_mask == 1 only")

    # 5. shared embeddings really shared: joint grads of the shared tensors == disc + gen grads of untied copies
    shared = [k for k in param_shapes(cg, "mlm") if k.startswith("electra.embeddings.")]
    pu = dict(params, **{GEN_PREFIX + k: params[k].copy() for k in shared})
    ou, _ = run_joint(cd, cg, pre, pu, bn, s0, torch.float64)
    same = all(np.allclose(oj["grad." + k], ou["grad." + k] + ou["grad." + GEN_PREFIX + k], rtol=1e-12, atol=1e-16)
               for k in shared)
    ok(same and abs(float(ou["loss"][0]) - lj) < 1e-14 and all(np.abs(ou["grad." + GEN_PREFIX + k]).max() > 0
                                                              for k in shared),
       f"shared {', '.join(k.split('.', 2)[2] for k in shared)}: joint grad == discriminator's + generator's "
       "(untied copies); both nonzero")
    # ... and the generator's output projection is the shared word table (ElectraForMaskedLM tie)
    cgu = dict(cg, tie_word_embeddings=False)
    w = "electra.embeddings.word_embeddings.weight"
    pgu = dict(Pg)
    pgu["generator_lm_head.weight"] = Pg[w].copy()
    ogu, _ = run(cgu, pgu, {k: bn[k] for k in ("input_ids", "attention_mask", "token_type_ids", "labels")}, s0,
                 torch.float64)
    ok(np.allclose(og["grad." + w], ogu["grad." + w] + ogu["grad.generator_lm_head.weight"], rtol=1e-12, atol=1e-16)
       and np.abs(ogu["grad.generator_lm_head.weight"]).max() > 0,
       "ElectraForMaskedLM: grad(word_embeddings) == untied grad(word_embeddings) + grad(generator_lm_head.weight)")

    # 6. sampling route == explicit replacement route
    bs = dict(bn)
    del bs["replacement_ids"]
    bs["gumbel_uniform"] = torch.rand((2, 8, cd["vocab_size"]), generator=g, dtype=torch.float64).numpy()
    o1, _ = run_joint(cd, cg, pre, params, bs, s0, torch.float64)
    bs2 = dict(bn, replacement_ids=np.where(bn["labels"] != -100, o1["aux.replacement_ids"], -100))
    o2, _ = run_joint(cd, cg, pre, params, bs2, s0, torch.float64)
    ref = sample_replacements(torch.tensor(o1["logits.generator"]), torch.tensor(bs["gumbel_uniform"]))
    ok(np.array_equal(o1["aux.replacement_ids"], np.where(bn["labels"] != -100, ref.numpy(), -100))
       and float(o1["loss"][0]) == float(o2["loss"][0]),
       f"gumbel_uniform sampling (ids {o1['aux.replacement_ids'][bn['labels'] != -100].tolist()}) == the same ids "
       "given as replacement_ids")

    # 7. gradients vs central finite differences (float64)
    cases = [("ElectraForPreTraining", tiny_config("disc", hidden_act="gelu_new"), "disc"),
             ("ElectraForMaskedLM", tiny_config("mlm"), "mlm"),
             ("ElectraForSequenceClassification", tiny_config("cls", embedding_size=8, id2label={"0": "a", "1": "b",
                                                                                                "2": "c"}), "cls"),
             ("joint pretraining step", None, "joint")]
    for name, ch, head in cases:
        if head == "joint":
            ph, fn = params, (lambda Q: joint_forward(Q, cd, cg, pre, to_torch_batch(bn, torch.float64))[0])
        else:
            ph = init_shapes(param_shapes(ch), g, {"electra.embeddings.word_embeddings.weight": 0})
            b = {"input_ids": ids, "attention_mask": bt["attention_mask"], "token_type_ids": bt["token_type_ids"]}
            b["labels"] = {"disc": torch.tensor(exp_lab), "mlm": labels, "cls": torch.tensor([2, 1])}[head]
            fn = (lambda Q, ch=ch, b=b: forward(Q, ch, b)[0])
        worst, wname, n = fd_check(fn, {k: v.astype(np.float64) for k, v in ph.items()}, g,
                                   skip_rows={"electra.embeddings.word_embeddings.weight": 0})
        ok(worst < 1e-7, f"{name}: autograd vs finite differences, {n} elements of {len(ph)} tensors, worst "
           f"|diff|/max|grad| {worst:.2e} ({wname})")
    print(f"selftest: {'FAILED' if fails else 'OK'} ({len(fails)} failed)")
    return 1 if fails else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make", help="write a random fixture folder")
    m.add_argument("--out", required=True)
    m.add_argument("--seed", type=int, required=True)
    m.add_argument("--head", choices=("disc", "mlm", "cls", "joint"), required=True,
                   help="disc: ElectraForPreTraining; mlm: ElectraForMaskedLM; cls: ElectraForSequenceClassification; "
                        "joint: generator + discriminator pretraining step (config.json = the discriminator)")
    for flag, typ, dflt, hlp in [
            ("--vocab", int, 512, "> 104 (BERT ids: [PAD] 0, [CLS] 101, [SEP] 102, [MASK] 103)"),
            ("--embedding", int, 32, "embedding_size"), ("--hidden", int, 64, None), ("--layers", int, 2, None),
            ("--heads", int, 4, None), ("--intermediate", int, 256, None), ("--max-pos", int, 64, None),
            ("--type-vocab", int, 2, None), ("--batch", int, 2, None), ("--seq", int, 16, None),
            ("--eps", float, 1e-12, "layer_norm_eps"),
            ("--gen-hidden", float, 0.25, "joint: generator_hidden_size (fraction of the discriminator's)"),
            ("--gen-layers", float, 1.0, "joint: generator_layers (fraction)"),
            ("--mask-prob", float, 0.15, "joint: mask_prob")]:
        m.add_argument(flag, type=typ, default=dflt, help=hlp)
    m.add_argument("--act", choices=sorted(ACT), default="gelu", help="hidden_act (ElectraConfig default gelu)")
    m.add_argument("--untied", action="store_true", help="tie_word_embeddings false")
    m.add_argument("--gen-own-embedding-layernorm", action="store_true",
                   help="joint: the generator keeps its own embedding LayerNorm (google's code shares it)")
    add_label_args(m, "cls: ")
    add_fixture_commands(sub)
    sub.add_parser("selftest", help="generator config rule, sampling, labels, loss, sharing, finite differences")
    sm = sub.add_parser("samples", help="check an output's aux.replacement_ids against its logits.generator")
    sm.add_argument("--out", required=True)
    sm.add_argument("--batch", required=True)
    sm.add_argument("--seed", type=int, default=42)
    sm.add_argument("--first-sample", type=int, default=0)
    sm.add_argument("--temperature", type=float, default=1.0)
    sm.add_argument("--disallow-correct", action="store_true", help="electra_pretraining.json's disallow_correct")
    a = ap.parse_args()
    return {"make": cmd_make, "check-fixture": cmd_check, "grad": cmd_grad, "selftest": cmd_selftest,
            "samples": cmd_samples}[a.cmd](a) or 0


if __name__ == "__main__":
    sys.exit(main())
