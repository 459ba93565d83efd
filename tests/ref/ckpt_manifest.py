#!/usr/bin/python3
"""A checkpoint's manifest.json as docs/architecture.md section 9 defines it, independently of
the C code (xxh64 in pure Python): check it, read its run id, or rewrite it for the tests.

  ckpt_manifest.py check DIR            every file's size and xxh64, and manifest_xxh64 over the
                                        bytes before its line; exit 1 with the reason
  ckpt_manifest.py runid DIR            the run id ("-" for none)
  ckpt_manifest.py set DIR PATH JSON    sets a field (PATH like files.0.xxh64); a manifest
                                        with manifest_xxh64 is sealed again with a correct one
  ckpt_manifest.py legacy DIR           rewrites it as version 2 wrote it: no run id, no
                                        manifest_xxh64
"""
import json, os, sys

M = (1 << 64) - 1
P1, P2, P3, P4, P5 = (11400714785074694791, 14029467366897019727, 1609587929392839161,
                      9650029242287828579, 2870177450012600261)


def rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M


def rnd(acc, v):
    return (rotl((acc + v * P2) & M, 31) * P1) & M


def merge(h, v):
    return ((h ^ rnd(0, v)) * P1 + P4) & M


def xxh64(b, seed=0):
    n, i = len(b), 0
    u64 = lambda k: int.from_bytes(b[k:k + 8], "little")
    if n >= 32:
        v = [(seed + P1 + P2) & M, (seed + P2) & M, seed, (seed - P1) & M]
        while i + 32 <= n:
            v = [rnd(v[j], u64(i + 8 * j)) for j in range(4)]
            i += 32
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & M
        for x in v:
            h = merge(h, x)
    else:
        h = (seed + P5) & M
    h = (h + n) & M
    while i + 8 <= n:
        h = (rotl(h ^ rnd(0, u64(i)), 27) * P1 + P4) & M
        i += 8
    if i + 4 <= n:
        h = (rotl(h ^ (int.from_bytes(b[i:i + 4], "little") * P1 & M), 23) * P2 + P3) & M
        i += 4
    while i < n:
        h = (rotl(h ^ (b[i] * P5 & M), 11) * P1) & M
        i += 1
    h ^= h >> 33
    h = h * P2 & M
    h ^= h >> 29
    h = h * P3 & M
    return h ^ (h >> 32)


KEY = b'\t"manifest_xxh64":\t"'


def seal(obj):
    """The manifest text the C code writes: cJSON_Print's layout (tabs), then the checksum."""
    body = dump(obj)
    assert body.endswith("\n}")
    body = (body[:-2] + ",\n").encode()
    return body + KEY + b"%016x" % xxh64(body) + b'"\n}\n'


def dump(o, ind=0):
    """cJSON_Print's formatting (enough for a manifest: objects, arrays, strings, integers)."""
    t = "\t" * ind
    if isinstance(o, dict):
        if not o:
            return "{\n" + t + "}"
        return "{\n" + ",\n".join("%s\t%s:\t%s" % (t, json.dumps(k), dump(v, ind + 1))
                                  for k, v in o.items()) + "\n" + t + "}"
    if isinstance(o, list):
        return "[" + ", ".join(dump(v, ind + 1) for v in o) + "]"
    if isinstance(o, bool):
        return "true" if o else "false"
    if isinstance(o, int):
        return str(o)
    return json.dumps(o)


def main():
    cmd, d = sys.argv[1], sys.argv[2]
    path = os.path.join(d, "manifest.json")
    raw = open(path, "rb").read()
    obj = json.loads(raw)
    if cmd == "check":
        for f in obj["files"]:
            b = open(os.path.join(d, f["name"]), "rb").read()
            if len(b) != f["bytes"] or "%016x" % xxh64(b) != f["xxh64"]:
                sys.exit("%s: size or xxh64 differs" % f["name"])
        at = raw.rfind(KEY)
        if at < 0 or list(obj)[-1] != "manifest_xxh64":
            sys.exit("no manifest_xxh64 as the last member")
        if "%016x" % xxh64(raw[:at]) != obj["manifest_xxh64"] or raw[at:] != KEY + obj["manifest_xxh64"].encode() + b'"\n}\n':
            sys.exit("manifest_xxh64 is not the xxh64 of the bytes before its line")
        if seal({k: v for k, v in obj.items() if k != "manifest_xxh64"}) != raw:
            sys.exit("the manifest is not laid out as documented")
    elif cmd == "runid":
        print(obj.get("run_id", "-"))
    elif cmd == "set":
        o = obj
        keys = sys.argv[3].split(".")
        for k in keys[:-1]:
            o = o[int(k)] if isinstance(o, list) else o[k]
        o[int(keys[-1]) if isinstance(o, list) else keys[-1]] = json.loads(sys.argv[4])
        if obj.pop("manifest_xxh64", None) is not None:
            open(path, "wb").write(seal(obj))
        else:
            open(path, "w").write(dump(obj))
    elif cmd == "legacy":
        obj.pop("manifest_xxh64", None)
        obj.pop("run_id", None)
        obj["version"] = 2
        open(path, "w").write(dump(obj))
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
