#!/usr/bin/env bash
# bench_text2text.sh - `zerotrain finetune --task text2text` (A) against the PyTorch peer
# benchmarks/text2text_torch.py (B: tests/ref/t5_ref.py's T5ForConditionalGeneration in plain
# torch) on examples/debian-sections' rows: one zerotrain-initialised folder (PRESET with a
# SentencePiece vocabulary of 4000 pieces trained on the rows, dropout 0 in both), the same
# ids, order and padded micro-batches, AdamW lr 1e-4 (no weight decay), clipping 1, the same
# threads. A parity run first (the losses of 4 steps side by side), then A and B interleaved,
# A B A B ..., RUNS times each; a run's figure is its tokens/s (real input + target tokens of
# the steps after WARMUP over their seconds: --metrics for A, the peer's JSON for B). Prints
# every run, the medians and the ratio of the medians, with the CPU, its flags and the BLAS
# environment; writes benchmarks/results/text2text.json (text2text-bf16.json).
# PRECISION=bf16: both in bf16 mixed precision as each one's users run it -- zerotrain with
# DeepSpeed's "bf16": {"enabled": true} (bf16 weights and activations, fp32 master), PyTorch
# with the HF Trainer's --bf16 on a CPU (torch.autocast(cpu, bfloat16), fp32 weights); the
# parity run stays in fp32 (their roundings differ).
# Usage: benchmarks/bench_text2text.sh   (environment: PRESET=t5-small BATCH=32 SEQ=48 TLEN=8
#        PRECISION=fp32 THREADS=2 STEPS=30 WARMUP=5 RUNS=5 WORK=/var/tmp/zt-bench-text2text ZT=build/zerotrain)
set -eu
cd "$(dirname "$0")/.."
ZT=${ZT:-build/zerotrain}
PY=/usr/bin/python3
PRESET=${PRESET:-t5-small}; BATCH=${BATCH:-32}; SEQ=${SEQ:-48}; TLEN=${TLEN:-8}; THREADS=${THREADS:-2}
STEPS=${STEPS:-30}; WARMUP=${WARMUP:-5}; RUNS=${RUNS:-5}; WORK=${WORK:-/var/tmp/zt-bench-text2text}
PRECISION=${PRECISION:-fp32}
case $PRECISION in
    fp32) HALF=""; BF=(); OUT=text2text ;;
    bf16) HALF=', "bf16": {"enabled": true}'; BF=(--bf16); OUT=text2text-bf16 ;;
    *) echo "bench_text2text.sh: PRECISION must be fp32 or bf16, not '$PRECISION'" >&2; exit 2 ;;
