#!/usr/bin/env bash
# test_bf16.sh - bf16 training ("bf16": {"enabled": true}, DeepSpeed's bf16 optimizer):
#   - one step against an independent PyTorch reference (tests/ref/bf16_ref.py): the logits
#     row by row against zerotrain's bf16 arithmetic written in torch (bf16 weights and
#     activations, fp32 inside; the median row within the argued bound: rounding flips
#     cascade within a few rows only), the gradients against the bf16 module's within its
#     argued noise, and the fp32 master's AdamW steps on zerotrain's gradient rounded to bf16;
#   - the saved weights are BF16 tensors (torch_dtype bfloat16) and differ from an fp32
#     run's; --save-model-dtype fp32 saves the fp32 master, whose rounding they are, the same
#     bits at stages 0, 1, 3 and from NVMe;
#   - ZeRO stages 0-3 give bit-identical weights at equal N (N = 2 with AdamW, N = 3 with
#     AdamW8bit), also with the optimizer state and parameters on NVMe, with recomputation,
#     and Adafactor (a first moment) at stage 2 against stage 0;
#   - the fp32 master is a "master.<unit>" section of the rank files; a resumed run continues
#     bit-identically; an fp32 checkpoint resumes in bf16 and a bf16 one in fp32;
#   - stage 3's parameter store keeps bf16 shards in 2 bytes: half fp32's NVMe bytes;
#   - both precisions at once are refused by name; a half-precision reduction key is a
#     notice (the reduction runs in fp32); data_types.grad_accum_dtype bf16 keeps 2-byte
#     gradient sums, the same bits at every stage and with NVMe offload;
#   - T5 computes in bf16 too: one step against the bf16 module (tests/ref/t5_bf16_ref.py),
#     stages 0 and 3 the same bits at N=2, also from NVMe with every block recomputed.
# BF16_LONG=1 adds N = 3 for AdamW, more parity shapes (BERT and T5), offload at N = 2, the
# fp32 master saved at stage 1 and from NVMe, the 16-bit sums' and reductions' stages 1 and 2
# (and at N = 3), and T5's stages 1 and 2 and N = 3.
# Usage: tests/test_bf16.sh [zerotrain]
set -u
ZT=${1:-build/zerotrain}
PY=/usr/bin/python3
REF=$(cd "$(dirname "$0")" && pwd)/ref/bf16_ref.py
SUITE=bf16 . "$(dirname "$0")/lib.sh"
dropout_model "$T/model" # the bert-tiny fixture (V=512, H=64) with dropout 0.1
MPI="mpirun --allow-run-as-root --oversubscribe"
LONG=${BF16_LONG:-0}
NV="\"nvme_path\": \"$T/swap\""
mkdir -p "$T/swap"

# ---- against PyTorch ------------------------------------------------------------------------
if "$PY" -c 'import torch, numpy' 2>/dev/null; then
    CASES=("6 --layers 3 --hidden 96 --heads 8 --intermediate 136 --seq 23")
    [ "$LONG" = 1 ] && CASES+=("5 --layers 1"
                               "7 --layers 1 --hidden 48 --heads 3 --seq 7 --batch 1"
                               "9 --layers 1 --hidden 96 --heads 6 --intermediate 200 --seq 31 --batch 4"
                               "8 --layers 3 --hidden 72 --heads 6 --intermediate 200 --seq 33 --batch 4 --vocab 1031")
    for c in "${CASES[@]}"; do
        read -r s rest <<<"$c"
        d="$T/ref$s"
        if ! "$PY" "$REF" make --out "$d" --seed "$s" $rest >"$T/make.log" 2>&1; then
            bad "bf16_ref.py make (seed $s)"; cat "$T/make.log"; continue
        fi
        if ! "$ZT" grad --model "$d" --batch "$d/batch.safetensors" --step "$d/step.json" \
                --out "$d/out.safetensors" >"$T/grad.log" 2>&1; then
            bad "zerotrain grad (seed $s)"; tail -5 "$T/grad.log"; continue
        fi
        if "$PY" "$REF" compare "$d" "$d/out.safetensors" >"$T/cmp.log" 2>&1; then
            ok; echo "ok   [seed $s $rest]: $(tail -n 1 "$T/cmp.log")"
        else bad "bf16 step against PyTorch (seed $s $rest)"; cat "$T/cmp.log"; fi
    done
