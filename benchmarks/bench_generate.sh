#!/usr/bin/env bash
# bench_generate.sh - `zerotrain predict --task generate` (A) against the PyTorch reference
# tests/ref/generate_ref.py (B: transformers' T5 decoding with its key/value cache, greedy and
# beam search, in plain torch) on examples/debian-sections' inputs: one zerotrain-initialised
# PRESET folder (random weights, a SentencePiece vocabulary of 4000 pieces trained on the rows:
# few rows end early, so every run decodes about NEW tokens), the same rows, batches and
# threads. Per mode (greedy, beam search with BEAMS beams) the first pair's ids are compared,
# then A and B run interleaved, A B A B ..., RUNS times each; a run's figure is its generated
# tokens over the generation's seconds (encoder included, model load and tokenizing not: the
# summary line of each). The cache's speed-up: zerotrain cached against --no-cache, greedy,
# interleaved the same way. Prints every run, the medians and their ratios with the CPU, its
# flags and the BLAS environment; writes benchmarks/results/generate.json.
# Usage: benchmarks/bench_generate.sh   (environment: PRESET=t5-small ROWS=32 BATCH=16 SEQ=48
#        NEW=64 BEAMS=4 THREADS=2 RUNS=3 WORK=/var/tmp/zt-bench-generate ZT=build/zerotrain)
set -eu
cd "$(dirname "$0")/.."
ZT=${ZT:-build/zerotrain}
PY=/usr/bin/python3
PRESET=${PRESET:-t5-small}; ROWS=${ROWS:-32}; BATCH=${BATCH:-16}; SEQ=${SEQ:-48}; NEW=${NEW:-64}
BEAMS=${BEAMS:-4}; THREADS=${THREADS:-2}; RUNS=${RUNS:-3}; WORK=${WORK:-/var/tmp/zt-bench-generate}
[ -x "$ZT" ] || { echo "bench_generate.sh: $ZT is not built (make -j2 all)" >&2; exit 1; }
mkdir -p "$WORK"
[ -s "$WORK/data/train.jsonl" ] || $PY examples/debian-sections/make_dataset.py "$WORK/data" >&2
head -n "$ROWS" "$WORK/data/train.jsonl" >"$WORK/in.jsonl"
echo "{\"train_micro_batch_size_per_gpu\": $BATCH}" >"$WORK/ds.json"
export OMP_NUM_THREADS=$THREADS
if [ ! -s "$WORK/init/model.safetensors" ]; then
    echo '{"train_micro_batch_size_per_gpu": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0}}}' >"$WORK/lr0.json"
    "$ZT" finetune --model "$PRESET" --tokenizer sentencepiece:4000 --task text2text --train "$WORK/data/train.jsonl" \
        --seq-len "$SEQ" --target-len 8 --config "$WORK/lr0.json" --steps 1 --save-model "$WORK/init" \
        >"$WORK/init.log" 2>&1 || { cat "$WORK/init.log"; exit 1; }
fi
A=("$ZT" predict --model "$WORK/init" --task generate --input "$WORK/in.jsonl" --config "$WORK/ds.json"
   --seq-len "$SEQ" --max-new-tokens "$NEW" --threads "$THREADS" --with-ids)
B=($PY tests/ref/generate_ref.py --model "$WORK/init" --input "$WORK/in.jsonl" --batch-size "$BATCH"
   --seq-len "$SEQ" --max-new-tokens "$NEW" --threads "$THREADS" --time)
