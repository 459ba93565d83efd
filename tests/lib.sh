# lib.sh - shared by the shell test suites: a temporary folder removed on exit, pass/fail
# counting, and the tiny fixture BERT with dropout switched on. Source it; it sets T.
T=$(mktemp -d "/tmp/zt_${SUITE:-test}.XXXXXX")
trap '[ -n "${KEEP_T:-}" ] || rm -rf "$T"' EXIT
pass=0; fail=0
ok()  { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
# refuse NAME EXPECTED_TEXT OUTPUT_PATH command...: the command fails, says EXPECTED_TEXT and
# leaves no OUTPUT_PATH
refuse() { # refuse NAME EXPECTED_TEXT OUTPUT_PATH command...
    local name=$1 want=$2 out=$3; shift 3
    if "$@" >"$T/m.log" 2>&1; then bad "$name: exit 0"; return; fi
    if ! grep -q -- "$want" "$T/m.log"; then bad "$name: message lacks '$want':"; cat "$T/m.log"; return; fi
    if [ -e "$out" ]; then bad "$name: left $out behind"; return; fi
    ok
}

# dropout_model DIR: the bert-tiny fixture with hidden and attention dropout 0.1, so that
# determinism checks cover the dropout masks too
dropout_model() {
    local fix=${ZT_FIXTURES:-tests/fixtures}/bert-tiny
    mkdir -p "$1"
    cp "$fix/model.safetensors" "$1/"
    sed -e 's/"hidden_dropout_prob": 0.0/"hidden_dropout_prob": 0.1/' \
        -e 's/"attention_probs_dropout_prob": 0.0/"attention_probs_dropout_prob": 0.1/' \
        "$fix/config.json" >"$1/config.json"
}

# The family suites' (family, albert, electra) runs: zero_cfg NAME STAGE NP [zero extras] [top
# extras] writes $T/NAME.json (NP ranks of micro-batch 2, ZeRO STAGE, AdamW lr 1e-3);
# zero_train OUT NP CONFIG MODEL [extra...] trains 4 steps of synthetic data at seq 24 on NP
# ranks ($MPI, $ZT) from MODEL (a config.json, or NAME for $T/NAME.json) into $T/OUT (log
# $T/OUT.log); same_weights A B: $T/A and $T/B saved the same weights bit for bit
zero_cfg() {
    echo "{\"train_batch_size\": $((2 * $3)), \"train_micro_batch_size_per_gpu\": 2, \"steps_per_print\": 1,
           \"zero_optimization\": {\"stage\": $2 ${4:-}}, ${5:-}
           \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-3}}}" >"$T/$1.json"
}
zero_train() {
    local out=$1 np=$2 c=$3 m=$4; shift 4
    [ -f "$m" ] || m=$T/$m.json
    $MPI -np "$np" "$ZT" train --model "$m" --data synthetic:5 --config "$T/$c.json" \
        --seq-len 24 --steps 4 --threads 1 --save-model "$T/$out" "$@" >"$T/$out.log" 2>&1
}
same_weights() { cmp -s "$T/$1/model.safetensors" "$T/$2/model.safetensors"; }
# zero_plan_cfg NAME LIMIT: $T/NAME.json, one rank's micro-batch of 16 at stage 0 with recompute
# "auto" under memory_limit LIMIT (the planner's runs)
zero_plan_cfg() {
    echo "{\"train_batch_size\": 16, \"train_micro_batch_size_per_gpu\": 16, \"steps_per_print\": 1,
           \"zero_optimization\": {\"stage\": 0}, \"zerotrain\": {\"recompute\": \"auto\", \"memory_limit\": \"$2\"},
           \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-3}}}" >"$T/$1.json"
}
