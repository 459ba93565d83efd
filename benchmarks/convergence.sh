#!/usr/bin/env bash
# convergence.sh - the optimizers on the default corpus: bert-mini masked-LM training for
# STEPS steps (default 3000) with AdamW, AdamW8bit (the same hyperparameters and schedule),
# Adafactor with Hugging Face's defaults (relative steps, its own schedule), Adafactor with
# the T5 fine-tuning recipe (lr 1e-3, no relative step, no parameter scaling, AdamW's
# schedule), and AdamW / AdamW8bit again with a RoBERTa-style recipe (-warm), the latter also
# with the embedding tables' state in 8 bits (-warm-emb8; by default it stays fp32, as the HF
# Trainer keeps it), and the -warm recipe in bf16 and fp16 (warm-bf16, warm-fp16: "bf16" / "fp16": {"enabled": true},
# against adamw-warm). The Python documentation corpus is split by folder: tutorial/ and faq/
# are held out (their own SentencePiece-encoded shards, fixed masks) and evaluated every EVAL
# steps. ONLY="run ..." runs some; the table then mixes runs of different lengths (its steps
# column) and compares only runs of equal length.
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
RES=${RES:-benchmarks/results}
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

# optimizer and scheduler sections; the rest of the config is examples/bert-mini.json's.
# "-warm" is a RoBERTa-style recipe (lr 5e-4, betas (0.9, 0.98), eps 1e-6, 300 warmup steps)
# under which AdamW leaves the early plateau (the unigram level) that lr 1e-3 after 30 warmup
# steps (examples/bert-mini.json until issue 22) keeps it on for these 3000 steps.
sched() { # PEAK_LR WARMUP
    echo "\"scheduler\": {\"type\": \"WarmupDecayLR\", \"params\": {\"warmup_min_lr\": 0, \"warmup_max_lr\": $1, \"warmup_num_steps\": $2, \"warmup_type\": \"linear\", \"total_num_steps\": \"auto\"}},"
}
declare -A OPT SCHED EXTRA TOP
OPT[adamw]='{"type": "AdamW", "params": {"lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01}}'
SCHED[adamw]=$(sched 1e-3 30)
OPT[adamw8bit]='{"type": "AdamW8bit", "params": {"lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01}}'
SCHED[adamw8bit]=$(sched 1e-3 30)
OPT[adafactor]='{"type": "Adafactor"}'
SCHED[adafactor]=''
OPT[adafactor-t5]='{"type": "Adafactor", "params": {"lr": 1e-3, "relative_step": false, "scale_parameter": false, "weight_decay": 0.01}}'
SCHED[adafactor-t5]=$(sched 1e-3 30)
OPT[adamw-warm]='{"type": "AdamW", "params": {"lr": 5e-4, "betas": [0.9, 0.98], "eps": 1e-6, "weight_decay": 0.01}}'
SCHED[adamw-warm]=$(sched 5e-4 300)
OPT[adamw8bit-warm]='{"type": "AdamW8bit", "params": {"lr": 5e-4, "betas": [0.9, 0.98], "eps": 1e-6, "weight_decay": 0.01}}'
SCHED[adamw8bit-warm]=$(sched 5e-4 300)
# the same with the embedding tables' state in 8 bits too (the default keeps it in fp32)
OPT[adamw8bit-warm-emb8]=${OPT[adamw8bit-warm]}
SCHED[adamw8bit-warm-emb8]=$(sched 5e-4 300)
EXTRA[adamw8bit-warm-emb8]=', "fp32_optimizer_state": []'
# the -warm recipe in bf16 (DeepSpeed's bf16 optimizer: bf16 weights, fp32 master)
OPT[warm-bf16]=${OPT[adamw-warm]}
SCHED[warm-bf16]=${SCHED[adamw-warm]}
TOP[warm-bf16]='"bf16": {"enabled": true},'
# and in fp16 (DeepSpeed's fp16 optimizer: fp16 weights and gradients, dynamic loss scaling)
OPT[warm-fp16]=${OPT[adamw-warm]}
SCHED[warm-fp16]=${SCHED[adamw-warm]}
TOP[warm-fp16]='"fp16": {"enabled": true},'
RUNS="adamw adamw8bit adafactor adafactor-t5 adamw-warm adamw8bit-warm adamw8bit-warm-emb8 warm-bf16 warm-fp16"

