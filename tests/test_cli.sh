#!/usr/bin/env bash
# test_cli.sh - the zerotrain command on good and bad input: every bad input gives exactly one
# line on stderr, a non-zero exit and no output file (nor temp file) left behind (among them a
# model too large for the machine, refused in seconds; messages that name the file at fault).
# Usage: tests/test_cli.sh [path/to/zerotrain]
set -u
ZT=${1:-build/zerotrain}
FIX=${ZT_FIXTURES:-tests/fixtures}/bert-tiny
PY=/usr/bin/python3
T=$(mktemp -d /tmp/zt_cli.XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0

ok()  { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# expect_error NAME EXPECTED_STATUS STDERR_SUBSTRING -- command...
# checks: status, exactly one stderr line containing the substring, no $T/out* files
expect_error() {
    local name=$1 want=$2 needle=$3; shift 4
    rm -rf "$T"/out*
    "$@" >"$T/stdout" 2>"$T/stderr"
    local st=$? lines
    lines=$(wc -l <"$T/stderr")
    if [ "$st" -ne "$want" ]; then bad "$name: exit $st, expected $want"; cat "$T/stderr"; return; fi
    if [ "$lines" -ne 1 ]; then bad "$name: $lines stderr lines, expected 1"; cat "$T/stderr"; return; fi
    if ! grep -qF -- "$needle" "$T/stderr"; then bad "$name: stderr lacks '$needle'"; cat "$T/stderr"; return; fi
    if ls "$T"/out* >/dev/null 2>&1; then bad "$name: output left behind: $(ls "$T"/out*)"; return; fi
    ok
}

# mkbatch FILE SPEC: writes a safetensors batch; SPEC is python code defining `tensors`,
# a dict name -> (dtype, shape, flat list)
mkbatch() {
    "$PY" - "$1" "$2" <<'EOF'
import json, struct, sys
out, spec = sys.argv[1], sys.argv[2]
env = {}
exec(spec, env)
fmt = {"I64": "q", "F32": "f", "I32": "i"}
hdr, data = {}, b""
for name, (dt, shape, vals) in env["tensors"].items():
    blob = struct.pack("<%d%s" % (len(vals), fmt[dt]), *vals)
    hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
    data += blob
h = json.dumps(hdr).encode()
h += b" " * ((8 - (8 + len(h)) % 8) % 8)
open(out, "wb").write(struct.pack("<Q", len(h)) + h + data)
EOF
}

B=$FIX/batch.safetensors
# ---- success paths -------------------------------------------------------------------------
if "$ZT" grad --model "$FIX" --batch "$B" --out "$T/good.safetensors" >"$T/stdout" 2>"$T/stderr" \
   && grep -q "^loss " "$T/stdout" && [ ! -s "$T/stderr" ]; then ok; else bad "grad on the fixture"; cat "$T/stderr"; fi
if "$ZT" inspect "$T/good.safetensors" >"$T/inspect" && grep -q "^grad.cls.predictions.bias *F32 *\[512\]" "$T/inspect" \
   && grep -q "^logits *F32 *\[2, 16, 512\]" "$T/inspect" && grep -q "^44 tensors" "$T/inspect"; then ok
else bad "inspect of grad output"; cat "$T/inspect"; fi
if "$ZT" version | grep -q "^zerotrain 0.3.0$"; then ok; else bad "version"; fi
# T5: the fixture's loss, logits, gradients and AdamW step within its tolerances (compare.py)
T5=${ZT_FIXTURES:-tests/fixtures}/t5-tiny
if "$ZT" grad --model "$T5" --batch "$T5/batch.safetensors" --step "$T5/step.json" --out "$T/t5.safetensors" \
       >"$T/stdout" 2>"$T/stderr" && "$PY" tests/ref/compare.py --require-adamw --require-logits \
       "$T5/expected.safetensors" "$T/t5.safetensors" >"$T/cmp" 2>&1; then ok
else bad "grad on the T5 fixture"; cat "$T/stderr" "$T/cmp"; fi
mkbatch "$T/t5tt.safetensors" 'tensors = {"input_ids": ("I64", [1, 2], [5, 6]), "labels": ("I64", [1, 3], [7, 8, 1]), "token_type_ids": ("I64", [1, 2], [0, 0])}'
expect_error "t5 token_type_ids" 1 "T5 takes no token_type_ids" -- "$ZT" grad --model "$T5" --batch "$T/t5tt.safetensors" --out "$T/out.st"
mkbatch "$T/t5dm.safetensors" 'tensors = {"input_ids": ("I64", [1, 2], [5, 6]), "labels": ("I64", [1, 3], [7, 8, 1]), "decoder_attention_mask": ("I64", [1, 2], [1, 1])}'
expect_error "t5 decoder mask shape" 1 "tensor \"decoder_attention_mask\" has shape [1, 2], labels has [1, 3]" -- "$ZT" grad --model "$T5" --batch "$T/t5dm.safetensors" --out "$T/out.st"
mkbatch "$T/t5lab.safetensors" 'tensors = {"input_ids": ("I64", [1, 2], [5, 6]), "labels": ("I64", [1, 3], [7, 512, 1])}'
expect_error "t5 label range" 1 "labels[0][1] = 512 is neither -100 nor in [0, 512)" -- "$ZT" grad --model "$T5" --batch "$T/t5lab.safetensors" --out "$T/out.st"
expect_error "bert labels length" 1 "BERT's labels have the input's shape" -- "$ZT" grad --model "$FIX" --batch "$T/t5lab.safetensors" --out "$T/out.st"

echo '{"train_micro_batch_size_per_gpu": 2, "steps_per_print": 1}' >"$T/ds.json"
if "$ZT" train --model "$FIX" --data synthetic --config "$T/ds.json" --steps 3 --seq-len 16 \
      --save-model "$T/trained" >"$T/train.out" 2>"$T/train.err" \
   && [ "$(grep -c '^step ' "$T/train.out")" -eq 3 ] && [ -f "$T/trained/config.json" ] \
   && "$ZT" inspect "$T/trained/model.safetensors" | grep -q "^bert.embeddings.word_embeddings.weight *F32 *\[512, 64\]"; then ok
else bad "train + save-model"; cat "$T/train.out" "$T/train.err"; fi
# the saved folder is a model the grad command accepts
if "$ZT" grad --model "$T/trained" --batch "$B" --out "$T/g2.safetensors" >/dev/null 2>&1; then ok; else bad "grad on a saved model"; fi

# ---- bad input -----------------------------------------------------------------------------
expect_error "no arguments" 2 "grad needs --model" -- "$ZT" grad
expect_error "unknown option" 2 "unknown option '--modle'" -- "$ZT" grad --modle x
expect_error "missing value" 2 "option --out needs a value" -- "$ZT" grad --model "$FIX" --batch "$B" --out
expect_error "unknown command" 2 "unknown command 'frobnicate'" -- "$ZT" frobnicate
expect_error "missing model folder" 1 "/nonexistent/config.json" -- "$ZT" grad --model /nonexistent --batch "$B" --out "$T/out.st"
expect_error "missing batch" 1 "$T/none.safetensors" -- "$ZT" grad --model "$FIX" --batch "$T/none.safetensors" --out "$T/out.st"
mkbatch "$T/f32.safetensors" 'tensors = {"input_ids": ("F32", [1, 3], [1.0, 2.0, 3.0]), "labels": ("I64", [1, 3], [1, 2, 3])}'
expect_error "wrong dtype" 1 "tensor \"input_ids\" has dtype F32, expected I64" -- "$ZT" grad --model "$FIX" --batch "$T/f32.safetensors" --out "$T/out.st"
mkbatch "$T/long.safetensors" 'tensors = {"input_ids": ("I64", [1, 65], [5] * 65), "labels": ("I64", [1, 65], [5] * 65)}'
expect_error "too long" 1 "sequence length 65 exceeds max_position_embeddings 64" -- "$ZT" grad --model "$FIX" --batch "$T/long.safetensors" --out "$T/out.st"
mkbatch "$T/vocab.safetensors" 'tensors = {"input_ids": ("I64", [2, 3], [5, 6, 7, 8, 512, 9]), "labels": ("I64", [2, 3], [-100] * 6)}'
expect_error "token id >= vocab" 1 "input_ids[1][1] = 512 is outside [0, 512)" -- "$ZT" grad --model "$FIX" --batch "$T/vocab.safetensors" --out "$T/out.st"
mkbatch "$T/shape.safetensors" 'tensors = {"input_ids": ("I64", [2, 3], [5] * 6), "labels": ("I64", [3, 2], [5] * 6)}'
expect_error "shape mismatch" 1 "tensor \"labels\" has shape [3, 2], input_ids has [2, 3]" -- "$ZT" grad --model "$FIX" --batch "$T/shape.safetensors" --out "$T/out.st"
mkbatch "$T/nolabels.safetensors" 'tensors = {"input_ids": ("I64", [2, 3], [5] * 6)}'
expect_error "missing labels" 1 "batch has no tensor \"labels\"" -- "$ZT" grad --model "$FIX" --batch "$T/nolabels.safetensors" --out "$T/out.st"
head -c 100 "$B" >"$T/trunc.safetensors"
expect_error "truncated batch" 1 "$T/trunc.safetensors" -- "$ZT" grad --model "$FIX" --batch "$T/trunc.safetensors" --out "$T/out.st"
expect_error "output folder missing" 1 "$T/nodir/out.st" -- "$ZT" grad --model "$FIX" --batch "$B" --out "$T/nodir/out.st"
echo '{"lr": "fast"}' >"$T/step.json"
expect_error "bad step.json" 1 "\"lr\" must be a number" -- "$ZT" grad --model "$FIX" --batch "$B" --step "$T/step.json" --out "$T/out.st"
expect_error "inspect malformed" 1 "$T/trunc.safetensors" -- "$ZT" inspect "$T/trunc.safetensors"
# files that are not safetensors: what they are (torch.save's zip and legacy pickle formats,
# written with the standard library as torch.save lays them out, and JSON), not a header length
$PY - "$T" <<'PY'
import pickle, sys, zipfile
t = sys.argv[1]
with zipfile.ZipFile(t + "/pytorch_model.bin", "w") as z:   # torch.save's zip layout
    z.writestr("archive/data.pkl", pickle.dumps({"w": [0.0] * 4}, protocol=2))
open(t + "/legacy.pt", "wb").write(pickle.dumps({"w": [0.0] * 4}, protocol=2))
open(t + "/index.json", "w").write('{"metadata": {"total_size": 4}, "weight_map": {"w": "model-00001-of-00002.safetensors"}}')
open(t + "/rand.bin", "wb").write(bytes(range(7, 207)))
PY
expect_error "inspect pytorch_model.bin" 1 "pytorch_model.bin is not a safetensors file: it is a zip archive: the format of torch.save" -- "$ZT" inspect "$T/pytorch_model.bin"
if grep -qF "save_pretrained(DIR, safe_serialization=True)" "$T/stderr"; then ok; else bad "inspect pytorch_model.bin: no way to convert it"; cat "$T/stderr"; fi
expect_error "inspect legacy pickle" 1 "legacy.pt is not a safetensors file: it is a Python pickle" -- "$ZT" inspect "$T/legacy.pt"
expect_error "inspect JSON index" 1 "index.json is not a safetensors file: it is JSON: a sharded checkpoint's index" -- "$ZT" inspect "$T/index.json"
expect_error "inspect config.json" 1 "config.json is not a safetensors file: it is JSON text" -- "$ZT" inspect "$FIX/config.json"
expect_error "inspect unknown bytes" 1 "rand.bin: not a safetensors file (unknown content)" -- "$ZT" inspect "$T/rand.bin"
mkdir -p "$T/ptfolder" && cp "$FIX/config.json" "$T/pytorch_model.bin" "$T/ptfolder/"
expect_error "train on a pytorch_model.bin folder" 1 "only pytorch_model.bin, a format zerotrain does not read" -- "$ZT" train --model "$T/ptfolder" --data synthetic --steps 1
expect_error "train unknown preset" 1 "unknown model preset \"bert-enormous\"" -- "$ZT" train --model bert-enormous --data synthetic --steps 1
expect_error "train bad steps" 2 "--steps must be an integer" -- "$ZT" train --model bert-tiny --data synthetic --steps -3
expect_error "train no data" 2 "train needs --model DIR|PRESET|CONFIG_JSON and --data" -- "$ZT" train --model bert-tiny
# a config.json alone: that architecture from the seed (the fixture's shapes, other weights)
if "$ZT" train --model "$FIX/config.json" --data synthetic --seq-len 16 --steps 1 --threads 1 \
       --save-model "$T/fromcfg" >"$T/fromcfg.log" 2>&1 &&
   grep -q "BERT L2 H64 A4 V512" "$T/fromcfg.log" && [ -f "$T/fromcfg/model.safetensors" ] &&
   ! cmp -s "$T/fromcfg/model.safetensors" "$FIX/model.safetensors"; then ok
else bad "train from a config.json"; tail -3 "$T/fromcfg.log"; fi
expect_error "train bad config.json" 1 "$T/step.json" -- "$ZT" train --model "$T/step.json" --data synthetic --steps 1
expect_error "train seq too long" 1 "--seq-len 600 exceeds the model's max_position_embeddings 64" -- "$ZT" train --model "$FIX" --data synthetic --seq-len 600 --steps 1
expect_error "train missing data" 1 "$T/nodata" -- "$ZT" train --model "$FIX" --data "$T/nodata" --steps 1
expect_error "resume without dir" 2 "need --checkpoint-dir" -- "$ZT" train --model "$FIX" --data synthetic --resume
# every output path checked before the first step: one line, nothing written (no metrics
# file, no checkpoint folder: one the run created is removed again when it fails first)
echo x >"$T/afile"
TR="$ZT train --model $FIX --data synthetic --steps 1 --seq-len 8"
expect_error "save-model under a file" 1 "--save-model $T/afile/m: $T/afile is not a folder" -- $TR --save-model "$T/afile/m" --metrics "$T/out.metrics" --checkpoint-dir "$T/out.ck"
expect_error "save-model is a file" 1 "--save-model $T/afile: exists and is not a folder" -- $TR --save-model "$T/afile" --metrics "$T/out.metrics"
expect_error "metrics is a folder" 1 "--metrics $T: is a folder" -- $TR --metrics "$T" --checkpoint-dir "$T/out.ck"
expect_error "summary in no folder" 1 "--summary $T/nodir/s.json: its folder $T/nodir: No such file or directory" -- $TR --summary "$T/nodir/s.json" --metrics "$T/out.metrics"
expect_error "checkpoint-dir is a file" 1 "--checkpoint-dir $T/afile: exists and is not a folder" -- $TR --checkpoint-dir "$T/afile" --metrics "$T/out.metrics"
expect_error "checkpoint-dir under a file" 1 "$T/afile/ck: cannot create the checkpoint folder: Not a directory" -- $TR --checkpoint-dir "$T/afile/ck" --metrics "$T/out.metrics"
expect_error "created checkpoint-dir removed" 1 "--seq-len 600 exceeds" -- $TR --seq-len 600 --checkpoint-dir "$T/out.new/deep/ck" --metrics "$T/out.metrics"
expect_error "overwrite without dir" 2 "need --checkpoint-dir" -- $TR --overwrite
expect_error "overwrite and resume" 2 "exclude each other" -- $TR --checkpoint-dir "$T/out.ck" --resume --overwrite
expect_error "export missing" 1 "$T/nockpt/manifest.json" -- "$ZT" export --checkpoint "$T/nockpt" --out "$T/out.x"
# a model too large for the machine (hidden_size 65536: 39 G parameters, 578 GiB of state) is
# refused before anything is allocated, in seconds, naming the config, the predicted bytes,
# the machine's and what would fit; peak RSS stays small
mkdir -p "$T/huge"; sed 's/"hidden_size": 64,/"hidden_size": 65536,/' "$FIX/config.json" >"$T/huge/config.json"
expect_error "model too large" 1 "$T/huge/config.json: the model does not fit this machine: at ZeRO stage 0 it needs 620643720256 bytes (578.0 GiB) of RAM" -- \
    timeout 60 /usr/bin/time -o "$T/huge.rss" -f %M "$ZT" train --model "$T/huge/config.json" --data synthetic --steps 1 --seq-len 8 --save-model "$T/out.m"
if grep -q "and the machine has [0-9]* (.*MemTotal .* + SwapTotal .*)\. It would fit with a model of at most about .* parameters (this one has 3.88e+10; ZeRO stage 3 and offload do not help: they gather each unit whole, and unit \"layer.0\" alone is 64.1 GiB)" "$T/stderr" \
   && [ "$(tail -1 "$T/huge.rss")" -lt 200000 ]; then ok
else bad "model too large: peak RSS $(tail -1 "$T/huge.rss") KiB"; cat "$T/stderr"; fi
# the same check on a pretended smaller machine (ZT_MEMORY_TOTAL, tests only): bert-base needs
# 1.7 GiB at stage 0; stage 3 over 5 machines of 1 GB would fit (the footprint: 2 scratch
# gradient buffers of the largest unit besides the embeddings); bert-tiny fits
expect_error "model too large for 1 GB" 1 "model preset bert-base: the model does not fit this machine: at ZeRO stage 0 it needs 1774465152 bytes (1.7 GiB)" -- \
    env ZT_MEMORY_TOTAL=1000000000 "$ZT" train --model bert-base --data synthetic --steps 1 --seq-len 16 --config "$T/ds.json"
if grep -q "the machine has 1000000000 (953.7 MiB: MemTotal 953.7 MiB + SwapTotal 0 bytes)\. It would fit with ZeRO stage 3 over 5 ranks, one per machine like this one" "$T/stderr" \
   && ZT_MEMORY_TOTAL=1000000000 "$ZT" train --model "$FIX" --data synthetic --steps 1 --seq-len 16 >/dev/null 2>&1; then ok
else bad "model too large for 1 GB"; cat "$T/stderr"; fi

# bad training configs: every problem named, non-zero exit, nothing written (no metrics file,
# no checkpoint folder, no saved model)
bad_config() { # NAME NEEDLE JSON
    echo "$3" >"$T/bad.json"
    rm -rf "$T/bc.metrics" "$T/bc.ck" "$T/bc.model"
    "$ZT" train --model "$FIX" --data synthetic --config "$T/bad.json" --steps 2 --seq-len 8 \
        --metrics "$T/bc.metrics" --checkpoint-dir "$T/bc.ck" --save-model "$T/bc.model" >/dev/null 2>"$T/bc.err"
    local st=$?
    if [ $st -ne 1 ] || ! grep -qF -- "$2" "$T/bc.err" || ! grep -qF "$T/bad.json" "$T/bc.err" \
       || [ -e "$T/bc.metrics" ] || [ -e "$T/bc.ck" ] || [ -e "$T/bc.model" ]; then
        bad "bad config ($1): status $st"; cat "$T/bc.err"
    else ok; fi
}
bad_config "unknown top-level key" 'trian_batch_size: unknown key (did you mean "train_batch_size"?)' '{"trian_batch_size": 8}'
bad_config "unknown nested key" 'zero_optimization.stgae: unknown key (did you mean "stage"?)' '{"train_batch_size": 8, "zero_optimization": {"stgae": 1}}'
bad_config "wrong type" 'gradient_clipping' '{"train_batch_size": 8, "gradient_clipping": "high"}'
bad_config "inconsistent batch" 'train_batch_size' '{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 3, "gradient_accumulation_steps": 2}'
bad_config "negative lr" 'optimizer.params.lr: must be >= 0, got -0.1' '{"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": -0.1}}}'
bad_config "fp16 loss scale window" 'fp16.loss_scale_window: must be >= 1, got 0' '{"train_batch_size": 8, "fp16": {"enabled": true, "loss_scale_window": 0}}'
bad_config "not JSON" 'bad.json' '{"train_batch_size": 8,'
echo '{"train_batch_size": 8, "trian": 1, "optimizer": {"type": "AdamW", "params": {"lr": -1, "betas": [0.9, 2]}}}' >"$T/bad3.json"
if ! "$ZT" check-config "$T/bad3.json" 2>"$T/b3.err" && [ "$(grep -c "$T/bad3.json: " "$T/b3.err")" -eq 3 ]; then ok
else bad "three problems, three lines"; cat "$T/b3.err"; fi
# bad data folders: a shard with a wrong magic, a folder without a manifest
printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\ncat\nsat\non\nmat\n.\n' >"$T/vocab.txt"
for i in $(seq 1 40); do echo "the cat sat on the mat . the mat sat on the cat ."; done >"$T/corpus.txt"
if "$ZT" prepare-data --input "$T/corpus.txt" --tokenizer "wordpiece:$T/vocab.txt" --out "$T/d1" >/dev/null 2>&1; then ok; else bad "prepare-data on a small corpus"; fi
cp -r "$T/d1" "$T/dmagic"; printf 'BADMAGIC' | dd of="$T/dmagic/shard-00000.zts" bs=1 conv=notrunc status=none
expect_error "data with a wrong magic" 1 "$T/dmagic/shard-00000.zts: bad magic" -- "$ZT" train --model "$FIX" --data "$T/dmagic" --steps 1 --seq-len 8 --save-model "$T/out.m"
cp -r "$T/d1" "$T/dnoman"; rm "$T/dnoman/manifest.json"
expect_error "data without a manifest" 1 "$T/dnoman/manifest.json" -- "$ZT" train --model "$FIX" --data "$T/dnoman" --steps 1 --seq-len 8 --save-model "$T/out.m"
if "$ZT" train --model "$FIX" --data "$T/d1" --steps 2 --seq-len 8 >/dev/null 2>"$T/d1.err"; then ok; else bad "train on a small prepared corpus"; cat "$T/d1.err"; fi
# FIFOs (and other special files) are refused at once with the path, never waited on: every
# call runs under `timeout 10`, so a reader that blocks on the FIFO fails with status 124
mkfifo "$T/fifo"
expect_error "check-config FIFO" 1 "$T/fifo: not a regular file (a FIFO)" -- timeout 10 "$ZT" check-config "$T/fifo"
expect_error "inspect FIFO" 1 "$T/fifo: not a regular file (a FIFO)" -- timeout 10 "$ZT" inspect "$T/fifo"
expect_error "grad --batch FIFO" 1 "$T/fifo: not a regular file (a FIFO)" -- timeout 10 "$ZT" grad --model "$FIX" --batch "$T/fifo" --out "$T/out.st"
expect_error "grad --step FIFO" 1 "$T/fifo: not a regular file (a FIFO)" -- timeout 10 "$ZT" grad --model "$FIX" --batch "$B" --step "$T/fifo" --out "$T/out.st"
mkdir "$T/mfifo-config" "$T/mfifo-weights"
cp "$FIX/model.safetensors" "$T/mfifo-config/"; mkfifo "$T/mfifo-config/config.json"
cp "$FIX/config.json" "$T/mfifo-weights/"; mkfifo "$T/mfifo-weights/model.safetensors"
expect_error "model config.json FIFO" 1 "$T/mfifo-config/config.json: not a regular file (a FIFO)" -- \
    timeout 10 "$ZT" grad --model "$T/mfifo-config" --batch "$B" --out "$T/out.st"
expect_error "model.safetensors FIFO" 1 "$T/mfifo-weights/model.safetensors: not a regular file (a FIFO)" -- \
    timeout 10 "$ZT" grad --model "$T/mfifo-weights" --batch "$B" --out "$T/out.st"
expect_error "train model.safetensors FIFO" 1 "$T/mfifo-weights/model.safetensors: not a regular file (a FIFO)" -- \
    timeout 10 "$ZT" train --model "$T/mfifo-weights" --data synthetic --steps 1 --seq-len 8
expect_error "train --config FIFO" 1 "$T/fifo: not a regular file (a FIFO)" -- \
    timeout 10 "$ZT" train --model "$FIX" --data synthetic --config "$T/fifo" --steps 1 --seq-len 8
expect_error "train --model FIFO" 1 "--model $T/fifo: not a regular file (a config.json) nor a folder (a FIFO)" -- \
    timeout 10 "$ZT" train --model "$T/fifo" --data synthetic --steps 1 --seq-len 8
cp -r "$T/d1" "$T/dfifo"; rm "$T/dfifo/manifest.json"; mkfifo "$T/dfifo/manifest.json"
expect_error "data manifest FIFO" 1 "$T/dfifo/manifest.json: not a regular file (a FIFO)" -- \
    timeout 10 "$ZT" train --model "$FIX" --data "$T/dfifo" --steps 1 --seq-len 8
cp -r "$T/d1" "$T/dsfifo"; rm "$T/dsfifo/shard-00000.zts"; mkfifo "$T/dsfifo/shard-00000.zts"
expect_error "data shard FIFO" 1 "$T/dsfifo/shard-00000.zts: not a regular file (a FIFO)" -- \
    timeout 10 "$ZT" train --model "$FIX" --data "$T/dsfifo" --steps 1 --seq-len 8
# data whose vocabulary (600 ids) is larger than the model's (512): the data's manifest named
{ printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n'; for i in $(seq 1 595); do echo "w$i"; done; } >"$T/v600.txt"
for i in $(seq 1 40); do echo "w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12"; done >"$T/c600.txt"
"$ZT" prepare-data --input "$T/c600.txt" --tokenizer "wordpiece:$T/v600.txt" --out "$T/d600" >/dev/null 2>&1
expect_error "data vocabulary above the model's" 1 "$T/d600/manifest.json: the data's vocabulary (600 ids, tokenizer wordpiece) is larger than the model's vocab_size 512" -- \
    "$ZT" train --model "$FIX" --data "$T/d600" --steps 1 --seq-len 8 --save-model "$T/out.m"
# config sizes that make a tensor above 2^40 elements: the config named, and the shape
mkdir -p "$T/wide"; sed -e 's/"hidden_size": 64,/"hidden_size": 2000000,/' -e 's/"vocab_size": 512,/"vocab_size": 1000000,/' \
    -e 's/"num_attention_heads": 4,/"num_attention_heads": 1,/' "$FIX/config.json" >"$T/wide/config.json"
expect_error "tensor above 2^40 elements" 1 "$T/wide/config.json: the sizes make tensor \"bert.embeddings.word_embeddings.weight\" [1000000, 2000000], 2e+12 elements: more than the 2^40" -- \
    "$ZT" train --model "$T/wide" --data synthetic --steps 1 --seq-len 8 --save-model "$T/out.m"
# resuming a checkpoint into a model of another shape names the first differing field
mkdir -p "$T/i128"; sed 's/"intermediate_size": 256,/"intermediate_size": 128,/' "$FIX/config.json" >"$T/i128/config.json"
"$ZT" train --model "$FIX/config.json" --data synthetic --steps 1 --seq-len 8 --checkpoint-dir "$T/cki" >/dev/null 2>&1
expect_error "resume into another shape" 1 "$T/cki/step-1/config.json: the checkpoint's model shape differs from this engine's: intermediate_size 256 in $T/cki/step-1/config.json, 128 in this engine" -- \
    "$ZT" train --model "$T/i128/config.json" --data synthetic --steps 2 --seq-len 8 --resume-from "$T/cki/step-1" --save-model "$T/out.m"
# BERT's hidden_act: transformers' names are kept on save; one it lacks is refused by name
mkdir -p "$T/act"; sed 's/"hidden_act": "gelu"/"hidden_act": "gelu_new"/' "$FIX/config.json" >"$T/act/config.json"
"$ZT" train --model "$T/act/config.json" --data synthetic --steps 1 --seq-len 8 --save-model "$T/act.m" >/dev/null 2>&1
if grep -q '"hidden_act": "gelu_new"' "$T/act.m/config.json"; then ok; else bad "hidden_act gelu_new not kept on save"; fi
sed 's/"hidden_act": "gelu"/"hidden_act": "quick_gelu"/' "$FIX/config.json" >"$T/act/config.json"
expect_error "hidden_act quick_gelu" 1 "$T/act/config.json: \"hidden_act\" is \"quick_gelu\"; zerotrain computes \"gelu\", \"gelu_new\", \"gelu_pytorch_tanh\", \"relu\", \"silu\" and \"swish\"" -- \
    "$ZT" train --model "$T/act/config.json" --data synthetic --steps 1 --seq-len 8 --save-model "$T/out.m"
# BertConfig fields that would build another model are refused by name, never ignored
for kv in '"is_decoder": true|"is_decoder": true is not supported: it makes a causal decoder' \
          '"add_cross_attention": true|"add_cross_attention": true is not supported: it makes cross-attention layers' \
          '"pruned_heads": {"0": [1]}|"pruned_heads" is not empty' \
          '"position_embedding_type": "rotary"|"position_embedding_type" is "rotary"; zerotrain computes "absolute", "relative_key" and "relative_key_query"'; do
    field=${kv%%|*}; msg=${kv#*|}
    sed "s/\"hidden_act\": \"gelu\",/\"hidden_act\": \"gelu\", $field,/" "$FIX/config.json" >"$T/act/config.json"
    expect_error "${field%%:*}" 1 "$T/act/config.json: $msg" -- \
        "$ZT" train --model "$T/act/config.json" --data synthetic --steps 1 --seq-len 8 --save-model "$T/out.m"
done
if ls "$T" | grep -q '\.tmp\.'; then bad "temporary files left: $(ls "$T" | grep '\.tmp\.')"; else ok; fi

echo "cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
