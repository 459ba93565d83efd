#!/usr/bin/env bash
# test_estimate.sh - `zerotrain estimate`: (1) with --precision fp16 (2-byte parameters and
# gradients, the fp32 master and Adam's moments: K = 12) it gives Table 1 of the ZeRO paper
# (Rajbhandari et al. 2020, Psi = 7.5B, GB of 1e9 bytes, 3 significant figures), the paper's
# numbers typed in here; the bytes per parameter of fp32, bf16 (fp32 gradients, DeepSpeed's
# default) and AdamW8bit. (2) For bert-tiny, at N=1 and N=2 and every stage (and with the
# optimizer offloaded), the model-state bytes equal the formula bytes a training run reports,
# and the RAM it gives the parameters, gradients and optimizer equals what the run measured
# (stage 3: its gather-pool budget, at most 2% above the pool the run built); its activation
# bytes are at least the run's activation peak and within 1.3x of it (the planner counts a
# masked-LM batch's most labelled rows, 20% of the positions; the synthetic batches label
# 15%). (3) Misuse: one message each, a non-zero status, nothing on stdout.
# Usage: tests/test_estimate.sh [zerotrain]   (ESTIMATE_LONG=1: N=3 too)
set -u
ZT=${1:-build/zerotrain}
SUITE=estimate . "$(dirname "$0")/lib.sh"
MPI="timeout 300 mpirun --allow-run-as-root --oversubscribe"

field() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

# (1) Table 1: stage (0 baseline, 1 Pos, 2 Pos+g, 3 Pos+g+p), N, GB
while read -r st n want; do
    got=$("$ZT" estimate --params 7.5e9 --ranks "$n" --stage "$st" --precision fp16 --json |
          python3 -c 'import json,sys; print("%.3g" % (json.load(sys.stdin)["model_state_bytes_per_rank"] / 1e9))')
    if python3 -c 'import sys; sys.exit(float(sys.argv[1]) != float(sys.argv[2]))' "$got" "$want"; then ok
    else bad "Table 1 stage $st N=$n: $got GB, the paper $want GB"; fi
done <<'EOF'
0 1 120
0 4 120
0 64 120
1 4 52.5
1 64 31.4
2 4 41.3
2 64 16.6
3 4 30.0
3 64 1.88
EOF
# bytes per parameter at stage 0, one rank: p + g + K
while read -r want args; do
    got=$("$ZT" estimate --params 1e8 --ranks 1 --stage 0 $args --json |
          python3 -c 'import json,sys; d = json.load(sys.stdin); print("%.4f" % (d["model_state_bytes_per_rank"] / d["padded_params"]))')
    if python3 -c 'import sys; sys.exit(abs(float(sys.argv[1]) - float(sys.argv[2])) > 1e-4)' "$got" "$want"; then ok
    else bad "bytes per parameter with '$args': $got, want $want"; fi
done <<'EOF'
16 --precision fp32
18 --precision bf16
16 --precision bf16 --grad-dtype bf16
16 --precision fp16
10.0312 --precision fp16 --optimizer adamw8bit
EOF
# (bf16: the 2-byte compute copy + fp32 gradients 4 + the master 4 + the moments 8; fp16 +
# AdamW8bit: 2 + 2 + the master 4 + the 8-bit moments: 2 bytes and 2 fp32 absolute maxima per
# 256)

