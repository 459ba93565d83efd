#!/usr/bin/env bash
# test_fp16.sh - fp16 training ("fp16": {"enabled": true}, DeepSpeed's fp16 optimizer with its
# dynamic loss scaler):
#   - one step against an independent PyTorch reference (tests/ref/bf16_ref.py --precision
#     fp16: zerotrain's fp16 arithmetic in plain torch, the loss scaled by a static scale, each
#     parameter's gradient rounded to fp16 and unscaled): one layer judged on its logits, its
#     gradient and the master's AdamW steps; three layers on the gradient and the weights;
#   - the loss scale of every step replays DeepSpeed's DynamicLossScaler
#     (tests/ref/loss_scaler_ref.py, transcribed from deepspeed/runtime/fp16/loss_scaler.py)
#     on the overflows the run reported: halved after `hysteresis` overflows, doubled after
#     loss_scale_window good steps, the overflowed steps skipped (the weights unchanged) and
#     not counted as steps; a static fp16.loss_scale stays; the scale reaching
#     min_loss_scale with an overflow ends the run with DeepSpeed's error and no output;
#   - ZeRO stages 0-3 give bit-identical weights at equal N (N = 2 with AdamW, N = 3 with
#     AdamW8bit) through the overflowed steps, also with the state and parameters on NVMe and
#     with recomputation; fp32 gradient sums (data_types.grad_accum_dtype) likewise;
#   - the saved weights are F16 tensors (torch_dtype float16); --save-model-dtype fp32 saves
#     the fp32 master, whose round-to-nearest-even fp16 values they are;
#   - a checkpoint resumes bit-identically, the loss scaler's state with it;
#   - T5 trains in fp16 with the same bits at stages 0 and 3.
# FP16_LONG=1 adds parity shapes (a three-layer one among them), N = 3 for AdamW and N = 2 for AdamW8bit.
# Usage: tests/test_fp16.sh [zerotrain]
set -u
ZT=${1:-build/zerotrain}
PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")" && pwd)
REF=$HERE/ref/bf16_ref.py
SUITE=fp16 . "$(dirname "$0")/lib.sh"
dropout_model "$T/model" # the bert-tiny fixture (V=512, H=64) with dropout 0.1
MPI="mpirun --allow-run-as-root --oversubscribe"
LONG=${FP16_LONG:-0}
NV="\"nvme_path\": \"$T/swap\""
mkdir -p "$T/swap"

# ---- against PyTorch ------------------------------------------------------------------------
if "$PY" -c 'import torch, numpy' 2>/dev/null; then
    CASES=("15 --layers 1")
    [ "$LONG" = 1 ] && CASES+=("16 --layers 3 --hidden 96 --heads 8 --intermediate 136 --seq 23"
                               "17 --layers 1 --hidden 48 --heads 3 --seq 7 --batch 1"
                               "19 --layers 1 --hidden 96 --heads 6 --intermediate 200 --seq 31 --batch 4"
                               "18 --layers 2 --hidden 72 --heads 6 --intermediate 200 --seq 33 --batch 4 --vocab 1031")
    for c in "${CASES[@]}"; do
        read -r s rest <<<"$c"
        d="$T/ref$s"
        if ! "$PY" "$REF" make --precision fp16 --out "$d" --seed "$s" $rest >"$T/make.log" 2>&1; then
            bad "bf16_ref.py make --precision fp16 (seed $s)"; cat "$T/make.log"; continue
        fi
        if ! "$ZT" grad --model "$d" --batch "$d/batch.safetensors" --step "$d/step.json" \
                --out "$d/out.safetensors" >"$T/grad.log" 2>&1; then
            bad "zerotrain grad (seed $s)"; tail -5 "$T/grad.log"; continue
        fi
        if "$PY" "$REF" compare "$d" "$d/out.safetensors" >"$T/cmp.log" 2>&1; then
            ok; echo "ok   [seed $s $rest, loss scale $(grep -o '"loss_scale": [0-9.e+]*' "$d/step.json" | cut -d' ' -f2)]: $(tail -n 1 "$T/cmp.log")"
        else bad "fp16 step against PyTorch (seed $s $rest)"; cat "$T/cmp.log"; fi
    done
