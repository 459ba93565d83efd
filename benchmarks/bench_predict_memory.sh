#!/usr/bin/env bash
# bench_predict_memory.sh - peak RSS per rank of `zerotrain predict --task classify` (forward
# only: zt_config.inference) against `zerotrain finetune` training the same classifier with the
# same config, micro-batch and sequence length, for
#   s0      ZeRO stage 0, one rank, THREADS threads, no offload
#   s3-cpu  ZeRO stage 3, 2 ranks x 1 thread, "offload_param": {"device": "cpu"}
#   s3-nvme ZeRO stage 3, 2 ranks x 1 thread, "offload_param": {"device": "nvme"} in a temp dir
# (ranks x threads <= the 2 cores). The classifier is `zerotrain finetune --model MODEL --steps 1
# --save-model DIR` (random initialisation) with vocab.txt copied in. Every rank runs under
# /usr/bin/time -v (Maximum resident set size); finetune's --summary gives its own per-rank peak
# RSS too. Writes benchmarks/results/predict-memory.json and regenerates RESULTS.md.
#
# Usage: benchmarks/bench_predict_memory.sh   (environment: MODEL=bert-large BATCH=8 SEQ=128
#        ROWS=64 STEPS=3 REPEAT=2 THREADS=2 CONFIGS="s0 s3-cpu s3-nvme"
#        WORK=/var/tmp/zt-bench-finetune NVME_DIR=/var/tmp ZT=build/zerotrain)
set -eu
cd "$(dirname "$0")/.."
ZT=${ZT:-build/zerotrain}
PY=/usr/bin/python3
MODEL=${MODEL:-bert-large}; BATCH=${BATCH:-8}; SEQ=${SEQ:-128}; ROWS=${ROWS:-64}; STEPS=${STEPS:-3}
REPEAT=${REPEAT:-2}; THREADS=${THREADS:-2}; CONFIGS=${CONFIGS:-s0 s3-cpu s3-nvme}
WORK=${WORK:-/var/tmp/zt-bench-finetune}; NVME_DIR=${NVME_DIR:-/var/tmp}
MPI=(mpirun --allow-run-as-root --oversubscribe --bind-to none)
[ -x "$ZT" ] || { echo "bench_predict_memory.sh: $ZT is not built (make -j2 all)" >&2; exit 1; }
mkdir -p "$WORK"
T=$(mktemp -d /tmp/zt_bench_predict.XXXXXX)
SWAP=$(mktemp -d "$NVME_DIR/zt_bench_predict_swap.XXXXXX")
trap 'rm -rf "$T" "$SWAP"' EXIT
[ -s "$WORK/data/train.jsonl" ] || $PY examples/pydoc-topics/make_dataset.py "$WORK/data" >&2
[ -s "$WORK/vocab.txt" ] || $PY benchmarks/finetune_torch.py vocab --train "$WORK/data/train.jsonl" \
    --out "$WORK/vocab.txt"
head -n "$ROWS" "$WORK/data/eval.jsonl" >"$T/input.jsonl"
conf() { # stage, the zero_optimization extra
    echo "{\"train_micro_batch_size_per_gpu\": $BATCH, \"gradient_clipping\": 1.0,
 \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 2e-5, \"weight_decay\": 0.01}},
 \"zero_optimization\": {\"stage\": $1$2}}"
}
conf 0 "" >"$T/s0.json"
conf 3 ", \"offload_param\": {\"device\": \"cpu\"}" >"$T/s3-cpu.json"
conf 3 ", \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"$SWAP\"}" >"$T/s3-nvme.json"
DIR=$WORK/$MODEL-cls
if [ ! -s "$DIR/model.safetensors" ] || [ ! -s "$DIR/vocab.txt" ]; then
    echo "== making $DIR" >&2
    rm -rf "$DIR"
    "$ZT" finetune --model "$MODEL" --task classify --train "$WORK/data/train.jsonl" \
        --tokenizer "wordpiece:$WORK/vocab.txt" --config "$T/s0.json" --steps 1 --seq-len "$SEQ" \
        --threads "$THREADS" --save-model "$DIR" >"$T/make.log" 2>&1 || { cat "$T/make.log"; exit 1; }
    cp "$WORK/vocab.txt" "$DIR/vocab.txt"
fi