for o in $RUNS; do
    [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $o "* ]] && continue
    cat >"$OUT/$o.json" <<EOF
{"train_micro_batch_size_per_gpu": 16, "gradient_accumulation_steps": 1,
 "optimizer": ${OPT[$o]}, ${SCHED[$o]} ${TOP[$o]:-}
 "gradient_clipping": 1.0, "steps_per_print": 100, "zero_optimization": {"stage": 0},
 "zerotrain": {"seed": 42${EXTRA[$o]:-}}}
EOF
    echo "== $o"
    "$ZT" train --model bert-mini --data "$OUT/train" --config "$OUT/$o.json" --seq-len 128 \
        --steps "$STEPS" --threads "$THREADS" --eval-data "$OUT/heldout" --eval-every "$EVAL" \
        --eval-samples 512 --metrics "$OUT/$o.jsonl" 2>&1 | tee "$OUT/$o.log" | grep -E "^step|^optimizer state|error"
    /usr/bin/python3 - "$OUT/$o.jsonl" "$RES/convergence-$o.csv" <<'EOF'
import json, sys
# (fp16's overflowed steps are skipped, not steps: their lines are left out)
rows = [r for r in map(json.loads, open(sys.argv[1])) if not r.get("overflow")]
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
# each run against the AdamW run of the same recipe
names = [("adamw", "adamw"), ("adamw8bit", "adamw"), ("adafactor", "adamw"),
         ("adafactor-t5", "adamw"), ("adamw-warm", "adamw-warm"),
         ("adamw8bit-warm", "adamw-warm"), ("adamw8bit-warm-emb8", "adamw-warm"),
         ("warm-bf16", "adamw-warm"), ("warm-fp16", "adamw-warm")]
final = {}
for n, _ in names:
    p = os.path.join(res, "convergence-%s.csv" % n)
    if not os.path.exists(p):
        continue
    rows = list(csv.DictReader(open(p)))
    tail = [float(r["loss"]) for r in rows[-200:]]
    ev = [float(r["eval_loss"]) for r in rows if r["eval_loss"]]
    final[n] = (sum(tail) / len(tail), ev[-1] if ev else float("nan"), len(rows))
print("bert-mini, default corpus minus tutorial/ and faq/ (held out), seq 128, micro-batch 16")
print("%-20s %6s %17s %10s %16s %10s" % ("run", "steps", "train (last 200)", "vs AdamW", "held-out (last)", "vs AdamW"))
for n, ref in names:
    if n not in final:
        continue
    tr, ev, k = final[n]
    rt = re = "-"
    if ref in final and ref != n and final[ref][2] == k:  # (only against a run as long)
        rt = "%+.2f%%" % (100 * (tr / final[ref][0] - 1))
        re = "%+.2f%%" % (100 * (ev / final[ref][1] - 1))
    print("%-20s %6d %17.4f %10s %16.4f %10s" % (n, k, tr, rt, ev, re))
print("(vs AdamW: against the AdamW run of the same recipe; adafactor and adafactor-t5 against "
      "adamw)")
EOF

if command -v gnuplot >/dev/null; then
    declare -A COLOR=([adamw]="#1f77b4" [adamw8bit]="#ff7f0e" [adafactor]="#2ca02c"
                      [adafactor-t5]="#d62728" [adamw-warm]="#9467bd" [adamw8bit-warm]="#8c564b"
                      [adamw8bit-warm-emb8]="#e377c2" [warm-bf16]="#bcbd22" [warm-fp16]="#17becf")
    declare -A DASH=([adamw]=1 [adamw8bit]=2 [adafactor]=1 [adafactor-t5]=1 [adamw-warm]=1
                     [adamw8bit-warm]=2 [adamw8bit-warm-emb8]=3 [warm-bf16]=2 [warm-fp16]=3)
    plots=""
    for o in $RUNS; do
        f="$RES/convergence-$o.csv"
        [ -f "$f" ] || continue
        style="lc rgb '${COLOR[$o]}' dt ${DASH[$o]}"
        plots="$plots${plots:+, }'$f' using 1:5 with lines lw 1.5 $style title '$o (train, mean of 50 steps)'"
        plots="$plots, '< grep -v \",\$\" $f' using 1:6 with linespoints pt 7 ps 0.8 $style notitle"
    done
    gnuplot <<EOF
set terminal pngcairo size 1000,600
set output '$RES/convergence.png'
set datafile separator ','
set key autotitle columnhead
set title 'bert-mini masked-LM loss, default corpus (lines: training, mean of 50 steps; points: held-out tutorial/, faq/)'
set xlabel 'optimizer step'
set ylabel 'loss'
set yrange [5.5:8]
set grid
plot $plots
EOF
fi
