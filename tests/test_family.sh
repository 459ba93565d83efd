#!/usr/bin/env bash
# test_family.sh - RoBERTa, DistilBERT, ELECTRA's classifier and BERT with relative position scores
# (position_embedding_type relative_key_query) through the engine, as BERT goes (test_zero.sh,
# test_recompute.sh, test_finetune.sh), on tiny configs with dropout on:
#   - masked-LM training at N=2, stages 0-3 bit-identical (stage 3 with optimizer and parameter
#     offload), and stage 3's traffic equal to the schedule's formula;
#   - recomputation (full, selective, every-k:2, offloaded checkpoints, and the "auto" planner
#     under a memory limit) bit-identical to keeping everything;
#   - bf16 and fp16: stages 0 and 3 bit-identical at N=2;
#   - fine-tuning a classifier from a Hugging Face folder with its own tokenizer (RoBERTa: the
#     byte-level BPE fixture; DistilBERT: vocab.txt with DistilBertTokenizer): it learns, the
#     folder it saves is the family's ...ForSequenceClassification with its tokenizer files,
#     and predict's probabilities match tests/ref/family_ref.py on ids made by the independent
#     tokenizers (tests/ref/bpe_ref.py, wordpiece_ref.py);
#   - RoBERTa's fill-mask at <mask> against the reference;
#   - prepare-data with RoBERTa's tokenizer, then masked-LM training on it.
# Usage: tests/test_family.sh [zerotrain]   (FAMILY_LONG=1: N=3 stages 0-3, NVMe offload)
set -u
ZT=${1:-build/zerotrain}
PY=/usr/bin/python3
SUITE=family . "$(dirname "$0")/lib.sh"
MPI="timeout 300 mpirun --allow-run-as-root --oversubscribe"
FIX=${ZT_FIXTURES:-tests/fixtures}
BPE=$FIX/tokenizers/roberta

# ---- models and data ---------------------------------------------------------------------------
"$PY" - "$T" "$BPE" <<'EOF'
import json, random, sys
T, BPE = sys.argv[1], sys.argv[2]
V = len(json.load(open(BPE + "/vocab.json")))
json.dump({"architectures": ["RobertaForMaskedLM"], "model_type": "roberta", "vocab_size": V,
           "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
           "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
           "max_position_embeddings": 66, "type_vocab_size": 1, "initializer_range": 0.02,
           "layer_norm_eps": 1e-05, "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2,
           "position_embedding_type": "absolute", "use_cache": True, "classifier_dropout": None},
          open(T + "/roberta.json", "w"))
A = "apple river green stone cloud forest bread candle garden silver".split()
B = "engine rocket copper signal market ticket window bottle hammer pocket".split()
F = "the a of and to in is was for on with as by at from this that it be are".split()
words = sorted(set(A + B + F))
vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words
open(T + "/vocab.txt", "w").write("\n".join(vocab) + "\n")
json.dump({"architectures": ["DistilBertForMaskedLM"], "model_type": "distilbert", "vocab_size": len(vocab),
           "dim": 64, "n_layers": 2, "n_heads": 4, "hidden_dim": 128, "activation": "gelu", "dropout": 0.1,
           "attention_dropout": 0.1, "max_position_embeddings": 64, "sinusoidal_pos_embds": False,
           "initializer_range": 0.02, "qa_dropout": 0.1, "seq_classif_dropout": 0.2, "pad_token_id": 0,
           "tie_weights_": True}, open(T + "/distil.json", "w"))
rng = random.Random(7)
def row():
    n = rng.randint(4, 16)
    toks = [rng.choice(F) for _ in range(n)]
    a, b = rng.randint(0, 3), rng.randint(0, 3)
    while a == b:
        b = rng.randint(0, 3)
    for _ in range(a):
        toks.insert(rng.randint(0, len(toks)), rng.choice(A))
    for _ in range(b):
        toks.insert(rng.randint(0, len(toks)), rng.choice(B))
    return " ".join(toks), "alpha" if a > b else "beta"
rows = [row() for _ in range(400)]
for name, part in (("train", rows[:320]), ("eval", rows[320:])):
    with open("%s/%s.jsonl" % (T, name), "w") as f:
        for t, l in part:
            f.write(json.dumps({"text": t, "label": l}) + "\n")
with open(T + "/corpus.txt", "w") as f:
    for t, _ in rows:
        f.write(t + "\n")
EOF

cfg() { zero_cfg "$@"; }; train() { zero_train "$@"; }; same() { same_weights "$@"; } # (lib.sh)
traffic_ok() { # LOG: measured collective bytes equal to the schedule's formula
    local got want
    got=$(grep -o '([0-9.]* x' "$T/$1.log" | tr -d '( x'); want=$(grep -o 'schedule [0-9.]* x' "$T/$1.log" | tr -d 'schedule x')
    [ -n "$got" ] && [ "$got" = "$want" ]
}

