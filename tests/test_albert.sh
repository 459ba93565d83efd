#!/usr/bin/env bash
# test_albert.sh - ALBERT through the engine: one unit per layer group, used by each of its
# layers (the model's steps), on tiny configs with dropout 0.1 (embedding_size 32 below
# hidden_size 64, so embedding_hidden_mapping_in and the MLM head's map back to 32):
#   - AlbertForMaskedLM at N=2: stage 3 (optimizer and parameters offloaded) gives stage 0's
#     bits, with one layer shared by 4 layers and with 2 groups of 2 inner layers;
#   - stage 3 gathers the shared layer once per pass: its all-gather and reduce-scatter bytes
#     per step are those of the same model with one layer (the same units, each used once),
#     and what the schedule predicts, at N=2 and N=3, without and with prefetch;
#   - offload moves it once: with parameters and optimizer state on NVMe, the 4-layer model
#     reads and writes the 1-layer model's bytes per step (N=2);
#   - recomputation (full, selective; the long run also every-k:2, offloaded checkpoints and
#     the "auto" planner under a limit) gives the bits of keeping everything;
#   - bf16 stage 3 gives bf16 stage 0's bits at N=2;
#   - fine-tuning an AlbertForMaskedLM folder written by tests/ref/albert_ref.py into
#     AlbertForSequenceClassification: it learns, and predict's probabilities on the saved
#     folder are the reference's;
#   - albert-base-v2's config.json: its parameter count, and (long run) fine-tune + predict;
#   - AlbertForPreTraining: the sentence-order rows, and stage 3 against stage 0 at N=2.
# Usage: tests/test_albert.sh [zerotrain]   (FAMILY_LONG=1: stages 1-2, N=3, the rest)
set -u
ZT=${1:-build/zerotrain}
PY=/usr/bin/python3
SUITE=albert . "$(dirname "$0")/lib.sh"
MPI="timeout 300 mpirun --allow-run-as-root --oversubscribe"
FIX=${ZT_FIXTURES:-tests/fixtures}
LONG=${FAMILY_LONG:-0}

"$PY" - "$T" <<'EOF'
import json, random, sys
T = sys.argv[1]
def albert(L, G, I, arch="AlbertForMaskedLM", V=200):
    return {"architectures": [arch], "model_type": "albert", "vocab_size": V, "embedding_size": 32,
            "hidden_size": 64, "num_hidden_layers": L, "num_hidden_groups": G, "inner_group_num": I,
            "num_attention_heads": 4, "intermediate_size": 128, "hidden_act": "gelu_new",
            "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 64,
            "type_vocab_size": 2, "initializer_range": 0.02, "layer_norm_eps": 1e-12, "pad_token_id": 0,
            "bos_token_id": 2, "eos_token_id": 3, "classifier_dropout_prob": 0.1}
for name, L, G, I in (("albert", 4, 1, 1), ("albert1", 1, 1, 1), ("albertg", 4, 2, 2)):
    json.dump(albert(L, G, I), open("%s/%s.json" % (T, name), "w"))
A = "apple river green stone cloud forest bread candle garden silver".split()
B = "engine rocket copper signal market ticket window bottle hammer pocket".split()
F = "the a of and to in is was for on with as by at from this that it be are".split()
vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted(set(A + B + F))
vocab += ["[unused%d]" % i for i in range(120 - len(vocab))]
open(T + "/vocab.txt", "w").write("\n".join(vocab) + "\n")
rng = random.Random(7)
def row():
    toks = [rng.choice(F) for _ in range(rng.randint(4, 16))]
    a, b = rng.randint(0, 3), rng.randint(0, 3)
    while a == b:
        b = rng.randint(0, 3)
    for w, n in ((A, a), (B, b)):
        for _ in range(n):
            toks.insert(rng.randint(0, len(toks)), rng.choice(w))
    return " ".join(toks), "alpha" if a > b else "beta"
rows = [row() for _ in range(400)]
for name, part in (("train", rows[:320]), ("eval", rows[320:])):
    with open("%s/%s.jsonl" % (T, name), "w") as f:
        for t, l in part:
            f.write(json.dumps({"text": t, "label": l}) + "\n")
