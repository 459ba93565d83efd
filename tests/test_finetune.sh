#!/usr/bin/env bash
# test_finetune.sh - `zerotrain finetune --task classify` and `zerotrain predict` end to end on
# a tiny BERT and a labelled set whose label a model can learn: it learns (eval_accuracy);
# the same bits at stages 0 and 3 (with optimizer and parameter offload) at N=2, and stop +
# --resume equal to not stopping; JSON Lines, CSV and TSV give the same run; the saved folder
# is a BertForSequenceClassification with id2label; predict's probabilities against the
# independent PyTorch reference (tests/ref/bert_cls_ref.py) on ids built here, at N=1 and at
# N=2 stage 3 with offload (the same file); fill-mask's candidates against tests/ref/bert_ref.py;
# misuse named, with a non-zero status and no output.
# Usage: tests/test_finetune.sh [zerotrain]   (FINETUNE_LONG=1: N=2 stages 1-2, N=3 stages 0-3)
set -u
ZT=${1:-build/zerotrain}
PY=/usr/bin/python3
SUITE=finetune . "$(dirname "$0")/lib.sh"
MPI="timeout 300 mpirun --allow-run-as-root --oversubscribe"
REF=tests/ref

# ---- data: a vocabulary of whole words (so the ids of a text are known here, independently)
# and rows labelled by which of two word sets dominates --------------------------------------
"$PY" - "$T" <<'EOF'
import json, random, sys, csv
T = sys.argv[1]
words = ["w%d" % i for i in range(120)]
vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words + [",", "."]
open(T + "/vocab.txt", "w").write("\n".join(vocab) + "\n")
rng = random.Random(5)
def row():
    n = rng.randint(4, 20)
    toks = [rng.choice(words[40:]) for _ in range(n)]
    a, b = rng.randint(0, 3), rng.randint(0, 3)
    while a == b:
        b = rng.randint(0, 3)
    for _ in range(a):
        toks.insert(rng.randint(0, len(toks)), rng.choice(words[:20]))
    for _ in range(b):
        toks.insert(rng.randint(0, len(toks)), rng.choice(words[20:40]))
    return " ".join(toks), "alpha" if a > b else "beta"
rows = [row() for _ in range(400)]
for name, part in (("train", rows[:320]), ("eval", rows[320:])):
    with open("%s/%s.jsonl" % (T, name), "w") as f:
        for t, l in part:
            f.write(json.dumps({"text": t, "label": l}) + "\n")
    with open("%s/%s.csv" % (T, name), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["label", "text"])
        for t, l in part:
            w.writerow([l, t])
    with open("%s/%s.tsv" % (T, name), "w") as f:
        f.write("text\tlabel\n" + "".join("%s\t%s\n" % (t, l) for t, l in part))
# pairs: the label is whether the two texts share their first word
with open(T + "/pairs.jsonl", "w") as f:
    for i in range(64):
        a = rng.sample(words, 5); b = rng.sample(words, 5)
        if i % 2:
            b[0] = a[0]
        f.write(json.dumps({"premise": " ".join(a), "hypothesis": " ".join(b), "same": i % 2}) + "\n")
json.dump({"architectures": ["BertForMaskedLM"], "model_type": "bert", "vocab_size": len(vocab),
           "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
           "intermediate_size": 128, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
           "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 64,
           "type_vocab_size": 2, "initializer_range": 0.02, "layer_norm_eps": 1e-12},
          open(T + "/tiny.json", "w"))
EOF
cat >"$T/base.json" <<'EOF'
{"train_micro_batch_size_per_gpu": 16, "steps_per_print": 50,
 "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.01}},
 "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 30}}}
EOF
for st in 0 1 2 3; do
    "$PY" - "$T/base.json" "$T/s$st.json" "$st" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1])); st = int(sys.argv[3])
c["train_micro_batch_size_per_gpu"] = 4
c["zero_optimization"] = {"stage": st}
if st == 3:
    c["zero_optimization"].update({"offload_optimizer": {"device": "cpu"}, "offload_param": {"device": "cpu"}})
