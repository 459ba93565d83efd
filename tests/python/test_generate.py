#!/usr/bin/python3
"""The binding's Model.generate on the T5 fixture (tests/fixtures/t5-tiny, random weights), at
the stage given (ranks: mpirun, each rank its own rows): greedy decoding is the arg max, step
by step, of the independent PyTorch T5 (tests/ref/t5_ref.py's forward over the tokens so far,
no cache) where the two best logits are not within 1e-4; beam search with 1 beam is greedy,
and cached beam search gives the uncached tokens; a logits_processor changes what is chosen
and its exception comes out of generate; bad arguments are an Error. Prints "ok: generate"."""
import argparse, json, os, sys
import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "python"))
sys.path.insert(0, os.path.join(here, "..", "ref"))
import zerotrain as zt  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--stage", type=int, default=0)
a = ap.parse_args()
fix = os.path.join(here, "..", "fixtures", "t5-tiny")
rows = np.array([[37, 5, 99, 410, 23, 8, 1], [200, 201, 3, 1, 0, 0, 0], [77, 66, 55, 44, 33, 22, 1],
                 [9, 1, 0, 0, 0, 0, 0]])
masks = (rows != 0).astype(np.int64)
M = 10

m = zt.Model(fix, zero_stage=a.stage, threads=1)
rank, world = m.rank, m.size
ids, mask = rows[rank::world], masks[rank::world]  # this rank's rows (N=3: one has 1)
got, scores = m.generate(ids, mask, max_new_tokens=M, return_scores=True)
assert len(got) == len(ids) and all(1 <= len(g) <= M for g in got), got
try:
    import torch
    import t5_ref as R
    from compare import load_st
    c = json.load(open(os.path.join(fix, "config.json")))
    P = {k: torch.tensor(v) for k, v in load_st(os.path.join(fix, "model.safetensors")).items()}
    ties = 0
    with torch.no_grad():
        for r in range(len(ids)):
            x = torch.tensor(ids[r:r + 1]); mk = torch.tensor(mask[r:r + 1])
            gen, logp = [], 0.0
            while len(gen) < M:  # greedy search: the arg max at the newest position, until </s>
                _, lg = R.forward(P, c, x, mk, torch.tensor([gen + [0]]))
                v = lg[0, -1]
                top = torch.topk(v, 2).values
                ties += float(top[0] - top[1]) < 1e-4
                gen.append(int(v.argmax()))
                logp += float(torch.log_softmax(v.double(), -1)[gen[-1]])
                if gen[-1] == c["eos_token_id"]:
                    break
            assert ties or got[r] == gen, (r, got[r], gen)
            assert ties or abs(scores[r] - logp) <= 1e-5 * (1 + abs(logp)), (scores[r], logp)
    print("greedy vs reference: %d rows identical (near ties %d)" % (len(ids), ties))
except ImportError:
    print("skipped: the reference (python3-torch missing)")
assert m.generate(ids, mask, max_new_tokens=M, num_beams=1) == got
b3 = m.generate(ids, mask, max_new_tokens=M, num_beams=3, length_penalty=0.8, early_stopping=True)
assert m.generate(ids, mask, max_new_tokens=M, num_beams=3, length_penalty=0.8, early_stopping=True,
                  use_cache=False) == b3


def forbid(step, logits):  # a logits processor: </s> and the pad never chosen
    logits[:, :2] = -np.inf


no_eos = m.generate(ids, mask, max_new_tokens=M, num_beams=2, logits_processor=forbid)
assert all(len(g) == M and min(g) > 1 for g in no_eos), no_eos


def boom(step, logits):
    if step == 3:
        raise KeyError("from the processor")


try:
    m.generate(ids, mask, logits_processor=boom)
    raise SystemExit("the processor's exception was lost")
except KeyError:
    pass
for bad in (dict(max_new_tokens=0), dict(num_beams=0), dict(early_stopping="sometimes"),
            dict(eos_token_id=10 ** 6)):
    try:
        m.generate(ids, mask, **bad)
        raise SystemExit("accepted %s" % bad)
    except zt.Error:
        pass
m.close()
print("ok: generate")
