#!/usr/bin/python3
"""generate_ref.py - an independent PyTorch reference for T5 text generation (greedy search and beam search, with or
without a key/value cache), written from Hugging Face transformers' upstream source, for comparing
`zerotrain predict --task generate` id for id.

What each part follows (transformers v4.36-v4.40, the era of BeamSearchScorer with `decoder_prompt_len`):
  * model: src/transformers/models/t5/modeling_t5.py (T5Attention / T5Stack / T5ForConditionalGeneration): scores
    q k^T (no 1/sqrt(d_kv)) + position_bias (+ the additive mask, finfo(float32).min), the relative bias from the
    first layer of each stack shared by all layers, cross-attention without bias, tied head (y * d_model**-0.5) @
    shared.T. The layers themselves are tests/ref/t5_ref.py's helpers. With a cache (past_key_value) each decoder
    layer keeps the self-attention K/V of all previous positions and the cross-attention K/V computed once; the
    decode step's bias is compute_bias(cur_len, cur_len)[:, :, -1:, :] (the last query row; here sliced from one
    [L, L] table, the same values since a bucket depends only on key - query), no mask (every key is visible).
  * loops: src/transformers/generation/utils.py greedy_search (argmax of the logits, finished rows get
    pad_token_id, stop on all-eos or max_length) and beam_search (beam scores 0 / -1e9, log_softmax + beam
    scores, view [B, num_beams*V], topk(max(2, 1 + n_eos) * num_beams, sorted=True), divmod by V, scorer.process,
    input_ids[beam_idx] + next tokens, _reorder_cache(beam_idx), stop on scorer.is_done or max_length, finalize);
    max_length = decoder prompt (1, decoder_start_token_id) + max_new_tokens; no logits processors.
  * scorer: src/transformers/generation/beam_search.py (read at commit 4e7bd11f), BeamSearchScorer.process /
    finalize and BeamHypotheses.add / is_done with num_beam_groups 1, num_beam_hyps_to_keep 1:
    cur_len = input_ids.shape[-1] + 1 in process, generated_len = cur_len - decoder_prompt_len for an eos
    hypothesis (its eos counted), input_ids.shape[-1] - decoder_prompt_len in finalize; eos candidates ranked
    >= num_beams are skipped; early_stopping True / False / "never"; done rows get pad tokens, scores 0, index 0.
Cache reordering: HF index_selects the self- and cross-attention caches; the cross-attention K/V of the beams of
one row are identical, so only the self-attention cache is reordered here. The beams of a row whose search is done
are fed pads behind global beam 0 (next_beam_indices 0, as upstream): their logits are never used, differ between
cached and uncached runs (HF's too), and --check-cache leaves them out.
Tokens: tests/ref/spm_ref.py's T5Ref (HF's slow T5Tokenizer): encode with eos, truncation to --seq-len; decode
with skip_special_tokens=True.

    generate_ref.py --model DIR --input IN.jsonl --output OUT.jsonl [--input-field input] [--seq-len 512]
        [--batch-size 32] [--max-new-tokens 20] [--num-beams 1] [--length-penalty 1.0]
        [--early-stopping true|false|never] [--no-cache] [--check-cache] [--threads 1] [--time]
DIR: config.json, model.safetensors (HF T5 names), spiece.model. Output, one line per input line in order:
{"generated": decode(ids), "ids": [...] (no start token; the eos if produced, nothing after it; a pad id generated
before it is a real token and stays, as in HF's sequences), "score": greedy:
the float32 sum of the chosen tokens' log_softmax, beam: the best hypothesis' sum_logprobs / generated_len**lp}.
"""
import argparse, json, os, subprocess, sys, tempfile, time
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import t5_ref as R  # noqa: E402  (sets 1 thread and deterministic algorithms; --threads overrides the former)
from compare import load_st  # noqa: E402
from spm_ref import SpmModel, T5Ref  # noqa: E402

ENC_RAB = "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"
DEC_RAB = "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"


