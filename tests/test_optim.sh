#!/usr/bin/env bash
# test_optim.sh - AdamW8bit, Adafactor and Lamb over several ranks (mpirun), on a small BERT
# (vocabulary 5000, intermediate 250: the MLM bias and the feed-forward weights end in partial
# 8-bit blocks; dropout on):
#   - ZeRO stages 0-3 give bit-identical weights at equal N (N = 2 and 3), also with units
#     cut into several pieces (buckets) and with the optimizer state and the parameters
#     offloaded (RAM pool, NVMe swap files, small sub-groups);
#   - Adafactor and Lamb at N = 3 equal N = 1 with 3-fold accumulation within fp32 rounding
#     (Adafactor's row, column and RMS sums, Lamb's norms, are partial per shard and added
#     across ranks);
#   - Lamb's steps in the engine equal DeepSpeed's FusedLamb (tests/ref/lamb_ref.py) on the
#     engine's own gradient;
#   - a checkpoint resumed at the same N and stage continues bit-identically, and the
#     optimizer state survives a change of world size and stage exactly: a checkpoint
#     re-saved at N = 2 (and N = 1) and again at the original N = 3 has the same bytes;
#   - a checkpoint of one optimizer does not load into another (one clear message).
# OPTIM_LONG=1 adds N = 1, the stages at the other N, more offload variants.
# Usage: tests/test_optim.sh [zerotrain]
set -u
ZT=${1:-build/zerotrain}
PY=/usr/bin/python3
SUITE=optim . "$(dirname "$0")/lib.sh"
# a small BERT whose 8-bit tensors end in partial 256-element blocks: the MLM bias (5000
# floats) and the feed-forward weights (64 x 250), past min_8bit_size (tensors under 4096
# floats keep fp32 moments)
echo '{"model_type": "bert", "vocab_size": 5000, "hidden_size": 64, "num_hidden_layers": 2,
       "num_attention_heads": 4, "intermediate_size": 250, "max_position_embeddings": 64,
       "type_vocab_size": 2, "hidden_act": "gelu", "layer_norm_eps": 1e-12,
       "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}' >"$T/model.json"
MPI="mpirun --allow-run-as-root --oversubscribe"
LONG=${OPTIM_LONG:-0}

# cfg NAME STAGE OPTIMIZER_JSON [ZERO_EXTRA]: a global batch of 6, no accumulation (the
# micro-batch follows the world size)
cfg() {
    echo "{\"train_batch_size\": 6, \"gradient_accumulation_steps\": ${GAS:-1},
           \"zero_optimization\": {\"stage\": $2 ${4:-}}, \"optimizer\": $3}" >"$T/$1.json"
}
A8='{"type": "AdamW8bit", "params": {"lr": 2e-3}}'
AF='{"type": "Adafactor", "params": {"beta1": 0.9, "weight_decay": 0.01}}'
# Lamb without bias correction (bing_bert's) and a clamp wide enough that the trust ratios
# (about 0.02 / 3 here: weights of scale 0.02, first updates of about 3 per element) are the
# norms' own: a clamped ratio would hide a norm summed over the wrong elements
LB='{"type": "Lamb", "params": {"lr": 2e-3, "weight_decay": 0.01, "bias_correction": false, "max_coeff": 10, "min_coeff": 1e-4}}'
NV="\"nvme_path\": \"$T/swap\""
mkdir -p "$T/swap"
run() { # OUT NP CONFIG STEPS [extra...]
    local out=$1 np=$2 c=$3 steps=$4; shift 4
    $MPI -np "$np" "$ZT" train --model "$T/model.json" --data synthetic:5 --config "$T/$c.json" \
        --seq-len 16 --steps "$steps" --threads 1 --metrics "$T/$out.jsonl" \
        --save-model "$T/$out" "$@" >"$T/$out.log" 2>&1 || { echo "run $out failed:"; tail -5 "$T/$out.log"; }
}
same() { cmp -s "$T/$1/model.safetensors" "$T/$2/model.safetensors"; }
stages() { # OPT_JSON NAME N: stages 0-3 at N give the same weights
    local st ok_all=1
    for st in 0 1 2 3; do cfg "$2$3s$st" $st "$1"; run "$2$3s$st" "$3" "$2$3s$st" 4; done
    for st in 1 2 3; do same "$2$3s0" "$2$3s$st" || ok_all=0; done
    if [ $ok_all = 1 ]; then ok; else bad "$2: stages 0-3 differ at N=$3"; fi
}

