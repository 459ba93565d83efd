"""The Python binding's refusals and edge cases, one check each (every misuse must raise
zerotrain.Error naming what is wrong, and a refused call must leave the engine as it was):

  shape      a gradient of another shape than its parameter (a (1,) one for a (4, 3)
             parameter would broadcast to all 12 elements) is refused
  single     one small parameter alone (1 and 12 elements) trains at every ZeRO stage
  closed     Views of unit buffers raise after Engine.close() (read, write, np.asarray), and
             so does every engine call
  negstep    save(step=-5) is refused and creates nothing; so is zt_checkpoint_save itself
             (the C API, called directly) with a negative step
  lr         step(lr=inf / nan / -1 / 1e39 / "x") is refused before anything changes: the
             next valid step gives the bits of an optimizer that never saw the refused call;
             Adafactor's default lr None means no lr (relative steps), an lr with them is
             refused
  negzero    a -0 gradient reaches the engine as -0 (the bits of its gradient buffer when
             the unit's gradients are made ready), +0 as +0
  estimate   estimate_memory gives Table 1 of the ZeRO paper and bert-tiny's 16 bytes per
             parameter in fp32, and refuses a missing, doubled or misnamed setting
  bf16       a parameter trained in bf16 stays bf16 values while its fp32 master moves;
             save_model writes BF16, or the master with dtype="fp32"
  fp16       fp16 with the dynamic loss scale: a gradient that overflows fp16 once scaled
             skips the step (the weights unchanged, overflow reported) and halves the scale
             after DeepSpeed's hysteresis of 2; then the weights stay fp16 values while the
             fp32 master moves; save_model writes F16, or the master with dtype="fp32"
  lamb       optimizer="lamb" with FusedLamb's keywords (max_coeff, min_coeff,
             bias_correction) at ZeRO stage 2, three steps on two tensors, equals DeepSpeed's
             FusedLamb (tests/ref/lamb_ref.py); the clamp upside down is refused
  heap       the report names its heap statistics' source: "none" in this process (no
             jemalloc), "jemalloc" with --expect-heap jemalloc (started with it preloaded)

    test_binding.py [--only NAME,...] [--expect-heap none|jemalloc]

Under mpirun -np N the same checks run on every rank (single: sharded over N ranks, N = 3
gives uneven shards). Prints "ok: NAME ..." per check, exits 1 on the first failure."""
import math
import os
import shutil
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "python"))
import numpy as np
import zerotrain as zt

RANK = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))


def say(msg):
    if RANK == 0:
        print(msg, flush=True)


def fail(name, msg):
    print("FAIL: %s: %s (rank %d)" % (name, msg, RANK), flush=True)
    sys.exit(1)


def raises(name, what, fn, *words):
    """fn() must raise zt.Error whose message holds every word."""
    try:
        fn()
    except zt.Error as e:
        m = str(e)
        if not all(w in m for w in words):
            fail(name, "%s: the message %r does not name %s" % (what, m, words))
        return m
    fail(name, "%s: accepted" % what)


def check_shape():
    p = [np.ones((4, 3), np.float32)]
    opt = zt.Optimizer(p, lr=0.1, names=["w"], threads=1)
    raises("shape", "a (1,) gradient for a (4, 3) parameter",
           lambda: opt.step([np.ones(1, np.float32)]), "w", "(1,)", "(4, 3)")
    raises("shape", "a (3, 4) gradient", lambda: opt.step([np.ones((3, 4), np.float32)]),
           "(3, 4)", "(4, 3)")
    raises("shape", "a (12,) gradient", lambda: opt.step([np.ones(12, np.float32)]), "(12,)")
    raises("shape", "two gradients for one parameter",
           lambda: opt.step([np.ones((4, 3), np.float32)] * 2), "2 gradients", "1 parameter")
    if not np.all(p[0] == 1.0):
        fail("shape", "a refused step changed the parameters")
    opt.step([np.ones((4, 3), np.float32)])
    if not np.all(p[0] < 1.0):
        fail("shape", "a valid step did not update every element")
    opt.close()
    say("ok: shape: gradients of another shape refused, naming both shapes")


