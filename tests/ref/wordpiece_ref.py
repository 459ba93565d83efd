"""wordpiece_ref.py - the reference for tools/tokenizer.c's BertTokenizer: a plain-Python
transcription of Hugging Face transformers' slow BertTokenizer as `tokenizer(text, pair,
truncation=True, max_length=N)` and `decode` run it, written from transformers 4.4x/4.5x:
  src/transformers/models/bert/tokenization_bert.py   BasicTokenizer (with NFC, added in
      4.30), WordpieceTokenizer, BertTokenizer._tokenize / build_inputs / token types
  src/transformers/tokenization_utils.py              Trie, PreTrainedTokenizer.tokenize (the
      per-character lower-casing that spares special tokens, the added-token split and its
      lstrip/rstrip/single_word rules), _decode
  src/transformers/tokenization_utils_base.py         truncate_sequences (longest_first,
      right side), prepare_for_model, clean_up_tokenization
(https://github.com/huggingface/transformers, the files above). It imports nothing but the
standard library; no transformers is installed here.

Run by hand to regenerate the fixture (the C test checks the committed output):
    python3 tests/ref/wordpiece_ref.py build-vocab CORPUS_DIR OUT/vocab.txt
    python3 tests/ref/wordpiece_ref.py cases OUT   (reads OUT/vocab.txt, writes OUT/cases.json)
"""
import collections
import json
import os
import re
import sys
import unicodedata


def load_vocab(vocab_file):
    vocab = collections.OrderedDict()
    with open(vocab_file, "r", encoding="utf-8") as reader:
        tokens = reader.readlines()
    for index, token in enumerate(tokens):
        token = token.rstrip("\n")
        vocab[token] = index
    return vocab


def whitespace_tokenize(text):
    text = text.strip()
    if not text:
        return []
    return text.split()


def _is_whitespace(char):
    if char == " " or char == "\t" or char == "\n" or char == "\r":
        return True
    return unicodedata.category(char) == "Zs"


def _is_control(char):
    if char == "\t" or char == "\n" or char == "\r":
        return False
    return unicodedata.category(char).startswith("C")


def _is_punctuation(char):
    cp = ord(char)
    if (cp >= 33 and cp <= 47) or (cp >= 58 and cp <= 64) or (cp >= 91 and cp <= 96) or (cp >= 123 and cp <= 126):
        return True
    return unicodedata.category(char).startswith("P")


class BasicTokenizer:
    def __init__(self, do_lower_case=True, never_split=None, tokenize_chinese_chars=True, strip_accents=None):
        self.do_lower_case = do_lower_case
        self.never_split = set(never_split or [])
        self.tokenize_chinese_chars = tokenize_chinese_chars
        self.strip_accents = strip_accents

    def tokenize(self, text, never_split=None):
        never_split = self.never_split.union(set(never_split)) if never_split else self.never_split
        text = self._clean_text(text)
        if self.tokenize_chinese_chars:
            text = self._tokenize_chinese_chars(text)
        unicode_normalized_text = unicodedata.normalize("NFC", text)
        orig_tokens = whitespace_tokenize(unicode_normalized_text)
        split_tokens = []
        for token in orig_tokens:
            if token not in never_split:
                if self.do_lower_case:
                    token = token.lower()
                    if self.strip_accents is not False:
                        token = self._run_strip_accents(token)
                elif self.strip_accents:
                    token = self._run_strip_accents(token)
            split_tokens.extend(self._run_split_on_punc(token, never_split))
        return whitespace_tokenize(" ".join(split_tokens))

    def _run_strip_accents(self, text):
        text = unicodedata.normalize("NFD", text)
        return "".join(c for c in text if unicodedata.category(c) != "Mn")

    def _run_split_on_punc(self, text, never_split=None):
        if never_split is not None and text in never_split:
            return [text]
        output = []
        start_new_word = True
        for char in text:
            if _is_punctuation(char):
                output.append([char])
                start_new_word = True
            else:
                if start_new_word:
                    output.append([])
                start_new_word = False
                output[-1].append(char)
        return ["".join(x) for x in output]

    def _tokenize_chinese_chars(self, text):
        output = []
        for char in text:
            if self._is_chinese_char(ord(char)):
                output += [" ", char, " "]
            else:
                output.append(char)
        return "".join(output)

    @staticmethod
    def _is_chinese_char(cp):
        return ((0x4E00 <= cp <= 0x9FFF) or (0x3400 <= cp <= 0x4DBF) or (0x20000 <= cp <= 0x2A6DF)
                or (0x2A700 <= cp <= 0x2B73F) or (0x2B740 <= cp <= 0x2B81F) or (0x2B820 <= cp <= 0x2CEAF)
                or (0xF900 <= cp <= 0xFAFF) or (0x2F800 <= cp <= 0x2FA1F))

    def _clean_text(self, text):
        output = []
        for char in text:
            cp = ord(char)
            if cp == 0 or cp == 0xFFFD or _is_control(char):
                continue
            output.append(" " if _is_whitespace(char) else char)
        return "".join(output)


