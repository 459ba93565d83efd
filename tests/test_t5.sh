#!/usr/bin/env bash
# test_t5.sh - T5 (span corruption on synthetic data, dropout 0.1) through the engine's paths:
#  - ZeRO stages 0-3 bit-identical at N=2 (both a relu/tied and a gated-gelu/untied model);
#  - recomputation (full, selective, segments of every-k:2 and number_checkpoints, full and
#    segments with the inputs offloaded to NVMe and to RAM) the same bits as keeping
#    everything, at N=1 and with stage 3 at N=2;
#  - the optimizer state on NVMe and in RAM (stage 2) and the parameters on NVMe (stage 3) the
#    same bits as in memory; AdamW8bit and Adafactor across stages;
#  - resuming from a checkpoint continues bit-identically; the loss falls.
# T5_LONG=1 adds N=3 for every stage and both models, and every recomputation mode at N=3.
# The exported folders load back (zerotrain grad) with their config.json.
# Usage: tests/test_t5.sh [zerotrain]
set -u
ZT=${1:-build/zerotrain}
SUITE=t5 . "$(dirname "$0")/lib.sh"
[ -n "${KEEP_T:-}" ] && trap - EXIT && echo "keeping $T"
MPI="mpirun --allow-run-as-root --oversubscribe"
S=48 MB=4
model() { # FILE PROJ TIE ENC DEC
    echo "{\"model_type\": \"t5\", \"vocab_size\": 640, \"d_model\": 48, \"d_kv\": 16,
           \"num_heads\": 3, \"d_ff\": 72, \"num_layers\": $4, \"num_decoder_layers\": $5,
           \"relative_attention_num_buckets\": 16, \"relative_attention_max_distance\": 32,
           \"feed_forward_proj\": \"$2\", \"tie_word_embeddings\": $3, \"dropout_rate\": 0.1,
           \"layer_norm_epsilon\": 1e-6}" >"$1"
}
model "$T/relu.json" relu true 3 2
model "$T/gated.json" gated-gelu false 2 3
mkdir -p "$T/nv"
cfg() { # NAME NP STAGE RECOMPUTE [extra zero_optimization members] [optimizer] [ac members]
    local zx="" ac="" opt=${6:-'{"type": "AdamW", "params": {"lr": 3e-3}}'}
    [ -n "${5-}" ] && zx=", $5"
    [ -n "${7-}" ] && ac="\"activation_checkpointing\": {$7},"
    echo "{\"train_batch_size\": $((MB * $2)), \"train_micro_batch_size_per_gpu\": $MB,
           \"steps_per_print\": 1, $ac
           \"zero_optimization\": {\"stage\": $3, \"stage3_param_persistence_threshold\": 0 $zx},
           \"zerotrain\": {\"recompute\": \"$4\"}, \"optimizer\": $opt}" >"$T/$1.json"
}
run() { # NAME NP MODEL [STEPS] [extra args]
    local name=$1 np=$2 mdl=$3 steps=${4:-4}; shift 4 2>/dev/null || shift $#
    $MPI -np "$np" "$ZT" train --model "$T/$mdl.json" --data synthetic --config "$T/$name.json" \
        --seq-len $S --steps "$steps" --threads 1 --seed 7 --save-model "$T/$name" "$@" \
        >"$T/$name.log" 2>&1 || { echo "run $name failed:"; tail -5 "$T/$name.log"; }
}
same() { cmp -s "$T/$1/model.safetensors" "$T/$2/model.safetensors"; }
check_same() { # A B WHAT
    if [ -f "$T/$1/model.safetensors" ] && same "$1" "$2"; then ok; else bad "$3"; fi
}
NOFF='"offload_optimizer": {"device": "nvme", "nvme_path": "'$T/nv'"}'
ROFF='"offload_optimizer": {"device": "cpu"}'
POFF='"offload_param": {"device": "nvme", "nvme_path": "'$T/nv'"}'

# ---- stages at equal N ------------------------------------------------------------------------
NPS="2"; [ -n "${T5_LONG:-}" ] && NPS="2 3"
for mdl in relu gated; do
    for np in $NPS; do
        for st in 0 1 2 3; do cfg ${mdl}n${np}s$st $np $st none; run ${mdl}n${np}s$st $np $mdl; done
        for st in 1 2 3; do
            check_same ${mdl}n${np}s$st ${mdl}n${np}s0 "T5 $mdl: stage $st differs from stage 0 at N=$np"
        done
    done
done
# the loss falls (relu, stage 0, N=2): the last printed loss below the first
first=$(grep -m1 "^step 1/" "$T/relun2s0.log" | awk '{print $4}')
last=$(grep "^step 4/" "$T/relun2s0.log" | awk '{print $4}')
if awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }'; then ok
else bad "T5 loss did not fall: $first -> $last"; fi