def check_single():
    for stage in (0, 1, 2, 3):
        for shape in ((1,), (4, 3)):
            p = [np.full(shape, 2.0, np.float32)]
            opt = zt.Optimizer(p, lr=0.1, weight_decay=0.0, zero_stage=stage, threads=1)
            for _ in range(3):  # the loss 0.5 p^2 summed over the ranks: gradient p / N
                opt.step([p[0] / opt.engine.size])
            opt.close()
            if not np.all((p[0] < 1.8) & (p[0] > 1.6)):  # Adam: about lr per step
                fail("single", "stage %d shape %s: %s" % (stage, shape, p[0].ravel()[:3]))
    say("ok: single: one parameter of 1 and 12 elements trains at stages 0-3")


def check_closed():
    e = zt.Engine(threads=1)
    e.add_unit("u", [("w", np.arange(12, dtype=np.float32).reshape(4, 3))])
    e.commit()
    p, _ = e.acquire(0, zt.FOR_FORWARD)
    w = e.param(p, "w")
    before = np.asarray(w)
    w[0, 0] = 7.0  # writes through to the engine while open
    if p[0] != 7.0 or before[0, 0] != 0.0 or w.shape != (4, 3):
        fail("closed", "a View while open: %s %s" % (p[0], before[0, 0]))
    e.release(0)
    e.close()
    raises("closed", "reading a View after close", lambda: p[0], "close")
    raises("closed", "reading a parameter View after close", lambda: w[1:], "parameter w")
    raises("closed", "np.asarray of a View after close", lambda: np.asarray(w), "close")
    raises("closed", "writing a View after close", lambda: w.__setitem__(0, 1.0), "close")
    raises("closed", "numpy() after close", lambda: p.numpy(), "close")
    raises("closed", "acquire after close", lambda: e.acquire(0, zt.FOR_FORWARD), "closed")
    raises("closed", "step after close", lambda: e.step(0.1), "closed")
    raises("closed", "report after close", lambda: e.report(), "closed")
    say("ok: closed: Views and engine calls raise after close (%r)" % w)


def check_negstep():
    d = tempfile.mkdtemp(prefix="zt_binding.") if RANK == 0 else None
    if int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1")) > 1:  # one folder for all ranks
        from mpi4py import MPI
        d = MPI.COMM_WORLD.bcast(d)
    p = [np.ones(5, np.float32)]
    opt = zt.Optimizer(p, lr=0.1, threads=1)
    opt.step([np.ones(5, np.float32)])
    for bad in (-5, -1, 2.5, True, "3"):
        raises("negstep", "save(step=%r)" % (bad,), lambda: opt.save(d, bad), "step")
    raises("negstep", "save(keep=-1)", lambda: opt.save(d, 1, keep=-1), "keep")
    # the C API: zt_checkpoint_save with a negative step (the binding's check bypassed)
    st = zt._TrainState(-5, 0, 0)
    L = zt._lib
    rc = L.zt_checkpoint_save(opt.engine._handle(), d.encode(), st, None, 0)
    msg = L.zt_engine_last_error(opt.engine._handle()).decode()
    if rc >= 0 or "negative" not in msg or "-5" not in msg:
        fail("negstep", "zt_checkpoint_save(step -5): rc %d, %r" % (rc, msg))
    left = sorted(os.listdir(d)) if RANK == 0 else []  # (rank 0 creates the folders)
    if left:
        fail("negstep", "refused saves left %s in %s" % (left, d))
    opt.save(d, 0)  # step 0 is a step
    if RANK == 0 and sorted(os.listdir(d)) != ["step-0"]:
        fail("negstep", "save(step=0) gave %s" % os.listdir(d))
    opt.close()
    if RANK == 0:
        shutil.rmtree(d)
    say("ok: negstep: negative, fractional and boolean steps refused by the binding, a "
        "negative one by zt_checkpoint_save (%s); nothing created" % msg)


