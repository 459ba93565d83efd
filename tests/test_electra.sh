#!/usr/bin/env bash
# test_electra.sh - ELECTRA's joint pretraining (models/electra.c): a generator (ElectraForMaskedLM)
# and the discriminator (ElectraForPreTraining) sharing the embeddings, against
# tests/ref/electra_ref.py (written from google-research/electra and transformers):
#   - the fixture electra-tiny-joint (the generator's embeddings wider than its layers: E 16, H 8):
#     one step given the fixture's replacements: loss, both networks' logits, every gradient
#     (the shared tables' summed over both networks) and AdamW; the discriminator's input and
#     labels exactly;
#   - the sampler: without replacements the engine samples them (Philox, Gumbel-max); on a
#     batch with 40 masked positions each is what electra_ref.py's independent Philox4x32-10
#     and argmax give from the engine's generator logits, and the reference given those
#     replacements gives the engine's loss and gradients;
#   - a discriminator config.json alone (dropout 0.1) trains with the generator derived by
#     zerotrain.electra_generator_size: at N=2 stage 3 (offloaded) gives stage 0's bits, and at
#     N=3 (the long run: every stage at N=2 and N=3, and bf16); recomputation (full, selective;
#     the long run also every-k:2, offloaded checkpoints and the "auto" planner under a limit)
#     gives keeping everything's bits;
#     the folder it saves (generator_config.json, electra_pretraining.json, the
#     discriminator's names + "generator." ones) loads in the
#     reference with the engine's logits and gradients; fine-tuning from it reads the
#     discriminator and leaves the generator without a warning; fill-mask on it is the
#     generator's, as the reference computes it (a discriminator alone: refused);
#   - stage 3's measured collective bytes are the schedule's at N=2 and N=3;
#   - the step's loss is the same at N=1 (2 micro-batches) and N=2 (the samples keyed by the
#     global sample); a generator_config.json beside config.json is the generator;
#   - google/electra-small-discriminator's config.json: the joint model's parameter count is the
#     reference's (the generator 1/4: hidden 64, 1 head, intermediate 256), and it trains;
#   - disallow_correct (electra_pretraining.json): no masked position gets its original token, and
#     each sample is the reference's (its original less 1000 before the Gumbel-max);
#   - refusals: a generator whose embeddings differ, a disallow_correct that is not a bool, a
#     generator size above 1.
# Usage: tests/test_electra.sh [zerotrain]   (FAMILY_LONG=1: every stage, N=3, bf16, more)
set -u
ZT=${1:-build/zerotrain}
PY=/usr/bin/python3
SUITE=electra . "$(dirname "$0")/lib.sh"
MPI="timeout 300 mpirun --allow-run-as-root --oversubscribe"
FIX=${ZT_FIXTURES:-tests/fixtures}
LONG=${FAMILY_LONG:-0}
REF=tests/ref/electra_ref.py
J=$FIX/electra-tiny-joint

# ---- the fixture: one step given the replacements ---------------------------------------------
if "$ZT" grad --model "$J" --batch "$J/batch.safetensors" --step "$J/step.json" --out "$T/fx.out" \
       >"$T/fx.log" 2>&1 &&
   "$PY" tests/ref/compare.py --require-logits --require-adamw "$J/expected.safetensors" "$T/fx.out" \
       >"$T/fx.cmp" 2>&1 &&
   "$PY" - "$J/expected.safetensors" "$T/fx.out" <<'EOF'
import sys
import numpy as np
sys.path.insert(0, "tests/ref")
from compare import load_st
e, a = load_st(sys.argv[1]), load_st(sys.argv[2])
assert "logits.generator" in a and a["logits.generator"].shape == e["logits.generator"].shape
for k in ("aux.disc_input_ids", "aux.disc_labels", "aux.replacement_ids"):
    assert np.array_equal(a[k], e[k]), (k, a[k], e[k])
for k in ("aux.loss_generator", "aux.loss_discriminator"):
    assert abs(float(a[k].reshape(-1)[0]) - float(e[k].reshape(-1)[0])) <= 1e-5 * abs(float(e[k].reshape(-1)[0])), k
EOF
then ok; else bad "ELECTRA joint fixture: the step differs from the reference"; tail -n 4 "$T/fx.log" "$T/fx.cmp"; fi

