#!/usr/bin/env bash
# test_recompute.sh - activation recomputation on a 6-layer BERT with dropout on:
#  - every mode gives the same bits as keeping every activation, at N=1 and N=2 with ZeRO
#    stage 3: full, selective, every-k (segments), number_checkpoints, full with the layer
#    inputs offloaded to the RAM pool and to NVMe, and the plans of "auto";
#  - the measured activation peak of each mode against the per-layer formula of
#    docs/architecture.md section 12, within 10%;
#  - the "auto" planner across several limits: each plan's activations fit what it predicts,
#    the peak RSS stays under the limit, less memory means no fewer recomputed FLOPs, a plan
#    at N=2 gives the bits of keeping everything there, a limit that only recomputing with
#    the inputs on NVMe meets gets such a plan, and a limit below what recomputing every
#    layer needs fails before training, saying so.
# RECOMPUTE_LONG=1 adds stages 0-2 at N=2 and stage 3 at N=3, and an auto plan at N=3.
# Usage: tests/test_recompute.sh [zerotrain]
set -u
ZT=${1:-build/zerotrain}
PY=/usr/bin/python3
SUITE=recompute . "$(dirname "$0")/lib.sh"
[ -n "${KEEP_T:-}" ] && trap - EXIT && echo "keeping $T"  # KEEP_T=1: keep the folder to inspect
MPI="mpirun --allow-run-as-root --oversubscribe"
H=64 A=2 S=64 MB=8
model() { # FILE LAYERS
    echo "{\"model_type\": \"bert\", \"vocab_size\": 512, \"hidden_size\": $H,
           \"num_hidden_layers\": $2, \"num_attention_heads\": $A, \"intermediate_size\": $((4 * H)),
           \"hidden_act\": \"gelu\", \"max_position_embeddings\": 128, \"type_vocab_size\": 2,
           \"hidden_dropout_prob\": 0.1, \"attention_probs_dropout_prob\": 0.1}" >"$1"
}
model "$T/l6.json" 6; model "$T/l2.json" 2
mkdir -p "$T/nv"
cfg() { # NAME NP RECOMPUTE [activation_checkpointing members] [zerotrain members] [nvme]
    local nv="" ac="" zx=""
    [ -n "${4-}" ] && ac="\"activation_checkpointing\": {$4},"
    [ -n "${5-}" ] && zx=", $5"
    [ "${6-nvme}" = nvme ] && nv="\"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"$T/nv\"},"
    echo "{\"train_batch_size\": $((MB * $2)), \"train_micro_batch_size_per_gpu\": $MB,
           \"steps_per_print\": 1,
           \"zero_optimization\": {\"stage\": ${STAGE:-3}, $nv \"stage3_param_persistence_threshold\": 0},
           $ac \"zerotrain\": {\"recompute\": \"$3\" $zx},
           \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-3}}}" >"$T/$1.json"
}
run() { # NAME NP [MODEL]
    $MPI -np "$2" "$ZT" train --model "$T/${3:-l6}.json" --data synthetic --config "$T/$1.json" \
        --seq-len $S --steps 3 --threads 1 --seed 5 --save-model "$T/$1" \
        --summary "$T/$1.summary.json" >"$T/$1.log" 2>&1
}
same() { cmp -s "$T/$1/model.safetensors" "$T/$2/model.safetensors"; }
act() { "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["memory_peak"]["activations"])' \
            "$T/$1.summary.json" 2>/dev/null; }

# ---- bits: every mode against keeping everything ------------------------------------------
for np in 1 2; do
    cfg n${np}none $np none; cfg n${np}full $np full; cfg n${np}sel $np selective
    cfg n${np}ek2 $np every-k:2; cfg n${np}ek4 $np every-k:4
    cfg n${np}nck $np full '"number_checkpoints": 2'
    cfg n${np}offnv $np full '"cpu_checkpointing": true'
    cfg n${np}offram $np full '"cpu_checkpointing": true' "" ram
    cfg n${np}ek2off $np every-k:2 '"cpu_checkpointing": true, "profile": true'
    names="none full sel ek2 ek4 nck offnv offram ek2off"
    for m in $names; do run n$np$m $np; done
    for m in $names; do
        if [ $m != none ] && ! same n${np}none n$np$m; then
            bad "N=$np recompute $m differs from none"; tail -3 "$T/n$np$m.log"
        else ok; fi
    done
done
# the profile: segments of 2 recompute 4 of the 6 layers (the last segment is still there)
rows=$(grep -c "^                    layer\.[0-9]* *segment " "$T/n1ek2off.log")
if grep -q "^recompute profile" "$T/n1ek2off.log" && [ "$rows" = 4 ]; then ok
else bad "recompute profile: $rows rows"; grep -A8 "recompute profile" "$T/n1ek2off.log"; fi
# the offloaded inputs went to NVMe and left nothing behind
if [ -z "$(ls -A "$T/nv")" ]; then ok; else bad "files left in the swap folder: $(ls "$T/nv")"; fi

# the "auto" planner's configs: placement pinned (optimizer, gradients and parameters all
# on NVMe) so that only the recomputation plan moves with the limit
PMB=16
plan_cfg() { # NAME LIMIT [NP]
    echo "{\"train_batch_size\": $((PMB * ${3:-1})), \"train_micro_batch_size_per_gpu\": $PMB, \"steps_per_print\": 1,
           \"zero_optimization\": {\"stage\": 3, \"stage3_param_persistence_threshold\": 0,
             \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"$T/nv\"},
             \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"$T/nv\"}},
           \"zerotrain\": {\"recompute\": \"auto\", \"memory_limit\": \"$2\", \"offload_gradients\": true},
           \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-3}}}" >"$T/$1.json"
}
# RECOMPUTE_LONG=1 (make test-long): stages 0-2 at N=2 and stage 3 at N=3 too
if [ -n "${RECOMPUTE_LONG:-}" ]; then
    for sn in "0 2" "1 2" "2 2" "3 3"; do
        set -- $sn; st=$1; np=$2; nv=nvme; [ "$st" = 0 ] && nv=ram
        for m in none full sel ek2 offload; do
            case $m in
                none) STAGE=$st cfg l$st$np$m $np none "" "" $nv ;;
                full) STAGE=$st cfg l$st$np$m $np full "" "" $nv ;;
                sel) STAGE=$st cfg l$st$np$m $np selective "" "" $nv ;;
                ek2) STAGE=$st cfg l$st$np$m $np every-k:2 "" "" $nv ;;
                offload) STAGE=$st cfg l$st$np$m $np every-k:3 '"cpu_checkpointing": true' "" $nv ;;
            esac
            run l$st$np$m $np
            if [ $m != none ] && ! same l$st${np}none l$st$np$m; then
                bad "stage $st N=$np recompute $m differs from none"; tail -3 "$T/l$st$np$m.log"
            else ok; fi
        done
    done
    # the planner at N=3: a plan under a limit that makes it recompute, against keeping
    # everything there
    plan_cfg r0 8GiB 3; run r0 3
    pk=$(sed -n 's/.*= \([0-9]*\) MiB predicted peak.*/\1/p' "$T/r0.log")
    ac=$(sed -n 's/^recompute plan.*predicted activations \([0-9.]*\) MiB.*/\1/p' "$T/r0.log")
    plan_cfg r2 "$(awk -v p="$pk" -v a="$ac" 'BEGIN { printf "%d", p - 0.4 * a }')MiB" 3; run r2 3
    pct=$(sed -n 's/^recompute plan.*recomputed FLOPs \([0-9.]*\)% .*/\1/p' "$T/r2.log")
    if [ -n "$pct" ] && awk -v c="$pct" 'BEGIN { exit !(c > 0) }' && same r0 r2; then ok
    else bad "auto at N=3: recomputed ${pct:-?}% or bits differ"; grep -h "plan\|error" "$T/r2.log"; fi