def check_lr():
    for stage in (0, 2):
        p, q = [np.ones(6, np.float32)], [np.ones(6, np.float32)]
        opt = zt.Optimizer(p, lr=0.1, zero_stage=stage, threads=1)
        ref = zt.Optimizer(q, lr=0.1, zero_stage=stage, threads=1)
        g = [np.linspace(-1, 1, 6).astype(np.float32)]
        for bad in (math.inf, -math.inf, math.nan, -1.0, 1e39, "x", True):
            raises("lr", "step(lr=%r)" % (bad,), lambda: opt.step(g, lr=bad), "learning rate")
        raises("lr", "Engine.step(inf)", lambda: opt.engine.step(math.inf), "learning rate")
        raises("lr", "Optimizer(lr=nan)", lambda: zt.Optimizer([np.ones(2, np.float32)],
                                                               lr=math.nan), "learning rate")
        opt.step(g)
        ref.step(g)
        if not np.array_equal(p[0], q[0]) or np.array_equal(p[0], np.ones(6, np.float32)):
            fail("lr", "stage %d: refused steps changed something: %s vs %s" % (stage, p[0],
                                                                                 q[0]))
        opt.close()
        ref.close()
    # Adafactor as transformers' Adafactor: lr None (the default) is no lr, its relative
    # step size min(1e-2, 1/sqrt(1)) = 1e-2 at step 1 (scaled by the parameter's RMS, 1 here,
    # times the clipped update, whose RMS is 1 for a constant gradient: 1 - 1e-2 in real
    # arithmetic, with no weight decay, Adafactor's default); an lr with relative steps is
    # refused as transformers refuses it
    p = [np.ones((4, 6, 5), np.float32)]
    af = zt.Optimizer(p, optimizer="adafactor", threads=1)
    af.step([np.full((4, 6, 5), 0.5, np.float32)])
    if af.lr != 0.0 or not np.allclose(p[0], 0.99, rtol=0, atol=1e-6):
        fail("lr", "Adafactor with lr None: lr %r, parameters %s" % (af.lr, p[0].ravel()[:3]))
    af.close()
    raises("lr", "Adafactor(lr=1e-3) with relative steps",
           lambda: zt.Optimizer([np.ones(3, np.float32)], optimizer="adafactor", lr=1e-3),
           "relative_step", "manual lr")
    say("ok: lr: non-finite, negative, overflowing and non-numeric learning rates refused, "
        "the engine unchanged; Adafactor's lr None is no lr, a number with relative steps "
        "refused")


def check_negzero():
    p = [np.ones(4, np.float32)]
    opt = zt.Optimizer(p, lr=0.1, threads=1)
    e, seen, last = opt.engine, [], {}
    acquire, grads_ready = e.acquire, e.grads_ready

    def spy_acquire(unit, purpose):
        r = acquire(unit, purpose)
        if purpose == zt.FOR_BACKWARD:
            last["g"] = r[1]
        return r

    def spy_ready(unit):  # the engine's gradient buffer as it is handed over
        seen.append(np.signbit(np.asarray(last["g"])[:4]).copy())
        grads_ready(unit)

    e.acquire, e.grads_ready = spy_acquire, spy_ready
    opt.step([np.array([-0.0, 0.0, -1.0, 1.0], np.float32)])
    opt.close()
    if not seen or list(seen[0]) != [True, False, True, False]:
        fail("negzero", "the engine's gradient signs %s, want [-0, +0, -1, +1]'s" % seen)
    say("ok: negzero: a -0 gradient reaches the engine's buffer as -0")


def check_heap(expect):
    e = zt.Engine(threads=1)
    e.add_unit("u", [("w", np.ones(1 << 18, np.float32))])
    e.commit()
    heap = e.report()["memory"]["heap"]
    src = zt._lib.zt_memory_heap_source().decode()
    e.close()
    if heap["source"] != expect or src != expect:
        fail("heap", "source %s / %s, expected %s" % (heap["source"], src, expect))
    if (heap["allocated"] > 0) != (expect == "jemalloc"):
        fail("heap", "allocated %d with source %s" % (heap["allocated"], expect))
    say("ok: heap: the report's heap source is %s (allocated %d)" % (expect,
                                                                      heap["allocated"]))


