#!/usr/bin/env bash
# test_train.sh - `zerotrain train` end to end on a tiny BERT: same seed -> bit-identical
# run; stop + --resume -> bit-identical to not stopping; SIGKILL at points inside a save ->
# --resume still continues bit-identically; corrupt checkpoints detected, named, skipped;
# a failing save (file-size limit) keeps the previous checkpoint; export and sharded export;
# an export or --save-model replaces its folder whole (no older weights survive, a folder
# with other files is refused, a killed or failing export keeps the older one; a folder with
# both weight layouts is refused); non-finite weights are neither exported nor loaded;
# one run per checkpoint folder (refusal, --overwrite, the lock, at N = 1, 2, 3), pruning
# within the run's lineage, symbolic links never followed, the manifest's own checksum and
# fields, resume notices, every output path checked before the first step.
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

# ---- one run per folder, lineages, --overwrite (issue 21) -----------------------------------
MAN="$PY tests/ref/ckpt_manifest.py"
tree() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 md5sum); }  # every file's bytes
ids() { local d; for d in "$1"/step-*; do $MAN runid "$d"; done | sort -u | paste -sd' '; }
train "$T/l1" 5 --checkpoint-dir "$T/L" --checkpoint-every 1 --seed 1
old=$(ids "$T/L"); before=$(tree "$T/L")
# a fresh run into it is refused before training: nothing in the folder changes, its
# pre-existing metrics file is not truncated
echo keep >"$T/l2.jsonl"
train "$T/l2" 2 --checkpoint-dir "$T/L" --checkpoint-every 1 --keep 2 --seed 2; st=$?
if [ $st -eq 1 ] && grep -q "error: $T/L already holds checkpoints (the newest: $T/L/step-5): pass --resume .* --overwrite" "$T/l2.log" \
   && ! grep -q "^step 1/" "$T/l2.log" && [ "$(tree "$T/L")" = "$before" ] && [ "$(cat "$T/l2.jsonl")" = keep ]; then ok
else bad "a fresh run into a folder of checkpoints: status $st, folder: $(ls -A "$T/L")"; cat "$T/l2.log"; fi
# --overwrite killed inside its first save loses nothing; then one that completes leaves only
# its own lineage
ZT_FAULT_POINT="before:rename" train "$T/l3" 2 --checkpoint-dir "$T/L" --checkpoint-every 1 --keep 2 --seed 2 --overwrite; st=$?
if [ $st -eq 137 ] && [ "$(ls "$T/L")" = "$(printf 'step-1\nstep-2\nstep-3\nstep-4\nstep-5')" ] && [ "$(ids "$T/L")" = "$old" ]; then ok
else bad "--overwrite killed before its first checkpoint: status $st, folder: $(ls -A "$T/L")"; fi
train "$T/l4" 2 --checkpoint-dir "$T/L" --checkpoint-every 1 --keep 2 --seed 2 --overwrite; st=$?
new=$(ids "$T/L")
if [ $st -eq 0 ] && [ "$(ls "$T/L")" = "$(printf 'step-1\nstep-2')" ] && [ "$new" != "$old" ] && [ "$(echo $new | wc -w)" -eq 1 ] \
   && grep -q "removed 4 checkpoints of other runs" "$T/l4.log" && [ -z "$(ls -A "$T/L" | grep -v '^step-')" ]; then ok
else bad "--overwrite: status $st, folder: $(ls -A "$T/L"), run ids $old -> $new"; cat "$T/l4.log"; fi
# --keep prunes only the run's own lineage: another run's checkpoint (step-0) and an older
# version's without a run id (legacy manifest, step-00) stay; a resume continues the lineage
train "$T/o1" 1 --checkpoint-dir "$T/O" --seed 3 && mv "$T/O/step-1" "$T/L/step-0" && cp -r "$T/L/step-0" "$T/L/step-00" && $MAN legacy "$T/L/step-00"
train "$T/l5" 6 --checkpoint-dir "$T/L" --checkpoint-every 1 --keep 1 --resume; st=$?
if [ $st -eq 0 ] && grep -q "resumed from $T/L/step-2" "$T/l5.log" && [ "$(ls "$T/L")" = "$(printf 'step-0\nstep-00\nstep-6')" ] \
   && [ "$($MAN runid "$T/L/step-6")" = "$new" ] && $MAN check "$T/L/step-6"; then ok