EOF

cfg() { zero_cfg "$@"; }; train() { zero_train "$@"; }; same() { same_weights "$@"; } # (lib.sh)
# LOG -> "reduce-scatter-bytes all-gather-bytes measured-ratio schedule-ratio"
traffic() {
    sed -n 's/^collectives per step: reduce-scatter \([0-9]*\) bytes, all-gather \([0-9]*\) bytes (\([0-9.]*\) x .*schedule \([0-9.]*\) x.*/\1 \2 \3 \4/p' "$T/$1.log" | head -n 1
}

OFF='"offload_optimizer": {"device": "cpu"}, "offload_param": {"device": "cpu"}'
NP='"stage3_param_persistence_threshold": 0, "stage3_prefetch_bucket_size": 0'
cfg s0 0 2; cfg s1 1 2; cfg s2 2 2; cfg s3 3 2 ", $OFF"
cfg n3s0 0 3; cfg n3s3 3 3 ", $OFF"
cfg t2 3 2 ", $NP"; cfg t3 3 3 ", $NP"; cfg t2pf 3 2
cfg bf0 0 2 "" '"bf16": {"enabled": true},'; cfg bf3 3 2 ", $OFF" '"bf16": {"enabled": true},'
for m in none full selective every-k:2; do
    cfg "rc${m%%:*}" 0 1 "" "\"zerotrain\": {\"recompute\": \"$m\"},"
done
cfg rcoffload 0 1 "" '"activation_checkpointing": {"cpu_checkpointing": true}, "zerotrain": {"recompute": "every-k:2"},'

# ---- stages: the shared layer's gradient gathered over its 4 uses, reduced once ---------------
STAGES="0 3"; [ "$LONG" = 1 ] && STAGES="0 1 2 3"
for st in $STAGES; do train "albert.s$st" 2 "s$st" albert || bad "albert N=2 stage $st failed"; done
for st in $STAGES; do
    [ "$st" = 0 ] && continue
    same albert.s0 "albert.s$st" && ok || bad "ALBERT: N=2 stage $st differs from stage 0"
done
if grep -q '"num_hidden_groups": 1' "$T/albert.s0/config.json" && grep -q AlbertForMaskedLM "$T/albert.s0/config.json" &&
   "$PY" -c 'import sys; sys.path.insert(0, "tests/ref"); from compare import load_st; t = load_st(sys.argv[1])
assert "albert.encoder.albert_layer_groups.0.albert_layers.0.ffn.weight" in t, sorted(t)
assert not any("albert_layer_groups.1" in k or "albert_layers.1" in k for k in t), sorted(t)
assert t["albert.encoder.embedding_hidden_mapping_in.weight"].shape == (64, 32)
assert t["predictions.dense.weight"].shape == (32, 64) and "predictions.decoder.weight" not in t' "$T/albert.s0/model.safetensors"
then ok; else bad "ALBERT: the saved folder's config or tensors"; fi
train albertg.s0 2 s0 albertg && train albertg.s3 2 s3 albertg || bad "albert 2 groups x 2 inner N=2 failed"
same albertg.s0 albertg.s3 && ok || bad "ALBERT, 2 groups of 2 inner layers: N=2 stage 3 differs from stage 0"
if [ "$LONG" = 1 ]; then
    for m in albert albertg; do
        train "$m.n3s0" 3 n3s0 "$m" && train "$m.n3s3" 3 n3s3 "$m" || bad "$m N=3 failed"
        same "$m.n3s0" "$m.n3s3" && ok || bad "$m: N=3 stage 3 differs from stage 0"
    done
fi