class WordpieceTokenizer:
    def __init__(self, vocab, unk_token, max_input_chars_per_word=100):
        self.vocab = vocab
        self.unk_token = unk_token
        self.max_input_chars_per_word = max_input_chars_per_word

    def tokenize(self, text):
        output_tokens = []
        for token in whitespace_tokenize(text):
            chars = list(token)
            if len(chars) > self.max_input_chars_per_word:
                output_tokens.append(self.unk_token)
                continue
            is_bad = False
            start = 0
            sub_tokens = []
            while start < len(chars):
                end = len(chars)
                cur_substr = None
                while start < end:
                    substr = "".join(chars[start:end])
                    if start > 0:
                        substr = "##" + substr
                    if substr in self.vocab:
                        cur_substr = substr
                        break
                    end -= 1
                if cur_substr is None:
                    is_bad = True
                    break
                sub_tokens.append(cur_substr)
                start = end
            if is_bad:
                output_tokens.append(self.unk_token)
            else:
                output_tokens.extend(sub_tokens)
        return output_tokens


class Trie:
    """tokenization_utils.Trie: split() cuts the text at the added tokens it finds (the
    earliest start; among matches from there, the longest)."""

    def __init__(self):
        self.data = {}

    def add(self, word):
        ref = self.data
        for char in word:
            ref[char] = ref.setdefault(char, {})
            ref = ref[char]
        ref[""] = 1

    def split(self, text):
        states = collections.OrderedDict()
        offsets = [0]
        skip = 0
        for current, current_char in enumerate(text):
            if skip and current < skip:
                continue
            to_remove = set()
            reset = False
            for start, trie_pointer in states.items():
                if "" in trie_pointer:
                    for lookstart, looktrie_pointer in states.items():
                        if lookstart > start:
                            break
                        elif lookstart < start:
                            lookahead_index = current + 1
                            end = current + 1
                        else:
                            lookahead_index = current
                            end = current
                        next_char = text[lookahead_index] if lookahead_index < len(text) else None
                        if "" in looktrie_pointer:
                            start = lookstart
                            end = lookahead_index
                            skip = lookahead_index
                        while next_char in looktrie_pointer:
                            looktrie_pointer = looktrie_pointer[next_char]
                            lookahead_index += 1
                            if "" in looktrie_pointer:
                                start = lookstart
                                end = lookahead_index
                                skip = lookahead_index
                            if lookahead_index == len(text):
                                break
                            next_char = text[lookahead_index]
                    offsets.append(start)
                    offsets.append(end)
                    reset = True
                    break
                elif current_char in trie_pointer:
                    states[start] = trie_pointer[current_char]
                else:
                    to_remove.add(start)
            if reset:
                states = {}
            else:
                for start in to_remove:
                    del states[start]
            if current >= skip and current_char in self.data:
                states[current] = self.data[current_char]
        for start, trie_pointer in states.items():
            if "" in trie_pointer:
                offsets.append(start)
                offsets.append(len(text))
                break
        offsets.append(len(text))
        tokens = []
        start = 0
        for end in offsets:
            if start > end or start == end:
                continue
            tokens.append(text[start:end])
            start = end
        return tokens


