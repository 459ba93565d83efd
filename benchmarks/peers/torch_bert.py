#!/usr/bin/python3
"""PyTorch peer for zerotrain's benchmarks: BERT masked-LM training on the CPU the way a
Hugging Face user runs it (BertForMaskedLM's structure: nn.Linear / nn.LayerNorm / exact GELU /
softmax attention with dropout, the MLM head over every position with the decoder tied to the
word embeddings, CrossEntropyLoss(ignore_index=-100)), torch.optim.AdamW, random token ids with
15% of positions labelled. Same shapes, batch, sequence length, optimizer and threads as the
zerotrain point it is compared with. Prints one JSON object: step times (warm-up steps
excluded), tokens/s, peak RSS.

  torch_bert.py --preset bert-mini --batch 16 --seq 128 --steps 6 --warmup 1 --threads 2
  torch_bert.py ... --zero1 2    ZeRO-1 peer: 2 processes over gloo, DDP + ZeroRedundancyOptimizer
                                 (--batch is per process, --threads per process)
"""
import argparse, json, os, resource, statistics, sys, time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:  # the peer is optional: the harness reports it as skipped
    print(json.dumps({"skipped": "python3-torch is not installed"}))
    sys.exit(0)

PRESETS = {  # layers, hidden, heads, intermediate (as zerotrain's presets)
    "bert-tiny": (2, 128, 2, 512), "bert-mini": (4, 256, 4, 1024), "bert-small": (4, 512, 8, 2048),
    "bert-medium": (8, 512, 8, 2048), "bert-base": (12, 768, 12, 3072), "bert-large": (24, 1024, 16, 4096),
}


class Layer(nn.Module):
    def __init__(s, H, A, I, p):
        super().__init__()
        s.A, s.q, s.k, s.v = A, nn.Linear(H, H), nn.Linear(H, H), nn.Linear(H, H)
        s.ao, s.ln1 = nn.Linear(H, H), nn.LayerNorm(H, eps=1e-12)
        s.i, s.o, s.ln2 = nn.Linear(H, I), nn.Linear(I, H), nn.LayerNorm(H, eps=1e-12)
        s.drop = nn.Dropout(p)

    def forward(s, x, bias):
        B, T, H = x.shape
        hs = H // s.A
        def heads(t):
            return t.view(B, T, s.A, hs).transpose(1, 2)
        q, k, v = heads(s.q(x)), heads(s.k(x)), heads(s.v(x))
        att = torch.matmul(q, k.transpose(-1, -2)) / hs ** 0.5 + bias
        att = s.drop(F.softmax(att, dim=-1))
        ctx = torch.matmul(att, v).transpose(1, 2).reshape(B, T, H)
        a = s.ln1(x + s.drop(s.ao(ctx)))
        return s.ln2(a + s.drop(s.o(F.gelu(s.i(a)))))


class BertMLM(nn.Module):
    def __init__(s, V, L, H, A, I, P=512, TT=2, p=0.1):
        super().__init__()
        s.word, s.pos, s.ttype = nn.Embedding(V, H), nn.Embedding(P, H), nn.Embedding(TT, H)
        s.ln, s.drop = nn.LayerNorm(H, eps=1e-12), nn.Dropout(p)
        s.layers = nn.ModuleList(Layer(H, A, I, p) for _ in range(L))
        s.dense, s.hln = nn.Linear(H, H), nn.LayerNorm(H, eps=1e-12)
        s.bias = nn.Parameter(torch.zeros(V))
        for m in s.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)

    def forward(s, ids, types, mask, labels):
        B, T = ids.shape
        x = s.word(ids) + s.pos(torch.arange(T).unsqueeze(0)) + s.ttype(types)
        x = s.drop(s.ln(x))
        bias = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        for layer in s.layers:
            x = layer(x, bias)
        h = s.hln(F.gelu(s.dense(x)))
        logits = F.linear(h, s.word.weight, s.bias)  # every position, as BertForMaskedLM
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1), ignore_index=-100)


def batch(g, B, T, V):
    ids = torch.randint(5, V, (B, T), generator=g)
    labels = torch.full((B, T), -100, dtype=torch.long)
    pick = torch.rand((B, T), generator=g) < 0.15
    labels[pick] = ids[pick]
    return ids, torch.zeros_like(ids), torch.ones_like(ids), labels


def train(a, rank=0, world=1):
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    L, H, A, I = PRESETS[a.preset]
    model = BertMLM(a.vocab, L, H, A, I)
    if world > 1:
        from torch.distributed.optim import ZeroRedundancyOptimizer
        from torch.nn.parallel import DistributedDataParallel
        model = DistributedDataParallel(model)
        opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW,
                                      lr=1e-4, weight_decay=0.01)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    g = torch.Generator().manual_seed(a.seed + rank)
    times, losses = [], []
    for step in range(a.steps):
        ids, types, mask, labels = batch(g, a.batch, a.seq, a.vocab)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(ids, types, mask, labels)
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        if step >= a.warmup:
            times.append(dt)
        losses.append(float(loss))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return times, losses, rss


def zero1_worker(rank, world, a, port, out):
    import torch.distributed as dist
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    times, losses, rss = train(a, rank, world)
    res = [None] * world
    dist.all_gather_object(res, {"times": times, "rss": rss})
    if rank == 0:
        out.put(res)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--preset", default="bert-mini", choices=sorted(PRESETS))
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--vocab", type=int, default=30522)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--zero1", type=int, default=0, metavar="PROCS")
    a = p.parse_args()
    if a.steps <= a.warmup:
        p.error("--steps must exceed --warmup")
    res = {"peer": "pytorch", "torch": torch.__version__, "preset": a.preset, "batch": a.batch,
           "seq": a.seq, "threads": a.threads, "warmup_steps": a.warmup}
    if a.zero1 > 1:
        import torch.multiprocessing as mp
        q = mp.get_context("spawn").SimpleQueue()
        port = 29500 + os.getpid() % 1000
        mp.spawn(zero1_worker, args=(a.zero1, a, port, q), nprocs=a.zero1, join=True)
        ranks = q.get()
        times = [max(t) for t in zip(*(r["times"] for r in ranks))]  # a step ends when all do
        res.update(world_size=a.zero1, optimizer="ZeroRedundancyOptimizer(AdamW) + DDP, gloo",
                   peak_rss_per_rank=[r["rss"] for r in ranks])
        tokens = a.batch * a.seq * a.zero1
    else:
        times, losses, rss = train(a)
        res.update(world_size=1, optimizer="AdamW", peak_rss_per_rank=[rss], losses=losses)
        tokens = a.batch * a.seq
    med = statistics.median(times)
    res.update(step_seconds=times, step_median=med, step_min=min(times), step_max=max(times),
               tokens_per_step=tokens, tokens_per_s=tokens / med)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
