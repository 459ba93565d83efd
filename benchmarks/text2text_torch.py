#!/usr/bin/env python3
"""text2text_torch.py - the PyTorch peer of `zerotrain finetune --task text2text` in
benchmarks/bench_text2text.sh: T5ForConditionalGeneration's training step in plain torch on the
same rows, the same order and the same padded micro-batches, timed step by step.

The model is tests/ref/t5_ref.py's forward (transformers' modeling_t5.py written out in torch
ops: relative position buckets, T5LayerNorm, the tied head's d_model ** -0.5, labels shifted
right behind decoder_start_token_id with -100 -> pad, the mean cross-entropy over the target
tokens), no dropout, on the weights of a Hugging Face folder (zerotrain's --save-model). The
tokenizer is tests/ref/spm_ref.py's T5Tokenizer over the folder's spiece.model (the pieces from
Debian's spm_encode): input and target each encoded with </s>, truncated to --seq-len and
--target-len. Order: row zt_epoch_order(seed, rows, g) for global sample g (libzerotrain.so
through ctypes, as benchmarks/finetune_torch.py). A micro-batch pads the inputs to their
longest row (mask 0) and the labels to their longest with -100 (tools/t2tdata.c). AdamW
(torch.optim.AdamW, foreach=False), gradient clipping by the global norm. A step is timed
from filling the batch to the end of the optimizer update; tokens are the real input and
target tokens. Prints one JSON object.

    python3 text2text_torch.py --model DIR --train train.jsonl [--batch 32 --seq 48 --target-len 8
        --steps 30 --warmup 5 --threads 2 --lr 1e-4 --clip 1.0 --seed 42]
"""
import argparse, ctypes, json, os, resource, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "ref"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--train", required=True)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=48)
    ap.add_argument("--target-len", type=int, default=8)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--lib", default=os.path.join(ROOT, "build", "libzerotrain.so"))
    ap.add_argument("--bf16", action="store_true",
                    help="torch.autocast(cpu, bfloat16) around the forward, as the HF Trainer's --bf16 does")
    a = ap.parse_args()
    import numpy as np
    import torch
    import t5_ref as R
    from compare import load_st
    from spm_ref import SpmModel, T5Ref
    torch.set_num_threads(a.threads)
    vocab = tempfile.NamedTemporaryFile(suffix=".vocab", delete=False).name
    subprocess.run(["spm_export_vocab", "--model", a.model + "/spiece.model", "--output", vocab], check=True)
    tok = T5Ref(SpmModel(a.model + "/spiece.model", vocab))
    rows = [json.loads(line) for line in open(a.train) if line.strip()]
    t_tok = time.perf_counter()
    tok.sp.prefetch([r["input"] for r in rows] + [r["target"] for r in rows])
    enc = [(tok.encode(r["input"], None, a.seq)[0], tok.encode(r["target"], None, a.target_len)[0]) for r in rows]
    t_tok = time.perf_counter() - t_tok
    os.unlink(vocab)
    c = json.load(open(a.model + "/config.json"))
    P = {k: torch.tensor(v, requires_grad=True) for k, v in load_st(a.model + "/model.safetensors").items()}
    opt = torch.optim.AdamW(list(P.values()), lr=a.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                            foreach=False)
    lib = ctypes.CDLL(a.lib)
    order = lib.zt_epoch_order
    order.restype = ctypes.c_uint64
    order.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64]
    steps = []
    for step in range(a.steps):
        t0 = time.perf_counter()
        idx = [order(a.seed, len(rows), step * a.batch + r) for r in range(a.batch)]
        T = max(len(enc[i][0]) for i in idx)
        Tl = max(len(enc[i][1]) for i in idx)
        ids = np.zeros((a.batch, T), dtype=np.int64)
        mask = np.zeros((a.batch, T), dtype=np.int64)
        lab = np.full((a.batch, Tl), -100, dtype=np.int64)
        for r, i in enumerate(idx):
            x, y = enc[i]
            ids[r, :len(x)] = x
            mask[r, :len(x)] = 1
            lab[r, :len(y)] = y
        real = int(mask.sum()) + int((lab != -100).sum())
        opt.zero_grad(set_to_none=True)
        if a.bf16:  # HF Trainer's --bf16 on a CPU: autocast, fp32 weights and optimizer
            with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
                loss, _ = R.forward(P, c, torch.from_numpy(ids), torch.from_numpy(mask), torch.from_numpy(lab))
            loss = loss.float()
        else:
            loss, _ = R.forward(P, c, torch.from_numpy(ids), torch.from_numpy(mask), torch.from_numpy(lab))
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(list(P.values()), a.clip) if a.clip > 0 else None
        opt.step()
        dt = time.perf_counter() - t0
        steps.append({"step": step + 1, "tokens": real, "shape": [a.batch, T, Tl], "seconds": dt,
                      "loss": float(loss), "grad_norm": None if norm is None else float(norm)})
    meas = steps[a.warmup:]
    print(json.dumps({
        "peer": "pytorch T5ForConditionalGeneration (tests/ref/t5_ref.py)", "torch": torch.__version__,
        "threads": a.threads, "model": a.model, "d_model": c["d_model"], "layers": c["num_layers"],
        "decoder_layers": c["num_decoder_layers"], "vocab": c["vocab_size"], "batch": a.batch, "seq": a.seq,
        "target_len": a.target_len, "precision": "bf16-autocast" if a.bf16 else "fp32", "lr": a.lr, "clip": a.clip, "seed": a.seed, "rows": len(rows),
        "tokenize_seconds": t_tok, "warmup_steps": a.warmup, "measured_steps": len(meas),
        "tokens_per_s": sum(s["tokens"] for s in meas) / sum(s["seconds"] for s in meas),
        "step_median": statistics.median(s["seconds"] for s in meas),
        "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "steps": steps}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