OFF='"offload_optimizer": {"device": "cpu"}, "offload_param": {"device": "cpu"}'
cfg s0 0 2; cfg s1 1 2; cfg s2 2 2; cfg s3 3 2 ", $OFF"
cfg n3s0 0 3; cfg n3s1 1 3; cfg n3s2 2 3; cfg n3s3 3 3 ", $OFF"
mkdir -p "$T/nv"
cfg n3snv 3 3 ", \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"$T/nv\"}, \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"$T/nv\"}"
cfg bf0 0 2 "" '"bf16": {"enabled": true},'; cfg bf3 3 2 ", $OFF" '"bf16": {"enabled": true},'
cfg fp0 0 2 "" '"fp16": {"enabled": true},'; cfg fp3 3 2 ", $OFF" '"fp16": {"enabled": true},'
for m in none full selective every-k:2; do
    n=${m%%:*}
    cfg rc$n 0 1 "" "\"zerotrain\": {\"recompute\": \"$m\"},"
done
cfg rcoffload 0 1 "" '"activation_checkpointing": {"cpu_checkpointing": true}, "zerotrain": {"recompute": "every-k:2"},'
plan_cfg() { # NAME LIMIT: the "auto" planner, placement pinned (stage 3, everything on NVMe)
    echo "{\"train_batch_size\": 16, \"train_micro_batch_size_per_gpu\": 16, \"steps_per_print\": 1,
           \"zero_optimization\": {\"stage\": 3, \"stage3_param_persistence_threshold\": 0,
             \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"$T/nv\"},
             \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"$T/nv\"}},
           \"zerotrain\": {\"recompute\": \"auto\", \"memory_limit\": \"$2\", \"offload_gradients\": true},
           \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-3}}}" >"$T/$1.json"
}
plan_cfg pbig 8GiB

# BERT with relative position scores (relative_key_query: both terms), dropout on
sed -e 's/"position_embedding_type": "absolute"/"position_embedding_type": "relative_key_query"/' \
    -e 's/"hidden_dropout_prob": 0.0/"hidden_dropout_prob": 0.1/' \
    -e 's/"attention_probs_dropout_prob": 0.0/"attention_probs_dropout_prob": 0.1/' \
    "$FIX/bert-tiny/config.json" >"$T/relkq.json"
grep -q relative_key_query "$T/relkq.json" || bad "the relative-position config was not made"
# ELECTRA's generator (ElectraForMaskedLM): embedding_size 32 below hidden_size 64, so
# embeddings_project and the head's map back to 32 for the tied decoder
"$PY" -c 'import json,sys; json.dump({"architectures": ["ElectraForMaskedLM"], "model_type": "electra",
 "vocab_size": 200, "embedding_size": 32, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
 "intermediate_size": 128, "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
 "max_position_embeddings": 64, "type_vocab_size": 2, "initializer_range": 0.02, "layer_norm_eps": 1e-12,
 "pad_token_id": 0}, open(sys.argv[1], "w"))' "$T/electra.json"
# every path for each family in the long run; make test: ELECTRA's stages 0 and 3 at N=2
# (offloaded), and bf16 at stage 3, below
FAMS="roberta distil relkq"; [ "${FAMILY_LONG:-0}" = 1 ] && FAMS="$FAMS electra"
if [ "${FAMILY_LONG:-0}" != 1 ]; then
    for c in s0 s3 bf3; do train "electra.$c" 2 "$c" electra || bad "electra N=2 $c failed"; done
    same electra.s0 electra.s3 && [ -f "$T/electra.bf3/model.safetensors" ] \
        && grep -q '"embedding_size": 32' "$T/electra.s0/config.json" \
        && grep -q ElectraForMaskedLM "$T/electra.s0/config.json" && ok \
        || bad "ELECTRA's generator: stage 3 differs from stage 0, bf16 failed, or its folder"
