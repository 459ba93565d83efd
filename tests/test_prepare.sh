#!/usr/bin/env bash
# test_prepare.sh - `zerotrain prepare-data` end to end on text the test generates: WordPiece
# (ids checked by hand and against the shard layout), SentencePiece training (against the
# spm_encode binary when installed) and spm:MODEL, determinism, a table of bad input (one
# stderr line, non-zero exit, no manifest left), FIFOs (never waited on), and replacing an
# existing dataset: failures, kills at every step, a full tmpfs and two runs at once leave the
# old one byte for byte or the new one complete, nothing beside it. Does not test tokenizer
# details (test_wordpiece.c) or the reader's validation (test_tokens.c).
# Usage: tests/test_prepare.sh [path/to/zerotrain]
set -u
ZT=${1:-build/zerotrain}
PY=/usr/bin/python3
T=$(mktemp -d /tmp/zt_prep.XXXXXX)
trap 'chmod -R u+w "$T" 2>/dev/null; rm -rf "$T"' EXIT
pass=0; fail=0

ok()  { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# run NAME -- command...: must succeed with nothing on stderr (no terminal: no progress)
run() {
    local name=$1; shift 2
    if "$@" >"$T/stdout" 2>"$T/stderr" && [ ! -s "$T/stderr" ]; then ok
    else bad "$name: exit $?, stderr: $(cat "$T/stderr")"; return 1; fi
}

# expect_error NAME STATUS STDERR_SUBSTRING OUTDIR -- command...
# checks: status, one stderr line with the substring, no manifest (nor temp file) in OUTDIR
expect_error() {
    local name=$1 want=$2 needle=$3 out=$4; shift 5
    "$@" >"$T/stdout" 2>"$T/stderr"
    local st=$? lines
    lines=$(wc -l <"$T/stderr")
    if [ "$st" -ne "$want" ]; then bad "$name: exit $st, expected $want: $(cat "$T/stderr")"; return; fi
    if [ "$lines" -ne 1 ]; then bad "$name: $lines stderr lines, expected 1"; cat "$T/stderr"; return; fi
    if ! grep -qF -- "$needle" "$T/stderr"; then bad "$name: stderr lacks '$needle': $(cat "$T/stderr")"; return; fi
    if [ -e "$out/manifest.json" ]; then bad "$name: a manifest was left in $out"; return; fi
    if ls "$out" 2>/dev/null | grep -q '\.tmp\.'; then bad "$name: temporary files left in $out"; return; fi
    ok
}

# manifest_check DIR EXPR: the manifest agrees with its shards (sizes, counts, each shard's
# XXH64), then a python expression over m (the manifest) and stream (all ids)
manifest_check() {
    "$PY" - "$1" "$2" <<'EOF'
import json, struct, sys
M = (1 << 64) - 1
P1, P2, P3, P4, P5 = (11400714785074694791, 14029467366897019727, 1609587929392839161,
                      9650029242287828579, 2870177450012600261)
def xxh64(b):  # XXH64 with seed 0 (checked against libxxhash for lengths 0..1000)
    rotl = lambda x, r: ((x << r) | (x >> (64 - r))) & M
    rnd = lambda a, x: rotl((a + x * P2) & M, 31) * P1 & M
    n, i = len(b), 0
    if n >= 32:
        v = [(P1 + P2) & M, P2, 0, (-P1) & M]
        while i + 32 <= n:
            v = [rnd(v[k], x) for k, x in enumerate(struct.unpack_from("<4Q", b, i))]
            i += 32
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & M
        for x in v:
            h = ((h ^ rnd(0, x)) * P1 + P4) & M
    else:
        h = P5
    h = (h + n) & M
    while i + 8 <= n:
        h = (rotl(h ^ rnd(0, struct.unpack_from("<Q", b, i)[0]), 27) * P1 + P4) & M
        i += 8
    if i + 4 <= n:
        h = (rotl(h ^ (struct.unpack_from("<I", b, i)[0] * P1 & M), 23) * P2 + P3) & M
        i += 4
    while i < n:
        h = rotl(h ^ (b[i] * P5 & M), 11) * P1 & M
        i += 1
    h = (h ^ (h >> 33)) * P2 & M
    h = (h ^ (h >> 29)) * P3 & M
    return h ^ (h >> 32)
d, expr = sys.argv[1], sys.argv[2]
m = json.load(open(d + "/manifest.json"))
stream, docs = [], 0
for s in m["shards"]:
    b = open(d + "/" + s["file"], "rb").read()
    magic, ver, idb, vocab, sep, nt, nd, to, do, fs = struct.unpack("<8sIIIiQQQQQ", b[:64])
    assert magic == b"ZTTOKENS" and ver == 1 and fs == len(b) == s["bytes"], s["file"]
    assert "%016x" % xxh64(b) == s["xxh64"], s["file"] + ": checksum differs from the manifest's"
    assert nt == s["tokens"] and nd == s["docs"] and vocab == m["tokenizer"]["vocab_size"]
    stream += struct.unpack("<%d%s" % (nt, "H" if idb == 2 else "I"), b[64:64 + nt * idb])
    docs += nd
t = m["totals"]
assert m["format"] == "zerotrain-tokens" and m["version"] == 1
assert t["tokens"] == len(stream) == sum(s["tokens"] for s in m["sources"]), "token totals"
assert t["docs"] == docs == sum(s["docs"] for s in m["sources"]), "doc totals"
assert t["shards"] == len(m["shards"])
assert stream.count(m["tokenizer"]["sep_id"]) == docs and stream[-1] == m["tokenizer"]["sep_id"]
if not eval(expr):
    print("check failed:", expr, "stream[:40] =", stream[:40], file=sys.stderr)
    sys.exit(1)
EOF
}

# ---- input: a small corpus folder with a hidden file and a nested folder -------------------
mkdir -p "$T/corpus/sub" "$T/corpus/.hidden"
printf 'Hello, world!\n' >"$T/corpus/a.txt"
printf 'Caf\xc3\xa9 NAIVE\n\nhello  world\n' >"$T/corpus/sub/b.txt"
printf '' >"$T/corpus/c-empty.txt"
printf 'hello\n' >"$T/corpus/.hidden/skipped.txt"
printf 'hello\n' >"$T/corpus/.skipped.txt"
# vocab: ids 0..4 special, then words
printf '%s\n' '[PAD]' '[UNK]' '[CLS]' '[SEP]' '[MASK]' hello world , '!' cafe naive caf '##e' >"$T/vocab.txt"

# ---- wordpiece ---------------------------------------------------------------------------------
if run "wordpiece" -- "$ZT" prepare-data --input "$T/corpus" --tokenizer "wordpiece:$T/vocab.txt" --out "$T/wp"; then
    # sorted walk: a.txt, c-empty.txt (no document), sub/b.txt; hidden entries skipped
    # a.txt: hello , world ! [SEP]; b.txt: cafe naive hello world [SEP]
    if manifest_check "$T/wp" 'stream == [5, 7, 6, 8, 3, 9, 10, 5, 6, 3] and [s["file"].rsplit("/",1)[-1] for s in m["sources"]] == ["a.txt", "c-empty.txt", "b.txt"] and m["sources"][1]["docs"] == 0 and m["sources"][0]["bytes"] == 14 and m["tokenizer"]["type"] == "wordpiece" and m["tokenizer"]["lower_case"] is True and m["tokenizer"]["model_file"] == "vocab.txt" and m["tokenizer"]["mask_id"] == 4 and m["tokenizer"]["vocab_size"] == 13'; then ok
    else bad "wordpiece manifest/ids"; fi
    if cmp -s "$T/vocab.txt" "$T/wp/vocab.txt"; then ok; else bad "vocab.txt not copied into the output"; fi
    if grep -q "^prepare-data: 2 documents, 10 tokens, 1 shard, " "$T/stdout"; then ok; else bad "summary line: $(cat "$T/stdout")"; fi
fi
# the unigram baseline train prints: the entropy (nats) of the maskable tokens' frequencies,
# computed here from the shards' ids (the five special ids excluded, as masking does)
if [ -f "$T/wp/manifest.json" ]; then
    "$ZT" train --model bert-tiny --data "$T/wp" --seq-len 8 --steps 1 --threads 1 \
        --save-model "$T/wp-model" --checkpoint-dir "$T/wp-ck" >"$T/ub.log" 2>&1
    ub=$(sed -n 's/^unigram baseline \([0-9.]*\):.*/\1/p' "$T/ub.log")
    if [ -n "$ub" ] && manifest_check "$T/wp" "(lambda ids, lg: abs(-sum(ids.count(i) / len(ids) * lg(ids.count(i) / len(ids)) for i in set(ids)) - $ub) < 1e-4)([i for i in stream if i not in (0, 1, 2, 3, 4)], __import__('math').log)" \
        && grep -q "^step 1/1  loss [0-9.]* (unigram $(printf %.2f "$ub"))" "$T/ub.log"; then ok
    else bad "train's unigram baseline ($ub) is not the corpus' token entropy"; cat "$T/ub.log"; fi
fi
# the model folder train saves, and the checkpoint's export, hold the data's tokenizer (the
# checkpoints keep it in CKPT_DIR/tokenizers/H): they load as --tokenizer with the same ids
if [ -f "$T/wp/manifest.json" ]; then
    h=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["data"].split()[-1])' "$T/wp-ck/step-1/trainer.json" 2>/dev/null)
    if cmp -s "$T/vocab.txt" "$T/wp-model/vocab.txt" && [ -n "$h" ] && [ -f "$T/wp-ck/tokenizers/$h/tokenizer_config.json" ] \
       && "$PY" -c 'import json,sys; c=json.load(open(sys.argv[1])); assert c["tokenizer_class"] == "BertTokenizer" and c["model_max_length"] == 512 and c["do_lower_case"] is True and c["added_tokens_decoder"]["4"]["content"] == "[MASK]", c' "$T/wp-model/tokenizer_config.json" \
       && "$ZT" export --checkpoint "$T/wp-ck/step-1" --out "$T/wp-export" | grep -q "(with its tokenizer)" \
       && [ "$(ls "$T/wp-export" | tr '\n' ' ')" = "config.json model.safetensors special_tokens_map.json tokenizer_config.json vocab.txt " ] \
       && cmp -s "$T/wp-model/tokenizer_config.json" "$T/wp-export/tokenizer_config.json"; then ok
    else bad "the tokenizer in --save-model, the checkpoints and the export"; ls -R "$T/wp-model" "$T/wp-ck" "$T/wp-export"; fi
    if run "MODEL_DIR from train" -- "$ZT" prepare-data --input "$T/corpus" --tokenizer "$T/wp-export" --out "$T/wp-again2" \
       && cmp -s "$T/wp/shard-00000.zts" "$T/wp-again2/shard-00000.zts"; then ok
    else bad "the exported model's tokenizer gives other ids"; fi
