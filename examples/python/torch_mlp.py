"""A PyTorch model with zerotrain as its optimizer backend: torch computes the loss and the
gradients (autograd), zerotrain's sharded AdamW updates the parameters in place (their
tensors share memory with the numpy arrays handed over). Run beside torch.optim.AdamW on a
copy of the model, the two loss curves agree within 1e-5 over 20 steps (exit status 1 if not).

    python3 examples/python/torch_mlp.py [--stage 3 --offload cpu]
    mpirun -np 2 python3 examples/python/torch_mlp.py --stage 3

With several ranks each takes its slice of the batch and zerotrain sums their gradients."""
import argparse
import copy
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import zerotrain as zt  # (after torch or before it: either order works)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--stage", type=int, default=0)
    ap.add_argument("--offload", default="none", choices=["none", "cpu", "nvme"])
    ap.add_argument("--nvme-path", default="")
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(),
                                torch.nn.Linear(64, 64), torch.nn.GELU(),
                                torch.nn.Linear(64, 10))
    ref = copy.deepcopy(model)
    lr, wd = 3e-3, 0.01
    names = [n for n, _ in model.named_parameters()]
    arrays = [p.data.numpy() for p in model.parameters()]  # shares the tensors' memory
    opt = zt.Optimizer(arrays, lr=lr, weight_decay=wd, names=names, zero_stage=a.stage,
                       offload_optimizer=a.offload, nvme_path=a.nvme_path, threads=1)
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=lr, weight_decay=wd)
    rank, size = opt.engine.rank, opt.engine.size
    B = 24
    rows = B // size
    gen = torch.Generator().manual_seed(1)
    worst = 0.0
    for s in range(a.steps):
        x = torch.randn(B, 32, generator=gen)
        y = torch.randint(0, 10, (B,), generator=gen)
        with torch.no_grad():
            loss = torch.nn.functional.cross_entropy(model(x), y).item()
        sl = slice(rank * rows, (rank + 1) * rows)  # this rank's share of the mean
        part = torch.nn.functional.cross_entropy(model(x[sl]), y[sl], reduction="sum") / B
        model.zero_grad()
        part.backward()
        opt.step([p.grad.numpy() for p in model.parameters()])
        ref_opt.zero_grad()
        ref_loss = torch.nn.functional.cross_entropy(ref(x), y)
        ref_loss.backward()
        ref_opt.step()
        worst = max(worst, abs(loss - ref_loss.item()))
        if rank == 0 and (s % 5 == 0 or s + 1 == a.steps):
            print("step %d loss zerotrain %.6f torch.optim.AdamW %.6f" % (s, loss,
                                                                          ref_loss.item()))
    opt.close()
    ok = worst <= 1e-5
    if rank == 0:
        print("%s: stage %d, %d ranks: loss curves within %.3g (bound 1e-5)" %
              ("ok" if ok else "FAIL", a.stage, size, worst))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