# (2) against training runs of bert-tiny
conf() { # stage, extra zero_optimization keys
    echo "{\"train_micro_batch_size_per_gpu\": 4, \"zero_optimization\": {\"stage\": $1$2}}"
}
check_run() { # name ranks stage extra-keys estimate-args...
    local name=$1 n=$2 st=$3 extra=$4; shift 4
    conf "$st" "$extra" >"$T/c.json"
    local run=("$ZT" train --model "${MODEL:-bert-tiny}" --data synthetic --steps 2 --seq-len 32 --config "$T/c.json")
    [ "$n" -gt 1 ] && run=($MPI -np "$n" "${run[@]}")
    if ! "${run[@]}" >"$T/run.log" 2>&1; then bad "$name: the run failed"; cat "$T/run.log"; return; fi
    if ! "$ZT" estimate --model "${MODEL:-bert-tiny}" --ranks "$n" --stage "$st" --micro-batch 4 --seq-len 32 "$@" \
        --json >"$T/e.json" 2>"$T/e.log"; then bad "$name: estimate failed"; cat "$T/e.log"; return; fi
    if python3 - "$T/run.log" "$T/e.json" "$st" <<'PY'; then ok; else bad "$name"; fi
import json, re, sys
log, e, st = open(sys.argv[1]).read(), json.load(open(sys.argv[2])), int(sys.argv[3])
m = re.search(r"model state per rank \(stage \d, \d ranks\): measured (\d+) bytes; formula (\d+)", log)
a = re.findall(r"activations [\d.]+/([\d.]+)", log)
measured, formula, act = int(m.group(1)), int(m.group(2)), float(a[-1]) * 1048576
ram = e["params_ram_bytes_per_rank"] + e["grads_ram_bytes_per_rank"] + e["optimizer_ram_bytes_per_rank"]
err = []
if e["model_state_bytes_per_rank"] != formula:
    err.append("model state %d, the run's formula %d" % (e["model_state_bytes_per_rank"], formula))
if st < 3 and ram != measured:
    err.append("RAM %d, the run measured %d" % (ram, measured))
if st == 3 and not (measured <= ram <= measured * 1.02):
    err.append("RAM %d, the run measured %d (the gather pool's budget is at most 2%% more)" % (ram, measured))
# the report's MiB have one decimal: 0.05 MiB of rounding
if not (act - 52429 <= e["activation_bytes_per_rank"] <= 1.3 * act + 52429):
    err.append("activations %d, the run's peak %.0f" % (e["activation_bytes_per_rank"], act))
for x in err:
    print("  " + x)
sys.exit(1 if err else 0)
PY
}
NS="1 2"
[ -n "${ESTIMATE_LONG:-}" ] && NS="1 2 3"
for n in $NS; do
    for st in 0 1 2 3; do check_run "N=$n stage $st" "$n" "$st" ""; done
done
check_run "N=2 stage 2, optimizer offloaded to RAM" 2 2 ', "offload_optimizer": {"device": "cpu"}' \
    --offload-optimizer cpu
check_run "N=1 stage 3, optimizer, gradients and parameters on NVMe" 1 3 \
    ", \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"$T\"}, \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"$T\"}" \
    --offload-optimizer nvme --offload-param nvme
check_run "N=2 stage 1, recompute full" 2 1 '}, "zerotrain": {"recompute": "full"' --recompute full
check_run "N=1 stage 0, recompute every-k:1" 1 0 '}, "zerotrain": {"recompute": "every-k:1"' --recompute every-k:1
check_run "N=1 stage 3, bf16, parameters (2 bytes a float) and optimizer on NVMe" 1 3 \
    ", \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"$T\"}, \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"$T\"}}, \"bf16\": {\"enabled\": true" \
    --offload-optimizer nvme --offload-param nvme --precision bf16
check_run "N=2 stage 3, bf16, parameters in the RAM pool" 2 3 \
    ', "offload_param": {"device": "cpu"}}, "bf16": {"enabled": true' --offload-param cpu --precision bf16
check_run "N=2 stage 2, bf16" 2 2 '}, "bf16": {"enabled": true' --precision bf16
check_run "N=2 stage 1, bf16 with bf16 gradients" 2 1 \
    '}, "bf16": {"enabled": true}, "data_types": {"grad_accum_dtype": "bf16"' --precision bf16 --grad-dtype bf16
check_run "N=2 stage 2, fp16 (fp16 gradients)" 2 2 '}, "fp16": {"enabled": true' --precision fp16
# T5 (Adafactor, its default) in bf16: 16-bit activations, the span-corrupted targets' length
MODEL=${ZT_FIXTURES:-tests/fixtures}/t5-tiny check_run "T5, N=2 stage 2, bf16" 2 2 '}, "bf16": {"enabled": true' \
    --precision bf16 --optimizer adafactor
check_run "N=1 stage 3, fp16, parameters and optimizer on NVMe" 1 3 \
    ", \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"$T\"}, \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"$T\"}}, \"fp16\": {\"enabled\": true" \
    --offload-optimizer nvme --offload-param nvme --precision fp16
