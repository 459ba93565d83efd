#!/usr/bin/env bash
# test_text2text.sh - `zerotrain finetune --task text2text` end to end on a tiny T5 and pairs
# a model can learn (reverse a few words): a SentencePiece vocabulary trained with T5's layout
# (<pad> 0, </s> 1, <unk> 2) goes into the saved folder; it learns (eval_loss falls, token
# accuracy rises); the evaluation's eval_loss, eval_token_accuracy and eval_exact_match of a
# saved folder against an independent PyTorch T5 (tests/ref/t5_ref.py, HF's shift-right and
# -100 padding) tokenized by tests/ref/spm_ref.py's T5Tokenizer, with greedy decoding written
# there from transformers' greedy search; the same bits at stages 0 and 3 (offloaded) at N=2,
# dropout on, evaluation included (its greedy steps are collective), and with selective (long:
# full too) recomputation over the packed batches; misuse named, with a
# non-zero status and no output.
# Usage: tests/test_text2text.sh [zerotrain]   (TEXT2TEXT_LONG=1: N=2 stages 1-2, N=3 stages 0-3)
set -u
ZT=${1:-build/zerotrain}
PY=/usr/bin/python3
SUITE=text2text . "$(dirname "$0")/lib.sh"
MPI="timeout 300 mpirun --allow-run-as-root --oversubscribe"
if ! "$PY" -c 'import torch, numpy' 2>/dev/null || ! command -v spm_export_vocab >/dev/null; then
    echo "SKIP: needs $PY with torch and numpy, and sentencepiece's command-line tools"; exit 77
fi

"$PY" - "$T" <<'EOF'
import json, random, sys
T = sys.argv[1]
rng = random.Random(3)
words = "red green blue cat dog sun moon tree river stone bird fish".split()
def rows(n):
    out = []
    for _ in range(n):
        w = [rng.choice(words) for _ in range(rng.randint(2, 5))]
        out.append({"input": "reverse: " + " ".join(w), "target": " ".join(reversed(w))})
    return out
