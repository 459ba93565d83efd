#!/usr/bin/python3
"""zerotrain benchmark harness: runs a declared sweep (model x world size x ZeRO stage x offload x
optimizer x recomputation x micro-batch), each point a fresh `mpirun ... zerotrain train --steps K
--summary FILE --profile` with warm-up steps excluded, measures the machine's limits in the same
run (zerotrain's fp32 product, zt_sgemm, at the model's GEMM shapes, copy and triad bandwidth, fio on the offload path)
and the PyTorch peer, then writes benchmarks/results/<sweep>.json and .csv, gnuplot PNGs and
benchmarks/RESULTS.md.

  benchmarks/run.py benchmarks/sweeps/quick.json     (make bench)
  benchmarks/run.py benchmarks/sweeps/full.json      (make bench-full)
  benchmarks/run.py benchmarks/sweeps/offload.json   (make bench-offload)
  benchmarks/run.py --report-only                    RESULTS.md and PNGs from the JSON files
"""
import argparse, csv, itertools, json, os, re, shutil, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "results")
PRESETS = {  # layers, hidden, heads, intermediate, as zerotrain's presets (vocab 30522)
    "bert-tiny": (2, 128, 2, 512), "bert-mini": (4, 256, 4, 1024), "bert-small": (4, 512, 8, 2048),
    "bert-medium": (8, 512, 8, 2048), "bert-base": (12, 768, 12, 3072), "bert-large": (24, 1024, 16, 4096),
}
VOCAB = 30522
T5_PRESETS = {  # layers per stack, d_model, heads, d_ff, as zerotrain's T5 presets (vocab 32128)
    "t5-small": (6, 512, 8, 2048), "t5-base": (12, 768, 12, 3072),
    "t5-v1_1-small": (8, 512, 6, 1024), "t5-v1_1-base": (12, 768, 12, 2048),
}
T5_VOCAB = 32128
MPI = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]
ENV_KEYS = ["OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
            "GOTO_NUM_THREADS", "OPENBLAS_VERBOSE"]