fi
for fam in $FAMS; do
    # make test runs every check on RoBERTa and one of each kind on the others (stages 0 and 3,
    # full recomputation, bf16); the long run all of them on every family
    STS="0 1 2 3" RCS="full selective every-k offload" full=1
    if [ "${FAMILY_LONG:-0}" != 1 ] && [ "$fam" != roberta ]; then STS="0 3" RCS="full" full=0; fi
    # ---- stages 0-3 at N=2 (N=3 and NVMe in the long run) -----------------------------------
    for st in $STS; do train "$fam.s$st" 2 "s$st" "$fam" || bad "$fam N=2 stage $st failed"; done
    for st in ${STS#0 }; do
        same "$fam.s0" "$fam.s$st" && ok || bad "$fam: N=2 stage $st differs from stage 0"
    done
    traffic_ok "$fam.s3" && ok || bad "$fam: stage 3 traffic differs from the schedule's formula"
    if [ "${FAMILY_LONG:-0}" = 1 ]; then
        for st in 0 1 2 3 nv; do train "$fam.n3s$st" 3 "n3s$st" "$fam" || bad "$fam N=3 $st failed"; done
        for st in 1 2 3 nv; do
            same "$fam.n3s0" "$fam.n3s$st" && ok || bad "$fam: N=3 stage $st differs from stage 0"
        done
        traffic_ok "$fam.n3s3" && ok || bad "$fam: N=3 stage 3 traffic differs from the schedule's formula"
    fi
    # ---- recomputation keeps the bits ----------------------------------------------------------
    for n in none $RCS; do train "$fam.rc$n" 1 "rc$n" "$fam" || bad "$fam recompute $n failed"; done
    for n in $RCS; do
        same "$fam.rcnone" "$fam.rc$n" && ok || bad "$fam: recompute $n differs from none"
    done
    if [ "$full" = 1 ]; then # the planner: room to spare keeps everything; a limit 40% of the
        # activations below that peak recomputes some, with the same bits
        "$PY" -c 'import json,sys; c=json.load(open(sys.argv[1]))
c["n_layers" if "n_layers" in c else "num_hidden_layers"] = 6; json.dump(c, open(sys.argv[2], "w"))' \
            "$T/$fam.json" "$T/$fam.deep.json"
        plan() { # OUT CONFIG: 6 layers, a 16 x 64 micro-batch: activations weigh
            "$ZT" train --model "$T/$fam.deep.json" --data synthetic:5 --config "$T/$2.json" --seq-len 64 \
                --steps 2 --threads 1 --save-model "$T/$1" >"$T/$1.log" 2>&1
        }
        plan "$fam.pbig" pbig || bad "$fam auto (8 GiB) failed"
        peak=$(sed -n 's/.*= \([0-9]*\) MiB predicted peak.*/\1/p' "$T/$fam.pbig.log")
        acts=$(sed -n 's/^recompute plan.*predicted activations \([0-9.]*\) MiB.*/\1/p' "$T/$fam.pbig.log")
        plan_cfg "p$fam" "$(awk -v p="${peak:-0}" -v a="${acts:-0}" 'BEGIN { printf "%d", p - 0.4 * a }')MiB"
        plan "$fam.plim" "p$fam" || bad "$fam auto under a limit failed"
        pct=$(sed -n 's/^recompute plan.*recomputed FLOPs \([0-9.]*\)% .*/\1/p' "$T/$fam.plim.log")
        if [ -n "$pct" ] && awk -v c="$pct" 'BEGIN { exit !(c > 0) }' && same "$fam.pbig" "$fam.plim"; then ok
        else bad "$fam: auto under a limit recomputed ${pct:-?}% or its bits differ"; grep -h "plan\|error" "$T/$fam.plim.log"; fi
    fi
    # ---- bf16: stages 0 and 3 the same bits, a finite loss -------------------------------------
    train "$fam.bf0" 2 bf0 "$fam" && train "$fam.bf3" 2 bf3 "$fam" || bad "$fam bf16 runs failed"
    same "$fam.bf0" "$fam.bf3" && ok || bad "$fam: bf16 stage 3 differs from stage 0"
    [ "$full" = 1 ] || continue
    train "$fam.fp0" 2 fp0 "$fam" && train "$fam.fp3" 2 fp3 "$fam" || bad "$fam fp16 runs failed"
    same "$fam.fp0" "$fam.fp3" && ok || bad "$fam: fp16 stage 3 differs from stage 0"
done
# initialisation as HF's _init_weights: the padding_idx rows start at zero (a step at lr 0 keeps
# the initial weights): BERT's word row 0, RoBERTa's word and position rows 1
echo '{"train_batch_size": 2, "optimizer": {"type": "AdamW", "params": {"lr": 0.0, "weight_decay": 0.0}}}' >"$T/lr0.json"
if "$ZT" train --model bert-tiny --data synthetic --config "$T/lr0.json" --steps 1 --seq-len 8 \
       --save-model "$T/init.bert" >"$T/init.bert.log" 2>&1 &&
   "$ZT" train --model "$T/roberta.json" --data synthetic --config "$T/lr0.json" --steps 1 --seq-len 8 \
       --save-model "$T/init.rob" >"$T/init.rob.log" 2>&1 &&
   "$PY" - "$T" <<'EOF'
import sys
sys.path.insert(0, "tests/ref")
from compare import load_st
T = sys.argv[1]
b, r = load_st(T + "/init.bert/model.safetensors"), load_st(T + "/init.rob/model.safetensors")
w = b["bert.embeddings.word_embeddings.weight"]
assert (w[0] == 0).all() and (w[1] != 0).any(), "BERT's [PAD] row"
for name in ("roberta.embeddings.word_embeddings.weight", "roberta.embeddings.position_embeddings.weight"):
    assert (r[name][1] == 0).all() and (r[name][0] != 0).any() and (r[name][2] != 0).any(), name
EOF
then ok; else bad "the padding_idx rows do not start at zero"; tail -n 2 "$T/init.bert.log" "$T/init.rob.log"; fi

# BERT with tie_word_embeddings false: the decoder's own weight in the head unit, through stage 3
sed 's/"hidden_act": "gelu",/"hidden_act": "gelu", "tie_word_embeddings": false,/' \
    "$FIX/bert-tiny/config.json" >"$T/untied.json"
train untied.s0 2 s0 untied && train untied.s3 2 s3 untied || bad "untied BERT runs failed"
if same untied.s0 untied.s3 && grep -q '"tie_word_embeddings": false' "$T/untied.s0/config.json" &&
   "$PY" -c 'import sys; sys.path.insert(0, "tests/ref"); from compare import load_st; t = load_st(sys.argv[1]);
assert t["cls.predictions.decoder.weight"].shape == t["bert.embeddings.word_embeddings.weight"].shape
assert (t["cls.predictions.decoder.weight"] != t["bert.embeddings.word_embeddings.weight"]).any()' "$T/untied.s0/model.safetensors"; then ok
else bad "untied BERT: stage 3 differs, or the decoder is not saved as its own tensor"; fi
# RoBERTa's synthetic rows: <s> first, </s> last, no <pad>, masks at <mask> (the last id)
if "$PY" - "$T/roberta.json" <<'EOF'
import ctypes, json, sys
lib = ctypes.CDLL("build/libzerotrain.so")
V = json.load(open(sys.argv[1]))["vocab_size"]
s = ctypes.c_void_p()
assert lib.zt_mlm_source_create(None, V, 24, ctypes.c_float(0.5), 5, ctypes.byref(s)) == 0
sp = (ctypes.c_int32 * 5)(1, 3, 0, 2, V - 1)
assert lib.zt_mlm_source_set_specials(s, sp) == 0
B, T = 8, 24
ids, am, tt, lab = ((ctypes.c_int64 * (B * T))() for _ in range(4))
assert lib.zt_mlm_source_fill(s, ctypes.c_uint64(0), B, ids, am, tt, lab) == 0
for b in range(B):
    r = ids[b * T:(b + 1) * T]
    assert r[0] == 0 and r[-1] == 2, r
    assert all(x not in (0, 1, 2, 3) for x in r[1:-1]), r
    for t in range(1, T - 1):
        if lab[b * T + t] != -100:
            assert r[t] in (V - 1, lab[b * T + t]) or 4 <= r[t] < V, r
        else:
            assert r[t] != V - 1, r  # <mask> only where a label is
lib.zt_mlm_source_destroy(s)
EOF
then ok; else bad "RoBERTa's synthetic rows do not use its special ids"; fi

# ELECTRA's generator answers fill-mask from its saved folder (a 200-entry vocab.txt beside it)
# with the reference's top 3 and probabilities (head: H -> E, LayerNorm, the tied [V, E] decoder)
if [ -f "$T/electra.s0/model.safetensors" ]; then
    "$PY" -c 'import sys; v = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + ["w%d" % i for i in range(195)]
open(sys.argv[1], "w").write("\n".join(v) + "\n")' "$T/electra.s0/vocab.txt"
    if "$ZT" predict --model "$T/electra.s0" --task fill-mask --text "w1 w2 [MASK] w4" --top-k 3 \
           >"$T/efm.jsonl" 2>"$T/efm.log" && "$PY" - "$T" <<'EOF_PY'
import json, sys
import torch
sys.path.insert(0, "tests/ref")
import electra_ref as R
from compare import load_st
T = sys.argv[1]
d = T + "/electra.s0"
c = json.load(open(d + "/config.json"))
P = {k: torch.tensor(v) for k, v in load_st(d + "/model.safetensors").items()}
vocab = open(d + "/vocab.txt").read().split("\n")
x = torch.tensor([[2, vocab.index("w1"), vocab.index("w2"), 4, vocab.index("w4"), 3]])
bt = {"input_ids": x, "attention_mask": torch.ones_like(x), "labels": torch.full_like(x, -100)}
p = torch.softmax(R.forward(P, c, bt)[1]["logits"][0, 3].double(), -1)
top = torch.topk(p, 3)
got = [json.loads(l) for l in open(T + "/efm.jsonl")]
assert [g["token"] for g in got] == [vocab[i] for i in top.indices], (got, top)
assert max(abs(g["score"] - float(s)) for g, s in zip(got, top.values)) < 1e-7, (got, top)  # (7 printed digits)
EOF_PY
    then ok; else bad "ELECTRA's generator: fill-mask differs from the reference"; tail -n 3 "$T/efm.log"; fi
fi

# ---- fine-tuning from a folder with its tokenizer; predict against the reference ---------------
# the Hugging Face folders fine-tuning starts from: the masked LMs trained above (a classifier's
# head starts fresh, with a notice) with the tokenizer's files beside them
mkdir -p "$T/rf" "$T/df"
cp "$T/roberta.s0/"* "$T/rf/" 2>/dev/null; cp "$BPE/vocab.json" "$BPE/merges.txt" "$T/rf/"
cp "$T/distil.s0/"* "$T/df/" 2>/dev/null; cp "$T/vocab.txt" "$T/df/"
echo '{"tokenizer_class": "DistilBertTokenizer", "do_lower_case": true}' >"$T/df/tokenizer_config.json"
for fam in rf df; do
    if "$ZT" finetune --model "$T/$fam" --task classify --train "$T/train.jsonl" --eval "$T/eval.jsonl" \
           --seq-len 40 --config "$T/s0.json" --steps 240 --eval-every 240 --metrics "$T/$fam.ft.jsonl" \
           --save-model "$T/$fam.ft" >"$T/$fam.ft.log" 2>&1; then
        acc=$("$PY" -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])["eval_accuracy"])' "$T/$fam.ft.jsonl")
        "$PY" -c "import sys; sys.exit(0 if float('$acc') >= 0.85 else 1)" && ok \
            || { bad "$fam: fine-tuning did not learn: eval_accuracy $acc"; tail -3 "$T/$fam.ft.log"; }
    else bad "$fam: finetune failed"; tail -5 "$T/$fam.ft.log"; continue; fi
    grep -q "initialised" "$T/$fam.ft.log" && ok || bad "$fam: no notice that the classifier's head starts fresh"
    "$ZT" predict --model "$T/$fam.ft" --task classify --input "$T/eval.jsonl" --output "$T/$fam.pred" \
        >"$T/$fam.pred.log" 2>&1 || { bad "$fam: predict failed"; tail -3 "$T/$fam.pred.log"; continue; }
    if "$PY" - "$T" "$fam" <<'EOF'