esac
[ -x "$ZT" ] || { echo "bench_text2text.sh: $ZT is not built (make -j2 all)" >&2; exit 1; }
mkdir -p "$WORK"
[ -s "$WORK/data/train.jsonl" ] || $PY examples/debian-sections/make_dataset.py "$WORK/data" >&2
cat >"$WORK/ds.json" <<EOF
{"train_micro_batch_size_per_gpu": $BATCH, "gradient_clipping": 1.0,
 "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.0}}}
EOF
sed '$ s/}$/'"$HALF"'}/' "$WORK/ds.json" >"$WORK/ds_run.json" # the timed runs' precision
export OMP_NUM_THREADS=$THREADS
ARGS=(--task text2text --train "$WORK/data/train.jsonl" --seq-len "$SEQ" --target-len "$TLEN")
if [ ! -s "$WORK/init/model.safetensors" ]; then
    "$ZT" finetune --model "$PRESET" --tokenizer sentencepiece:4000 "${ARGS[@]}" --config "$WORK/ds.json" --steps 1 \
        --save-model "$WORK/init" >"$WORK/init.log" 2>&1 || { cat "$WORK/init.log"; exit 1; }
    sed -i -E 's/"dropout_rate": [0-9.e-]+/"dropout_rate": 0.0/' "$WORK/init/config.json"
fi
A=("$ZT" finetune --model "$WORK/init" "${ARGS[@]}" --config "$WORK/ds_run.json" --steps "$STEPS"
   --warmup "$WARMUP" --threads "$THREADS")
B0=($PY benchmarks/text2text_torch.py --model "$WORK/init" --train "$WORK/data/train.jsonl" --batch "$BATCH"
    --seq "$SEQ" --target-len "$TLEN" --steps "$STEPS" --warmup "$WARMUP" --threads "$THREADS")
B=("${B0[@]}" "${BF[@]}")
echo "== parity: 4 steps each from $WORK/init" >&2
"$ZT" finetune --model "$WORK/init" "${ARGS[@]}" --config "$WORK/ds.json" --steps 4 --threads "$THREADS" --metrics "$WORK/parity_a.jsonl" \
    >"$WORK/parity_a.log" 2>&1 || { cat "$WORK/parity_a.log"; exit 1; }
"${B0[@]}" --steps 4 --warmup 1 >"$WORK/parity_b.json"
for i in $(seq "$RUNS"); do
    echo "== pair $i: A (zerotrain)" >&2
    "${A[@]}" --metrics "$WORK/a$i.jsonl" >"$WORK/a$i.log" 2>&1 || { cat "$WORK/a$i.log"; exit 1; }
    echo "== pair $i: B (PyTorch)" >&2
    "${B[@]}" >"$WORK/b$i.json"
done
$PY - "$WORK" "$RUNS" "$WARMUP" "$ZT" "$PRESET" "$OUT" <<'PY'
import json, statistics, sys
sys.path.insert(0, "benchmarks")
import run as harness
W, runs, warmup, zt, preset, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
def zt_rate(path):
    m = [json.loads(l) for l in open(path)][warmup:]
    return sum(r["tokens"] for r in m) / sum(r["seconds"] for r in m)
pa = [json.loads(l)["loss"] for l in open(W + "/parity_a.jsonl")]
pb = [s["loss"] for s in json.load(open(W + "/parity_b.json"))["steps"]]
A = [zt_rate("%s/a%d.jsonl" % (W, i)) for i in range(1, runs + 1)]
B = [json.load(open("%s/b%d.json" % (W, i)))["tokens_per_s"] for i in range(1, runs + 1)]
mach = harness.machine_facts(zt)
flags = open("/proc/cpuinfo").read().split("flags\t\t: ", 1)[1].split("\n", 1)[0].split()
mach["flags"] = {f: f in flags for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16")}
b1 = json.load(open(W + "/b1.json"))
res = {"kind": "text2text", "name": out, "precision": b1.get("precision", "fp32"), "machine": mach, "model": preset, "d_model": b1["d_model"], "vocab": b1["vocab"],
       "batch": b1["batch"], "seq": b1["seq"], "target_len": b1["target_len"], "threads": b1["threads"],
       "parity": list(zip(pa, pb)), "zerotrain": A, "pytorch": B,
       "median_zerotrain": statistics.median(A), "median_pytorch": statistics.median(B),
       "ratio_of_medians": statistics.median(A) / statistics.median(B),
       "median_pair_ratio": statistics.median(a / b for a, b in zip(A, B))}
json.dump(res, open("benchmarks/results/%s.json" % out, "w"), indent=1)
print("%s; flags %s; %s" % (mach.get("cpu"), " ".join("%s=%s" % (k, "yes" if v else "no") for k, v in mach["flags"].items()),
      ", ".join("%s=%s" % kv for kv in sorted(mach["env"].items())) or "OPENBLAS_* unset"))
print("precision: %s" % res["precision"])
print("%s (d_model %d, vocab %d), micro-batch %d, inputs <= %d, targets <= %d tokens, %d threads" % (
    preset, res["d_model"], res["vocab"], res["batch"], res["seq"], res["target_len"], res["threads"]))
print("parity (dropout 0, same start): " + ", ".join("%.7f / %.7f" % p for p in res["parity"]))
for i, (a, b) in enumerate(zip(A, B), 1):
    print("run %d  zerotrain %7.0f tokens/s  PyTorch %7.0f tokens/s  %.2fx" % (i, a, b, a / b))
print("medians: zerotrain %.0f, PyTorch %.0f tokens/s; ratio of medians %.2fx, median of pair ratios %.2fx" % (
    res["median_zerotrain"], res["median_pytorch"], res["ratio_of_medians"], res["median_pair_ratio"]))
PY
echo "wrote benchmarks/results/$OUT.json" >&2
