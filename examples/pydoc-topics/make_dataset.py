#!/usr/bin/env python3
"""make_dataset.py - a labelled text-classification dataset from the Python documentation.

Each row is a chunk of one to three prose paragraphs (200-1500 characters) of the
reStructuredText sources Debian ships in python3.11-doc, labelled by the top-level folder
it comes from (library, whatsnew, c-api, howto, ...): "which part of the docs is this
from?". Markup is cleaned lightly (roles, literals, emphasis, links), code blocks, tables,
headings and directive lines are dropped. The 8 folders with most chunks are kept, each
capped so that the labels are balanced, and each folder's files are split 90/10 into
train.jsonl and eval.jsonl by a hash of their path, so that one document's paragraphs never
straddle the split. Rows are JSON Lines with the fields "text" and "label", the input of
`zerotrain finetune --task classify`.

    python3 make_dataset.py OUT_DIR [--src DIR] [--labels 8] [--cap 500]

Deterministic: the same sources give byte-identical files. Standard library only.
"""
import argparse
import hashlib
import json
import os
import re
import sys
import time

SRC = "/usr/share/doc/python3.11/html/_sources"
MIN_CHARS, MAX_CHARS, MAX_PARAS = 200, 1500, 3
EVAL_SHARE = 0.10

# directives whose content is not prose (code, tables, indexes, file inclusion, ...)
SKIP_CONTENT = {
    "code-block", "sourcecode", "code", "literalinclude", "doctest", "testcode", "testsetup",
    "testcleanup", "testoutput", "productionlist", "index", "toctree", "highlight", "include",
    "list-table", "csv-table", "table", "tabularcolumns", "raw", "image", "figure",
    "sectionauthor", "moduleauthor", "module", "currentmodule", "program", "only", "ifconfig",
    "graphviz", "audit-event-table", "availability",
}
HEADING = re.compile(r"^([=\-~*^\"#+`'.:_])\1{2,}\s*$")
TABLE_LINE = re.compile(r"^\s*(\+[-=+]+\+|[=\-]{2,}( +[=\-]{2,})+)\s*$")
DIRECTIVE = re.compile(r"^(\s*)\.\.\s+([\w:-]+)::")
COMMENT = re.compile(r"^(\s*)\.\.(\s|$)")
OPTION = re.compile(r"^\s*:[\w-]+:(\s.*)?$")
BULLET = re.compile(r"^(\*|-|\+|#\.|\d+\.|\(\d+\))\s+")

ROLE = re.compile(r":[\w.:+-]+:`([^`]*)`")
LITERAL = re.compile(r"``(.+?)``")
LINK = re.compile(r"`([^`<]*?)\s*(<[^>`]*>)?`_{1,2}")
STRONG = re.compile(r"\*\*(\S(?:.*?\S)?)\*\*")
EMPH = re.compile(r"(?<![\w*])\*(\S(?:[^*]*?\S)?)\*(?![\w*])")
SUBST = re.compile(r"\|([^|\s][^|]*)\|_?")
INTERPRETED = re.compile(r"`([^`]+)`")
REF_NAME = re.compile(r"(?<![\w])([A-Za-z][\w-]*[A-Za-z0-9])_(?=[\s.,;:)]|$)")  # tox_ -> tox


ROLE_PREFIX = {"pep": "PEP ", "rfc": "RFC ", "issue": "bpo-", "gh": "gh-"}  # as Sphinx shows them


def role_text(m):
    """:func:`~os.path.join` -> join, :ref:`the tutorial <tut>` -> the tutorial,
    :pep:`8` -> PEP 8"""
    t = m.group(1)
    prefix = ROLE_PREFIX.get(m.group(0)[1:].split(":")[0])
    if prefix and re.fullmatch(r"\d+", t):
        return prefix + t
    explicit = re.match(r"^(.*?)\s*<[^>]*>$", t, re.S)
    if explicit and explicit.group(1):
        return explicit.group(1)
    t = t.lstrip("!")
    if t.startswith("~"):
        t = t[1:].split(".")[-1]
    return t