# ---- stage 3's traffic: the shared layer gathered once per pass -----------------------------
# The formula: each unit is gathered once per run of uses in a row, so the 4-layer model moves
# the bytes of the same model with 1 layer (the same units: embeddings, the layer group, the
# head). Were it gathered per use, the 4-layer model would move 3 more layer units each pass.
for v in t2:2 t3:3 t2pf:2; do
    IFS=: read -r c np <<<"$v"
    train "albert.$c" "$np" "$c" albert && train "albert1.$c" "$np" "$c" albert1 || bad "albert traffic runs $c failed"
    read -r rs4 ag4 got4 want4 <<<"$(traffic "albert.$c")"
    read -r rs1 ag1 got1 want1 <<<"$(traffic "albert1.$c")"
    if [ -n "${ag4:-}" ] && [ "$ag4" = "${ag1:-}" ] && [ "$rs4" = "$rs1" ] && [ "$got4" = "$want4" ] && [ "$got1" = "$want1" ]; then ok
    else bad "ALBERT stage 3 traffic ($c, N=$np): 4 layers all-gather ${ag4:-?} reduce-scatter ${rs4:-?} (${got4:-?} x, schedule ${want4:-?} x); 1 layer ${ag1:-?} / ${rs1:-?}"; fi
done

# ---- offload moves the shared layer once: NVMe bytes per step of 4 layers = 1 layer's --------------
mkdir -p "$T/nv"
cfg nvoff 3 2 ', "stage3_param_persistence_threshold": 0, "offload_optimizer": {"device": "nvme", "nvme_path": "'"$T/nv"'"}, "offload_param": {"device": "nvme", "buffer_count": 3, "nvme_path": "'"$T/nv"'"}'
for m in albert albert1; do
    train "$m.nv" 2 nvoff "$m" --warmup 1 --summary "$T/$m.nv.sum.json" || bad "$m NVMe offload run failed"
done
if "$PY" - "$T/albert.nv.sum.json" "$T/albert1.nv.sum.json" <<'EOF_PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
r, w = a["nvme_read_bytes_per_step"], a["nvme_write_bytes_per_step"]
print("ALBERT NVMe bytes per step (parameters and optimizer offloaded, N=2): 4 layers read %d written %d, 1 layer read %d written %d"
      % (r, w, b["nvme_read_bytes_per_step"], b["nvme_write_bytes_per_step"]))
sys.exit(0 if r > 0 and w > 0 and (r, w) == (b["nvme_read_bytes_per_step"], b["nvme_write_bytes_per_step"]) else 1)
EOF_PY
then ok; else bad "ALBERT: NVMe offload moves the 4-layer model's shared layer more than once a step"; fi

# ---- recomputation keeps the bits ---------------------------------------------------------------
RC="full selective"; [ "$LONG" = 1 ] && RC="full selective every-k offload"
train albert.rcnone 1 rcnone albert || bad "albert recompute none failed"
for n in $RC; do
    train "albert.rc$n" 1 "rc$n" albert || bad "albert recompute $n failed"
    same albert.rcnone "albert.rc$n" && ok || bad "ALBERT: recompute $n differs from none"
done
if [ "$LONG" = 1 ]; then # the planner: per use, memory and FLOPs; under a limit it recomputes some
    plan() { "$ZT" train --model "$T/albert.json" --data synthetic:5 --config "$T/$2.json" --seq-len 64 \
                 --steps 2 --threads 1 --save-model "$T/$1" >"$T/$1.log" 2>&1; }
    zero_plan_cfg pbig 8GiB; plan albert.pbig pbig || bad "albert auto (8 GiB) failed"
    peak=$(sed -n 's/.*= \([0-9]*\) MiB predicted peak.*/\1/p' "$T/albert.pbig.log")
    acts=$(sed -n 's/^recompute plan.*predicted activations \([0-9.]*\) MiB.*/\1/p' "$T/albert.pbig.log")
    zero_plan_cfg plim "$(awk -v p="${peak:-0}" -v a="${acts:-0}" 'BEGIN { printf "%d", p - 0.4 * a }')MiB"
    plan albert.plim plim || bad "albert auto under a limit failed"
    pct=$(sed -n 's/^recompute plan.*recomputed FLOPs \([0-9.]*\)% .*/\1/p' "$T/albert.plim.log")
    if [ -n "$pct" ] && awk -v c="$pct" 'BEGIN { exit !(c > 0) }' && same albert.pbig albert.plim; then ok
    else bad "ALBERT: auto under a limit recomputed ${pct:-?}% or its bits differ"; grep -h "plan\|error" "$T/albert.plim.log"; fi