modes=("greedy:" "beam$BEAMS:--num-beams $BEAMS")
for m in "${modes[@]}"; do
    name=${m%%:*}; opts=${m#*:}
    for i in $(seq "$RUNS"); do
        echo "== $name pair $i: A (zerotrain)" >&2
        # shellcheck disable=SC2086
        "${A[@]}" $opts --output "$WORK/$name.a$i.jsonl" 2>"$WORK/$name.a$i.log" || { cat "$WORK/$name.a$i.log"; exit 1; }
        echo "== $name pair $i: B (PyTorch)" >&2
        # shellcheck disable=SC2086
        "${B[@]}" $opts --output "$WORK/$name.b$i.jsonl" 2>"$WORK/$name.b$i.log" || { cat "$WORK/$name.b$i.log"; exit 1; }
    done
done
for i in $(seq "$RUNS"); do
    echo "== cache pair $i: zerotrain cached, then --no-cache" >&2
    "${A[@]}" --output "$WORK/c.a$i.jsonl" 2>"$WORK/c.a$i.log" || { cat "$WORK/c.a$i.log"; exit 1; }
    "${A[@]}" --no-cache --output "$WORK/c.u$i.jsonl" 2>"$WORK/c.u$i.log" || { cat "$WORK/c.u$i.log"; exit 1; }
done
$PY - "$WORK" "$RUNS" "$ZT" "$PRESET" "$BEAMS" "$NEW" "$BATCH" "$SEQ" "$THREADS" <<'PY'
import json, re, statistics, sys
sys.path.insert(0, "benchmarks")
import run as harness
W, runs, zt, preset, beams, new, batch, seq, threads = sys.argv[1:]
runs = int(runs)
def rate(log):  # "... (N tokens/s of generation ..." (A) or "... : N tokens/s" (B)
    t = open(log).read()
    m = re.search(r"\(([0-9.]+) tokens/s of generation", t) or re.search(r": ([0-9.]+) tokens/s", t)
    assert m, (log, t[-300:])
    return float(m.group(1))
def ids(path):
    return [json.loads(l)["ids"] for l in open(path)]
mach = harness.machine_facts(zt)
flags = open("/proc/cpuinfo").read().split("flags\t\t: ", 1)[1].split("\n", 1)[0].split()
mach["flags"] = {f: f in flags for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16")}
res = {"kind": "generate", "machine": mach, "model": preset, "batch": int(batch), "seq": int(seq),
       "max_new_tokens": int(new), "threads": int(threads), "modes": {}}
print("%s; flags %s; %s" % (mach.get("cpu"), " ".join("%s=%s" % (k, "yes" if v else "no") for k, v in mach["flags"].items()),
      ", ".join("%s=%s" % kv for kv in sorted(mach["env"].items())) or "OPENBLAS_* unset"))
print("%s, %d rows in batches of %d, inputs <= %s tokens, max_new_tokens %s, %s threads" % (
    preset, sum(1 for _ in open(W + "/in.jsonl")), int(batch), seq, new, threads))
for name in ("greedy", "beam" + beams):
    A = [rate("%s/%s.a%d.log" % (W, name, i)) for i in range(1, runs + 1)]
    B = [rate("%s/%s.b%d.log" % (W, name, i)) for i in range(1, runs + 1)]
    ia, ib = ids("%s/%s.a1.jsonl" % (W, name)), ids("%s/%s.b1.jsonl" % (W, name))
    same = sum(x == y for x, y in zip(ia, ib))
    toks = sum(map(len, ia))
    r = {"zerotrain": A, "pytorch": B, "rows_identical": same, "rows": len(ia), "tokens": toks,
         "median_zerotrain": statistics.median(A), "median_pytorch": statistics.median(B),
         "ratio_of_medians": statistics.median(A) / statistics.median(B),
         "median_pair_ratio": statistics.median(a / b for a, b in zip(A, B))}
    res["modes"][name] = r
    print("%s: %d of %d rows' ids identical to the reference's, %d tokens" % (name, same, len(ia), toks))
    for i, (a, b) in enumerate(zip(A, B), 1):
        print("  run %d  zerotrain %7.1f tokens/s  PyTorch %7.1f tokens/s  %.2fx" % (i, a, b, a / b))
    print("  medians: zerotrain %.1f, PyTorch %.1f tokens/s; ratio of medians %.2fx, median of pair ratios %.2fx" % (
        r["median_zerotrain"], r["median_pytorch"], r["ratio_of_medians"], r["median_pair_ratio"]))
C = [rate("%s/c.a%d.log" % (W, i)) for i in range(1, runs + 1)]
U = [rate("%s/c.u%d.log" % (W, i)) for i in range(1, runs + 1)]
same = ids(W + "/c.a1.jsonl") == ids(W + "/c.u1.jsonl")
res["cache"] = {"cached": C, "uncached": U, "ids_identical": same,
                "speedup_of_medians": statistics.median(C) / statistics.median(U)}
print("KV cache (greedy, %s new tokens): cached %s, uncached %s tokens/s; ids identical: %s; speed-up %.2fx" % (
    new, " ".join("%.1f" % x for x in C), " ".join("%.1f" % x for x in U), same, res["cache"]["speedup_of_medians"]))
json.dump(res, open("benchmarks/results/generate.json", "w"), indent=1)
PY
echo "wrote benchmarks/results/generate.json" >&2
