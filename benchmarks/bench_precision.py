#!/usr/bin/python3
"""bench_precision.py - bf16 and fp16 against fp32 on the same machine, in one run:

  - bert-base, sequence 512, micro-batch 1, stage 0, one rank of THREADS threads (2): the
    activation peak (the memory report's `activations CUR/PEAK`, --summary's memory_peak) and
    the step time (median of the measured steps), fp32, bf16 and fp16 interleaved round by
    round (PAIRS rounds); the ratio per round, and its median. When OPENBLAS_CORETYPE or
    OPENBLAS_L2_SIZE are set, the rounds are repeated with both unset (UNSET_PAIRS rounds);
  - the bytes all-gathered per step at stage 3 (bert-base, sequence 128, 2 ranks x 1
    thread) and the NVMe bytes per step with the parameters offloaded (stage 3, one rank):
    counts, not timings, one run each.

The machine (CPU model and flags, BLAS environment, packages) and the bf16 product path
(`build/bench_hgemm`'s line) are recorded. Writes benchmarks/results/precision.json and
regenerates benchmarks/RESULTS.md.

    benchmarks/bench_precision.py [build/zerotrain]     (PAIRS, UNSET_PAIRS, THREADS, STEPS)"""
import json, os, re, statistics, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as harness  # noqa: E402

ZT = sys.argv[1] if len(sys.argv) > 1 else "build/zerotrain"
PAIRS = int(os.environ.get("PAIRS", "5"))
UNSET_PAIRS = int(os.environ.get("UNSET_PAIRS", "3"))
THREADS = int(os.environ.get("THREADS", "2"))
STEPS = int(os.environ.get("STEPS", "5"))  # (the first is a warm-up step)
PREC = ("fp32", "bf16", "fp16")
MPI = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]
T = tempfile.mkdtemp(prefix="zt_prec.")


def config(prec, stage, np_, extra=None):
    c = {"train_batch_size": np_, "train_micro_batch_size_per_gpu": 1,
         "zero_optimization": dict({"stage": stage}, **(extra or {}))}
    if prec != "fp32":
        c[prec] = {"enabled": True}
    return c


def train(name, prec, stage, seq, steps, np_=1, threads=THREADS, extra=None, env=None):
    cfg = os.path.join(T, name + ".json")
    json.dump(config(prec, stage, np_, extra), open(cfg, "w"))
    summ = os.path.join(T, name + ".sum.json")
    cmd = [ZT, "train", "--model", "bert-base", "--data", "synthetic", "--config", cfg,
           "--seq-len", str(seq), "--steps", str(steps), "--warmup", "1", "--threads",
           str(threads), "--seed", "7", "--summary", summ]
    if np_ > 1:
        cmd = MPI + ["-np", str(np_)] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit("%s failed:\n%s" % (" ".join(cmd), r.stderr[-2000:]))
    s = json.load(open(summ))
    act = re.findall(r"activations [\d.]+/([\d.]+)", r.stderr)
    s["report_activations_mib"] = float(act[-1]) if act else None
    return s


def rounds(n, env, tag):
    out = []
    for i in range(n):
        row = {}
        for p in PREC:
            s = train("%s-%d-%s" % (tag, i, p), p, 0, 512, STEPS, env=env)
            row[p] = {"step_median": s["step_median"], "step_seconds": s["step_seconds"],
                      "activations_peak": s["memory_peak"]["activations"],
                      "report_activations_mib": s["report_activations_mib"],
                      "peak_rss": s["peak_rss_per_rank"][0]}
            harness.log("%s round %d %s: step %.3f s, activations %.1f MiB" % (
                tag, i + 1, p, s["step_median"], s["memory_peak"]["activations"] / 2**20))
        out.append(row)
    return out


def summary(rs):
    med = {p: statistics.median(r[p]["step_median"] for r in rs) for p in PREC}
    ratio = {p: statistics.median(r[p]["step_median"] / r["fp32"]["step_median"] for r in rs)
             for p in PREC[1:]}
    act = {p: rs[0][p]["activations_peak"] for p in PREC}
    return {"step_median": med, "step_ratio_median_of_rounds": ratio,
            "activations_peak": act,
            "activations_ratio": {p: act[p] / act["fp32"] for p in PREC[1:]}}


def main():
    m = harness.machine_facts(ZT)
    flags = open("/proc/cpuinfo").read().split("flags\t\t: ", 1)[1].split("\n", 1)[0].split()
    m["flags"] = {f: f in flags for f in ("avx2", "fma", "f16c", "avx512f", "avx512_bf16",
                                          "amx_bf16")}
    hb = subprocess.run([os.path.join(os.path.dirname(ZT), "bench_hgemm"), "1", "1"],
                        capture_output=True, text=True).stdout
    path = re.search(r"default bf16 path: (.*)", hb)
    res = {"kind": "precision", "machine": m, "bf16_products": path.group(1) if path else None,
           "setup": {"model": "bert-base", "seq": 512, "micro_batch": 1, "stage": 0,
                     "threads": THREADS, "steps": STEPS, "warmup": 1, "pairs": PAIRS}}
    res["rounds"] = rounds(PAIRS, None, "env")
    res["summary"] = summary(res["rounds"])
    if UNSET_PAIRS > 0 and any(k in os.environ for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")):
        env = {k: v for k, v in os.environ.items()
               if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
        res["rounds_unset"] = rounds(UNSET_PAIRS, env, "unset")
        res["summary_unset"] = summary(res["rounds_unset"])
    # counts: stage 3's all-gathers at N = 2, parameter offload's NVMe bytes
    res["traffic"] = {}
    nv = os.path.join(T, "nvme")
    os.makedirs(nv, exist_ok=True)
    for p in PREC:
        s3 = train("ag-" + p, p, 3, 128, 3, np_=2, threads=1)
        off = train("nv-" + p, p, 3, 128, 3, extra={
            "stage3_param_persistence_threshold": 0,
            "offload_param": {"device": "nvme", "nvme_path": nv, "buffer_count": 4}})
        res["traffic"][p] = {"all_gather": s3["comm_bytes_per_step"]["all_gather"],
                             "reduce_scatter": s3["comm_bytes_per_step"]["reduce_scatter"],
                             "nvme_read": off["nvme_read_bytes_per_step"],
                             "nvme_write": off["nvme_write_bytes_per_step"]}
        harness.log("traffic %s: %s" % (p, res["traffic"][p]))
    json.dump(res, open(os.path.join(harness.RESULTS, "precision.json"), "w"), indent=1)
    for line in harness.report_precision(res):
        print(line)
    harness.report()


if __name__ == "__main__":
    main()