fi

# ---- bf16 ---------------------------------------------------------------------------------------
train albert.bf0 2 bf0 albert && train albert.bf3 2 bf3 albert || bad "albert bf16 runs failed"
same albert.bf0 albert.bf3 && ok || bad "ALBERT: bf16 stage 3 differs from stage 0"

# ---- fine-tuning: it learns; an AlbertForMaskedLM folder becomes a classifier; predict ------------
# From the config (HF's initialisation) with the test's vocab.txt, 240 steps: 0.65 of the 80
# evaluation rows is 2.7 standard deviations above chance (0.76 here). Then albert_ref.py's
# AlbertForMaskedLM folder (Hugging Face's names; 1 group, 1 inner layer, 4 layers,
# embedding_size 32; its random weights are too large to learn from in 240 steps) with the
# AlbertTokenizer fixture's spiece.model beside it and no tokenizer_config.json (as
# albert-base-v2 on the hub), fine-tuned for 4 steps: the saved AlbertForSequenceClassification
# folder carries the tokenizer, and its predictions are the reference's on ids from
# tests/ref/spm_ref.py's AlbertRef.
"$PY" -c 'import json,sys; c=json.load(open(sys.argv[1])); c["vocab_size"]=120
c["architectures"]=["AlbertForSequenceClassification"]; json.dump(c, open(sys.argv[2], "w"))' "$T/albert.json" "$T/acls.json"
if "$ZT" finetune --model "$T/acls.json" --tokenizer "wordpiece:$T/vocab.txt" --task classify --train "$T/train.jsonl" \
       --eval "$T/eval.jsonl" --seq-len 40 --config "$T/s0.json" --steps 240 --eval-every 240 --metrics "$T/ac.ft.jsonl" \
       >"$T/ac.ft.log" 2>&1 &&
   "$PY" -c 'import json,sys; sys.exit(0 if json.loads(open(sys.argv[1]).read().splitlines()[-1])["eval_accuracy"] >= 0.65 else 1)' "$T/ac.ft.jsonl"; then ok
else bad "ALBERT: fine-tuning failed or did not learn"; tail -n 3 "$T/ac.ft.log" "$T/ac.ft.jsonl"; fi
if "$PY" tests/ref/albert_ref.py make --out "$T/af" --seed 12 --head mlm --vocab 1000 --embedding 32 --hidden 64 \
       --layers 4 --groups 1 --inner 1 --heads 4 --intermediate 128 --max-pos 64 >"$T/af.make.log" 2>&1; then
    sed -i -E 's/"(hidden|attention_probs)_dropout_prob": 0.0/"\1_dropout_prob": 0.1/' "$T/af/config.json"
    cp "$FIX/tokenizers/albert/spiece.model" "$FIX/tokenizers/albert/spiece.vocab" "$T/af/"
    "$ZT" finetune --model "$T/af" --task classify --train "$T/train.jsonl" --seq-len 40 --config "$T/s0.json" \
        --steps 4 --save-model "$T/af.ft" >"$T/af.ft.log" 2>&1 || bad "ALBERT: fine-tuning the folder failed"
    if "$ZT" predict --model "$T/af.ft" --task classify --input "$T/eval.jsonl" --output "$T/af.pred" \
           >"$T/af.pred.log" 2>&1 && "$PY" - "$T" <<'EOF_PY'
