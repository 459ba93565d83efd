#!/usr/bin/python3
"""PyTorch peer of `zerotrain finetune --task classify`: Hugging Face's BertForSequenceClassification
trained on the same rows, in the same order, with the same token ids and padded micro-batches.

The model is written here in plain torch from transformers' modeling_bert.py (BertEmbeddings with a
padding_idx word table, BertSelfAttention's eager softmax attention with the additive key mask
(1 - mask) * finfo.min, post-LayerNorm residual blocks with eps 1e-12, exact erf GELU, BertPooler's
tanh over the first token, dropout hidden_dropout_prob before the classifier, CrossEntropyLoss),
parameters named as HF names them (so a zerotrain --save-model folder loads into it as it is), HF's
init (normal std 0.02, zero biases, LayerNorm 1/0, the pad row zeroed), dropout 0.1 everywhere as
HF's default config. Trained with torch.optim.AdamW as the Hugging Face Trainer sets it up (weight
decay on every parameter but biases and LayerNorm weights, clip_grad_norm_ to the same max norm).

Rows: the same BERT tokenization as zerotrain's (HF's BasicTokenizer + WordPiece, transcribed below:
clean text, CJK split, lower case, NFD accent stripping, punctuation split, greedy longest-match-first
WordPiece with "##" continuations, [UNK] for a word of more than 100 characters; the literal "[MASK]"
as the mask id), framed [CLS] text [SEP] and truncated to --seq-len. Order: row zt_epoch_order(seed,
rows, g) for global sample g (called in libzerotrain.so through ctypes, so the order is zerotrain's
by construction), micro-batch k = samples [k*B, (k+1)*B), padded with [PAD] to its longest row, as
tools/clsdata.c does. Labels: sorted(set(labels)) -> 0..n-1 (run_glue's rule, zerotrain's too).

  finetune_torch.py vocab --train train.jsonl --out vocab.txt [--min-count 2]
  finetune_torch.py train --train train.jsonl --vocab vocab.txt --batch 32 --seq 128 --steps 40
                          --warmup 5 --threads 2 [--lr 2e-5] [--model DIR] [--no-dropout] [--profile]
  finetune_torch.py tokens --train train.jsonl --vocab vocab.txt --zerotrain build/zerotrain
                    (the ids against `zerotrain prepare-data --tokenizer wordpiece:VOCAB` of the rows)

`train` prints one JSON object (last line of stdout): every step's real tokens, padded shape, seconds
and loss, and the steady-state tokens/s over the steps after --warmup (sum of real tokens / sum of
step seconds, the figure zerotrain's --metrics gives the same way), the peak RSS.
"""
import argparse, collections, ctypes, json, math, os, resource, statistics, sys, time, unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRESETS = {  # layers, hidden, heads, intermediate (as zerotrain's presets)
    "bert-tiny": (2, 128, 2, 512), "bert-mini": (4, 256, 4, 1024), "bert-small": (4, 512, 8, 2048),
    "bert-medium": (8, 512, 8, 2048), "bert-base": (12, 768, 12, 3072), "bert-large": (24, 1024, 16, 4096),
}
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

# ---- HF BertTokenizer (BasicTokenizer + WordpieceTokenizer), transcribed -----------------------------


def _is_whitespace(ch):
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def _is_control(ch):
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch).startswith("C")


def _is_punctuation(ch):
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp):
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF or
            0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF or
            0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def basic_tokenize(text, lower=True):
    out = []
    for ch in text:  # _clean_text
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD or _is_control(ch):
            continue
        out.append(" " if _is_whitespace(ch) else ch)
    text = "".join(" %s " % ch if _is_cjk(ord(ch)) else ch for ch in out)  # _tokenize_chinese_chars
    words = []
    for tok in text.strip().split():
        if lower:
            tok = "".join(c for c in unicodedata.normalize("NFD", tok.lower())
                          if unicodedata.category(c) != "Mn")
        cur = []
        for ch in tok:  # _run_split_on_punc
            if _is_punctuation(ch):
                if cur:
                    words.append("".join(cur))
                    cur = []
                words.append(ch)
            else:
                cur.append(ch)
        if cur:
            words.append("".join(cur))
    return " ".join(words).split()