# the exported folder is a Hugging Face T5 folder that loads back
FIXB=${ZT_FIXTURES:-tests/fixtures}/t5-tiny/batch.safetensors
if grep -q '"model_type": "t5"' "$T/gatedn2s0/config.json" && grep -q '"feed_forward_proj": "gated-gelu"' "$T/gatedn2s0/config.json" \
   && "$ZT" grad --model "$T/gatedn2s0" --batch "$FIXB" --out "$T/g.st" >"$T/g.log" 2>&1; then ok
else bad "T5: the exported folder does not load back"; cat "$T/g.log"; fi

# mT5 (model_type "mt5", T5 v1.1's architecture: gated-gelu, untied): it trains, its folder
# keeps model_type "mt5" and MT5ForConditionalGeneration, and zerotrain grad on that folder
# equals the independent reference's (tests/ref/t5_ref.py, transformers' T5 classes, which
# MT5ForConditionalGeneration reuses unchanged); umt5 is refused naming why
# (dropout 0: zerotrain grad applies the config's dropout, the reference has none)
sed 's/"model_type": "t5"/"model_type": "mt5"/; s/"dropout_rate": 0.1/"dropout_rate": 0.0/' \
    "$T/gated.json" >"$T/mt5.json"
cfg mt5s0 1 0 none; run mt5s0 1 mt5 2
if grep -q '"model_type": "mt5"' "$T/mt5s0/config.json" && grep -q '"MT5ForConditionalGeneration"' "$T/mt5s0/config.json" \
   && "$ZT" grad --model "$T/mt5s0" --batch "$FIXB" --out "$T/m.st" >"$T/m.log" 2>&1 \
   && /usr/bin/python3 tests/ref/t5_ref.py grad --model "$T/mt5s0" --batch "$FIXB" --out "$T/mref.st" >"$T/mref.log" 2>&1 \
   && /usr/bin/python3 tests/ref/compare.py "$T/mref.st" "$T/m.st" >"$T/mcmp.log" 2>&1; then ok
else bad "mT5: the folder is not an mt5 one, or its gradients differ from the reference"; tail -n 3 "$T/m.log" "$T/mref.log" "$T/mcmp.log"; fi
sed 's/"model_type": "t5"/"model_type": "umt5"/' "$T/gated.json" >"$T/umt5.json"
if ! "$ZT" train --model "$T/umt5.json" --data synthetic --steps 1 --seq-len 8 >"$T/umt5.log" 2>&1 \
   && grep -q 'model_type "umt5" is not supported: UMT5 gives every layer its own relative attention bias' "$T/umt5.log"; then ok
else bad "umt5: not refused with its reason"; cat "$T/umt5.log"; fi

# a folder that also stores transformers' tied copies of shared.weight (encoder/decoder
# embed_tokens, lm_head) loads them as copies (none left unused): the fixture's values within
# its tolerances
FIX=${ZT_FIXTURES:-tests/fixtures}/t5-tiny
mkdir -p "$T/tiedcopies"; cp "$FIX/config.json" "$T/tiedcopies/"
/usr/bin/python3 - "$FIX/model.safetensors" "$T/tiedcopies/model.safetensors" <<'PY'
import sys
sys.path.insert(0, "tests/ref")
from compare import load_st, save_st
t = load_st(sys.argv[1])
for n in ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight", "lm_head.weight"):
    t[n] = t["shared.weight"]
save_st(sys.argv[2], t)
PY
if "$ZT" grad --model "$T/tiedcopies" --batch "$FIX/batch.safetensors" --step "$FIX/step.json" \
       --out "$T/tc.st" >"$T/tc.log" 2>&1 && /usr/bin/python3 tests/ref/compare.py \
       --require-adamw --require-logits "$FIX/expected.safetensors" "$T/tc.st" >>"$T/tc.log" 2>&1 \
   && ! grep -q "not used by" "$T/tc.log"; then ok
else bad "T5: a folder with tied copies"; cat "$T/tc.log"; fi

# ---- recomputation and offload: the bits of keeping everything --------------------------------
modes="full sel offnv offram ek2 nck ek2off"
RNPS="1 2"; [ -n "${T5_LONG:-}" ] && RNPS="1 2 3"
for np in $RNPS; do
    st=$([ $np = 1 ] && echo 0 || echo 3)
    cfg r${np}none $np $st none; run r${np}none $np gated
    cfg r${np}full $np $st full; cfg r${np}sel $np $st selective
    cfg r${np}offnv $np $st full "$NOFF" "" '"cpu_checkpointing": true'
    cfg r${np}offram $np $st full "" "" '"cpu_checkpointing": true'
    cfg r${np}ek2 $np $st every-k:2; cfg r${np}nck $np $st full "" "" '"number_checkpoints": 2'
    cfg r${np}ek2off $np $st every-k:2 "$NOFF" "" '"cpu_checkpointing": true, "profile": true'
    for m in $modes; do
        run r$np$m $np gated
        check_same r$np$m r${np}none "T5 N=$np stage $st: recompute $m differs from none"
    done