json.dump(c, open(sys.argv[2], "w"))
EOF
done
ft() { # ft OUT [args...]: finetune the tiny config on train.jsonl, metrics OUT.jsonl, model OUT.model
    local out=$1; shift
    "$ZT" finetune --model "$T/tiny.json" --tokenizer "wordpiece:$T/vocab.txt" --task classify \
        --train "$T/train.jsonl" --eval "$T/eval.jsonl" --seq-len 32 --metrics "$out.jsonl" \
        --save-model "$out.model" "$@" >"$out.log" 2>&1
}
last() { "$PY" -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1]).get(sys.argv[2]))' "$1" "$2"; }

# ---- it learns; the folder it saves -----------------------------------------------------------
if ft "$T/a" --config "$T/base.json" --steps 200 --eval-every 100; then
    acc=$(last "$T/a.jsonl" eval_accuracy)
    if "$PY" -c "import sys; sys.exit(0 if float('$acc') >= 0.85 else 1)"; then ok
    else bad "fine-tuning did not learn: eval_accuracy $acc after 200 steps (the majority class is about 0.5)"; tail -5 "$T/a.log"; fi
    if "$PY" - "$T/a.model/config.json" "$T/a.jsonl" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
assert c["architectures"] == ["BertForSequenceClassification"], c["architectures"]
assert c["id2label"] == {"0": "alpha", "1": "beta"} and c["label2id"] == {"alpha": 0, "beta": 1}
assert c["problem_type"] == "single_label_classification" and c["classifier_dropout"] is None
ev = [json.loads(l) for l in open(sys.argv[2]) if "eval_loss" in l]
assert [e["step"] for e in ev] == [100, 200], [e["step"] for e in ev]
for e in ev:
    assert 0 <= e["eval_accuracy"] <= 1 and 0 <= e["eval_f1_macro"] <= 1 and e["eval_loss"] > 0
EOF
    then ok; else bad "the saved config or the eval metrics are not as expected"; fi
else bad "finetune failed"; cat "$T/a.log"; fi

# ---- the folder carries its tokenizer (as save_pretrained writes it) -----------------------------
if cmp -s "$T/vocab.txt" "$T/a.model/vocab.txt" && "$PY" - "$T/a.model" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1] + "/tokenizer_config.json"))
assert t["tokenizer_class"] == "BertTokenizer" and t["do_lower_case"] is True, t
m = json.load(open(sys.argv[1] + "/special_tokens_map.json"))
assert m["mask_token"] == "[MASK]" and m["cls_token"] == "[CLS]", m
EOF
then ok; else bad "the saved folder has no tokenizer files (vocab.txt, tokenizer_config.json, special_tokens_map.json)"; fi

# ---- a classifier checkpoint loads its head (and keeps its labels); a masked LM gets a fresh one --
if "$ZT" finetune --model "$T/a.model" --task classify --train "$T/train.jsonl" --eval "$T/eval.jsonl" \
       --seq-len 32 --config "$T/base.json" --steps 2 --save-model "$T/again.model" >"$T/again.log" 2>&1 &&
   ! grep -q 'initialised randomly' "$T/again.log" &&
   "$PY" -c 'import json,sys; assert json.load(open(sys.argv[1]))["id2label"] == {"0": "alpha", "1": "beta"}' "$T/again.model/config.json"; then ok
else bad "fine-tuning a classifier again: its head or labels were not kept"; cat "$T/again.log"; fi
# ---- the same bits: stages 0 and 3 (offloaded) at N=2; CSV and TSV as JSON Lines; resume ------
stages="0 3"; [ "${FINETUNE_LONG:-0}" = 1 ] && stages="0 1 2 3"
for st in $stages; do
    $MPI -np 2 "$ZT" finetune --model "$T/tiny.json" --tokenizer "wordpiece:$T/vocab.txt" --task classify \
        --train "$T/train.jsonl" --eval "$T/eval.jsonl" --seq-len 32 --config "$T/s$st.json" --steps 12 \
        --eval-every 6 --threads 1 --metrics "$T/n2s$st.jsonl" --save-model "$T/n2s$st.model" >"$T/n2s$st.log" 2>&1 \
        || { bad "N=2 stage $st failed"; tail -5 "$T/n2s$st.log"; }
done
for st in $stages; do
    [ "$st" = 0 ] && continue
    if cmp -s "$T/n2s0.model/model.safetensors" "$T/n2s$st.model/model.safetensors" &&
       [ "$(grep -o '"eval_[a-z0-9_]*": [^,]*' "$T/n2s0.jsonl")" = "$(grep -o '"eval_[a-z0-9_]*": [^,]*' "$T/n2s$st.jsonl")" ]; then ok
    else bad "N=2: stage $st's model or eval figures differ from stage 0's"; fi
