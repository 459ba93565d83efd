"""bpe_ref.py - the reference for a byte-level BPE (RoBERTa) tokenizer in tools/tokenizer.c: a
plain-Python transcription of Hugging Face transformers' slow RobertaTokenizer as
`tokenizer(text, pair, truncation=True, max_length=N)` and `decode` run it, on
PreTrainedTokenizer's tokenize / encode / decode from wordpiece_ref.py (SlowTokenizer, Trie,
AddedToken, truncate_sequences). Written from transformers 4.45 .. 4.57 (the last v4 line; v5
reorganised the tokenizer classes):
  src/transformers/models/roberta/tokenization_roberta.py
      bytes_to_unicode, get_pairs, RobertaTokenizer.__init__ (merges.txt read as
      `read().split("\\n")[1:-1]`: the first line is skipped whatever it says and so is
      whatever follows the last newline; each line `tuple(merge.split())`, its rank the line
      number), bpe, _tokenize (the GPT-2 pattern `re.findall` with the `regex` module, each
      piece's UTF-8 bytes mapped through bytes_to_unicode, then bpe), _convert_token_to_id
      (unknown -> <unk>), convert_tokens_to_string (byte_decoder, then
      `bytearray(...).decode("utf-8", errors="replace")`), build_inputs_with_special_tokens
      (<s> A </s>, <s> A </s></s> B </s>), create_token_type_ids_from_sequences (all 0),
      prepare_for_tokenization (add_prefix_space: a " " before text whose first character is
      not str.isspace())
  src/transformers/models/gpt2/tokenization_gpt2.py   the same bytes_to_unicode / bpe / pattern
  src/transformers/tokenization_utils.py              PreTrainedTokenizer.tokenize (Trie split,
      AddedToken lstrip/rstrip with Python's str.rstrip()/str.lstrip()), _decode
  src/transformers/tokenization_utils_base.py         truncate_sequences (longest_first: the
      pair form's first_remove/second_remove arithmetic equals wordpiece_ref's one-at-a-time
      loop, checked for all lengths < 12), clean_up_tokenization
(https://github.com/huggingface/transformers). Nothing but the standard library is imported.

The choices that depend on the transformers version:
  * RobertaTokenizer.__init__ wraps <s> </s> <unk> <pad> (bos/eos/sep/cls/unk/pad) as
    AddedToken(lstrip=False, rstrip=False) and <mask> as AddedToken(lstrip=True, rstrip=False,
    normalized=False): <mask> eats the whitespace before it (Python str.rstrip() of the piece on
    its left, so every str.isspace() character, U+001C..U+001F included), the others eat
    nothing. Same flags from 3.x through 4.57; all five are special (4.34+: special=True) and
    sit in vocab.json, so they keep their vocab.json ids and none is a "legacy added token" in
    _decode (decode therefore runs convert_tokens_to_string over the whole id list, special
    tokens included, and joins nothing with spaces).
  * clean_up_tokenization_spaces: PreTrainedTokenizerBase.__init__ defaults it to False since
    4.45 (PR #31938; BertTokenizer-style classes pass True explicitly, RobertaTokenizer does
    not, and roberta-base ships no tokenizer_config.json). So the default here is False:
    "decoded" is the byte-exact concatenation. (4.44 and earlier: True. `--clean-up` switches.)

The pre-tokenisation pattern
    's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+
is compiled by the mrab `regex` module (github.com/mrabarnett/mrab-regex, regex_3/_regex_core.py
CHARSET_ESCAPES: "s" is lookup_property(None, "Space") -> the binary property WSPACE, i.e.
Unicode White_Space, in _regex_unicode.c re_properties; \\p{L} is GC L = Lu|Ll|Lt|Lm|Lo and
\\p{N} is GC N = Nd|Nl|No, RE_PROP_L_MASK / RE_PROP_N_MASK in _regex_unicode.h). pretokenize()
below is a hand scanner with the regex's semantics: at each position the first alternative
that matches wins (contractions are lower-case only and need no word boundary; ` ?` is U+0020
only), every `+` is greedy, and `\\s+(?!\\S)` backtracks: a whitespace run followed by a
non-space gives all but its last character (when the run has 2 or more), the last one then
going to the next token (` ?\\p{L}+` etc. if it is U+0020, else `\\s+` alone).
\\s is White_Space (U+0009..000D, 0020, 0085, 00A0, 1680, 2000..200A, 2028, 2029, 202F, 205F,
3000) and NOT Python's str.isspace() (which adds U+001C..001F) nor Python re's \\s (same as
isspace). Letters/numbers come from unicodedata (Python 3.11: Unicode 14.0; the regex module
ships 15.x/16.x: they differ only on code points assigned since 14.0, which no fixture holds).
`selftest` checks the White_Space table and pretokenize() against Perl's regex engine (Perl's
\\s under Unicode rules is White_Space as well).

HF details the fixture's "HF" cases pin down (see HF_CASES):
  1. contractions are case-sensitive and not word-bounded: "DON'T" -> DON ' T, "x's"/"''s".
  2. a space before "'s" is not a contraction: " 's" -> " '" + "s".
  3. whitespace runs: "a  b" -> a, " ", " b"; "a \\tb" -> a, " ", "\\t", b; trailing runs stay
     whole; "\\n\\n b" keeps the space for the word.
  4. \\s is White_Space: U+0085/U+00A0/U+2028/U+3000 are whitespace (but never the optional
     leading space of a word), U+001C..001F/U+200B/U+FEFF/U+180E are "other".
  5. <mask> lstrip uses str.rstrip(): "x\\x1f<mask>" drops the \\x1f (isspace) although the
     pattern treats \\x1f as non-space; " <mask>" at the start leaves nothing on the left.
  6. <s> </s> <pad> <unk> in text are matched by the Trie (longest first) and strip nothing.
  7. combining marks (Mn) are not \\p{L}: "e\\u0301" -> "e", "\\u0301" pieces.
  8. \\p{N} covers Nd/Nl/No: "٣٤", "Ⅻ", "½²" are numbers; digits are never split by the pattern.
  9. truncation that cuts a multi-byte character: decode gives U+FFFD as Python's
     bytes.decode(errors="replace") does (one U+FFFD per maximal invalid subpart).
 10. clean_up_tokenization_spaces is off: "Hello , world . don 't" decodes unchanged.
 11. repeated symbols: BPE merges left to right without overlap ("aaaaaaa", "=====").

Regenerate the fixture (the C test checks the committed output):
    python3 tests/ref/bpe_ref.py train OUT [CORPUS_DIR]   (writes OUT/vocab.json, OUT/merges.txt)
    python3 tests/ref/bpe_ref.py cases OUT [CORPUS_DIR]   (reads them, writes OUT/cases.json)
    python3 tests/ref/bpe_ref.py selftest OUT             (checks the scanner against perl)
    python3 tests/ref/bpe_ref.py show OUT TEXT            (prints pieces, tokens and ids)
with OUT = tests/fixtures/tokenizers/roberta and CORPUS_DIR defaulting to
/usr/share/doc/python3.11/html/_sources/tutorial; the non-ASCII training / case text is the
msgstr side of a few /usr/share/locale/*/LC_MESSAGES/{sed,grep}.mo catalogs (read with
gettext.GNUTranslations).
"""
import collections
import gettext
import heapq
import json
import os
import random
import re
import subprocess
import sys
import unicodedata

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wordpiece_ref import AddedToken, SlowTokenizer, corpus_paragraphs, write_cases  # noqa: E402