else
    echo "skip: $PY cannot import torch/numpy: the PyTorch comparison did not run"
fi

# ---- training runs ----------------------------------------------------------------------------
cfg() { # NAME STAGE OPTIMIZER_JSON [ZERO_EXTRA [TOP_EXTRA [FP16_EXTRA]]]: a global batch of 6
    echo "{\"train_batch_size\": 6, \"zero_optimization\": {\"stage\": $2 ${4:-}},
           \"optimizer\": $3, \"fp16\": {\"enabled\": true ${6:-}} ${5:-}}" >"$T/$1.json"
}
run() { # OUT NP CONFIG STEPS [extra...]
    local out=$1 np=$2 c=$3 steps=$4; shift 4
    timeout 300 $MPI -np "$np" "$ZT" train --model "$T/model" --data synthetic:5 --config "$T/$c.json" \
        --seq-len 16 --steps "$steps" --threads 1 --save-model "$T/$out" --metrics "$T/$out.jsonl" \
        "$@" >"$T/$out.log" 2>&1 || { echo "run $out failed:"; tail -5 "$T/$out.log"; }
}
same() { [ -s "$T/$1/model.safetensors" ] && cmp -s "$T/$1/model.safetensors" "$T/$2/model.safetensors"; }
AW='{"type": "AdamW", "params": {"lr": 1e-3}}'
A8='{"type": "AdamW8bit", "params": {"lr": 2e-3}}'
IS=', "initial_scale_power": 24'
# (stages' runs start at 2^24: the first steps overflow, and the bits agree through them)
stages() { # OPT_JSON NAME N [ZERO_EXTRA [TOP_EXTRA]]
    local st ok_all=1
    for st in 0 1 2 3; do
        cfg "$2$3s$st" $st "$1" "${4:-}" "${5:-}" "$IS"
        run "$2$3s$st" "$3" "$2$3s$st" 4
    done
    for st in 1 2 3; do same "$2$3s0" "$2$3s$st" || ok_all=0; done
    if [ $ok_all = 1 ]; then ok; else bad "fp16 $2: stages 0-3 differ at N=$3"; fi
}
stages "$AW" aw 2
stages "$A8" a8 3
[ "$LONG" = 1 ] && stages "$AW" aw 3 && stages "$A8" a8 2
if grep -q "the fp16 gradients overflowed at loss scale 1.67772e+07" "$T/aw2s3.log" &&
   grep -q "fp16 (fp32 master, fp16 gradients reduced in fp16, dynamic loss scale 1.67772e+07)" "$T/aw2s3.log"; then ok
else bad "fp16: no overflow at the initial scale 2^24, or no banner"; tail -5 "$T/aw2s3.log"; fi

# the loss scale, step by step, against DeepSpeed's DynamicLossScaler fed the run's overflows;
# the overflowed steps change no weight and are not counted
replay() { # JSONL INITIAL_SCALE WINDOW HYSTERESIS CONSECUTIVE MIN STEPS
    "$PY" - "$@" "$HERE/ref" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[8])
from loss_scaler_ref import DynamicLossScaler
rows = [json.loads(l) for l in open(sys.argv[1])]
s = DynamicLossScaler(float(sys.argv[2]), 2.0, int(sys.argv[3]), float(sys.argv[6]),
                      int(sys.argv[4]), bool(int(sys.argv[5])))
over = up = 0
for i, r in enumerate(rows):
    if r["loss_scale"] != s.cur_scale:
        print("  line %d: loss scale %r, DeepSpeed's %r" % (i + 1, r["loss_scale"], s.cur_scale))
        sys.exit(1)
    if r["overflow"] != r["skipped"]:
        print("  line %d: an overflow not skipped, or a skip without one" % (i + 1))
        sys.exit(1)
    before = s.cur_scale
    s.update_scale(r["overflow"])
    over += r["overflow"]
    up += s.cur_scale > before
steps = [r["step"] for r in rows if not r["overflow"]]
if steps != list(range(1, int(sys.argv[7]) + 1)):
    print("  the good steps are numbered %s" % steps)
    sys.exit(1)
