#!/usr/bin/env bash
# test_ds_configs.sh - real DeepSpeed configs with "fp16" or "bf16" enabled, copied verbatim
# from DeepSpeed's docs and tests, DeepSpeedExamples, Megatron-DeepSpeed and transformers
# (tests/fixtures/ds_configs/SOURCES.md names each one's repository, path and commit), each
# run unchanged as `zerotrain train --config F` on bert-tiny for two steps:
#   - the ones whose only obstacle was half precision train: exit 0, the banner names the
#     precision (and fp16's initial scale, 2^initial_scale_power), two finite losses;
#   - a config whose global batch is too large to train here in a test (bing_bert's 65536
#     samples a step, Lamb) is checked with `zerotrain check-config` (exit 0, the resolved
#     optimizer printed); DSCONFIGS_LONG=1 trains it for one step (a finite loss);
#   - the others are refused for what they ask beyond it (1-bit Adam, an optimizer
#     parameter DeepSpeed itself refuses, a key DeepSpeed does not define, values only the HF
#     Trainer fills), with that reason, and no refusal names fp16 or bf16.
# Usage: tests/test_ds_configs.sh [zerotrain]
set -u
ZT=${1:-build/zerotrain}
SUITE=dsconfigs . "$(dirname "$0")/lib.sh"
DIR=${ZT_FIXTURES:-tests/fixtures}/ds_configs

# file | outcome: "train <banner text>" or "refuse <message text>"
while IFS='|' read -r f want; do
    [ -z "$f" ] && continue
    f=${f// /}; want=${want# }
    kind=${want%% *}; text=${want#* }
    [ -f "$DIR/$f" ] || { bad "$f: missing"; continue; }
    rm -f "$T/m.jsonl"
    if [ "$kind" = big ] && [ "${DSCONFIGS_LONG:-0}" != 1 ]; then
        "$ZT" check-config "$DIR/$f" 1 1 >"$T/out.log" 2>&1
        rc=$?
        if [ $rc -eq 0 ] && grep -qF -- "$text" "$T/out.log"; then ok; echo "ok   $f: check-config: $text"
        else bad "$f: check-config exit $rc, or no '$text'"; cat "$T/out.log"; fi
        continue
    fi
    steps=2
    [ "$kind" = big ] && steps=1 && kind=train && text=fp16
    timeout 600 "$ZT" train --model bert-tiny --data synthetic:5 --config "$DIR/$f" --seq-len 16 \
        --steps $steps --threads 1 --metrics "$T/m.jsonl" >"$T/out.log" 2>&1
    rc=$?
    if [ "$kind" = train ]; then
        if [ $rc -ne 0 ]; then bad "$f: exit $rc"; tail -3 "$T/out.log"; continue; fi
        if ! grep -q -- "$text" "$T/out.log"; then bad "$f: banner lacks '$text'"; grep zerotrain "$T/out.log"; continue; fi
        n=$(python3 -c 'import json, math, sys
print(sum(math.isfinite(json.loads(l)["loss"]) for l in open(sys.argv[1])))' "$T/m.jsonl")
        if [ "$n" -ne $steps ]; then bad "$f: $n finite step losses, want $steps"; tail -3 "$T/out.log"; continue; fi
        ok; echo "ok   $f: $(grep -o -- "$text[^,]*" "$T/out.log" | head -1)"
    else
        if [ $rc -eq 0 ]; then bad "$f: exit 0, want a refusal"; continue; fi
        if ! grep -q -- "$text" "$T/out.log"; then bad "$f: message lacks '$text':"; cat "$T/out.log"; continue; fi
        if sed "s#$DIR/$f##g" "$T/out.log" | grep -qiE 'fp16|bf16|bfloat16|half'; then bad "$f: refused naming half precision:"; cat "$T/out.log"; continue; fi
        ok; echo "ok   $f: refused: $text"
    fi
done <<'EOF'
bigscience_mds_tests_ds_config_bf16.json | train bf16 (fp32 master
bigscience_mds_tests_ds_config_fp16.json | train fp16 (fp32 master, fp16 gradients reduced in fp16, dynamic loss scale 4096
ds_tests_megatron_gpt2_zero2_offload.json | train fp16 (fp32 master, fp16 gradients reduced in fp16, dynamic loss scale 65536
ds_tests_torch_compile_z2_bf16.json | train bf16 (fp32 master
ds_tests_torch_compile_z3_bf16.json | train bf16 (fp32 master
mds_finetune_hf_llama_bf16.json | train bf16 (fp32 master
mds_universal_checkpointing_bf16.json | train bf16 (fp32 master, fp32 gradients
dse_bingbertsquad_bsz24.json | train fp16 (fp32 master, fp16 gradients reduced in fp16, dynamic loss scale 65536
ds_docs_bert_pretraining.json | refuse optimizer.params.max_grad_norm: not an optimizer parameter
ds_docs_curriculum_learning.json | refuse optimizer.params.max_grad_norm: not an optimizer parameter
mds_curriculum_zero1_baseline.json | refuse optimizer.params.max_grad_norm: not an optimizer parameter
ds_docs_zero_one_adam.json | refuse optimizer.type: "ZeroOneAdam" is not supported
dse_bingbert_lamb_bsz64k_seq128.json | big optimizer: Lamb lr 0.011 betas (0.9, 0.999) eps 1e-08 weight_decay 0.01, clipping 1, no bias correction, trust ratio in [0.01, 0.3]
dse_bingbert_onebitadam_nccl_seq128.json | refuse optimizer.type: "OneBitAdam" is not supported
dse_imagenet_fp16_z1.json | refuse cuda_visible_devices: unknown key
hf_transformers_ds_config_zero3_fp16.json | refuse train_micro_batch_size_per_gpu: cannot derive the batch size
EOF

# every fixture is in the table
for f in "$DIR"/*.json; do
    grep -q "^$(basename "$f") " "$0" || bad "$(basename "$f"): not in the table"
done
# the cpu_offload config offloads the optimizer state as DeepSpeed reads the old key
"$ZT" train --model bert-tiny --data synthetic:5 --config "$DIR/ds_tests_megatron_gpt2_zero2_offload.json" \
    --seq-len 16 --steps 1 --threads 1 --summary "$T/off.json" >"$T/off.log" 2>&1
off=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["offload"])' "$T/off.json" 2>/dev/null)
if grep -q 'zero_optimization.cpu_offload: deprecated DeepSpeed key, read as DeepSpeed reads it: "offload_optimizer": {"device": "cpu"}' "$T/off.log" &&
   [[ "$off" == optimizer:cpu* ]]; then ok
else bad "cpu_offload: no notice, or the optimizer state not offloaded ($off)"; cat "$T/off.log"; fi

echo "test_ds_configs: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
