#!/usr/bin/env bash
# test_generate.sh - `zerotrain predict --task generate` end to end: a tiny T5 fine-tuned here
# (eos reached at many lengths) and a random gated-gelu T5 with an untied lm_head (its vocabulary
# the tokenizer's 32 pieces and 100 sentinels); greedy
# decoding and beam search (length penalty, the three early-stopping modes) give the ids and
# texts of an independent PyTorch generate (tests/ref/generate_ref.py, written from
# transformers' modeling_t5.py, generation/utils.py and beam_search.py) and its scores within
# fp32 rounding; --no-cache gives the cached tokens; N=2 at stages 0 and 3 (offloaded) and N=3
# at stage 3 write the bytes N=1 writes; misuse named, with a non-zero status and no output.
# Usage: tests/test_generate.sh [zerotrain]   (GENERATE_LONG=1: N=2 and N=3 at stages 0-3)
set -u
ZT=${1:-build/zerotrain}
PY=/usr/bin/python3
SUITE=generate . "$(dirname "$0")/lib.sh"
MPI="timeout 300 mpirun --allow-run-as-root --oversubscribe"
if ! "$PY" -c 'import torch, numpy' 2>/dev/null || ! command -v spm_export_vocab >/dev/null; then
    echo "SKIP: needs $PY with torch and numpy, and sentencepiece's command-line tools"; exit 77
fi

"$PY" - "$T" <<'EOF'
import json, random, sys
T = sys.argv[1]
rng = random.Random(5)
words = "red green blue cat dog sun moon tree river stone bird fish".split()
for name, n in (("train", 300), ("in", 21)):
    with open("%s/%s.jsonl" % (T, name), "w") as f:
        for _ in range(n):
            w = [rng.choice(words) for _ in range(rng.randint(2, 6))]
            f.write(json.dumps({"input": "reverse: " + " ".join(w), "target": " ".join(reversed(w))}) + "\n")
EOF
cp tests/fixtures/t5-tiny/config.json "$T/tiny.json"
sed -e 's/"feed_forward_proj": "relu"/"feed_forward_proj": "gated-gelu"/' -e 's/"dense_act_fn": "relu"/"dense_act_fn": "gelu_new"/' \
    -e 's/"is_gated_act": false/"is_gated_act": true/' -e 's/"tie_word_embeddings": true/"tie_word_embeddings": false/' -e 's/"vocab_size": 512/"vocab_size": 132/' \
    "$T/tiny.json" >"$T/gated.json"
conf() { # stage, extra zero_optimization keys, lr
    echo "{\"train_micro_batch_size_per_gpu\": 8, \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": $3}},
 \"zero_optimization\": {\"stage\": $1$2}}"
}
for st in 0 1 2; do conf "$st" "" 3e-3 >"$T/s$st.json"; done
conf 3 ", \"offload_param\": {\"device\": \"cpu\"}" 3e-3 >"$T/s3.json"
conf 0 "" 0 >"$T/lr0.json"
FT=(--task text2text --train "$T/train.jsonl" --seq-len 32 --target-len 16 --tokenizer sentencepiece:32)
"$ZT" finetune --model "$T/tiny.json" "${FT[@]}" --config "$T/s0.json" --steps 120 --save-model "$T/a" \
    >"$T/a.log" 2>&1 || { bad "finetune failed"; tail -3 "$T/a.log"; }
"$ZT" finetune --model "$T/gated.json" "${FT[@]}" --config "$T/lr0.json" --steps 1 --save-model "$T/r" \
    >"$T/r.log" 2>&1 || { bad "finetune (random gated) failed"; tail -3 "$T/r.log"; }
grep -q 'lm_head.weight  *F32  *\[132, 64\]' <("$ZT" inspect "$T/r/model.safetensors" 2>&1) || bad "the gated model has no lm_head"

# same ids and texts as the reference, scores within fp32 rounding (both sum float32
# log-softmaxes, in other orders: 1e-5 relative with an absolute 1e-5 floor)
same() { # NAME OURS REFERENCE
    "$PY" - "$@" <<'EOF' && ok || bad "$1: differs from the reference"
import json, sys
name, a, b = sys.argv[1:]
A, Bs = [list(map(json.loads, open(p))) for p in (a, b)]
assert len(A) == len(Bs) > 0, (len(A), len(Bs))
eos = lens = 0
for i, (x, y) in enumerate(zip(A, Bs)):
    assert x["ids"] == y["ids"], (name, i, x, y)
    assert x["generated"] == y["generated"], (name, i, x, y)
    assert abs(x["score"] - y["score"]) <= 1e-5 + 1e-5 * abs(y["score"]), (name, i, x["score"], y["score"])
    eos += x["ids"][-1] == 1
    lens |= 1 << len(x["ids"])
print("%s: %d rows identical, %d ended by </s>, %d lengths" % (name, len(A), eos, bin(lens).count("1")))
EOF
}
G=(predict --task generate --input "$T/in.jsonl" --batch-size 8 --with-ids --max-new-tokens 14)
R=("$PY" tests/ref/generate_ref.py --input "$T/in.jsonl" --batch-size 8 --seq-len 512 --max-new-tokens 14)
cases=("greedy:" "b4:--num-beams 4" "b3-lp0.6-true:--num-beams 3 --length-penalty 0.6 --early-stopping true"
       "b4-lp2-never:--num-beams 4 --length-penalty 2.0 --early-stopping never"
       "b2-lp-1:--num-beams 2 --length-penalty -1.0")