# ---- the sampler ----------------------------------------------------------------------------------
"$PY" - "$J/batch.safetensors" "$T/sb.safetensors" <<'EOF'
import sys
import numpy as np
sys.path.insert(0, "tests/ref")
from compare import load_st, save_st
rng = np.random.default_rng(5)
B, T = 4, 16
ids = rng.integers(104, 120, (B, T)).astype(np.int64)
ids[:, 0] = 101
labels = np.full((B, T), -100, np.int64)
pos = [(b, t) for b in range(B) for t in range(1, T)]
for k in rng.permutation(len(pos))[:40]:
    b, t = pos[k]
    labels[b, t] = ids[b, t]
    ids[b, t] = 103 # [MASK]
save_st(sys.argv[2], {"input_ids": ids, "labels": labels, "attention_mask": np.ones((B, T), np.int64),
                      "token_type_ids": np.zeros((B, T), np.int64)})
EOF
if "$ZT" grad --model "$J" --batch "$T/sb.safetensors" --out "$T/sb.out" >"$T/sb.log" 2>&1 &&
   "$PY" "$REF" samples --out "$T/sb.out" --batch "$T/sb.safetensors" --seed 42 >"$T/sb.samples" 2>&1 &&
   "$PY" - "$T/sb.safetensors" "$T/sb.out" "$T/sb2.safetensors" <<'EOF'
import sys
sys.path.insert(0, "tests/ref")
from compare import load_st, save_st
b, o = load_st(sys.argv[1]), load_st(sys.argv[2])
rep = o["aux.replacement_ids"]
assert ((rep == -100) == (b["labels"] == -100)).all()
assert ((rep >= 0) & (rep < 120) | (rep == -100)).all()
assert 0 < int(((rep != -100) & (rep != b["labels"])).sum()) < 40 # (some replaced, some sampled back)
b["replacement_ids"] = rep
save_st(sys.argv[3], b)
EOF
then
    if "$PY" "$REF" grad --model "$J" --batch "$T/sb2.safetensors" --out "$T/sb.ref" >"$T/sb.ref.log" 2>&1 &&
       "$PY" tests/ref/compare.py --require-logits "$T/sb.ref" "$T/sb.out" >"$T/sb.cmp" 2>&1; then ok
    else bad "ELECTRA sampler: the reference given the engine's samples differs"; tail -n 3 "$T/sb.ref.log" "$T/sb.cmp"; fi
else bad "ELECTRA sampler: the engine's samples are not the Philox Gumbel-max ones"; tail -n 3 "$T/sb.log" "$T/sb.samples"; fi