import json, os, sys
import numpy as np, torch
sys.path.insert(0, "tests/ref")
import family_ref as R
from compare import load_st
from bpe_ref import RobertaRef
from wordpiece_ref import BertRef
T, fam = sys.argv[1], sys.argv[2]
d = T + "/" + fam + ".ft"
c = json.load(open(d + "/config.json"))
want = {"rf": ("roberta", "RobertaForSequenceClassification", ["vocab.json", "merges.txt"], "RobertaTokenizer"),
        "df": ("distilbert", "DistilBertForSequenceClassification", ["vocab.txt"], "DistilBertTokenizer")}[fam]
assert c["model_type"] == want[0] and c["architectures"] == [want[1]], c
assert c["id2label"] == {"0": "alpha", "1": "beta"}, c
for f in want[2]:
    assert os.path.exists(d + "/" + f), f
assert json.load(open(d + "/tokenizer_config.json"))["tokenizer_class"] == want[3]
tok = RobertaRef(d + "/vocab.json", d + "/merges.txt") if fam == "rf" else BertRef(d + "/vocab.txt", True)
P = {k: torch.tensor(v) for k, v in load_st(d + "/model.safetensors").items()}
rows = [json.loads(l) for l in open(T + "/eval.jsonl")]
got = [json.loads(l) for l in open(T + "/" + fam + ".pred")]
assert len(got) == len(rows)
worst = 0.0
for r, g in zip(rows, got):
    ids = tok.encode(r["text"], max_length=40)[0]
    x = torch.tensor([ids])
    bt = {"input_ids": x, "attention_mask": torch.ones_like(x), "labels": torch.zeros(1, dtype=torch.long)}
    _, logits, _ = R.forward(P, c, bt)
    p = torch.softmax(logits.double(), -1)[0].numpy()
    names = [c["id2label"][str(k)] for k in range(len(p))]
    assert g["label"] == names[int(np.argmax(p))], (g, p)
    worst = max(worst, max(abs(g["scores"][n] - p[k]) for k, n in enumerate(names)))