fi
# cased: "Hello" and "Café" and "NAIVE" are unknown; "caf" "##e" does not apply to "Café"
if run "wordpiece cased" -- "$ZT" prepare-data --input "$T/corpus/a.txt" "$T/corpus/sub/b.txt" \
       --tokenizer "wordpiece:$T/vocab.txt" --out "$T/wp-cased" --no-lower-case; then
    if manifest_check "$T/wp-cased" 'stream == [1, 7, 6, 8, 3, 1, 1, 5, 6, 3] and m["tokenizer"]["lower_case"] is False'; then ok
    else bad "wordpiece --no-lower-case ids"; fi
fi
# small shards: 10 tokens in shards of 3 -> 4 shards, documents crossing shard boundaries
if run "shards" -- "$ZT" prepare-data --input "$T/corpus" --tokenizer "wordpiece:$T/vocab.txt" --out "$T/wp3" --shard-tokens 3; then
    if manifest_check "$T/wp3" 'stream == [5, 7, 6, 8, 3, 9, 10, 5, 6, 3] and [s["tokens"] for s in m["shards"]] == [3, 3, 3, 1] and [s["docs"] for s in m["shards"]] == [1, 1, 0, 0]'; then ok
    else bad "--shard-tokens 3 layout"; fi
fi

# ---- sentencepiece: train on generated text ----------------------------------------------------
"$PY" - "$T/spm-corpus" <<'EOF'
import os, random, sys
random.seed(7)
words = ("the of and to in is for with on that by this as are be from at or it an which data "
         "model train token shard manifest python function class module object value return "
         "list string file folder memory engine layer gradient optimizer batch sequence").split()
