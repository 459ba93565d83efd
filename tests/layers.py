#!/usr/bin/env python3
"""layers.py - the engine's dependencies run one way, and its modules own their state (issue 23).

No engine object file uses a function of another that (directly or around a longer loop)
uses one of its own, and struct zt_engine is defined and seen in engine/engine.c only.

At the level of symbols: for every engine/*.c, the functions its object file uses that
another engine object defines give an edge; no object may reach itself again along those
edges (directly or around a longer loop). Prints the module map (who calls whom) and
exits 1 naming the symbols of any circle. Also: models/ and data/ include no engine header,
and the library reads no ZT_FAULT_* variable (faults come from zerotrain_faults.h).

usage: layers.py [BUILD_DIR]   (default build)"""
import glob, os, re, subprocess, sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "build")
mods = sorted(os.path.basename(c)[:-2] for c in glob.glob(os.path.join(root, "engine", "*.c")))
defs, uses = {}, {}
for m in mods:
    o = os.path.join(build, "obj", "engine", m + ".o")
    if not os.path.exists(o):
        sys.exit("layers: %s missing (build first)" % o)
    d, u = set(), set()
    for line in subprocess.run(["nm", o], capture_output=True, text=True, check=True).stdout.splitlines():
        p = line.split()
        if len(p) == 3 and p[1] in "TDBR":
            d.add(p[2])
        elif len(p) == 2 and p[0] == "U":
            u.add(p[1])
    defs[m], uses[m] = d, u
edges = {m: {} for m in mods}
for a in mods:
    for b in mods:
        if a != b:
            s = sorted(uses[a] & defs[b])
            if s:
                edges[a][b] = s
print("engine module map (calls):")
for a in mods:
    if edges[a]:
        print("  %-11s -> %s" % (a, " ".join(sorted(edges[a]))))
bad = []
# a circle: some b that a calls reaches a again
def reaches(x, target, seen):
    for y in edges[x]:
        if y == target:
            return True
        if y not in seen:
            seen.add(y)
            if reaches(y, target, seen):
                return True
    return False
for a in mods:
    for b in edges[a]:
        if reaches(b, a, {b}):
            bad.append("%s -> %s (%s) is part of a circle" % (a, b, " ".join(edges[a][b][:6])))
# struct zt_engine's members are engine.c's alone: every other module takes its own struct
# and is given what it works with, so no other source defines or sees the struct.
for f in sorted(glob.glob(os.path.join(root, "*", "*.[ch]"))):
    rel = os.path.relpath(f, root)
    text = open(f, encoding="utf-8", errors="replace").read()
    if rel != os.path.join("engine", "engine.c") and re.search(r"^struct zt_engine \{", text, re.M):
        bad.append("%s defines struct zt_engine: only engine/engine.c does" % rel)
    if re.search(r'#\s*include\s+"[./]*(engine/)?engine_impl\.h"', text):
        bad.append("%s includes engine_impl.h" % rel)
for d in ("models", "data"):
    for f in glob.glob(os.path.join(root, d, "*.[ch]")):
        for n, line in enumerate(open(f, encoding="utf-8"), 1):
            if re.match(r'\s*#\s*include\s+"\.\./engine/', line):
                bad.append("%s:%d includes an engine header" % (os.path.relpath(f, root), n))
for d in ("common", "memory", "format", "data", "engine", "models", "optimizer", "offload"):
    for f in glob.glob(os.path.join(root, d, "*.[ch]")):
        if re.search(r'getenv\("ZT_FAULT', open(f, encoding="utf-8").read()):
            bad.append("%s reads a ZT_FAULT_ variable" % os.path.relpath(f, root))
for b in bad:
    print("layers: " + b, file=sys.stderr)
print("layers: %d engine modules, %s" % (len(mods), "no circle" if not bad else "%d problems" % len(bad)))
sys.exit(1 if bad else 0)