def check_estimate():
    # Table 1 of the ZeRO paper (7.5B parameters, fp16 with K = 12, N = 64): 120, 31.4,
    # 16.6 and 1.88 GB at stages 0 to 3, typed in from the paper
    for st, want in ((0, 120), (1, 31.4), (2, 16.6), (3, 1.88)):
        e = zt.estimate_memory(64, num_params=7.5e9, zero_stage=st, precision="fp16")
        if float("%.3g" % (e["model_state_bytes"] / 1e9)) != want:
            fail("estimate", "stage %d: %g GB, the paper %g" % (st, e["model_state_bytes"] / 1e9,
                                                                 want))
    # a model: bert-tiny's 4416698 parameters (BertForMaskedLM), fp32 AdamW, stage 0: 16
    # bytes per padded float
    e = zt.estimate_memory(1, model_preset="bert-tiny", vocab_size=30522)
    if e["num_params"] != 4416698 or e["model_state_bytes"] != 16 * e["padded_params"]:
        fail("estimate", "bert-tiny: %r" % (e,))
    for bad in ({"num_params": 0}, {"num_params": 1e9, "model_preset": "bert-tiny"},
                {"num_params": 1e9, "precision": "fp8"}):
        try:
            zt.estimate_memory(2, **bad)
        except zt.Error as err:
            if not str(err):
                fail("estimate", "an empty message for %r" % (bad,))
        else:
            fail("estimate", "%r was not refused" % (bad,))
    say("ok: estimate: Table 1 at N = 64, bert-tiny's 16 bytes per parameter, 3 refusals")


def _st_dtypes(path):
    """{name: (dtype, raw uint32 bits of the values as fp32)} of a safetensors file."""
    import json, struct
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    out = {}
    for k, v in json.loads(b[8:8 + n]).items():
        if k == "__metadata__":
            continue
        s, e = v["data_offsets"]
        raw = b[8 + n + s:8 + n + e]
        bits = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16 if v["dtype"] == "BF16"
                else np.frombuffer(raw, np.uint32))
        out[k] = (v["dtype"], bits)
    return out


def check_bf16():
    # a parameter of the trainer's own, trained in bf16 at lr below half a bf16 step: the
    # weights stay bf16 values, the fp32 master moves; save_model writes BF16 by default and
    # the master with dtype="fp32"
    p = [np.full((4, 3), 0.3, np.float32) + np.arange(12, dtype=np.float32).reshape(4, 3) / 64]
    opt = zt.Optimizer(p, lr=1e-4, weight_decay=0.0, precision="bf16", threads=1)
    start = p[0].copy()
    for _ in range(6):
        opt.step([np.ones((4, 3), np.float32) / opt.engine.size])
    if (p[0].view(np.uint32) & 0xFFFF).any():
        fail("bf16", "the weights are not bf16 values: %s" % p[0].ravel()[:3])
    # the engine's own buffer holds the 2-byte compute copies (bf16 bit patterns)
    if opt.engine.param_dtype() != "bf16":
        fail("bf16", "param_dtype() is %r" % opt.engine.param_dtype())
    v, _ = opt.engine.acquire(0, zt.FOR_FORWARD | zt.FOR_EVAL)
    bits = np.asarray(v)
    opt.engine.release(0)
    if bits.dtype != np.uint16 or not np.array_equal(zt.widen_bf16(bits)[:12], p[0].ravel()):
        fail("bf16", "the acquired parameters are %s, not the weights' bf16 bits" % bits.dtype)
    d = tempfile.mkdtemp(prefix="zt_binding.") if RANK == 0 else None
    if int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1")) > 1:
        from mpi4py import MPI
        d = MPI.COMM_WORLD.bcast(d)
    opt.engine.save_model(os.path.join(d, "b"))
    opt.engine.save_model(os.path.join(d, "f"), dtype="fp32")
    raises("bf16", "save_model(dtype='fp16')", lambda: opt.engine.save_model(d, dtype="fp16"),
           "dtype")
    if RANK == 0:
        b = _st_dtypes(os.path.join(d, "b", "model.safetensors"))["p0"]
        f = _st_dtypes(os.path.join(d, "f", "model.safetensors"))["p0"]
        master = f[1].view(np.float32)
        rne = lambda x: (((x + 0x7FFF + ((x >> 16) & 1)) >> 16) << 16).astype(np.uint32)
        # the master starts from the weights rounded (as DeepSpeed's from the bf16 module);
        # six Adam steps of about lr down each move it by ~6e-4, the weights (bf16 steps of
        # 2^-9 .. 2^-8 here) are its rounding
        first = rne(start.ravel().view(np.uint32)).view(np.float32)
        if b[0] != "BF16" or f[0] != "F32" or not np.array_equal(b[1], p[0].view(np.uint32).ravel()):
            fail("bf16", "saved dtypes %s / %s, or BF16 values not the weights" % (b[0], f[0]))
        if not np.all(np.abs(master - (first - 6e-4)) < 1e-5):
            fail("bf16", "the master %s, want the rounded start - 6e-4" % master[:3])
        if not np.array_equal(rne(f[1]), b[1]):
            fail("bf16", "the weights are not the master rounded to nearest even")
        shutil.rmtree(d)
    opt.close()
    say("ok: bf16: weights bf16 values, the master saved with dtype fp32, BF16 by default")