syll = "ka lo mi re tsu va ne po shi gu da fe zo ri bu".split()
words += ["".join(random.choice(syll) for _ in range(random.randint(2, 4))) for _ in range(300)]
os.makedirs(sys.argv[1])
for f in range(6):
    with open(os.path.join(sys.argv[1], "doc%d.rst" % f), "w") as fp:
        for line in range(120):
            fp.write(" ".join(random.choice(words) for _ in range(random.randint(3, 14))).capitalize() + ".\n")
            if line % 7 == 6:
                fp.write("\n")
EOF
if run "sentencepiece:200" -- "$ZT" prepare-data --input "$T/spm-corpus" --tokenizer sentencepiece:200 --out "$T/spm1"; then
    if manifest_check "$T/spm1" 'm["tokenizer"] == {"type": "sentencepiece", "model_file": "spm.model", "vocab_size": 200, "lower_case": False, "pad_id": 0, "unk_id": 1, "cls_id": 2, "sep_id": 3, "mask_id": 4, "eos_id": 3, "hf_class": "DebertaV2Tokenizer"} and len(m["sources"]) == 6 and m["totals"]["docs"] == 6 and all(x not in (0, 2, 4) and x < 200 for x in stream)'; then ok
    else bad "sentencepiece manifest"; fi
    if [ -s "$T/spm1/spm.model" ] && [ "$(wc -l <"$T/spm1/spm.vocab")" -eq 200 ] && \
       [ "$(head -5 "$T/spm1/spm.vocab" | cut -f1 | tr '\n' ' ')" = "[PAD] [UNK] [CLS] [SEP] [MASK] " ]; then ok
    else bad "spm.model / spm.vocab"; fi
    # the same ids as SentencePiece's own encoder, line by line
    if command -v spm_encode >/dev/null; then
        for f in "$T"/spm-corpus/doc*.rst; do spm_encode --model "$T/spm1/spm.model" --output_format=id "$f"; echo 3; done \
            | tr -s ' \n' '\n\n' | grep -v '^$' >"$T/spm-expected"
        if manifest_check "$T/spm1" "stream == [int(x) for x in open('$T/spm-expected').read().split()]"; then ok
        else bad "ids differ from spm_encode"; fi
    fi
    # determinism: a second run gives byte-identical files
    if run "sentencepiece again" -- "$ZT" prepare-data --input "$T/spm-corpus" --tokenizer sentencepiece:200 --out "$T/spm2"; then
        same=1
        for f in manifest.json shard-00000.zts spm.model spm.vocab; do cmp -s "$T/spm1/$f" "$T/spm2/$f" || same=0; done
        if [ $same -eq 1 ]; then ok; else bad "two sentencepiece runs differ"; fi
    fi
    # spm:MODEL with the trained model gives the same stream
    if run "spm:MODEL" -- "$ZT" prepare-data --input "$T/spm-corpus" --tokenizer "spm:$T/spm1/spm.model" --out "$T/spm3"; then
        if cmp -s "$T/spm1/shard-00000.zts" "$T/spm3/shard-00000.zts" && cmp -s "$T/spm1/spm.model" "$T/spm3/spm.model"; then ok
        else bad "spm:MODEL shards differ from the training run"; fi
    fi
    # bpe and lower-casing
    if run "sentencepiece bpe lower" -- "$ZT" prepare-data --input "$T/spm-corpus" --tokenizer sentencepiece:150:bpe --lower-case --out "$T/spm4"; then
        if manifest_check "$T/spm4" 'm["tokenizer"]["lower_case"] is True and m["tokenizer"]["vocab_size"] == 150'; then ok
        else bad "bpe manifest"; fi
    fi