class AddedToken:
    def __init__(self, content, lstrip=False, rstrip=False, single_word=False, normalized=False, special=True):
        self.content, self.lstrip, self.rstrip = content, lstrip, rstrip
        self.single_word, self.normalized, self.special = single_word, normalized, special


class SlowTokenizer:
    """PreTrainedTokenizer's tokenize / encode / decode over a model's _tokenize."""

    clean_up_tokenization_spaces = True

    def setup_added(self, added_tokens):
        # added_tokens: {id: AddedToken}
        self.added_decoder = dict(added_tokens)
        self.added_encoder = {t.content: i for i, t in self.added_decoder.items()}
        self.trie = Trie()
        for t in self.added_decoder.values():
            self.trie.add(t.content)

    def tokenize(self, text, split_special_tokens=False):
        if getattr(self, "do_lower_case", False):
            escaped = [re.escape(s) for s in self.all_special_tokens]
            escaped += [re.escape(t.content) for t in self.added_decoder.values() if not t.special and t.normalized]
            pattern = r"(" + r"|".join(escaped) + r")|" + r"(.+?)"
            text = re.sub(pattern, lambda m: m.groups()[0] or m.groups()[1].lower(), text)
        if split_special_tokens:
            no_split_token = []
            tokens = [text]
        else:
            no_split_token = self.added_encoder.keys()
            tokens = self.trie.split(text)
        for i, token in enumerate(tokens):
            if token in no_split_token:
                tok = self.added_decoder[self.added_encoder[token]]
                left = tokens[i - 1] if i > 0 else None
                right = tokens[i + 1] if i < len(tokens) - 1 else None
                if tok.rstrip and right:
                    tokens[i + 1] = right.lstrip()
                if tok.lstrip and left:
                    tokens[i - 1] = left.rstrip()
                if tok.single_word and left and left[-1] != " ":
                    tokens[i - 1] += token
                    tokens[i] = ""
                elif tok.single_word and right and right[0] != " ":
                    tokens[i + 1] = token + tokens[i + 1]
                    tokens[i] = ""
        out = []
        for token in tokens:
            if not token:
                continue
            if token in no_split_token:
                out.append(token)
            else:
                out.extend(self._tokenize(token, split_special_tokens))
        return out

    def convert_tokens_to_ids(self, tokens):
        return [self.added_encoder[t] if t in self.added_encoder else self._convert_token_to_id(t) for t in tokens]

    def encode(self, text, pair=None, max_length=None, split_special_tokens=False):
        ids = self.convert_tokens_to_ids(self.tokenize(text, split_special_tokens))
        pair_ids = self.convert_tokens_to_ids(self.tokenize(pair, split_special_tokens)) if pair is not None else None
        total = len(ids) + (len(pair_ids) if pair_ids is not None else 0) + self.num_special_tokens_to_add(pair_ids is not None)
        if max_length and total > max_length:
            ids, pair_ids = truncate_sequences(ids, pair_ids, total - max_length)
        return self.build_inputs_with_special_tokens(ids, pair_ids), self.create_token_type_ids_from_sequences(ids, pair_ids)

    def num_special_tokens_to_add(self, pair):
        return len(self.build_inputs_with_special_tokens([], [] if pair else None))

    def decode(self, ids, skip_special_tokens=False):
        all_special_ids = [self.added_encoder[t] for t in self.all_special_tokens]
        tokens = []
        for i in ids:
            if skip_special_tokens and i in all_special_ids:
                continue
            tokens.append(self.added_decoder[i].content if i in self.added_decoder else self._convert_id_to_token(i))
        legacy_added_tokens = set(self.added_encoder.keys()) - set(self.all_special_tokens) | {
            t for t in self.additional_special_tokens if self.added_encoder.get(t, 0) >= self.vocab_size}
        sub_texts, current = [], []
        for token in tokens:
            if skip_special_tokens and token in self.all_special_tokens:
                continue
            if token in legacy_added_tokens:
                if current:
                    string = self.convert_tokens_to_string(current)
                    if len(string) > 0:
                        sub_texts.append(string)
                    current = []
                sub_texts.append(token)
            else:
                current.append(token)
        if current:
            sub_texts.append(self.convert_tokens_to_string(current))
        text = " ".join(sub_texts)
        return clean_up_tokenization(text) if self.clean_up_tokenization_spaces else text


