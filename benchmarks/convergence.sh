#!/usr/bin/env bash
# convergence.sh - the optimizers on the default corpus: bert-mini masked-LM training for
# STEPS steps (default 3000) with AdamW, AdamW8bit (the same hyperparameters and schedule),
# Adafactor with Hugging Face's defaults (relative steps, its own schedule) and Adafactor with
# the T5 fine-tuning recipe (lr 1e-3, no relative step, no parameter scaling, AdamW's
# schedule). The Python documentation corpus is split by folder: tutorial/ and faq/ are held
# out (their own SentencePiece-encoded shards, fixed masks) and evaluated every EVAL steps.
# Writes benchmarks/results/convergence-<optimizer>.csv (step, loss, lr, grad_norm, the mean
# loss of the last 50 steps, eval_loss), convergence.png, and convergence.txt with the final losses: the mean training
# loss of the last 200 steps and the last held-out loss, each against AdamW's.
# Usage: benchmarks/convergence.sh [zerotrain]   (STEPS, EVAL, THREADS from the environment)
set -euo pipefail
ZT=${1:-build/zerotrain}
STEPS=${STEPS:-3000}
EVAL=${EVAL:-250}
THREADS=${THREADS:-2}
SRC=/usr/share/doc/python3.11/html/_sources
OUT=${OUT:-out/convergence}
RES=benchmarks/results
mkdir -p "$OUT" "$RES"

if [ ! -f "$OUT/train/manifest.json" ]; then
    train_in=()
    for p in "$SRC"/*; do
        case "$(basename "$p")" in tutorial|faq) ;; *) train_in+=("$p") ;; esac
    done
    "$ZT" prepare-data --input "${train_in[@]}" --tokenizer sentencepiece:8000 --out "$OUT/train"
    "$ZT" prepare-data --input "$SRC/tutorial" "$SRC/faq" --tokenizer "spm:$OUT/train/spm.model" \
        --out "$OUT/heldout"
fi

# optimizer sections; the rest of the config is examples/bert-mini.json's
base_sched='"scheduler": {"type": "WarmupDecayLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": 1e-3, "warmup_num_steps": 30, "warmup_type": "linear", "total_num_steps": "auto"}},'
declare -A OPT SCHED
OPT[adamw]='{"type": "AdamW", "params": {"lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01}}'
SCHED[adamw]=$base_sched
OPT[adamw8bit]='{"type": "AdamW8bit", "params": {"lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01}}'
SCHED[adamw8bit]=$base_sched
OPT[adafactor]='{"type": "Adafactor"}'
SCHED[adafactor]=''
OPT[adafactor-t5]='{"type": "Adafactor", "params": {"lr": 1e-3, "relative_step": false, "scale_parameter": false, "weight_decay": 0.01}}'
SCHED[adafactor-t5]=$base_sched

for o in adamw adamw8bit adafactor adafactor-t5; do
    [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $o "* ]] && continue
    cat >"$OUT/$o.json" <<EOF
{"train_micro_batch_size_per_gpu": 16, "gradient_accumulation_steps": 1,
 "optimizer": ${OPT[$o]}, ${SCHED[$o]}
 "gradient_clipping": 1.0, "steps_per_print": 100, "zero_optimization": {"stage": 0},
 "zerotrain": {"seed": 42}}
EOF
    echo "== $o"
    "$ZT" train --model bert-mini --data "$OUT/train" --config "$OUT/$o.json" --seq-len 128 \
        --steps "$STEPS" --threads "$THREADS" --eval-data "$OUT/heldout" --eval-every "$EVAL" \
        --eval-samples 512 --metrics "$OUT/$o.jsonl" 2>&1 | tee "$OUT/$o.log" | grep -E "^step|^optimizer state|error"
    /usr/bin/python3 - "$OUT/$o.jsonl" "$RES/convergence-$o.csv" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
with open(sys.argv[2], "w") as f:
    f.write("step,loss,lr,grad_norm,loss_mean50,eval_loss\n")
    for i, r in enumerate(rows):
        ev = r.get("eval_loss")
        w = [x["loss"] for x in rows[max(0, i - 49):i + 1]]
        f.write("%d,%.6f,%.6g,%.6g,%.6f,%s\n" % (r["step"], r["loss"], r["lr"], r["grad_norm"],
                                                 sum(w) / len(w), "" if ev is None else "%.6f" % ev))
EOF
done

/usr/bin/python3 - "$RES" "$STEPS" <<'EOF' | tee "$RES/convergence.txt"
import csv, os, sys
res, steps = sys.argv[1], int(sys.argv[2])
names = ["adamw", "adamw8bit", "adafactor", "adafactor-t5"]
data = {}
for n in names:
    p = os.path.join(res, "convergence-%s.csv" % n)
    if os.path.exists(p):
        data[n] = list(csv.DictReader(open(p)))
print("bert-mini, default corpus minus tutorial/ and faq/ (held out), seq 128, micro-batch 16, %d steps" % steps)
print("%-14s %18s %10s %16s %10s" % ("optimizer", "train (last 200)", "vs AdamW", "held-out (last)", "vs AdamW"))
ref = None
for n, rows in data.items():
    tail = [float(r["loss"]) for r in rows[-200:]]
    tr = sum(tail) / len(tail)
    ev = [float(r["eval_loss"]) for r in rows if r["eval_loss"]]
    last = ev[-1] if ev else float("nan")
    if n == "adamw":
        ref = (tr, last)
    rt = "%+.2f%%" % (100 * (tr / ref[0] - 1)) if ref else "-"
    re = "%+.2f%%" % (100 * (last / ref[1] - 1)) if ref else "-"
    print("%-14s %18.4f %10s %16.4f %10s" % (n, tr, rt, last, re))
EOF

if command -v gnuplot >/dev/null; then
    plots=""
    for o in adamw adamw8bit adafactor adafactor-t5; do
        f="$RES/convergence-$o.csv"
        [ -f "$f" ] || continue
        plots="$plots${plots:+, }'$f' using 1:5 with lines lw 1.5 title '$o (train, mean of 50 steps)', '< grep -v \",\$\" $f' using 1:6 with linespoints pt 7 ps 0.8 dt 2 title '$o (held-out)'"
    done
    gnuplot <<EOF
set terminal pngcairo size 1000,600
set output '$RES/convergence.png'
set datafile separator ','
set key autotitle columnhead
set title 'bert-mini masked-LM loss, default corpus (held-out: tutorial/, faq/)'
set xlabel 'optimizer step'
set ylabel 'loss'
set yrange [*:10]
set grid
plot $plots
EOF
fi