import json, sys
import numpy as np, torch
sys.path.insert(0, "tests/ref")
import albert_ref as R
from compare import load_st
from spm_ref import AlbertRef, SpmModel
T = sys.argv[1]
d = T + "/af.ft"
c = json.load(open(d + "/config.json"))
assert c["model_type"] == "albert" and c["architectures"] == ["AlbertForSequenceClassification"], c
assert c["embedding_size"] == 32 and c["num_hidden_groups"] == 1 and c["id2label"] == {"0": "alpha", "1": "beta"}, c
assert json.load(open(d + "/tokenizer_config.json"))["tokenizer_class"] == "AlbertTokenizer"
P = {k: torch.tensor(v) for k, v in load_st(d + "/model.safetensors").items()}
assert "albert.pooler.weight" in P and not any(k.startswith("predictions.") for k in P), sorted(P)
tok = AlbertRef(SpmModel(d + "/spiece.model", T + "/af/spiece.vocab"))
rows = [json.loads(l) for l in open(T + "/eval.jsonl")]
got = [json.loads(l) for l in open(T + "/af.pred")]
assert len(got) == len(rows)
tok.sp.prefetch([tok.preprocess_text(r["text"].lower()) for r in rows])
worst = 0.0
for r, g in zip(rows, got):
    x = torch.tensor([tok.encode(r["text"], max_length=40)[0]])
    bt = {"input_ids": x, "attention_mask": torch.ones_like(x), "labels": torch.zeros(1, dtype=torch.long)}
    _, out, _, _ = R.forward(P, c, bt)
    p = torch.softmax(out["logits"].double(), -1)[0].numpy()
    names = [c["id2label"][str(k)] for k in range(len(p))]
    assert g["label"] == names[int(np.argmax(p))], (g, p)
    worst = max(worst, max(abs(g["scores"][n] - p[k]) for k, n in enumerate(names)))
assert worst < 2e-5, worst
print("ALBERT predict vs reference: worst |p - p_ref| %.3g over %d rows" % (worst, len(rows)))
EOF_PY
    then ok; else bad "ALBERT: the saved folder or predict's probabilities differ from the reference"; tail -n 3 "$T/af.pred.log"; fi
else bad "ALBERT: albert_ref.py make failed"; tail -n 3 "$T/af.make.log"; fi