# disallow_correct: the same batch, the original token never sampled
mkdir -p "$T/jd"
cp "$J"/*.json "$J/model.safetensors" "$T/jd/"
sed -i 's/"disallow_correct": false/"disallow_correct": true/' "$T/jd/electra_pretraining.json"
if grep -q '"disallow_correct": true' "$T/jd/electra_pretraining.json" &&
   "$ZT" grad --model "$T/jd" --batch "$T/sb.safetensors" --out "$T/sd.out" >"$T/sd.log" 2>&1 &&
   "$PY" "$REF" samples --out "$T/sd.out" --batch "$T/sb.safetensors" --seed 42 --disallow-correct >"$T/sd.samples" 2>&1 &&
   "$PY" -c 'import sys; sys.path.insert(0, "tests/ref"); from compare import load_st
o, b = load_st(sys.argv[1]), load_st(sys.argv[2]); m = b["labels"] != -100
assert int(m.sum()) == 40 and (o["aux.replacement_ids"][m] != b["labels"][m]).all() and (o["aux.disc_labels"][m] == 1).all()' \
       "$T/sd.out" "$T/sb.safetensors"; then ok
else bad "ELECTRA disallow_correct: an original token sampled, or the samples differ"; tail -n 3 "$T/sd.log" "$T/sd.samples"; fi

# ---- training from a discriminator config.json --------------------------------------------------
"$PY" - "$T" <<'EOF'
import json, sys
T = sys.argv[1]
d = {"architectures": ["ElectraForPreTraining"], "model_type": "electra", "vocab_size": 200,
     "embedding_size": 32, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
     "intermediate_size": 128, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
     "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 64, "type_vocab_size": 2,
     "initializer_range": 0.02, "layer_norm_eps": 1e-12, "pad_token_id": 0}
json.dump(d, open(T + "/disc.json", "w"))
g = dict(d, architectures=["ElectraForMaskedLM"], hidden_size=16, num_attention_heads=1, intermediate_size=64,
         embedding_size=24)
json.dump(g, open(T + "/badgen.json", "w"))
EOF
cfg() { zero_cfg "$@"; }; train() { zero_train "$@"; }; same() { same_weights "$@"; } # (lib.sh)
OFF='"offload_optimizer": {"device": "cpu"}, "offload_param": {"device": "cpu"}'
for n in 2 3; do
    cfg "n${n}s0" 0 "$n"; cfg "n${n}s1" 1 "$n"; cfg "n${n}s2" 2 "$n"; cfg "n${n}s3" 3 "$n" ", $OFF"
    cfg "n${n}bf0" 0 "$n" "" '"bf16": {"enabled": true},'; cfg "n${n}bf3" 3 "$n" ", $OFF" '"bf16": {"enabled": true},'
done
for m in none full selective every-k:2; do cfg "rc${m%%:*}" 0 1 "" "\"zerotrain\": {\"recompute\": \"$m\"},"; done
cfg rcoffload 0 1 "" '"activation_checkpointing": {"cpu_checkpointing": true}, "zerotrain": {"recompute": "every-k:2"},'

RUNS="n2s0 n2s3 n3s0 n3s3"; [ "$LONG" = 1 ] && RUNS="n2s0 n2s1 n2s2 n2s3 n3s0 n3s1 n3s2 n3s3 n2bf0 n2bf3 n3bf0 n3bf3"
for r in $RUNS; do train "e.$r" "${r:1:1}" "$r" "$T/disc.json" || { bad "ELECTRA joint $r failed"; tail -n 3 "$T/e.$r.log"; }; done
for r in $RUNS; do
    case $r in *s0|*bf0) continue;; esac
    base=${r%[0-9]}0
    same "e.$base" "e.$r" && ok || bad "ELECTRA joint: $r differs from $base"
done
if grep -q "ELECTRA joint pretraining: generator L2 H16 A1 I64" "$T/e.n2s0.log" && [ -f "$T/e.n2s0/electra_pretraining.json" ] &&
   "$PY" - "$T/e.n2s0" <<'EOF'
import json, sys
sys.path.insert(0, "tests/ref")
import electra_ref as R
from compare import load_st
d = sys.argv[1]
c, g = json.load(open(d + "/config.json")), json.load(open(d + "/generator_config.json"))
assert c["architectures"] == ["ElectraForPreTraining"] and g["architectures"] == ["ElectraForMaskedLM"], (c, g)
assert {k: g[k] for k in ("hidden_size", "num_attention_heads", "intermediate_size", "embedding_size")} == \
    {"hidden_size": 16, "num_attention_heads": 1, "intermediate_size": 64, "embedding_size": 32}, g
want = R.generator_config(c, 0.25)
assert all(g[k] == want[k] for k in ("hidden_size", "num_attention_heads", "intermediate_size",
                                     "num_hidden_layers")), (g, want)
t = load_st(d + "/model.safetensors")
shapes = R.joint_shapes(c, g)
assert sorted(t) == sorted(shapes), sorted(set(t) ^ set(shapes))
assert all(list(t[k].shape) == shapes[k] for k in t)
EOF
then ok; else bad "ELECTRA joint: the saved folder (configs, tensor names and shapes)"; fi

# the samples (and the masks, and dropout) are keyed by the global sample: a step of 4 rows gives
# the same loss on 1 rank (2 micro-batches) and on 2 (the loss printed to 4 decimals; the runs'
# sums add in another order)
echo '{"train_batch_size": 4, "train_micro_batch_size_per_gpu": 2, "steps_per_print": 1, "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}' >"$T/b4.json"
$MPI -np 1 "$ZT" train --model "$T/disc.json" --data synthetic:5 --config "$T/b4.json" --seq-len 24 --steps 1 --threads 1 >"$T/b4n1.log" 2>&1
$MPI -np 2 "$ZT" train --model "$T/disc.json" --data synthetic:5 --config "$T/b4.json" --seq-len 24 --steps 1 --threads 1 >"$T/b4n2.log" 2>&1
l1=$(sed -n 's/^step 1\/1  loss \([0-9.]*\).*/\1/p' "$T/b4n1.log"); l2=$(sed -n 's/^step 1\/1  loss \([0-9.]*\).*/\1/p' "$T/b4n2.log")
[ -n "$l1" ] && [ "$l1" = "$l2" ] && ok || bad "ELECTRA joint: step 1's loss at N=1 ($l1) and N=2 ($l2) differ"