check_run "N=2 stage 0, fp16 with fp32 gradients" 2 0 \
    '}, "fp16": {"enabled": true}, "data_types": {"grad_accum_dtype": "fp32"' --precision fp16 --grad-dtype fp32
# AdamW8bit's embedding tables keep fp32 state: the largest offload sub-group holds 8 bytes a
# float, the working buffers are sized by it
check_run "N=1 stage 3, AdamW8bit, the optimizer on NVMe" 1 3 \
    ", \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"$T\"}}, \"optimizer\": {\"type\": \"AdamW8bit\"" \
    --optimizer adamw8bit --offload-optimizer nvme
# a model whose layers are larger than its (tied) word embeddings: the gather pool holds the
# embeddings beside two layers
echo '{"model_type": "bert", "vocab_size": 4000, "hidden_size": 64, "num_hidden_layers": 3,
       "num_attention_heads": 2, "intermediate_size": 2048, "max_position_embeddings": 64,
       "type_vocab_size": 2, "hidden_act": "gelu", "layer_norm_eps": 1e-12,
       "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}' >"$T/wide.json"
MODEL="$T/wide.json" check_run "N=2 stage 3, layers wider than the embeddings, parameters on NVMe" 2 3 \
    ", \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"$T\"}" --offload-param nvme
# nothing prefetched or persistent (--set: zt_config fields): the pool is exactly two layers
# and the tied embeddings, held from the end of the forward pass into the backward
MODEL="$T/wide.json" check_run "N=1 stage 3, layers wider than the embeddings, no prefetch, nothing persistent" 1 3 \
    ', "stage3_prefetch_bucket_size": 0, "stage3_param_persistence_threshold": 0' \
    --set prefetch_size=0 --set persist_threshold=0
check_run "N=2 stage 3, AdamW8bit" 2 3 '}, "optimizer": {"type": "AdamW8bit"' --optimizer adamw8bit
check_run "N=2 stage 3, bf16 with AdamW8bit" 2 3 '}, "bf16": {"enabled": true}, "optimizer": {"type": "AdamW8bit"' \
    --precision bf16 --optimizer adamw8bit

# (3) misuse
misuse() { # name expected-text args...
    local name=$1 want=$2; shift 2
    if "$ZT" estimate "$@" >"$T/out" 2>"$T/err"; then bad "$name: exit 0"; return; fi
    if ! grep -q -- "$want" "$T/err"; then bad "$name: message lacks '$want':"; cat "$T/err"; return; fi
    if [ -s "$T/out" ]; then bad "$name: wrote to stdout"; return; fi
    ok
}
misuse "no model" "give --model MODEL or --params N" --ranks 2 --stage 1
misuse "both" "give --model MODEL or --params N" --model bert-tiny --params 1e9 --ranks 2 --stage 1
misuse "no ranks" "give --ranks N and --stage S" --params 1e9 --stage 1
misuse "stage 4" "--stage must be an integer in \[0, 3\]" --params 1e9 --ranks 2 --stage 4
misuse "bad params" "--params must be a number" --params 7.5x9 --ranks 2 --stage 1
misuse "fractional params" "a whole number of parameters" --params 1.5 --ranks 2 --stage 1
misuse "precision fp8" "--precision fp8" --params 1e9 --ranks 2 --stage 1 --precision fp8
misuse "activations of a count" "activations are counted for a model" --params 1e9 --ranks 2 --stage 1 \
    --micro-batch 4 --seq-len 128
misuse "half a batch shape" "both --micro-batch and --seq-len" --model bert-tiny --ranks 2 --stage 1 --micro-batch 4
misuse "param offload below stage 3" "offload_param" --params 1e9 --ranks 2 --stage 2 --offload-param cpu
misuse "recompute auto" "recompute auto" --model bert-tiny --ranks 1 --stage 0 --micro-batch 4 --seq-len 32 \
    --recompute auto
misuse "unknown model" "bert-huge" --model bert-huge --ranks 1 --stage 0
misuse "--set of no field" "--set bogus=1: zt_config_set: no key \"bogus\"" --params 1e9 --ranks 1 --stage 0 --set bogus=1
misuse "--set without =" "--set takes FIELD=VALUE" --params 1e9 --ranks 1 --stage 0 --set prefetch_size
echo "estimate: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