else
    echo "skip: $PY cannot import torch/numpy: the PyTorch comparison did not run"
fi

# ---- training runs ----------------------------------------------------------------------------
cfg() { # NAME STAGE OPTIMIZER_JSON [ZERO_EXTRA [TOP_EXTRA]]: a global batch of 6, bf16
    echo "{\"train_batch_size\": 6, \"zero_optimization\": {\"stage\": $2 ${4:-}},
           \"optimizer\": $3, \"bf16\": {\"enabled\": true} ${5:-}}" >"$T/$1.json"
}
run() { # OUT NP CONFIG STEPS [extra...]
    local out=$1 np=$2 c=$3 steps=$4; shift 4
    timeout 300 $MPI -np "$np" "$ZT" train --model "$T/model" --data synthetic:5 --config "$T/$c.json" \
        --seq-len 16 --steps "$steps" --threads 1 --save-model "$T/$out" "$@" >"$T/$out.log" 2>&1 ||
        { echo "run $out failed:"; tail -5 "$T/$out.log"; }
}
same() { [ -s "$T/$1/model.safetensors" ] && cmp -s "$T/$1/model.safetensors" "$T/$2/model.safetensors"; }
AW='{"type": "AdamW", "params": {"lr": 1e-3}}'
A8='{"type": "AdamW8bit", "params": {"lr": 2e-3}}'
AF='{"type": "Adafactor", "params": {"beta1": 0.9, "weight_decay": 0.01}}'
stages() { # OPT_JSON NAME N [ZERO_EXTRA]
    local st ok_all=1
    for st in 0 1 2 3; do cfg "$2$3s$st" $st "$1" "${4:-}"; run "$2$3s$st" "$3" "$2$3s$st" 4; done
    for st in 1 2 3; do same "$2$3s0" "$2$3s$st" || ok_all=0; done
    if [ $ok_all = 1 ]; then ok; else bad "bf16 $2: stages 0-3 differ at N=$3"; fi
}
stages "$AW" aw 2
stages "$A8" a8 3
[ "$LONG" = 1 ] && stages "$AW" aw 3 && stages "$A8" a8 2

