#!/usr/bin/env bash
# bench_lamb_recipe.sh - a bing_bert-style pretraining recipe at bert-base shape for a few
# steps: DeepSpeed's Lamb with DeepSpeedExamples' bing_bert parameters (no bias correction,
# the trust ratio clamped to [0.01, 0.3], weight decay 0.01), a large batch made by gradient
# accumulation, WarmupDecayLR; beside the same run with AdamW at BERT's lr 1e-4. bf16 (bing_bert
# runs fp16; bf16 is the faster half precision here). Writes benchmarks/results/lamb-recipe.txt
# (per-step losses of both, and the machine; losses, not a timing).
# Env: STEPS (8), MICRO (16), ACC (8), SEQ (128), LAMB_LR (4e-3: bing_bert's 4K-batch lr),
#      DATA (out/convergence/train: make bench-convergence's pydoc corpus), THREADS (2).
set -eu
cd "$(dirname "$0")/.."
ZT=${ZT:-build/zerotrain}
STEPS=${STEPS:-8}; MICRO=${MICRO:-16}; ACC=${ACC:-8}; SEQ=${SEQ:-128}; THREADS=${THREADS:-2}
LAMB_LR=${LAMB_LR:-4e-3}; ADAMW_LR=${ADAMW_LR:-1e-4}
DATA=${DATA:-out/convergence/train}
OUT=benchmarks/results/lamb-recipe.txt
[ -x "$ZT" ] || { echo "bench_lamb_recipe.sh: $ZT is not built" >&2; exit 1; }
if [ ! -f "$DATA/manifest.json" ] && [ ! -d "$DATA" ]; then
    "$ZT" prepare-data --input /usr/share/doc/python3.11/html/_sources --tokenizer sentencepiece:8000 \
        --out "$DATA"
fi
T=$(mktemp -d /tmp/zt_lamb_recipe.XXXXXX)
trap 'rm -rf "$T"' EXIT
WARM=$(( STEPS / 4 > 0 ? STEPS / 4 : 1 ))
conf() { # NAME OPTIMIZER_JSON LR
    cat >"$T/$1.json" <<EOF
{"train_batch_size": $((MICRO * ACC)), "train_micro_batch_size_per_gpu": $MICRO,
 "gradient_accumulation_steps": $ACC, "gradient_clipping": 1.0, "steps_per_print": 1,
 "bf16": {"enabled": true},
 "optimizer": $2,
 "scheduler": {"type": "WarmupDecayLR", "params": {"total_num_steps": $STEPS,
     "warmup_num_steps": $WARM, "warmup_min_lr": 0, "warmup_max_lr": $3}},
 "zero_optimization": {"stage": 1}}
EOF
}
conf lamb "{\"type\": \"Lamb\", \"params\": {\"lr\": $LAMB_LR, \"weight_decay\": 0.01, \"bias_correction\": false, \"max_coeff\": 0.3, \"min_coeff\": 0.01}}" "$LAMB_LR"
conf adamw "{\"type\": \"AdamW\", \"params\": {\"lr\": $ADAMW_LR, \"weight_decay\": 0.01}}" "$ADAMW_LR"
for o in lamb adamw; do
    echo "== $o" >&2
    OMP_NUM_THREADS=$THREADS "$ZT" train --model bert-base --data "$DATA" --config "$T/$o.json" \
        --seq-len "$SEQ" --steps "$STEPS" --threads "$THREADS" --metrics "$T/$o.jsonl" \
        >"$T/$o.log" 2>&1 || { tail -5 "$T/$o.log" >&2; exit 1; }
    grep -E "^zerotrain|^step $STEPS/" "$T/$o.log" >&2
done
{
    echo "bing_bert-style recipe at bert-base shape: $STEPS steps of $((MICRO * ACC)) sequences" \
         "(micro-batch $MICRO x $ACC accumulation), seq $SEQ, bf16, ZeRO stage 1, 1 rank x $THREADS threads,"
    echo "WarmupDecayLR ($WARM warm-up steps to the peak lr, then linear to 0 at step $STEPS), clipping 1, data $DATA."
    echo "Lamb: lr $LAMB_LR, weight_decay 0.01, bias_correction false, max_coeff 0.3, min_coeff 0.01 (bing_bert's)."
    echo "AdamW: lr $ADAMW_LR, weight_decay 0.01."
    echo "Machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores;" \
         "flags: $(grep -m1 flags /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|avx512f|avx512_bf16|amx_bf16)$' | tr '\n' ' ')"
    echo "Environment: OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-unset};" \
         "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown); $(date -u '+%F %T') UTC"
    echo
    /usr/bin/python3 - "$T/lamb.jsonl" "$T/adamw.jsonl" <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
print("| step | Lamb loss | Lamb lr | AdamW loss | AdamW lr |")
print("|---|---|---|---|---|")
for x, y in zip(a, b):
    print("| %d | %.4f | %.3g | %.4f | %.3g |" % (x["step"], x["loss"], x["lr"], y["loss"], y["lr"]))
PY
} >"$OUT"
cat "$OUT"