fi
# ---- T5: sentencepiece:N --model-type t5 (exactly N pieces, <pad> 0 </s> 1 <unk> 2), its model
# as spm:MODEL and the dataset as a model folder (MODEL_DIR) ------------------------------------
if [ -d "$T/spm-corpus" ] && run "sentencepiece t5" -- "$ZT" prepare-data --input "$T/spm-corpus" --tokenizer sentencepiece:200 --model-type t5 --out "$T/t5a"; then
    if manifest_check "$T/t5a" 'm["tokenizer"] == {"type": "sentencepiece", "model_file": "spiece.model", "vocab_size": 200, "lower_case": False, "pad_id": 0, "unk_id": 2, "cls_id": None, "sep_id": 1, "mask_id": None, "eos_id": 1, "hf_class": "T5Tokenizer"} and all(x != 0 and x < 200 for x in stream)'; then ok
    else bad "sentencepiece t5 manifest"; fi
    if [ "$(wc -l <"$T/t5a/spm.vocab")" -eq 200 ] && [ "$(head -3 "$T/t5a/spm.vocab" | cut -f1 | tr '\n' ' ')" = "<pad> </s> <unk> " ] \
       && [ "$(ls "$T/t5a" | tr '\n' ' ')" = "added_tokens.json manifest.json shard-00000.zts special_tokens_map.json spiece.model spm.vocab tokenizer_config.json " ]; then ok
    else bad "t5 dataset files: $(ls "$T/t5a" | tr '\n' ' ')"; fi
    if command -v spm_encode >/dev/null; then
        for f in "$T"/spm-corpus/doc*.rst; do spm_encode --model "$T/t5a/spiece.model" --output_format=id "$f"; echo 1; done \
            | tr -s ' \n' '\n\n' | grep -v '^$' >"$T/t5-expected"
        if manifest_check "$T/t5a" "stream == [int(x) for x in open('$T/t5-expected').read().split()]"; then ok
        else bad "t5 ids differ from spm_encode"; fi
    fi
    if run "spm:MODEL t5" -- "$ZT" prepare-data --input "$T/spm-corpus" --tokenizer "spm:$T/t5a/spiece.model" --out "$T/t5b" \
       && cmp -s "$T/t5a/shard-00000.zts" "$T/t5b/shard-00000.zts" && cmp -s "$T/t5a/tokenizer_config.json" "$T/t5b/tokenizer_config.json"; then ok
    else bad "a T5 SentencePiece model as spm:MODEL"; fi
    if run "MODEL_DIR t5" -- "$ZT" prepare-data --input "$T/spm-corpus" --tokenizer "$T/t5a" --model-type t5 --out "$T/t5c" \
       && cmp -s "$T/t5a/shard-00000.zts" "$T/t5c/shard-00000.zts" && cmp -s "$T/t5a/manifest.json" "$T/t5c/manifest.json"; then ok
    else bad "a T5 model folder as --tokenizer"; fi
    expect_error "t5 model as bert" 1 "the SentencePiece model has no [CLS]" "$T/out10" -- \
        "$ZT" prepare-data --input "$T/spm-corpus" --tokenizer "spm:$T/t5a/spiece.model" --model-type bert --out "$T/out10"
    expect_error "t5 folder as bert" 1 "the tokenizer is t5's (T5Tokenizer), not bert's" "$T/out10" -- \
        "$ZT" prepare-data --input "$T/spm-corpus" --tokenizer "$T/t5a" --model-type bert --out "$T/out10"
    expect_error "t5 folder lower-cased" 1 "the tokenizer does not lower-case" "$T/out10" -- \
        "$ZT" prepare-data --input "$T/spm-corpus" --tokenizer "$T/t5a" --lower-case --out "$T/out10"
fi
expect_error "wordpiece for t5" 1 "WordPiece is BERT's tokenizer, not T5's" "$T/out10" -- \
    "$ZT" prepare-data --input "$T/corpus" --tokenizer "wordpiece:$T/vocab.txt" --model-type t5 --out "$T/out10"
expect_error "bad model type" 2 "--model-type 'gpt' is neither bert nor t5" "$T/out10" -- \
    "$ZT" prepare-data --input "$T/corpus" --tokenizer "wordpiece:$T/vocab.txt" --model-type gpt --out "$T/out10"