assert worst < 2e-5, worst
print("%s predict vs reference: worst |p - p_ref| %.3g over %d rows" % (fam, worst, len(rows)))
EOF
    then ok; else bad "$fam: the saved folder or predict's probabilities differ from the reference"; fi
done

# ---- ELECTRA: fine-tuning a discriminator folder (ElectraForPreTraining) ----------------------------
# tests/ref/electra_ref.py writes the folder with Hugging Face's names (embedding_size 32 below
# hidden_size 64: embeddings_project; discriminator_predictions.*, which a classifier does not
# read), dropout 0.1, and an ElectraTokenizer vocab.txt (the test's words, padded past BERT's
# special ids); the classifier learns at N=1, the folder it saves is an
# ElectraForSequenceClassification whose predictions match the reference's (it starts from
# random weights, not a trained masked LM as the others: 240 steps reach 0.71 here, and 0.65
# of the 80 evaluation rows is 2.7 standard deviations above chance); in the long run, at N=2
# stage 3 (offloaded) gives stage 0's bits, in fp32 and bf16
"$PY" - "$T" <<'EOF_PY'
import sys
T = sys.argv[1]
v = open(T + "/vocab.txt").read().split("\n")[:-1]
open(T + "/evocab.txt", "w").write("\n".join(v + ["[unused%d]" % i for i in range(120 - len(v))]) + "\n")
EOF_PY
if "$PY" tests/ref/electra_ref.py make --out "$T/ef" --seed 11 --head disc --vocab 120 --embedding 32 --hidden 64 \
       --layers 2 --heads 4 --intermediate 128 --max-pos 64 >"$T/ef.make.log" 2>&1; then
    sed -i -E 's/"(hidden|attention_probs)_dropout_prob": 0.0/"\1_dropout_prob": 0.1/' "$T/ef/config.json"
    cp "$T/evocab.txt" "$T/ef/vocab.txt"
    echo '{"tokenizer_class": "ElectraTokenizer", "do_lower_case": true}' >"$T/ef/tokenizer_config.json"
    if "$ZT" finetune --model "$T/ef" --task classify --train "$T/train.jsonl" --eval "$T/eval.jsonl" \
           --seq-len 40 --config "$T/s0.json" --steps 240 --eval-every 240 --metrics "$T/ef.ft.jsonl" \
           --save-model "$T/ef.ft" >"$T/ef.ft.log" 2>&1 &&
       "$PY" -c 'import json,sys; sys.exit(0 if json.loads(open(sys.argv[1]).read().splitlines()[-1])["eval_accuracy"] >= 0.65 else 1)' "$T/ef.ft.jsonl"; then ok
    else bad "ELECTRA: fine-tuning failed or did not learn"; tail -n 3 "$T/ef.ft.log" "$T/ef.ft.jsonl"; fi
    if "$ZT" predict --model "$T/ef.ft" --task classify --input "$T/eval.jsonl" --output "$T/ef.pred" \
           >"$T/ef.pred.log" 2>&1 && "$PY" - "$T" <<'EOF_PY'