for c in $CONFIGS; do
    case $c in
        s0) LAUNCH=("${MPI[@]}" -np 1); TH=$THREADS ;;
        s3-*) LAUNCH=("${MPI[@]}" -np 2); TH=1 ;;
        *) echo "unknown configuration $c" >&2; exit 1 ;;
    esac
    for r in $(seq "$REPEAT"); do
        for cmd in predict finetune; do
            echo "== $c $cmd run $r" >&2
            if [ "$cmd" = predict ]; then
                ARGS=("$ZT" predict --model "$DIR" --task classify --input "$T/input.jsonl"
                      --output "$T/out.$c.$r.jsonl" --config "$T/$c.json" --seq-len "$SEQ" --threads "$TH")
            else
                ARGS=("$ZT" finetune --model "$DIR" --task classify --train "$WORK/data/train.jsonl"
                      --config "$T/$c.json" --steps "$STEPS" --seq-len "$SEQ" --threads "$TH"
                      --summary "$T/sum.$c.$r.json")
            fi
            start=$(date +%s.%N)
            "${LAUNCH[@]}" sh -c 'exec /usr/bin/time -v -o "$0.$OMPI_COMM_WORLD_RANK" "$@"' \
                "$T/time.$c.$cmd.$r" "${ARGS[@]}" >"$T/log.$c.$cmd.$r" 2>&1 ||
                { cat "$T/log.$c.$cmd.$r"; exit 1; }
            echo "$start $(date +%s.%N)" >"$T/wall.$c.$cmd.$r"
        done
    done
done

$PY - "$T" "$ZT" "$DIR" "$REPEAT" "$ROWS" "$STEPS" "$BATCH" "$SEQ" "$CONFIGS" "$MODEL" <<'PY'
import glob, json, os, statistics, sys
T, zt, d, repeat, rows, steps, batch, seq, configs, model = sys.argv[1:11]
sys.path.insert(0, "benchmarks")
import run as harness
labels = {"s0": "stage 0, 1 rank x 2 threads, no offload",
          "s3-cpu": "stage 3, 2 ranks x 1 thread, offload_param cpu",
          "s3-nvme": "stage 3, 2 ranks x 1 thread, offload_param nvme"}

def rss(path):
    for line in open(path):
        if "Maximum resident set size" in line:
            return int(line.rsplit(":", 1)[1]) * 1024

cfg = json.load(open(os.path.join(d, "config.json")))
res = {"kind": "predict-memory", "machine": harness.machine_facts(zt), "configs": []}
flags = open("/proc/cpuinfo").read().split("flags\t\t: ", 1)[1].split("\n", 1)[0].split()
res["machine"]["flags"] = {f: f in flags for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16")}
params = None
for c in configs.split():
    e = {"name": c, "label": labels[c], "config": json.load(open("%s/%s.json" % (T, c)))}
    for cmd in ("predict", "finetune"):
        e[cmd] = []
        for r in range(1, int(repeat) + 1):
            files = sorted(glob.glob("%s/time.%s.%s.%d.*" % (T, c, cmd, r)), key=lambda p: int(p.rsplit(".", 1)[1]))
            t0, t1 = map(float, open("%s/wall.%s.%s.%d" % (T, c, cmd, r)).read().split())
            x = {"run": r, "time_v_rss": [rss(p) for p in files], "wall": t1 - t0}
            log = open("%s/log.%s.%s.%d" % (T, c, cmd, r)).read()
            if cmd == "finetune":
                s = json.load(open("%s/sum.%s.%d.json" % (T, c, r)))
                x["own_rss"] = s["peak_rss_per_rank"]
                x["memory_peak"] = s["memory_peak"]
                params = s["parameters"]
            else:
                x["log"] = [l for l in log.splitlines() if l.startswith("predicted")]
            e[cmd].append(x)
        n = len(e[cmd][0]["time_v_rss"])
        e[cmd + "_median"] = [statistics.median(x["time_v_rss"][k] for x in e[cmd]) for k in range(n)]
    res["configs"].append(e)
res["setup"] = {"model": model, "parameters": params, "vocab": cfg["vocab_size"], "num_labels": len(cfg["id2label"]),
                "batch": int(batch), "seq": int(seq), "rows": int(rows), "steps": int(steps)}
json.dump(res, open("benchmarks/results/predict-memory.json", "w"), indent=1)
print("%s, %d parameters, micro-batch %s, seq %s; predict: %s rows, finetune: %s steps" % (
    model, params, batch, seq, rows, steps))
print("%-50s %-9s %-4s %-24s %s" % ("configuration", "command", "run", "peak RSS/rank MiB", "finetune's own"))
for e in res["configs"]:
    for cmd in ("predict", "finetune"):
        for x in e[cmd]:
            print("%-50s %-9s %-4d %-24s %s" % (e["label"], cmd, x["run"],
                  ", ".join("%.0f" % (v / 2**20) for v in x["time_v_rss"]),
                  ", ".join("%.0f" % (v / 2**20) for v in x.get("own_rss", []))))
    print("%-50s predict / finetune (medians, per rank): %s" % (e["label"], ", ".join(
        "%.0f / %.0f = %.3f" % (p / 2**20, f / 2**20, p / f) for p, f in zip(e["predict_median"], e["finetune_median"]))))
PY
$PY benchmarks/run.py --markdown-only
echo "wrote benchmarks/results/predict-memory.json and benchmarks/RESULTS.md" >&2