# a BERT model folder (the wordpiece dataset holds vocab.txt and tokenizer_config.json): the
# same stream as wordpiece:VOCAB
if [ -f "$T/wp/tokenizer_config.json" ] && run "MODEL_DIR bert" -- "$ZT" prepare-data --input "$T/corpus" --tokenizer "$T/wp" --out "$T/wp-dir"; then
    if cmp -s "$T/wp/shard-00000.zts" "$T/wp-dir/shard-00000.zts" && manifest_check "$T/wp-dir" 'm["tokenizer"]["hf_class"] == "BertTokenizer" and m["tokenizer"]["lower_case"] is True'; then ok
    else bad "a BERT model folder as --tokenizer"; fi
fi
mkdir -p "$T/notok"; : >"$T/notok/config.json"
expect_error "folder without a tokenizer" 1 "$T/notok: no tokenizer (looked for tokenizer_config.json, vocab.txt, spiece.model, spm.model and vocab.json)" "$T/out10" -- \
    "$ZT" prepare-data --input "$T/corpus" --tokenizer "$T/notok" --out "$T/out10"

# determinism of wordpiece too
if run "wordpiece again" -- "$ZT" prepare-data --input "$T/corpus" --tokenizer "wordpiece:$T/vocab.txt" --out "$T/wp-again"; then
    if cmp -s "$T/wp/manifest.json" "$T/wp-again/manifest.json" && cmp -s "$T/wp/shard-00000.zts" "$T/wp-again/shard-00000.zts"; then ok
    else bad "two wordpiece runs differ"; fi
fi

# ---- bad input ---------------------------------------------------------------------------------
printf '%s\n' '[PAD]' '[UNK]' '[CLS]' '[SEP]' hello >"$T/nomask.txt"
: >"$T/afile"
mkfifo "$T/fifo"
expect_error "missing input" 1 "$T/nope.txt: No such file or directory" "$T/out1" -- \
    "$ZT" prepare-data --input "$T/corpus/a.txt" "$T/nope.txt" --tokenizer "wordpiece:$T/vocab.txt" --out "$T/out1"
expect_error "unknown spec" 2 "unknown tokenizer 'bpe:foo'" "$T/out2" -- \
    "$ZT" prepare-data --input "$T/corpus" --tokenizer bpe:foo --out "$T/out2"
expect_error "spec without argument" 2 "unknown tokenizer 'wordpiece'" "$T/out2" -- \
    "$ZT" prepare-data --input "$T/corpus" --tokenizer wordpiece --out "$T/out2"
expect_error "bad piece count" 2 "the number of SentencePiece pieces" "$T/out2" -- \
    "$ZT" prepare-data --input "$T/corpus" --tokenizer sentencepiece:lots --out "$T/out2"
expect_error "vocab without [MASK]" 1 "has no token [MASK] (the mask_token of BertTokenizer)" "$T/out3" -- \
    "$ZT" prepare-data --input "$T/corpus" --tokenizer "wordpiece:$T/nomask.txt" --out "$T/out3"
expect_error "missing vocab" 1 "$T/novocab.txt: cannot open: No such file or directory" "$T/out3" -- \
    "$ZT" prepare-data --input "$T/corpus" --tokenizer "wordpiece:$T/novocab.txt" --out "$T/out3"
expect_error "unwritable --out" 1 "$T/afile: exists and is not a folder" "$T/afile/out" -- \
    "$ZT" prepare-data --input "$T/corpus" --tokenizer "wordpiece:$T/vocab.txt" --out "$T/afile/out"
expect_error "not a model" 1 "not a SentencePiece model" "$T/out4" -- \
    "$ZT" prepare-data --input "$T/corpus" --tokenizer "spm:$T/vocab.txt" --out "$T/out4"
expect_error "vocab too large for the text" 1 "SentencePiece training failed" "$T/out5" -- \
    "$ZT" prepare-data --input "$T/corpus" --tokenizer sentencepiece:5000 --out "$T/out5"
expect_error "no text" 1 "$T/corpus/c-empty.txt: the input holds no text (1 file, no tokens)" "$T/out6" -- \
    "$ZT" prepare-data --input "$T/corpus/c-empty.txt" --tokenizer "wordpiece:$T/vocab.txt" --out "$T/out6"
mkdir -p "$T/empties"; : >"$T/empties/x.txt"; printf ' \n\n' >"$T/empties/y.txt"
expect_error "no text in two inputs" 1 "$T/corpus/c-empty.txt, $T/empties: the inputs hold no text (3 files, no tokens)" "$T/out6" -- \
    "$ZT" prepare-data --input "$T/corpus/c-empty.txt" "$T/empties" --tokenizer "wordpiece:$T/vocab.txt" --out "$T/out6"
expect_error "missing --out" 2 "are required" "$T/out7" -- \
    "$ZT" prepare-data --input "$T/corpus" --tokenizer "wordpiece:$T/vocab.txt"
expect_error "unknown option" 2 "unknown option '--bogus'" "$T/out7" -- \
    "$ZT" prepare-data --input "$T/corpus" --bogus --tokenizer "wordpiece:$T/vocab.txt" --out "$T/out7"
