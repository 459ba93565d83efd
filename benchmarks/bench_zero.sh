#!/usr/bin/env bash
# bench_zero.sh - step time of ZeRO stages 1-3 relative to stage 0, and rank 0's peak RSS,
# for a preset at N ranks with one thread each (ranks x threads <= cores).
# Usage: benchmarks/bench_zero.sh [PRESET] [RANKS] [STEPS]   (defaults: bert-medium 2 6)
set -eu
ZT=${ZT:-build/zerotrain}
PRESET=${1:-bert-medium}; N=${2:-2}; STEPS=${3:-6}
T=$(mktemp -d /tmp/zt_bench_zero.XXXXXX)
trap 'rm -rf "$T"' EXIT
echo "preset $PRESET, $N ranks x 1 thread, batch 4 per rank x seq 128, $STEPS steps (first dropped)," \
     "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-unset}"
printf '%-6s %12s %10s %14s\n' stage "step s (med)" "vs st. 0" "peak RSS MiB"
base=""
for st in 0 1 2 3; do
    echo "{\"train_micro_batch_size_per_gpu\": 4, \"zero_optimization\": {\"stage\": $st}}" >"$T/c.json"
    mpirun --allow-run-as-root --oversubscribe -np "$N" "$ZT" train --model "$PRESET" --data synthetic \
        --config "$T/c.json" --seq-len 128 --steps "$STEPS" --threads 1 --metrics "$T/m$st.jsonl" >"$T/log$st" 2>&1
    read -r med rss < <(/usr/bin/python3 - "$T/m$st.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])][1:]
print("%.3f %.0f" % (statistics.median(r["seconds"] for r in rows), max(r["memory"]["peak_rss"] for r in rows) / 2**20))
PY
)
    [ -z "$base" ] && base=$med
    printf '%-6s %12s %10s %14s\n' "$st" "$med" "$(echo "scale=3; $med / $base" | bc)" "$rss"
done