print("  %d metrics lines: %d overflows, the scale raised %d times, %r at the end" % (len(rows), over, up, s.cur_scale))
sys.exit(0 if over >= 2 and up >= 2 else 1)
PY
}
cfg ls 2 "$AW" "" "" ', "initial_scale_power": 20, "loss_scale_window": 3, "hysteresis": 2'
run ls 2 ls 12
if replay "$T/ls.jsonl" 1048576 3 2 0 1.0 12; then ok
else bad "fp16 dynamic loss scale (N=2 stage 2) differs from DeepSpeed's DynamicLossScaler"; fi
cfg lsc 3 "$A8" "" "" ', "initial_scale_power": 18, "loss_scale_window": 2, "hysteresis": 3, "consecutive_hysteresis": true'
run lsc 3 lsc 10
if replay "$T/lsc.jsonl" 262144 2 3 1 1.0 10; then ok
else bad "fp16 dynamic loss scale with consecutive_hysteresis (N=3 stage 3) differs from DeepSpeed's"; fi
# (that an overflowed step leaves every weight and moment as it was: tests/test_api.c,
# test_fp16_loss_scale) a static scale stays:
cfg st 0 "$AW" "" "" ', "loss_scale": 128'
run st 1 st 4
if "$PY" - "$T/st.jsonl" <<'PY'; then ok; else bad "fp16 static loss_scale 128 changed or overflowed"; fi
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
sys.exit(0 if len(rows) == 4 and all(r["loss_scale"] == 128 and not r["overflow"] for r in rows) else 1)
PY
# at min_loss_scale with an overflow: DeepSpeed's error, no model saved
cfg mn 0 "$AW" "" "" ', "initial_scale_power": 40, "hysteresis": 1, "min_loss_scale": 1073741824'
"$ZT" train --model "$T/model" --data synthetic:5 --config "$T/mn.json" --seq-len 16 --steps 4 \
    --threads 1 --save-model "$T/mn" >"$T/mn.log" 2>&1 && bad "fp16 overflow at min_loss_scale: exit 0"
if grep -q "overflowed at the minimum loss scale 1.07374e+09 (fp16.min_loss_scale)" "$T/mn.log" && [ ! -e "$T/mn" ]; then ok
else bad "fp16 overflow at min_loss_scale: no error, or a model saved"; tail -3 "$T/mn.log"; fi

# every weight F16 with torch_dtype float16; --save-model-dtype fp32: the fp32 master, whose
# round-to-nearest-even fp16 values the F16 weights are, the same at stages 0 and 3
if "$PY" - "$T/aw2s0/model.safetensors" "$T/aw2s0/config.json" <<'PY'; then ok; else bad "fp16 training saved no F16 weights, or no torch_dtype float16"; fi
import json, struct, sys
b = open(sys.argv[1], "rb").read(); h = json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])
sys.exit(0 if all(v["dtype"] == "F16" for k, v in h.items() if k != "__metadata__")
         and json.load(open(sys.argv[2]))["torch_dtype"] == "float16" else 1)
PY
run aw2f32 2 aw2s0 4 --save-model-dtype fp32
run aw2f32s3 2 aw2s3 4 --save-model-dtype fp32 --checkpoint-dir "$T/X3" --checkpoint-every 4
if same aw2f32 aw2f32s3 && "$PY" - "$T/aw2s0/model.safetensors" "$T/aw2f32/model.safetensors" <<'PY'; then ok
import json, sys
import numpy as np
def load(p):
    b = open(p, "rb").read(); n = int.from_bytes(b[:8], "little"); out = {}
    for k, v in json.loads(b[8:8 + n]).items():
        if k != "__metadata__":
            s, e = v["data_offsets"]
            out[k] = (v["dtype"], np.frombuffer(b[8 + n + s:8 + n + e], {"F16": np.float16, "F32": np.float32}[v["dtype"]]))
    return out
h, f = load(sys.argv[1]), load(sys.argv[2])
ok = all(f[k][0] == "F32" for k in f) and set(h) == set(f)
ok = ok and all(np.array_equal(f[k][1].astype(np.float16), h[k][1]) for k in h)  # (numpy rounds to nearest even)
ok = ok and any((f[k][1] != f[k][1].astype(np.float16).astype(np.float32)).any() for k in f)
sys.exit(0 if ok else 1)
PY
else bad "fp16 --save-model-dtype fp32: not the master the F16 weights round, or it differs between stages 0 and 3"; fi
# export --save-model-dtype fp32: the master from the stage-3 rank files, the run's own save
if "$ZT" export --checkpoint "$T/X3/step-4" --out "$T/x3f" --save-model-dtype fp32 >/dev/null &&
   same aw2f32 x3f && grep -q '"torch_dtype":.*"float32"' "$T/x3f/config.json"; then ok