# ---- albert-base-v2's config.json ----------------------------------------------------------------
# as AlbertForMaskedLM 11221680 parameters (hf_configs/SOURCES.md), by zerotrain and by the
# reference's shapes, with no unknown field; the long run fine-tunes it as a 2-label classifier
# (the 12 uses of its one layer) and predicts against the reference
acfg=$FIX/hf_configs/albert-base-v2.json
got=$("$ZT" estimate --model "$acfg" --ranks 1 --stage 0 2>&1 | sed -n 's/^[^:]*: \([0-9]*\) parameters.*/\1/p')
want=$("$PY" -c 'import json, math, sys; sys.path.insert(0, "tests/ref"); import albert_ref as R
print(sum(math.prod(s) for s in R.param_shapes(json.load(open(sys.argv[1]))).values()))' "$acfg")
if [ "$got" = 11221680 ] && [ "$want" = 11221680 ] && ! "$ZT" estimate --model "$acfg" --ranks 1 --stage 0 2>&1 | grep -q "no field"; then ok
else bad "albert-base-v2: $got parameters (reference $want, 11221680)"; fi
if [ "$LONG" = 1 ]; then
    mkdir -p "$T/ab"
    sed 's/"vocab_size": 30000/"vocab_size": 120/' "$acfg" >"$T/ab/config.json"
    cp "$T/vocab.txt" "$T/ab/vocab.txt"
    if "$ZT" finetune --model "$T/ab/config.json" --tokenizer "wordpiece:$T/vocab.txt" --task classify \
           --train "$T/train.jsonl" --seq-len 24 --config "$T/s0.json" --steps 2 --save-model "$T/ab.cls" \
           >"$T/ab.cls.log" 2>&1 &&
       "$ZT" predict --model "$T/ab.cls" --task classify --input "$T/eval.jsonl" --output "$T/ab.pred" \
           >"$T/ab.pred.log" 2>&1 && "$PY" - "$T" <<'EOF_PY'
import json, sys
import torch
sys.path.insert(0, "tests/ref")
import albert_ref as R
from compare import load_st
from wordpiece_ref import BertRef
T = sys.argv[1]
d = T + "/ab.cls"
c = json.load(open(d + "/config.json"))
assert c["architectures"] == ["AlbertForSequenceClassification"] and c["num_hidden_layers"] == 12, c
P = {k: torch.tensor(v) for k, v in load_st(d + "/model.safetensors").items()}
tok = BertRef(T + "/vocab.txt", True)
rows = [json.loads(l) for l in open(T + "/eval.jsonl")][:20]
got = [json.loads(l) for l in open(T + "/ab.pred")][:20]
worst = 0.0
for r, g in zip(rows, got):
    x = torch.tensor([tok.encode(r["text"], max_length=512)[0]])
    _, out, _, _ = R.forward(P, c, {"input_ids": x, "attention_mask": torch.ones_like(x), "labels": torch.zeros(1, dtype=torch.long)})
    p = torch.softmax(out["logits"].double(), -1)[0].numpy()
    worst = max(worst, max(abs(g["scores"][c["id2label"][str(k)]] - p[k]) for k in range(len(p))))
assert worst < 2e-5, worst
print("albert-base-v2: predict vs reference worst |p - p_ref| %.3g over %d rows" % (worst, len(rows)))
EOF_PY
    then ok; else bad "albert-base-v2: finetune, predict or the reference's probabilities"; tail -n 3 "$T/ab.cls.log" "$T/ab.pred.log"; fi
fi

# ---- AlbertForPreTraining: masked LM + sentence-order prediction ------------------------------
# The SOP rows (zt_mlm_source_fill_sop, through the library): [CLS] A [SEP] B [SEP] with token
# types 0 up to the first [SEP] and 1 after it; un-swapped by its label and unmasked by its
# labels, each row's A + B are the first seq_len - 3 tokens of the masked-LM row of the same
# sample (the same stream, the same masks, the specials never masked); both labels occur, about
# half each (0.5 +- 0.1 over 400 rows is 4 standard deviations). Then AlbertForPreTraining trains
# at N=2: stage 3 gives stage 0's bits and the folder keeps its pooler and sop_classifier.
if "$PY" - <<'EOF_PY'
import ctypes
lib = ctypes.CDLL("build/libzerotrain.so")
V, T, B = 200, 24, 400
s = ctypes.c_void_p()
assert lib.zt_mlm_source_create(None, V, T, ctypes.c_float(0.15), 9, ctypes.byref(s)) == 0
buf = lambda n: (ctypes.c_int64 * n)()
ids, am, tt, lab, sop = buf(B * T), buf(B * T), buf(B * T), buf(B * T), buf(B)
mids, mam, mtt, mlab = buf(B * T), buf(B * T), buf(B * T), buf(B * T)
assert lib.zt_mlm_source_fill_sop(s, ctypes.c_uint64(1000), B, ids, am, tt, lab, sop) == 0
assert lib.zt_mlm_source_fill(s, ctypes.c_uint64(1000), B, mids, mam, mtt, mlab) == 0
for b in range(B):
    r = [lab[b * T + t] if lab[b * T + t] != -100 else ids[b * T + t] for t in range(T)]
    m = [mlab[b * T + t] if mlab[b * T + t] != -100 else mids[b * T + t] for t in range(T)]
    assert r[0] == 2 and r[-1] == 3 and r.count(3) == 2 and r.count(2) == 1, r
    k = r.index(3)
    assert [tt[b * T + t] for t in range(T)] == [0] * (k + 1) + [1] * (T - k - 1)
    assert all(lab[b * T + t] == -100 for t in (0, k, T - 1)) and 1 < k < T - 2
    a, c = r[1:k], r[k + 1:T - 1]
    assert sop[b] in (0, 1)
    stream = a + c if sop[b] == 0 else c + a
    assert stream == m[1:T - 2], (b, sop[b], stream, m)
ones = sum(sop[b] for b in range(B)) / B
assert 0.4 <= ones <= 0.6, ones
assert lib.zt_mlm_source_fill_sop(s, ctypes.c_uint64(1000), 1, ids, am, tt, lab, None) != 0
s4 = ctypes.c_void_p()
assert lib.zt_mlm_source_create(None, V, 4, ctypes.c_float(0.15), 9, ctypes.byref(s4)) == 0
assert lib.zt_mlm_source_fill_sop(s4, ctypes.c_uint64(0), 1, ids, am, tt, lab, sop) != 0
lib.zt_mlm_source_destroy(s4)
lib.zt_mlm_source_destroy(s)
print("SOP rows: %d checked, %.3f swapped" % (B, ones))
EOF_PY
then ok; else bad "ALBERT: the sentence-order rows"; fi
"$PY" -c 'import json,sys; c=json.load(open(sys.argv[1])); c["architectures"]=["AlbertForPreTraining"]
json.dump(c, open(sys.argv[2], "w"))' "$T/albert.json" "$T/apre.json"
train apre.s0 2 s0 apre && train apre.s3 2 s3 apre || bad "AlbertForPreTraining N=2 runs failed"
if same apre.s0 apre.s3 && grep -q AlbertForPreTraining "$T/apre.s0/config.json" &&
   grep -q "plus ln 2 for the sentence order" "$T/apre.s0.log" &&
   "$PY" -c 'import sys; sys.path.insert(0, "tests/ref"); from compare import load_st; t = load_st(sys.argv[1])
assert t["sop_classifier.classifier.weight"].shape == (2, 64) and t["albert.pooler.weight"].shape == (64, 64)' \
       "$T/apre.s0/model.safetensors"; then ok
else bad "AlbertForPreTraining: stage 3 differs from stage 0 at N=2, or its folder"; tail -n 3 "$T/apre.s0.log"; fi
# prepare-data with AlbertTokenizer (the fixture's spiece.model beside a config.json of model_type
# albert), then AlbertForPreTraining on it: the saved folder carries spiece.model and the class
mkdir -p "$T/atok"
cp "$FIX/tokenizers/albert/spiece.model" "$T/atok/"
"$PY" -c 'import json,sys; c=json.load(open(sys.argv[1])); c["vocab_size"]=1000; json.dump(c, open(sys.argv[2], "w"))' \
    "$T/apre.json" "$T/atok/config.json"
cut -c1-400 /usr/share/doc/python3.11/html/_sources/tutorial/*.txt >"$T/corpus.txt" 2>/dev/null ||
    "$PY" -c 'import sys; open(sys.argv[1], "w").write(("the quick brown fox jumps over the lazy dog. " * 40 + "\n") * 50)' "$T/corpus.txt"
if "$ZT" prepare-data --input "$T/corpus.txt" --tokenizer "$T/atok" --out "$T/adata" >"$T/aprep.log" 2>&1 &&
   grep -q AlbertTokenizer "$T/aprep.log" &&
   "$ZT" train --model "$T/atok/config.json" --data "$T/adata" --config "$T/s0.json" --seq-len 32 --steps 2 \
       --save-model "$T/apre.data" >"$T/apre.data.log" 2>&1 &&
   [ -f "$T/apre.data/spiece.model" ] && grep -q '"tokenizer_class": "AlbertTokenizer"' "$T/apre.data/tokenizer_config.json"
then ok; else bad "ALBERT: prepare-data with AlbertTokenizer and AlbertForPreTraining on it"; tail -n 3 "$T/aprep.log" "$T/apre.data.log"; fi
refuse "AlbertForPreTraining seq-len 4" "need --seq-len >= 5" "$T/bad.out" \
    "$ZT" train --model "$T/apre.json" --data synthetic --steps 1 --seq-len 4 --save-model "$T/bad.out"

# ---- refusals ------------------------------------------------------------------------------------
sed 's/"num_hidden_groups": 1/"num_hidden_groups": 5/' "$T/albert.json" >"$T/bad_groups.json"
refuse "ALBERT groups > layers" "num_hidden_groups 5" "$T/bad.out" \
    "$ZT" train --model "$T/bad_groups.json" --data synthetic --steps 1 --seq-len 8 --save-model "$T/bad.out"
sed 's/"max_position_embeddings": 64/"max_position_embeddings": 64, "position_embedding_type": "relative_key"/' \
    "$T/albert.json" >"$T/bad_rel.json"
refuse "ALBERT relative positions" 'computes "absolute" positions only' "$T/bad.out" \
    "$ZT" train --model "$T/bad_rel.json" --data synthetic --steps 1 --seq-len 8 --save-model "$T/bad.out"

echo "albert: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