# every weight a bf16 value: BF16 tensors (a bf16 run saves them so, with torch_dtype
# "bfloat16"), or F32 ones whose floats have their low 16 bits zero; and not the fp32 run's
LOADST='
import json, struct
def load(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; out = {}
    for k, v in json.loads(b[8:8 + n]).items():
        if k == "__metadata__":
            continue
        s, e = v["data_offsets"]
        if v["dtype"] == "BF16":
            w = [x << 16 for x in struct.unpack("<%dH" % ((e - s) // 2), b[8 + n + s:8 + n + e])]
        else:
            assert v["dtype"] == "F32", v["dtype"]
            w = list(struct.unpack("<%dI" % ((e - s) // 4), b[8 + n + s:8 + n + e]))
        out[k] = (v["dtype"], w)
    return out
def floats(w):
    return struct.unpack("<%df" % len(w), struct.pack("<%dI" % len(w), *w))
'
bf16_only() {
    "$PY" -c "$LOADST"'
import sys
sys.exit(1 if any(x & 0xFFFF for _, w in load(sys.argv[1]).values() for x in w) else 0)' "$1"
}
dtype_is() { # FILE DTYPE: every tensor of FILE is DTYPE
    "$PY" -c "$LOADST"'
import sys
sys.exit(0 if all(d == sys.argv[2] for d, _ in load(sys.argv[1]).values()) else 1)' "$1" "$2"
}
if dtype_is "$T/aw2s0/model.safetensors" BF16 && dtype_is "$T/a83s3/model.safetensors" BF16 &&
   grep -q '"torch_dtype": "bfloat16"' "$T/aw2s0/config.json"; then ok
else bad "bf16 training saved no BF16 weights, or no torch_dtype bfloat16"; fi
# --save-model-dtype fp32: the fp32 master, torch_dtype float32: not bf16 values, and the bf16
# weights are its rounding to nearest even; the same bits at stages 0, 1 and 3 (gathered from
# the shards) and with the state on NVMe
run aw2f32 2 aw2s0 4 --save-model-dtype fp32
if dtype_is "$T/aw2f32/model.safetensors" F32 && ! bf16_only "$T/aw2f32/model.safetensors" &&
   grep -q '"torch_dtype": "float32"' "$T/aw2f32/config.json" &&
   "$PY" -c "$LOADST"'
import sys
a, b = load(sys.argv[1]), load(sys.argv[2])
rne = lambda x: ((x + 0x7FFF + ((x >> 16) & 1)) >> 16) << 16
sys.exit(0 if all([rne(x) for x in b[k][1]] == a[k][1] for k in a) else 1)' "$T/aw2s0/model.safetensors" "$T/aw2f32/model.safetensors"; then ok
else bad "--save-model-dtype fp32: not the master whose rounding the bf16 weights are"; fi
[ "$LONG" = 1 ] && run aw2f32s1 2 aw2s1 4 --save-model-dtype fp32
run aw2f32s3 2 aw2s3 4 --save-model-dtype fp32 --checkpoint-dir "$T/X3" --checkpoint-every 4
if { [ "$LONG" != 1 ] || same aw2f32 aw2f32s1; } && same aw2f32 aw2f32s3; then ok
else bad "--save-model-dtype fp32: the master differs between stages 0, 1 (BF16_LONG) and 3 at N=2"; fi
# export: the checkpoint's BF16 weights as they are, or (--save-model-dtype fp32) the master
# gathered from the stage-3 rank files: the run's own fp32 save, byte for byte
if "$ZT" export --checkpoint "$T/X3/step-4" --out "$T/x3f" --save-model-dtype fp32 >/dev/null &&
   "$ZT" export --checkpoint "$T/X3/step-4" --out "$T/x3b" >/dev/null && same aw2f32 x3f &&
   grep -q '"torch_dtype":.*"float32"' "$T/x3f/config.json" && same aw2s0 x3b; then ok
else bad "export --save-model-dtype fp32 of a bf16 stage-3 checkpoint: not the run's master"; fi
refuse "export --save-model-dtype fp16 of a bf16 checkpoint" "its weights are BF16: exported as they are, or in fp32" \
    "$T/x3h" "$ZT" export --checkpoint "$T/X3/step-4" --out "$T/x3h" --save-model-dtype fp16
echo "{\"train_batch_size\": 6, \"zero_optimization\": {\"stage\": 0}, \"optimizer\": $AW}" >"$T/fp.json"
run fp 2 fp 4
if [ -s "$T/fp/model.safetensors" ] && ! same fp aw2s0 && ! bf16_only "$T/fp/model.safetensors"; then ok
else bad "the fp32 run's weights equal the bf16 run's, or are all bf16 values"; fi

# offload and recomputation: the same bits as stage 0 at the same N
# (3 shard buffers for 4 units: shards are evicted and read back)
cfg a8off 3 "$A8" ", \"stage3_param_persistence_threshold\": 0, \"sub_group_size\": 3000, \"offload_optimizer\": {\"device\": \"nvme\", $NV}, \"offload_param\": {\"device\": \"nvme\", \"buffer_count\": 3, $NV}"
run a8off 3 a8off 4
if same a83s0 a8off; then ok; else bad "bf16 AdamW8bit: stage 3 with the state and parameters on NVMe differs from stage 0 at N=3"; fi
# the parameter store holds bf16 shards in 2 bytes a float: half fp32's NVMe bytes per step
for pr in fp bf; do
    en=false; [ $pr = bf ] && en=true
    echo "{\"train_batch_size\": 2, \"bf16\": {\"enabled\": $en}, \"zero_optimization\": {\"stage\": 3,
           \"stage3_param_persistence_threshold\": 0, \"offload_param\": {\"device\": \"nvme\", \"buffer_count\": 3, $NV}}}" >"$T/io$pr.json"
    run "io$pr" 2 "io$pr" 3 --warmup 1 --summary "$T/io$pr.sum.json"
done
if "$PY" - "$T/iofp.sum.json" "$T/iobf.sum.json" <<'PY'; then ok; else bad "bf16 parameter offload does not write half fp32's NVMe bytes"; fi
import json, sys
d = [json.load(open(p)) for p in sys.argv[1:]]
(fw, bw), (fr, br) = ([x["nvme_%s_bytes_per_step" % k] for x in d] for k in ("write", "read"))
print("  NVMe bytes per step with parameter offload: written fp32 %d, bf16 %d (%.3fx); read fp32 %d, bf16 %d (%.3fx)"
      % (fw, bw, bw / fw, fr, br, br / max(fr, 1)))
sys.exit(0 if fw > 0 and fr > 0 and 2 * bw == fw and 2 * br == fr else 1)
PY
if [ "$LONG" = 1 ]; then
    run a8offf 3 a8off 4 --save-model-dtype fp32
    run a8s0f 3 a83s0 4 --save-model-dtype fp32
    if same a8s0f a8offf && ! bf16_only "$T/a8offf/model.safetensors"; then ok
    else bad "bf16 AdamW8bit: the master saved from NVMe at stage 3 differs from stage 0's at N=3"; fi
fi
cfg awrc 2 "$AW" "" ', "zerotrain": {"recompute": "full"}'
run awrc 2 awrc 4
if same aw2s0 awrc; then ok; else bad "bf16: stage 2 with full recomputation differs from stage 0 at N=2"; fi
if [ "$LONG" = 1 ]; then
    cfg awoff 3 "$AW" ", \"offload_optimizer\": {\"device\": \"cpu\"}, \"offload_param\": {\"device\": \"cpu\"}"
    run awoff 2 awoff 4
    if same aw2s0 awoff; then ok; else bad "bf16: stage 3 with the state and parameters in the RAM pool differs from stage 0 at N=2"; fi
fi
for st in 0 2; do cfg "af2s$st" $st "$AF"; run "af2s$st" 2 "af2s$st" 4; done
if same af2s0 af2s2; then ok; else bad "bf16 Adafactor: stage 2 differs from stage 0 at N=2"; fi

# ---- checkpoints ------------------------------------------------------------------------------
cfg ck 2 "$AW"
run ckA 2 ck 2 --checkpoint-dir "$T/CK" --checkpoint-every 2
run ckB 2 ck 4 --checkpoint-dir "$T/CK" --resume
if same aw2s0 ckB && grep -q "resumed from $T/CK/step-2" "$T/ckB.log"; then ok
else bad "bf16: 2 steps, a checkpoint and 2 resumed steps differ from 4 steps"; fi
if "$PY" - "$T/CK/step-2/rank-00001.safetensors" <<'PY'; then ok; else bad "bf16: the rank file has no master sections"; fi
import json, struct, sys
b = open(sys.argv[1], "rb").read()
h = json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])
m = [k for k in h if k.startswith("master.")]
sys.exit(0 if m and all(h[k]["dtype"] == "F32" for k in m) and "master.layer.0" in m else 1)
PY
# fp32 -> bf16 and bf16 -> fp32
cp "$T/fp.json" "$T/fp2.json"
run f2b 2 fp 2 --checkpoint-dir "$T/F2B" --checkpoint-every 2
cfg f2bbf 0 "$AW"
run f2bB 2 f2bbf 3 --checkpoint-dir "$T/F2B" --resume
# (one step from the checkpoint's weights rounded: each weight moves by about lr, AdamW's
# step, plus its rounding; a master that did not take the weights would move them by ~|w|)
near() {
    "$PY" -c "$LOADST"'
import sys
a, b = load(sys.argv[1]), load(sys.argv[2])
worst = max(abs(x - y) - abs(y) * 2 ** -7 for k in a for x, y in zip(floats(a[k][1]), floats(b[k][1])))
sys.exit(0 if worst <= 3e-3 else 1)' "$1" "$2"
}
if grep -q "resumed from $T/F2B/step-2" "$T/f2bB.log" && bf16_only "$T/f2bB/model.safetensors" &&
   near "$T/f2bB/model.safetensors" "$T/F2B/step-2/model.safetensors"; then ok
else bad "an fp32 checkpoint resumed in bf16"; cat "$T/f2bB.log" | tail -3; fi
run b2fB 2 fp 5 --checkpoint-dir "$T/CK" --resume
if grep -q "resumed from $T/CK/step-4" "$T/b2fB.log" && grep -q "^step 5/5" "$T/b2fB.log" &&
   ! bf16_only "$T/b2fB/model.safetensors"; then ok
else bad "a bf16 checkpoint resumed in fp32"; tail -3 "$T/b2fB.log"; fi

# ---- refused ---------------------------------------------------------------------------------
refused() { # NAME CONFIG EXPECTED
    echo "$2" >"$T/r.json"
    refuse "$1" "$3" "$T/r.out" "$ZT" train --model "$T/model" --data synthetic --config "$T/r.json" \
        --seq-len 16 --steps 1 --save-model "$T/r.out"
}
echo '{"train_batch_size": 2}' >"$T/f.json"
refuse "--save-model-dtype bf16 of an fp32 run" "bf16 weights of an fp32 run would lose their low bits" "$T/f.out" \
    "$ZT" train --model "$T/model" --data synthetic --config "$T/f.json" --seq-len 16 --steps 1 \
    --save-model "$T/f.out" --save-model-dtype bf16
if ! grep -q "^step 1/1" "$T/m.log"; then ok; else bad "--save-model-dtype bf16 of an fp32 run refused only after training"; fi
refused "fp16 and bf16" '{"train_batch_size": 2, "fp16": {"enabled": true}, "bf16": {"enabled": true}}' 'fp16 and bf16 are both enabled'
# the half-precision keys apply (the banner says so, no notice)
echo '{"train_batch_size": 2, "bf16": {"enabled": true}, "communication_data_type": "bf16", "data_types": {"grad_accum_dtype": "bf16"}}' >"$T/n.json"
if "$ZT" train --model "$T/model" --data synthetic --config "$T/n.json" --seq-len 16 --steps 1 >"$T/n.log" 2>&1 &&
   ! grep -q "communication_data_type" "$T/n.log" &&
   grep -q "bf16 (fp32 master, bf16 gradients reduced in bf16)" "$T/n.log"; then ok
else bad "bf16 with half-precision gradient keys: a notice, or not a run with bf16 gradients"; cat "$T/n.log"; fi
# 16-bit gradient sums (reduced in bf16: communication_data_type follows them): stages 0-3 the
# same bits at N=2 (and N=3 with BF16_LONG), and with the state, gradients and parameters on
# NVMe; the reduce-scatter moves half fp32's bytes
GA=', "data_types": {"grad_accum_dtype": "bf16"}'
gastages() { # N STAGES...
    local n=$1 st ok_all=1; shift
    for st in "$@"; do cfg "ga${n}s$st" $st "$AW" "" "$GA"; run "ga${n}s$st" "$n" "ga${n}s$st" 4 --summary "$T/ga${n}s$st.sum.json"; done
    for st in "$@"; do same "ga${n}s0" "ga${n}s$st" || ok_all=0; done
    if [ $ok_all = 1 ]; then ok; else bad "bf16 gradient sums: stages $* differ at N=$n"; fi
}
if [ "$LONG" = 1 ]; then gastages 2 0 1 2 3; gastages 3 0 1 2 3; else gastages 2 0 3; fi
cfg gaoff 3 "$AW" ", \"stage3_param_persistence_threshold\": 0, \"offload_optimizer\": {\"device\": \"nvme\", $NV}, \"offload_param\": {\"device\": \"nvme\", \"buffer_count\": 3, $NV}" "$GA"
run gaoff 2 gaoff 4
run aw2s3sum 2 aw2s3 4 --summary "$T/aw2s3.sum.json"
if same ga2s0 gaoff && ! same ga2s0 aw2s0 && "$PY" - "$T/aw2s3.sum.json" "$T/ga2s3.sum.json" <<'PY'; then ok
import json, sys
f, h = (json.load(open(p))["comm_bytes_per_step"]["reduce_scatter"] for p in sys.argv[1:])
print("  reduce-scattered bytes per step at stage 3, N=2: fp32 %d, bf16 %d (%.3fx)" % (f, h, h / f))
sys.exit(0 if f > 0 and 2 * h == f else 1)
PY
else bad "bf16 gradient sums: NVMe differs from stage 0, the result equals fp32 sums', or the reduction does not move half the bytes"; fi
# fp32 sums reduced in bf16 (each gradient rounded for the reduction): stages 0-3 alike; with
# one micro-batch per step each rank's sum is its one gradient, rounded as bf16 sums round it:
# the bf16 sums' bits, not the fp32 reduction's
CB=', "communication_data_type": "bf16"'
CBS="0 3"; [ "$LONG" = 1 ] && CBS="0 1 2 3"
for st in $CBS; do cfg "cb$st" $st "$AW" "" "$CB"; run "cb$st" 2 "cb$st" 4; done
cb_same=1; for st in $CBS; do same cb0 "cb$st" || cb_same=0; done
if [ $cb_same = 1 ] && ! same cb0 aw2s0 && same cb0 ga2s0 &&
   grep -q "bf16 (fp32 master, fp32 gradients reduced in bf16)" "$T/cb0.log"; then ok
else bad "bf16 with fp32 gradients reduced in bf16: stages 0-3 differ at N=2, or equal another run"; fi

# ---- T5 -----------------------------------------------------------------------------------
# one step against the bf16 module of tests/ref/t5_bf16_ref.py (its docstring argues the bound)
if "$PY" -c 'import torch, numpy' 2>/dev/null; then
    T5C=("31 --layers 1 --dec-layers 1 --ff relu --tie 1 --batch 2 --enc-len 13 --dec-len 7")
    [ "$LONG" = 1 ] && T5C+=("32 --layers 2 --dec-layers 2 --ff gated-gelu --tie 0 --dec-mask 1 --batch 3 --enc-len 19 --dec-len 11"
                             "33 --layers 1 --dec-layers 2 --ff gated-gelu --tie 1 --batch 1 --enc-len 5 --dec-len 9 --buckets 8 --max-distance 20")
    for c in "${T5C[@]}"; do
        read -r s rest <<<"$c"
        d="$T/t5ref$s"
        if ! "$PY" "$(dirname "$REF")/t5_bf16_ref.py" make --out "$d" --seed "$s" $rest >"$T/make.log" 2>&1; then
            bad "t5_bf16_ref.py make (seed $s)"; cat "$T/make.log"; continue
        fi
        if ! "$ZT" grad --model "$d" --batch "$d/batch.safetensors" --step "$d/step.json" \
                --out "$d/out.safetensors" >"$T/grad.log" 2>&1; then
            bad "zerotrain grad, T5 (seed $s)"; tail -5 "$T/grad.log"; continue
        fi
        if "$PY" "$(dirname "$REF")/t5_bf16_ref.py" compare "$d" "$d/out.safetensors" >"$T/cmp.log" 2>&1; then
            ok; echo "ok   [T5 seed $s $rest]: $(tail -n 1 "$T/cmp.log")"
        else bad "T5 bf16 step against PyTorch (seed $s $rest)"; cat "$T/cmp.log"; fi
    done
fi
# training in bf16 (16-bit activations): stages 0-3 the same bits at N=2 (N=3 with BF16_LONG),
# and with the state and parameters on NVMe and every block recomputed; BF16 weights saved
t5run() { # OUT NP STAGE [ZERO_EXTRA [TOP_EXTRA]]
    echo "{\"train_batch_size\": 6, \"zero_optimization\": {\"stage\": $3 ${4:-}},
           \"optimizer\": $AW, \"bf16\": {\"enabled\": true} ${5:-}}" >"$T/$1.json"
    timeout 300 $MPI -np "$2" "$ZT" train --model "${ZT_FIXTURES:-tests/fixtures}/t5-tiny" --data synthetic:3 \
        --config "$T/$1.json" --seq-len 16 --steps 3 --threads 1 --save-model "$T/$1" >"$T/$1.log" 2>&1 ||
        { echo "run $1 failed:"; tail -5 "$T/$1.log"; }
}
t5stages() { # N STAGES...
    local n=$1 st ok_all=1; shift
    for st in "$@"; do t5run "t5n${n}s$st" "$n" $st; done
    for st in "$@"; do same "t5n${n}s0" "t5n${n}s$st" || ok_all=0; done
    if [ $ok_all = 1 ] && grep -q '"torch_dtype": "bfloat16"' "$T/t5n${n}s0/config.json"; then ok
    else bad "bf16 T5: stages $* differ at N=$n, or no bfloat16 weights"; fi
}
if [ "$LONG" = 1 ]; then t5stages 2 0 1 2 3; t5stages 3 0 1 2 3; else t5stages 2 0 3; fi
t5run t5off 2 3 ", \"stage3_param_persistence_threshold\": 0, \"offload_optimizer\": {\"device\": \"nvme\", $NV}, \"offload_param\": {\"device\": \"nvme\", \"buffer_count\": 3, $NV}" ', "zerotrain": {"recompute": "full"}'
if same t5n2s0 t5off; then ok
else bad "bf16 T5: NVMe offload with recomputation differs from stage 0 at N=2"; fi

echo "bf16: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