done
if [ "${FINETUNE_LONG:-0}" = 1 ]; then
    for st in 0 1 2 3; do
        $MPI -np 3 "$ZT" finetune --model "$T/tiny.json" --tokenizer "wordpiece:$T/vocab.txt" --task classify \
            --train "$T/train.jsonl" --eval "$T/eval.jsonl" --seq-len 32 --config "$T/s$st.json" --steps 6 \
            --threads 1 --save-model "$T/n3s$st.model" >"$T/n3s$st.log" 2>&1 || bad "N=3 stage $st failed"
        if [ "$st" != 0 ]; then
            cmp -s "$T/n3s0.model/model.safetensors" "$T/n3s$st.model/model.safetensors" && ok \
                || bad "N=3: stage $st differs from stage 0"
        fi
    done
fi
for fmt in csv tsv; do
    "$ZT" finetune --model "$T/tiny.json" --tokenizer "wordpiece:$T/vocab.txt" --task classify \
        --train "$T/train.$fmt" --eval "$T/eval.$fmt" --seq-len 32 --config "$T/s0.json" --steps 6 \
        --save-model "$T/$fmt.model" >"$T/$fmt.log" 2>&1 || bad "$fmt: finetune failed"
done
ft "$T/j6" --config "$T/s0.json" --steps 6 || bad "finetune failed"
for fmt in csv tsv; do
    cmp -s "$T/j6.model/model.safetensors" "$T/$fmt.model/model.safetensors" && ok || bad "$fmt gives another run than JSON Lines"
done
ft "$T/full" --config "$T/s0.json" --steps 10 && ft "$T/first" --config "$T/s0.json" --steps 5 \
    --checkpoint-dir "$T/ck" --checkpoint-every 5 && ft "$T/rest" --config "$T/s0.json" --steps 10 \
    --checkpoint-dir "$T/ck" --resume || bad "resume runs failed"
if cmp -s "$T/full.model/model.safetensors" "$T/rest.model/model.safetensors" && grep -q 'resumed from' "$T/rest.log"; then ok
else bad "stop + --resume differs from not stopping"; fi
# the checkpoint exports as the saved folder, tokenizer included
if "$ZT" export --checkpoint "$T/ck/step-10" --out "$T/exported" >"$T/export.log" 2>&1 &&
   cmp -s "$T/rest.model/model.safetensors" "$T/exported/model.safetensors" &&
   cmp -s "$T/rest.model/config.json" "$T/exported/config.json" && cmp -s "$T/vocab.txt" "$T/exported/vocab.txt"; then ok
else bad "export of a fine-tuning checkpoint differs from --save-model's folder"; cat "$T/export.log"; fi

# ---- sentencepiece:N trained on the training file: the folder predicts with it -----------------------
"$PY" -c 'import json,sys; c=json.load(open(sys.argv[1])); c["vocab_size"]=100; json.dump(c,open(sys.argv[2],"w"))' "$T/tiny.json" "$T/tiny100.json"
if "$ZT" finetune --model "$T/tiny100.json" --tokenizer sentencepiece:100 --task classify --train "$T/train.jsonl" \
       --config "$T/s0.json" --steps 3 --seq-len 32 --save-model "$T/spm.model" >"$T/spm.log" 2>&1 &&
   [ -f "$T/spm.model/spm.model" ] && grep -q DebertaV2Tokenizer "$T/spm.model/tokenizer_config.json" &&
   "$ZT" predict --model "$T/spm.model" --task classify --input "$T/eval.jsonl" --output "$T/spm.pred" >>"$T/spm.log" 2>&1 &&
   [ "$(wc -l <"$T/spm.pred")" -eq 80 ]; then ok
else bad "finetune with a SentencePiece model it trains"; tail -3 "$T/spm.log"; fi

