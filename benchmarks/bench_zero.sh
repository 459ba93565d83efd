#!/usr/bin/env bash
# bench_zero.sh - step time of ZeRO stages 1-3 relative to stage 0 at N ranks with one thread
# each (ranks x threads <= cores), with stage 2's overlapped reductions, stage 3 with and
# without prefetch, and both ways of driving MPI progress (polling between kernels vs a
# progress thread). Rounds interleave the configurations so machine noise hits all alike;
# the median over every measured step of every round is reported, with min/max, rank 0's
# peak RSS and the communication time rank 0 waited for per step (what overlap did not hide).
# Usage: benchmarks/bench_zero.sh [PRESET] [RANKS] [STEPS] [ROUNDS]
#        (defaults: bert-medium 2 6 2; the first step of each run is dropped)
set -eu
ZT=${ZT:-build/zerotrain}
PRESET=${1:-bert-medium}; N=${2:-2}; STEPS=${3:-6}; ROUNDS=${4:-2}
T=$(mktemp -d /tmp/zt_bench_zero.XXXXXX)
trap 'rm -rf "$T"' EXIT
# one unit (a bert-medium layer) is ~3.2M floats: a 4M budget prefetches one unit ahead
configs=(
    "0|0||"
    "1|1||"
    "2|2|, \"overlap_comm\": false|"
    "2 overlap|2|, \"overlap_comm\": true|"
    "2 overlap thread|2|, \"overlap_comm\": true|\"comm_progress\": \"thread\""
    "3 no prefetch|3|, \"stage3_prefetch_bucket_size\": 0|"
    "3 prefetch 1 unit|3|, \"stage3_prefetch_bucket_size\": 4000000|"
    "3 prefetch thread|3|, \"stage3_prefetch_bucket_size\": 4000000|\"comm_progress\": \"thread\""
)
echo "preset $PRESET, $N ranks x 1 thread, batch 4 per rank x seq 128, $STEPS steps x $ROUNDS rounds" \
     "(first step of each run dropped), OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}" \
     "OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-unset}, $(nproc) cores, $(mpirun --version | head -1)"
for r in $(seq "$ROUNDS"); do
    for i in "${!configs[@]}"; do
        IFS='|' read -r label st zx tx <<<"${configs[$i]}"
        echo "{\"train_micro_batch_size_per_gpu\": 4, \"zero_optimization\": {\"stage\": $st $zx}," \
             "\"zerotrain\": {$tx}}" >"$T/c$i.json"
        mpirun --allow-run-as-root --oversubscribe -np "$N" "$ZT" train --model "$PRESET" \
            --data synthetic --config "$T/c$i.json" --seq-len 128 --steps "$STEPS" --threads 1 \
            --metrics "$T/m$i.$r.jsonl" >"$T/log$i.$r" 2>&1 || { cat "$T/log$i.$r"; exit 1; }
    done
done
printf '%-20s %9s %14s %9s %9s %11s\n' config "step s" "min..max" "vs st. 0" "RSS MiB" "waited s"
for i in "${!configs[@]}"; do
    IFS='|' read -r label st zx tx <<<"${configs[$i]}"
    /usr/bin/python3 - "$label" "$T" "$i" "$ROUNDS" "$STEPS" <<'PY'
import json, re, statistics, sys, os
label, T, i, rounds, steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
secs, rss, waited = [], 0, []
for r in range(1, rounds + 1):
    rows = [json.loads(l) for l in open("%s/m%s.%d.jsonl" % (T, i, r))][1:]
    secs += [x["seconds"] for x in rows]
    rss = max([rss] + [x["memory"]["peak_rss"] for x in rows])
    m = re.search(r"waited ([0-9.]+) s of", open("%s/log%s.%d" % (T, i, r)).read())
    waited.append(float(m.group(1)) if m else float("nan"))
med = statistics.median(secs)
base = os.path.join(T, "base")
if i == "0":
    open(base, "w").write(str(med))
b = float(open(base).read())
print("%-20s %9.3f %6.3f..%-6.3f %9.3f %9.0f %11.3f" % (label, med, min(secs), max(secs), med / b, rss / 2**20, statistics.median(waited)))
PY
done