def truncate_sequences(ids, pair_ids, num_tokens_to_remove):
    if pair_ids is None:
        if len(ids) > num_tokens_to_remove:
            ids = ids[:-num_tokens_to_remove]
        # else: HF logs an error and leaves the sequence whole
        return ids, None
    for _ in range(num_tokens_to_remove):
        if len(ids) > len(pair_ids):
            ids = ids[:-1]
        else:
            pair_ids = pair_ids[:-1]
    return ids, pair_ids


def clean_up_tokenization(out_string):
    return (out_string.replace(" .", ".").replace(" ?", "?").replace(" !", "!").replace(" ,", ",")
            .replace(" ' ", "'").replace(" n't", "n't").replace(" 'm", "'m").replace(" 's", "'s")
            .replace(" 've", "'ve").replace(" 're", "'re"))


class BertRef(SlowTokenizer):
    def __init__(self, vocab_file, do_lower_case=True, strip_accents=None, tokenize_chinese_chars=True):
        self.vocab = load_vocab(vocab_file)
        self.ids_to_tokens = {i: t for t, i in self.vocab.items()}
        self.do_lower_case = do_lower_case
        self.basic_tokenizer = BasicTokenizer(do_lower_case, None, tokenize_chinese_chars, strip_accents)
        self.unk_token = "[UNK]"
        self.wordpiece_tokenizer = WordpieceTokenizer(self.vocab, self.unk_token)
        # SPECIAL_TOKENS_ATTRIBUTES order: bos, eos, unk, sep, pad, cls, mask
        self.all_special_tokens = ["[UNK]", "[SEP]", "[PAD]", "[CLS]", "[MASK]"]
        self.additional_special_tokens = []
        self.vocab_size = len(self.vocab)
        self.setup_added({self.vocab[t]: AddedToken(t) for t in self.all_special_tokens})

    def _tokenize(self, text, split_special_tokens=False):
        split_tokens = []
        for token in self.basic_tokenizer.tokenize(text, never_split=self.all_special_tokens if not split_special_tokens else None):
            if token in self.basic_tokenizer.never_split:
                split_tokens.append(token)
            else:
                split_tokens += self.wordpiece_tokenizer.tokenize(token)
        return split_tokens

    def _convert_token_to_id(self, token):
        return self.vocab.get(token, self.vocab.get(self.unk_token))

    def _convert_id_to_token(self, index):
        return self.ids_to_tokens.get(index, self.unk_token)

    def convert_tokens_to_string(self, tokens):
        return " ".join(tokens).replace(" ##", "").strip()

    def build_inputs_with_special_tokens(self, a, b=None):
        cls, sep = [self.vocab["[CLS]"]], [self.vocab["[SEP]"]]
        return cls + a + sep if b is None else cls + a + sep + b + sep

    def create_token_type_ids_from_sequences(self, a, b=None):
        return len(a + [0, 0]) * [0] if b is None else len(a + [0, 0]) * [0] + len(b + [0]) * [1]


# ---- the fixture ---------------------------------------------------------------------------

def corpus_paragraphs(root):
    """Paragraphs (blank-line separated, joined into one line) of the reStructuredText sources
    under root, in sorted path order."""
    out = []
    for dirpath, dirs, files in os.walk(root):
        dirs.sort()
        for f in sorted(files):
            text = open(os.path.join(dirpath, f), encoding="utf-8").read()
            for para in re.split(r"\n\s*\n", text):
                para = " ".join(para.split())
                if para:
                    out.append(para)
    return out