# ---- stages bit-identical -----------------------------------------------------------------
stages "$A8" a8 2
stages "$AF" af 3
stages "$LB" lb 2
stages "$LB" lb 3
if [ "$LONG" = 1 ]; then
    stages "$A8" a8 3; stages "$A8" a8 1; stages "$AF" af 2; stages "$AF" af 1
    stages '{"type": "Adafactor"}' afd 3  # Hugging Face's defaults: no first moment
    stages '{"type": "AdamW8bit", "params": {"lr": 2e-3, "min_8bit_size": 100}}' a8m 3
fi

# Lamb on the fp32 master of a bf16 run: stages 0 and 3 give the same bits at N=2
for st in 0 3; do
    echo "{\"train_batch_size\": 6, \"bf16\": {\"enabled\": true}, \"zero_optimization\": {\"stage\": $st},
           \"optimizer\": $LB}" >"$T/lbh$st.json"
    run "lbh$st" 2 "lbh$st" 3
done
if same lbh0 lbh3; then ok; else bad "Lamb in bf16: stage 3 differs from stage 0 at N=2"; fi

# ---- buckets: units cut into several pieces (a parameter's run in several segments) ------
BK=', "reduce_bucket_size": 30000, "allgather_bucket_size": 30000'
for o in a8 af; do
    [ $o = a8 ] && oj=$A8 || oj=$AF
    cfg "${o}b0" 0 "$oj" "$BK"; run "${o}b0" 3 "${o}b0" 3
    cfg "${o}b3" 3 "$oj" "$BK"; run "${o}b3" 3 "${o}b3" 3 --checkpoint-dir "$T/${o}bA"
    if same "${o}b0" "${o}b3"; then ok; else bad "$o: bucketed stage 3 differs from stage 0 at N=3"; fi
done

# ---- offload: the same bits -----------------------------------------------------------------
offload() { # NAME NP STAGE OPT_JSON ZERO_EXTRA BASE WHAT: the weights of BASE
    cfg "$1" "$3" "$4" "$5"; run "$1" "$2" "$1" 4
    if same "$6" "$1"; then ok; else bad "$7 differs from stage 0 at N=$2"; fi
}
cfg a8s0n3 0 "$A8"; run a8s0n3 3 a8s0n3 4
offload a8off 3 3 "$A8" ", \"sub_group_size\": 3000, \"offload_optimizer\": {\"device\": \"nvme\", $NV}, \"offload_param\": {\"device\": \"nvme\", $NV}" \
    a8s0n3 "AdamW8bit: stage 3 with optimizer and parameter offload on NVMe"
offload a8cpu 2 2 "$A8" ", \"offload_optimizer\": {\"device\": \"cpu\"}" a82s0 \
    "AdamW8bit: stage 2 with the state in the RAM pool"
offload afoff 3 3 "$AF" ", \"offload_optimizer\": {\"device\": \"nvme\", $NV}" af3s0 \
    "Adafactor: stage 3 with the state on NVMe"
offload lboff 3 3 "$LB" ", \"sub_group_size\": 3000, \"offload_optimizer\": {\"device\": \"nvme\", $NV}, \"offload_param\": {\"device\": \"nvme\", $NV}" \
    lb3s0 "Lamb: stage 3 with optimizer and parameter offload on NVMe"
if [ "$LONG" = 1 ]; then
    offload a8off2 2 2 "$A8" ", \"sub_group_size\": 1024, \"offload_optimizer\": {\"device\": \"nvme\", $NV}" \
        a82s0 "AdamW8bit: stage 2 with 1024-position sub-groups on NVMe"
    offload afoffp 3 3 "$AF" ", \"offload_optimizer\": {\"device\": \"cpu\"}, \"offload_param\": {\"device\": \"cpu\"}" \
        af3s0 "Adafactor: stage 3 with state and parameters in the RAM pool"
fi

