#!/usr/bin/env bash
# test_train.sh - `zerotrain train` end to end on a tiny BERT: same seed -> bit-identical
# run; stop + --resume -> bit-identical to not stopping; SIGKILL at points inside a save ->
# --resume still continues bit-identically; corrupt checkpoints detected, named, skipped;
# a failing save (file-size limit) keeps the previous checkpoint; export and sharded export.
# Usage: tests/test_train.sh [zerotrain]   (CRASH_POINTS=all runs every fault point)
set -u
ZT=${1:-build/zerotrain}
FIX=${ZT_FIXTURES:-tests/fixtures}/bert-tiny
PY=/usr/bin/python3
SUITE=train . "$(dirname "$0")/lib.sh"
dropout_model "$T/model"
cat >"$T/ds.json" <<'EOF'
{
  "train_micro_batch_size_per_gpu": 2,
  "gradient_accumulation_steps": 2,
  "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.01}},
  "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_num_steps": 2, "total_num_steps": 8}},
  "gradient_clipping": 1.0,
  "steps_per_print": 1
}
EOF
train() { # train OUTDIR STEPS [extra args...]
    local out=$1 steps=$2; shift 2
    "$ZT" train --model "$T/model" --data synthetic:7 --config "$T/ds.json" --seq-len 16 \
        --steps "$steps" --metrics "$out.jsonl" "$@" >"$out.log" 2>&1
}
losses() { "$PY" -c 'import json,sys; print(" ".join("%d:%r" % (j["step"], j["loss"]) for j in map(json.loads, open(sys.argv[1]))))' "$1"; }

# ---- determinism ---------------------------------------------------------------------------
train "$T/a" 8 --save-model "$T/a.model" && train "$T/b" 8 --save-model "$T/b.model"
if cmp -s "$T/a.model/model.safetensors" "$T/b.model/model.safetensors" && [ "$(losses "$T/a.jsonl")" = "$(losses "$T/b.jsonl")" ]; then ok
else bad "two runs with the same seed differ"; cat "$T/a.log"; fi
first=$("$PY" -c 'import json,sys; l=[json.loads(x)["loss"] for x in open(sys.argv[1])]; print(l[0] > 5.5 and len(l) == 8)' "$T/a.jsonl")
[ "$first" = True ] && ok || bad "metrics: expected 8 lines, first loss near ln(512)"
if "$PY" -c 'import json,sys
for x in open(sys.argv[1]):
    j = json.loads(x); assert set(j) >= {"step","loss","lr","grad_norm","tokens","seconds","memory"}, j' "$T/a.jsonl"; then ok
else bad "metrics lines lack fields"; fi

# ---- resume --------------------------------------------------------------------------------
train "$T/r" 4 --checkpoint-dir "$T/ck" --checkpoint-every 2
train "$T/r" 8 --checkpoint-dir "$T/ck" --checkpoint-every 2 --resume --save-model "$T/r.model"
if cmp -s "$T/a.model/model.safetensors" "$T/r.model/model.safetensors" && [ "$(losses "$T/a.jsonl")" = "$(losses "$T/r.jsonl")" ]; then ok
else bad "stop + resume differs from an uninterrupted run"; diff <(losses "$T/a.jsonl") <(losses "$T/r.jsonl"); cat "$T/r.log"; fi
[ "$(ls "$T/ck")" = "$(printf 'step-2\nstep-4\nstep-6\nstep-8')" ] && ok || bad "checkpoint folder holds: $(ls -A "$T/ck")"
[ -z "$(ls -A "$T/ck" | grep -v '^step-')" ] && ok || bad "hidden leftovers in the checkpoint folder: $(ls -A "$T/ck")"
# resuming when the step count is reached only writes --save-model
if train "$T/r2" 8 --checkpoint-dir "$T/ck" --resume --save-model "$T/r2.model" && grep -q "already reached" "$T/r2.log" \
   && cmp -s "$T/a.model/model.safetensors" "$T/r2.model/model.safetensors"; then ok; else bad "resume at the final step"; cat "$T/r2.log"; fi
# --resume without a checkpoint starts from scratch with a notice
if train "$T/r3" 2 --checkpoint-dir "$T/empty" --resume && grep -q "no valid checkpoint" "$T/r3.log"; then ok; else bad "resume with no checkpoint"; cat "$T/r3.log"; fi

# ---- crash inside a save (SIGKILL at a point), then resume ---------------------------------
points="before:rank-00000.safetensors after:manifest.json before:rename"
[ "${CRASH_POINTS:-}" = all ] && points="before:model.safetensors after:model.safetensors
    before:rank-00000.safetensors after:rank-00000.safetensors before:state.json after:state.json
    before:train_config.json after:train_config.json before:manifest.json after:manifest.json
    before:rename after:rename"