class WordPiece:
    def __init__(self, vocab_path, lower=True):
        self.vocab = {}
        with open(vocab_path, encoding="utf-8", newline="") as f:  # HF: line i -> id i, last wins
            for i, line in enumerate(f.read().splitlines()):
                self.vocab[line] = i
        self.size = len(self.vocab)
        self.lower = lower
        self.pad, self.unk, self.cls, self.sep, self.mask = (self.vocab[s] for s in SPECIALS)

    def word(self, w, out):
        if len(w) > 100:
            out.append(self.unk)
            return
        pieces, start = [], 0
        while start < len(w):
            end, cur = len(w), None
            while start < end:
                s = w[start:end] if start == 0 else "##" + w[start:end]
                if s in self.vocab:
                    cur = self.vocab[s]
                    break
                end -= 1
            if cur is None:
                out.append(self.unk)
                return
            pieces.append(cur)
            start = end
        out.extend(pieces)

    def ids(self, text):
        """text's ids, the literal "[MASK]" as the mask id (HF's added-token split)"""
        out = []
        parts = text.split("[MASK]")
        for k, part in enumerate(parts):
            for w in basic_tokenize(part, self.lower):
                self.word(w, out)
            if k + 1 < len(parts):
                out.append(self.mask)
        return out

    def encode(self, text, max_len):
        x = self.ids(text)[:max_len - 2]
        return [self.cls] + x + [self.sep]