# ---- Adafactor at N=3 against N=1 ------------------------------------------------------------
# The gradients differ by fp32 reduction order (3 ranks' reduce-scatter against one rank's
# 3 accumulated micro-batches) and Adafactor's sums by the order of their double additions:
# losses within 1e-5 relative, and at most 1 in 10^4 elements further than 1e-4 of their
# tensor's largest |value| (attention key biases excepted: their true gradient is zero, so
# their normalised update is the sign of rounding noise).
GAS=3 cfg af1acc 1 "$AF"; run af1acc 1 af1acc 4
cfg af3 1 "$AF"; run af3 3 af3 4
close() {
    "$PY" - "$T/$1" "$T/$2" <<'EOF'
import json, sys
sys.path.insert(0, "tests/ref")
from compare import load_st
import numpy as np
a, b = sys.argv[1], sys.argv[2]
la = [json.loads(l)["loss"] for l in open(a + ".jsonl")]
lb = [json.loads(l)["loss"] for l in open(b + ".jsonl")]
assert len(la) == len(lb) == 4, (len(la), len(lb))
worst = max(abs(x - y) / abs(y) for x, y in zip(la, lb))
ta, tb = load_st(a + "/model.safetensors"), load_st(b + "/model.safetensors")
far = total = 0
maxrel = 0.0
for k in tb:
    if k.endswith("attention.self.key.bias"):
        continue
    d = np.abs(ta[k].astype(np.float64) - tb[k])
    scale = np.abs(tb[k]).max()
    maxrel = max(maxrel, d.max() / scale)
    far += int((d > 1e-4 * scale).sum())
    total += d.size
print("loss rel %.2e; max |dp| / max |p| %.2e; %d of %d elements beyond 1e-4" % (worst, maxrel, far, total))
sys.exit(0 if worst <= 1e-5 and far * 10000 <= total else 1)
EOF
}
if close af3 af1acc; then ok; else bad "Adafactor: N=3 differs from N=1 x3 accumulation beyond fp32 rounding"; fi
# Lamb: each tensor's norms summed over the three ranks' shards equal one rank's whole-tensor
# norms (within the same rounding)
GAS=3 cfg lb1acc 1 "$LB"; run lb1acc 1 lb1acc 4
cfg lb3 1 "$LB"; run lb3 3 lb3 4
if close lb3 lb1acc; then ok; else bad "Lamb: N=3 differs from N=1 x3 accumulation beyond fp32 rounding"; fi

# ---- Lamb in the engine against DeepSpeed's FusedLamb (tests/ref/lamb_ref.py) ---------------
# zerotrain grad --step: three Lamb steps on one gradient of a random BERT (tests/ref/
# bert_ref.py's case; weight decay on every parameter), against FusedLamb applied to the same
# weights with that gradient: bing_bert's settings (most ratios clamped), and bias correction
# with eps inside the square root and the ratios unclamped
"$PY" tests/ref/bert_ref.py make --out "$T/lbcase" --seed 7 --vocab 300 --hidden 32 --layers 2 \
    --heads 4 --intermediate 64 --max-pos 40 --type-vocab 2 --batch 2 --seq 16 --eps 1e-12 >/dev/null
for v in 1 2; do
    if [ $v = 1 ]; then
        echo '{"optimizer": "Lamb", "lr": 0.011, "weight_decay": 0.01, "bias_correction": false,
               "max_coeff": 0.3, "min_coeff": 0.01, "steps": 3}' >"$T/lbstep$v.json"
    else
        echo '{"optimizer": "Lamb", "lr": 0.002, "betas": [0.8, 0.99], "eps": 1e-6,
               "weight_decay": 0.1, "eps_inside_sqrt": true, "max_coeff": 10, "min_coeff": 1e-4,
               "steps": 3}' >"$T/lbstep$v.json"
    fi
    "$ZT" grad --model "$T/lbcase" --batch "$T/lbcase/batch.safetensors" --step "$T/lbstep$v.json" \
        --out "$T/lbout$v.safetensors" --threads 1 >"$T/lbgrad$v.log" 2>&1 || tail -3 "$T/lbgrad$v.log"
    if "$PY" tests/ref/lamb_ref.py check-engine "$T/lbcase/model.safetensors" "$T/lbout$v.safetensors" \
        "$T/lbstep$v.json"; then ok; else bad "Lamb (case $v): the engine's steps differ from FusedLamb's"; fi