done
if [ -z "$(ls -A "$T/nv")" ]; then ok; else bad "files left in the swap folder: $(ls "$T/nv")"; fi
# the segments profile: every-k:2 counts segments from each stack's end and the last one is
# still in memory: the 2 encoder blocks are one segment (none recomputed), the 3 decoder blocks
# are [0] and [1, 2] (decoder.block.0 recomputed, once per step)
rows=$(grep -c "^ *\(en\|de\)coder\.block\.[0-9]* *segment " "$T/r1ek2off.log")
if grep -q "^ *decoder\.block\.0 *segment *4 " "$T/r1ek2off.log" && [ "$rows" = 1 ]; then ok
else bad "T5 recompute profile: $rows rows"; grep -A10 "recompute profile" "$T/r1ek2off.log"; fi
# the "auto" planner under a limit: a plan that recomputes, its activations as predicted, the
# bits of keeping everything, the peak RSS under the limit. The limit is just above the least a
# full recompute needs: 20.6 MiB of activations and the rest, about 42 MiB on an AMD EPYC (the
# process with MPI, and oneDNN where the fp32 products use it: 2.7 MiB more).
LIM=64
echo "{\"train_batch_size\": 16, \"train_micro_batch_size_per_gpu\": 16, \"steps_per_print\": 1,
       \"zero_optimization\": {\"stage\": 3, $NOFF},
       \"zerotrain\": {\"memory_limit\": \"${LIM}MiB\", \"recompute\": \"auto\"}}" >"$T/auto.json"
sed -e 's/"memory_limit": "'$LIM'MiB", "recompute": "auto"/"recompute": "none"/' "$T/auto.json" >"$T/autonone.json"
S0=$S; S=128
run auto 1 gated 2 --summary "$T/auto.summary.json"; run autonone 1 gated 2
S=$S0
pred=$(sed -n 's/.*predicted activations \([0-9.]*\) MiB.*/\1/p' "$T/auto.log")
meas=$(/usr/bin/python3 -c 'import json,sys; print("%.1f" % (json.load(open(sys.argv[1]))["memory_peak"]["activations"] / 1048576))' "$T/auto.summary.json" 2>/dev/null)
rss=$(sed -n 's/.*peak RSS \([0-9.]*\)  (current\/peak).*/\1/p' "$T/auto.log")
if grep -q "recompute plan (auto).* full" "$T/auto.log" && [ -n "$pred" ] && [ "$pred" = "$meas" ] \
   && awk -v r="$rss" -v lim=$LIM 'BEGIN { exit !(r > 0 && r < lim) }' && same auto autonone; then ok
else bad "T5 auto plan under $LIM MiB: predicted $pred MiB, measured $meas MiB, peak RSS $rss MiB"; grep -i "plan\|error" "$T/auto.log"; fi
# optimizer state on NVMe / in RAM (stage 2), parameters on NVMe (stage 3), N=2
cfg o2nv 2 2 none "$NOFF"; run o2nv 2 relu
check_same o2nv relun2s0 "T5: optimizer offload to NVMe differs (stage 2)"
cfg o2ram 2 2 none "$ROFF"; run o2ram 2 relu
check_same o2ram relun2s0 "T5: optimizer offload to RAM differs (stage 2)"
cfg p3nv 2 3 none "$NOFF, $POFF"; run p3nv 2 relu
check_same p3nv relun2s0 "T5: parameter and optimizer offload to NVMe differ (stage 3)"

# ---- the other optimizers across stages (N=2) -------------------------------------------------
A8='{"type": "AdamW8bit", "params": {"lr": 3e-3, "min_8bit_size": 1024}}'
AF='{"type": "Adafactor", "params": {}}'
for o in a8 af; do
    opt=$A8; [ $o = af ] && opt=$AF
    cfg ${o}s0 2 0 none "" "$opt"; run ${o}s0 2 gated
    cfg ${o}s3 2 3 full "" "$opt"; run ${o}s3 2 gated
    check_same ${o}s3 ${o}s0 "T5 $o: stage 3 with recomputation differs from stage 0 (N=2)"
done

# the model-state report: measured = formula + buffers (T5's shared unit holds no Adafactor
# state of its own: its part is the minimal allocation, counted)
for r in afs0 afs3 a8s0 relun2s1; do
    line=$(grep -m1 "^model state per rank (" "$T/$r.log")
    m=$(echo "$line" | sed -n 's/.*measured \([0-9]*\) bytes.*= \([0-9]*\)$/\1 \2/p')
    if [ -n "$m" ] && [ "${m% *}" = "${m#* }" ]; then ok; else bad "T5 $r: $line"; fi
done

# ---- resume ----------------------------------------------------------------------------------
for n in res6 res3 res3b; do cfg $n 2 1 selective; done
run res6 2 relu 6 --checkpoint-dir "$T/ck6"
run res3 2 relu 3 --checkpoint-dir "$T/ck3"
run res3b 2 relu 6 --checkpoint-dir "$T/ck3" --resume
if grep -q "resumed from .* at step 3" "$T/res3b.log"; then check_same res3b res6 "T5: resuming at step 3 differs from not stopping"
else bad "T5: --resume did not resume"; tail -3 "$T/res3b.log"; fi

echo "t5: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