expect_error "lower-case for spm:MODEL" 1 "drop --lower-case" "$T/out8" -- \
    "$ZT" prepare-data --input "$T/corpus" --tokenizer "spm:$T/spm1/spm.model" --lower-case --out "$T/out8"
# a read error after the output was started (/proc/self/mem: EIO at offset 0): nothing left,
# not even the folders the command created
expect_error "read error midway" 1 "Input/output error" "$T/out9/deep" -- \
    "$ZT" prepare-data --input "$T/corpus/a.txt" /proc/self/mem --tokenizer "wordpiece:$T/vocab.txt" --out "$T/out9/deep"
if [ -e "$T/out9" ]; then bad "read error midway: $T/out9 left behind: $(find "$T/out9")"; else ok; fi

# ---- replacing an existing dataset: the old one stays, byte for byte, until the new one is
# complete; nothing is left beside it -------------------------------------------------------
# snap DIR: DIR's inode, every entry inside (hidden ones too) with type, mode and size, and
# the sha256 of every file: equal snapshots = the folder untouched
snap() {
    (cd "$1" && stat -c '%i' . && find . -mindepth 1 -printf '%P %y %m %s\n' | sort &&
     find . -type f -exec sha256sum {} + | sort)
}
# leftovers DIR: what a run left beside DIR (its staging or moved-aside folders)
leftovers() { ls -A "$(dirname "$1")" | grep -F ".$(basename "$1")." ; }
# expect_kept NAME STATUS STDERR_SUBSTRING DIR -- command...: the command fails with STATUS
# and one stderr line holding the substring; DIR is as before and nothing is left beside it
expect_kept() {
    local name=$1 want=$2 needle=$3 dir=$4 before st; shift 5
    before=$(snap "$dir")
    "$@" >"$T/stdout" 2>"$T/stderr"
    st=$?
    if [ "$st" -ne "$want" ]; then bad "$name: exit $st, expected $want: $(cat "$T/stderr")"; return; fi
    if [ "$(wc -l <"$T/stderr")" -ne 1 ] || ! grep -qF -- "$needle" "$T/stderr"; then
        bad "$name: stderr is not one line with '$needle': $(cat "$T/stderr")"; return; fi
    if [ "$(snap "$dir")" != "$before" ]; then bad "$name: $dir changed"; return; fi
    if leftovers "$dir" >/dev/null; then bad "$name: left beside $dir: $(leftovers "$dir")"; return; fi
    ok
}
WP=("--tokenizer" "wordpiece:$T/vocab.txt")
A_STREAM='stream == [5, 7, 6, 8, 3]'    # a.txt alone: hello , world ! [SEP]
cp -r "$T/wp" "$T/keep"
expect_kept "no text over a dataset" 1 "no text" "$T/keep" -- \
    "$ZT" prepare-data --input "$T/corpus/c-empty.txt" "${WP[@]}" --out "$T/keep"
expect_kept "read error over a dataset" 1 "Input/output error" "$T/keep" -- \
    "$ZT" prepare-data --input "$T/corpus/a.txt" /proc/self/mem "${WP[@]}" --out "$T/keep" --shard-tokens 2
expect_kept "bad vocabulary over a dataset" 1 "has no token [MASK] (the mask_token of BertTokenizer)" "$T/keep" -- \
    "$ZT" prepare-data --input "$T/corpus/a.txt" --tokenizer "wordpiece:$T/nomask.txt" --out "$T/keep"
expect_kept "FIFO input over a dataset" 1 "not a regular file (a FIFO)" "$T/keep" -- \
    timeout 10 "$ZT" prepare-data --input "$T/corpus/a.txt" "$T/fifo" "${WP[@]}" --out "$T/keep"
# a folder holding anything prepare-data does not write is not replaced (it could be $HOME)
cp -r "$T/wp" "$T/foreign"; echo notes >"$T/foreign/notes.txt"
expect_kept "foreign file" 1 "$T/foreign: holds notes.txt, which prepare-data does not write" "$T/foreign" -- \
    "$ZT" prepare-data --input "$T/corpus/a.txt" "${WP[@]}" --out "$T/foreign"
rm "$T/foreign/notes.txt"; mkdir "$T/foreign/sub"
expect_kept "foreign folder" 1 "$T/foreign: holds sub, which" "$T/foreign" -- \
    "$ZT" prepare-data --input "$T/corpus/a.txt" "${WP[@]}" --out "$T/foreign"
expect_error "--out is a file" 1 "$T/afile: exists and is not a folder" "$T/afile" -- \
    "$ZT" prepare-data --input "$T/corpus/a.txt" "${WP[@]}" --out "$T/afile"

