#!/usr/bin/env bash
# bench_finetune.sh - `zerotrain finetune --task classify` (A) against an independent PyTorch
# BertForSequenceClassification (B, benchmarks/finetune_torch.py) on the same rows: the same
# token ids (checked against zerotrain's own tokenizer first), the same order and the same
# micro-batches padded to their longest row, the same AdamW, clipping and weight-decay rule,
# dropout 0.1 in both, the same threads (torch.set_num_threads = --threads, OMP_NUM_THREADS
# for both). A parity run first: both start from one zerotrain-initialised folder with dropout
# 0 and must give the same losses step by step. Then A and B run interleaved, A B A B ...,
# RUNS times each; each run's figure is its steady-state tokens/s (real, unpadded tokens of the
# steps after WARMUP over their seconds: --metrics for A, the peer's JSON for B; both time a
# step from filling the batch to the end of the optimizer update). Prints every run, the
# medians, the ratio of the medians and the median of the pairwise ratios (A_i / B_i), with the
# CPU, its flags, OpenBLAS's core and the BLAS environment; a zerotrain --profile run and a
# torch.autograd.profiler run after the timed ones say where each one's step goes. Writes
# benchmarks/results/finetune.json and regenerates RESULTS.md (benchmarks/run.py --markdown-only).
#
# PRECISION=bf16: both in bf16 mixed precision as each one's users run it -- zerotrain with
# DeepSpeed's "bf16": {"enabled": true} (bf16 weights and activations, fp32 master), PyTorch
# with the HF Trainer's --bf16 on a CPU (torch.autocast(cpu, bfloat16), fp32 weights). Their
# losses differ in rounding, so the step-by-step parity run stays in fp32.
# Usage: benchmarks/bench_finetune.sh        (environment: PRESET=bert-mini BATCH=32 SEQ=128
#        PRECISION=fp32 THREADS=2 STEPS=40 WARMUP=5 RUNS=5 MAX_RUNS=2*RUNS NOISE=0.02 WORK=/var/tmp/zt-bench-finetune NAME=finetune
#        PARITY=1 PROFILE=1 WAIT_IDLE=0 ZT=build/zerotrain)
# Each run also records the CPU time other processes took while it ran (the machine's busy
# time from /proc/stat minus the run's own user + sys) and the steal time: a shared machine's
# noise, named run by run. A run where others took more than NOISE of the machine's CPU time
# is noisy; pairs are run until RUNS pairs are clean (at most MAX_RUNS pairs); the medians are
# over the clean pairs (and, beside them, over every pair). build/bench_limits (make
# build/bench_limits), when built, measures zt_sgemm at the model's GEMM shapes before and
# after the pairs (the higher kept): the floor of a zerotrain step if it were its GEMMs alone.
# The dataset is examples/pydoc-topics/make_dataset.py's (8 labels); the WordPiece vocabulary
# is `finetune_torch.py vocab`'s (specials, the corpus's characters, its words seen twice or
# more, "##" + each character), both made in WORK when missing.
set -eu
cd "$(dirname "$0")/.."
ZT=${ZT:-build/zerotrain}
PY=/usr/bin/python3
PRESET=${PRESET:-bert-mini}; BATCH=${BATCH:-32}; SEQ=${SEQ:-128}; THREADS=${THREADS:-2}
STEPS=${STEPS:-40}; WARMUP=${WARMUP:-5}; RUNS=${RUNS:-5}
WORK=${WORK:-/var/tmp/zt-bench-finetune}; PARITY=${PARITY:-1}; PROFILE=${PROFILE:-1}
LR=2e-5; WD=0.01; CLIP=1.0; PRECISION=${PRECISION:-fp32}
case $PRECISION in
    fp32) HALF=""; BF=() ;;
    bf16) HALF=', "bf16": {"enabled": true}'; BF=(--bf16) ;;
    *) echo "bench_finetune.sh: PRECISION must be fp32 or bf16, not '$PRECISION'" >&2; exit 2 ;;