fi

# ---- activation peak per mode against the formula ------------------------------------------
cfg f2none 1 none; cfg f2full 1 full; cfg f2sel 1 selective
run f2none 1 l2; run f2full 1 l2; run f2sel 1 l2
if "$PY" - "$H" "$A" "$S" "$MB" "$(act f2none)" "$(act f2sel)" "$(act f2full)" \
    "$(act n1none)" "$(act n1sel)" "$(act n1full)" "$(act n1ek2)" "$(act n1offnv)" <<'EOF'
import sys
h, a, s, b = (int(x) for x in sys.argv[1:5])
n2, s2, f2, n6, s6, f6, k6, o6 = (float(x) for x in sys.argv[5:13])
tok = b * s
# docs/architecture.md section 12, bytes per token per layer (fp32, dropout masks as bits)
none = 64 * h + 4 * a * s + 16 + (2 * h + a * s) / 8
sel = 44 * h + 16 + 2 * h / 8
full = 4 * h
ws = none                      # one layer's working set
checks = [
    ("none per layer", (n6 - n2) / 4, tok * none),
    ("selective per layer", (s6 - s2) / 4, tok * sel),
    ("full per layer", (f6 - f2) / 4, tok * full),
    ("full vs none, 6 layers", n6 - f6, tok * (6 * none - 6 * full - ws)),
    ("selective vs none, 6 layers", n6 - s6, tok * 5 * (none - sel)),
    ("every-k:2 vs none, 6 layers", n6 - k6, tok * (6 * none - 3 * full - 2 * ws)),
    ("full+offload vs none, 6 layers", n6 - o6, tok * (6 * none - 3 * full - ws)),
]
bad = 0
for name, got, want in checks:
    err = abs(got - want) / want
    print("%-32s measured %10.0f formula %10.0f  (%.2f%%)" % (name, got, want, 100 * err))
    bad += err > 0.10