# killed at each point of a run: before the swap the old dataset is untouched (and the
# staging folder left behind is removed by the next run, even a failing one); after it the
# new dataset is complete
for point in locked tokenized written; do
    before=$(snap "$T/keep")
    ZT_PREPARE_FAULT=$point "$ZT" prepare-data --input "$T/corpus/a.txt" "${WP[@]}" --out "$T/keep" \
        --shard-tokens 2 >/dev/null 2>&1
    st=$?
    if [ $st -ne 137 ]; then bad "killed at $point: exit $st, expected 137 (SIGKILL)"; continue; fi
    if [ "$(snap "$T/keep")" = "$before" ]; then ok; else bad "killed at $point: $T/keep changed"; fi
    if [ $point = locked ] || leftovers "$T/keep" >/dev/null; then ok
    else bad "killed at $point: no staging folder beside $T/keep (was the kill before any write?)"; fi
    expect_kept "the run after a kill at $point" 1 "the input holds no text" "$T/keep" -- \
        "$ZT" prepare-data --input "$T/corpus/c-empty.txt" "${WP[@]}" --out "$T/keep"
done
cp -r "$T/wp" "$T/swap"
ZT_PREPARE_FAULT=swapped "$ZT" prepare-data --input "$T/corpus/a.txt" "${WP[@]}" --out "$T/swap" >/dev/null 2>&1
st=$?
if [ $st -eq 137 ] && manifest_check "$T/swap" "$A_STREAM" && leftovers "$T/swap" >/dev/null; then ok
else bad "killed after the swap: exit $st, or $T/swap is not the new dataset, or the old one is not beside it"; fi
if run "the run after a kill after the swap" -- "$ZT" prepare-data --input "$T/corpus" "${WP[@]}" --out "$T/swap"; then
    if manifest_check "$T/swap" 'stream == [5, 7, 6, 8, 3, 9, 10, 5, 6, 3]' && ! leftovers "$T/swap" >/dev/null; then ok
    else bad "the run after a kill after the swap: wrong dataset or left: $(leftovers "$T/swap")"; fi
fi
# without RENAME_EXCHANGE (ZT_PREPARE_FAULT=exchange:fail): two renames; killed between them
# the folder is missing, and the next run puts the old one back
cp -r "$T/wp" "$T/two"
if run "replace by two renames" -- env ZT_PREPARE_FAULT=exchange:fail "$ZT" prepare-data --input "$T/corpus/a.txt" "${WP[@]}" --out "$T/two"; then
    if manifest_check "$T/two" "$A_STREAM" && ! leftovers "$T/two" >/dev/null; then ok
    else bad "replace by two renames: wrong dataset or left: $(leftovers "$T/two")"; fi
fi
rm -rf "$T/two"; cp -r "$T/wp" "$T/two"
before=$(snap "$T/two")
ZT_PREPARE_FAULT=exchange:fail,aside "$ZT" prepare-data --input "$T/corpus/a.txt" "${WP[@]}" --out "$T/two" >/dev/null 2>&1
st=$?
if [ $st -eq 137 ] && [ ! -e "$T/two" ]; then ok; else bad "killed between the two renames: exit $st"; fi
"$ZT" prepare-data --input "$T/corpus/c-empty.txt" "${WP[@]}" --out "$T/two" >/dev/null 2>"$T/stderr"
st=$?
if [ $st -eq 1 ] && grep -q "put back the folder an interrupted run had moved aside" "$T/stderr" &&
   [ "$(snap "$T/two")" = "$before" ] && ! leftovers "$T/two" >/dev/null; then ok
else bad "the run after a kill between the renames: exit $st, $(cat "$T/stderr"), left: $(leftovers "$T/two")"; fi

# removal never follows a symlink: a killed run's staging folder and an old dataset holding
# links to other files lose the links only
mkdir -p "$T/precious/deep" "$T/.keep.prepare-ABCDEF/sub"
echo keep >"$T/precious/deep/file"
ln -s "$T/precious" "$T/.keep.prepare-ABCDEF/link"
ln -s "$T/precious/deep/file" "$T/.keep.prepare-ABCDEF/sub/file"
cp -r "$T/wp" "$T/linked"; rm "$T/linked/vocab.txt"; ln -s "$T/vocab.txt" "$T/linked/vocab.txt"
precious=$(snap "$T/precious"); vocab=$(sha256sum <"$T/vocab.txt")
if run "replace a dataset holding a symlink" -- "$ZT" prepare-data --input "$T/corpus/a.txt" "${WP[@]}" --out "$T/linked" &&
   run "a run after a staging folder with symlinks" -- "$ZT" prepare-data --input "$T/corpus/a.txt" "${WP[@]}" --out "$T/keep"; then
    if [ "$(snap "$T/precious")" = "$precious" ] && [ "$(sha256sum <"$T/vocab.txt")" = "$vocab" ] &&
       [ ! -L "$T/linked/vocab.txt" ] && ! leftovers "$T/keep" >/dev/null && manifest_check "$T/linked" "$A_STREAM"; then ok
    else bad "removal followed a symlink, or left: $(leftovers "$T/keep")"; fi
fi