class Model:
    def __init__(self, d):
        c = json.load(open(os.path.join(d, "config.json")))
        c.setdefault("num_decoder_layers", c["num_layers"])
        c.setdefault("feed_forward_proj", "relu")
        c.setdefault("tie_word_embeddings", True)
        self.c, self.eps = c, c.get("layer_norm_epsilon", 1e-6)
        self.P = {k: torch.from_numpy(v).float() for k, v in load_st(os.path.join(d, "model.safetensors")).items()}
        self.emb = self.P["shared.weight"]
        eos = c.get("eos_token_id", 1)
        self.eos = list(eos) if isinstance(eos, list) else [eos]
        self.pad, self.start = c.get("pad_token_id", 0), c.get("decoder_start_token_id", 0)

    def ln(self, x, name):
        return R.t5_layer_norm(x, self.P[name], self.eps)

    def head(self, y):  # T5ForConditionalGeneration: rescale before the tied projection
        if self.c["tie_word_embeddings"]:
            return (y * self.c["d_model"] ** -0.5) @ self.emb.T
        return y @ self.P["lm_head.weight"].T

    def encode(self, ids, mask):
        """T5Stack encoder: final hidden states [B, Te, C] and the additive key mask [B, 1, 1, Te]."""
        P, c = self.P, self.c
        term = ((1.0 - mask.float()) * R.MASK_MIN)[:, None, None, :]
        bias = R.position_bias(P, ENC_RAB, c, ids.shape[1], ids.shape[1], True) + term
        x = self.emb[ids]
        for i in range(c["num_layers"]):
            p = f"encoder.block.{i}.layer."
            h = self.ln(x, p + "0.layer_norm.weight")
            x = x + R.attention(P, p + "0.SelfAttention.", c, h, h, bias)
            x = x + R.feed_forward(P, p + "1.DenseReluDense.", c, self.ln(x, p + "1.layer_norm.weight"))
        return self.ln(x, "encoder.final_layer_norm.weight"), term


class Decoder:
    """Decoder state of N = rows * beams sequences over one group's encoder output (already expanded to N rows).
    logits(seqs) gives the next-token logits [N, V] for the decoder inputs seqs [N, t+1] (start token first)."""

    def __init__(self, m, enc, term, max_len, cached):
        self.m, self.enc, self.term, self.cached = m, enc, term, cached
        P, c = m.P, m.c
        N, H, D = enc.shape[0], c["num_heads"], c["d_kv"]
        self.N, self.H, self.D, self.L = N, H, D, c["num_decoder_layers"]
        if cached:
            self.bias = R.position_bias(P, DEC_RAB, c, max_len, max_len, False)  # row t, columns :t+1 per step
            kv = lambda w: (enc @ w.T).view(N, -1, H, D).transpose(1, 2)  # noqa: E731  [N, H, Te, D]
            pre = [f"decoder.block.{i}.layer.1.EncDecAttention." for i in range(self.L)]
            self.xk = [kv(P[p + "k.weight"]) for p in pre]
            self.xv = [kv(P[p + "v.weight"]) for p in pre]
            self.sk = [enc.new_zeros(N, H, max_len, D) for _ in range(self.L)]
            self.sv = [enc.new_zeros(N, H, max_len, D) for _ in range(self.L)]
            self.filled = 0

    def attend(self, a, h, k, v, bias):  # one query per sequence against cached keys/values
        P, N, H, D = self.m.P, self.N, self.H, self.D
        q = (h @ P[a + "q.weight"].T).view(N, 1, H, D).transpose(1, 2)
        w = torch.softmax(q @ k.transpose(-1, -2) + bias, dim=-1)
        return (w @ v).transpose(1, 2).reshape(N, 1, H * D) @ P[a + "o.weight"].T

    def step(self, tok, t):
        """Cached decode step: the token at position t for every sequence; appends its K/V to the caches."""
        m, P, N, H, D = self.m, self.m.P, self.N, self.H, self.D
        x = m.emb[tok][:, None]
        bias = self.bias[:, :, t:t + 1, :t + 1]
        for i in range(self.L):
            p = f"decoder.block.{i}.layer."
            a = p + "0.SelfAttention."
            h = m.ln(x, p + "0.layer_norm.weight")
            self.sk[i][:, :, t] = (h[:, 0] @ P[a + "k.weight"].T).view(N, H, D)
            self.sv[i][:, :, t] = (h[:, 0] @ P[a + "v.weight"].T).view(N, H, D)
            x = x + self.attend(a, h, self.sk[i][:, :, :t + 1], self.sv[i][:, :, :t + 1], bias)
            x = x + self.attend(p + "1.EncDecAttention.", m.ln(x, p + "1.layer_norm.weight"), self.xk[i],
                                self.xv[i], self.term)
            x = x + R.feed_forward(P, p + "2.DenseReluDense.", m.c, m.ln(x, p + "2.layer_norm.weight"))
        self.filled = t + 1
        return m.head(m.ln(x[:, 0], "decoder.final_layer_norm.weight"))

    def full(self, seqs):
        """Uncached: the whole decoder over the prefix (causal mask, as t5_ref.forward), last position's logits."""
        m, P, c = self.m, self.m.P, self.m.c
        T = seqs.shape[1]
        causal = (torch.arange(T)[None, :] <= torch.arange(T)[:, None]).float()[None, None]
        bias = R.position_bias(P, DEC_RAB, c, T, T, False) + (1.0 - causal) * R.MASK_MIN
        x = m.emb[seqs]
        for i in range(self.L):
            p = f"decoder.block.{i}.layer."
            h = m.ln(x, p + "0.layer_norm.weight")
            x = x + R.attention(P, p + "0.SelfAttention.", c, h, h, bias)
            x = x + R.attention(P, p + "1.EncDecAttention.", c, m.ln(x, p + "1.layer_norm.weight"), self.enc,
                                self.term)
            x = x + R.feed_forward(P, p + "2.DenseReluDense.", c, m.ln(x, p + "2.layer_norm.weight"))
        return m.head(m.ln(x[:, -1], "decoder.final_layer_norm.weight"))

    def logits(self, seqs):
        return self.step(seqs[:, -1], seqs.shape[1] - 1) if self.cached else self.full(seqs)

    def reorder(self, idx):  # _reorder_cache: index_select on the batch*beam dimension
        if self.cached:
            n = self.filled
            for buf in self.sk + self.sv:
                buf[:, :, :n] = buf[:, :, :n].index_select(0, idx)