import csv
for name, n in (("train", 300), ("eval", 24)):
    rs = rows(n)
    with open("%s/%s.jsonl" % (T, name), "w") as f:
        for r in rs:
            f.write(json.dumps(r) + "\n")
    if name == "train":  # the same rows as CSV (with a label column text2text ignores) and TSV
        with open(T + "/train.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["label", "target", "input"])
            w.writerows([[i % 3, r["target"], r["input"]] for i, r in enumerate(rs)])
        with open(T + "/train.tsv", "w") as f:
            f.write("input\ttarget\n" + "".join("%s\t%s\n" % (r["input"], r["target"]) for r in rs))
EOF
cp tests/fixtures/t5-tiny/config.json "$T/tiny.json"
conf() { # stage, extra zero_optimization keys, lr
    echo "{\"train_micro_batch_size_per_gpu\": 8, \"gradient_clipping\": 1.0,
 \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": $3, \"weight_decay\": 0.0}},
 \"zero_optimization\": {\"stage\": $1$2}}"
}
for st in 0 1 2; do conf "$st" "" 3e-3 >"$T/s$st.json"; done
conf 3 ", \"offload_param\": {\"device\": \"cpu\"}, \"offload_optimizer\": {\"device\": \"cpu\"}" 3e-3 >"$T/s3.json"
conf 0 "" 0 >"$T/lr0.json"
TT=(--task text2text --train "$T/train.jsonl" --eval "$T/eval.jsonl" --seq-len 32 --target-len 16)

# ---- a trained SentencePiece vocabulary, learning, the saved folder ------------------------------
if "$ZT" finetune --model "$T/tiny.json" --tokenizer sentencepiece:32 "${TT[@]}" --config "$T/s0.json" \
       --steps 150 --eval-every 50 --metrics "$T/a.jsonl" --save-model "$T/a" >"$T/a.log" 2>&1 &&
   [ -f "$T/a/spiece.model" ] && grep -q T5Tokenizer "$T/a/tokenizer_config.json" &&
   "$PY" - "$T/a.jsonl" <<'EOF'
import json, sys
ev = [r for r in map(json.loads, open(sys.argv[1])) if "eval_loss" in r]
assert [r["step"] for r in ev] == [50, 100, 150], [r["step"] for r in ev]
for r in ev:
    assert 0 <= r["eval_token_accuracy"] <= 1 and 0 <= r["eval_exact_match"] <= 1, r
assert ev[-1]["eval_loss"] < 0.8 * ev[0]["eval_loss"], (ev[0], ev[-1])
assert ev[-1]["eval_token_accuracy"] > ev[0]["eval_token_accuracy"], (ev[0], ev[-1])
print("learns: eval_loss %.4f -> %.4f, token accuracy %.3f -> %.3f, exact match %.3f" % (
    ev[0]["eval_loss"], ev[-1]["eval_loss"], ev[0]["eval_token_accuracy"], ev[-1]["eval_token_accuracy"],
    ev[-1]["eval_exact_match"]))
EOF
then ok; else bad "finetune --task text2text did not learn or save"; tail -5 "$T/a.log"; fi

# ---- the evaluation of the saved folder against the reference --------------------------------------
# one step at lr 0 (AdamW moves nothing) then the evaluation: the folder's own figures
if "$ZT" finetune --model "$T/a" "${TT[@]}" --config "$T/lr0.json" --steps 1 --metrics "$T/ev.jsonl" \
       >"$T/ev.log" 2>&1 && "$PY" - "$T" <<'EOF'
import json, subprocess, sys
import torch
sys.path.insert(0, "tests/ref")
import t5_ref as R
from spm_ref import SpmModel, T5Ref
from compare import load_st
T = sys.argv[1]
d = T + "/a"
subprocess.run(["spm_export_vocab", "--model", d + "/spiece.model", "--output", T + "/spiece.vocab"], check=True)
tok = T5Ref(SpmModel(d + "/spiece.model", T + "/spiece.vocab"))
c = json.load(open(d + "/config.json"))
P = {k: torch.tensor(v) for k, v in load_st(d + "/model.safetensors").items()}
got = [r for r in map(json.loads, open(T + "/ev.jsonl")) if "eval_loss" in r][-1]
loss_sum = n = correct = exact = close = 0
def top2_gap(x):
    v = torch.topk(x, 2).values
    return float(v[0] - v[1])
with torch.no_grad():
    for r in map(json.loads, open(T + "/eval.jsonl")):
        x, _ = tok.encode(r["input"], None, 32)
        y, _ = tok.encode(r["target"], None, 16)
        ids = torch.tensor([x]); mask = torch.ones_like(ids); lab = torch.tensor([y])
        loss, logits = R.forward(P, c, ids, mask, lab)  # labels shifted right behind decoder_start
        loss_sum += float(loss) * len(y); n += len(y)
        correct += int((logits[0].argmax(-1) == lab[0]).sum())
        close += sum(top2_gap(v) < 1e-4 for v in logits[0])
        gen = []  # greedy search: the arg max at the newest position, until </s>, at most 16 tokens
        while len(gen) < 16:
            _, lg = R.forward(P, c, ids, mask, torch.tensor([gen + [0]]))
            close += top2_gap(lg[0, -1]) < 1e-4
            gen.append(int(lg[0, -1].argmax()))
            if gen[-1] == tok.eos:
                break
        exact += tok.decode(gen, skip_special_tokens=True) == tok.decode(y, skip_special_tokens=True)
rows = sum(1 for _ in open(T + "/eval.jsonl"))
want = {"eval_loss": loss_sum / n, "eval_token_accuracy": correct / n, "eval_exact_match": exact / rows}
print("zerotrain", {k: got[k] for k in want}, "reference", want, "near ties", close)
# fp32 both, summation orders differ: the golden tests' 1e-5 relative on the loss
assert abs(got["eval_loss"] - want["eval_loss"]) <= 1e-5 * want["eval_loss"], (got, want)
# arg maxes agree but where the two best logits are within 1e-4 (counted above)
# (the figures are written with 9 digits: compared as counts)
assert round(abs(got["eval_token_accuracy"] - want["eval_token_accuracy"]) * n) <= close, (got, want)
assert round(abs(got["eval_exact_match"] - want["eval_exact_match"]) * rows) <= close, (got, want)
assert 0 < want["eval_exact_match"] < 1, "the trained folder should get some rows right, not all"
EOF
then ok; else bad "the evaluation differs from the reference's"; tail -3 "$T/ev.log"; fi

# ---- the same bits: stages 0 and 3 (offloaded) at N=2, dropout 0.1 ------------------------------
mkdir -p "$T/drop" && cp "$T/a/"* "$T/drop/" &&
    sed -i -E 's/"dropout_rate": [0-9.e-]+/"dropout_rate": 0.1/' "$T/drop/config.json"
grep -q '"dropout_rate": 0.1' "$T/drop/config.json" || bad "the folder's config has no dropout_rate"
stages="0 3"; [ "${TEXT2TEXT_LONG:-0}" = 1 ] && stages="0 1 2 3"
for st in $stages; do
    $MPI -np 2 "$ZT" finetune --model "$T/drop" "${TT[@]}" --config "$T/s$st.json" --steps 8 --eval-every 4 \
        --threads 1 --metrics "$T/n2s$st.jsonl" --save-model "$T/n2s$st" >"$T/n2s$st.log" 2>&1 \
        || { bad "N=2 stage $st failed"; tail -5 "$T/n2s$st.log"; }
done
for st in $stages; do
    [ "$st" = 0 ] && continue
    if cmp -s "$T/n2s0/model.safetensors" "$T/n2s$st/model.safetensors" &&
       [ "$(grep -o '"eval_[a-z_]*": [^,]*' "$T/n2s0.jsonl")" = "$(grep -o '"eval_[a-z_]*": [^,]*' "$T/n2s$st.jsonl")" ] &&
       [ "$(grep -c eval_exact_match "$T/n2s0.jsonl")" = 2 ]; then ok
    else bad "N=2: stage $st's model or eval figures differ from stage 0's"; fi
done
if [ "${TEXT2TEXT_LONG:-0}" = 1 ]; then
    for st in 0 1 2 3; do
        $MPI -np 3 "$ZT" finetune --model "$T/drop" "${TT[@]}" --config "$T/s$st.json" --steps 6 --eval-every 6 \
            --threads 1 --metrics "$T/n3s$st.jsonl" --save-model "$T/n3s$st" >"$T/n3s$st.log" 2>&1 \
            || bad "N=3 stage $st failed"
        if [ "$st" != 0 ]; then
            cmp -s "$T/n3s0/model.safetensors" "$T/n3s$st/model.safetensors" &&
                [ "$(grep -o '"eval_[a-z_]*": [^,]*' "$T/n3s0.jsonl")" = "$(grep -o '"eval_[a-z_]*": [^,]*' "$T/n3s$st.jsonl")" ] \
                && ok || bad "N=3: stage $st differs from stage 0"
        fi
    done
fi

# ---- recomputation over packed batches, dropout 0.1: stage 0's bits at N=2 (selective; long: full too)
rcs=selective; [ "${TEXT2TEXT_LONG:-0}" = 1 ] && rcs="full selective"
for rc in $rcs; do
    sed 's/^{/{"zerotrain": {"recompute": "'$rc'"}, /' "$T/s0.json" >"$T/rc$rc.json"
    $MPI -np 2 "$ZT" finetune --model "$T/drop" "${TT[@]}" --config "$T/rc$rc.json" --steps 8 --eval-every 4 \
        --threads 1 --metrics "$T/rc$rc.jsonl" --save-model "$T/rc$rc" >"$T/rc$rc.log" 2>&1 \
        && grep -q "^activations: predicted" "$T/rc$rc.log" \
        && cmp -s "$T/n2s0/model.safetensors" "$T/rc$rc/model.safetensors" && ok \
        || { bad "recompute $rc over packed batches differs from keeping everything"; tail -3 "$T/rc$rc.log"; }
done

# ---- CSV and TSV give the run JSON Lines gives -----------------------------------------------------
for fmt in jsonl csv tsv; do
    "$ZT" finetune --model "$T/a" --task text2text --train "$T/train.$fmt" --seq-len 32 --target-len 16 \
        --config "$T/s0.json" --steps 6 --save-model "$T/$fmt.model" >"$T/$fmt.log" 2>&1 || bad "$fmt: finetune failed"
done
for fmt in csv tsv; do
    cmp -s "$T/jsonl.model/model.safetensors" "$T/$fmt.model/model.safetensors" && ok || bad "$fmt gives another run than JSON Lines"
done

# ---- stop and --resume: the bits of not stopping -------------------------------------------------
R=("$ZT" finetune --model "$T/drop" --task text2text --train "$T/train.jsonl" --seq-len 32 --target-len 16
   --config "$T/s0.json")
if "${R[@]}" --steps 10 --save-model "$T/full" >"$T/full.log" 2>&1 &&
   "${R[@]}" --steps 5 --checkpoint-dir "$T/ck" --checkpoint-every 5 >"$T/first.log" 2>&1 &&
   "${R[@]}" --steps 10 --checkpoint-dir "$T/ck" --resume --save-model "$T/rest" >"$T/rest.log" 2>&1 &&
   grep -q 'resumed from' "$T/rest.log" && cmp -s "$T/full/model.safetensors" "$T/rest/model.safetensors" &&
   cmp -s "$T/full/spiece.model" "$T/rest/spiece.model"; then ok
else bad "stop + --resume differs from not stopping"; tail -3 "$T/rest.log"; fi

# ---- misuse: one message naming what is wrong, a non-zero status, no output ---------------------
printf '{"input": "reverse: cat dog", "target": "dog cat"}\n{"input": "reverse: sun", "target": ""}\n' >"$T/empty_target.jsonl"
printf '{"input": "reverse: cat dog", "target": "dog cat"}\n{"input": "reverse: sun", "tgt": "sun"}\n' >"$T/nofield.jsonl"
FT=("$ZT" finetune --model "$T/a" --task text2text --steps 2 --save-model "$T/never")
refuse "an empty target" 'empty_target.jsonl:2: the target is empty' "$T/never" "${FT[@]}" --train "$T/empty_target.jsonl"
refuse "a missing target field" 'nofield.jsonl:2: no field "target"' "$T/never" "${FT[@]}" --train "$T/nofield.jsonl"
refuse "text2text on BERT" 'is not a T5' "$T/never" "$ZT" finetune --model tests/fixtures/bert-tiny --task text2text \
    --train "$T/train.jsonl" --steps 1 --save-model "$T/never"
refuse "a classify option" '--text-field is an option of --task classify' "$T/never" "${FT[@]}" \
    --train "$T/train.jsonl" --text-field input
refuse "a WordPiece vocabulary for T5" 'T5 takes spm:MODEL or sentencepiece:N' "$T/never" "$ZT" finetune \
    --model "$T/tiny.json" --tokenizer wordpiece:/dev/null --task text2text --train "$T/train.jsonl" --steps 1 \
    --save-model "$T/never"

echo "text2text: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
