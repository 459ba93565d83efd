#!/usr/bin/env python3
"""make_dataset.py - a text-to-text dataset from Debian's package lists: which archive section
(libs, python, devel, games, ...) does a package belong to, given its name and one-line
description? Classification as text, as T5 does it: the input is

    section: python3-requests: elegant and simple HTTP library for Python3, built for human beings

and the target the Section field's value ("python"), without its component ("contrib/",
"non-free/"). The rows come from apt's lists of the machine's main archive
(/var/lib/apt/lists/*_Packages*, read with apt-helper cat-file, which undoes their
compression) when `apt-get update` has run, else from dpkg's status file (the installed
packages only). A package is in eval.jsonl when the first byte of the sha1 of its name is
below 26 (about 10%), else in train.jsonl; each package once, the first list's entry. Rows
are JSON Lines with the fields "input" and "target", the input of `zerotrain finetune --task
text2text`.

    python3 make_dataset.py OUT_DIR [--max-train 20000] [--max-eval 1000]

Deterministic for the same lists. Standard library only.
"""
import argparse
import glob
import hashlib
import json
import os
import subprocess
import sys

LISTS = "/var/lib/apt/lists/*_main_binary-*_Packages*"
STATUS = "/var/lib/dpkg/status"


def stanzas(text):
    cur = {}
    key = None
    for line in text.splitlines():
        if not line.strip():
            if cur:
                yield cur
            cur, key = {}, None
        elif line[0] in " \t":
            if key:
                cur[key] += "\n" + line.strip()
        elif ":" in line:
            key, _, v = line.partition(":")
            cur[key] = v.strip()
    if cur:
        yield cur


def sources():
    lists = sorted(p for p in glob.glob(LISTS) if not p.endswith(".diff_Index"))
    if lists:
        out = []
        for p in lists:
            r = subprocess.run(["/usr/lib/apt/apt-helper", "cat-file", p], capture_output=True, check=True)
            out.append((p, r.stdout.decode("utf-8", "replace")))
        return out
    return [(STATUS, open(STATUS, encoding="utf-8", errors="replace").read())]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--max-train", type=int, default=20000)
    ap.add_argument("--max-eval", type=int, default=1000)
    a = ap.parse_args()
    seen, train, ev = set(), [], []
    srcs = sources()
    for _, text in srcs:
        for s in stanzas(text):
            name, sec, desc = s.get("Package"), s.get("Section"), s.get("Description", "")
            if not name or not sec or name in seen:
                continue
            seen.add(name)
            synopsis = desc.split("\n", 1)[0].strip()
            row = {"input": "section: %s: %s" % (name, synopsis), "target": sec.split("/")[-1]}
            (ev if hashlib.sha1(name.encode()).digest()[0] < 26 else train).append((name, row))
    os.makedirs(a.out, exist_ok=True)
    for fn, rows, cap in (("train.jsonl", train, a.max_train), ("eval.jsonl", ev, a.max_eval)):
        rows.sort(key=lambda r: hashlib.sha1(r[0].encode()).hexdigest())  # a fixed shuffle
        with open(os.path.join(a.out, fn), "w") as f:
            for _, r in rows[:cap]:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    counts = {}
    for _, r in train[:a.max_train]:
        counts[r["target"]] = counts.get(r["target"], 0) + 1
    top = max(counts.values())
    print("%s: %d train rows, %d eval rows from %s; %d sections, the largest %s (%.1f%% of train)" % (
        a.out, min(len(train), a.max_train), min(len(ev), a.max_eval), ", ".join(p for p, _ in srcs),
        len(counts), max(counts, key=counts.get), 100.0 * top / min(len(train), a.max_train)), file=sys.stderr)


if __name__ == "__main__":
    main()
