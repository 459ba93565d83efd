"""spm_ref.py - the reference for tools/tokenizer.c's SentencePiece tokenizers: Hugging Face's
slow T5Tokenizer (legacy=True, transformers' default; models/t5/tokenization_t5.py) and
DebertaV2Tokenizer (models/deberta_v2/tokenization_deberta_v2.py, the class zerotrain writes
for a BERT over a SentencePiece vocabulary) and AlbertTokenizer
(models/albert/tokenization_albert.py) in plain Python, on PreTrainedTokenizer's tokenize
/ encode / decode from wordpiece_ref.py. The SentencePiece model itself is run by Debian's
command-line tools (spm_encode --output_format=piece, spm_decode --input_format=piece), not by
zerotrain's library calls: pieces become ids through the model's piece list, as HF's
piece_to_id does (an unknown surface is <unk>).

Regenerate the fixtures (the C test checks the committed output):
    python3 tests/ref/spm_ref.py train CORPUS_DIR OUT_DIR   (spm_train: OUT/t5/spiece.model
        with <pad> 0, </s> 1, <unk> 2 as T5's; OUT/bert-spm/spm.model with [PAD] [UNK] [CLS]
        [SEP] [MASK] = 0..4 as zerotrain's sentencepiece:N; OUT/albert/spiece.model with <pad>
        <unk> [CLS] [SEP] [MASK] = 0..4 as albert-base-v2's)
    python3 tests/ref/spm_ref.py cases OUT_DIR [CORPUS_DIR]
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wordpiece_ref import AddedToken, SlowTokenizer, corpus_paragraphs, write_cases  # noqa: E402

SPIECE_UNDERLINE = "\u2581"


def run(args, lines):
    """one spm_* call over many lines (no line may hold a newline)"""
    for line in lines:
        assert "\n" not in line and "\r" not in line, line
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".txt", delete=False) as f:
        f.write("".join(line + "\n" for line in lines))
        name = f.name
    try:
        out = subprocess.run(args + ["--input", name], check=True, capture_output=True).stdout
    finally:
        os.unlink(name)
    return out.decode("utf-8").split("\n")[:len(lines)]


class SpmModel:
    def __init__(self, model, vocab):
        self.model = model
        self.pieces = [line.split("\t")[0] for line in open(vocab, encoding="utf-8")]
        self.ids = {p: i for i, p in enumerate(self.pieces)}
        self.cache = {}

    def prefetch(self, texts):
        todo = sorted({t for t in texts if t not in self.cache})
        if todo:
            for t, line in zip(todo, run(["spm_encode", "--model", self.model, "--output_format=piece"], todo)):
                self.cache[t] = line.split(" ") if line else []

    def encode_pieces(self, text):
        self.prefetch([text])
        return self.cache[text]

    def decode(self, pieces):
        if not pieces:
            return ""
        return run(["spm_decode", "--model", self.model, "--input_format=piece"], [" ".join(pieces)])[0]


class SpmSlow(SlowTokenizer):
    def __init__(self, sp):
        self.sp = sp
        self.vocab_size = len(sp.pieces)

    def _tokenize(self, text, split_special_tokens=False):
        return self.sp.encode_pieces(text)

    def _convert_token_to_id(self, token):
        return self.sp.ids.get(token, self.unk_id)

    def _convert_id_to_token(self, index):
        return self.sp.pieces[index]

    def albert_tokens_to_string(self, tokens):
        current, out, prev_is_special = [], "", False
        for token in tokens:
            if token in self.all_special_tokens:
                if not prev_is_special:
                    out += " "
                out += self.sp.decode(current) + token
                prev_is_special = True
                current = []
            else:
                current.append(token)
                prev_is_special = False
        out += self.sp.decode(current)
        return out.strip()


class T5Ref(SpmSlow):
    """T5Tokenizer(vocab_file, extra_ids=100, legacy=True, add_prefix_space=True)"""

    def __init__(self, sp, extra_ids=100):
        super().__init__(sp)
        self.eos, self.unk_id, self.pad = sp.ids["</s>"], sp.ids["<unk>"], sp.ids["<pad>"]
        self.additional_special_tokens = ["<extra_id_%d>" % i for i in range(extra_ids)]
        self.all_special_tokens = ["</s>", "<unk>", "<pad>"] + self.additional_special_tokens
        added = {self.vocab_size - 1 + extra_ids - i: AddedToken("<extra_id_%d>" % i, lstrip=True, rstrip=True)
                 for i in range(extra_ids)}
        for t in ("</s>", "<unk>", "<pad>"):
            added[sp.ids[t]] = AddedToken(t)
        self.setup_added(added)

    def _add_eos_if_not_present(self, ids):
        return ids if ids and ids[-1] == self.eos else ids + [self.eos]

    def build_inputs_with_special_tokens(self, a, b=None):
        a = self._add_eos_if_not_present(a)
        return a if b is None else a + self._add_eos_if_not_present(b)

    def create_token_type_ids_from_sequences(self, a, b=None):
        return len(a + [0]) * [0] if b is None else len(a + [0] + b + [0]) * [0]

    def convert_tokens_to_string(self, tokens):
        if tokens[0].startswith(SPIECE_UNDERLINE):  # add_prefix_space
            tokens = [tokens[0][1:]] + tokens[1:]
        return self.albert_tokens_to_string(tokens)


class DebertaV2Ref(SpmSlow):
    """DebertaV2Tokenizer(vocab_file, do_lower_case=False, split_by_punct=False) with BERT's
    [PAD] [UNK] [CLS] [SEP] [MASK] (its defaults)"""

    def __init__(self, sp):
        super().__init__(sp)
        self.unk_id = sp.ids["[UNK]"]
        self.additional_special_tokens = []
        # bos [CLS], eos [SEP], unk, sep, pad, cls, mask, each once
        self.all_special_tokens = ["[CLS]", "[SEP]", "[UNK]", "[PAD]", "[MASK]"]
        self.setup_added({sp.ids[t]: AddedToken(t) for t in self.all_special_tokens})

    def build_inputs_with_special_tokens(self, a, b=None):
        cls, sep = [self.sp.ids["[CLS]"]], [self.sp.ids["[SEP]"]]
        return cls + a + sep if b is None else cls + a + sep + b + sep

    def create_token_type_ids_from_sequences(self, a, b=None):
        return len(a + [0, 0]) * [0] if b is None else len(a + [0, 0]) * [0] + len(b + [0]) * [1]

    def convert_tokens_to_string(self, tokens):
        return self.albert_tokens_to_string(tokens)


class AlbertRef(DebertaV2Ref):
    """AlbertTokenizer(vocab_file, do_lower_case=True, remove_space=True, keep_accents=False) with
    its specials [CLS] [SEP] <unk> <pad> [MASK] (models/albert/tokenization_albert.py, 4.4x):
    the mask is AddedToken("[MASK]", lstrip=True, rstrip=False, normalized=False); _tokenize runs
    preprocess_text (whitespace runs to one space, `` and '' to ", NFKD without combining marks,
    lower()) and then the SentencePiece model, splitting a piece that ends in a digit and a comma
    ("9," -> "9", ","; the digits re-encoded without their leading "\u2581" when the piece had
    none)."""

    def __init__(self, sp, do_lower_case=True, remove_space=True, keep_accents=False):
        SpmSlow.__init__(self, sp)  # (DebertaV2Ref's framing and decoding, AlbertTokenizer's own specials)
        self.do_lower_case, self.remove_space, self.keep_accents = do_lower_case, remove_space, keep_accents
        self.unk_id = sp.ids["<unk>"]
        self.additional_special_tokens = []
        # bos [CLS], eos [SEP], unk, sep, pad, cls, mask, each once
        self.all_special_tokens = ["[CLS]", "[SEP]", "<unk>", "<pad>", "[MASK]"]
        added = {sp.ids[t]: AddedToken(t) for t in self.all_special_tokens}
        added[sp.ids["[MASK]"]] = AddedToken("[MASK]", lstrip=True)
        self.setup_added(added)

    def preprocess_text(self, inputs):
        import unicodedata
        outputs = " ".join(inputs.strip().split()) if self.remove_space else inputs
        outputs = outputs.replace("``", '"').replace("\'\'", '"')
        if not self.keep_accents:
            outputs = unicodedata.normalize("NFKD", outputs)
            outputs = "".join([c for c in outputs if not unicodedata.combining(c)])
        if self.do_lower_case:
            outputs = outputs.lower()
        return outputs

    def _tokenize(self, text, split_special_tokens=False):
        pieces = self.sp.encode_pieces(self.preprocess_text(text))
        new_pieces = []
        for piece in pieces:
            if len(piece) > 1 and piece[-1] == str(",") and piece[-2].isdigit():
                # (a copy: encode_pieces hands out its cache's list; EncodeAsPieces a new one)
                cur_pieces = list(self.sp.encode_pieces(piece[:-1].replace(SPIECE_UNDERLINE, "")))
                if piece[0] != SPIECE_UNDERLINE and cur_pieces[0][0] == SPIECE_UNDERLINE:
                    if len(cur_pieces[0]) == 1:
                        cur_pieces = cur_pieces[1:]
                    else:
                        cur_pieces[0] = cur_pieces[0][1:]
                cur_pieces.append(piece[-1])
                new_pieces.extend(cur_pieces)
            else:
                new_pieces.append(piece)
        return new_pieces



HARD_T5 = [
    "The <extra_id_0> walks in <extra_id_1> park",
    "Hello <extra_id_0>.",
    "<extra_id_99>x<extra_id_10>y<extra_id_1>",
    "an eos </s> in the text, <pad> and <unk> too",
    "it ends with eos</s>",
    "[MASK] and [CLS] are text for T5",
    "Café naïve Ångström São Paulo crème brûlée",
    "中文字符和日本語のテキスト、한국어 텍스트",
    "I \u2764\ufe0f Python \U0001F40D and \U0001F44D\U0001F3FD emoji",
    "  spaces   inside  and  around  ",
    "zwsp\u200bhere nbsp\u00a0there ideographic\u3000space tab\tsep",
    "a" * 150,
    "",
]
HARD_BERT = [
    "The capital of France is [MASK].",
    "Paris[MASK]x and [SEP][CLS] glued, [mask] in lower case",
    "Café naïve Ångström São Paulo crème brûlée",
    "中文字符和日本語のテキスト",
    "I \u2764\ufe0f Python \U0001F40D emoji",
    "  spaces   inside  and  around  ",
    "",
]

HARD_ALBERT = HARD_BERT + [
    "It cost 1,000,000 dollars in 1999, 2000,and 3,5, then 42,",
    "Numbers: 7, 8,9 and x9, y10,z",
    "He said ``quoted'' and ''twice``",
    "Crème BRÛLÉE, Ångström and façade",
    "the [MASK] sat on the [MASK]",
    "tabs\tand  spaces   and\u3000ideographic",
]


def cases_for(tok, paras, hard):
    cases = [{"text": p} for p in paras] + [{"text": h} for h in hard]
    cases.append({"text": hard[0], "split_special": True})
    cases.append({"text": paras[0], "max_len": 20})
    cases.append({"text": paras[1], "pair": paras[2], "max_len": 64})
    cases.append({"text": "A short question?", "pair": paras[3], "max_len": 32})
    cases.append({"text": paras[4], "pair": "a short answer.", "max_len": 32})
    cases.append({"text": paras[5], "pair": paras[6]})
    cases.append({"text": hard[0], "pair": hard[1], "max_len": 12})
    # every segment spm_encode will be asked for, in one call
    segs = []
    for c in cases:
        for t in (c["text"], c.get("pair")):
            if t is not None:
                segs += [s for s in tok.trie.split(t)] + [t]
    tok.sp.prefetch([s.strip() for s in segs] + segs)
    out = []
    for c in cases:
        ids, types = tok.encode(c["text"], c.get("pair"), c.get("max_len"), c.get("split_special", False))
        r = dict(c, ids=ids, type_ids=types)
        if "pair" not in c and "max_len" not in c and ids:
            r["decoded"] = tok.decode(ids)
            r["decoded_skip"] = tok.decode(ids, skip_special_tokens=True)
        out.append(r)
    return out


def main():
    if sys.argv[1] == "train":
        corpus, out = sys.argv[2], sys.argv[3]
        text = os.path.join(out, "corpus.txt")
        os.makedirs(os.path.join(out, "t5"), exist_ok=True)
        os.makedirs(os.path.join(out, "bert-spm"), exist_ok=True)
        with open(text, "w", encoding="utf-8") as f:
            f.write("\n".join(corpus_paragraphs(corpus)) + "\n")
        common = ["spm_train", "--input=" + text, "--vocab_size=1000", "--model_type=unigram",
                  "--num_threads=1", "--normalization_rule_name=nmt_nfkc"]
        subprocess.run(common + ["--model_prefix=" + os.path.join(out, "t5", "spiece"),
                                 "--pad_id=0", "--eos_id=1", "--unk_id=2", "--bos_id=-1"],
                       check=True, capture_output=True)
        os.makedirs(os.path.join(out, "albert"), exist_ok=True)
        # albert-base-v2's layout: <pad> 0, <unk> 1, [CLS] 2, [SEP] 3, [MASK] 4; lower-cased
        # text (AlbertTokenizer lower-cases before the model)
        lower = os.path.join(out, "albert", "corpus.txt")
        with open(lower, "w", encoding="utf-8") as f:
            f.write("\n".join(p.lower() for p in corpus_paragraphs(corpus)) + "\n")
        subprocess.run(["spm_train", "--input=" + lower, "--vocab_size=1000", "--model_type=unigram",
                        "--num_threads=1", "--normalization_rule_name=nmt_nfkc",
                        "--model_prefix=" + os.path.join(out, "albert", "spiece"),
                        "--pad_id=0", "--unk_id=1", "--bos_id=-1", "--eos_id=-1",
                        "--control_symbols=[CLS],[SEP],[MASK]"], check=True, capture_output=True)
        os.unlink(lower)
        subprocess.run(common + ["--model_prefix=" + os.path.join(out, "bert-spm", "spm"),
                                 "--pad_id=0", "--unk_id=1", "--bos_id=-1", "--eos_id=-1",
                                 "--pad_piece=[PAD]", "--unk_piece=[UNK]",
                                 "--control_symbols=[CLS],[SEP],[MASK]"],
                       check=True, capture_output=True)
        os.unlink(text)
        return
    out = sys.argv[2]
    corpus = sys.argv[3] if len(sys.argv) > 3 else "/usr/share/doc/python3.11/html/_sources/tutorial"
    paras = [p for p in corpus_paragraphs(corpus) if len(p) > 200][:30]
    t5 = T5Ref(SpmModel(os.path.join(out, "t5", "spiece.model"), os.path.join(out, "t5", "spiece.vocab")))
    write_cases(os.path.join(out, "t5", "cases.json"), cases_for(t5, paras, HARD_T5))
    bs = DebertaV2Ref(SpmModel(os.path.join(out, "bert-spm", "spm.model"), os.path.join(out, "bert-spm", "spm.vocab")))
    write_cases(os.path.join(out, "bert-spm", "cases.json"), cases_for(bs, paras, HARD_BERT))
    al = AlbertRef(SpmModel(os.path.join(out, "albert", "spiece.model"), os.path.join(out, "albert", "spiece.vocab")))
    write_cases(os.path.join(out, "albert", "cases.json"), cases_for(al, paras, HARD_ALBERT))


if __name__ == "__main__":
    main()