# a generator_config.json beside the discriminator's config.json is the generator
mkdir -p "$T/given"
cp "$T/disc.json" "$T/given/config.json"
"$PY" -c 'import json, sys; g = json.load(open(sys.argv[1])); g.update(architectures=["ElectraForMaskedLM"], hidden_size=32,
num_attention_heads=2, intermediate_size=48, num_hidden_layers=1); json.dump(g, open(sys.argv[2], "w"))' "$T/disc.json" "$T/given/generator_config.json"
if train e.given 1 rcnone "$T/given/config.json" && grep -q "ELECTRA joint pretraining: generator L1 H32 A2 I48" "$T/e.given.log" &&
   grep -q '"intermediate_size": 48' "$T/e.given/generator_config.json"; then ok
else bad "ELECTRA joint: a given generator_config.json"; tail -n 3 "$T/e.given.log"; fi

# stage 3's traffic (no prefetch, no persistent unit): the measured bytes are the schedule's
for n in 2 3; do
    cfg "t$n" 3 "$n" ', "stage3_param_persistence_threshold": 0, "stage3_prefetch_bucket_size": 0'
    train "e.t$n" "$n" "t$n" "$T/disc.json" || bad "ELECTRA joint traffic run N=$n failed"
    got=$(grep -o '([0-9.]* x' "$T/e.t$n.log" | tr -d '( x'); want=$(grep -o 'schedule [0-9.]* x' "$T/e.t$n.log" | tr -d 'schedule x')
    [ -n "$got" ] && [ "$got" = "$want" ] && ok || bad "ELECTRA joint stage 3 traffic at N=$n: measured $got x, schedule $want x"
done

RC="full selective"; [ "$LONG" = 1 ] && RC="full selective every-k offload"
train e.rcnone 1 rcnone "$T/disc.json" || bad "ELECTRA joint recompute none failed"
for m in $RC; do
    train "e.rc$m" 1 "rc$m" "$T/disc.json" || bad "ELECTRA joint recompute $m failed"
    same e.rcnone "e.rc$m" && ok || bad "ELECTRA joint: recompute $m differs from none"
done

if [ "$LONG" = 1 ]; then # the planner: per step of both networks; under a limit it recomputes some
    plan() { "$ZT" train --model "$T/disc.json" --data synthetic:5 --config "$T/$2.json" --seq-len 64 \
                 --steps 2 --threads 1 --save-model "$T/$1" >"$T/$1.log" 2>&1; }
    zero_plan_cfg pbig 8GiB; plan e.pbig pbig || bad "ELECTRA joint auto (8 GiB) failed"
    peak=$(sed -n 's/.*= \([0-9]*\) MiB predicted peak.*/\1/p' "$T/e.pbig.log")
    acts=$(sed -n 's/^recompute plan.*predicted activations \([0-9.]*\) MiB.*/\1/p' "$T/e.pbig.log")
    zero_plan_cfg plim "$(awk -v p="${peak:-0}" -v a="${acts:-0}" 'BEGIN { printf "%d", p - 0.15 * a }')MiB"
    plan e.plim plim || bad "ELECTRA joint auto under a limit failed"
    pct=$(sed -n 's/^recompute plan.*recomputed FLOPs \([0-9.]*\)% .*/\1/p' "$T/e.plim.log")
    if [ -n "$pct" ] && awk -v c="$pct" 'BEGIN { exit !(c > 0) }' && grep -q "generator.layer" "$T/e.plim.log" && same e.pbig e.plim; then ok
    else bad "ELECTRA joint: auto under a limit recomputed ${pct:-?}% or its bits differ"; grep -h "plan\|error" "$T/e.plim.log"; fi
fi