done

# ---- checkpoints ------------------------------------------------------------------------------
# the same N and stage: 6 steps at once, or 3, a checkpoint and --resume to 6
cfg a8r 1 "$A8"
run a8r6 2 a8r 6 --checkpoint-dir "$T/ck6"
run a8r3 2 a8r 3 --checkpoint-dir "$T/ck3"
run a8r3b 2 a8r 6 --checkpoint-dir "$T/ck3" --resume
if same a8r6 a8r3b && cmp -s "$T/ck6/step-6/rank-00001.safetensors" "$T/ck3/step-6/rank-00001.safetensors"; then ok
else bad "AdamW8bit: resuming at step 3 differs from not stopping (N=2 stage 1)"; fi
# another world size and stage: N=3 stage 3 -> N=2 stage 1 -> N=1 stage 0 -> N=3 stage 3, each
# a re-save of the loaded state (--resume-from with no step to take): the same bytes
roundtrip() { # NAME OPT_JSON
    local n=$1 o=$2
    cfg "${n}c3" 3 "$o"; cfg "${n}c1" 1 "$o"; cfg "${n}c0" 0 "$o"
    run "${n}o" 3 "${n}c3" 3 --checkpoint-dir "$T/${n}A"
    run "${n}b" 2 "${n}c1" 3 --resume-from "$T/${n}A/step-3" --checkpoint-dir "$T/${n}B"
    run "${n}c" 1 "${n}c0" 3 --resume-from "$T/${n}B/step-3" --checkpoint-dir "$T/${n}C"
    run "${n}d" 3 "${n}c3" 3 --resume-from "$T/${n}C/step-3" --checkpoint-dir "$T/${n}D"
    local k ok_all=1
    for k in 0 1 2; do
        cmp -s "$T/${n}A/step-3/rank-0000$k.safetensors" "$T/${n}D/step-3/rank-0000$k.safetensors" || ok_all=0
    done
    [ -f "$T/${n}B/step-3/rank-00001.safetensors" ] && [ ! -f "$T/${n}B/step-3/rank-00002.safetensors" ] || ok_all=0
    for k in b c d; do  # each loaded the state and took no step
        grep -q "resumed from .* at step 3" "$T/${n}$k.log" && ! grep -q "^step [0-9]" "$T/${n}$k.log" || ok_all=0
    done
    if [ $ok_all = 1 ]; then ok; else bad "$n: the optimizer state changed on its way N=3 -> 2 -> 1 -> 3"; fi
}
roundtrip a8rt "$A8"
roundtrip afrt "$AF"
[ "$LONG" = 1 ] && roundtrip lbrt "$LB"
if [ "$LONG" = 1 ]; then
    # a bucketed checkpoint through N=2 unbucketed and back: the same bytes
    for o in a8 af; do
        [ $o = a8 ] && oj=$A8 || oj=$AF
        cfg "${o}bu" 1 "$oj"
        run "${o}bu" 2 "${o}bu" 3 --resume-from "$T/${o}bA/step-3" --checkpoint-dir "$T/${o}bB"
        run "${o}bd" 3 "${o}b3" 3 --resume-from "$T/${o}bB/step-3" --checkpoint-dir "$T/${o}bD"
        ok_all=1
        for k in 0 1 2; do cmp -s "$T/${o}bA/step-3/rank-0000$k.safetensors" "$T/${o}bD/step-3/rank-0000$k.safetensors" || ok_all=0; done
        if [ $ok_all = 1 ]; then ok; else bad "$o: a bucketed checkpoint changed on its way through N=2"; fi
    done
    roundtrip a8rtm '{"type": "AdamW8bit", "params": {"lr": 2e-3, "min_8bit_size": 100}}'
    cfg a8rto 3 "$A8" ", \"sub_group_size\": 3000, \"offload_optimizer\": {\"device\": \"nvme\", $NV}"
    run a8rto 3 a8rto 3 --resume-from "$T/a8rtA/step-3" --checkpoint-dir "$T/a8rtO"
    ok_all=1
    for k in 0 1 2; do cmp -s "$T/a8rtA/step-3/rank-0000$k.safetensors" "$T/a8rtO/step-3/rank-0000$k.safetensors" || ok_all=0; done
    if [ $ok_all = 1 ]; then ok; else bad "AdamW8bit: a checkpoint re-saved from offloaded state differs"; fi