def clean(text):
    text = REF_NAME.sub(r"\1", text)  # first: ``class_`` is followed by a backquote
    text = ROLE.sub(role_text, text)
    text = LITERAL.sub(r"\1", text)
    text = LINK.sub(lambda m: m.group(1) or (m.group(2) or "")[1:-1], text)
    text = STRONG.sub(r"\1", text)
    text = EMPH.sub(r"\1", text)
    text = SUBST.sub(r"\1", text)
    text = INTERPRETED.sub(r"\1", text)
    text = text.replace("\\ ", "").replace("\\", "")
    text = re.sub(r"\s+", " ", text).strip()
    if text.endswith(" ::"):
        text = text[:-3]  # as Sphinx: "the following code ::" reads "the following code"
    elif text.endswith("::"):
        text = text[:-1]  # "For example::" reads "For example:"
    return text


def indent_of(line):
    return len(line) - len(line.lstrip(" "))


def paragraphs(lines):
    """Yields the prose paragraphs of one reST file, and None at each section heading."""
    skip_above = None  # skip blank lines and lines indented more than this
    para, para_indent = [], 0

    def flush():
        nonlocal para
        out, para = para, []
        if not out:
            return None
        if any(TABLE_LINE.match(l) or l.lstrip().startswith("|") for l in out):
            return None
        first = out[0].strip()
        if first.startswith(">>>"):
            return None
        return " ".join(BULLET.sub("", l.strip(), count=1) for l in out)

    for raw in lines:
        line = raw.rstrip("\n").replace("\t", "        ").rstrip()
        if skip_above is not None:
            if not line or indent_of(line) > skip_above:
                continue
            skip_above = None
        if not line:
            p = flush()
            if p is not None:
                yield p
                if p.endswith("::"):
                    skip_above = para_indent  # a literal block follows
            continue
        if HEADING.match(line):
            para = []  # the title above the underline (or nothing, for an overline)
            yield None
            continue
        m = DIRECTIVE.match(line)
        if m or COMMENT.match(line):
            p = flush()
            if p is not None:
                yield p
            indent = len((m or COMMENT.match(line)).group(1))
            name = m.group(2) if m else None
            if name is None or name in SKIP_CONTENT or name.startswith("|"):
                skip_above = indent
            continue
        if not para and OPTION.match(line):
            continue  # a directive's options (:noindex:, :module: ...)
        if not para:
            para_indent = indent_of(line)
        para.append(line)
    p = flush()
    if p is not None:
        yield p


def split_long(p):
    """A paragraph over MAX_CHARS, cut at sentence ends into pieces of at most MAX_CHARS."""
    if len(p) <= MAX_CHARS:
        return [p]
    out, cur = [], ""
    for s in re.split(r"(?<=[.!?])\s+", p):
        if cur and len(cur) + 1 + len(s) > MAX_CHARS:
            out.append(cur)
            cur = ""
        cur = (cur + " " + s).strip()
    if cur:
        out.append(cur)
    return [c for c in out if len(c) <= MAX_CHARS]