# two runs into one folder: the second fails at once, naming it, and removes nothing of the
# first's; the first (stopped while it holds the lock, then continued) completes
ZT_PREPARE_FAULT=tokenized:stop "$ZT" prepare-data --input "$T/corpus" "${WP[@]}" --out "$T/conc" >/dev/null 2>&1 &
pid=$!
for _ in $(seq 100); do [ "$(ps -o stat= -p $pid | cut -c1)" = T ] && break; sleep 0.1; done
if [ "$(ps -o stat= -p $pid | cut -c1)" = T ]; then
    expect_error "a second run into a locked folder" 1 "$T/conc: the folder $T is locked by another prepare-data run" "$T/conc" -- \
        timeout 10 "$ZT" prepare-data --input "$T/corpus/a.txt" "${WP[@]}" --out "$T/conc"
    if leftovers "$T/conc" >/dev/null; then ok; else bad "the second run removed the first's staging folder"; fi
    kill -CONT $pid
else
    bad "the first run did not stop at its fault point"; kill -KILL $pid
fi
wait $pid
st=$?
if [ $st -eq 0 ] && manifest_check "$T/conc" 'stream == [5, 7, 6, 8, 3, 9, 10, 5, 6, 3]' && ! leftovers "$T/conc" >/dev/null; then ok
else bad "the first of two runs: exit $st, or its dataset does not verify"; fi
# and started together: one or both succeed (one after the other), any other fails on the
# lock, and the folder always verifies against its shards
for round in 1 2 3 4; do
    "$ZT" prepare-data --input "$T/corpus" "${WP[@]}" --out "$T/race" --shard-tokens 2 >/dev/null 2>"$T/race1.err" &
    p1=$!
    "$ZT" prepare-data --input "$T/corpus/sub/b.txt" "${WP[@]}" --out "$T/race" --shard-tokens 3 >/dev/null 2>"$T/race2.err" &
    p2=$!
    wait $p1; s1=$?; wait $p2; s2=$?
    good=1
    [ $s1 -eq 0 ] || grep -q "is locked by another prepare-data run" "$T/race1.err" || good=0
    [ $s2 -eq 0 ] || grep -q "is locked by another prepare-data run" "$T/race2.err" || good=0
    if [ $good -eq 1 ] && { [ $s1 -eq 0 ] || [ $s2 -eq 0 ]; } &&
       manifest_check "$T/race" 'len(stream) in (10, 5)' && ! leftovers "$T/race" >/dev/null; then ok
    else bad "race round $round: exits $s1 $s2: $(cat "$T/race1.err" "$T/race2.err")"; fi
done

# a full disk (a 256 KiB tmpfs): the new dataset does not fit beside the old one, which stays
if mkdir -p "$T/small" && mount -t tmpfs -o size=256k zt-prepare-test "$T/small" 2>/dev/null; then
    trap 'umount "$T/small" 2>/dev/null; chmod -R u+w "$T" 2>/dev/null; rm -rf "$T"' EXIT
    yes 'hello world , !' | head -c 2000000 >"$T/big.txt"   # 500 k tokens: a 1 MB shard
    if run "a dataset on a small disk" -- "$ZT" prepare-data --input "$T/corpus" "${WP[@]}" --out "$T/small/data"; then
        expect_kept "disk full" 1 "No space left on device" "$T/small/data" -- \
            "$ZT" prepare-data --input "$T/big.txt" "${WP[@]}" --out "$T/small/data"
        if manifest_check "$T/small/data" 'stream == [5, 7, 6, 8, 3, 9, 10, 5, 6, 3]'; then ok; else bad "disk full: the old dataset does not verify"; fi
    fi
    umount "$T/small"
else
    echo "SKIP: disk-full test: cannot mount a tmpfs at $T/small (needs root)"
fi
# FIFOs are refused at once with their path, never waited on (status 124 = the timeout fired):
# as an input named on the command line or met in a folder, and as either tokenizer's model
mkdir -p "$T/corpus-fifo"; printf 'hello\n' >"$T/corpus-fifo/a.txt"; mkfifo "$T/corpus-fifo/b.txt"
expect_error "input FIFO" 1 "$T/fifo: not a regular file (a FIFO)" "$T/outf1" -- \
    timeout 10 "$ZT" prepare-data --input "$T/corpus/a.txt" "$T/fifo" --tokenizer "wordpiece:$T/vocab.txt" --out "$T/outf1"
expect_error "FIFO in an input folder" 1 "$T/corpus-fifo/b.txt: not a regular file (a FIFO)" "$T/outf2" -- \
    timeout 10 "$ZT" prepare-data --input "$T/corpus-fifo" --tokenizer "wordpiece:$T/vocab.txt" --out "$T/outf2"
expect_error "wordpiece:FIFO" 1 "$T/fifo: not a regular file (a FIFO)" "$T/outf3" -- \
    timeout 10 "$ZT" prepare-data --input "$T/corpus" --tokenizer "wordpiece:$T/fifo" --out "$T/outf3"
expect_error "spm:FIFO" 1 "$T/fifo: not a regular file (a FIFO)" "$T/outf4" -- \
    timeout 10 "$ZT" prepare-data --input "$T/corpus" --tokenizer "spm:$T/fifo" --out "$T/outf4"
# nothing was created for the errors caught before writing
for d in out1 out2 out3 out4 out5 out6 out7 out8 out10 outf1 outf2 outf3 outf4; do
    if [ -e "$T/$d" ]; then bad "$d was created by a failing run"; else ok; fi
done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