def _st_f16(path, name):
    """(dtype, values as float32) of one tensor of a safetensors file."""
    import json, struct
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    v = json.loads(b[8:8 + n])[name]
    s, e = v["data_offsets"]
    dt = {"F16": np.float16, "F32": np.float32}[v["dtype"]]
    return v["dtype"], np.frombuffer(b[8 + n + s:8 + n + e], dt).astype(np.float32)


def check_fp16():
    # a gradient of 4 (summed over the ranks) times 2^16 overflows fp16 on every rank (at
    # least 4/3 x 65536 > 65504): the first step is skipped with the hysteresis spent, the
    # second halves the scale (DeepSpeed's DynamicLossScaler, hysteresis 2); the steps
    # applied after that move the fp32 master by lr each (Adam on a constant gradient) and
    # the weights are its fp16 values
    size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    p = [np.full((4, 3), 0.3, np.float32) + np.arange(12, dtype=np.float32).reshape(4, 3) / 64]
    opt = zt.Optimizer(p, lr=1e-4, weight_decay=0.0, precision="fp16", threads=1)
    start = p[0].copy()
    g = [np.full((4, 3), 4.0 / size, np.float32)]
    if opt.engine.loss_scale() != 65536.0 or opt.engine.param_dtype() != "fp16":
        fail("fp16", "loss scale %r, param_dtype %r" % (opt.engine.loss_scale(),
                                                         opt.engine.param_dtype()))
    for want_after in (65536.0, 32768.0):
        info = opt.step(g)
        if not (info["overflow"] and info["skipped"] and info["loss_scale"] == 65536.0 and
                info["step"] == 0 and opt.engine.loss_scale() == want_after):
            fail("fp16", "an overflowing step gave %s, scale now %r (want %r)" %
                 (info, opt.engine.loss_scale(), want_after))
        if not np.array_equal(p[0], start.astype(np.float16).astype(np.float32)):
            fail("fp16", "an overflowed step changed the weights: %s" % p[0].ravel()[:3])
    applied = 0
    for _ in range(40):  # (the scale halves until the gradient fits, then 6 steps)
        applied += not opt.step(g)["skipped"]
        if applied == 6:
            break
    if applied != 6 or not np.array_equal(p[0], p[0].astype(np.float16).astype(np.float32)):
        fail("fp16", "%d steps applied, or the weights are not fp16 values" % applied)
    v, _ = opt.engine.acquire(0, zt.FOR_FORWARD | zt.FOR_EVAL)
    half = np.asarray(v)
    opt.engine.release(0)
    if half.dtype != np.float16 or not np.array_equal(half[:12].astype(np.float32), p[0].ravel()):
        fail("fp16", "the acquired parameters are %s, not the weights" % half.dtype)
    d = tempfile.mkdtemp(prefix="zt_binding.") if RANK == 0 else None
    if size > 1:
        from mpi4py import MPI
        d = MPI.COMM_WORLD.bcast(d)
    opt.engine.save_model(os.path.join(d, "h"))
    opt.engine.save_model(os.path.join(d, "f"), dtype="fp32")
    raises("fp16", "save_model(dtype='bf16')", lambda: opt.engine.save_model(d, dtype="bf16"),
           "bf16")
    if RANK == 0:
        h = _st_f16(os.path.join(d, "h", "model.safetensors"), "p0")
        f = _st_f16(os.path.join(d, "f", "model.safetensors"), "p0")
        first = start.ravel().astype(np.float16).astype(np.float32)
        if h[0] != "F16" or f[0] != "F32" or not np.array_equal(h[1], p[0].ravel()):
            fail("fp16", "saved dtypes %s / %s, or F16 values not the weights" % (h[0], f[0]))
        if not np.all(np.abs(f[1] - (first - 6e-4)) < 1e-5):
            fail("fp16", "the master %s, want the rounded start - 6e-4" % f[1][:3])
        if not np.array_equal(f[1].astype(np.float16).astype(np.float32), h[1]):
            fail("fp16", "the weights are not the master rounded to nearest even")
        shutil.rmtree(d)
    opt.close()
    say("ok: fp16: two overflows skipped (scale 65536 -> 32768), then the weights fp16 values "
        "of the master, F16 saved, the master with dtype fp32")


