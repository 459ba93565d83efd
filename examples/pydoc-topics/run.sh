#!/usr/bin/env bash
# run.sh - a real task end to end: which part of the Python documentation is a paragraph from?
# Pretrain bert-mini on the Python documentation (the README's main job), fine-tune it as a
# classifier on labelled paragraphs of the same documentation (make_dataset.py: 8 folders),
# evaluate, predict, export; and the same classifier fine-tuned from scratch (no pretraining)
# for comparison. Everything Debian's python3.11-doc has; nothing is downloaded.
# Usage: examples/pydoc-topics/run.sh [OUT]   (OUT: out; ZT: build/zerotrain; STEPS: 600;
#        PRETRAIN=0 skips the pretraining when OUT/bert-mini exists)
set -euo pipefail
cd "$(dirname "$0")/../.."
ZT=${ZT:-build/zerotrain}
OUT=${1:-out}
STEPS=${STEPS:-600}
mkdir -p "$OUT"
cat >"$OUT/finetune.json" <<'EOF'
{
  "train_micro_batch_size_per_gpu": 16,
  "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01}},
  "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_num_steps": 60, "total_num_steps": 600}},
  "gradient_clipping": 1.0,
  "steps_per_print": 50
}
EOF
# 1. the masked LM (the README's main job)
if [ "${PRETRAIN:-1}" = 1 ] || [ ! -f "$OUT/bert-mini/model.safetensors" ]; then
    [ -f "$OUT/pydoc/manifest.json" ] || "$ZT" prepare-data --input /usr/share/doc/python3.11/html/_sources \
        --tokenizer sentencepiece:8000 --out "$OUT/pydoc"
    "$ZT" train --model bert-mini --data "$OUT/pydoc" --config examples/bert-mini.json --seq-len 128 \
        --steps 500 --save-model "$OUT/bert-mini"
fi
# 2. the labelled paragraphs
/usr/bin/python3 examples/pydoc-topics/make_dataset.py "$OUT/pydoc-topics"
# 3. fine-tune the pretrained model, and the same model from scratch (its tokenizer, no weights)
"$ZT" finetune --model "$OUT/bert-mini" --task classify --train "$OUT/pydoc-topics/train.jsonl" \
    --eval "$OUT/pydoc-topics/eval.jsonl" --seq-len 128 --config "$OUT/finetune.json" --steps "$STEPS" \
    --eval-every 200 --metrics "$OUT/topics.jsonl" --checkpoint-dir "$OUT/topics-ckpt" \
    --checkpoint-every 200 --overwrite --save-model "$OUT/topics"
"$ZT" finetune --model bert-mini --tokenizer "spm:$OUT/pydoc/spm.model" --task classify \
    --train "$OUT/pydoc-topics/train.jsonl" --eval "$OUT/pydoc-topics/eval.jsonl" --seq-len 128 \
    --config "$OUT/finetune.json" --steps "$STEPS" --eval-every 200 --metrics "$OUT/topics-scratch.jsonl"
# 4. use it: the evaluation rows labelled again, and the export of its last checkpoint
"$ZT" predict --model "$OUT/topics" --task classify --input "$OUT/pydoc-topics/eval.jsonl" \
    --output "$OUT/topics-predictions.jsonl"
"$ZT" export --checkpoint "$OUT/topics-ckpt/step-$STEPS" --out "$OUT/topics-export"
cmp "$OUT/topics/model.safetensors" "$OUT/topics-export/model.safetensors"
/usr/bin/python3 - "$OUT" <<'EOF'
import json, sys
out = sys.argv[1]
for name in ("topics", "topics-scratch"):
    ev = [json.loads(l) for l in open("%s/%s.jsonl" % (out, name)) if "eval_accuracy" in l][-1]
    print("%-15s step %d: eval_loss %.4f  eval_accuracy %.4f  eval_f1_macro %.4f"
          % (name, ev["step"], ev["eval_loss"], ev["eval_accuracy"], ev["eval_f1_macro"]))
EOF