esac
NAME=${NAME:-finetune$([ "$PRECISION" = fp32 ] || echo "-$PRECISION")}
[ -x "$ZT" ] || { echo "bench_finetune.sh: $ZT is not built (make -j2 all)" >&2; exit 1; }
mkdir -p "$WORK"
T=$(mktemp -d /tmp/zt_bench_finetune.XXXXXX)
trap 'rm -rf "$T"' EXIT
[ -s "$WORK/data/train.jsonl" ] || $PY examples/pydoc-topics/make_dataset.py "$WORK/data" >&2
[ -s "$WORK/vocab.txt" ] || $PY benchmarks/finetune_torch.py vocab --train "$WORK/data/train.jsonl" \
    --out "$WORK/vocab.txt"
TRAIN=$WORK/data/train.jsonl VOCAB=$WORK/vocab.txt
cat >"$T/ds.json" <<EOF
{"train_micro_batch_size_per_gpu": $BATCH, "gradient_accumulation_steps": 1,
 "gradient_clipping": $CLIP, "steps_per_print": 10,
 "optimizer": {"type": "AdamW", "params": {"lr": $LR, "betas": [0.9, 0.999], "eps": 1e-8,
                                           "weight_decay": $WD}},
 "zero_optimization": {"stage": 0}}
EOF
sed '$ s/}$/'"$HALF"'}/' "$T/ds.json" >"$T/ds_run.json" # the timed runs' precision
export OMP_NUM_THREADS=$THREADS
A=("$ZT" finetune --model "$PRESET" --task classify --train "$TRAIN" --tokenizer "wordpiece:$VOCAB"
   --config "$T/ds_run.json" --steps "$STEPS" --warmup "$WARMUP" --seq-len "$SEQ" --threads "$THREADS")
B0=($PY benchmarks/finetune_torch.py train --train "$TRAIN" --vocab "$VOCAB" --preset "$PRESET"
   --batch "$BATCH" --seq "$SEQ" --steps "$STEPS" --warmup "$WARMUP" --threads "$THREADS"
   --lr "$LR" --weight-decay "$WD" --clip "$CLIP")
B=("${B0[@]}" "${BF[@]}")

echo "== token ids: finetune_torch.py's tokenizer against zerotrain prepare-data's" >&2
$PY benchmarks/finetune_torch.py tokens --train "$TRAIN" --vocab "$VOCAB" --zerotrain "$ZT" \
    >"$T/tokens.json" || { cat "$T/tokens.json"; exit 1; }
cat "$T/tokens.json" >&2

if [ "$PARITY" = 1 ]; then
    echo "== parity: one zerotrain-initialised folder, dropout 0, 5 steps each" >&2
    "$ZT" finetune --model "$PRESET" --task classify --train "$TRAIN" --tokenizer "wordpiece:$VOCAB" \
        --config "$T/ds.json" --steps 1 --seq-len "$SEQ" --threads "$THREADS" --save-model "$T/init" \
        >"$T/init.log" 2>&1 || { cat "$T/init.log"; exit 1; }
    cp "$VOCAB" "$T/init/vocab.txt"
    sed -i -E 's/"(hidden|attention_probs)_dropout_prob": [0-9.e-]+/"\1_dropout_prob": 0.0/' \
        "$T/init/config.json"
    "$ZT" finetune --model "$T/init" --task classify --train "$TRAIN" --config "$T/ds.json" \
        --steps 5 --seq-len "$SEQ" --threads "$THREADS" --metrics "$T/parity_a.jsonl" \
        >"$T/parity_a.log" 2>&1 || { cat "$T/parity_a.log"; exit 1; }
    "${B0[@]}" --model "$T/init" --no-dropout --steps 5 --warmup 0 >"$T/parity_b.json"
fi

# the machine's busy CPU time (user nice system irq softirq steal, in clock ticks), the steal
# alone, the load average: before and after each run, so that the CPU time other processes
# took during a run (busy minus the run's own user + sys) and the steal are known
cpustat() { awk -v la="$(cut -d' ' -f1 /proc/loadavg)" \
    '/^cpu /{print $2+$3+$4+$7+$8+$9, $9, la; exit}' /proc/stat; }