# ---- the saved folder in the reference ----------------------------------------------------------
if [ -f "$T/e.n2s0/model.safetensors" ]; then
    cp -r "$T/e.n2s0" "$T/nodrop" # (the reference has no dropout: both read the folder without)
    sed -i -E 's/"(hidden|attention_probs)_dropout_prob": [0-9.]+/"\1_dropout_prob": 0/' \
        "$T/nodrop/config.json" "$T/nodrop/generator_config.json"
    "$PY" - "$T/sv.safetensors" <<'EOF'
import sys
import numpy as np
sys.path.insert(0, "tests/ref")
from compare import save_st
rng = np.random.default_rng(9)
ids = rng.integers(5, 200, (2, 20)).astype(np.int64)
labels = np.where(rng.random((2, 20)) < 0.3, ids, -100)
labels[:, 0] = -100
ids = np.where(labels != -100, 4, ids)
mask = np.ones((2, 20), np.int64)
mask[1, 15:] = 0
save_st(sys.argv[1], {"input_ids": ids, "labels": labels, "attention_mask": mask})
EOF
    if "$ZT" grad --model "$T/nodrop" --batch "$T/sv.safetensors" --out "$T/sv.out" >"$T/sv.log" 2>&1 &&
       "$PY" -c 'import sys; sys.path.insert(0, "tests/ref"); from compare import load_st, save_st
b, o = load_st(sys.argv[1]), load_st(sys.argv[2]); b["replacement_ids"] = o["aux.replacement_ids"]; save_st(sys.argv[3], b)' \
           "$T/sv.safetensors" "$T/sv.out" "$T/sv2.safetensors" &&
       "$PY" "$REF" grad --model "$T/nodrop" --batch "$T/sv2.safetensors" --out "$T/sv.ref" >"$T/sv.ref.log" 2>&1 &&
       "$PY" tests/ref/compare.py --require-logits "$T/sv.ref" "$T/sv.out" >"$T/sv.cmp" 2>&1; then ok
    else bad "ELECTRA joint: the saved folder in the reference differs"; tail -n 3 "$T/sv.log" "$T/sv.ref.log" "$T/sv.cmp"; fi
    # fine-tuning from it: the discriminator, the generator's tensors left without a warning (the
    # discriminator's head is not used, as transformers warns too)
    "$PY" - "$T" <<'EOF'
import json, random, sys
T = sys.argv[1]
words = "apple river green stone cloud engine rocket copper signal market".split()
vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words
open(T + "/nodrop/vocab.txt", "w").write("\n".join(vocab + ["[unused%d]" % i for i in range(200 - len(vocab))]) + "\n")
rng = random.Random(3)
with open(T + "/ft.jsonl", "w") as f:
    for _ in range(40):
        k = rng.randint(0, 1)
        f.write(json.dumps({"text": " ".join(rng.choice(words[5 * k:5 * k + 5]) for _ in range(6)),
                            "label": "ab"[k]}) + "\n")
EOF
    echo '{"tokenizer_class": "ElectraTokenizer", "do_lower_case": true}' >"$T/nodrop/tokenizer_config.json"
    cfg ft0 0 1
    if "$ZT" finetune --model "$T/nodrop" --task classify --train "$T/ft.jsonl" --seq-len 16 --config "$T/ft0.json" \
           --steps 2 --save-model "$T/ft" >"$T/ft.log" 2>&1 && ! grep -q "generator" "$T/ft.log" &&
       grep -q '4 tensors not used by ElectraForSequenceClassification (first: "discriminator_predictions' "$T/ft.log" &&
       [ ! -f "$T/ft/electra_pretraining.json" ] && grep -q ElectraForSequenceClassification "$T/ft/config.json" &&
       "$PY" -c 'import sys; sys.path.insert(0, "tests/ref"); from compare import load_st
t = load_st(sys.argv[1]); assert not any(k.startswith(("generator.", "discriminator_")) for k in t), sorted(t)' "$T/ft/model.safetensors"
    then ok; else bad "ELECTRA: fine-tuning from the joint folder"; tail -n 3 "$T/ft.log"; fi
    # fill-mask on it is its generator's (with the reference's top 3 and probabilities); a
    # discriminator alone has no masked-LM head and is refused by name
    if "$ZT" predict --model "$T/nodrop" --task fill-mask --text "apple river [MASK] stone" --top-k 3 \
           >"$T/fm.jsonl" 2>"$T/fm.log" && "$PY" - "$T" <<'EOF_PY'