class Hyps:
    """BeamHypotheses: the num_beams best finished hypotheses of one row (token lists without the final eos)."""

    def __init__(self, nb, lp, es, max_length):
        self.nb, self.lp, self.es, self.max_length = nb, lp, es, max_length
        self.beams, self.worst = [], 1e9

    def add(self, hyp, sum_logprobs, generated_len):
        score = sum_logprobs / (generated_len ** self.lp)
        if len(self.beams) < self.nb or score > self.worst:
            self.beams.append((score, hyp))
            if len(self.beams) > self.nb:
                srt = sorted([(s, i) for i, (s, _) in enumerate(self.beams)])
                del self.beams[srt[0][1]]
                self.worst = srt[1][0]
            else:
                self.worst = min(score, self.worst)

    def is_done(self, best_sum_logprobs, cur_len, prompt_len):
        if len(self.beams) < self.nb:
            return False
        if self.es is True:
            return True
        if self.es is False or self.lp <= 0.0:  # False: heuristic from cur_len; "never" with lp <= 0 likewise
            return self.worst >= best_sum_logprobs / (cur_len - prompt_len) ** self.lp
        return self.worst >= best_sum_logprobs / (self.max_length - prompt_len) ** self.lp  # "never", lp > 0


class Scorer:
    """BeamSearchScorer (one beam group, one returned hypothesis); Python bookkeeping as upstream."""

    def __init__(self, B, nb, lp, es, max_length, eos, pad):
        self.hyps = [Hyps(nb, lp, es, max_length) for _ in range(B)]
        self.done = [False] * B
        self.nb, self.eos, self.pad, self.max_length = nb, eos, pad, max_length

    def process(self, seqs, scores, tokens, indices, prompt_len=1):
        cur_len = seqs.shape[-1] + 1  # the length next_scores were computed on, decoder prompt included
        nb, ns, nt, ni = self.nb, [], [], []
        for b, h in enumerate(self.hyps):
            if self.done[b]:
                ns += [0.0] * nb
                nt += [self.pad] * nb
                ni += [0] * nb
                continue
            j = 0
            for rank, (tok, sc, ix) in enumerate(zip(tokens[b], scores[b], indices[b])):
                bbi = b * nb + ix
                if tok in self.eos:
                    if rank >= nb:  # an eos candidate outside the top num_beams is not added
                        continue
                    h.add(seqs[bbi].tolist(), sc, cur_len - prompt_len)
                else:
                    ns.append(sc)
                    nt.append(tok)
                    ni.append(bbi)
                    j += 1
                if j == nb:
                    break
            assert j == nb, "fewer than num_beams non-eos candidates"
            self.done[b] = self.done[b] or h.is_done(max(scores[b]), cur_len, prompt_len)
        return torch.tensor(ns, dtype=torch.float32), torch.tensor(nt), torch.tensor(ni)

    def finalize(self, seqs, beam_scores, prompt_len=1):
        for b, h in enumerate(self.hyps):
            if not self.done[b]:
                for k in range(self.nb):
                    bbi = b * self.nb + k
                    h.add(seqs[bbi].tolist(), beam_scores[bbi], seqs.shape[-1] - prompt_len)
        best = [sorted(h.beams, key=lambda x: x[0]).pop() for h in self.hyps]
        sent_max_len = min(max(len(hyp) for _, hyp in best) + 1, self.max_length)
        # the decoded row: the hypothesis, then the first eos where it fits, then pads (dropped here)
        return [(hyp + [self.eos[0]] if len(hyp) < sent_max_len else hyp, s) for s, hyp in best]


