#!/usr/bin/env bash
# test_train.sh - `zerotrain train` end to end on a tiny BERT: same seed -> bit-identical
# run; stop + --resume -> bit-identical to not stopping; SIGKILL at points inside a save ->
# --resume still continues bit-identically; corrupt checkpoints detected, named, skipped;
# a failing save (file-size limit) keeps the previous checkpoint; export and sharded export;
# an export or --save-model replaces its folder whole (no older weights survive, a folder
# with other files is refused, a killed or failing export keeps the older one; a folder with
# both weight layouts is refused); non-finite weights are neither exported nor loaded.
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
    json.dump(j, open(m, "w"), indent=1)
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

echo "train: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
