#!/usr/bin/env bash
# bits_hash.sh - the bits a fixed set of short training runs produce, as one "sha256  name"
# line per output file (the saved model.safetensors and each rank's rank-R.safetensors of the
# final checkpoint): a change that must not alter results (a refactoring) keeps every line.
# The runs: BERT (bert-tiny) at ZeRO stages 0-3 at N=2 with AdamW; stage 3 with the optimizer
# state and the parameters on NVMe; full and selective recomputation; AdamW8bit and Adafactor
# (with a first moment) at stage 2; T5 (tests/fixtures/t5-tiny) at stages 1 and 3, and with
# its default Adafactor. Each: synthetic data, sequence 16, a global batch of 4, 3 steps, one
# thread per rank. BITS_PRECISION=bf16 (or fp16) runs each in that precision.
#
# The hashes hold for one machine kind: OpenBLAS picks its sgemm kernels by CPU, so another
# CPU gives other (equally valid) bits. tests/bits-main.txt is the record of the commit and
# CPU its header names; on another CPU, regenerate the record from that commit before
# comparing (git worktree add /tmp/base COMMIT && make -C /tmp/base -j2, then run this script
# with /tmp/base/build/zerotrain).
#
# Usage: tests/bits_hash.sh [zerotrain] > out.txt   (compare: diff tests/bits-main.txt out.txt,
#        ignoring the "#" header lines)
#        tests/bits_hash.sh --check RECORD [zerotrain]: also compares with RECORD: exit 0 when
#        every line is equal, 1 when not (the differing lines on stderr), 77 when RECORD was
#        made on another CPU or OpenBLAS core type (nothing to compare against here)
set -u
CHECK=""
if [ "${1:-}" = --check ]; then CHECK=$2; shift 2; fi
ZT=${1:-build/zerotrain}
FIX=${ZT_FIXTURES:-$(cd "$(dirname "$0")" && pwd)/fixtures}
MPI="mpirun --allow-run-as-root --oversubscribe"
T=$(mktemp -d "${TMPDIR:-/tmp}/zt-bits.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/swap"
status=0

# run NAME MODEL STAGE OPTIMIZER_JSON [ZERO_EXTRA [ZEROTRAIN_SECTION]]
run() {
    local name=$1 model=$2 stage=$3 opt=$4 extra=${5:-} zt=${6:-}
    local opt_key=""
    [ -n "$opt" ] && opt_key=", \"optimizer\": $opt"
    [ -n "${BITS_PRECISION:-}" ] && opt_key="$opt_key, \"${BITS_PRECISION}\": {\"enabled\": true}"
    echo "{\"train_batch_size\": 4, \"zero_optimization\": {\"stage\": $stage $extra}$opt_key${zt:+, \"zerotrain\": $zt}}" \
        >"$T/$name.json"
    if ! timeout 300 $MPI -np 2 "$ZT" train --model "$model" --data synthetic:3 \
            --config "$T/$name.json" --seq-len 16 --steps 3 --threads 1 \
            --checkpoint-dir "$T/$name.ck" --checkpoint-every 3 --save-model "$T/$name.model" \
            >"$T/$name.log" 2>&1; then
        echo "bits_hash.sh: run $name failed:" >&2
        tail -3 "$T/$name.log" >&2
        status=1
        return
    fi
    (cd "$T" && sha256sum "$name.model/model.safetensors" "$name.ck"/step-3/rank-*.safetensors)
}

ADAMW='{"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.01}}'
NVME=", \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"$T/swap\"}, \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"$T/swap\"}"

MACHINE="on $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1) (family $(sed -n 's/^cpu family[[:space:]]*: //p' /proc/cpuinfo | head -1) model $(sed -n 's/^model[[:space:]]*: //p' /proc/cpuinfo | head -1)), OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"
if [ -n "$CHECK" ] && ! head -1 "$CHECK" | grep -qF -- "$MACHINE"; then
    echo "bits_hash.sh: $CHECK was recorded $(head -1 "$CHECK" | sed 's/.* on /on /'), this is $MACHINE: regenerate the record from its commit here to compare" >&2
    exit 77
fi
exec 3>&1
[ -n "$CHECK" ] && exec >"$T/now.txt"
echo "# tests/bits_hash.sh: $(git -C "$(dirname "$0")" describe --always --dirty 2>/dev/null || echo '?') $MACHINE${BITS_PRECISION:+, $BITS_PRECISION}"
for st in 0 1 2 3; do run "bert-s$st" bert-tiny "$st" "$ADAMW"; done
run bert-s3-nvme bert-tiny 3 "$ADAMW" "$NVME"
run bert-s2-recompute-full bert-tiny 2 "$ADAMW" "" '{"recompute": "full"}'
run bert-s1-recompute-selective bert-tiny 1 "$ADAMW" "" '{"recompute": "selective"}'
run bert-s2-adamw8bit bert-tiny 2 '{"type": "AdamW8bit", "params": {"lr": 2e-3, "min_8bit_size": 100}}'
run bert-s2-adafactor bert-tiny 2 '{"type": "Adafactor", "params": {"beta1": 0.9, "weight_decay": 0.01}}'
run t5-s1 "$FIX/t5-tiny" 1 "$ADAMW"
run t5-s3 "$FIX/t5-tiny" 3 "$ADAMW"
run t5-s2-adafactor-default "$FIX/t5-tiny" 2 ""
if [ -n "$CHECK" ]; then
    exec >&3
    cat "$T/now.txt"
    if ! diff <(grep -v '^#' "$CHECK") <(grep -v '^#' "$T/now.txt") >&2; then
        echo "bits_hash.sh: the bits differ from $CHECK" >&2
        status=1
    fi
fi
exit $status