def greedy(m, dec, B, a, rec):
    seqs = torch.full((B, 1), m.start, dtype=torch.long)
    unfinished = torch.ones(B, dtype=torch.bool)
    score = torch.zeros(B)
    eos = torch.tensor(m.eos)
    for _ in range(a.max_new_tokens):
        lg = dec.logits(seqs)
        if rec is not None:
            rec.append(lg.clone())
        nxt = torch.argmax(lg, dim=-1)
        lp = torch.log_softmax(lg, dim=-1).gather(1, nxt[:, None])[:, 0]
        score = score + torch.where(unfinished, lp, torch.zeros_like(lp))
        nxt = torch.where(unfinished, nxt, torch.full_like(nxt, m.pad))
        seqs = torch.cat([seqs, nxt[:, None]], dim=-1)
        unfinished &= ~torch.isin(nxt, eos)
        if not unfinished.any():
            break
    out = []
    for b, row in enumerate(seqs[:, 1:].tolist()):
        cut = next((i for i, x in enumerate(row) if x in m.eos), None)
        out.append((row if cut is None else row[:cut + 1], float(score[b])))
    return out


def beam_search(m, dec, B, a, rec):
    nb, max_length = a.num_beams, 1 + a.max_new_tokens
    seqs = torch.full((B * nb, 1), m.start, dtype=torch.long)
    beam_scores = torch.zeros(B, nb)
    beam_scores[:, 1:] = -1e9
    beam_scores = beam_scores.view(-1)
    scorer = Scorer(B, nb, a.length_penalty, a.early_stopping, max_length, m.eos, m.pad)
    while True:
        lg = dec.logits(seqs)
        if rec is not None:  # rows still searching only (a done row's beams are fed pads from global beam 0)
            rec.append(lg[torch.tensor(scorer.done).logical_not().repeat_interleave(nb)].clone())
        s = torch.log_softmax(lg, dim=-1) + beam_scores[:, None]
        V = s.shape[-1]
        s, tk = torch.topk(s.view(B, nb * V), max(2, 1 + len(m.eos)) * nb, dim=1, largest=True, sorted=True)
        ix = torch.div(tk, V, rounding_mode="floor")
        beam_scores, btok, bidx = scorer.process(seqs, s.tolist(), (tk % V).tolist(), ix.tolist())
        seqs = torch.cat([seqs[bidx, :], btok[:, None]], dim=-1)
        dec.reorder(bidx)
        if all(scorer.done) or seqs.shape[-1] >= max_length:
            break
    return [(ids[1:], s) for ids, s in scorer.finalize(seqs, beam_scores.tolist())]