def read_rows(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                o = json.loads(line)
                rows.append((o["text"], o.get("label")))
    return rows


# ---- the vocabulary ------------------------------------------------------------------------------------


def cmd_vocab(a):
    """[PAD] [UNK] [CLS] [SEP] [MASK], every character of the basic-tokenized corpus, then the words seen
    at least --min-count times (most frequent first, ties in code-point order), then "##" + every
    character (so that any word of known characters has a WordPiece split, never [UNK])."""
    words, chars = collections.Counter(), set()
    for text, _ in read_rows(a.train):
        for w in basic_tokenize(text, True):
            words[w] += 1
            chars.update(w)
    chars = sorted(chars)
    vocab = list(SPECIALS) + chars
    seen = set(vocab)
    for w, n in sorted(words.items(), key=lambda kv: (-kv[1], kv[0])):
        if n >= a.min_count and w not in seen and len(vocab) < a.max_size - len(chars):
            vocab.append(w)
            seen.add(w)
    vocab += ["##" + c for c in chars]
    with open(a.out, "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(vocab) + "\n")
    print("%s: %d entries (%d specials, %d characters, %d words seen >= %d times, %d ## characters)" % (
        a.out, len(vocab), len(SPECIALS), len(chars), len(vocab) - len(SPECIALS) - 2 * len(chars),
        a.min_count, len(chars)), file=sys.stderr)


# ---- the rows' ids against zerotrain's tokenizer ---------------------------------------------------------


def cmd_tokens(a):
    """All rows' texts joined by newlines as one document for `zerotrain prepare-data --tokenizer
    wordpiece:VOCAB` (whitespace separates words, so the document's ids are the rows' ids back to
    back, then [SEP]); the stream is read from its shards and compared with ours."""
    import struct, subprocess, tempfile
    import numpy as np
    tok = WordPiece(a.vocab)
    rows = read_rows(a.train)
    ours = []
    for text, _ in rows:
        assert "[MASK]" not in text, "prepare-data does not split [MASK]: the check needs rows without it"
        ours += tok.ids(text)
    ours.append(tok.sep)
    with tempfile.TemporaryDirectory(prefix="zt-tok-") as tmp:
        doc = os.path.join(tmp, "rows.txt")
        with open(doc, "w", encoding="utf-8") as f:
            f.write("\n".join(t for t, _ in rows) + "\n")
        r = subprocess.run([a.zerotrain, "prepare-data", "--input", doc, "--tokenizer",
                            "wordpiece:" + a.vocab, "--out", os.path.join(tmp, "d")],
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("prepare-data failed: " + r.stderr[-2000:])
        theirs = []
        for name in sorted(os.listdir(os.path.join(tmp, "d"))):
            if name.endswith(".zts"):
                buf = open(os.path.join(tmp, "d", name), "rb").read()
                idb, = struct.unpack_from("<I", buf, 12)
                n, = struct.unpack_from("<Q", buf, 24)
                off, = struct.unpack_from("<Q", buf, 40)
                theirs += np.frombuffer(buf, dtype="<u2" if idb == 2 else "<u4", count=n,
                                        offset=off).tolist()
    same = ours == theirs
    first = next((i for i, (x, y) in enumerate(zip(ours, theirs)) if x != y), min(len(ours), len(theirs)))
    print(json.dumps({"rows": len(rows), "ids_python": len(ours), "ids_zerotrain": len(theirs),
                      "identical": same, "first_difference": None if same else first}))
    return 0 if same else 1


# ---- the model: transformers' BertForSequenceClassification in plain torch ------------------------------


def build_model(torch, V, L, H, A, I, NL, P=512, TT=2, p=0.1, pad=0):
    nn, F = torch.nn, torch.nn.functional

    class Embeddings(nn.Module):
        def __init__(s):
            super().__init__()
            s.word_embeddings = nn.Embedding(V, H, padding_idx=pad)
            s.position_embeddings = nn.Embedding(P, H)
            s.token_type_embeddings = nn.Embedding(TT, H)
            s.LayerNorm = nn.LayerNorm(H, eps=1e-12)
            s.dropout = nn.Dropout(p)

        def forward(s, ids, types):
            pos = torch.arange(ids.shape[1]).unsqueeze(0)
            x = s.word_embeddings(ids) + s.token_type_embeddings(types) + s.position_embeddings(pos)
            return s.dropout(s.LayerNorm(x))

    class SelfAttention(nn.Module):
        def __init__(s):
            super().__init__()
            s.query, s.key, s.value = nn.Linear(H, H), nn.Linear(H, H), nn.Linear(H, H)
            s.dropout = nn.Dropout(p)

        def forward(s, x, bias):
            B, T, _ = x.shape
            d = H // A

            def heads(t):
                return t.view(B, T, A, d).permute(0, 2, 1, 3)
            q, k, v = heads(s.query(x)), heads(s.key(x)), heads(s.value(x))
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d) + bias
            probs = s.dropout(F.softmax(scores, dim=-1))
            return torch.matmul(probs, v).permute(0, 2, 1, 3).reshape(B, T, H)

    class Output(nn.Module):  # BertSelfOutput / BertOutput: dense, dropout, LayerNorm(x + input)
        def __init__(s, n_in):
            super().__init__()
            s.dense, s.LayerNorm, s.dropout = nn.Linear(n_in, H), nn.LayerNorm(H, eps=1e-12), nn.Dropout(p)

        def forward(s, h, x):
            return s.LayerNorm(s.dropout(s.dense(h)) + x)

    class Attention(nn.Module):
        def __init__(s):
            super().__init__()
            s.self, s.output = SelfAttention(), Output(H)

        def forward(s, x, bias):
            return s.output(s.self(x, bias), x)

    class Intermediate(nn.Module):
        def __init__(s):
            super().__init__()
            s.dense = nn.Linear(H, I)

        def forward(s, x):
            return F.gelu(s.dense(x))  # exact erf GELU ("gelu")

    class Layer(nn.Module):
        def __init__(s):
            super().__init__()
            s.attention, s.intermediate, s.output = Attention(), Intermediate(), Output(I)

        def forward(s, x, bias):
            a = s.attention(x, bias)
            return s.output(s.intermediate(a), a)

    class Encoder(nn.Module):
        def __init__(s):
            super().__init__()
            s.layer = nn.ModuleList(Layer() for _ in range(L))

        def forward(s, x, bias):
            for layer in s.layer:
                x = layer(x, bias)
            return x

    class Pooler(nn.Module):
        def __init__(s):
            super().__init__()
            s.dense = nn.Linear(H, H)

        def forward(s, x):
            return torch.tanh(s.dense(x[:, 0]))

    class BertModel(nn.Module):
        def __init__(s):
            super().__init__()
            s.embeddings, s.encoder, s.pooler = Embeddings(), Encoder(), Pooler()

        def forward(s, ids, mask, types):
            bias = (1.0 - mask[:, None, None, :].to(torch.float32)) * torch.finfo(torch.float32).min
            return s.pooler(s.encoder(s.embeddings(ids, types), bias))

    class BertForSequenceClassification(nn.Module):
        def __init__(s):
            super().__init__()
            s.bert = BertModel()
            s.dropout = nn.Dropout(p)  # classifier_dropout None: hidden_dropout_prob
            s.classifier = nn.Linear(H, NL)
            for m in s.modules():  # BertPreTrainedModel._init_weights
                if isinstance(m, nn.Linear):
                    m.weight.data.normal_(mean=0.0, std=0.02)
                    m.bias.data.zero_()
                elif isinstance(m, nn.Embedding):
                    m.weight.data.normal_(mean=0.0, std=0.02)
                    if m.padding_idx is not None:
                        m.weight.data[m.padding_idx].zero_()
                elif isinstance(m, nn.LayerNorm):
                    m.weight.data.fill_(1.0)
                    m.bias.data.zero_()

        def forward(s, ids, mask, types, labels):
            logits = s.classifier(s.dropout(s.bert(ids, mask, types)))
            return F.cross_entropy(logits.view(-1, NL), labels.view(-1)), logits

    return BertForSequenceClassification()


def epoch_order(lib_path):
    lib = ctypes.CDLL(lib_path)
    f = lib.zt_epoch_order
    f.restype = ctypes.c_uint64
    f.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64]
    return f


def cmd_train(a):
    import numpy as np
    import torch
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    tok = WordPiece(a.vocab)
    rows = read_rows(a.train)
    names = sorted({lab for _, lab in rows})
    label_id = {n: i for i, n in enumerate(names)}
    t_tok = time.perf_counter()
    enc = [tok.encode(t, a.seq) for t, _ in rows]  # tokenized once, before training (as zerotrain)
    labels = [label_id[lab] for _, lab in rows]
    t_tok = time.perf_counter() - t_tok
    if a.model:  # a Hugging Face folder (e.g. zerotrain's --save-model): its shape and weights
        sys.path.insert(0, os.path.join(ROOT, "tests", "ref"))
        from compare import load_st
        c = json.load(open(os.path.join(a.model, "config.json")))
        L, H, A, I = c["num_hidden_layers"], c["hidden_size"], c["num_attention_heads"], c["intermediate_size"]
        V, P, TT = c["vocab_size"], c["max_position_embeddings"], c["type_vocab_size"]
        names = [c["id2label"][str(i)] for i in range(len(c["id2label"]))]
        label_id = {n: i for i, n in enumerate(names)}
        labels = [label_id[lab] for _, lab in rows]
    else:
        L, H, A, I = PRESETS[a.preset]
        V, P, TT = tok.size, 512, 2
    NL = len(names)
    model = build_model(torch, V, L, H, A, I, NL, P, TT, 0.0 if a.no_dropout else 0.1, tok.pad)
    if a.model:
        st = load_st(os.path.join(a.model, "model.safetensors"))
        sd = model.state_dict()
        missing = [k for k in sd if k not in st]
        if missing:
            sys.exit("%s lacks %s" % (a.model, ", ".join(missing[:5])))
        model.load_state_dict({k: torch.from_numpy(st[k]) for k in sd})
    model.train()
    decay = [p for n, p in model.named_parameters() if not (n.endswith(".bias") or "LayerNorm" in n)]
    no_decay = [p for n, p in model.named_parameters() if n.endswith(".bias") or "LayerNorm" in n]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.999), eps=1e-8)
    order = epoch_order(a.lib)
    n = len(rows)
    steps = []
    prof = None
    for step in range(a.steps):
        if a.profile and step == a.warmup:  # the operators of the measured steps
            prof = torch.autograd.profiler.profile()
            prof.__enter__()
        t0 = time.perf_counter()
        # micro-batch: samples [step*B, step*B + B), padded to its longest row (tools/clsdata.c)
        idx = [order(a.seed, n, step * a.batch + r) for r in range(a.batch)]
        T = max(len(enc[i]) for i in idx)
        ids = np.full((a.batch, T), tok.pad, dtype=np.int64)
        mask = np.zeros((a.batch, T), dtype=np.int64)
        for r, i in enumerate(idx):
            ids[r, :len(enc[i])] = enc[i]
            mask[r, :len(enc[i])] = 1
        ids, mask = torch.from_numpy(ids), torch.from_numpy(mask)
        types = torch.zeros_like(ids)
        lab = torch.tensor([labels[i] for i in idx], dtype=torch.long)
        real = int(mask.sum())
        opt.zero_grad(set_to_none=True)
        if a.bf16:  # HF Trainer's --bf16 on a CPU: autocast, fp32 weights and optimizer
            with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
                loss, _ = model(ids, mask, types, lab)
            loss = loss.float()
        else:
            loss, _ = model(ids, mask, types, lab)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip) if a.clip > 0 else None
        opt.step()
        dt = time.perf_counter() - t0
        steps.append({"step": step + 1, "tokens": real, "shape": [a.batch, T], "seconds": dt,
                      "loss": float(loss), "grad_norm": None if norm is None else float(norm)})
        if a.verbose:
            print("step %d  loss %.4f  %d tokens [%d, %d]  %.3f s  %.0f tokens/s" % (
                step + 1, float(loss), real, a.batch, T, dt, real / dt), file=sys.stderr)
    if prof is not None:
        prof.__exit__(None, None, None)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25), file=sys.stderr)
    meas = steps[a.warmup:]
    tok_s = sum(s["tokens"] for s in meas) / sum(s["seconds"] for s in meas) if meas else float("nan")
    res = {"peer": "pytorch BertForSequenceClassification", "torch": torch.__version__,
           "threads": a.threads, "model": a.model or a.preset, "layers": L, "hidden": H, "heads": A,
           "intermediate": I, "vocab": V, "num_labels": NL, "batch": a.batch, "seq": a.seq,
           "lr": a.lr, "weight_decay": a.weight_decay, "clip": a.clip,
           "dropout": 0.0 if a.no_dropout else 0.1, "precision": "bf16-autocast" if a.bf16 else "fp32", "seed": a.seed, "rows": n,
           "tokenize_seconds": t_tok, "warmup_steps": a.warmup, "measured_steps": len(meas),
           "tokens_per_s": tok_s,
           "step_median": statistics.median(s["seconds"] for s in meas) if meas else None,
           "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "steps": steps}
    print(json.dumps(res))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("vocab", help="a WordPiece vocab.txt from a JSON Lines file's texts")
    v.add_argument("--train", required=True)
    v.add_argument("--out", required=True)
    v.add_argument("--min-count", type=int, default=2)
    v.add_argument("--max-size", type=int, default=30522)
    t = sub.add_parser("train", help="train and time the PyTorch BertForSequenceClassification")
    t.add_argument("--train", required=True)
    t.add_argument("--vocab", required=True)
    t.add_argument("--preset", default="bert-mini", choices=sorted(PRESETS))
    t.add_argument("--model", help="a Hugging Face folder to start from (config.json, model.safetensors)")
    t.add_argument("--batch", type=int, default=32)
    t.add_argument("--seq", type=int, default=128)
    t.add_argument("--steps", type=int, default=40)
    t.add_argument("--warmup", type=int, default=5)
    t.add_argument("--threads", type=int, default=os.cpu_count())
    t.add_argument("--lr", type=float, default=2e-5)
    t.add_argument("--weight-decay", type=float, default=0.01)
    t.add_argument("--clip", type=float, default=1.0)
    t.add_argument("--seed", type=int, default=42, help="zerotrain's seed: the data order")
    t.add_argument("--no-dropout", action="store_true")
    t.add_argument("--bf16", action="store_true",
                   help="torch.autocast(cpu, bfloat16) around the forward, as the HF Trainer's --bf16 does")
    t.add_argument("--lib", default=os.path.join(ROOT, "build", "libzerotrain.so"))
    t.add_argument("--verbose", action="store_true")
    t.add_argument("--profile", action="store_true",
                   help="torch.autograd.profiler over the steps after --warmup: the operator table on stderr")
    k = sub.add_parser("tokens", help="our ids against zerotrain prepare-data's")
    k.add_argument("--train", required=True)
    k.add_argument("--vocab", required=True)
    k.add_argument("--zerotrain", default=os.path.join(ROOT, "build", "zerotrain"))
    a = ap.parse_args()
    return {"vocab": cmd_vocab, "train": cmd_train, "tokens": cmd_tokens}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