for m in a r; do
    for c in "${cases[@]}"; do
        name=${c%%:*}; opts=${c#*:}
        # shellcheck disable=SC2086
        "$ZT" "${G[@]}" --model "$T/$m" --output "$T/$m.$name.jsonl" $opts >"$T/$m.$name.log" 2>&1 ||
            { bad "$m $name: predict failed"; tail -3 "$T/$m.$name.log"; continue; }
        # shellcheck disable=SC2086
        "${R[@]}" --model "$T/$m" --output "$T/$m.$name.ref.jsonl" $opts >"$T/$m.$name.ref.log" 2>&1 ||
            { bad "$m $name: the reference failed"; tail -3 "$T/$m.$name.ref.log"; continue; }
        same "$m $name" "$T/$m.$name.jsonl" "$T/$m.$name.ref.jsonl"
    done
done
grep -q 'generated [0-9]* tokens for 21 rows' "$T/a.greedy.log" || bad "no summary line"

# ---- without the cache: the same tokens ------------------------------------------------------
for c in "greedy:" "b4:--num-beams 4"; do
    name=${c%%:*}; opts=${c#*:}
    # shellcheck disable=SC2086
    "$ZT" "${G[@]}" --model "$T/a" --output "$T/a.$name.nc.jsonl" --no-cache $opts >"$T/nc.log" 2>&1 &&
        "$PY" - "$T/a.$name.jsonl" "$T/a.$name.nc.jsonl" <<'EOF' && ok || bad "$name: --no-cache gives other tokens"
import json, sys
A, B = [list(map(json.loads, open(p))) for p in sys.argv[1:]]
assert [x["ids"] for x in A] == [x["ids"] for x in B]
assert all(abs(x["score"] - y["score"]) <= 1e-5 + 1e-5 * abs(y["score"]) for x, y in zip(A, B))
EOF
done

# ---- N ranks, stages 0 and 3 (offloaded): the bytes of N=1 at the same thread count -------------
# (one thread per rank; T5's kernels give thread-count-dependent last bits on some CPUs)
for c in "greedy:" "b4:--num-beams 4"; do
    # shellcheck disable=SC2086
    "$ZT" "${G[@]}" --model "$T/a" --threads 1 --output "$T/a1.${c%%:*}.jsonl" ${c#*:} >/dev/null 2>&1 ||
        bad "N=1 --threads 1 ${c%%:*} failed"
done
runs="2:0 2:3 3:3"; [ "${GENERATE_LONG:-0}" = 1 ] && runs="2:0 2:1 2:2 2:3 3:0 3:1 3:2 3:3"
for nr in $runs; do
    n=${nr%%:*}; st=${nr#*:}
    for c in "greedy:" "b4:--num-beams 4"; do
        name=${c%%:*}; opts=${c#*:}
        # shellcheck disable=SC2086
        $MPI -np "$n" "$ZT" "${G[@]}" --model "$T/a" --config "$T/s$st.json" --threads 1 \
            --output "$T/n$n.s$st.$name.jsonl" $opts >"$T/n$n.log" 2>&1 &&
            cmp -s "$T/a1.$name.jsonl" "$T/n$n.s$st.$name.jsonl" && ok ||
            { bad "N=$n stage $st $name: not the N=1 output"; tail -3 "$T/n$n.log"; }
    done
done

# ---- plain output, a field of another name ----------------------------------------------------
sed 's/"input"/"question"/' "$T/in.jsonl" >"$T/q.jsonl"
if "$ZT" predict --model "$T/a" --task generate --input "$T/q.jsonl" --input-field question \
       --output "$T/plain.jsonl" --batch-size 8 --max-new-tokens 14 >"$T/plain.log" 2>&1 &&
   "$PY" - "$T/plain.jsonl" "$T/a.greedy.jsonl" <<'EOF'
import json, sys
A, B = [list(map(json.loads, open(p))) for p in sys.argv[1:]]
assert [list(x) for x in A] == [["generated"]] * len(B), A[0]
assert [x["generated"] for x in A] == [x["generated"] for x in B]
EOF
then ok; else bad "--input-field / plain output"; fi

# ---- misuse: one message naming what is wrong, a non-zero status, no output -------------------
P=("$ZT" predict --model "$T/a" --task generate --input "$T/in.jsonl")
printf '{"input": "reverse: cat"}\n{"text": "reverse: sun"}\n' >"$T/nofield.jsonl"
refuse "generate on BERT" 'is not a T5' "$T/never" "$ZT" predict --model tests/fixtures/bert-tiny --task generate \
    --input "$T/in.jsonl" --output "$T/never"
refuse "no --output" 'needs --input FILE and --output FILE' "$T/never" "$ZT" predict --model "$T/a" --task generate \
    --input "$T/in.jsonl"
refuse "--num-beams 0" '--num-beams must be an integer in \[1, 1024\]' "$T/never" "${P[@]}" --output "$T/never" --num-beams 0
refuse "--early-stopping maybe" '--early-stopping maybe: true, false or never' "$T/never" "${P[@]}" --output "$T/never" \
    --num-beams 2 --early-stopping maybe
refuse "--length-penalty greedy" '--length-penalty is beam search' "$T/never" "${P[@]}" --output "$T/never" --length-penalty 2
refuse "--max-new-tokens on classify" '--max-new-tokens is generate' "$T/never" "$ZT" predict --model "$T/a" \
    --task classify --input "$T/in.jsonl" --output "$T/never" --max-new-tokens 3
refuse "a missing input field" 'nofield.jsonl:2: no field "input"' "$T/never" "$ZT" predict --model "$T/a" \
    --task generate --input "$T/nofield.jsonl" --output "$T/never"

echo "generate: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