# ---- text pairs ----------------------------------------------------------------------------------
if "$ZT" finetune --model "$T/tiny.json" --tokenizer "wordpiece:$T/vocab.txt" --task classify \
       --train "$T/pairs.jsonl" --text-field premise --text-pair-field hypothesis --label-field same \
       --config "$T/s0.json" --steps 4 --seq-len 32 --save-model "$T/pairs.model" >"$T/pairs.log" 2>&1 &&
   grep -q '"id2label": {"0":"0","1":"1"}' "$T/pairs.model/config.json"; then ok
else bad "a pair field with integer labels"; tail -3 "$T/pairs.log"; fi

# ---- predict: against the reference, at N=1 and N=2 stage 3 with offload -------------------------
if "$ZT" predict --model "$T/a.model" --task classify --input "$T/eval.jsonl" --output "$T/pred1.jsonl" \
       --batch-size 4 >"$T/p1.log" 2>&1 &&
   $MPI -np 2 "$ZT" predict --model "$T/a.model" --task classify --input "$T/eval.jsonl" \
       --output "$T/pred2.jsonl" --config "$T/s3.json" --threads 1 >"$T/p2.log" 2>&1; then
    # the same labels, and scores within fp32 rounding: a row's tokens go through GEMMs of other
    # shapes when other rows share its micro-batch (micro-batches of 4 here, of the config's 8
    # split over 2 ranks there); 7 float32 digits are printed, a step of ~1e-7 on [0, 1]
    if "$PY" - "$T/pred1.jsonl" "$T/pred2.jsonl" <<'EOF'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert len(a) == len(b) == 80, (len(a), len(b))
worst = 0.0
for i, (x, y) in enumerate(zip(a, b)):
    assert x["label"] == y["label"] and x["scores"].keys() == y["scores"].keys(), (i, x, y)
    worst = max(worst, max(abs(x["scores"][k] - y["scores"][k]) for k in x["scores"]))
assert worst <= 1e-6, worst
print("predict N=2 stage 3 offload vs N=1: same labels, worst |p2 - p1| %.3g" % worst)
EOF
    then ok; else bad "predict at N=2 stage 3 with offload differs from N=1"; fi
    grep -q 'accuracy against the file' "$T/p1.log" && ok || bad "predict did not score the file's labels"
    if "$PY" - "$T" <<'EOF'
import json, sys, os
import numpy as np, torch
sys.path.insert(0, "tests/ref")
import bert_cls_ref as R
from compare import load_st
T = sys.argv[1]
vocab = {w: i for i, w in enumerate(open(T + "/vocab.txt").read().split("\n")) if w}
c = json.load(open(T + "/a.model/config.json"))
P = {k: torch.tensor(v) for k, v in load_st(T + "/a.model/model.safetensors").items()}
rows = [json.loads(l) for l in open(T + "/eval.jsonl")]
got = [json.loads(l) for l in open(T + "/pred1.jsonl")]
assert len(got) == len(rows)
worst = 0.0
for r, g in zip(rows, got):
    ids = [2] + [vocab[w] for w in r["text"].split()][:30] + [3]
    x = torch.tensor([ids]); one = torch.ones_like(x); zero = torch.zeros_like(x)
    _, logits, _ = R.forward(P, c, x, one, zero, torch.zeros(1, dtype=torch.long))
    p = torch.softmax(logits.double(), -1)[0].numpy()
    names = [c["id2label"][str(k)] for k in range(len(p))]
    assert g["label"] == names[int(np.argmax(p))], (g, p)
    worst = max(worst, max(abs(g["scores"][n] - p[k]) for k, n in enumerate(names)))
assert worst < 2e-5, worst
print("predict vs reference: worst |p - p_ref| %.3g over %d rows" % (worst, len(rows)))
EOF
    then ok; else bad "predict's probabilities differ from the reference's"; fi
else bad "predict failed"; tail -3 "$T/p1.log" "$T/p2.log"; fi

# ---- fill-mask against the masked-LM reference (the bert-tiny fixture, a vocab of its size) ------
FIX=${ZT_FIXTURES:-tests/fixtures}/bert-tiny
mkdir -p "$T/mlm" && cp "$FIX/config.json" "$FIX/model.safetensors" "$T/mlm/"
"$PY" -c 'import json,sys; V=json.load(open(sys.argv[1]))["vocab_size"]; open(sys.argv[2],"w").write("\n".join(["[PAD]","[UNK]","[CLS]","[SEP]","[MASK]"]+["w%d"%i for i in range(5,V)])+"\n")' "$T/mlm/config.json" "$T/mlm/vocab.txt"
if "$ZT" predict --model "$T/mlm" --task fill-mask --text "w10 w11 [MASK] w12 [MASK] w13" --top-k 3 >"$T/fm.jsonl" 2>"$T/fm.log" &&
   "$PY" - "$T" <<'EOF'
