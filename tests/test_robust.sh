#!/usr/bin/env bash
# test_robust.sh - never a hang, never a silent NaN: evaluation on every rank (the same eval
# loss at any N and stage, with offload and recomputation), a rank that fails at start or is
# given other settings (every rank exits with that rank's message, within seconds), the
# divergence guard (skips logged and counted, the run stopped naming the last good
# checkpoint, no NaN checkpoint, metrics always valid JSON), non-finite hyperparameters, and
# that the command makes no MPI collective of its own. ROBUST_LONG=1: every stage at N = 1, 2,
# 3, with offload and recomputation.
# Usage: tests/test_robust.sh [zerotrain]
set -u
ZT=${1:-build/zerotrain}
FIX=${ZT_FIXTURES:-tests/fixtures}/bert-tiny
PY=/usr/bin/python3
SUITE=robust . "$(dirname "$0")/lib.sh"
MPI="mpirun --allow-run-as-root --oversubscribe"
TMO=120   # seconds before a run counts as hung

printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\ncat\nsat\non\nmat\n.\n' >"$T/vocab.txt"
for i in $(seq 1 40); do echo "the cat sat on the mat . the mat sat on the cat ."; done >"$T/corpus.txt"
for i in $(seq 1 30); do echo "the mat . on the cat sat the cat . mat on"; done >"$T/corpus2.txt"
"$ZT" prepare-data --input "$T/corpus.txt" --tokenizer "wordpiece:$T/vocab.txt" --out "$T/d" >/dev/null 2>&1 || bad "prepare-data"
"$ZT" prepare-data --input "$T/corpus2.txt" --tokenizer "wordpiece:$T/vocab.txt" --out "$T/d2" >/dev/null 2>&1 || bad "prepare-data 2"

# ---- evaluation on every rank --------------------------------------------------------------
# lr 0 leaves the parameters as loaded, so every run evaluates the same model: the eval loss
# (7 samples in batches of 2: 4 batches, uneven over 3 ranks) must be the same bits everywhere.
ecfg() { # NAME STAGE ZERO_EXTRA ZEROTRAIN_EXTRA (JSON members)
    echo "{\"train_micro_batch_size_per_gpu\": 2, \"zero_optimization\": {\"stage\": $2 $3},
           \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0}}, \"zerotrain\": {\"threads\": 1 $4}}" >"$T/$1.json"
}
eval_run() { # NAME NP CONFIG
    timeout $TMO $MPI -np "$2" "$ZT" train --model "$FIX" --data "$T/d" --config "$T/$3.json" \
        --seq-len 12 --steps 2 --threads 1 --eval-data "$T/d" --eval-every 1 --eval-samples 7 \
        --metrics "$T/$1.jsonl" >"$T/$1.log" 2>&1
}
eval_of() { "$PY" -c 'import json,sys; v=[json.loads(l)["eval_loss"] for l in open(sys.argv[1])]; print(" ".join(repr(x) for x in v))' "$T/$1.jsonl"; }
ecfg e0 0 "" ""; ecfg e1 1 "" ""; ecfg e2 2 "" ""; ecfg e3 3 "" ""
ecfg e1off 1 ', "offload_optimizer": {"device": "cpu"}' ""
ecfg e3off 3 ', "offload_optimizer": {"device": "cpu"}, "offload_param": {"device": "cpu"}' ', "recompute": "full"'
ecfg e2rc 2 "" ', "recompute": "selective"'
if eval_run ref 1 e0; then ref=$(eval_of ref); else ref=""; bad "eval at N=1"; tail -3 "$T/ref.log"; fi
case "$ref" in *None*|"") bad "eval at N=1 gave no loss: $ref";; *) ok;; esac
if [ "${ROBUST_LONG:-0}" = 1 ]; then
    CASES="2:e0 2:e1 2:e2 2:e3 3:e0 3:e1 3:e2 3:e3 2:e1off 3:e1off 2:e3off 3:e3off 2:e2rc 3:e2rc 1:e3 1:e3off"
else
    CASES="2:e3 3:e3 2:e1off 3:e3off 3:e2rc"