def generate_group(m, ids, mask, a, cached, rec=None):
    """[(ids without the start token, score)] for one group of rows; rec collects each step's logits."""
    enc, term = m.encode(ids, mask)  # once per group, then repeat_interleave'd per beam (_expand_inputs_...)
    beam = a.num_beams > 1 or a.force_beam
    if beam:
        enc, term = enc.repeat_interleave(a.num_beams, dim=0), term.repeat_interleave(a.num_beams, dim=0)
    dec = Decoder(m, enc, term, 1 + a.max_new_tokens, cached)
    return (beam_search if beam else greedy)(m, dec, ids.shape[0], a, rec)


def early_stopping(s):  # GenerationConfig.early_stopping: True, False or "never"
    if s.lower() not in ("true", "false", "never"):
        raise argparse.ArgumentTypeError("true, false or never")
    return {"true": True, "false": False}.get(s.lower(), "never")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--input-field", default="input")
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--max-new-tokens", type=int, default=20)
    ap.add_argument("--num-beams", type=int, default=1)
    ap.add_argument("--length-penalty", type=float, default=1.0)
    ap.add_argument("--early-stopping", type=early_stopping, default=False, help="true, false (default) or never")
    ap.add_argument("--no-cache", action="store_true", help="recompute the whole decoder every step")
    ap.add_argument("--check-cache", action="store_true", help="run cached and uncached, compare ids and logits")
    ap.add_argument("--force-beam", action="store_true",
                    help="self-check: beam search even with --num-beams 1 (HF refuses that; must equal greedy)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--time", action="store_true")
    a = ap.parse_args()
    assert a.max_new_tokens >= 1 and a.num_beams >= 1 and a.batch_size >= 1
    torch.set_num_threads(a.threads)
    m = Model(a.model)
    spm = os.path.join(a.model, "spiece.model")
    with tempfile.TemporaryDirectory() as tmp:  # the piece list, as tests/test_text2text.sh gets it
        subprocess.run(["spm_export_vocab", "--model", spm, "--output", tmp + "/spiece.vocab"], check=True)
        tok = T5Ref(SpmModel(spm, tmp + "/spiece.vocab"))
    texts = [json.loads(line)[a.input_field] for line in open(a.input, encoding="utf-8") if line.strip()]
    tok.sp.prefetch(texts)  # one spm_encode call for all texts (pieces around special tokens come on demand)
    rows = [tok.encode(t, None, a.seq_len)[0] for t in texts]  # T5Tokenizer(t, truncation=True, max_length=...)
    results, diffs, bad = [], [], []
    t0 = time.perf_counter()
    with torch.no_grad():
        for g in range(0, len(rows), a.batch_size):
            grp = rows[g:g + a.batch_size]
            T = max(len(r) for r in grp)
            ids = torch.tensor([r + [m.pad] * (T - len(r)) for r in grp], dtype=torch.long)
            mask = torch.tensor([[1] * len(r) + [0] * (T - len(r)) for r in grp], dtype=torch.long)
            if a.check_cache:
                rc, ru = [], []
                out = generate_group(m, ids, mask, a, True, rc)
                ref = generate_group(m, ids, mask, a, False, ru)
                bad += [g + i for i, (x, y) in enumerate(zip(out, ref)) if x[0] != y[0]]
                diffs += [float((x - y).abs().max()) for x, y in zip(rc, ru)]
            else:
                out = generate_group(m, ids, mask, a, not a.no_cache)
            results += out
    elapsed = time.perf_counter() - t0
    with open(a.output, "w", encoding="utf-8") as f:
        for ids, score in results:
            try:
                text = tok.decode(ids, skip_special_tokens=True)
            except IndexError:  # an id past the tokenizer's pieces (vocab_size > tokenizer size): HF raises too
                text = None
            f.write(json.dumps({"generated": text, "ids": ids, "score": float(score)}, ensure_ascii=False) + "\n")
    if a.time:
        n = sum(len(ids) for ids, _ in results)
        print(f"generated {n} tokens in {elapsed:.3f} s: {n / elapsed:.1f} tokens/s", file=sys.stderr)
    if a.check_cache:
        print(f"cache check: max |logits diff| = {max(diffs, default=0.0):.3g} over {len(diffs)} steps"
              f" (per step: {' '.join(f'{d:.2g}' for d in diffs[:100])}{' ...' if len(diffs) > 100 else ''})",
              file=sys.stderr)
        if bad:
            print(f"cache check FAILED: cached and uncached ids differ in rows {bad}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