# WAIT_IDLE=1: before each run, wait (at most 10 minutes) for 2 seconds at >= 90% idle
wait_idle() {
    [ "${WAIT_IDLE:-0}" = 1 ] || return 0
    local k b0 b1
    for k in $(seq 300); do
        b0=$(cpustat | cut -d' ' -f1); sleep 2; b1=$(cpustat | cut -d' ' -f1)
        [ $((b1 - b0)) -le $((2 * $(getconf CLK_TCK) * $(nproc) / 10)) ] && return 0
    done
    echo "   (the machine stayed busy for 10 minutes: running anyway)" >&2
}
# the CPU seconds other processes took during run $1 (a file prefix), and whether that is more
# than NOISE (2%) of the machine's CPU time over the run's wall time
others() {
    awk -v hz="$(getconf CLK_TCK)" -v n="$(nproc)" -v lim="${NOISE:-0.02}" '
        FNR == 1 && FILENAME ~ /cpu0$/ { b0 = $1 } FNR == 1 && FILENAME ~ /cpu1$/ { b1 = $1 }
        /User time/ || /System time/ { own += $NF }
        /Elapsed/ { k = split($NF, p, ":"); w = 0; for (j = 1; j <= k; j++) w = w * 60 + p[j] }
        END { o = (b1 - b0) / hz - own; if (o < 0) o = 0; print o, (o > lim * n * w ? "noisy" : "clean") }' \
        "$1.cpu0" "$1.cpu1" "$1.time"
}
# pairs until RUNS of them are clean (neither run noisy), at most MAX_RUNS pairs in all
MAX_RUNS=${MAX_RUNS:-$((2 * RUNS))}; clean=0; i=0
if [ -x build/bench_limits ]; then  # sgemm at the model's shapes (M = batch x seq), before and after
    read -r L H I <<<"$($PY -c "import sys; sys.path.insert(0, 'benchmarks'); import run; \
        d = run.PRESETS['$PRESET']; print(d[0], d[1], d[3])")"
    M=$((BATCH * SEQ))
    build/bench_limits --threads "$THREADS" --mem-mib 256 --shape "$M,$H,$H" --shape "$M,$H,$I" \
        --shape "$M,$I,$H" >"$T/limits0.json"
fi
while [ "$clean" -lt "$RUNS" ] && [ "$i" -lt "$MAX_RUNS" ]; do
    i=$((i + 1))
    wait_idle
    echo "== pair $i (clean so far $clean of $RUNS): A (zerotrain)" >&2
    cpustat >"$T/a$i.cpu0"
    /usr/bin/time -v -o "$T/a$i.time" "${A[@]}" --metrics "$T/a$i.jsonl" >"$T/a$i.log" 2>&1 ||
        { cat "$T/a$i.log"; exit 1; }
    cpustat >"$T/a$i.cpu1"
    wait_idle
    echo "== pair $i: B (PyTorch)" >&2
    cpustat >"$T/b$i.cpu0"
    /usr/bin/time -v -o "$T/b$i.time" "${B[@]}" >"$T/b$i.json" 2>"$T/b$i.log" ||
        { cat "$T/b$i.log"; exit 1; }
    cpustat >"$T/b$i.cpu1"
    na=$(others "$T/a$i"); nb=$(others "$T/b$i")
    echo "   other processes' CPU s: A ${na% *} (${na#* }), B ${nb% *} (${nb#* })" >&2
    if [ "${na#* }" = clean ] && [ "${nb#* }" = clean ]; then clean=$((clean + 1)); fi
done
echo "$i" >"$T/pairs"
[ -x build/bench_limits ] && build/bench_limits --threads "$THREADS" --mem-mib 256 --shape "$M,$H,$H" \
    --shape "$M,$H,$I" --shape "$M,$I,$H" >"$T/limits1.json"