import json, os, sys
import numpy as np, torch
sys.path.insert(0, "tests/ref")
import electra_ref as R
from compare import load_st
from wordpiece_ref import BertRef
T = sys.argv[1]
d = T + "/ef.ft"
c = json.load(open(d + "/config.json"))
assert c["model_type"] == "electra" and c["architectures"] == ["ElectraForSequenceClassification"], c
assert c["embedding_size"] == 32 and c["hidden_size"] == 64 and c["id2label"] == {"0": "alpha", "1": "beta"}, c
assert json.load(open(d + "/tokenizer_config.json"))["tokenizer_class"] == "ElectraTokenizer"
P = {k: torch.tensor(v) for k, v in load_st(d + "/model.safetensors").items()}
assert "electra.embeddings_project.weight" in P and not any(k.startswith("discriminator_") for k in P), sorted(P)
tok = BertRef(d + "/vocab.txt", True)
rows = [json.loads(l) for l in open(T + "/eval.jsonl")]
got = [json.loads(l) for l in open(T + "/ef.pred")]
assert len(got) == len(rows)
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
print("ELECTRA predict vs reference: worst |p - p_ref| %.3g over %d rows" % (worst, len(rows)))
EOF_PY
    then ok; else bad "ELECTRA: the saved folder or predict's probabilities differ from the reference"; tail -n 3 "$T/ef.pred.log"; fi
    if [ "${FAMILY_LONG:-0}" = 1 ]; then # (make test: the generator's N=2 runs above)
        for c in s0 s3 bf0 bf3; do
            $MPI -np 2 "$ZT" finetune --model "$T/ef" --task classify --train "$T/train.jsonl" --seq-len 40 \
                --config "$T/$c.json" --steps 6 --threads 1 --save-model "$T/ef.$c" >"$T/ef.$c.log" 2>&1 \
                || bad "ELECTRA: N=2 $c failed"
        done
        same ef.s0 ef.s3 && ok || bad "ELECTRA: fine-tuning at stage 3 differs from stage 0 (N=2)"
        same ef.bf0 ef.bf3 && ok || bad "ELECTRA: bf16 fine-tuning at stage 3 differs from stage 0 (N=2)"
    fi
else bad "ELECTRA: electra_ref.py make failed"; tail -n 3 "$T/ef.make.log"; fi