else bad "export --save-model-dtype fp32 of an fp16 stage-3 checkpoint: not the run's master"; fi
echo "{\"train_batch_size\": 6, \"zero_optimization\": {\"stage\": 0}, \"optimizer\": $AW}" >"$T/fp.json"
run fp 2 fp 4
if [ -s "$T/fp/model.safetensors" ] && ! cmp -s "$T/fp/model.safetensors" "$T/aw2f32/model.safetensors"; then ok
else bad "the fp32 run's weights equal the fp16 run's master"; fi

# offload and recomputation: the same bits as stage 0 at the same N
cfg a8off 3 "$A8" ", \"stage3_param_persistence_threshold\": 0, \"sub_group_size\": 3000, \"offload_optimizer\": {\"device\": \"nvme\", $NV}, \"offload_param\": {\"device\": \"nvme\", \"buffer_count\": 3, $NV}" "" "$IS"
run a8off 3 a8off 4
if same a83s0 a8off; then ok; else bad "fp16 AdamW8bit: stage 3 with the state and parameters on NVMe differs from stage 0 at N=3"; fi
cfg awrc 2 "$AW" "" ', "zerotrain": {"recompute": "full"}' "$IS"
run awrc 2 awrc 4
if same aw2s0 awrc; then ok; else bad "fp16: stage 2 with full recomputation differs from stage 0 at N=2"; fi
# fp32 gradient sums: stages 0 and 3 alike, and not the fp16 sums' result
G32=', "data_types": {"grad_accum_dtype": "fp32"}'
for st in 0 3; do cfg "g32s$st" $st "$AW" "" "$G32" "$IS"; run "g32s$st" 2 "g32s$st" 4; done
if same g32s0 g32s3 && ! same g32s0 aw2s0 && grep -q "fp16 (fp32 master, fp32 gradients reduced in fp32" "$T/g32s0.log"; then ok
else bad "fp16 with fp32 gradient sums: stages 0 and 3 differ at N=2, or equal the fp16 sums' result"; fi

# ---- checkpoints: 2 steps, a checkpoint, 3 resumed steps = 5 steps; the scaler resumes ----
cfg ck 2 "$AW" "" "" ', "initial_scale_power": 17, "loss_scale_window": 2'
run ck5 2 ck 5
run ckA 2 ck 2 --checkpoint-dir "$T/CK" --checkpoint-every 2
run ckB 2 ck 5 --checkpoint-dir "$T/CK" --resume
if same ck5 ckB && grep -q "resumed from $T/CK/step-2" "$T/ckB.log" &&
   [ "$(grep -o '"loss_scale": [0-9.e+]*' "$T/ckB.jsonl")" = "$(grep -o '"loss_scale": [0-9.e+]*' "$T/ck5.jsonl" | tail -n "$(wc -l <"$T/ckB.jsonl")")" ]; then ok
else bad "fp16: 2 steps, a checkpoint and 3 resumed steps differ from 5 steps (weights or loss scales)"; fi

# ---- T5 ----------------------------------------------------------------------------------------
for st in 0 3; do
    echo "{\"train_batch_size\": 4, \"zero_optimization\": {\"stage\": $st}, \"fp16\": {\"enabled\": true}}" >"$T/t5$st.json"
    timeout 300 $MPI -np 2 "$ZT" train --model "${ZT_FIXTURES:-tests/fixtures}/t5-tiny" --data synthetic:3 --config "$T/t5$st.json" --seq-len 16 \
        --steps 3 --threads 1 --save-model "$T/t5$st" >"$T/t5$st.log" 2>&1 || { echo "t5 stage $st failed"; tail -3 "$T/t5$st.log"; }
done
if same t50 t53 && grep -q '"torch_dtype": "float16"' "$T/t50/config.json"; then ok
else bad "fp16 T5: stages 0 and 3 differ at N=2, or no float16 weights"; fi

echo "fp16: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