sys.exit(bad)
EOF
then ok; else bad "activation peaks against the formula"; fi

# ---- the "auto" planner across limits (plan_cfg above) ---------------------------------------
plan_cfg pbig 8GiB; run pbig 1
peak=$(sed -n 's/.*= \([0-9]*\) MiB predicted peak.*/\1/p' "$T/pbig.log")
acts=$(sed -n 's/^recompute plan.*predicted activations \([0-9.]*\) MiB.*/\1/p' "$T/pbig.log")
if [ -n "$peak" ] && [ -n "$acts" ] && grep -q "embeddings..mlm_head keep" "$T/pbig.log"; then ok
else bad "auto with room to spare keeps everything"; grep -h "plan\|error" "$T/pbig.log"; fi
prev=-1; i=0
for frac in 0.2 0.4 0.6; do
    lim=$(awk -v p="$peak" -v a="$acts" -v f="$frac" 'BEGIN { printf "%d", p - f * a }')
    i=$((i + 1)); plan_cfg p$i "${lim}MiB"; run p$i 1
    pred=$(sed -n 's/^activations: predicted \([0-9.]*\) MiB, measured peak \([0-9.]*\) MiB.*/\1/p' "$T/p$i.log")
    meas=$(sed -n 's/^activations: predicted \([0-9.]*\) MiB, measured peak \([0-9.]*\) MiB.*/\2/p' "$T/p$i.log")
    ppk=$(sed -n 's/.*= \([0-9]*\) MiB predicted peak.*/\1/p' "$T/p$i.log")
    rss=$(sed -n 's/.*peak RSS \([0-9.]*\)  (current.*/\1/p' "$T/p$i.log")
    pct=$(sed -n 's/^recompute plan.*recomputed FLOPs \([0-9.]*\)% .*/\1/p' "$T/p$i.log")
    if [ -n "$pred" ] && [ -n "$meas" ] && [ -n "$ppk" ] && [ -n "$rss" ] && [ -n "$pct" ] &&
       awk -v p="$pred" -v m="$meas" -v pk="$ppk" -v l="$lim" -v r="$rss" -v c="$pct" -v q="$prev" \
           'BEGIN { exit !(m <= p && pk <= l && r <= l && c >= q && c > 0) }' && same pbig p$i; then ok
    else bad "auto at $lim MiB: predicted $pred measured $meas MiB, peak $ppk/$rss of $lim MiB, recomputed $pct% (before $prev%)"
         grep -h "plan\|error" "$T/p$i.log"; fi
    prev=${pct:-0}