def check_lamb():
    sys.path.insert(0, os.path.join(here, "..", "ref"))
    import torch
    from lamb_ref import FusedLambTensor
    rng = np.random.default_rng(5)
    p = [(0.05 * rng.standard_normal((7, 33))).astype(np.float32),
         (0.05 * rng.standard_normal(40)).astype(np.float32)]
    ref = [FusedLambTensor(torch.from_numpy(a.copy()), lr=0.01, weight_decay=0.01,
                           bias_correction=False, max_coeff=10.0, min_coeff=1e-4) for a in p]
    opt = zt.Optimizer(p, lr=0.01, weight_decay=0.01, optimizer="lamb", max_coeff=10.0,
                       min_coeff=1e-4, bias_correction=False, zero_stage=2, threads=1)
    for _ in range(3):  # the gradient from rank 0 alone: the ranks' sum is exactly g
        g = [(0.01 * rng.standard_normal(a.shape)).astype(np.float32) for a in p]
        opt.step(g if RANK == 0 else [np.zeros_like(a) for a in g])
        for r, x in zip(ref, g):
            r.update(torch.from_numpy(x))
    opt.close()
    for a, r in zip(p, ref):
        want = r.p.numpy()
        if not np.allclose(a, want, rtol=2 ** -20, atol=0):
            fail("lamb", "the weights differ from FusedLamb's by %.3g" % abs(a - want).max())
    raises("lamb", "min_coeff above max_coeff",
           lambda: zt.Optimizer([np.ones(3, np.float32)], optimizer="lamb", max_coeff=0.1,
                                min_coeff=0.5), "min_coeff", "max_coeff")
    say("ok: lamb: optimizer=\"lamb\" at stage 2 equals DeepSpeed's FusedLamb over three "
        "steps; an inverted clamp refused")


def main():
    only = sys.argv[sys.argv.index("--only") + 1].split(",") if "--only" in sys.argv else None
    expect = sys.argv[sys.argv.index("--expect-heap") + 1] if "--expect-heap" in sys.argv \
        else "none"
    checks = [("shape", check_shape), ("single", check_single), ("closed", check_closed),
              ("negstep", check_negstep), ("lr", check_lr), ("negzero", check_negzero),
              ("heap", lambda: check_heap(expect)), ("estimate", check_estimate),
              ("bf16", check_bf16), ("fp16", check_fp16), ("lamb", check_lamb)]
    for name, fn in checks:
        if only is None or name in only:
            fn()
    say("ok: all %d checks" % len([n for n, _ in checks if only is None or n in only]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