def chunks(path):
    """The chunks of one file: 1-3 consecutive paragraphs of one section, 200-1500 chars."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.readlines()
    out, cur = [], []

    def emit():
        text = " ".join(cur)
        if MIN_CHARS <= len(text) <= MAX_CHARS:
            out.append(text)
        cur.clear()

    for p in paragraphs(lines):
        if p is None:
            emit()
            continue
        for piece in split_long(clean(p)):
            if len(piece) < 20 or not re.search(r"[a-zA-Z]{3}", piece):
                continue
            size = len(" ".join(cur))
            if cur and (size >= MIN_CHARS and
                        (len(cur) >= MAX_PARAS or size + 1 + len(piece) > MAX_CHARS or
                         size >= 500)):
                emit()
            elif cur and size + 1 + len(piece) > MAX_CHARS:
                cur.clear()  # a short start that cannot grow into a chunk
            cur.append(piece)
    emit()
    return out


def digest(*parts):
    return hashlib.blake2b("\0".join(parts).encode(), digest_size=8).hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="output folder (created if missing)")
    ap.add_argument("--src", default=SRC, help="reST sources (default: %(default)s)")
    ap.add_argument("--labels", type=int, default=8, help="folders kept (default 8)")
    ap.add_argument("--cap", type=int, default=500,
                    help="rows per label, train and eval together (default 500)")
    a = ap.parse_args()
    t0 = time.time()
    if not os.path.isdir(a.src):
        sys.exit(f"{a.src}: not found (apt-get install python3.11-doc)")

    # folder -> [(relative path, [chunks])], files in sorted order
    folders = {}
    for top in sorted(os.listdir(a.src)):
        root = os.path.join(a.src, top)
        if not os.path.isdir(root):
            continue  # top-level pages (glossary, copyright, ...) have no folder label
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in sorted(filenames):
                if not name.endswith(".rst.txt"):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, a.src)
                c = chunks(path)
                if c:
                    folders.setdefault(top, []).append((rel, c))

    totals = {k: sum(len(c) for _, c in v) for k, v in folders.items()}
    kept = sorted(totals, key=lambda k: (-totals[k], k))[:a.labels]
    dropped = sorted(set(totals) - set(kept))

    train, evals = [], []
    report = []
    for label in sorted(kept):
        files = sorted(folders[label], key=lambda f: digest(f[0]))
        total = totals[label]
        # whole files to eval, in hash order, until it holds 10% of the folder's chunks;
        # a file that would take it past 15% stays in train (if no file fits, the smallest
        # one is eval)
        target = EVAL_SHARE * total
        ev, n_ev = [], 0
        for rel, c in files:
            if n_ev < target and n_ev + len(c) <= 1.5 * target:
                ev.append(rel)
                n_ev += len(c)
        if not ev:
            ev = [min(files, key=lambda f: len(f[1]))[0]]
        tr = [f for f in files if f[0] not in ev]
        ev = [f for f in files if f[0] in ev]
        # cap: the same share of the cap for each split, chunks picked by hash
        cap_ev = max(1, round(a.cap * EVAL_SHARE))
        cap_tr = a.cap - cap_ev

        def pick(files_, cap):
            rows = [(digest(rel, str(i)), text) for rel, c in files_ for i, text in enumerate(c)]
            rows.sort()
            return [{"text": t, "label": label} for _, t in rows[:cap]]

        r_tr, r_ev = pick(tr, cap_tr), pick(ev, cap_ev)
        train += r_tr
        evals += r_ev
        report.append((label, total, len(tr), len(ev), len(r_tr), len(r_ev)))

    # one deterministic shuffle, so that labels are interleaved
    train.sort(key=lambda r: digest(r["label"], r["text"]))
    evals.sort(key=lambda r: digest(r["label"], r["text"]))
    os.makedirs(a.out, exist_ok=True)
    sizes = {}
    for name, rows in (("train.jsonl", train), ("eval.jsonl", evals)):
        path = os.path.join(a.out, name)
        with open(path + ".tmp", "w", encoding="utf-8", newline="\n") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        os.replace(path + ".tmp", path)
        sizes[name] = os.path.getsize(path)

    print(f"{'label':<12} {'chunks':>7} {'files tr/ev':>12} {'train':>6} {'eval':>5}")
    for label, total, ftr, fev, ntr, nev in report:
        print(f"{label:<12} {total:>7} {ftr:>6}/{fev:<5} {ntr:>6} {nev:>5}")
    print(f"{'total':<12} {sum(totals[k] for k in kept):>7} {'':>12} {len(train):>6} "
          f"{len(evals):>5}")
    if dropped:
        print("dropped (fewer chunks): " +
              ", ".join(f"{k} ({totals[k]})" for k in dropped))
    for name in ("train.jsonl", "eval.jsonl"):
        print(f"{os.path.join(a.out, name)}: {sizes[name]} bytes")
    print(f"{time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
