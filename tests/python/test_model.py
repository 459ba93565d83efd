#!/usr/bin/python3
"""The binding's Model on the classifier fixture (tests/fixtures/bert-tiny-cls): classify's
probabilities are the softmax of the independent PyTorch reference's logits
(tests/ref/bert_cls_ref.py) to fp32 rounding, at the stage given (ranks: mpirun); the same
folder as a masked LM (head="mlm", its MLM head initialised from the seed) gives fill_mask's
candidates at each mask, best first (tests/test_api.c checks them against the full logits);
the forward-only engine refuses a step; bad input is an Error. Prints "ok: model"."""
import argparse, os, sys
import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "python"))
sys.path.insert(0, os.path.join(here, "..", "ref"))
import zerotrain as zt  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--stage", type=int, default=0)
a = ap.parse_args()
fix = os.path.join(here, "..", "fixtures", "bert-tiny-cls")
ids = np.array([[2, 10, 11, 12, 3, 0], [2, 40, 4, 41, 4, 3]])
mask = np.array([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]])

m = zt.Model(fix, zero_stage=a.stage)
assert m.architecture == "BertForSequenceClassification" and m.num_labels == 3, m.architecture
assert m.label_names == ["negative", "neutral", "positive"], m.label_names
probs = m.classify(ids, mask)
try:
    import torch
    import json
    import bert_cls_ref as R
    from compare import load_st
    c = json.load(open(os.path.join(fix, "config.json")))
    P = {k: torch.tensor(v) for k, v in load_st(os.path.join(fix, "model.safetensors")).items()}
    _, logits, _ = R.forward(P, c, torch.tensor(ids), torch.tensor(mask), torch.zeros_like(torch.tensor(ids)),
                             torch.zeros(2, dtype=torch.long))
    ref = torch.softmax(logits.double(), -1).numpy()
    worst = float(np.abs(probs - ref).max())
    assert worst < 1e-6, worst
    print("classify vs reference: worst |p - p_ref| %.3g" % worst)
except ImportError:
    print("skipped: the reference (python3-torch missing)")
try:
    m.step(1e-3)
    raise SystemExit("a forward-only Model took a step")
except zt.Error as e:
    assert "forward only" in str(e), e
for bad in (lambda: m.classify(ids, mask[:, :3]), lambda: m.fill_mask(ids, 4)):
    try:
        bad()
        raise SystemExit("bad input accepted")
    except zt.Error:
        pass
m.close()

mlm = zt.Model(fix, head="mlm", zero_stage=a.stage)
assert mlm.architecture == "BertForMaskedLM"
got = mlm.fill_mask(ids, 4, top_k=3)
assert [g["position"] for g in got] == [(1, 2), (1, 4)], got
for g in got:
    assert g["scores"] == sorted(g["scores"], reverse=True) and 0 < g["scores"][0] <= 1, g
print("ok: model")