import json, sys
import numpy as np, torch
sys.path.insert(0, "tests/ref")
import bert_ref as R
from compare import load_st
T = sys.argv[1]
c = json.load(open(T + "/mlm/config.json"))
P = {k: torch.tensor(v) for k, v in load_st(T + "/mlm/model.safetensors").items()}
ids = torch.tensor([[2, 10, 11, 4, 12, 4, 13, 3]])
_, logits = R.forward(P, c, ids, torch.ones_like(ids), torch.zeros_like(ids), torch.where(ids == 4, 0, -100))
got = [json.loads(l) for l in open(T + "/fm.jsonl")]
assert [g["position"] for g in got] == [3, 3, 3, 5, 5, 5], got
for g in got:
    p = torch.softmax(logits[0, g["position"]].double(), -1).numpy()
    top = list(np.argsort(-p, kind="stable")[:3])
    rank = [x["token_id"] for x in got if x["position"] == g["position"]]
    assert rank == top, (rank, top)
    assert abs(g["score"] - p[g["token_id"]]) < 2e-5 and g["token"] == "w%d" % g["token_id"]
print("fill-mask vs reference: ok")
EOF
then ok; else bad "fill-mask's candidates differ from the reference's"; cat "$T/fm.log"; fi

# a masked-LM checkpoint fine-tuned: a fresh classifier, with HF's notices
if "$ZT" finetune --model "$T/mlm" --task classify --train "$T/train.jsonl" --seq-len 32 --config "$T/base.json" \
       --steps 2 >"$T/frommlm.log" 2>&1 &&
   grep -q '4 classification-head (pooler and classifier) parameters not in the checkpoint were initialised randomly' "$T/frommlm.log" &&
   grep -q 'not used by BertForSequenceClassification' "$T/frommlm.log"; then ok
else bad "a masked-LM checkpoint's fresh classifier is not announced"; cat "$T/frommlm.log"; fi

# ---- misuse: one message naming what is wrong, a non-zero status, no output ---------------------
printf '{"text": "w1 w2", "label": "alpha"}\n{"txt": "w3", "label": "beta"}\n' >"$T/nofield.jsonl"
printf '{"text": "w1 w2", "label": "gamma"}\n' >"$T/unknown.jsonl"
: >"$T/empty.jsonl"
FT=("$ZT" finetune --model "$T/tiny.json" --tokenizer "wordpiece:$T/vocab.txt" --task classify --steps 2 --save-model "$T/never")
refuse "missing field" 'nofield.jsonl:2: no field "text"' "$T/never" "${FT[@]}" --train "$T/nofield.jsonl"
refuse "unknown eval label" 'unknown.jsonl:1' "$T/never" "${FT[@]}" --train "$T/train.jsonl" --eval "$T/unknown.jsonl"
grep -q 'gamma' "$T/m.log" && ok || bad "the unknown label is not named"
refuse "empty file" 'empty.jsonl' "$T/never" "${FT[@]}" --train "$T/empty.jsonl"
refuse "classify on T5" 'T5' "$T/never" "$ZT" finetune --model t5-small --tokenizer "wordpiece:$T/vocab.txt" \
    --task classify --train "$T/train.jsonl" --steps 1 --save-model "$T/never"
refuse "unknown task" '--task' "$T/never" "${FT[@]}" --train "$T/train.jsonl" --task summarize
refuse "fill-mask without [MASK]" 'no \[MASK\]' "$T/none" "$ZT" predict --model "$T/mlm" --task fill-mask --text "w10 w11"
refuse "classify on a masked LM" 'not a BertForSequenceClassification' "$T/never.jsonl" "$ZT" predict --model "$T/mlm" \
    --task classify --input "$T/eval.jsonl" --output "$T/never.jsonl"
refuse "predict input without the field" 'no field "text"' "$T/never.jsonl" "$ZT" predict --model "$T/a.model" \
    --task classify --input "$T/nofield.jsonl" --output "$T/never.jsonl"

echo "finetune: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
