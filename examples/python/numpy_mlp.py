"""A numpy trainer with zerotrain as its optimizer: a two-layer tanh MLP fitting a fixed
random regression target, gradients written out by hand, the parameters updated by zerotrain's
sharded AdamW (or 8-bit AdamW, Adafactor; optimizer state offloaded with --offload).

    python3 examples/python/numpy_mlp.py --steps 100
    mpirun -np 2 python3 examples/python/numpy_mlp.py --stage 3 --offload cpu

Each rank computes the gradient of its slice of the global batch, scaled for the global mean:
zerotrain sums them over the ranks."""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import zerotrain as zt
import numpy as np

IN, HID, OUT, BATCH = 16, 64, 4, 48


def init_params(seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((HID, IN)) / np.sqrt(IN)).astype(np.float32),
            np.zeros(HID, np.float32),
            (rng.standard_normal((OUT, HID)) / np.sqrt(HID)).astype(np.float32),
            np.zeros(OUT, np.float32)]


def batch(step):
    """the global batch of a step: inputs and the target function's values"""
    rng = np.random.default_rng(1000 + step)
    x = rng.standard_normal((BATCH, IN)).astype(np.float32)
    t = np.random.default_rng(7).standard_normal((IN, OUT)).astype(np.float32)
    return x, np.sin(x @ t).astype(np.float32)


def loss_and_grads(params, x, y, scale):
    """mean squared error's sum over these rows times scale, and its gradients"""
    W1, b1, W2, b2 = params
    h = np.tanh(x @ W1.T + b1)
    out = h @ W2.T + b2
    d = (out - y) * (2.0 * scale / OUT)
    loss = float(np.sum((out - y) ** 2) * scale / OUT)
    gW2, gb2 = d.T @ h, d.sum(0)
    dh = (d @ W2) * (1.0 - h * h)
    return loss, [dh.T @ x, dh.sum(0), gW2, gb2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--stage", type=int, default=0)
    ap.add_argument("--optimizer", default="adamw", choices=["adamw", "adamw8bit", "adafactor"])
    ap.add_argument("--offload", default="none", choices=["none", "cpu", "nvme"])
    ap.add_argument("--nvme-path", default="")
    ap.add_argument("--lr", type=float, default=1e-2)
    a = ap.parse_args()
    params = init_params()
    # Adafactor with an lr: the T5 fine-tuning settings (relative steps take no lr)
    extra = {"relative_step": 0, "scale_parameter": 0} if a.optimizer == "adafactor" else {}
    opt = zt.Optimizer(params, lr=a.lr, names=["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"],
                       no_decay=["fc1.bias", "fc2.bias"], zero_stage=a.stage,
                       optimizer=a.optimizer, offload_optimizer=a.offload,
                       nvme_path=a.nvme_path, threads=1, **extra)
    rank, size = opt.engine.rank, opt.engine.size
    rows = BATCH // size
    for s in range(a.steps):
        x, y = batch(s)
        sl = slice(rank * rows, (rank + 1) * rows)
        loss, grads = loss_and_grads(params, x[sl], y[sl], 1.0 / BATCH)
        info = opt.step(grads)
        if rank == 0 and (s % 10 == 0 or s + 1 == a.steps):
            full = loss_and_grads(params, x, y, 1.0 / BATCH)[0]  # (every rank has the batch)
            print("step %d loss %.6f (before the update) grad_norm %.6f" %
                  (s, full, info["grad_norm"]))
    opt.close()


if __name__ == "__main__":
    main()