import json, sys
import torch
sys.path.insert(0, "tests/ref")
import electra_ref as R
from compare import load_st
T = sys.argv[1]
d = T + "/nodrop"
g = json.load(open(d + "/generator_config.json"))
P = {k: torch.tensor(v) for k, v in load_st(d + "/model.safetensors").items()}
Pg = R.generator_view(P)
vocab = open(d + "/vocab.txt").read().split("\n")
x = torch.tensor([[2, vocab.index("apple"), vocab.index("river"), 4, vocab.index("stone"), 3]])
p = torch.softmax(R.gen_logits(Pg, g, R.encode(Pg, g, x, torch.ones_like(x), torch.zeros_like(x)))[0, 3].double(), -1)
top = torch.topk(p, 3)
got = [json.loads(l) for l in open(T + "/fm.jsonl")]
assert [g["token"] for g in got] == [vocab[i] for i in top.indices], (got, top)
assert max(abs(g["score"] - float(s)) for g, s in zip(got, top.values)) < 1e-7, (got, top)  # (7 printed digits)
EOF_PY
    then ok; else bad "ELECTRA joint: fill-mask (the generator's) differs from the reference"; tail -n 3 "$T/fm.log"; fi
    mkdir -p "$T/dd"
    cp "$T/nodrop/config.json" "$T/nodrop/model.safetensors" "$T/nodrop/vocab.txt" "$T/dd/"
    refuse "fill-mask on a discriminator" "ElectraForPreTraining (a discriminator" "$T/dd.out" \
        "$ZT" predict --model "$T/dd" --task fill-mask --text "apple [MASK]"
fi

# ---- google/electra-small-discriminator's config.json -------------------------------------------
ecfg=$FIX/hf_configs/electra-small-discriminator.json
cfg es 0 1
want=$("$PY" -c 'import json, math, sys; sys.path.insert(0, "tests/ref"); import electra_ref as R
c = json.load(open(sys.argv[1])); print(sum(math.prod(s) for s in R.joint_shapes(c, R.generator_config(c)).values()))' "$ecfg")
if "$ZT" train --model "$ecfg" --data synthetic --config "$T/es.json" --seq-len 16 --steps 2 --save-model "$T/es" \
       >"$T/es.log" 2>&1; then
    got=$(sed -n 's/^zerotrain [^:]*: ELECTRA .* \([0-9]*\) parameters;.*/\1/p' "$T/es.log")
    if [ "$got" = "$want" ] && grep -q "generator L12 H64 A1 I256" "$T/es.log" && [ -f "$T/es/generator_config.json" ]; then ok
    else bad "electra-small-discriminator joint: $got parameters (reference $want)"; fi
else bad "electra-small-discriminator joint: training failed"; tail -n 3 "$T/es.log"; fi

# ---- refusals -------------------------------------------------------------------------------------
mkdir -p "$T/bg"
cp "$T/disc.json" "$T/bg/config.json"; cp "$T/badgen.json" "$T/bg/generator_config.json"; echo '{}' >"$T/bg/electra_pretraining.json"
refuse "generator embeddings" "the generator shares the discriminator's embeddings" "$T/bg.out" \
    "$ZT" train --model "$T/bg" --data synthetic --steps 1 --seq-len 8 --save-model "$T/bg.out"
echo '{"disallow_correct": "yes"}' >"$T/bg/electra_pretraining.json"
refuse "disallow_correct not a bool" "\"disallow_correct\" must be true or false" "$T/bg.out" \
    "$ZT" train --model "$T/bg" --data synthetic --steps 1 --seq-len 8 --save-model "$T/bg.out"
echo '{"train_batch_size": 2, "zerotrain": {"electra_generator_size": 1.5}}' >"$T/g15.json"
refuse "generator size" "zerotrain.electra_generator_size" "$T/g15.out" \
    "$ZT" train --model "$T/disc.json" --config "$T/g15.json" --data synthetic --steps 1 --seq-len 8 --save-model "$T/g15.out"

echo "electra: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