# google/electra-small-discriminator's config.json (ElectraForPreTraining): as a 2-label
# classifier its parameter count is transformers' 13549314 (hf_configs/SOURCES.md) and the
# reference's shapes'; in the long run, fine-tuned from it (random weights), the saved
# folder's predictions are the reference's on it
ecfg=$FIX/hf_configs/electra-small-discriminator.json
sed 's/"ElectraForPreTraining"/"ElectraForSequenceClassification"/' "$ecfg" >"$T/ecls.json"
got=$("$ZT" estimate --model "$T/ecls.json" --ranks 1 --stage 0 2>&1 | sed -n 's/^[^:]*: \([0-9]*\) parameters.*/\1/p')
want=$("$PY" -c 'import json, math, sys; sys.path.insert(0, "tests/ref"); import electra_ref as R
c = json.load(open(sys.argv[1])); c["num_labels"] = 2
print(sum(math.prod(s) for s in R.param_shapes(c, "cls").values()))' "$T/ecls.json")
if [ "$got" = 13549314 ] && [ "$want" = 13549314 ] && ! "$ZT" estimate --model "$T/ecls.json" --ranks 1 --stage 0 2>&1 | grep -q "no field"; then ok
else bad "electra-small-discriminator: $got parameters (reference $want, transformers 13549314)"; fi
# as it is, ElectraForPreTraining: the discriminator's head (discriminator_predictions: 66049
# more) by zerotrain and the reference's shapes (its joint pretraining: tests/test_electra.sh)
got=$("$ZT" estimate --model "$ecfg" --ranks 1 --stage 0 2>&1 | sed -n 's/^[^:]*: \([0-9]*\) parameters.*/\1/p')
want=$("$PY" -c 'import json, math, sys; sys.path.insert(0, "tests/ref"); import electra_ref as R
print(sum(math.prod(s) for s in R.param_shapes(json.load(open(sys.argv[1])), "disc").values()))' "$ecfg")
if [ "$got" = 13549057 ] && [ "$want" = 13549057 ]; then ok
else bad "electra-small-discriminator as ElectraForPreTraining: $got parameters (reference $want)"; fi
echo '{"train_batch_size": 4, "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}}' >"$T/ereal.json"
if [ "${FAMILY_LONG:-0}" != 1 ]; then :; # (the 14 M-parameter fine-tune and predict: the long run)
elif "$ZT" finetune --model "$ecfg" --tokenizer "wordpiece:$T/evocab.txt" --task classify --train "$T/train.jsonl" \
       --seq-len 16 --config "$T/ereal.json" --steps 2 --save-model "$T/es.cls" >"$T/es.cls.log" 2>&1 &&
   "$ZT" predict --model "$T/es.cls" --task classify --input "$T/eval.jsonl" --output "$T/es.pred" \
       >"$T/es.pred.log" 2>&1 && "$PY" - "$T" <<'EOF_PY'
import json, sys
import torch
sys.path.insert(0, "tests/ref")
import electra_ref as R
from compare import load_st
from wordpiece_ref import BertRef
T = sys.argv[1]
d = T + "/es.cls"
c = json.load(open(d + "/config.json"))
assert c["architectures"] == ["ElectraForSequenceClassification"] and c["embedding_size"] == 128, c
P = {k: torch.tensor(v) for k, v in load_st(d + "/model.safetensors").items()}
tok = BertRef(d + "/vocab.txt", True)
rows = [json.loads(l) for l in open(T + "/eval.jsonl")][:20]
got = [json.loads(l) for l in open(T + "/es.pred")][:20]
worst = 0.0
for r, g in zip(rows, got):
    x = torch.tensor([tok.encode(r["text"], max_length=512)[0]])
    bt = {"input_ids": x, "attention_mask": torch.ones_like(x), "labels": torch.zeros(1, dtype=torch.long)}
    p = torch.softmax(R.forward(P, c, bt)[1]["logits"].double(), -1)[0].numpy()
    worst = max(worst, max(abs(g["scores"][c["id2label"][str(k)]] - p[k]) for k in range(len(p))))
assert worst < 2e-5, worst
print("electra-small-discriminator: predict vs reference worst |p - p_ref| %.3g over %d rows" % (worst, len(rows)))
EOF_PY
then ok; else bad "electra-small-discriminator: finetune, predict or the reference's probabilities"; tail -n 3 "$T/es.cls.log" "$T/es.pred.log"; fi

# text pairs: RoBERTa frames <s> a </s></s> b </s> with token types 0; DistilBERT has none (its
# tokenizer gives no token_type_ids), so BERT-style pair types are not read
for fam in rf df; do
    "$ZT" finetune --model "$T/$fam" --task classify --train "$T/train.jsonl" --text-pair-field text \
        --seq-len 40 --config "$T/s0.json" --steps 2 --save-model "$T/$fam.pair" >"$T/$fam.pair.log" 2>&1 \
        && ok || { bad "$fam: fine-tuning on text pairs failed"; tail -n 2 "$T/$fam.pair.log"; }
done

# ---- RoBERTa fill-mask at <mask> against the reference ---------------------------------------------
if [ -f "$T/rf/model.safetensors" ]; then
    if "$ZT" predict --model "$T/rf" --task fill-mask --text "The river and the <mask> stone." \
           --top-k 3 >"$T/fm.jsonl" 2>"$T/fm.log" && "$PY" - "$T" "$BPE" <<'EOF'
import json, sys
import numpy as np, torch
sys.path.insert(0, "tests/ref")
import family_ref as R
from compare import load_st
from bpe_ref import RobertaRef
T, BPE = sys.argv[1], sys.argv[2]
d = T + "/rf"
c = json.load(open(d + "/config.json"))
tok = RobertaRef(BPE + "/vocab.json", BPE + "/merges.txt")
ids = tok.encode("The river and the <mask> stone.")[0]
mask = tok.encoder["<mask>"]
assert ids.count(mask) == 1, ids
P = {k: torch.tensor(v) for k, v in load_st(d + "/model.safetensors").items()}
x = torch.tensor([ids])
_, logits, _ = R.forward(P, c, {"input_ids": x, "attention_mask": torch.ones_like(x),
                                "labels": torch.where(x == mask, 0, -100)})
got = [json.loads(l) for l in open(T + "/fm.jsonl")]
pos = ids.index(mask)
assert [g["position"] for g in got] == [pos] * 3, got
p = torch.softmax(logits[0, pos].double(), -1).numpy()
assert [g["token_id"] for g in got] == list(np.argsort(-p, kind="stable")[:3]), got
assert max(abs(g["score"] - p[g["token_id"]]) for g in got) < 2e-5
EOF
    then ok; else bad "RoBERTa fill-mask differs from the reference"; cat "$T/fm.log"; fi
fi

# ---- prepare-data with RoBERTa's tokenizer, masked-LM training on it --------------------------------
if "$ZT" prepare-data --input "$T/corpus.txt" --tokenizer "$T/rf" --out "$T/rdata" >"$T/prep.log" 2>&1 &&
   "$ZT" train --model "$T/rf" --data "$T/rdata" --config "$T/rcnone.json" --seq-len 24 --steps 3 \
       --save-model "$T/rtrained" >"$T/rtrain.log" 2>&1; then
    if [ -f "$T/rtrained/vocab.json" ] && [ -f "$T/rtrained/merges.txt" ] &&
       grep -q '"RobertaTokenizer"' "$T/rtrained/tokenizer_config.json" &&
       grep -q '"model_type": "roberta"' "$T/rtrained/config.json"; then ok
    else bad "the RoBERTa trained on prepared data lacks its tokenizer files or config"; fi
else bad "prepare-data / train with RoBERTa's tokenizer failed"; tail -n 3 "$T/prep.log" "$T/rtrain.log"; fi

# ---- the real config.json files (tests/fixtures/hf_configs): their parameter counts are the
# references' shapes summed; the long run trains, fine-tunes and predicts (T5: generates) each ------
for m in bert-base-uncased roberta-base distilbert-base-uncased mt5-small flan-t5-small; do
    cfgf=$FIX/hf_configs/$m.json
    got=$("$ZT" estimate --model "$cfgf" --ranks 1 --stage 0 2>&1 | sed -n 's/^[^:]*: \([0-9]*\) parameters.*/\1/p')
    want=$("$PY" - "$cfgf" <<'EOF'
import json, math, sys
sys.path.insert(0, "tests/ref")
import bert_ref, family_ref, t5_ref
c = json.load(open(sys.argv[1]))
mt = c["model_type"]
shapes = bert_ref.param_shapes(c) if mt == "bert" else family_ref.param_shapes(c) if mt != "t5" and mt != "mt5" \
    else {k: shape for k, (shape, _) in t5_ref.param_shapes(c).items()}  # (t5_ref: shape, init)
print(sum(math.prod(s) for s in shapes.values()))
EOF
)
    if [ -n "$got" ] && [ "$got" = "$want" ] && ! "$ZT" estimate --model "$cfgf" --ranks 1 --stage 0 2>&1 | grep -q "no field"; then ok
    else bad "$m: $got parameters, the reference's shapes give $want (or a field was not known)"; fi
    case $m in *t5*) t5=1 ;; *) t5=0 ;; esac
    if [ "${FAMILY_LONG:-0}" = 1 ] && [ $t5 = 1 ]; then # T5: text to text and generation
        cfg real 0 1 "" ""
        "$PY" -c 'import json,sys; f=open(sys.argv[1],"w")