fi
# resumed into another optimizer: refused before anything changes, naming both
cfg a8wrong 3 '{"type": "AdamW", "params": {"lr": 2e-3}}'
$MPI -np 3 "$ZT" train --model "$T/model.json" --data synthetic:5 --config "$T/a8wrong.json" --seq-len 16 \
    --steps 4 --threads 1 --resume-from "$T/a8rtA/step-3" >"$T/wrong.log" 2>&1
st=$?
if [ $st -ne 0 ] && grep -q "holds AdamW8bit state, and this run's optimizer is AdamW" "$T/wrong.log"; then ok
else bad "resuming AdamW8bit state with AdamW: status $st"; tail -3 "$T/wrong.log"; fi
# which tensors keep fp32 state: by default the embedding tables (every nn.Embedding, as the
# HF Trainer registers them with bitsandbytes) and the tensors below min_8bit_size; a
# zerotrain.fp32_optimizer_state list replaces the embedding default. state.json says.
fp32_list() { # CKPT_STEP: the fp32-state names of a checkpoint, one per line
    $PY -c "import json,sys; print('\n'.join(json.load(open(sys.argv[1]))['optimizer']['fp32_state']))" "$1/state.json"
}
echo '{"train_batch_size": 2, "optimizer": {"type": "AdamW8bit", "params": {"lr": 2e-3}},
       "zerotrain": {"fp32_optimizer_state": []}}' >"$T/a8none.json"
echo '{"train_batch_size": 2, "optimizer": {"type": "AdamW8bit", "params": {"lr": 2e-3}}}' >"$T/a8emb.json"
for m in bert-tiny t5-small; do
    for c in a8emb a8none; do
        "$ZT" train --model $m --data synthetic:5 --config "$T/$c.json" --seq-len 16 --steps 1 \
            --threads 1 --checkpoint-dir "$T/$c-$m" --checkpoint-every 1 >"$T/$c-$m.log" 2>&1 ||
            { echo "run $c $m failed:"; tail -3 "$T/$c-$m.log"; }
        fp32_list "$T/$c-$m/step-1" | grep -E 'embeddings\.(word|position)|^shared\.|relative_attention_bias|query.weight|\.q\.weight' | sort >"$T/$c-$m.names"
    done
done
printf '%s\n' bert.embeddings.position_embeddings.weight bert.embeddings.word_embeddings.weight >"$T/want-bert"
printf '%s\n' decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight \
    encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight shared.weight >"$T/want-t5"
if cmp -s "$T/want-bert" "$T/a8emb-bert-tiny.names" && cmp -s "$T/want-t5" "$T/a8emb-t5-small.names"; then ok
else bad "AdamW8bit: the embedding tables do not keep fp32 state by default"; cat "$T/a8emb-bert-tiny.names" "$T/a8emb-t5-small.names"; fi
# (t5-small's relative-attention biases are 32 x 8 = 256 elements: fp32 by size as well)
if [ ! -s "$T/a8none-bert-tiny.names" ] && grep -qx 'decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight' "$T/a8none-t5-small.names" \
    && ! grep -q '^shared' "$T/a8none-t5-small.names"; then ok
else bad "AdamW8bit: fp32_optimizer_state [] does not replace the embedding default"; cat "$T/a8none-bert-tiny.names" "$T/a8none-t5-small.names"; fi
# the report: bytes of optimizer state per parameter (all in 8 bits but the small tensors)
if grep -q "^optimizer state per rank: [0-9]* bytes, 2\.0[0-9]* per parameter updated" "$T/a8none-bert-tiny.log"; then ok
else bad "AdamW8bit: the report does not show about 2 bytes of state per parameter"; grep "optimizer state" "$T/a8none-bert-tiny.log"; fi

echo "optim: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