done
# N=2: a plan under the middle limit against keeping everything at N=2
plan_cfg q0 8GiB 2; plan_cfg q2 "$(awk -v p="$peak" -v a="$acts" 'BEGIN { printf "%d", p - 0.4 * a }')MiB" 2
run q0 2; run q2 2
pct=$(sed -n 's/^recompute plan.*recomputed FLOPs \([0-9.]*\)% .*/\1/p' "$T/q2.log")
if [ -n "$pct" ] && awk -v c="$pct" 'BEGIN { exit !(c > 0) }' && same q0 q2; then ok
else bad "auto at N=2: recomputed ${pct:-?}% or bits differ"; grep -h "plan\|error" "$T/q2.log"; fi
lim=$(awk -v p="$peak" -v a="$acts" 'BEGIN { printf "%d", p - a }')
plan_cfg ptiny "${lim}MiB"; run ptiny 1; st=$?
if [ $st -ne 0 ] && grep -q "is too small for recompute \"auto\": with every layer recomputed" "$T/ptiny.log" &&
   grep -q "one layer's working set is" "$T/ptiny.log" && ! grep -q "^step 1" "$T/ptiny.log"; then ok
else bad "auto below one layer's working set (${lim} MiB): status $st"; head -3 "$T/ptiny.log"; fi

# the planner's offload choice: a 12-layer model with small I/O buffers, a limit between what
# recomputing every layer with its input on NVMe needs and what it needs with the inputs in
# RAM (2.25 MiB apart): the plan must offload inputs, and keep the bits
model "$T/l12.json" 12
oplan_cfg() { # NAME LIMIT
    plan_cfg "$1" "$2"
    sed -i 's/"zerotrain":/"aio": {"block_size": 65536, "queue_depth": 2}, "zerotrain":/' "$T/$1.json"
}
oplan_cfg okeep 8GiB; run okeep 1 l12
oplan_cfg otiny 1MiB; run otiny 1 l12
need=$(sed -n 's/.*still need \([0-9.]*\) MiB .*/\1/p' "$T/otiny.log")
rest=$(sed -n 's/.*the rest at least \([0-9.]*\) MiB.*/\1/p' "$T/otiny.log")
lim=$(awk -v n="$need" -v r="$rest" 'BEGIN { printf "%d", (n + r + 0.6) * 1048576 }')
oplan_cfg ooff "$lim"; run ooff 1 l12
pred=$(sed -n 's/^activations: predicted \([0-9.]*\) MiB, measured peak \([0-9.]*\) MiB.*/\1/p' "$T/ooff.log")
meas=$(sed -n 's/^activations: predicted \([0-9.]*\) MiB, measured peak \([0-9.]*\) MiB.*/\2/p' "$T/ooff.log")
if [ -n "$need" ] && [ -n "$rest" ] && grep -q "^recompute plan.*full+offload" "$T/ooff.log" &&
   [ -n "$pred" ] && awk -v p="$pred" -v m="$meas" 'BEGIN { exit !(m <= p) }' &&
   same okeep ooff; then ok
else bad "auto between the offload and the full floors ($lim bytes): no offload, or bits differ"
     grep -h "plan\|error\|activations:" "$T/otiny.log" "$T/ooff.log"; fi

echo "recompute: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
