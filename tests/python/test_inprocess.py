"""libzerotrain inside a Python process that already runs other libraries: loaded as it is,
never restarting the interpreter, never touching the process's malloc.

    test_inprocess.py --order ORDER --mark FILE [--stage S]

ORDER is the import order: torch-first, mpi4py-first, zerotrain-first (zerotrain, then
numpy, mpi4py and torch), torch-freed (torch tensors allocated and freed before the import,
and torch allocating and freeing around every step after it). The script appends one line
to FILE before any import: a restart would run that code twice (the caller checks that FILE
has one line; this script checks too). Then: the PID is the one before the import, at the
import and at the end; no jemalloc is mapped and LD_PRELOAD is not set (the host's malloc is
glibc's as it was); the library reports its heap statistics as unavailable ("none");
a few steps of a small model (torch when imported, numpy otherwise) make the loss fall.
Prints "ok: ..." and exits 0, or "FAIL: ..." and exits 1. Under mpirun -np N: mpi4py-first
runs the engine on mpi4py's communicator."""
import os
import sys

ORDER = sys.argv[sys.argv.index("--order") + 1] if "--order" in sys.argv else "zerotrain-first"
MARK = sys.argv[sys.argv.index("--mark") + 1] if "--mark" in sys.argv else None
PID = os.getpid()
LINE = "before the import, pid %d, rank %s\n" % (PID, os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
if MARK:  # the code before the import: it must run exactly once (a restart by execve would
    with open(MARK, "a") as f:  # keep the PID, and append this same line again)
        f.write(LINE)

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "python"))
freed = 0
if ORDER == "torch-first":
    import torch
    import numpy as np
    import zerotrain as zt
elif ORDER == "mpi4py-first":
    from mpi4py import MPI
    import numpy as np
    import zerotrain as zt
    try:
        import torch
    except ImportError:  # (then a numpy model)
        pass
elif ORDER == "torch-freed":
    import torch
    keep = []
    for i in range(200):  # small and large blocks, freed out of order
        t = torch.randn(1000 * (1 + i % 7)) if i % 3 else torch.empty(1 << 20).fill_(1.0)
        if i % 2:
            keep.append(t)
        freed += 1
    del keep, t
    import zerotrain as zt
    import numpy as np
elif ORDER == "zerotrain-first":
    import zerotrain as zt
    import numpy as np
    from mpi4py import MPI
    try:
        import torch
    except ImportError:
        pass
else:
    sys.exit("unknown --order %s" % ORDER)
PID_AT_IMPORT = os.getpid()


def fail(msg):
    print("FAIL: %s (order %s)" % (msg, ORDER))
    sys.exit(1)


def ran_once():
    if MARK:
        with open(MARK) as f:
            n = f.readlines().count(LINE)
        if n != 1:
            fail("the code before the import ran %d times" % n)


def main():
    stage = int(sys.argv[sys.argv.index("--stage") + 1]) if "--stage" in sys.argv else 0
    ran_once()
    if PID_AT_IMPORT != PID:
        fail("the PID changed at the import: %d -> %d" % (PID, PID_AT_IMPORT))
    with open("/proc/self/maps") as f:
        maps = f.read()
    if "libjemalloc" in maps or os.environ.get("LD_PRELOAD"):
        fail("jemalloc mapped or LD_PRELOAD set: %s" % os.environ.get("LD_PRELOAD"))
    if zt._lib.zt_memory_heap_source().decode() != "none":
        fail("heap statistics from %s in a process without jemalloc" %
             zt._lib.zt_memory_heap_source().decode())
    comm = None
    if "mpi4py.MPI" in sys.modules:
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
    torch = sys.modules.get("torch")
    losses = []
    if torch is not None:
        torch.manual_seed(0)
        torch.set_num_threads(1)
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(),
                                    torch.nn.Linear(32, 4))
        arrays = [p.data.numpy() for p in model.parameters()]
        names = [n for n, _ in model.named_parameters()]
        opt = zt.Optimizer(arrays, lr=1e-2, names=names, comm=comm, zero_stage=stage,
                           threads=1)
        gen = torch.Generator().manual_seed(1)
        x = torch.randn(32, 16, generator=gen)
        y = torch.randint(0, 4, (32,), generator=gen)
        rows = 32 // opt.engine.size
        sl = slice(opt.engine.rank * rows, (opt.engine.rank + 1) * rows)
        for s in range(12):
            churn = [torch.randn(4096 * (k + 1)) for k in range(8)]  # torch's frees around ours
            del churn[::2]
            with torch.no_grad():
                losses.append(torch.nn.functional.cross_entropy(model(x), y).item())
            model.zero_grad()
            part = torch.nn.functional.cross_entropy(model(x[sl]), y[sl], reduction="sum")
            (part / 32).backward()
            opt.step([p.grad.numpy() for p in model.parameters()])
            del churn
    else:
        rng = np.random.default_rng(0)
        w = (rng.standard_normal((8, 1)) * 0.1).astype(np.float32)
        x = rng.standard_normal((64, 8)).astype(np.float32)
        y = x @ np.arange(8, dtype=np.float32).reshape(8, 1)
        opt = zt.Optimizer([w], lr=5e-2, names=["w"], comm=comm, zero_stage=stage, threads=1)
        for s in range(12):
            r = x @ w - y
            losses.append(float(np.mean(r * r)))
            opt.step([(2.0 / len(x) * x.T @ r / opt.engine.size).astype(np.float32)])
    rep = opt.engine.report()
    rank, size = opt.engine.rank, opt.engine.size
    opt.close()
    heap = rep["memory"]["heap"]
    if heap["source"] != "none" or heap["allocated"] != 0:
        fail("the report's heap: %s" % heap)
    if not rep["memory"]["params"]["peak"] > 0:
        fail("no parameter bytes counted: %s" % rep["memory"])
    if not losses[-1] < losses[0] * 0.9:
        fail("the loss did not fall: %s" % losses)
    if os.getpid() != PID:
        fail("the PID changed: %d -> %d" % (PID, os.getpid()))
    ran_once()
    if rank == 0:
        print("ok: order %s, %d ranks, stage %d, pid %d throughout, %s; no jemalloc, heap "
              "source none; loss %.4f -> %.4f over %d steps%s" %
              (ORDER, size, stage, PID, "torch" if torch is not None else "numpy", losses[0],
               losses[-1], len(losses),
               ", %d torch tensors made before the import" % freed if freed else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