for i in range(16): f.write(json.dumps({"input": "copy: word %d" % i, "target": "word %d" % i}) + "\n")' "$T/t2t.jsonl"
        if "$ZT" train --model "$cfgf" --data synthetic --config "$T/real.json" --seq-len 16 --steps 1 \
               --save-model "$T/$m.pre" >"$T/$m.pre.log" 2>&1 &&
           cp "$FIX/tokenizers/t5/spiece.model" "$T/$m.pre/" &&
           "$ZT" finetune --model "$T/$m.pre" --task text2text --train "$T/t2t.jsonl" --seq-len 16 \
               --target-len 8 --config "$T/real.json" --steps 1 --save-model "$T/$m.t2t" >"$T/$m.t2t.log" 2>&1 &&
           "$ZT" predict --model "$T/$m.t2t" --task generate --input "$T/t2t.jsonl" --max-new-tokens 4 \
               --output "$T/$m.gen" >"$T/$m.gen.log" 2>&1 && [ "$(wc -l <"$T/$m.gen")" -eq 16 ]; then ok
        else bad "$m: train, finetune or generate failed"; tail -n 3 "$T/$m".*.log; fi
    fi
    if [ "${FAMILY_LONG:-0}" = 1 ] && [ $t5 = 0 ]; then
        tokdir=$T/vocabdir; mkdir -p "$tokdir.$m"
        if [ "$m" = roberta-base ]; then cp "$BPE/vocab.json" "$BPE/merges.txt" "$tokdir.$m/"
        else cp "$T/vocab.txt" "$tokdir.$m/"; fi
        cfg real 0 1 "" ""
        if "$ZT" train --model "$cfgf" --data synthetic --config "$T/real.json" --seq-len 16 --steps 1 \
               --save-model "$T/$m.pre" >"$T/$m.pre.log" 2>&1 &&
           cp "$tokdir.$m/"* "$T/$m.pre/" &&
           "$ZT" finetune --model "$T/$m.pre" --task classify --train "$T/train.jsonl" --seq-len 16 \
               --config "$T/real.json" --steps 1 --save-model "$T/$m.cls" >"$T/$m.cls.log" 2>&1 &&
           "$ZT" predict --model "$T/$m.cls" --task classify --input "$T/eval.jsonl" \
               --output "$T/$m.pred" >"$T/$m.pred.log" 2>&1 && [ "$(wc -l <"$T/$m.pred")" -eq 80 ]; then ok
        else bad "$m: train, finetune or predict failed"; tail -n 3 "$T/$m".*.log; fi
    fi
done

echo "family: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