for p in $points; do
    rm -rf "$T/c"
    ZT_FAULT_POINT="$p@2" train "$T/c" 8 --checkpoint-dir "$T/c" --checkpoint-every 2
    st=$?
    if [ $st -ne 137 ]; then bad "$p: expected SIGKILL (137), got $st"; continue; fi
    train "$T/c2" 8 --checkpoint-dir "$T/c" --checkpoint-every 2 --resume --save-model "$T/c.model"
    if cmp -s "$T/a.model/model.safetensors" "$T/c.model/model.safetensors"; then ok
    else bad "$p: resumed run differs"; cat "$T/c2.log"; fi
done

# ---- corrupt checkpoints are detected, named and skipped ----------------------------------
for how in flip truncate delete; do
    rm -rf "$T/k"; cp -r "$T/ck" "$T/k"; rm -rf "$T/k/step-8" "$T/k/step-6"
    f="$T/k/step-4/rank-00000.safetensors"
    case $how in
        flip) printf '\x55' | dd of="$f" bs=1 seek=5000 conv=notrunc status=none ;;
        truncate) truncate -s 4000 "$f" ;;
        delete) rm "$f" ;;
    esac
    train "$T/k" 8 --checkpoint-dir "$T/k" --checkpoint-every 2 --resume --save-model "$T/k.model"
    if grep -q "skipping checkpoint $T/k/step-4: .*rank-00000.safetensors" "$T/k.log" && grep -q "resumed from $T/k/step-2" "$T/k.log" \
       && cmp -s "$T/a.model/model.safetensors" "$T/k.model/model.safetensors" && ! ls "$T/k" | grep -qv '^step-'; then ok
    else bad "corrupt checkpoint ($how)"; cat "$T/k.log"; ls -A "$T/k"; fi
done

# ---- a save that fails on a full disk (a 2.5 MB tmpfs: one checkpoint fits, two do not) ----
mkdir -p "$T/full"
if mount -t tmpfs -o size=2500k tmpfs "$T/full" 2>/dev/null; then
    train "$T/f0" 2 --checkpoint-dir "$T/full/ck"
    train "$T/f1" 4 --checkpoint-dir "$T/full/ck" --resume; st=$?
    if [ $st -ne 0 ] && grep -q "error: .*saving checkpoint $T/full/ck/step-4: .*No space left on device" "$T/f1.log" \
       && [ "$(ls -A "$T/full/ck")" = step-2 ] && "$ZT" export --checkpoint "$T/full/ck/step-2" --out "$T/f.export" >/dev/null 2>&1; then ok
    else bad "save on a full disk: status $st"; cat "$T/f1.log"; ls -A "$T/full/ck"; fi
    umount "$T/full"
else
    echo "skip: cannot mount a tmpfs here (not root?): the full-disk check did not run"
fi

# ---- export --------------------------------------------------------------------------------
"$ZT" export --checkpoint "$T/ck/step-8" --out "$T/exp" >/dev/null 2>"$T/exp.err" || bad "export: $(cat "$T/exp.err")"
"$ZT" export --checkpoint "$T/ck/step-8" --out "$T/exps" --max-shard-size 200000 >/dev/null 2>"$T/exps.err" || bad "sharded export: $(cat "$T/exps.err")"
if cmp -s "$T/exp/model.safetensors" "$T/a.model/model.safetensors" && [ -f "$T/exps/model.safetensors.index.json" ] \
   && [ "$(ls "$T/exps" | grep -c '^model-0000.-of-0000.\.safetensors$')" -ge 2 ]; then ok; else bad "export layout: $(ls "$T/exp" "$T/exps")"; fi
B=$FIX/batch.safetensors
if "$ZT" grad --model "$T/exp" --batch "$B" --out "$T/g1.st" >/dev/null && "$ZT" grad --model "$T/exps" --batch "$B" --out "$T/g2.st" >/dev/null \
   && cmp -s "$T/g1.st" "$T/g2.st"; then ok; else bad "grad on the exported folders differs"; fi
cp -r "$T/ck/step-8" "$T/broken"; truncate -s 100 "$T/broken/model.safetensors"
if ! "$ZT" export --checkpoint "$T/broken" --out "$T/nope" 2>"$T/nope.err" && grep -q "model.safetensors" "$T/nope.err" && [ ! -e "$T/nope" ]; then ok
else bad "export of a corrupt checkpoint"; cat "$T/nope.err"; fi

echo "train: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