DEFAULT_CORPUS = "/usr/share/doc/python3.11/html/_sources/tutorial"


# ---- tokenization_roberta.py / tokenization_gpt2.py ---------------------------------------

def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(2**8):
        if b not in bs:
            bs.append(b)
            cs.append(2**8 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def get_pairs(word):
    pairs = set()
    prev = word[0]
    for ch in word[1:]:
        pairs.add((prev, ch))
        prev = ch
    return pairs


# ---- the GPT-2 pattern, by hand -----------------------------------------------------------

# Unicode White_Space (PropList.txt; unchanged since Unicode 6.3): the regex module's \s
WHITE_SPACE = frozenset([0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680]
                        + list(range(0x2000, 0x200B)) + [0x2028, 0x2029, 0x202F, 0x205F, 0x3000])
LETTER = frozenset(["Lu", "Ll", "Lt", "Lm", "Lo"])
NUMBER = frozenset(["Nd", "Nl", "No"])
CONTRACTIONS = ("s", "t", "re", "ve", "m", "ll", "d")  # after "'", in the pattern's order


def is_space(c):
    return ord(c) in WHITE_SPACE


def is_letter(c):
    return unicodedata.category(c) in LETTER


def is_number(c):
    return unicodedata.category(c) in NUMBER


def is_other(c):
    return not (is_space(c) or is_letter(c) or is_number(c))


def pretokenize(text):
    """re.findall(pat, text) for the GPT-2 pattern, with the regex module's semantics."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        # 's|'t|'re|'ve|'m|'ll|'d
        if c == "'":
            k = next((k for k in CONTRACTIONS if text.startswith(k, i + 1)), None)
            if k is not None:
                out.append(text[i:i + 1 + len(k)])
                i += 1 + len(k)
                continue
        # ` ?\p{L}+` | ` ?\p{N}+` | ` ?[^\s\p{L}\p{N}]+`: the optional U+0020 is tried first; a
        # space is none of the three classes, so without it the class must start at i
        done = False
        for cls in (is_letter, is_number, is_other):
            j = i + 1 if c == " " else i
            if j < n and cls(text[j]):
                while j < n and cls(text[j]):
                    j += 1
                out.append(text[i:j])
                i = j
                done = True
                break
        if done:
            continue
        # here c is whitespace: `\s+(?!\S)` gives the whole run at the end of the text, else the
        # run less its last character if that leaves one; `\s+` takes a lone one
        assert is_space(c)
        j = i
        while j < n and is_space(text[j]):
            j += 1
        if j < n:
            j = max(j - 1, i + 1)
        out.append(text[i:j])
        i = j
    return out


# ---- the tokenizer ------------------------------------------------------------------------

class RobertaRef(SlowTokenizer):
    """RobertaTokenizer(vocab_file, merges_file, errors="replace", add_prefix_space=False)"""

    def __init__(self, vocab_file, merges_file, add_prefix_space=False, clean_up=False):
        with open(vocab_file, encoding="utf-8") as f:
            self.encoder = json.load(f)
        self.decoder = {v: k for k, v in self.encoder.items()}
        self.byte_encoder = bytes_to_unicode()
        self.byte_decoder = {v: k for k, v in self.byte_encoder.items()}
        with open(merges_file, encoding="utf-8") as f:
            bpe_merges = f.read().split("\n")[1:-1]
        bpe_merges = [tuple(m.split()) for m in bpe_merges]
        self.bpe_ranks = dict(zip(bpe_merges, range(len(bpe_merges))))
        self.cache = {}
        self.add_prefix_space = add_prefix_space
        self.clean_up_tokenization_spaces = clean_up
        self.unk_token = "<unk>"
        self.vocab_size = len(self.encoder)
        # SPECIAL_TOKENS_ATTRIBUTES order (bos, eos, unk, sep, pad, cls, mask), each once
        self.all_special_tokens = ["<s>", "</s>", "<unk>", "<pad>", "<mask>"]
        self.additional_special_tokens = []
        added = {self.encoder[t]: AddedToken(t, lstrip=False, rstrip=False) for t in ("<s>", "</s>", "<unk>", "<pad>")}
        added[self.encoder["<mask>"]] = AddedToken("<mask>", lstrip=True, rstrip=False, normalized=False)
        self.setup_added(added)

    def tokenize(self, text, split_special_tokens=False):
        # prepare_for_tokenization
        if self.add_prefix_space and len(text) > 0 and not text[0].isspace():
            text = " " + text
        return super().tokenize(text, split_special_tokens)

    def bpe(self, token):
        if token in self.cache:
            return self.cache[token]
        word = tuple(token)
        pairs = get_pairs(word)
        if not pairs:
            return token
        while True:
            bigram = min(pairs, key=lambda pair: self.bpe_ranks.get(pair, float("inf")))
            if bigram not in self.bpe_ranks:
                break
            first, second = bigram
            new_word = []
            i = 0
            while i < len(word):
                try:
                    j = word.index(first, i)
                except ValueError:
                    new_word.extend(word[i:])
                    break
                else:
                    new_word.extend(word[i:j])
                    i = j
                if word[i] == first and i < len(word) - 1 and word[i + 1] == second:
                    new_word.append(first + second)
                    i += 2
                else:
                    new_word.append(word[i])
                    i += 1
            word = tuple(new_word)
            if len(word) == 1:
                break
            pairs = get_pairs(word)
        word = " ".join(word)
        self.cache[token] = word
        return word

    def pieces(self, text):
        return ["".join(self.byte_encoder[b] for b in t.encode("utf-8")) for t in pretokenize(text)]

    def _tokenize(self, text, split_special_tokens=False):
        out = []
        for token in self.pieces(text):
            out.extend(self.bpe(token).split(" "))
        return out

    def _convert_token_to_id(self, token):
        return self.encoder.get(token, self.encoder.get(self.unk_token))

    def _convert_id_to_token(self, index):
        return self.decoder.get(index)

    def convert_tokens_to_string(self, tokens):
        text = "".join(tokens)
        return bytearray([self.byte_decoder[c] for c in text]).decode("utf-8", errors="replace")

    def build_inputs_with_special_tokens(self, a, b=None):
        cls, sep = [self.encoder["<s>"]], [self.encoder["</s>"]]
        return cls + a + sep if b is None else cls + a + sep + sep + b + sep

    def create_token_type_ids_from_sequences(self, a, b=None):
        return len(a + [0, 0]) * [0] if b is None else len(a + [0, 0, 0, 0] + b) * [0]


# ---- the training text --------------------------------------------------------------------

MO_LANGS = ["de", "fr", "es", "pl", "ru", "el", "tr", "vi", "ja", "zh_CN", "ko"]
MO_DOMAINS = ["sed", "grep"]


def mo_messages(langs=MO_LANGS, domains=MO_DOMAINS):
    """the translated strings (msgstr) of the gettext catalogs, as (lang, domain, msgid, text),
    sorted; plural forms each once"""
    out = []
    for lang in langs:
        for dom in domains:
            path = "/usr/share/locale/%s/LC_MESSAGES/%s.mo" % (lang, dom)
            if not os.path.exists(path):
                continue
            with open(path, "rb") as f:
                cat = gettext.GNUTranslations(f)._catalog
            for key in sorted(cat, key=repr):
                msgid = key[0] if isinstance(key, tuple) else key
                if msgid and cat[key].strip():
                    out.append((lang, dom, repr(key), cat[key]))
    return out


def corpus_files(root):
    out = []
    for dirpath, dirs, files in os.walk(root):
        dirs.sort()
        for f in sorted(files):
            out.append(open(os.path.join(dirpath, f), encoding="utf-8").read())
    return out


def training_texts(corpus_dir):
    return corpus_files(corpus_dir) + [m[3] for m in mo_messages()]


def train(corpus_dir, out_dir, size=2000):
    """Byte-level BPE: the pattern's pieces as bytes_to_unicode strings, counted; then merge
    the most frequent adjacent pair (ties: the smaller pair of strings) until the vocabulary
    (<s> <pad> </s> <unk>, the 256 byte symbols in bytes_to_unicode's order, each new merged
    string once, <mask>) holds `size` entries. A merge whose result is already a token is
    kept in merges.txt without a new id, as real merges files have them."""
    b2u = bytes_to_unicode()
    counts = collections.Counter()
    for text in training_texts(corpus_dir):
        for piece in pretokenize(text):
            counts["".join(b2u[b] for b in piece.encode("utf-8"))] += 1
    words = [list(w) for w in sorted(counts)]
    freq = [counts[w] for w in sorted(counts)]
    pair_count = collections.Counter()
    where = collections.defaultdict(set)
    for wi, w in enumerate(words):
        for p in zip(w, w[1:]):
            pair_count[p] += freq[wi]
            where[p].add(wi)
    heap = [(-c, p) for p, c in pair_count.items()]
    heapq.heapify(heap)
    vocab = ["<s>", "<pad>", "</s>", "<unk>"] + list(b2u.values())
    seen = set(vocab)
    merges = []
    while len(vocab) < size - 1 and heap:
        c, p = heapq.heappop(heap)
        if pair_count.get(p, 0) != -c:
            continue  # stale: every change of a count pushed a fresh entry
        if -c < 2:
            break
        merges.append(p)
        new = p[0] + p[1]
        if new not in seen:
            seen.add(new)
            vocab.append(new)
        touched = set()
        for wi in list(where[p]):
            w = words[wi]
            if not any(w[k] == p[0] and w[k + 1] == p[1] for k in range(len(w) - 1)):
                continue
            for q in zip(w, w[1:]):
                pair_count[q] -= freq[wi]
                touched.add(q)
            nw, k = [], 0
            while k < len(w):
                if k < len(w) - 1 and w[k] == p[0] and w[k + 1] == p[1]:
                    nw.append(new)
                    k += 2
                else:
                    nw.append(w[k])
                    k += 1
            words[wi] = nw
            for q in zip(nw, nw[1:]):
                pair_count[q] += freq[wi]
                where[q].add(wi)
                touched.add(q)
        del pair_count[p]
        for q in touched:
            if q != p and pair_count.get(q, 0) > 0:
                heapq.heappush(heap, (-pair_count[q], q))
    vocab.append("<mask>")
    os.makedirs(out_dir, exist_ok=True)
    encoder = {t: i for i, t in enumerate(vocab)}
    with open(os.path.join(out_dir, "vocab.json"), "w", encoding="utf-8") as f:
        # RobertaTokenizer.save_vocabulary
        f.write(json.dumps(encoder, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    with open(os.path.join(out_dir, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for a, b in merges:
            f.write(a + " " + b + "\n")
    print("%d entries, %d merges" % (len(vocab), len(merges)))


# ---- the cases ----------------------------------------------------------------------------

HARD = [
    "Hello world",
    " Hello world",
    "",
    " ",
    "   leading and trailing spaces   ",
    "multiple   spaces\tand\ttabs\t\tand\nnewlines\n\nand\r\nCRLF\n",
    "don't can't won't it's we've they're I'm we'll you'd",
    "Café naïve Ångström São Paulo crème brûlée Œuvre façade Zürich",
    "Ελληνικά, русский язык, polski: zażółć gęślą jaźń, Türkçe: ığüşöç",
    "中文字符和日本語のテキスト、한국어 텍스트",
    "I \u2764\ufe0f Python \U0001F40D\U0001F40D and \U0001F44D\U0001F3FD emoji \U0001F468\u200d\U0001F469\u200d\U0001F467",
    "nbsp\u00a0here, ideographic\u3000space, line\u2028separator, para\u2029graph",
    "e\u0301cole cafe\u0301 n\u0303 a\u0308\u0304 (combining marks)",
    "zero\u200bwidth\ufeffbom\u180emvs\u2060wj\u00adsoft-hyphen",
    "The capital of France is <mask>.",
    "The capital of France is<mask>.",
    "<mask> at the start, then <mask><mask> twice and a tab\t<mask> and newline\n<mask>",
    "<s>text between specials</s> and <pad><unk> too",
    "<s> spaced </s> specials <pad> <unk> keep their spaces",
    "<<mask>> <mask <s/> </s>> <<s>>",
    "version 3.11.7 costs $1,234.56 (about 1e-9%) on 2024-08-01 at 12:30",
    "x" * 120 + " " + "supercalifragilisticexpialidocious" * 3,
    "# comment\n    indented = [1, 2, 3]  # four spaces\n        deeper()\n",
]

HF_CASES = [
    "DON'T WE'LL I'M it'S x's ''s '''re 'll'd",       # 1
    "he said 's and 'T and ' s",                       # 2
    "a  b a \tb a\n\n b end   ",                       # 3
    "   ",                                             # 3: whitespace only
    "a\u0085b a \u0085b a\u00a0b a \u3000 b\u2028 c",   # 4: White_Space
    "a\x1cb a \x1dc d\x1e\x1f e \u200bf \ufeffg",       # 4: not White_Space
    "x\x1f<mask> y\u3000<mask> z\u00a0\t<mask>",        # 5
    " <mask>",                                         # 5
    "a <s> b </s> c<pad>d <unk> e",                    # 6
    "<s><s></s></s><mask></s>",                        # 6
    "e\u0301 a\u0308 \u0915\u094d\u0937",               # 7
    "\u0663\u0664 \u216b ½² 10\u00b2 12345678901234567890",  # 8
    "Hello , world . don 't do n't it 's",             # 10
    "=== ===== ....... ------- ---- ____ aaaaaaa",     # 11
]


def mo_cases():
    """one translated message (40..300 characters) a language, a second one with a newline
    inside for every other language"""
    by_lang = collections.defaultdict(list)
    for lang, dom, key, text in mo_messages():
        if 40 <= len(text) <= 300:
            by_lang[lang].append(text)
    out = []
    for k, lang in enumerate(MO_LANGS):
        msgs = by_lang[lang]
        out.append(msgs[len(msgs) // 3])
        multi = [m for m in msgs if "\n" in m.strip() and m != out[-1]]
        if k % 2 == 0 and multi:
            out.append(multi[len(multi) // 2])
    return out


def raw_blocks(corpus_dir, n=10):
    """blocks of the .rst sources with their newlines and indentation kept (code examples)"""
    out = []
    for text in corpus_files(corpus_dir):
        for block in re.split(r"\n\s*\n", text):
            if ">>>" in block and "\n" in block and 60 <= len(block) <= 300:
                out.append(block + "\n")
    step = max(1, len(out) // n)
    return out[::step][:n]


def corpus_cases(corpus_dir):
    paras = corpus_paragraphs(corpus_dir)
    plain = [p for p in paras if 150 <= len(p) <= 450]
    plain = plain[::max(1, len(plain) // 20)][:20]
    contr = [p for p in paras if re.search(r"\w'(s|t|re|ve|m|ll|d)\b", p) and 80 <= len(p) <= 400 and p not in plain]
    contr = contr[::max(1, len(contr) // 8)][:8]
    digits = [p for p in paras if re.search(r"\d{3,}", p) and 60 <= len(p) <= 300 and p not in plain + contr]
    digits = digits[::max(1, len(digits) // 6)][:6]
    return plain + contr + digits + raw_blocks(corpus_dir) + mo_cases()


def first_cut(tok, text, pair=None):
    """the smallest max_len whose truncation leaves half a character (decode gives U+FFFD)"""
    full, _ = tok.encode(text, pair)
    for m in range(4, len(full)):
        ids, _ = tok.encode(text, pair, m)
        if "\ufffd" in tok.decode(ids):
            return m
    raise AssertionError("no cut inside a character: " + text)


def fixture_cases(tok, corpus_dir):
    real = corpus_cases(corpus_dir)
    cases = [{"text": t} for t in real + HARD + HF_CASES]
    # split_special_tokens: the special tokens are plain text
    cases.append({"text": HARD[14], "split_special": True})
    cases.append({"text": HARD[17], "split_special": True})
    # truncation (longest_first, right side)
    cases.append({"text": real[0], "max_len": 20})
    cases.append({"text": real[1], "pair": real[2], "max_len": 64})
    cases.append({"text": "A short question?", "pair": real[3], "max_len": 32})
    cases.append({"text": real[4], "pair": "a short answer.", "max_len": 32})
    cases.append({"text": real[5], "pair": real[6]})
    cases.append({"text": "two", "pair": "words", "max_len": 4})
    cases.append({"text": "two", "pair": "words", "max_len": 5})
    cases.append({"text": "one two three", "max_len": 2})    # cannot fit: left whole
    cases.append({"text": "Is this <mask>?", "pair": "<mask> it is, we'll see.", "max_len": 9})
    cases.append({"text": real[-1], "pair": real[-2]})
    cases.append({"text": HARD[8], "pair": HARD[9], "max_len": 40})
    # 9: a cut inside a multi-byte character
    for t, p in [(HARD[10], None), ("日本語のテキスト", None), ("emoji \U0001F40D\U0001F3FD", "Ελληνικά")]:
        cases.append({"text": t, "pair": p, "max_len": first_cut(tok, t, p)} if p else
                     {"text": t, "max_len": first_cut(tok, t)})
    for c in cases:
        for t in (c["text"], c.get("pair")):
            if t is not None:
                assert all(unicodedata.category(ch) != "Cn" for ch in t), t  # assigned in Unicode 14
    out = []
    for c in cases:
        ids, types = tok.encode(c["text"], c.get("pair"), c.get("max_len"), c.get("split_special", False))
        r = dict(c, ids=ids, type_ids=types)
        r["decoded"] = tok.decode(ids)
        r["decoded_skip"] = tok.decode(ids, skip_special_tokens=True)
        out.append(r)
    return out


# ---- checks -------------------------------------------------------------------------------

PERL_SPLIT = r"""
use v5.36; use utf8; binmode STDIN, ':encoding(UTF-8)'; binmode STDOUT, ':encoding(UTF-8)';
local $/ = "\0";
while (my $t = <STDIN>) {
    chomp $t;
    my @m = $t =~ /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/g;
    print join("\x01", @m), "\0";
}
"""


def perl_split(texts):
    inp = "".join(t + "\0" for t in texts).encode("utf-8")
    out = subprocess.run(["perl", "-e", PERL_SPLIT], input=inp, check=True, capture_output=True).stdout
    res = out.decode("utf-8").split("\0")[:len(texts)]
    return [r.split("\x01") if r else [] for r in res]


def selftest(out_dir):
    ws = subprocess.run(["perl", "-CS", "-e", "use v5.36; for my $c (0..0x10FFFF) { next if $c >= 0xD800 && $c <= 0xDFFF;"
                         " print qq($c\\n) if chr($c) =~ /\\s/ }"], check=True, capture_output=True).stdout
    assert set(int(x) for x in ws.split()) == WHITE_SPACE, "White_Space table differs from perl's \\s"
    tok = RobertaRef(os.path.join(out_dir, "vocab.json"), os.path.join(out_dir, "merges.txt"))
    texts = []
    for c in json.load(open(os.path.join(out_dir, "cases.json"), encoding="utf-8")):
        texts += [c["text"]] + ([c["pair"]] if "pair" in c else [])
    alphabet = list("aZé中ǅʰ1٣²Ⅻ \t\n\r\x0b\x85\u00a0\u3000\u2028'!.-\x1c\x1f\u200b\u0301\U0001F40Dstrevmld") + ["'s", "'ll", "  "]
    rng = random.Random(1)
    for _ in range(3000):
        texts.append("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14))))
    bad = 0
    for t, want in zip(texts, perl_split(texts)):
        got = pretokenize(t)
        if got != want:
            bad += 1
            print("differ on %r: %r vs perl %r" % (t, got, want))
    # byte-level BPE is lossless: decode(skip_special_tokens) gives the text back unless it was
    # truncated or held a special token (skipped, or <mask>'s lstrip)
    for c in json.load(open(os.path.join(out_dir, "cases.json"), encoding="utf-8")):
        if "pair" not in c and "max_len" not in c and (c.get("split_special") or
                                                       not any(t in c["text"] for t in tok.all_special_tokens)):
            assert c["decoded_skip"] == c["text"], c["text"]
            assert c["decoded"] == "<s>" + c["text"] + "</s>", c["text"]
    print("%d texts, %d differ from perl" % (len(texts), bad))
    return bad


def show(out_dir, text):
    tok = RobertaRef(os.path.join(out_dir, "vocab.json"), os.path.join(out_dir, "merges.txt"))
    toks = tok.tokenize(text)
    print("pattern pieces (whole text, before the added-token split):", pretokenize(text))
    print("tokens:", toks)
    print("ids:   ", tok.encode(text)[0])


def main():
    args = [a for a in sys.argv[1:] if a != "--clean-up"]
    cmd, out = args[0], args[1]
    corpus = args[2] if len(args) > 2 and cmd != "show" else DEFAULT_CORPUS
    if cmd == "train":
        train(corpus, out)
    elif cmd == "cases":
        tok = RobertaRef(os.path.join(out, "vocab.json"), os.path.join(out, "merges.txt"),
                         clean_up="--clean-up" in sys.argv)
        write_cases(os.path.join(out, "cases.json"), fixture_cases(tok, corpus))
    elif cmd == "selftest":
        sys.exit(1 if selftest(out) else 0)
    elif cmd == "show":
        show(out, args[2])


if __name__ == "__main__":
    main()
