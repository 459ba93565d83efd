"""zerotrain's AdamW through the Python binding against a numpy AdamW written here
(torch.optim.AdamW's update: decoupled weight decay, bias corrections), 20 steps of the numpy
example's MLP, each optimizer on its own trajectory: every parameter within 1e-6; and a
checkpoint at step 10 resumed in a new optimizer gives the same bits at step 20.

    test_numpy_adamw.py [--stage S] [--offload none|cpu|nvme] [--nvme-path DIR] [--mpi4py]

Under mpirun -np N each rank passes the gradient of its slice of the batch (zerotrain sums
them); --mpi4py imports mpi4py (after zerotrain) and runs the engine on its communicator;
--mpi4py-first imports it before zerotrain (MPI started first; nothing to preload).
The tolerance: both sides do the same float32 operations except the order of weight decay
and update (torch decays first; zerotrain multiplies p + update by 1 - lr wd: they differ by
lr^2 wd |update| ~ 1e-9 per step) and, with N > 1, the gradient summed over ranks (a few ulp
of values ~1e-2); over 20 steps of Adam's bounded steps that stays below 1e-6."""
import argparse
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "python"))
if "--mpi4py-first" in sys.argv:  # MPI started before the binding
    from mpi4py import MPI
sys.path.insert(0, os.path.join(here, "..", "..", "examples", "python"))
import zerotrain as zt
import numpy as np
import numpy_mlp as ex


def numpy_adamw(params, grads, state, t, lr, b1, b2, eps, wd, decay):
    for i, (p, g) in enumerate(zip(params, grads)):
        m, v = state[i]
        if decay[i]:
            p *= np.float32(1.0 - lr * wd)
        m[...] = np.float32(b1) * m + np.float32(1.0 - b1) * g
        v[...] = np.float32(b2) * v + np.float32(1.0 - b2) * g * g
        bc1 = np.float32(1.0 - b1 ** t)
        bc2 = np.float32(1.0 - b2 ** t)
        denom = np.sqrt(v) / np.sqrt(bc2) + np.float32(eps)
        p -= np.float32(lr) / bc1 * m / denom


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stage", type=int, default=0)
    ap.add_argument("--offload", default="none")
    ap.add_argument("--nvme-path", default="")
    ap.add_argument("--mpi4py", action="store_true")
    ap.add_argument("--mpi4py-first", action="store_true")
    ap.add_argument("--ckpt", default="/tmp", help="a folder for the halfway checkpoint")
    a = ap.parse_args()
    comm = None
    if a.mpi4py or a.mpi4py_first:
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
    lr, b1, b2, eps, wd, steps = 1e-2, 0.9, 0.999, 1e-8, 0.01, 20
    names = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    decay = [True, False, True, False]
    zp, ref = ex.init_params(), ex.init_params()
    opt = zt.Optimizer(zp, lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd, names=names,
                       no_decay=[n for n, d in zip(names, decay) if not d], comm=comm,
                       zero_stage=a.stage, offload_optimizer=a.offload,
                       nvme_path=a.nvme_path, threads=1)
    rank, size = opt.engine.rank, opt.engine.size
    if comm is not None and (comm.Get_rank(), comm.Get_size()) != (rank, size):
        print("FAIL: the engine's rank/size differ from mpi4py's")
        return 1
    rows = ex.BATCH // size
    state = [(np.zeros_like(p), np.zeros_like(p)) for p in ref]
    worst, first, last = 0.0, None, None
    for s in range(steps):
        x, y = ex.batch(s)
        sl = slice(rank * rows, (rank + 1) * rows)
        _, g = ex.loss_and_grads(zp, x[sl], y[sl], 1.0 / ex.BATCH)
        opt.step(g)
        loss, gr = ex.loss_and_grads(ref, x, y, 1.0 / ex.BATCH)
        numpy_adamw(ref, gr, state, s + 1, lr, b1, b2, eps, wd, decay)
        first = loss if first is None else first
        last = loss
        worst = max(worst, max(float(np.max(np.abs(p - q))) for p, q in zip(zp, ref)))
        if s == 9:  # a checkpoint halfway: resumed below, it must give the same bits
            ck = os.path.join(a.ckpt, "ck")
            opt.save(ck, s + 1)
            mid = [p.copy() for p in zp]
    rep = opt.engine.report()
    reported = (rep["zero_stage"], rep["world_size"], rep["rank"]) == (a.stage, size, rank) \
        and rep["optimizer_bytes_per_param"] == 8.0 and rep["memory"]["optimizer"]["peak"] > 0
    opt.close()
    # resume from step 10 in a new optimizer: steps 10..19 again, bit for bit
    rp = [p.copy() for p in mid]
    for p in rp:
        p[...] = 0.0  # (the checkpoint must bring the parameters back)
    opt2 = zt.Optimizer(rp, lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd, names=names,
                        no_decay=[n for n, d in zip(names, decay) if not d], comm=comm,
                        zero_stage=a.stage, offload_optimizer=a.offload,
                        nvme_path=a.nvme_path, threads=1)
    st = opt2.load(ck)
    resumed = st is not None and st["step"] == 10 and all(np.array_equal(p, q)
                                                          for p, q in zip(rp, mid))
    for s in range(10, steps):
        x, y = ex.batch(s)
        sl = slice(rank * rows, (rank + 1) * rows)
        _, g = ex.loss_and_grads(rp, x[sl], y[sl], 1.0 / ex.BATCH)
        opt2.step(g)
    opt2.close()
    resumed = resumed and all(np.array_equal(p, q) for p, q in zip(rp, zp))
    if not reported:
        print("FAIL: the report: %s" % rep)
    a.mpi4py = a.mpi4py or a.mpi4py_first
    ok = worst <= 1e-6 and last < first and resumed and reported
    if rank == 0:
        print("%s: stage %d, %d ranks, offload %s%s: max |zerotrain - numpy| over %d steps "
              "%.3g (bound 1e-6); loss %.4f -> %.4f; resumed from step 10 %s" %
              ("ok" if ok else "FAIL", a.stage, size, a.offload, ", mpi4py" if a.mpi4py else "",
               steps, worst, first, last, "bit-identical" if resumed else "DIFFERENT"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