def build_vocab(corpus_dir, out_path, size=3000):
    """A real-looking WordPiece vocabulary: BERT's specials, every character seen (and its
    ## form), then the most frequent whole words (lower-cased and cased) and word endings."""
    paras = corpus_paragraphs(corpus_dir)
    lower, cased = BasicTokenizer(True), BasicTokenizer(False)
    words, chars, ends = collections.Counter(), set(), collections.Counter()
    for p in paras:
        for w in lower.tokenize(p) + cased.tokenize(p):
            words[w] += 1
            chars.update(w)
            for k in (2, 3, 4):
                if len(w) > k + 2:
                    ends["##" + w[-k:]] += 1
    vocab = ["[PAD]"] + ["[unused%d]" % i for i in range(5)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    for c in sorted(chars):
        vocab.append(c)
    for c in sorted(chars):
        vocab.append("##" + c)
    seen = set(vocab)
    for w, _ in ends.most_common(400):
        if w not in seen:
            vocab.append(w)
            seen.add(w)
    for w, _ in words.most_common():
        if len(vocab) >= size:
            break
        if w not in seen:
            vocab.append(w)
            seen.add(w)
    for extra in ["café", "école", "naïve", "中", "文", "[", "]", "mask", "MASK"]:
        if extra not in seen:
            vocab.append(extra)
            seen.add(extra)
    with open(out_path, "w", encoding="utf-8") as f:
        f.write("\n".join(vocab) + "\n")


HARD = [
    "Café naïve Ångström São Paulo crème brûlée Œuvre",
    "e\u0301cole E\u0301COLE cafe\u0301 résumé RÉSUMÉ",
    "中文字符和日本語のテキスト、한국어 텍스트 \uf900 compat",
    "I \u2764\ufe0f Python \U0001F40D\U0001F40D and \U0001F44D\U0001F3FD emoji",
    "tab\there\x01ctrl\x07bell\u200bzwsp\ufeffbom\r\nnext line\u2028sep\u00a0nbsp\u3000ideo",
    "a" * 150 + " short " + "supercalifragilisticexpialidocious" * 3,
    "x" * 100 + " " + "y" * 101,
    "The capital of France is [MASK].",
    "Paris[MASK]x and [SEP][CLS] glued, [mask] in lower case, [ MASK ] spaced",
    "[MA\x7fSK] hides a control character; [UNK] and [PAD] appear too",
    "ΟΔΟΣ ΣΟΦΟΣ ΑΣ'Β and İstanbul",
    "  leading and trailing spaces  ",
    "don't can't won't it's we've they're I'm",
    "$5^`~ punctuation!?... (parentheses) {braces} <angles> ¿qué? «quotes»",
    "",
]


def fixture_cases(paras):
    cases = []
    for p in paras:
        cases.append({"text": p})
    for h in HARD:
        cases.append({"text": h})
    cases.append({"text": HARD[7], "split_special": True})
    cases.append({"text": HARD[8], "split_special": True})
    cases.append({"text": paras[0], "max_len": 20})
    cases.append({"text": paras[1], "pair": paras[2], "max_len": 64})
    cases.append({"text": "A short question?", "pair": paras[3], "max_len": 32})
    cases.append({"text": paras[4], "pair": "a short answer.", "max_len": 32})
    cases.append({"text": paras[5], "pair": paras[6]})
    cases.append({"text": "two", "pair": "words", "max_len": 3})
    cases.append({"text": "one two three", "max_len": 1})
    cases.append({"text": HARD[7], "pair": HARD[8], "max_len": 24})
    return cases


def main():
    if sys.argv[1] == "build-vocab":
        build_vocab(sys.argv[2], sys.argv[3])
        return
    out = sys.argv[2]
    corpus = sys.argv[3] if len(sys.argv) > 3 else "/usr/share/doc/python3.11/html/_sources/tutorial"
    paras = [p for p in corpus_paragraphs(corpus) if len(p) > 200][:30]
    cases = fixture_cases(paras)
    result = []
    for lower in (True, False):
        tok = BertRef(os.path.join(out, "vocab.txt"), do_lower_case=lower)
        for c in cases:
            ids, types = tok.encode(c["text"], c.get("pair"), c.get("max_len"), c.get("split_special", False))
            r = dict(c, lower=lower, ids=ids, type_ids=types)
            if "pair" not in c and "max_len" not in c:
                r["decoded"] = tok.decode(ids)
                r["decoded_skip"] = tok.decode(ids, skip_special_tokens=True)
            result.append(r)
    write_cases(os.path.join(out, "cases.json"), result)


def write_cases(path, result):
    with open(path, "w", encoding="utf-8") as f:
        f.write("[\n" + ",\n".join(json.dumps(r, ensure_ascii=False) for r in result) + "\n]\n")


if __name__ == "__main__":
    main()