else bad "--keep outside the run's lineage: status $st, folder: $(ls -A "$T/L")"; cat "$T/l5.log"; fi
# the manifest as documented: manifest_xxh64 over the bytes before its line (checked in Python)
if $MAN check "$T/L/step-0" && [ "$($MAN runid "$T/L/step-00")" = - ]; then ok; else bad "manifest layout or checksum"; fi
# a step-N that is a symbolic link: pruning never follows it (the link is left, its target
# untouched)
train "$T/s0" 2 --checkpoint-dir "$T/S" --checkpoint-every 1
mkdir -p "$T/target" && echo precious >"$T/target/f" && rm -rf "$T/S/step-1" && ln -s "$T/target" "$T/S/step-1"
train "$T/s1" 4 --checkpoint-dir "$T/S" --checkpoint-every 1 --keep 1 --resume; st=$?
if [ $st -eq 0 ] && [ "$(cat "$T/target/f" 2>/dev/null)" = precious ] && [ -L "$T/S/step-1" ] && [ -d "$T/S/step-4" ] && [ ! -e "$T/S/step-2" ]; then ok
else bad "pruning a symlinked step-1: status $st, target: $(ls -A "$T/target"), folder: $(ls -lA "$T/S")"; fi
# --overwrite replaces the link (a save at its step) and removes the others: the link alone
ln -s "$T/target" "$T/S/step-3"
train "$T/s2" 2 --checkpoint-dir "$T/S" --checkpoint-every 1 --overwrite; st=$?
if [ $st -eq 0 ] && [ "$(cat "$T/target/f" 2>/dev/null)" = precious ] && [ "$(ls "$T/S")" = "$(printf 'step-1\nstep-2')" ] \
   && [ ! -L "$T/S/step-1" ] && grep -q "replacing $T/S/step-1, which is not a checkpoint folder" "$T/s2.log"; then ok
