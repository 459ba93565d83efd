#!/usr/bin/env bash
# t5_pydoc.sh - t5-small pre-training (span corruption, Adafactor with its relative steps: T5's
# own recipe, the default for T5) on the default corpus with a T5 vocabulary (out/pydoc-t5:
# <pad> 0, </s> 1, <unk> 2, the t5-small config's pad and eos ids), inputs 128
# (targets 29), micro-batch 8, STEPS steps (default 400). Writes benchmarks/results/
# t5-small-pydoc.csv (step, loss, lr, grad_norm, the mean loss of the last 20 steps, seconds,
# tokens/s of the step), t5-small-pydoc.png and t5-small-pydoc.txt: the first and last mean
# losses and the median step's tokens/s (input tokens; with the targets' too).
# Usage: benchmarks/t5_pydoc.sh [zerotrain]   (STEPS, THREADS from the environment;
#        METRICS=FILE post-processes an earlier run's --metrics file instead of training)
set -euo pipefail
ZT=${1:-build/zerotrain}
STEPS=${STEPS:-400}
THREADS=${THREADS:-2}
DATA=${DATA:-out/pydoc-t5}
RES=${RES:-benchmarks/results}
mkdir -p "$RES"
if [ -z "${METRICS:-}" ]; then
    if [ ! -f "$DATA/manifest.json" ]; then
        "$ZT" prepare-data --input /usr/share/doc/python3.11/html/_sources \
            --tokenizer sentencepiece:8000 --model-type t5 --out "$DATA"
    fi
    METRICS=$RES/.t5-small-pydoc.jsonl
    "$ZT" train --model t5-small --data "$DATA" --config examples/t5-small.json --seq-len 128 \
        --steps "$STEPS" --threads "$THREADS" --metrics "$METRICS" 2>&1 | grep -E "^step|error|notice"
fi
/usr/bin/python3 - "$METRICS" "$RES" <<'PY' | tee "$RES/t5-small-pydoc.txt"
import json, os, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
res = sys.argv[2]
tgt = 29  # targets per sample at inputs 128 (span corruption)
with open(os.path.join(res, "t5-small-pydoc.csv"), "w") as f:
    f.write("step,loss,lr,grad_norm,loss_mean20,seconds,tokens_per_s\n")
    for i, r in enumerate(rows):
        w = [x["loss"] for x in rows[max(0, i - 19):i + 1]]
        f.write("%d,%.6f,%.6g,%.6g,%.6f,%.4f,%.1f\n" % (r["step"], r["loss"], r["lr"], r["grad_norm"],
                sum(w) / len(w), r["seconds"], r["tokens"] / r["seconds"]))
first = sum(r["loss"] for r in rows[:20]) / min(20, len(rows))
last = sum(r["loss"] for r in rows[-20:]) / min(20, len(rows))
med = statistics.median(r["seconds"] for r in (rows[5:] or rows))
tok = rows[-1]["tokens"]
print("t5-small, the default corpus, inputs 128 / targets %d, micro-batch 8, Adafactor (relative steps), %d steps" % (tgt, len(rows)))
print("mean loss of the first 20 steps %.4f, of the last 20 steps %.4f (%.1f%% lower)" % (first, last, 100 * (1 - last / first)))
print("median step %.3f s: %.0f input tokens/s (%.0f with the targets)" % (med, tok / med, tok * (128 + tgt) / 128 / med))
PY
if command -v gnuplot >/dev/null; then
    gnuplot <<EOF
set terminal pngcairo size 900,500
set output "$RES/t5-small-pydoc.png"
set datafile separator ","
set title "t5-small span corruption on the default corpus (Adafactor, inputs 128, micro-batch 8)"
set xlabel "step"; set ylabel "loss"; set grid
plot "$RES/t5-small-pydoc.csv" using 1:2 with lines lc rgb "#c0c0c0" title "loss", \
     "" using 1:5 with lines lw 2 lc rgb "#1f77b4" title "mean of 20 steps"
EOF
fi