PACKAGES = ["libopenblas0-openmp", "libopenmpi3", "openmpi-bin", "libjemalloc2", "liburing2",
            "python3-torch", "fio", "gnuplot-nox", "gcc"]


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def machine_facts(zt):
    facts = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "cores": os.cpu_count()}
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                facts["cpu"] = line.split(":", 1)[1].strip()
                break
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                facts["memory_kib"] = int(line.split()[1])
    except OSError:
        pass
    facts["kernel"] = os.uname().release
    facts["env"] = {k: os.environ.get(k) for k in ENV_KEYS if k in os.environ}
    vers = {}
    for p in PACKAGES:
        r = sh(["dpkg-query", "-W", "-f=${Version}", p])
        if r.returncode == 0 and r.stdout:
            vers[p] = r.stdout
    facts["packages"] = vers
    r = sh([zt, "version"])
    facts["zerotrain"] = r.stdout.strip()
    r = sh(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"])
    facts["commit"] = r.stdout.strip() if r.returncode == 0 else None
    return facts


def model_dims(model):
    """layers, hidden, heads, intermediate, vocab of a preset or a config.json (from ROOT)"""
    if model in T5_PRESETS:
        return T5_PRESETS[model] + (T5_VOCAB,)
    if not model.endswith(".json"):
        return PRESETS[model] + (VOCAB,)
    c = json.load(open(os.path.join(ROOT, model)))
    return (c["num_hidden_layers"], c["hidden_size"], c["num_attention_heads"],
            c["intermediate_size"], c["vocab_size"])


def parse_size(text):
    """bytes of a size: 4GiB, 3.5 GB, 1048576"""
    units = {"": 1, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "kib": 2**10, "mib": 2**20,
             "gib": 2**30}
    m = re.match(r"^\s*([0-9.]+)\s*([a-zA-Z]*)\s*$", str(text))
    if not m or m.group(2).lower() not in units:
        raise SystemExit("memory_limit %r: give bytes or a size such as 4GiB" % (text,))
    return float(m.group(1)) * units[m.group(2).lower()]


def gemm_shapes(model, B, T):
    L, C, A, F, V = model_dims(model)
    M = B * T
    return [(M, C, C), (M, C, F), (M, F, C), (max(1, int(0.15 * M)), C, V)]


def run_limits(limits, threads, shapes):
    cmd = [limits, "--threads", str(threads), "--mem-mib", "256"]
    for s in shapes:
        cmd += ["--shape", "%d,%d,%d" % s]
    r = sh(cmd)
    if r.returncode != 0:
        raise SystemExit("bench_limits failed: " + r.stderr)
    return json.loads(r.stdout)


def measure_limits(exe, points):
    out = {}
    for t in sorted({p["threads"] for p in points}):
        L = run_limits(exe, t, [(256, 256, 256)])
        L["by_model"] = {}
        for mb in sorted({(p["model"], p["micro"], p["seq"]) for p in points if p["threads"] == t}):
            lm = run_limits(exe, t, gemm_shapes(mb[0], mb[1], mb[2]))
            L["by_model"]["%s/%d" % (mb[0], mb[1])] = lm["sgemm_flops_per_s"]
        out[str(t)] = L
        log("limits, %d threads: copy %.1f GB/s, triad %.1f GB/s" % (
            t, L["copy_bytes_per_s"] / 1e9, L["triad_bytes_per_s"] / 1e9))
    return out


def run_fio(path):
    if not shutil.which("fio"):
        return {"skipped": "fio is not installed"}
    os.makedirs(path, exist_ok=True)
    f = os.path.join(path, "zerotrain-fio.tmp")
    out = {"path": path}
    try:
        for rw in ("write", "read"):
            r = sh(["fio", "--name=zt", "--filename=" + f, "--size=512M", "--bs=1M", "--rw=" + rw,
                    "--direct=1", "--ioengine=io_uring", "--iodepth=8", "--output-format=json"])
            if r.returncode != 0:
                return {"skipped": "fio failed: " + (r.stderr or r.stdout)[-300:]}
            job = json.loads(r.stdout[r.stdout.index("{"):])["jobs"][0]
            out[rw + "_bytes_per_s"] = job[rw]["bw_bytes"]
    finally:
        if os.path.exists(f):
            os.unlink(f)
    return out


def run_store(path):
    """the offload store's own write/read bandwidth, same block size and depth as fio"""
    exe = os.path.join(ROOT, "build", "bench_store")
    if not os.path.exists(exe):
        return {"skipped": "build/bench_store is not built"}
    r = sh([exe, "--dir", path, "--mib", "512", "--blob-mib", "16", "--block-kib", "1024",
            "--depth", "8"])
    if r.returncode != 0:
        return {"skipped": "bench_store failed: " + r.stderr[-300:]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def expand(sweep):
    """every point of every group: the cartesian product of its listed dimensions"""
    dims = ["model", "world", "stage", "micro", "offload", "optimizer", "recompute"]
    for g in sweep["groups"]:
        lists = [g.get(d + "s", g.get(d, None)) for d in dims]
        defaults = {"offload": ["none"], "optimizer": ["adamw"], "recompute": [False]}
        lists = [l if isinstance(l, list) else ([l] if l is not None else defaults.get(d, [None]))
                 for d, l in zip(dims, lists)]
        for combo in itertools.product(*lists):
            p = dict(zip(dims, combo))
            p["seq"] = g.get("seq", sweep.get("seq", 128))
            p["steps"] = g.get("steps", sweep.get("steps", 6))
            p["warmup"] = g.get("warmup", sweep.get("warmup", 1))
            p["threads"] = max(1, g.get("threads_total", os.cpu_count()) // p["world"])
            p["zero_extra"] = g.get("zero_extra", {})
            p["peer"] = g.get("peer", False)
            p["memory_limit"] = g.get("memory_limit")
            # a model is a preset or a Hugging Face config.json (its folder names it)
            name = (os.path.basename(os.path.dirname(p["model"])) if p["model"].endswith(".json")
                    else p["model"])
            p["label"] = "%s N%d s%d b%d%s%s%s%s%s" % (
                name, p["world"], p["stage"], p["micro"],
                "" if p["optimizer"] == "adamw" else " " + p["optimizer"],
                "" if p["offload"] == "none" else " offload:" + p["offload"],
                " recompute:" + p["recompute"] if p["recompute"] not in (False, None, "none") else "",
                " limit:" + p["memory_limit"] if p["memory_limit"] else "", g.get("tag", ""))
            yield p


OPTIMIZERS = {"adamw": "AdamW", "adamw8bit": "AdamW8bit", "adafactor": "Adafactor"}

OFFLOADS = {  # sweep value -> (offload_optimizer device, offload_param device)
    "none": (None, None), "cpu": ("cpu", None), "nvme": ("nvme", None),
    "nvme+param": ("nvme", "nvme"), "cpu+param": ("cpu", "cpu")}


def run_point(zt, p, tmp, offload_path):
    cfg = {"train_micro_batch_size_per_gpu": p["micro"],
           "zero_optimization": dict({"stage": p["stage"]}, **p["zero_extra"])}
    if p["offload"] not in OFFLOADS:
        raise SystemExit("point %s: offload must be one of %s" % (p["label"], ", ".join(OFFLOADS)))
    rc = p["recompute"] or "none"
    # recompute: none, full, selective, every-k:K or auto; "+offload" = cpu_checkpointing
    rc, rc_off = (rc[:-len("+offload")], True) if rc.endswith("+offload") else (rc, False)
    if p["optimizer"] not in OPTIMIZERS:
        raise SystemExit("point %s: optimizer must be one of %s" % (p["label"], ", ".join(OPTIMIZERS)))
    if p["optimizer"] != "adamw":  # the type's defaults (Adafactor: Hugging Face's)
        cfg["optimizer"] = {"type": OPTIMIZERS[p["optimizer"]]}
    if rc not in ("none", "full", "selective", "auto") and not rc.startswith("every-k:"):
        raise SystemExit("point %s: recompute must be none, full, selective, every-k:K or auto"
                         " (+offload)" % p["label"])
    opt, par = OFFLOADS[p["offload"]]
    if opt:
        cfg["zero_optimization"]["offload_optimizer"] = {"device": opt, "nvme_path": offload_path}
    if par:
        cfg["zero_optimization"]["offload_param"] = {"device": par, "nvme_path": offload_path}
    if rc != "none":
        cfg.setdefault("zerotrain", {})["recompute"] = rc
    if rc_off:  # the kept layer inputs to NVMe (the swap folder)
        cfg["activation_checkpointing"] = {"cpu_checkpointing": True}
        cfg["zero_optimization"].setdefault("offload_optimizer", {})["nvme_path"] = offload_path
    if p.get("memory_limit"):  # the planner places the state; the swap folder is where it may
        cfg.setdefault("zerotrain", {})["memory_limit"] = p["memory_limit"]
        cfg["zero_optimization"].setdefault("offload_optimizer", {})["nvme_path"] = offload_path
    model = os.path.join(ROOT, p["model"]) if p["model"].endswith(".json") else p["model"]
    cpath, spath = os.path.join(tmp, "c.json"), os.path.join(tmp, "s.json")
    json.dump(cfg, open(cpath, "w"))
    cmd = MPI + ["-np", str(p["world"]), zt, "train", "--model", model, "--data", "synthetic",
                 "--config", cpath, "--seq-len", str(p["seq"]), "--steps", str(p["steps"]),
                 "--warmup", str(p["warmup"]), "--threads", str(p["threads"]), "--profile",
                 "--summary", spath]
    t0 = time.time()
    r = sh(cmd)
    if r.returncode != 0:
        raise SystemExit("point %s failed:\n%s" % (p["label"], r.stderr[-2000:]))
    s = json.load(open(spath))
    s["wall_seconds"] = time.time() - t0
    return s


def run_peer(p, zero1=0):
    cmd = ["/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable,
           os.path.join(ROOT, "benchmarks", "peers", "torch_bert.py"), "--preset", p["model"],
           "--batch", str(p["micro"]), "--seq", str(p["seq"]), "--steps", str(p["steps"]),
           "--warmup", str(p["warmup"]), "--threads", str(p["threads"])]
    if zero1:
        cmd += ["--zero1", str(zero1)]
    r = sh(cmd)
    if r.returncode != 0:
        return {"skipped": "the PyTorch peer failed: " + r.stderr[-500:]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def median(v):
    return statistics.median(v) if v else float("nan")


def analyse(res):
    """ratios of every point to its limits and peers"""
    lim = {int(k): v for k, v in res["limits"].items()}
    base = {}
    for pt in res["points"]:
        s = pt.get("summary")
        if not s or "skipped" in s:
            continue
        plain = pt["recompute"] in (False, None, "none")
        if pt["stage"] == 0 and pt["offload"] == "none" and plain:
            base[(pt["model"], pt["world"], pt["micro"], pt["seq"], pt["optimizer"])] = s["step_median"]
        if pt["offload"] == "none" and plain and pt["optimizer"] == "adamw":
            base[("nooff", pt["model"], pt["world"], pt["micro"], pt["seq"], pt["stage"])] = \
                s["step_median"]
        if pt["optimizer"] == "adamw":  # the same point with AdamW
            base[("adamw", pt["model"], pt["world"], pt["micro"], pt["seq"], pt["stage"],
                  pt["offload"], str(pt["recompute"]))] = s
        if plain and pt["optimizer"] == "adamw":  # the same point keeping every activation
            base[("norc", pt["model"], pt["world"], pt["micro"], pt["seq"], pt["stage"],
                  pt["offload"])] = s
    for pt in res["points"]:
        s = pt.get("summary")
        if not s or "skipped" in s:
            continue
        L = lim.get(pt["threads"]) or {}
        r = {}
        sg = L.get("by_model", {}).get(pt["model"] + "/%d" % pt["micro"])
        if sg:  # per rank: the rank's share of the model FLOP/s against sgemm on its threads
            r["vs_sgemm"] = s["model_flops_per_s"] / pt["world"] / sg
        opt = [x for x in s.get("profile", []) if x["kind"] == "optimizer"]
        if opt and opt[0]["seconds"] > 0 and L.get("copy_bytes_per_s") and pt["optimizer"] == "adamw":
            r["optimizer_vs_copy"] = opt[0]["bytes"] / opt[0]["seconds"] / L["copy_bytes_per_s"]
        b = base.get(("adamw", pt["model"], pt["world"], pt["micro"], pt["seq"], pt["stage"],
                      pt["offload"], str(pt["recompute"])))
        if b and pt["optimizer"] != "adamw":
            r["vs_adamw"] = s["step_median"] / b["step_median"]
            bo = [x for x in b.get("profile", []) if x["kind"] == "optimizer"]
            if opt and bo and bo[0]["seconds"] > 0:  # the optimizer's own time, per step
                r["optimizer_time_vs_adamw"] = opt[0]["seconds"] / bo[0]["seconds"]
            if s.get("optimizer_state_bytes") and b.get("optimizer_state_bytes"):
                r["state_vs_adamw"] = s["optimizer_state_bytes"] / b["optimizer_state_bytes"]
            r["rss_vs_adamw"] = max(s["peak_rss_per_rank"]) / max(b["peak_rss_per_rank"])
        b = base.get((pt["model"], pt["world"], pt["micro"], pt["seq"], pt["optimizer"]))
        if b:
            r["vs_stage0"] = s["step_median"] / b
        b = base.get(("nooff", pt["model"], pt["world"], pt["micro"], pt["seq"], pt["stage"]))
        if b and pt["offload"] != "none":
            r["vs_no_offload"] = s["step_median"] / b
        b = base.get(("norc", pt["model"], pt["world"], pt["micro"], pt["seq"], pt["stage"],
                      pt["offload"]))
        if b and pt["recompute"] not in (False, None, "none"):
            r["vs_no_recompute"] = s["step_median"] / b["step_median"]
            act = s.get("memory_peak", {}).get("activations")
            if act and b.get("memory_peak", {}).get("activations"):
                r["activations_vs_no_recompute"] = act / b["memory_peak"]["activations"]
        fio = res.get("fio", {})
        nv = s.get("nvme_read_bytes_per_step", 0) + s.get("nvme_write_bytes_per_step", 0)
        if nv and fio.get("read_bytes_per_s") and s["step_median"] > 0:
            # the rank's NVMe bytes per second of step over fio's mean read/write bandwidth
            r["nvme_vs_fio"] = nv / s["step_median"] / (
                (fio["read_bytes_per_s"] + fio["write_bytes_per_s"]) / 2)
        peer = pt.get("peer_result")
        if peer and "tokens_per_s" in peer:
            r["vs_pytorch_tokens"] = s["tokens_per_s"] / peer["tokens_per_s"]
            r["vs_pytorch_rss"] = max(s["peak_rss_per_rank"]) / max(peer["peak_rss_per_rank"])
        pt["ratios"] = r


PLOT_COMMON = """set terminal pngcairo size 1100,700 font ",10"
set grid
set key outside right top
"""


def plots(res, name, tmp):
    if not shutil.which("gnuplot"):
        log("gnuplot is not installed: no plots")
        return []
    pts = [p for p in res["points"] if p.get("summary") and "skipped" not in p["summary"]]
    out = []
    # 1: trade-off frontier, peak RSS per rank vs tokens/s: every configuration a numbered
    # point listed in the key (colour by model, shape by world size), PyTorch peers too
    models = sorted({p["model"] for p in pts})
    d = os.path.join(tmp, "frontier.dat")
    entries = []
    for p in pts:
        s = p["summary"]
        entries.append((max(s["peak_rss_per_rank"]) / 2**20, s["tokens_per_s"], p["label"],
                        models.index(p["model"]) + 1, 7 if p["world"] == 1 else 5))
        q = p.get("peer_result") or {}
        if "tokens_per_s" in q:
            entries.append((max(q["peak_rss_per_rank"]) / 2**20, q["tokens_per_s"],
                            "PyTorch " + p["label"], models.index(p["model"]) + 1, 6))
    z1 = res.get("zero1_peer") or {}
    if "tokens_per_s" in z1 and z1.get("preset") in models:
        entries.append((max(z1["peak_rss_per_rank"]) / 2**20, z1["tokens_per_s"],
                        "PyTorch ZeRO-1 %s N%d b%d" % (z1["preset"], z1["world_size"], z1["batch"]),
                        models.index(z1["preset"]) + 1, 4))
    with open(d, "w") as f:
        for i, (x, y, lab, col, pt) in enumerate(entries):
            f.write('%.2f %.2f %d %d %d\n' % (x, y, i + 1, col, pt))
    png = os.path.join(RESULTS, name + "-frontier.png")
    palette = ["#4e79a7", "#e15759", "#59a14f", "#f28e2b", "#b07aa1", "#9c755f"]
    series = ", \\\n     ".join(
        '"%s" every ::%d::%d using 1:2 with points pt %d ps 1.8 lc rgb "%s" title "%d: %s"'
        % (d, i, i, pt, palette[(col - 1) % len(palette)], i + 1, lab.replace('"', "'"))
        for i, (x, y, lab, col, pt) in enumerate(entries))
    script = PLOT_COMMON + """set output "%s"
set title "Memory / throughput trade-off (%s sweep): colour = model; filled circle 1 rank, filled square 2 ranks (zerotrain); open symbols PyTorch"
set xlabel "peak RSS per rank (MiB, log scale)"
set ylabel "training throughput (tokens/s, log scale)"
set logscale xy
set key font ",8" spacing 0.9
plot %s, \\
     "%s" using 1:2:3 with labels offset char 1.2,0.5 font ",9" notitle
""" % (png, name, series, d)
    out.append((png, script))
    # 2: step time breakdown per configuration (profile of rank 0), stacked
    kinds = ["GEMM", "attention softmax", "layernorm", "GELU", "dropout", "embedding", "loss",
             "bias, residual, copies", "optimizer", "communication wait"]
    d = os.path.join(tmp, "breakdown.dat")
    with open(d, "w") as f:
        f.write('label ' + " ".join('"%s"' % k for k in kinds) + ' other\n')
        for p in pts:
            s = p["summary"]
            n = s["measured_steps"] or 1
            prof = {x["kind"]: x["seconds"] / n for x in s.get("profile", [])}
            row = [prof.get(k, 0.0) for k in kinds]
            other = max(0.0, s["step_median"] - sum(row))
            tot = sum(row) + other
            f.write('"%s (%.2f s)" ' % (p["label"], s["step_median"]) +
                    " ".join("%.3f" % (100.0 * v / tot) for v in row + [other]) + "\n")
    png = os.path.join(RESULTS, name + "-breakdown.png")
    cols = len(kinds) + 1
    script = PLOT_COMMON + """set output "%s"
set title "Where a step goes, by kernel kind (rank 0; label: median step time)"
set ylabel "share of the step (%%)"
set yrange [0:100]
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.75
set xtics rotate by -35 font ",8"
array C[11] = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#222222", "#bab0ac"]
plot for [i=2:%d] "%s" using i:xtic(1) title columnheader(i) lc rgb C[i-1]
""" % (png, cols + 1, d)
    out.append((png, script))
    # 3: memory by category, stacked (largest over ranks)
    cats = ["params", "grads", "optimizer", "activations", "comm", "io", "other"]
    d = os.path.join(tmp, "memory.dat")
    with open(d, "w") as f:
        f.write("label " + " ".join(cats) + "\n")
        for p in pts:
            m = p["summary"]["memory_peak"]
            f.write('"%s" ' % p["label"] + " ".join("%.2f" % (m.get(c, 0) / 2**20) for c in cats) + "\n")
    png = os.path.join(RESULTS, name + "-memory.png")
    script = PLOT_COMMON + """set output "%s"
set title "Peak memory by category per rank (each category's own peak, largest rank)"
set ylabel "MiB"
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.75
set xtics rotate by -35 font ",8"
array C[7] = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1"]
plot for [i=2:%d] "%s" using i:xtic(1) title columnheader(i) lc rgb C[i-1]
""" % (png, len(cats) + 1, d)
    out.append((png, script))
    # 4: recomputation, activation peak against step time, both relative to keeping every
    # activation (the plain point at (1, 1))
    rc = [p for p in pts if "vs_no_recompute" in p.get("ratios", {}) and
          "activations_vs_no_recompute" in p["ratios"]]
    if rc:
        d = os.path.join(tmp, "recompute.dat")
        with open(d, "w") as f:
            plain = [q for q in pts if q["recompute"] in (False, None, "none")]
            f.write('1.0 1.0 "none" %.0f\n' % (
                plain[0]["summary"]["memory_peak"]["activations"] / 2**20 if plain else 0))
            for p in rc:
                f.write('%.4f %.4f "%s" %.0f\n' % (
                    p["ratios"]["vs_no_recompute"], p["ratios"]["activations_vs_no_recompute"],
                    p["recompute"], p["summary"]["memory_peak"]["activations"] / 2**20))
        png = os.path.join(RESULTS, name + "-recompute.png")
        script = PLOT_COMMON + """set output "%s"
set title "Activation recomputation: activation peak vs step time, relative to keeping every activation"
set xlabel "step time / no recomputation"
set ylabel "activation peak / no recomputation"
set yrange [0:1.1]
set offsets graph 0.03, graph 0.15, 0, 0
set key off
plot "%s" using 1:2 with points pt 7 ps 2 lc rgb "#4e79a7", \\
     "%s" using 1:2:(sprintf("%%s (%%s MiB)", stringcolumn(3), stringcolumn(4))) with labels offset char 1,0.8 left font ",9"
""" % (png, d, d)
        out.append((png, script))
    made = []
    for png, script in out:
        sp = png + ".gp"
        r = subprocess.run(["gnuplot"], input=script, capture_output=True, text=True)
        if r.returncode != 0 or not os.path.exists(png):
            log("gnuplot failed for %s: %s" % (png, r.stderr[-500:]))
        else:
            made.append(os.path.basename(png))
        _ = sp
    return made


def write_csv(res, name):
    cols = ["label", "model", "world", "stage", "micro", "seq", "threads", "offload", "optimizer",
            "recompute", "step_median", "step_min", "step_max", "tokens_per_s", "model_flops_per_s",
            "peak_rss_max", "rs_bytes_per_step", "ag_bytes_per_step", "comm_wait_s_per_step",
            "nvme_read_bytes_per_step", "nvme_write_bytes_per_step", "io_wait_s_per_step",
            "vs_stage0", "vs_sgemm", "optimizer_vs_copy", "nvme_vs_fio", "vs_no_offload",
            "vs_pytorch_tokens", "vs_pytorch_rss", "optimizer_bytes_per_param", "vs_adamw",
            "optimizer_time_vs_adamw", "state_vs_adamw", "rss_vs_adamw"]
    with open(os.path.join(RESULTS, name + ".csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for p in res["points"]:
            s = p.get("summary") or {}
            if "skipped" in s:
                continue
            r = p.get("ratios", {})
            row = {k: p.get(k) for k in cols}
            row.update({k: s.get(k) for k in ["step_median", "step_min", "step_max", "tokens_per_s",
                                              "model_flops_per_s", "comm_wait_s_per_step",
                                              "nvme_read_bytes_per_step", "nvme_write_bytes_per_step",
                                              "io_wait_s_per_step", "optimizer_bytes_per_param"]})
            row["peak_rss_max"] = max(s.get("peak_rss_per_rank", [0]))
            row["rs_bytes_per_step"] = s.get("comm_bytes_per_step", {}).get("reduce_scatter")
            row["ag_bytes_per_step"] = s.get("comm_bytes_per_step", {}).get("all_gather")
            row.update(r)
            w.writerow([row.get(k) for k in cols])


def fmt(v, spec="%.3f"):
    return "—" if v is None else spec % v


def saving_formula(model, micro, seq, recompute):
    """activation bytes a recomputation mode saves against keeping everything, from the
    per-layer formula of docs/architecture.md section 12 (None: no formula for the mode)"""
    if model not in PRESETS:
        return None
    L, h, a, _ = PRESETS[model]
    tok, s = micro * seq, seq
    none = 64 * h + 4 * a * s + 16 + (2 * h + a * s) / 8
    sel, full = 44 * h + 16 + 2 * h / 8, 4 * h
    rc = recompute or "none"
    if rc == "selective":
        per = (L - 1) * (none - sel)
    elif rc == "full":
        per = (L - 1) * none - L * full
    elif rc == "full+offload":
        per = (L - 1) * none - 3 * full
    elif rc.startswith("every-k:") and not rc.endswith("+offload"):
        k = min(int(rc[8:]), L)
        per = L * none - -(-L // k) * full - k * none
    else:
        return None
    return tok * per


def report():
    """RESULTS.md from every results/<sweep>.json"""
    sweeps, extra = [], []
    for name in sorted(f[:-5] for f in os.listdir(RESULTS) if f.endswith(".json") and not f.startswith("_")):
        kind = json.load(open(os.path.join(RESULTS, name + ".json"))).get("kind", "sweep")
        (sweeps if kind == "sweep" else extra).append(name)
    lines = ["# zerotrain benchmark results", "",
             "Generated by `benchmarks/run.py` from `benchmarks/results/<sweep>.json` (do not edit by hand;",
             "`benchmarks/run.py --report-only` regenerates it). Each point is a fresh `mpirun -np N zerotrain",
             "train --model PRESET --data synthetic --profile --summary FILE` run; the warm-up steps are not",
             "counted; step times are rank 0's wall clock per optimizer step, median (min..max) over the",
             "measured steps. Throughput is tokens per step (global batch x sequence length) over the",
             "median step time. Model FLOPs count matrix products only (linear layers, attention scores",
             "and context, the MLM decoder over the labelled positions training computes), 3x the forward.",
             "The limits are measured in the same run, before and after the points (the higher value of",
             "the two is kept: a busy machine only lowers a limit): zerotrain's fp32 product (`zt_sgemm`: oneDNN's sgemm with AVX-512, else OpenBLAS's) at the model's GEMM shapes on the",
             "rank's threads (the ratio divides the rank's share of the model FLOP/s by it), copy and triad",
             "bandwidth (STREAM's convention) and `fio` (O_DIRECT, io_uring, 1 MiB blocks) on the offload",
             "path. \"NVMe B/s vs fio\" is a point's NVMe bytes read+written per second of step over fio's mean read/write bandwidth; \"vs no offload\" its step time over the same point without offload. \"optimizer vs",
             "copy\" is the AdamW kernel's bytes/s (28 bytes per parameter) over the copy bandwidth on the",
             "rank's threads. The PyTorch peer (`benchmarks/peers/torch_bert.py`) trains the same shapes, batch,",
             "sequence, AdamW and threads the way Hugging Face's BertForMaskedLM does, in the same run.", ""]
    for name in sweeps:
        res = json.load(open(os.path.join(RESULTS, name + ".json")))
        m = res["machine"]
        lines += ["## Sweep `%s`" % name, "",
                  "Machine: %s, %s cores, %.1f GiB; kernel %s; %s (commit %s); %s." % (
                      m.get("cpu"), m.get("cores"), m.get("memory_kib", 0) / 2**20, m.get("kernel"),
                      m.get("zerotrain"), m.get("commit"), m.get("date")),
                  "Packages: " + ", ".join("%s %s" % kv for kv in sorted(m.get("packages", {}).items())) + ".",
                  "Environment: " + (", ".join("%s=%s" % kv for kv in sorted(m.get("env", {}).items()))
                                    or "no BLAS-related variables set") + ".", ""]
        lines += ["### Limits", "", "| threads | sgemm GFLOP/s (model shapes) | copy GB/s | triad GB/s |",
                  "|---|---|---|---|"]
        for t, L in sorted(res["limits"].items(), key=lambda kv: int(kv[0])):
            sg = ", ".join("%s: %.1f" % (k, v / 1e9) for k, v in sorted(L.get("by_model", {}).items()))
            lines.append("| %s | %s | %.1f | %.1f |" % (t, sg, L["copy_bytes_per_s"] / 1e9,
                                                         L["triad_bytes_per_s"] / 1e9))
        fio = res.get("fio", {})
        if "skipped" in fio:
            lines += ["", "Disk: " + fio["skipped"] + "."]
        else:
            lines += ["", "Disk (`fio` on %s): write %.0f MB/s, read %.0f MB/s." % (
                fio.get("path"), fio.get("write_bytes_per_s", 0) / 1e6, fio.get("read_bytes_per_s", 0) / 1e6)]
            st = res.get("store", {})
            if st and "skipped" not in st:
                lines += ["", "Offload store (`build/bench_store`: 512 MiB as 16 MiB blobs, %s, "
                          "O_DIRECT %s, registered buffers %s, 1 MiB blocks, depth 8): write %.0f MB/s "
                          "(**%.2f** of fio), read %.0f MB/s (**%.2f** of fio)." % (
                              st["backend"], "on" if st["direct"] else "off",
                              "yes" if st["registered"] else "no",
                              st["write_bytes_per_s"] / 1e6,
                              st["write_bytes_per_s"] / max(fio.get("write_bytes_per_s", 1), 1),
                              st["read_bytes_per_s"] / 1e6,
                              st["read_bytes_per_s"] / max(fio.get("read_bytes_per_s", 1), 1))]
            elif st:
                lines += ["", "Offload store: " + st["skipped"] + "."]
        lines += ["", "### Points", "",
                  "| configuration | threads/rank | step s median (min..max) | tokens/s | model GFLOP/s | "
                  "vs sgemm | optimizer vs copy | vs stage 0 | peak RSS/rank MiB | RS+AG MB/step | "
                  "comm wait s/step | NVMe MB/step | NVMe B/s vs fio | I/O wait s/step | vs no offload | "
                  "vs PyTorch tokens/s | vs PyTorch RSS |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for p in res["points"]:
            s = p.get("summary") or {}
            if "skipped" in s:
                lines.append("| %s | skipped: %s |" % (p["label"], s["skipped"]))
                continue
            r = p.get("ratios", {})
            cb = s["comm_bytes_per_step"]
            lines.append("| %s | %d | %.3f (%.3f..%.3f) | %.0f | %.1f | %s | %s | %s | %.0f | %.1f | %.3f | %.1f | %s | %.3f | %s | %s | %s |" % (
                p["label"], p["threads"], s["step_median"], s["step_min"], s["step_max"],
                s["tokens_per_s"], s["model_flops_per_s"] / 1e9, fmt(r.get("vs_sgemm")),
                fmt(r.get("optimizer_vs_copy")), fmt(r.get("vs_stage0")),
                max(s["peak_rss_per_rank"]) / 2**20,
                (cb["reduce_scatter"] + cb["all_gather"]) / 1e6, s["comm_wait_s_per_step"],
                (s["nvme_read_bytes_per_step"] + s["nvme_write_bytes_per_step"]) / 1e6,
                fmt(r.get("nvme_vs_fio")), s.get("io_wait_s_per_step", 0.0),
                fmt(r.get("vs_no_offload"), "%.2fx"),
                fmt(r.get("vs_pytorch_tokens"), "%.2fx"), fmt(r.get("vs_pytorch_rss"), "%.2fx")))
        lim_pts = [p for p in res["points"] if p.get("memory_limit") and p.get("summary") and
                   "skipped" not in p["summary"]]
        if lim_pts:
            lines += ["", "### Under a memory limit (`zerotrain.memory_limit`: the engine plans "
                      "the placement)", "",
                      "| configuration | parameters | placement | step s median (min..max) | "
                      "tokens/s | I/O wait s/step | peak RSS/rank MiB | peak RSS / limit |",
                      "|---|---|---|---|---|---|---|---|"]
            for p in lim_pts:
                s = p["summary"]
                rss = max(s["peak_rss_per_rank"])
                lines.append("| %s | %.3f B | %s | %.2f (%.2f..%.2f) | %.1f | %.2f | %.0f | **%.2f** |" % (
                    p["label"], s["parameters"] / 1e9, s.get("offload"), s["step_median"],
                    s["step_min"], s["step_max"], s["tokens_per_s"],
                    s.get("io_wait_s_per_step", 0.0), rss / 2**20,
                    rss / parse_size(p["memory_limit"])))
        op_pts = [p for p in res["points"] if "vs_adamw" in p.get("ratios", {})]
        if op_pts:
            lines += ["", "### Optimizers (against the same point with AdamW)", "",
                      "State: the optimizer state a rank holds over the parameter floats it "
                      "updates. Optimizer s/step: the profile's optimizer row (the update "
                      "kernels) per measured step.", "",
                      "| configuration | state bytes/param | state vs AdamW | optimizer s/step | "
                      "optimizer time vs AdamW | step time vs AdamW | peak RSS vs AdamW |",
                      "|---|---|---|---|---|---|---|"]
            for p in op_pts:
                s, r = p["summary"], p["ratios"]
                opt = [x for x in s.get("profile", []) if x["kind"] == "optimizer"]
                lines.append("| %s | %s | %s | %s | **%s** | %s | %s |" % (
                    p["label"], fmt(s.get("optimizer_bytes_per_param")), fmt(r.get("state_vs_adamw")),
                    fmt(opt[0]["seconds"] / max(s["measured_steps"], 1) if opt else None),
                    fmt(r.get("optimizer_time_vs_adamw"), "%.2fx"), fmt(r.get("vs_adamw"), "%.2fx"),
                    fmt(r.get("rss_vs_adamw"), "%.2fx")))
        rc_pts = [p for p in res["points"] if "vs_no_recompute" in p.get("ratios", {})]
        if rc_pts:
            lines += ["", "### Recomputation (against the same point keeping every activation)", "",
                      "Activation peak: measured (the activations category's peak), and as the "
                      "engine predicted it before the first step (the carving the planner "
                      "uses). Saved vs none: the measured saving against the same point "
                      "keeping everything, and the per-layer formula's (docs/architecture.md "
                      "section 12; the auto plan has none).", "",
                      "| configuration | step s median | step time vs no recompute | activation "
                      "peak MiB | predicted MiB | activation peak vs no recompute | saved MiB "
                      "measured | saved MiB formula | measured / formula |",
                      "|---|---|---|---|---|---|---|---|---|"]
            base_act = {}
            for p in res["points"]:
                s = p.get("summary") or {}
                if "skipped" not in s and s and p["recompute"] in (False, None, "none"):
                    base_act[(p["model"], p["micro"], p["seq"])] = s["memory_peak"]["activations"]
            for p in rc_pts:
                s, r = p["summary"], p["ratios"]
                act = s.get("memory_peak", {}).get("activations", 0)
                b = base_act.get((p["model"], p["micro"], p["seq"]))
                saved = b - act if b else None
                form = saving_formula(p["model"], p["micro"], p["seq"], p["recompute"])
                lines.append("| %s | %.3f | **%.2fx** | %.0f | %s | %s | %s | %s | %s |" % (
                    p["label"], s["step_median"], r["vs_no_recompute"], act / 2**20,
                    fmt(s.get("activations_predicted", 0) / 2**20 or None, "%.0f"),
                    fmt(r.get("activations_vs_no_recompute"), "**%.3fx**"),
                    fmt(saved / 2**20 if saved is not None else None, "%.0f"),
                    fmt(form / 2**20 if form else None, "%.0f"),
                    fmt(saved / form if saved is not None and form else None, "%.3f")))
        peers = [p for p in res["points"] if p.get("peer_result")]
        if peers:
            lines += ["", "### PyTorch peer, side by side", "",
                      "| configuration | zerotrain tokens/s | PyTorch tokens/s | ratio | zerotrain peak RSS MiB | "
                      "PyTorch peak RSS MiB |", "|---|---|---|---|---|---|"]
            for p in peers:
                q, s = p["peer_result"], p["summary"]
                if "tokens_per_s" not in q:
                    lines.append("| %s | %.0f | %s | — | | |" % (p["label"], s["tokens_per_s"],
                                                             q.get("skipped", "failed")))
                    continue
                lines.append("| %s | %.0f | %.0f | %.2fx | %.0f | %.0f |" % (
                    p["label"], s["tokens_per_s"], q["tokens_per_s"], s["tokens_per_s"] / q["tokens_per_s"],
                    max(s["peak_rss_per_rank"]) / 2**20, max(q["peak_rss_per_rank"]) / 2**20))
            z1 = res.get("zero1_peer")
            if z1:
                lines += ["", "ZeRO-1 peer (torch ZeroRedundancyOptimizer + DDP over gloo): " +
                          (z1.get("skipped") or "%s, %d processes x %d threads: %.0f tokens/s, step %.3f s, "
                           "peak RSS per rank %.0f MiB." % (z1["preset"], z1["world_size"], z1["threads"],
                                                            z1["tokens_per_s"], z1["step_median"],
                                                            max(z1["peak_rss_per_rank"]) / 2**20))]
        lines += ["", "### Profile (rank 0, share of the median step)", ""]
        for p in res["points"]:
            s = p.get("summary") or {}
            if not s.get("profile"):
                continue
            n = s["measured_steps"] or 1
            tot = sum(x["seconds"] for x in s["profile"]) / n
            top = sorted(s["profile"], key=lambda x: -x["seconds"])[:4]
            lines.append("- %s: " % p["label"] + ", ".join(
                "%s %.0f%%" % (x["kind"], 100 * x["seconds"] / n / s["step_median"]) for x in top) +
                ", not in a kernel %.0f%%" % max(0, 100 * (1 - tot / s["step_median"])))
        for png in res.get("plots", []):
            lines += ["", "![%s](results/%s)" % (png[:-4], png)]
        lines.append("")
    reporters = {"finetune": report_finetune, "predict-memory": report_predict_memory,
                 "precision": report_precision}
    for name in extra:  # benchmarks/bench_finetune.sh, bench_predict_memory.sh, bench_precision.py
        res = json.load(open(os.path.join(RESULTS, name + ".json")))
        if res["kind"] not in reporters:  # (reported elsewhere, e.g. generate.json: README)
            continue
        lines += reporters[res["kind"]](res)
    open(os.path.join(ROOT, "benchmarks", "RESULTS.md"), "w").write("\n".join(lines))


def machine_line(m):
    flags = m.get("flags", {})
    return ["Machine: %s, %s cores, %.1f GiB; kernel %s; %s (commit %s); %s." % (
                m.get("cpu"), m.get("cores"), m.get("memory_kib", 0) / 2**20, m.get("kernel"),
                m.get("zerotrain"), m.get("commit"), m.get("date")),
            "CPU flags: " + ", ".join("%s %s" % (k, "yes" if v else "no") for k, v in flags.items()) +
            "; OpenBLAS core %s." % m.get("openblas_core", "unknown"),
            "Packages: " + ", ".join("%s %s" % kv for kv in sorted(m.get("packages", {}).items())) + ".",
            "Environment: " + (", ".join("%s=%s" % kv for kv in sorted(m.get("env", {}).items()))
                               or "no BLAS-related variables set (OPENBLAS_CORETYPE, OPENBLAS_L2_SIZE unset)")
            + ".", ""]


def report_precision(res):
    """a section from benchmarks/bench_precision.py's results/precision.json"""
    s, MiB = res["setup"], 2.0 ** 20
    out = ["## Mixed precision: bf16 and fp16 against fp32 (`precision`)", ""]
    out += machine_line(res["machine"])
    out += ["Made by `benchmarks/bench_precision.py`: `zerotrain train --model %s --data synthetic "
            "--seq-len %d --steps %d --warmup %d --threads %d`, micro-batch %d, stage %d, one rank; "
            "fp32, bf16 and fp16 (`\"bf16\"` / `\"fp16\": {\"enabled\": true}`, DeepSpeed's defaults: "
            "fp32 gradients with bf16, fp16 gradients and dynamic loss scaling with fp16) "
            "interleaved round by round; the step time is each run's median measured step, the "
            "ratio the median over the rounds of each round's ratio. bf16 products: %s; fp16's "
            "are widened into OpenBLAS's sgemm." % (
                s["model"], s["seq"], s["steps"], s["warmup"], s["threads"], s["micro_batch"],
                s["stage"], res.get("bf16_products")), ""]
    for key, rkey, what in (("summary", "rounds", "the environment above"),
                            ("summary_unset", "rounds_unset",
                             "OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset")):
        if key not in res:
            continue
        sm, rs = res[key], res[rkey]
        out += ["With %s, %d rounds:" % (what, len(rs)), "",
                "| round | fp32 step s | bf16 step s | fp16 step s | bf16 / fp32 | fp16 / fp32 |",
                "|---|---|---|---|---|---|"]
        for i, r in enumerate(rs):
            out.append("| %d | %.3f | %.3f | %.3f | %.3fx | %.3fx |" % (
                i + 1, r["fp32"]["step_median"], r["bf16"]["step_median"],
                r["fp16"]["step_median"], r["bf16"]["step_median"] / r["fp32"]["step_median"],
                r["fp16"]["step_median"] / r["fp32"]["step_median"]))
        out.append("| **median** | %.3f | %.3f | %.3f | **%.3fx** | **%.3fx** |" % (
            sm["step_median"]["fp32"], sm["step_median"]["bf16"], sm["step_median"]["fp16"],
            sm["step_ratio_median_of_rounds"]["bf16"], sm["step_ratio_median_of_rounds"]["fp16"]))
        out += ["", "Activation peak: fp32 %.1f MiB, bf16 %.1f MiB (%.3fx), fp16 %.1f MiB (%.3fx)." % (
            sm["activations_peak"]["fp32"] / MiB, sm["activations_peak"]["bf16"] / MiB,
            sm["activations_ratio"]["bf16"], sm["activations_peak"]["fp16"] / MiB,
            sm["activations_ratio"]["fp16"]), ""]
    t = res["traffic"]
    out += ["Counts per step (bert-base, sequence 128, micro-batch 1; one run each): stage 3 at "
            "N = 2, all-gathered bytes fp32 %d, bf16 %d (%.3fx), fp16 %d (%.3fx); reduce-scattered "
            "fp32 %d, bf16 %d (%.3fx: DeepSpeed's default reduces bf16's gradients in fp32), fp16 %d "
            "(%.3fx: fp16 gradients reduced in fp16). Stage 3 on one rank with "
            "the parameters on NVMe: read fp32 %d, bf16 %d (%.3fx); written fp32 %d, bf16 %d "
            "(%.3fx)." % (
                t["fp32"]["all_gather"], t["bf16"]["all_gather"],
                t["bf16"]["all_gather"] / t["fp32"]["all_gather"], t["fp16"]["all_gather"],
                t["fp16"]["all_gather"] / t["fp32"]["all_gather"], t["fp32"]["reduce_scatter"],
                t["bf16"]["reduce_scatter"],
                t["bf16"]["reduce_scatter"] / max(t["fp32"]["reduce_scatter"], 1),
                t["fp16"]["reduce_scatter"],
                t["fp16"]["reduce_scatter"] / max(t["fp32"]["reduce_scatter"], 1), t["fp32"]["nvme_read"],
                t["bf16"]["nvme_read"], t["bf16"]["nvme_read"] / max(t["fp32"]["nvme_read"], 1),
                t["fp32"]["nvme_write"], t["bf16"]["nvme_write"],
                t["bf16"]["nvme_write"] / max(t["fp32"]["nvme_write"], 1)), ""]
    return out


def report_finetune(res):
    """a section from benchmarks/bench_finetune.sh's results/<name>.json"""
    s, A, B = res["setup"], res["zerotrain"], res["pytorch"]
    out = ["## Fine-tuning: `zerotrain finetune --task classify` against PyTorch (`%s`)" % res["name"], ""]
    out += machine_line(res["machine"])
    if res.get("precision", "fp32") != "fp32":
        out += ["Precision: %s on both sides -- A with DeepSpeed's `\"bf16\": {\"enabled\": true}` in "
                "ds.json (bf16 weights and activations, fp32 master weights and moments), B with "
                "`torch.autocast(\"cpu\", torch.bfloat16)` around the forward, as the HF Trainer's "
                "`--bf16` runs on a CPU (fp32 weights). The parity run below is fp32's." % res["precision"], ""]
    out += ["Made by `benchmarks/bench_finetune.sh` (A: `zerotrain finetune --model %s --task classify "
            "--train train.jsonl --tokenizer wordpiece:vocab.txt --config ds.json --steps %d --warmup %d "
            "--seq-len %d --threads %d --metrics FILE`; B: `benchmarks/finetune_torch.py train`, Hugging "
            "Face's BertForSequenceClassification written in plain torch %s). %s L%d H%d A%d, "
            "vocabulary %d, %d labels, %d training rows (examples/pydoc-topics), micro-batch %d padded to "
            "its longest row, at most %d tokens, AdamW lr %g weight decay %g (not on biases and "
            "LayerNorm), clipping %g, dropout %g, %d threads, one process. Both see the same "
            "token ids (the peer's tokenizer against `zerotrain prepare-data`'s ids of every row: %s, "
            "%d ids), rows in the same order, the same padded shapes and real tokens per step. "
            "Tokens/s: the real (unpadded) tokens of the steps after the %d warm-up steps over their "
            "seconds, per run; A and B interleaved, A B A B ..., %d pairs. A run is noisy when other "
            "processes took more than %.0f%% of the machine's CPU time while it ran (/proc/stat's busy "
            "time minus the run's own user + sys); the medians are over the clean pairs, and beside "
            "them over every pair." % (
                s["model"], res["steps"], res["warmup_steps"], s["seq"], s["threads"], s["torch"],
                s["model"], s["layers"], s["hidden"], s["heads"], s["vocab"], s["num_labels"], s["rows"],
                s["batch"], s["seq"], s["lr"], s["weight_decay"], s["clip"], s["dropout"], s["threads"],
                "identical" if res["tokens"]["identical"] else "DIFFERENT", res["tokens"]["ids_python"],
                res["warmup_steps"], res["runs"], 100 * res.get("noise_limit", 0.02)), ""]
    tps = res["tokens_per_step"][res["warmup_steps"]:]
    out += ["Real tokens per measured step: %d..%d (mean %.0f) of %d padded cells." % (
        min(tps), max(tps), sum(tps) / len(tps), s["batch"] * s["seq"]), ""]
    if res.get("parity"):
        p = res["parity"]
        out += ["Parity (one zerotrain-initialised folder loaded by both, dropout 0): losses " +
                ", ".join("%.7f / %.7f" % (x["loss_zerotrain"], x["loss_pytorch"]) for x in p) +
                " (steps 1-%d, zerotrain / PyTorch; worst relative difference %.1e), gradient norms "
                "within %.1e relative." % (len(p), max(abs(x["loss_zerotrain"] - x["loss_pytorch"]) /
                                                      abs(x["loss_pytorch"]) for x in p),
                                          max(abs(x["grad_norm_zerotrain"] - x["grad_norm_pytorch"]) /
                                              x["grad_norm_pytorch"] for x in p)), ""]
    out += ["| run | zerotrain tokens/s | step s median | PyTorch tokens/s | step s median | zerotrain / "
            "PyTorch | zerotrain peak RSS MiB | PyTorch peak RSS MiB | wall s (A, B) | other processes' CPU s "
            "during the run (A, B) | steal s (A, B) |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for a, b, r in zip(A, B, res["pair_ratios"]):
        out.append("| %d%s | %.0f | %.3f | %.0f | %.3f | %.2fx | %.0f | %.0f | %.1f, %.1f | %.1f, %.1f | %.1f, %.1f |" % (
            a["run"], "" if a.get("clean_pair", True) else " (noisy)", a["tokens_per_s"], a["step_median"],
            b["tokens_per_s"], b["step_median"], r, a["max_rss"] / 2**20, b["max_rss"] / 2**20, a["wall"],
            b["wall"], a["others_cpu_seconds"], b["others_cpu_seconds"], a["steal_seconds"], b["steal_seconds"]))
    for tag, what in (("", "clean pairs"), ("_all", "every pair")):
        if "pairs" + tag not in res:
            continue
        keep = [(a, b) for a, b in zip(A, B) if tag or a.get("clean_pair", True)]
        out.append("| **median, %d %s** | **%.0f** | %.3f | **%.0f** | %.3f | **%.2fx** (of the medians; "
                   "median pair %.2fx) | %.0f | %.0f | | | |" % (
                       res["pairs" + tag], what, res["median_zerotrain" + tag],
                       median([a["step_median"] for a, _ in keep]), res["median_pytorch" + tag],
                       median([b["step_median"] for _, b in keep]), res["ratio_of_medians" + tag],
                       res["median_pair_ratio" + tag], median([a["max_rss"] for a, _ in keep]) / 2**20,
                       median([b["max_rss"] for _, b in keep]) / 2**20))
    if "gemm_floor_seconds" in res:
        bs = median([b["step_median"] for a, b in zip(A, B) if a.get("clean_pair", True)])
        out += ["", "GEMM floor: zerotrain's fp32 product (`zt_sgemm`) at the model's shapes (%s, M x K x N) on %d threads runs at "
                "%.0f GFLOP/s (build/bench_limits, before and after the pairs, the higher kept); zerotrain's "
                "matrix products are %.1f GFLOP a step (its profile's count, on the padded shapes), %.3f s at "
                "that rate: were a zerotrain step its GEMMs alone at that rate, it would train %.2fx as many tokens/s "
                "as PyTorch (PyTorch's median step over that floor)." % (
                    ", ".join("%dx%dx%d" % tuple(x) for x in res["sgemm_shapes"]), s["threads"],
                    res["sgemm_flops_per_s"] / 1e9, res["gemm_gflop_per_step"], res["gemm_floor_seconds"],
                    bs / res["gemm_floor_seconds"])]
    pz, pp = res.get("profile_zerotrain"), res.get("profile_pytorch")
    if pz:
        out += ["", "Where zerotrain's step goes (`--profile`, a separate run, %d measured steps, %.3f s a "
                "step): " % (pz["steps"], pz["seconds"] / pz["steps"]) +
                ", ".join("%s %.0f%%%s" % (r["kind"], 100 * r["share"],
                                           " at %.0f GFLOP/s" % r["gflop_per_s"] if r["kind"] == "GEMM"
                                           and r.get("gflop_per_s") else "")
                          for r in pz["rows"] if r["share"] >= 0.01) + "."]
    if pp and pp.get("rows"):
        out += ["", "Where PyTorch's goes (torch.autograd.profiler, self CPU time, a separate run, %.3f s a "
                "step under the profiler): " % (pp["seconds"] / pp["steps"]) +
                ", ".join("%s %.0f%%" % (r["op"], 100 * r["self_share"]) for r in pp["rows"]
                          if r["self_share"] >= 0.01) + "."]
    for note in res.get("notes", []):
        out += ["", note]
    return out + [""]


def report_predict_memory(res):
    """a section from benchmarks/bench_predict_memory.sh's results/predict-memory.json"""
    out = ["## Forward only: peak RSS of `zerotrain predict --task classify` against `zerotrain finetune`", ""]
    out += machine_line(res["machine"])
    s = res["setup"]
    out += ["Made by `benchmarks/bench_predict_memory.sh`: a %s classifier (%d parameters, vocabulary %d, "
            "%d labels, random initialisation: `zerotrain finetune --model %s --steps 1 --save-model DIR`, "
            "vocab.txt copied in), micro-batch %d, --seq-len %d. predict labels the first %d rows of "
            "eval.jsonl; finetune trains %d steps on train.jsonl; both from the folder, with the same "
            "config. Peak RSS per rank: `/usr/bin/time -v` around each rank (Maximum resident set size), "
            "and for finetune also its own figure (--summary's peak_rss_per_rank; rank 0 prints it)." % (
                s["model"], s["parameters"], s["vocab"], s["num_labels"], s["model"], s["batch"], s["seq"],
                s["rows"], s["steps"]), ""]
    out += ["| configuration | command | run | peak RSS per rank MiB (time -v) | finetune's own MiB | wall s |",
            "|---|---|---|---|---|---|"]
    for c in res["configs"]:
        for cmd in ("predict", "finetune"):
            for r in c[cmd]:
                out.append("| %s | %s | %d | %s | %s | %.1f |" % (
                    c["label"], cmd, r["run"], ", ".join("%.0f" % (x / 2**20) for x in r["time_v_rss"]),
                    ", ".join("%.0f" % (x / 2**20) for x in r.get("own_rss", [])) or "—", r["wall"]))
    out += ["", "| configuration | predict peak RSS/rank MiB (median) | finetune peak RSS/rank MiB (median) | "
            "predict / finetune |", "|---|---|---|---|"]
    for c in res["configs"]:
        p, f = c["predict_median"], c["finetune_median"]
        out.append("| %s | %s | %s | %s |" % (
            c["label"], ", ".join("%.0f" % (x / 2**20) for x in p), ", ".join("%.0f" % (x / 2**20) for x in f),
            ", ".join("**%.3f**" % (x / y) for x, y in zip(p, f))))
    for note in res.get("notes", []):
        out += ["", note]
    return out + [""]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sweep", nargs="?")
    ap.add_argument("--zt", default=os.path.join(ROOT, "build", "zerotrain"))
    ap.add_argument("--limits", default=os.path.join(ROOT, "build", "bench_limits"))
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--markdown-only", action="store_true",
                    help="RESULTS.md from the JSON files, the plots as they are")
    ap.add_argument("--list", action="store_true", help="print the sweep's points and exit")
    a = ap.parse_args()
    if a.list:
        if not a.sweep:
            ap.error("give a sweep file")
        sweep = json.load(open(a.sweep))
        pts = list(expand(sweep))
        for p in pts:
            if p["offload"] not in OFFLOADS:
                raise SystemExit("point %s: offload must be one of %s" % (p["label"],
                                                                         ", ".join(OFFLOADS)))
            print("%-48s threads/rank %d, seq %d, steps %d (warm-up %d)%s" % (
                p["label"], p["threads"], p["seq"], p["steps"], p["warmup"],
                ", with the PyTorch peer" if p["peer"] else ""))
        print("%d points%s" % (len(pts), ", and the ZeRO-1 peer" if sweep.get("zero1_peer") else ""))
        return
    os.makedirs(RESULTS, exist_ok=True)
    if a.markdown_only:
        report()
        return
    if a.report_only:
        for f in sorted(os.listdir(RESULTS)):
            if f.endswith(".json"):
                res = json.load(open(os.path.join(RESULTS, f)))
                if res.get("kind", "sweep") != "sweep":
                    continue
                with tempfile.TemporaryDirectory(prefix="zt-bench-") as tmp:
                    res["plots"] = plots(res, res["sweep"], tmp)
                json.dump(res, open(os.path.join(RESULTS, f), "w"), indent=1)
        report()
        return
    if not a.sweep:
        ap.error("give a sweep file (benchmarks/sweeps/quick.json)")
    sweep = json.load(open(a.sweep))
    name = sweep["name"]
    points = list(expand(sweep))
    res = {"sweep": name, "machine": machine_facts(a.zt), "limits": {}, "points": []}
    log("sweep %s: %d points" % (name, len(points)))
    with tempfile.TemporaryDirectory(prefix="zt-bench-") as tmp:
        # limits: sgemm at each model's shapes on each thread count the points use, measured
        # before and again after the points; a busy machine only lowers a limit, so the
        # higher of the two is kept
        res["limits"] = measure_limits(a.limits, points)
        res["fio"] = run_fio(sweep.get("offload_path", "/var/tmp"))
        if "skipped" not in res["fio"]:
            res["store"] = run_store(sweep.get("offload_path", "/var/tmp"))
        for i, p in enumerate(points):
            log("[%d/%d] %s" % (i + 1, len(points), p["label"]))
            p = dict(p)
            p["summary"] = run_point(a.zt, p, tmp, sweep.get("offload_path", "/var/tmp"))
            if p.pop("peer") and "skipped" not in p["summary"]:
                p["peer_result"] = run_peer(p)
                log("   zerotrain %.0f tokens/s, PyTorch %s" % (
                    p["summary"]["tokens_per_s"], p["peer_result"].get("tokens_per_s",
                                                                       p["peer_result"].get("skipped"))))
            res["points"].append(p)
        again = measure_limits(a.limits, points)
        for t, L in res["limits"].items():
            M = again[t]
            for k in ("copy_bytes_per_s", "triad_bytes_per_s", "sgemm_flops_per_s"):
                if k in L and k in M:
                    L[k] = max(L[k], M[k])
            for k, v in M["by_model"].items():
                L["by_model"][k] = max(L["by_model"].get(k, 0), v)
        z = sweep.get("zero1_peer")
        if z:
            res["zero1_peer"] = run_peer(dict(z, threads=z.get("threads", 1), warmup=z.get("warmup", 1)),
                                         zero1=z.get("world", 2))
        analyse(res)
        res["plots"] = []
        json.dump(res, open(os.path.join(RESULTS, name + ".json"), "w"), indent=1)
        write_csv(res, name)
        res["plots"] = plots(res, name, tmp)
        json.dump(res, open(os.path.join(RESULTS, name + ".json"), "w"), indent=1)
    report()
    log("wrote benchmarks/results/%s.json, .csv, PNGs and benchmarks/RESULTS.md" % name)


if __name__ == "__main__":
    main()