else bad "--overwrite over symlinked steps: status $st, target: $(ls -A "$T/target"), folder: $(ls -A "$T/S")"; cat "$T/s2.log"; fi
# two trainers at once on one folder: one succeeds, the other fails at once naming the lock
# and writes nothing (no metrics file); the folder holds the winner's checkpoints only
train "$T/w1" 40 --checkpoint-dir "$T/W" --checkpoint-every 10 --seed 11 & p1=$!
train "$T/w2" 40 --checkpoint-dir "$T/W" --checkpoint-every 10 --seed 12 & p2=$!
wait $p1; s1=$?; wait $p2; s2=$?
if [ $s1 -eq 0 ] && [ $s2 -ne 0 ]; then win=w1 lose=w2 seed=11; else win=w2 lose=w1 seed=12; fi
seeds=$(for d in "$T/W"/step-*; do "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["seed"])' "$d/state.json"; done | sort -u)
if [ $((s1 + s2)) -eq 1 ] && grep -q "error: $T/W is locked by another running zerotrain" "$T/$lose.log" && [ ! -e "$T/$lose.jsonl" ] \
   && [ "$(ls "$T/W")" = "$(printf 'step-10\nstep-20\nstep-30\nstep-40')" ] && [ "$seeds" = "$seed" ] && [ "$(ids "$T/W" | wc -w)" -eq 1 ]; then ok
else bad "two trainers on one folder: status $s1 and $s2, folder: $(ls -A "$T/W"), seeds $seeds"; cat "$T/w1.log" "$T/w2.log"; fi

# ---- a corrupt manifest ---------------------------------------------------------------------
rm -rf "$T/m"; cp -r "$T/ck" "$T/m"; rm -rf "$T/m/step-8" "$T/m/step-6"
sed -i '0,/"bytes":\t5/s//"bytes":\t6/' "$T/m/step-4/manifest.json"  # one byte of a size
train "$T/m1" 8 --checkpoint-dir "$T/m" --resume-from "$T/m/step-4" --save-model "$T/m1.model"; st=$?
if [ $st -eq 1 ] && grep -q "error: $T/m/step-4/manifest.json: its content's checksum [0-9a-f]* does not match its \"manifest_xxh64\"" "$T/m1.log" && [ ! -e "$T/m1.model" ]; then ok
else bad "--resume-from a manifest with a flipped byte: status $st"; cat "$T/m1.log"; fi
train "$T/m2" 8 --checkpoint-dir "$T/m" --checkpoint-every 2 --resume --save-model "$T/m2.model"
if grep -q "skipping checkpoint $T/m/step-4: .*manifest_xxh64" "$T/m2.log" && grep -q "resumed from $T/m/step-2" "$T/m2.log" \
   && [ -d "$T/m/.corrupt-step-4.0" ] && cmp -s "$T/a.model/model.safetensors" "$T/m2.model/model.safetensors"; then ok
else bad "--resume past a corrupt manifest"; cat "$T/m2.log"; ls -A "$T/m"; fi
# a field that does not validate, the checksum intact: named
cp -r "$T/ck/step-8" "$T/mf"; $MAN set "$T/mf" files.1.bytes -5
train "$T/m3" 8 --checkpoint-dir "$T/m3.ck" --resume-from "$T/mf"; st=$?
if [ $st -eq 1 ] && grep -q "error: $T/mf/manifest.json: \"files\[1\].bytes\" is missing or not a non-negative integer" "$T/m3.log" && [ ! -e "$T/m3.ck" ]; then ok
else bad "a manifest field: status $st"; cat "$T/m3.log"; ls -A "$T"; fi
# an older version's manifest (no checksum, no run id): accepted with a warning
cp -r "$T/ck/step-8" "$T/mo"; $MAN legacy "$T/mo"
train "$T/m4" 8 --checkpoint-dir "$T/m4.ck" --resume-from "$T/mo"; st=$?
if [ $st -eq 0 ] && grep -q "warning: $T/mo/manifest.json was written by an older zerotrain" "$T/m4.log" && $MAN check "$T/m4.ck/step-8" \
   && [ "$($MAN runid "$T/m4.ck/step-8")" != - ]; then ok
else bad "an older version's manifest: status $st"; cat "$T/m4.log"; fi

# ---- a resume that changes the sequence length, the batch or the data says so ---------------
echo '{"train_micro_batch_size_per_gpu": 3, "steps_per_print": 1}' >"$T/b3.json"
"$ZT" train --model "$T/model" --data synthetic:8 --config "$T/b3.json" --seq-len 32 --steps 10 \
    --checkpoint-dir "$T/ck" --resume >"$T/n1.log" 2>&1; st=$?
if [ $st -eq 0 ] && grep -q "notice: resuming with seq-len 32 (the checkpoint was trained with 16)" "$T/n1.log" \
   && grep -q "notice: resuming with train batch size 3 (the checkpoint was trained with 4)" "$T/n1.log" \
   && grep -q "notice: resuming on data synthetic:8 (the checkpoint was trained on synthetic:7)" "$T/n1.log"; then ok
else bad "resume with other seq-len, batch, data: status $st"; cat "$T/n1.log"; fi
if ! grep -q "notice: resuming" "$T/r.log" "$T/k.log"; then ok; else bad "notices on a resume that changed nothing"; fi

# ---- outputs checked before the first step --------------------------------------------------
mkdir -p "$T/ro"
if mount -t tmpfs -o size=1m tmpfs "$T/ro" 2>/dev/null && mkdir "$T/ro/ck" && mount -o remount,ro "$T/ro" 2>/dev/null; then
    for o in "--checkpoint-dir $T/ro/ck|$T/ro/ck: cannot write checkpoints there: Read-only file system" \
             "--checkpoint-dir $T/ro/new|$T/ro/new: cannot create the checkpoint folder: Read-only file system" \
             "--save-model $T/ro/model|--save-model $T/ro/model: cannot create it in $T/ro: Read-only file system" \
             "--summary $T/ro/s.json|--summary $T/ro/s.json: cannot create it in $T/ro: Read-only file system"; do
        echo keep >"$T/o.jsonl"
        train "$T/o" 2 ${o%%|*}; st=$?
        if [ $st -eq 1 ] && grep -qF "error: ${o#*|}" "$T/o.log" && ! grep -q "^step 1/" "$T/o.log" && [ "$(cat "$T/o.jsonl")" = keep ]; then ok
        else bad "read-only output (${o%%|*}): status $st"; cat "$T/o.log"; fi
    done
    umount "$T/ro"
else
    umount "$T/ro" 2>/dev/null
    echo "skip: cannot mount a read-only tmpfs here (not root?): the read-only output checks did not run"
fi

# ---- several ranks: every rank refuses together; the lock; --overwrite; resume keeps the run id
MPI="mpirun --allow-run-as-root --oversubscribe"
echo '{"train_batch_size": 6, "gradient_accumulation_steps": 1, "zero_optimization": {"stage": 2}, "steps_per_print": 1}' >"$T/z.json"
mtrain() { # OUT NP STEPS [args]
    local out=$1 np=$2 steps=$3; shift 3
    timeout 120 $MPI -np "$np" "$ZT" train --model bert-tiny --data synthetic:7 --config "$T/z.json" --seq-len 16 \
        --steps "$steps" --metrics "$out.jsonl" "$@" >"$out.log" 2>&1
}
mtrain "$T/z1" 2 2 --checkpoint-dir "$T/Z" --checkpoint-every 1
zid=$(ids "$T/Z")
for np in 2 3; do
    before=$(tree "$T/Z")
    mtrain "$T/z2" $np 2 --checkpoint-dir "$T/Z"; st=$?
    if [ $st -ne 0 ] && [ $st -ne 124 ] && grep -q "error: $T/Z already holds checkpoints" "$T/z2.log" && [ "$(tree "$T/Z")" = "$before" ] \
       && [ ! -e "$T/z2.jsonl" ]; then ok
    else bad "N=$np: a fresh run into a folder of checkpoints: status $st"; cat "$T/z2.log"; fi
done
mtrain "$T/z3" 3 4 --checkpoint-dir "$T/Z" --checkpoint-every 1 --keep 2 --resume; st=$?
if [ $st -eq 0 ] && [ ${#zid} -eq 32 ] && grep -q "resumed from $T/Z/step-2" "$T/z3.log" && [ "$(ls "$T/Z")" = "$(printf 'step-3\nstep-4')" ] && [ "$(ids "$T/Z")" = "$zid" ]; then ok
else bad "N=3: resume keeps the lineage: status $st, folder: $(ls -A "$T/Z"), ids $(ids "$T/Z") (was $zid)"; cat "$T/z3.log"; fi
mtrain "$T/z4" 2 30 --checkpoint-dir "$T/Z" --overwrite --checkpoint-every 10 & p1=$!
for i in $(seq 1 100); do [ -e "$T/z4.jsonl" ] && break; sleep 0.1; done  # (its lock is taken)
mtrain "$T/z5" 3 2 --checkpoint-dir "$T/Z" --resume; s2=$?
wait $p1; s1=$?
if [ $s1 -eq 0 ] && [ $s2 -ne 0 ] && [ $s2 -ne 124 ] && grep -q "error: $T/Z is locked by another running zerotrain" "$T/z5.log" \
   && [ "$(ls "$T/Z")" = "$(printf 'step-10\nstep-20\nstep-30')" ] && [ "$(ids "$T/Z")" != "$zid" ] && [ "$(ids "$T/Z" | wc -w)" -eq 1 ]; then ok
else bad "N=2 --overwrite while N=3 waits on the lock: status $s1 and $s2, folder: $(ls -A "$T/Z")"; cat "$T/z4.log" "$T/z5.log"; fi

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

# an export replaces the folder whole: unsharded (step 4) then sharded (step 8) into the same
# folder leaves only step 8's shards, index and config, and the model loaded from it gives the
# checkpoint's loss to the last digit printed
loss_of() { "$ZT" grad --model "$1" --batch "$B" --out "$T/lossof.st" 2>&1 | sed -n 's/^loss \([^ ]*\) .*/\1/p'; }
"$ZT" export --checkpoint "$T/ck/step-4" --out "$T/re" >/dev/null 2>&1 && echo "tok" >"$T/re/vocab.txt"
"$ZT" export --checkpoint "$T/ck/step-8" --out "$T/re" --max-shard-size 200000 >/dev/null 2>"$T/re.err"
l8=$(loss_of "$T/ck/step-8"); lre=$(loss_of "$T/re"); l4=$(loss_of "$T/ck/step-4")
if [ "$(ls -A "$T/re" | grep -v '^model-0000.-of-0000.\.safetensors$' | tr '\n' ' ')" = "config.json model.safetensors.index.json vocab.txt " ] \
   && [ -n "$l8" ] && [ "$lre" = "$l8" ] && [ "$l4" != "$l8" ] && [ "$(cat "$T/re/vocab.txt")" = tok ] \
   && ! ls -A "$T" | grep -q '^\.re\.'; then ok
else bad "export over an older export: loss $lre, checkpoint's $l8 (step 4: $l4); holds $(ls -A "$T/re" | tr '\n' ' ')"; cat "$T/re.err"; fi
# sharded then unsharded the other way round, and --save-model over an earlier --save-model
"$ZT" export --checkpoint "$T/ck/step-4" --out "$T/re" >/dev/null 2>&1
if [ "$(ls "$T/re" | tr '\n' ' ')" = "config.json model.safetensors vocab.txt " ] && [ "$(loss_of "$T/re")" = "$l4" ]; then ok
else bad "unsharded export over a sharded one: $(ls "$T/re" | tr '\n' ' ')"; fi
touch "$T/a.model/model-00001-of-00002.safetensors"
train "$T/sm" 8 --save-model "$T/a.model"
if [ "$(ls -A "$T/a.model" | tr '\n' ' ')" = "config.json model.safetensors " ] && [ "$(loss_of "$T/a.model")" = "$l8" ]; then ok
else bad "--save-model over an older folder: $(ls -A "$T/a.model" | tr '\n' ' ')"; cat "$T/sm.log"; fi
# a folder that is not a model folder is not replaced (named file, nothing written); nor a
# symbolic link
mkdir -p "$T/mine"; echo notes >"$T/mine/notes.txt"; ln -s "$T/re" "$T/relink"
if ! "$ZT" export --checkpoint "$T/ck/step-8" --out "$T/mine" 2>"$T/mine.err" && grep -q "$T/mine holds the file \"notes.txt\", which is not part of a model folder" "$T/mine.err" \
   && [ "$(ls -A "$T/mine")" = notes.txt ] && ! train "$T/mine2" 2 --save-model "$T/mine" && grep -q "notes.txt" "$T/mine2.log" \
   && [ "$(ls -A "$T/mine")" = notes.txt ] && ! "$ZT" export --checkpoint "$T/ck/step-8" --out "$T/relink" 2>"$T/link.err" \
   && grep -q "is a symbolic link" "$T/link.err" && [ -L "$T/relink" ] && ! ls -A "$T" | grep -q '^\.\(mine\|relink\)\.'; then ok
else bad "export into a folder with other files"; cat "$T/mine.err" "$T/link.err"; tail -2 "$T/mine2.log"; fi
# an export that dies just before the swap (SIGKILL) leaves the older folder as it was; the
# next export clears what the dead one left
sums() { (cd "$1" && md5sum * | sort); }
before=$(sums "$T/re")
ZT_FAULT_POINT=before:export "$ZT" export --checkpoint "$T/ck/step-8" --out "$T/re" --max-shard-size 200000 >/dev/null 2>&1; st=$?
if [ $st -eq 137 ] && [ "$(sums "$T/re")" = "$before" ] && [ "$(loss_of "$T/re")" = "$l4" ] \
   && "$ZT" export --checkpoint "$T/ck/step-8" --out "$T/re" >/dev/null 2>&1 && [ "$(loss_of "$T/re")" = "$l8" ] \
   && ! ls -A "$T" | grep -q '^\.re\.'; then ok
else bad "an export killed before the swap: status $st; $(ls -A "$T" | grep '^\.re')"; fi
# an export that fails (no space for the new folder beside the old, after two of its three
# shards) keeps the old one
mkdir -p "$T/small"
if mount -t tmpfs -o size=1000k tmpfs "$T/small" 2>/dev/null; then
    "$ZT" export --checkpoint "$T/ck/step-4" --out "$T/small/m" >/dev/null 2>&1; before=$(sums "$T/small/m")
    "$ZT" export --checkpoint "$T/ck/step-8" --out "$T/small/m" --max-shard-size 200000 >/dev/null 2>"$T/small.err"; st=$?
    if [ $st -ne 0 ] && grep -q "No space left on device" "$T/small.err" && [ "$(sums "$T/small/m")" = "$before" ] \
       && [ "$(ls -A "$T/small")" = m ]; then ok
    else bad "export on a full disk: status $st"; cat "$T/small.err"; ls -A "$T/small"; fi
    umount "$T/small"
else
    echo "skip: cannot mount a tmpfs here (not root?): the full-disk export check did not run"
fi
# a folder holding both model.safetensors and an index is refused naming both
mkdir -p "$T/both"; cp "$T/exps/"* "$T/both/"; cp "$T/exp/model.safetensors" "$T/both/"
if ! "$ZT" grad --model "$T/both" --batch "$B" --out "$T/both.st" 2>"$T/both.err" \
   && grep -q "$T/both holds both model.safetensors and model.safetensors.index.json" "$T/both.err" && [ ! -e "$T/both.st" ]; then ok
else bad "a folder with both weight layouts"; cat "$T/both.err"; fi

# non-finite weights are neither written nor loaded: a NaN written into one tensor of a
# checkpoint (its manifest updated) and of a model folder
poison() { # FOLDER FILE TENSOR INDEX VALUE: writes VALUE into element INDEX, updates manifest.json
    "$PY" - "$@" <<'EOF2'
import ctypes, json, os, struct, sys
import numpy as np
d, f, name, i, val = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
p = os.path.join(d, f)
b = bytearray(open(p, "rb").read())
n = struct.unpack("<Q", b[:8])[0]
t = json.loads(b[8:8 + n])[name]
assert t["dtype"] == "F32"
off = 8 + n + t["data_offsets"][0] + 4 * i
b[off:off + 4] = np.float32(val).tobytes()
open(p, "wb").write(b)
m = os.path.join(d, "manifest.json")
if os.path.exists(m):
    x = ctypes.CDLL("libxxhash.so.0")
    x.XXH64.restype, x.XXH64.argtypes = ctypes.c_uint64, [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint64]
    j = json.load(open(m))
    for e in j["files"]:
        if e["name"] == f:
            e["bytes"], e["xxh64"] = len(b), "%016x" % x.XXH64(bytes(b), len(b), 0)
    sys.path.insert(0, "tests/ref")
    from ckpt_manifest import seal, dump
    if j.pop("manifest_xxh64", None) is not None:  # sealed again, as the C code seals it
        open(m, "wb").write(seal(j))
    else:
        open(m, "w").write(dump(j))
EOF2
}
rm -rf "$T/nan"; cp -r "$T/ck/step-8" "$T/nan"
poison "$T/nan" model.safetensors bert.encoder.layer.1.attention.self.query.weight 70 nan
nt='tensor "bert.encoder.layer.1.attention.self.query.weight": element 70 \[1, 6\] is NaN'
if "$ZT" export --checkpoint "$T/nan" --out "$T/nan.out" 2>"$T/nan.err"; then st=0; else st=$?; fi
if [ $st -ne 0 ] && [ "$(wc -l <"$T/nan.err")" -eq 1 ] && grep -q "$T/nan: $nt" "$T/nan.err" && [ ! -e "$T/nan.out" ] \
   && ! ls -A "$T" | grep -q '^\.nan'; then ok
else bad "export of a checkpoint with a NaN: status $st"; cat "$T/nan.err"; fi
train "$T/nanres" 9 --resume-from "$T/nan" --checkpoint-dir "$T/nanck" --save-model "$T/nanres.model"; st=$?
if [ $st -ne 0 ] && grep -q "$T/nan/model.safetensors: $nt" "$T/nanres.log" && [ ! -e "$T/nanres.model" ] && [ ! -e "$T/nanck" ]; then ok
else bad "resume from a checkpoint with a NaN: status $st"; tail -2 "$T/nanres.log"; fi
rm -rf "$T/inf"; cp -r "$T/model" "$T/inf"
poison "$T/inf" model.safetensors cls.predictions.bias 3 -inf
"$ZT" train --model "$T/inf" --data synthetic --steps 1 --seq-len 16 --save-model "$T/inf.model" >/dev/null 2>"$T/inf.err"; st=$?
if [ $st -ne 0 ] && grep -q "$T/inf/model.safetensors: tensor \"cls.predictions.bias\": element 3 \[3\] is -Inf" "$T/inf.err" \
   && [ ! -e "$T/inf.model" ]; then ok
else bad "train --model with an infinity: status $st"; cat "$T/inf.err"; fi

# the progress line's loss is the mean of the steps since the previous line (steps_per_print
# 3 over 7 steps: steps 1-3, 4-6, 7), each step's own loss in the metrics
sed 's/"steps_per_print": 1/"steps_per_print": 3/' "$T/ds.json" >"$T/ds3.json"
"$ZT" train --model "$T/model" --data synthetic:7 --config "$T/ds3.json" --seq-len 16 --steps 7 \
    --metrics "$T/win.jsonl" >"$T/win.log" 2>&1
if "$PY" - "$T/win.jsonl" "$T/win.log" <<'PY'; then ok; else bad "the progress line's loss is not the mean since the previous line"; cat "$T/win.log"; fi
import json, re, sys
L = [json.loads(l)["loss"] for l in open(sys.argv[1])]
got = [(int(m.group(1)), float(m.group(2))) for m in
       re.finditer(r"^step (\d+)/7  loss ([0-9.]+) \(unigram", open(sys.argv[2]).read(), re.M)]
want = [(3, sum(L[0:3]) / 3), (6, sum(L[3:6]) / 3), (7, L[6])]
assert len(L) == 7 and [s for s, _ in got] == [3, 6, 7], (L, got)
assert all(abs(g - w) <= 5.1e-5 for (_, g), (_, w) in zip(got, want)), (got, want)  # (%.4f)
PY

echo "train: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