fi
for c in $CASES; do
    np=${c%%:*}; cf=${c#*:}; name="n$np$cf"
    if eval_run "$name" "$np" "$cf"; then
        got=$(eval_of "$name")
        if [ "$got" = "$ref" ]; then ok; else bad "eval loss at N=$np $cf: $got, at N=1: $ref"; fi
    else
        bad "eval at N=$np $cf failed or hung (status $?)"; tail -3 "$T/$name.log"
    fi
done
# no labelled token in the evaluation samples: no loss (null), not 0
if "$ZT" train --model "$FIX" --data "$T/d" --steps 1 --seq-len 3 --eval-data "$T/d" --eval-every 1 \
       --eval-samples 1 --metrics "$T/nolab.jsonl" >"$T/nolab.log" 2>&1 &&
   grep -q "eval_loss none: the evaluation samples have no labelled token" "$T/nolab.log" &&
   "$PY" -c 'import json,sys; r=json.loads(open(sys.argv[1]).readline()); sys.exit(0 if r["eval_loss"] is None and "eval_loss" in r["nonfinite"] else 1)' "$T/nolab.jsonl"
then ok; else bad "eval with no labelled token"; cat "$T/nolab.log" "$T/nolab.jsonl"; fi

# ---- ranks that fail at start or disagree ---------------------------------------------------
# expect_mpi NAME NEEDLE -- mpirun arguments: exits non-zero within TMO with NEEDLE on stderr
expect_mpi() {
    local name=$1 needle=$2; shift 3
    timeout $TMO $MPI "$@" >"$T/m.out" 2>"$T/m.err"
    local st=$?
    if [ $st -eq 124 ]; then bad "$name: hung"; return; fi
    if [ $st -ne 0 ] && grep -qF -- "$needle" "$T/m.err"; then ok
    else bad "$name: status $st, stderr lacks '$needle'"; grep zerotrain "$T/m.err" | head -5; fi
}
G="$ZT train --model bert-tiny --data synthetic --seq-len 8 --threads 1"
expect_mpi "rank 1 with bad data (N=2)" "rank 1: $T/nodata/manifest.json" -- \
    -np 1 $G --steps 2 : -np 1 $ZT train --model bert-tiny --data "$T/nodata" --steps 2 --seq-len 8 --threads 1
expect_mpi "rank 2 with bad data (N=3)" "$T/nodata/manifest.json" -- \
    -np 2 $G --steps 2 : -np 1 $ZT train --model bert-tiny --data "$T/nodata" --steps 2 --seq-len 8 --threads 1
expect_mpi "rank 1 with a bad option" "rank 1: --steps must be an integer" -- -np 1 $G --steps 2 : -np 1 $G --steps x
expect_mpi "different --steps (N=2)" 'the ranks disagree on --steps: rank 0 has "3", rank 1 has "4"' -- \
    -np 1 $G --steps 3 : -np 1 $G --steps 4
expect_mpi "different --steps (N=3)" 'the ranks disagree on --steps: rank 0 has "3", rank 2 has "5"' -- \
    -np 2 $G --steps 3 : -np 1 $G --steps 5
echo '{"train_micro_batch_size_per_gpu": 2, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}}}' >"$T/lr1.json"
echo '{"train_micro_batch_size_per_gpu": 2, "optimizer": {"type": "AdamW", "params": {"lr": 0.002}}}' >"$T/lr2.json"
expect_mpi "different lr" 'the ranks disagree on optimizer.params.lr: rank 0 has "0.00100000005", rank 1 has "0.00200000009"' -- \
    -np 1 $G --steps 2 --config "$T/lr1.json" : -np 1 $G --steps 2 --config "$T/lr2.json"
echo '{"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 1}}' >"$T/st1.json"
echo '{"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 3}}' >"$T/st3.json"
expect_mpi "different stage (the engine's comparison)" 'the ranks disagree on zero_stage: rank 0 has "1", rank 1 has "3"' -- \
    -np 1 $G --steps 2 --config "$T/st1.json" : -np 1 $G --steps 2 --config "$T/st3.json"
expect_mpi "different data" 'the ranks disagree on --data' -- \
    -np 1 $ZT train --model "$FIX" --data "$T/d" --steps 2 --seq-len 8 : -np 1 $ZT train --model "$FIX" --data "$T/d2" --steps 2 --seq-len 8
expect_mpi "different model" 'the ranks disagree on --model: rank 0 has "bert-tiny", rank 1 has "bert-mini"' -- \
    -np 1 $G --steps 2 : -np 1 $ZT train --model bert-mini --data synthetic --seq-len 8 --threads 1 --steps 2
# the command's own collectives are the library's (under its watchdog): no MPI collective in tools/
if grep -nE 'MPI_[A-Z][a-z_]*\(' tools/*.c | grep -vE 'MPI_(Comm_size|Comm_rank|Init_thread|Finalize)\(' >"$T/mpi.txt"; then
    bad "tools/ calls MPI directly:"; cat "$T/mpi.txt"; else ok; fi

# ---- the divergence guard --------------------------------------------------------------------
echo '{"train_micro_batch_size_per_gpu": 2, "optimizer": {"type": "AdamW", "params": {"lr": 1e30}}, "zerotrain": {"max_skipped_steps": 3}}' >"$T/div.json"
timeout $TMO "$ZT" train --model bert-tiny --data synthetic --seq-len 8 --steps 10 --config "$T/div.json" \
    --checkpoint-dir "$T/ck" --checkpoint-every 1 --metrics "$T/div.jsonl" >"$T/div.log" 2>&1
st=$?
if [ $st -ne 0 ] && [ $st -ne 124 ] && grep -q "3 steps in a row were skipped" "$T/div.log" &&
   grep -q "The last good checkpoint is $T/ck/step-1" "$T/div.log" &&
   [ "$(grep -c 'step 2 skipped: loss' "$T/div.log")" -eq 3 ]; then ok
else bad "divergence: status $st"; tail -5 "$T/div.log"; fi
if [ "$(ls "$T/ck")" = "step-1" ]; then ok; else bad "divergence: checkpoints $(ls "$T/ck")"; fi
if "$PY" - "$T/div.jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for l in open(sys.argv[1]):
    assert "nan" not in l.lower() and "inf" not in l.lower(), l
assert [r["skipped"] for r in rows] == [False, True, True, True], rows
assert [r["skipped_steps"] for r in rows] == [0, 1, 2, 3]
assert rows[1]["loss"] is None and rows[1]["nonfinite"] == ["loss", "grad_norm"]
assert [r["step"] for r in rows] == [1, 2, 2, 2]
EOF
then ok; else bad "divergence: metrics"; cat "$T/div.jsonl"; fi
# multi-rank: every rank skips alike (N=2, stage 2)
echo '{"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2}, "optimizer": {"type": "AdamW", "params": {"lr": 1e30}}, "zerotrain": {"max_skipped_steps": 2}}' >"$T/div2.json"
expect_mpi "divergence at N=2" "2 steps in a row were skipped" -- -np 2 $G --steps 10 --config "$T/div2.json"
# guard off: the run goes on to the end (exit 0), the metrics stay valid JSON
echo '{"train_micro_batch_size_per_gpu": 2, "optimizer": {"type": "AdamW", "params": {"lr": 1e30}}, "zerotrain": {"skip_nonfinite": false}}' >"$T/off.json"
if timeout $TMO "$ZT" train --model bert-tiny --data synthetic --seq-len 8 --steps 4 --config "$T/off.json" \
       --metrics "$T/off.jsonl" >"$T/off.log" 2>&1 &&
   "$PY" -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; sys.exit(0 if len(r) == 4 and r[-1]["loss"] is None and not any(x["skipped"] for x in r) else 1)' "$T/off.jsonl"
then ok; else bad "guard off"; tail -3 "$T/off.log"; fi
# non-finite hyperparameters are config errors
echo '{"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 1e39}}}' >"$T/big.json"
if ! "$ZT" check-config "$T/big.json" 2>"$T/big.err" &&
   grep -q "optimizer.params.lr: the number is too large to represent" "$T/big.err"; then ok
else bad "lr 1e39 accepted"; cat "$T/big.err"; fi

echo "robust: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