if [ "$PROFILE" = 1 ]; then
    echo "== profiles: zerotrain --profile, torch.autograd.profiler (not timed runs)" >&2
    "${A[@]}" --profile >"$T/profile_a.log" 2>&1 || { cat "$T/profile_a.log"; exit 1; }
    "${B[@]}" --profile >/dev/null 2>"$T/profile_b.log" || { cat "$T/profile_b.log"; exit 1; }
fi

$PY - "$T" "$RUNS" "$WARMUP" "$NAME" "$ZT" <<'PY'
import json, os, re, statistics, subprocess, sys, time, ctypes
T, runs, warmup, name, zt = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
sys.path.insert(0, "benchmarks")
import run as harness  # machine_facts, ENV_KEYS

def time_v(path):
    out = {}
    for line in open(path):
        k, _, v = line.strip().rpartition(": ")
        if k == "Maximum resident set size (kbytes)":
            out["max_rss"] = int(v) * 1024
        elif k.startswith("Elapsed (wall clock)"):
            p = [float(x) for x in v.split(":")]
            out["wall"] = sum(x * 60 ** (len(p) - 1 - j) for j, x in enumerate(p))
        elif k in ("User time (seconds)", "System time (seconds)"):
            out["user" if k.startswith("User") else "sys"] = float(v)
    return out

def steady(steps):
    m = steps[warmup:]
    return sum(s["tokens"] for s in m) / sum(s["seconds"] for s in m)

runs = int(open(T + "/pairs").read())
noise = float(os.environ.get("NOISE", "0.02"))
A, B = [], []
for i in range(1, runs + 1):
    za = [json.loads(l) for l in open("%s/a%d.jsonl" % (T, i))]
    pb = json.load(open("%s/b%d.json" % (T, i)))
    if [s["tokens"] for s in za] != [s["tokens"] for s in pb["steps"]]:
        sys.exit("run %d: the two did not see the same real tokens per step" % i)
    for who, steps, lst, extra in (("a", za, A, {}), ("b", pb["steps"], B, {"peak_rss_self": pb["peak_rss"]})):
        r = {"run": i, "tokens_per_s": steady(steps),
             "step_median": statistics.median(s["seconds"] for s in steps[warmup:]),
             "step_seconds": [s["seconds"] for s in steps],
             }
        r.update(time_v("%s/%s%d.time" % (T, who, i)))
        c0 = open("%s/%s%d.cpu0" % (T, who, i)).read().split()
        c1 = open("%s/%s%d.cpu1" % (T, who, i)).read().split()
        hz = os.sysconf("SC_CLK_TCK")
        r["loadavg_before"] = float(c0[2])
        r["others_cpu_seconds"] = max(0.0, (int(c1[0]) - int(c0[0])) / hz - r["user"] - r["sys"])
        r["steal_seconds"] = (int(c1[1]) - int(c0[1])) / hz
        r["noisy"] = r["others_cpu_seconds"] > noise * os.cpu_count() * r["wall"]
        r.update(extra)
        lst.append(r)
za1 = [json.loads(l) for l in open("%s/a1.jsonl" % T)]
pb1 = json.load(open("%s/b1.json" % T))
res = {"kind": "finetune", "name": name, "machine": harness.machine_facts(zt),
       "setup": {k: pb1[k] for k in ("model", "layers", "hidden", "heads", "intermediate", "vocab",
                                     "num_labels", "batch", "seq", "threads", "lr", "weight_decay",
                                     "clip", "dropout", "seed", "rows", "torch")},
       "precision": pb1.get("precision", "fp32"),
       "warmup_steps": warmup, "steps": len(za1), "runs": runs,
       "tokens_per_step": [s["tokens"] for s in za1],
       "padded_shapes": [s["shape"] for s in pb1["steps"]],
       "tokens": json.load(open(T + "/tokens.json")), "zerotrain": A, "pytorch": B}
