#!/usr/bin/env bash
# run.sh - a real text-to-text task end to end: which archive section is a Debian package in,
# given its name and one-line description (make_dataset.py, from apt's package lists or
# dpkg's status; classification as text, as T5 does it). A small T5 (t5-mini.json: 4 + 4
# blocks, d_model 256) with a SentencePiece vocabulary of 4000 pieces trained on the rows
# (T5's layout, the 100 sentinels above) is fine-tuned from scratch, evaluated (eval_loss,
# eval_token_accuracy, eval_exact_match by greedy decoding) and saved as a Hugging Face
# folder; then `predict --task generate` answers the evaluation rows from that folder, greedy
# and with beam search (4 beams), each scored against the targets. Nothing is downloaded.
# Usage: examples/debian-sections/run.sh [OUT]   (OUT: out; ZT: build/zerotrain; STEPS: 1500)
set -euo pipefail
cd "$(dirname "$0")/../.."
ZT=${ZT:-build/zerotrain}
OUT=${1:-out}
STEPS=${STEPS:-1500}
mkdir -p "$OUT"
cat >"$OUT/sections.json" <<EOF
{
  "train_micro_batch_size_per_gpu": 32,
  "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01}},
  "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_num_steps": 100, "total_num_steps": $STEPS}},
  "gradient_clipping": 1.0,
  "steps_per_print": 100
}
EOF
/usr/bin/python3 examples/debian-sections/make_dataset.py "$OUT/debian-sections"
"$ZT" finetune --model examples/debian-sections/t5-mini.json --tokenizer sentencepiece:4000 \
    --task text2text --train "$OUT/debian-sections/train.jsonl" --eval "$OUT/debian-sections/eval.jsonl" \
    --seq-len 48 --target-len 8 --config "$OUT/sections.json" --steps "$STEPS" --eval-every 500 \
    --metrics "$OUT/sections.jsonl" --save-model "$OUT/sections"
# the saved folder answers the evaluation rows: greedy, then beam search
"$ZT" predict --model "$OUT/sections" --task generate --input "$OUT/debian-sections/eval.jsonl" \
    --max-new-tokens 8 --output "$OUT/sections.greedy.jsonl"
"$ZT" predict --model "$OUT/sections" --task generate --input "$OUT/debian-sections/eval.jsonl" \
    --max-new-tokens 8 --num-beams 4 --output "$OUT/sections.beam4.jsonl"
# their exact match, and the majority section of the training rows for comparison
/usr/bin/python3 - "$OUT/debian-sections" "$OUT" <<'EOF'
import collections, json, sys
d, out = sys.argv[1:]
top, n = collections.Counter(json.loads(l)["target"] for l in open(d + "/train.jsonl")).most_common(1)[0]
ev = [json.loads(l)["target"] for l in open(d + "/eval.jsonl")]
for how in ("greedy", "beam4"):
    got = [json.loads(l)["generated"] for l in open("%s/sections.%s.jsonl" % (out, how))]
    print("predict --task generate (%s): exact match %.4f of %d evaluation rows" % (
        how, sum(g == t for g, t in zip(got, ev)) / len(ev), len(ev)))
print("always answering the most frequent section (%s) gets %.4f of the evaluation rows" % (
    top, sum(t == top for t in ev) / len(ev)))
EOF