flags = open("/proc/cpuinfo").read().split("flags\t\t: ", 1)[1].split("\n", 1)[0].split()
res["machine"]["flags"] = {f: f in flags for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16")}
try:
    lib = ctypes.CDLL("/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0")
    lib.openblas_get_corename.restype = ctypes.c_char_p
    res["machine"]["openblas_core"] = lib.openblas_get_corename().decode()
except OSError:
    pass
st = open("/proc/stat").readline().split()
res["machine"]["steal_share_since_boot"] = int(st[8]) / sum(int(x) for x in st[1:9])
if os.path.exists(T + "/parity_a.jsonl"):
    pa = [json.loads(l) for l in open(T + "/parity_a.jsonl")]
    pt = json.load(open(T + "/parity_b.json"))["steps"]
    res["parity"] = [{"step": x["step"], "tokens": x["tokens"], "loss_zerotrain": x["loss"],
                      "loss_pytorch": y["loss"], "grad_norm_zerotrain": x["grad_norm"],
                      "grad_norm_pytorch": y["grad_norm"]} for x, y in zip(pa, pt)]
if os.path.exists(T + "/profile_a.log"):
    txt = open(T + "/profile_a.log").read()
    m = re.search(r"profile of rank 0 over (\d+) measured steps \(([0-9.]+) s\):\n.*?\n((?:  .*\n)+)", txt)
    if m:
        rows = []
        for line in m.group(3).splitlines():
            p = re.match(r"  (.+?)\s{2,}([0-9.]+)\s+([0-9.]+)%(?:\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+))?", line)
            if p:
                rows.append({"kind": p.group(1), "seconds": float(p.group(2)), "share": float(p.group(3)) / 100,
                             "gflop": float(p.group(4)) if p.group(4) else None,
                             "gflop_per_s": float(p.group(6)) if p.group(6) else None})
        res["profile_zerotrain"] = {"steps": int(m.group(1)), "seconds": float(m.group(2)), "rows": rows}
    txt = open(T + "/profile_b.log").read()
    rows = []
    for line in txt.splitlines():
        p = re.match(r"\s*(aten::\S+|Optimizer\.\S+|autograd::\S+)\s+([0-9.]+)%\s+([0-9.]+)(ms|s|us)", line)
        if p:
            f = {"s": 1, "ms": 1e-3, "us": 1e-6}[p.group(4)]
            rows.append({"op": p.group(1), "self_share": float(p.group(2)) / 100,
                         "self_seconds": float(p.group(3)) * f})
    tot = re.search(r"Self CPU time total: ([0-9.]+)(ms|s)", txt)
    res["profile_pytorch"] = {"rows": rows[:12], "seconds": float(tot.group(1)) * (1e-3 if tot.group(2) == "ms" else 1)
                              if tot else None, "steps": len(za1) - warmup}
res["pair_ratios"] = [a["tokens_per_s"] / b["tokens_per_s"] for a, b in zip(A, B)]
for a, b in zip(A, B):
    a["clean_pair"] = b["clean_pair"] = not a["noisy"] and not b["noisy"]
res["noise_limit"] = noise
for tag, keep in (("", lambda a: a["clean_pair"]), ("_all", lambda a: True)):
    ta = [a["tokens_per_s"] for a in A if keep(a)]
    tb = [b["tokens_per_s"] for a, b in zip(A, B) if keep(a)]
    if not ta:
        continue
    res["pairs" + tag] = len(ta)
    res["median_zerotrain" + tag], res["median_pytorch" + tag] = statistics.median(ta), statistics.median(tb)
    res["ratio_of_medians" + tag] = statistics.median(ta) / statistics.median(tb)
    res["median_pair_ratio" + tag] = statistics.median(x / y for x, y in zip(ta, tb))
if "median_zerotrain" not in res:
    sys.exit("no clean pair in %d: the machine was busy throughout (see NOISE, MAX_RUNS)" % runs)
if os.path.exists(T + "/limits0.json"):
    l0, l1 = json.load(open(T + "/limits0.json")), json.load(open(T + "/limits1.json"))
    res["sgemm_flops_per_s"] = max(l0["sgemm_flops_per_s"], l1["sgemm_flops_per_s"])
    res["sgemm_shapes"] = [[x["m"], x["k"], x["n"]] for x in l0["sgemm"]]
    pz = res.get("profile_zerotrain")
    g = [r for r in (pz or {}).get("rows", []) if r["kind"] == "GEMM"]
    if g:  # zerotrain's step if it were its GEMMs alone at the sgemm rate
        res["gemm_gflop_per_step"] = g[0]["gflop"] / pz["steps"]
        res["gemm_floor_seconds"] = g[0]["gflop"] * 1e9 / pz["steps"] / res["sgemm_flops_per_s"]
        # the ratio zerotrain could reach in fp32 if its step were its GEMMs alone at that rate
        tps = statistics.mean(res["tokens_per_step"][warmup:])
        res["fp32_ratio_ceiling"] = tps / res["median_pytorch"] / res["gemm_floor_seconds"]
out = os.path.join("benchmarks", "results", name + ".json")
json.dump(res, open(out, "w"), indent=1)
m = res["machine"]
print("%s; %s cores; flags %s; OpenBLAS core %s; %s" % (
    m.get("cpu"), m.get("cores"), " ".join("%s=%s" % (k, "yes" if v else "no") for k, v in m["flags"].items()),
    m.get("openblas_core"), ", ".join("%s=%s" % kv for kv in sorted(m["env"].items())) or
    "OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset"))
s = res["setup"]
print("%s (L%d H%d, vocab %d), %d labels, micro-batch %d, seq %d, %d threads; %d steps, %d warm-up; "
      "tokens checked: %s" % (s["model"], s["layers"], s["hidden"], s["vocab"], s["num_labels"], s["batch"],
                              s["seq"], s["threads"], res["steps"], warmup, res["tokens"]["identical"]))
if "parity" in res:
    print("parity (dropout 0, same start): " + ", ".join("step %d loss %.7f / %.7f" % (
        p["step"], p["loss_zerotrain"], p["loss_pytorch"]) for p in res["parity"]))
print("%-4s %16s %16s %10s %12s %12s %18s" % ("run", "zerotrain tok/s", "PyTorch tok/s", "A/B", "A RSS MiB",
                                              "B RSS MiB", "others' CPU s A, B"))
for a, b, r in zip(A, B, res["pair_ratios"]):
    print("%-4d %16.0f %16.0f %9.2fx %12.0f %12.0f %9.1f, %.1f%s" % (
        a["run"], a["tokens_per_s"], b["tokens_per_s"], r, a["max_rss"] / 2**20, b["max_rss"] / 2**20,
        a["others_cpu_seconds"], b["others_cpu_seconds"], "" if a["clean_pair"] else "  (noisy)"))
for tag, what in (("", "clean pairs"), ("_all", "all pairs")):
    if "pairs" + tag in res:
        print("median over %d %s: zerotrain %.0f tokens/s, PyTorch %.0f tokens/s; ratio of medians %.2fx, "
              "median of pair ratios %.2fx" % (res["pairs" + tag], what, res["median_zerotrain" + tag],
                                                res["median_pytorch" + tag], res["ratio_of_medians" + tag],
                                                res["median_pair_ratio" + tag]))
if "gemm_floor_seconds" in res:
    print("sgemm at %s on %s threads: %.0f GFLOP/s; zerotrain's GEMMs %.1f GFLOP a step: %.3f s at that rate" % (
        " ".join("%dx%dx%d" % tuple(x) for x in res["sgemm_shapes"]), res["setup"]["threads"],
        res["sgemm_flops_per_s"] / 1e9, res["gemm_gflop_per_step"], res["gemm_floor_seconds"]))
    print("PyTorch's median step over that floor: %.2fx, the most this ratio can be in fp32" %
          res["fp32_ratio_ceiling"])
PY
$PY benchmarks/run.py --markdown-only
echo "wrote benchmarks/results/$NAME.json and benchmarks/RESULTS.md" >&2
