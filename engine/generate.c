/* generate.c - zt_generate: transformers' greedy search and beam search (generation/utils.py
 * _sample without sampling, _beam_search with beam_search.py's BeamSearchScorer and
 * BeamHypotheses, as of transformers 4.4x) over the engine's generation passes (gen.h: the
 * decoder's key/value caches), or without a cache over zt_engine_evaluate (each step the
 * whole decoder again, the reference the cache is checked against). Every rank runs the same
 * number of passes: a rank stops when all have. */
#include "zerotrain.h"
#include "gen.h"
#include "../common/err.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void zt_generate_config_init(zt_generate_config *g)
{
    if (!g)
        return;
    memset(g, 0, sizeof *g);
    g->max_new_tokens = 20;
    g->num_beams = 1;
    g->length_penalty = 1.0f;
    g->early_stopping = ZT_EARLY_STOP_HEURISTIC;
    g->use_cache = 1;
    g->eos_token_id = g->pad_token_id = -1;
}

/* one batch row's finished hypotheses (BeamHypotheses), in the order they were kept */
typedef struct hyps {
    int n;
    double worst;
    double *score;
    int *len, *eos;            /* tokens generated before the </s>; ended by </s> */
    int32_t *tok;              /* [num_beams, max_new] */
} hyps;

typedef struct gen_run {
    zt_engine *e;
    const zt_generate_config *g;
    const zt_batch *b;
    int B, nb, R, V, maxn, eos, pad, start, world, cached, steps;
    int32_t *seq, *nseq;       /* [R, maxn] each row's tokens so far */
    int64_t *next;             /* [R] the tokens of the next pass */
    int *src, *done, *len;     /* [R] a row's source row; done and lengths ([R] greedy, [B]
                                * beam search) */
    double *bscore, *nscore;   /* [R] beam scores; greedy: summed log-probabilities */
    float *lg;                 /* [R, V] this step's logits (the hook may change them) */
    double *lsm;               /* [V] one row's log-softmax */
    double *cand_s;            /* [B, 2 nb] candidates: scores */
    long *cand_i;              /* their flat indices (beam * V + token) */
    hyps *h;                   /* [B] */
    double *flags;             /* [world] gathered done flags */
    /* without a cache: the expanded batch */
    int64_t *xids, *xmask, *xlab;
} gen_run;

static void run_free(gen_run *s)
{
    free(s->seq);
    free(s->nseq);
    free(s->next);
    free(s->src);
    free(s->done);
    free(s->len);
    free(s->bscore);
    free(s->nscore);
    free(s->lg);
    free(s->lsm);
    free(s->cand_s);
    free(s->cand_i);
    if (s->h)
        for (int i = 0; i < s->B; i++) {
            free(s->h[i].score);
            free(s->h[i].len);
            free(s->h[i].eos);
            free(s->h[i].tok);
        }
    free(s->h);
    free(s->flags);
    free(s->xids);
    free(s->xmask);
    free(s->xlab);
}

static int run_alloc(gen_run *s)
{
    size_t R = (size_t)s->R, M = (size_t)s->maxn, K = 2 * (size_t)s->nb;
    int ok = (s->seq = calloc(R * M, sizeof *s->seq)) && (s->nseq = calloc(R * M, sizeof *s->nseq)) &&
             (s->next = calloc(R, sizeof *s->next)) && (s->src = calloc(R, sizeof *s->src)) &&
             (s->done = calloc(R, sizeof *s->done)) && (s->len = calloc(R, sizeof *s->len)) &&
             (s->bscore = calloc(R, sizeof *s->bscore)) &&
             (s->nscore = calloc(R, sizeof *s->nscore)) &&
             (s->lg = malloc(R * (size_t)s->V * sizeof *s->lg)) &&
             (s->lsm = malloc((size_t)s->V * sizeof *s->lsm)) &&
             (s->cand_s = malloc((size_t)s->B * K * sizeof *s->cand_s)) &&
             (s->cand_i = malloc((size_t)s->B * K * sizeof *s->cand_i)) &&
             (s->h = calloc((size_t)s->B, sizeof *s->h)) &&
             (s->flags = calloc((size_t)s->world, sizeof *s->flags));
    for (int i = 0; ok && i < s->B; i++)
        ok = (s->h[i].score = malloc((size_t)(s->nb + 1) * sizeof(double))) && /* (one over, */
             (s->h[i].len = malloc((size_t)(s->nb + 1) * sizeof(int))) &&      /* then the */
             (s->h[i].eos = malloc((size_t)(s->nb + 1) * sizeof(int))) &&      /* worst goes) */
             (s->h[i].tok = malloc((size_t)(s->nb + 1) * M * sizeof(int32_t)));
    if (ok && !s->cached) {
        size_t T = (size_t)s->b->T;
        ok = (s->xids = malloc(R * T * sizeof *s->xids)) &&
             (s->xmask = malloc(R * T * sizeof *s->xmask)) &&
             (s->xlab = malloc(R * M * sizeof *s->xlab));
        for (size_t r = 0; ok && r < R; r++) /* row r is input row r / nb */
            for (size_t t = 0; t < T; t++) {
                size_t i = (r / (size_t)s->nb) * T + t;
                s->xids[r * T + t] = s->b->input_ids[i];
                s->xmask[r * T + t] = s->b->attention_mask ? s->b->attention_mask[i] : 1;
            }
    }
    return ok ? 0 : zt_fail(ZT_E_NOMEM, "zt_generate: out of memory");
}

/* step t's logits into s->lg: the cache's next position, or the whole decoder over the
 * tokens so far (their last position's logits) */
static int step_logits(gen_run *s, int t)
{
    const float *lg;
    int rows = 0, V = 0;
    size_t n = (size_t)s->R * (size_t)s->V;
    if (s->cached) {
        ZT_TRY(zt_engine_gen_pass(s->e, t ? s->next : NULL, &lg, &rows, &V));
        memcpy(s->lg, lg, n * sizeof *lg);
    } else {
        zt_batch x = {s->R, s->b->T, s->xids, s->xmask, NULL, s->xlab, 0, 0, t + 1, NULL, NULL,
                      NULL, 0, NULL};
        zt_fb_result res;
        int64_t shape[3];
        for (int r = 0; r < s->R; r++) { /* labels: the decoder's input shifted left */
            for (int j = 0; j < t; j++)
                s->xlab[(size_t)r * (t + 1) + j] = s->seq[(size_t)r * s->maxn + j];
            s->xlab[(size_t)r * (t + 1) + t] = s->pad; /* any id: its logits are kept */
        }
        ZT_TRY(zt_engine_evaluate(s->e, &x, &res));
        ZT_TRY(zt_engine_logits(s->e, &lg, shape));
        for (int r = 0; r < s->R; r++)
            memcpy(s->lg + (size_t)r * s->V, lg + ((size_t)r * (t + 1) + t) * s->V,
                   (size_t)s->V * sizeof *lg);
    }
    s->steps++;
    if (s->g->logits_hook && s->g->logits_hook(s->g->hook_arg, t, s->lg, s->R, s->V) != 0)
        return zt_fail(ZT_E_INVAL, "zt_generate: the logits hook failed at step %d", t);
    return 0;
}

/* log_softmax of one row (torch.log_softmax), in double */
static void log_softmax(double *out, const float *x, int V)
{
    double mx = x[0], sum = 0.0;
    for (int v = 1; v < V; v++)
        mx = x[v] > mx ? x[v] : mx;
    for (int v = 0; v < V; v++)
        sum += exp((double)x[v] - mx);
    double lse = mx + log(sum);
    for (int v = 0; v < V; v++)
        out[v] = (double)x[v] - lse;
}

/* every rank has stopped (collective with more than one rank) */
static int all_stop(gen_run *s, int mine, int *stop)
{
    double me = mine;
    *stop = mine;
    if (s->world < 2)
        return 0;
    ZT_TRY(zt_engine_gather_f64(s->e, &me, 1, s->flags));
    for (int k = 0; k < s->world; k++)
        *stop &= s->flags[k] != 0.0;
    return 0;
}

static int greedy(gen_run *s)
{
    int left = s->R;
    for (int t = 0; t < s->maxn; t++) {
        int stop;
        ZT_TRY(step_logits(s, t));
        for (int r = 0; r < s->R; r++) {
            const float *l = s->lg + (size_t)r * s->V;
            int32_t y = s->pad;
            if (!s->done[r]) { /* torch.argmax: the first of equal maxima */
                y = 0;
                for (int v = 1; v < s->V; v++)
                    y = l[v] > l[y] ? v : y;
                double mx = l[y], sum = 0.0;
                for (int v = 0; v < s->V; v++)
                    sum += exp((double)l[v] - mx);
                s->bscore[r] -= log(sum);
                s->len[r] = t + 1;
                if (y == s->eos) {
                    s->done[r] = 1;
                    left--;
                }
            }
            s->seq[(size_t)r * s->maxn + t] = y;
            s->next[r] = y;
        }
        ZT_TRY(all_stop(s, left == 0, &stop));
        if (stop)
            break;
    }
    return 0;
}

/* BeamHypotheses.add: a hypothesis of `len` generated tokens (seq's first len, then </s>
 * when eos) scoring sum / len^length_penalty */
static void hyp_add(gen_run *s, hyps *h, const int32_t *seq, int len, int eos, double sum)
{
    double score = sum / pow((double)len, (double)s->g->length_penalty);
    int nb = s->nb, M = s->maxn;
    if (!(h->n < nb || score > h->worst))
        return;
    h->score[h->n] = score;
    h->len[h->n] = len - eos;
    h->eos[h->n] = eos;
    memcpy(h->tok + (size_t)h->n * M, seq, sizeof *seq * (size_t)(len - eos));
    if (eos)
        h->tok[(size_t)h->n * M + len - 1] = s->eos;
    h->n++;
    if (h->n > nb) { /* drop the worst (the first of equal worst), worst = the next */
        int w = 0;
        for (int i = 1; i < h->n; i++)
            w = h->score[i] < h->score[w] ? i : w;
        double second = INFINITY;
        for (int i = 0; i < h->n; i++)
            if (i != w && h->score[i] < second)
                second = h->score[i];
        for (int i = w; i + 1 < h->n; i++) {
            h->score[i] = h->score[i + 1];
            h->len[i] = h->len[i + 1];
            h->eos[i] = h->eos[i + 1];
            memcpy(h->tok + (size_t)i * M, h->tok + (size_t)(i + 1) * M, sizeof(int32_t) * (size_t)M);
        }
        h->n--;
        h->worst = second;
    } else {
        h->worst = score < h->worst ? score : h->worst;
    }
}

/* BeamHypotheses.is_done with the best candidate's score at cur_len - 1 generated tokens */
static int hyp_done(const gen_run *s, const hyps *h, double best, int generated)
{
    double lp = s->g->length_penalty;
    if (h->n < s->nb)
        return 0;
    if (s->g->early_stopping == ZT_EARLY_STOP_TRUE)
        return 1;
    if (s->g->early_stopping == ZT_EARLY_STOP_NEVER && lp > 0.0)
        return h->worst >= best / pow((double)s->maxn, lp);
    return h->worst >= best / pow((double)generated, lp);
}

/* the 2 nb best of beam search's scores over batch row i's nb x V candidates, best first
 * (equal scores: the lower index first) */
static void top_candidates(gen_run *s, int i, const double *all)
{
    int K = 2 * s->nb, have = 0;
    double *cs = s->cand_s + (size_t)i * K;
    long *ci = s->cand_i + (size_t)i * K, n = (long)s->nb * s->V;
    for (long c = 0; c < n; c++) {
        double v = all[c];
        if (have == K && !(v > cs[K - 1]))
            continue;
        int j = have < K ? have++ : K - 1;
        while (j > 0 && v > cs[j - 1]) {
            cs[j] = cs[j - 1];
            ci[j] = ci[j - 1];
            j--;
        }
        cs[j] = v;
        ci[j] = c;
    }
}

static int beam(gen_run *s)
{
    int nb = s->nb, V = s->V, M = s->maxn, K = 2 * nb, t = 0, stop = 0;
    double *all = malloc(sizeof *all * (size_t)nb * (size_t)V);
    if (!all)
        return zt_fail(ZT_E_NOMEM, "zt_generate: out of memory");
    for (int r = 0; r < s->R; r++) /* only beam 0 is live at first */
        s->bscore[r] = r % nb ? -1e9 : 0.0;
    for (int i = 0; i < s->B; i++)
        s->h[i].worst = 1e9;
    for (t = 0; t < M; t++) {
        int rc = step_logits(s, t);
        if (rc < 0) {
            free(all);
            return rc;
        }
        int live = 0;
        for (int i = 0; i < s->B; i++) {
            hyps *h = &s->h[i];
            if (s->done[i]) { /* padded */
                for (int k = 0; k < nb; k++) {
                    int r = i * nb + k;
                    s->nscore[r] = 0.0;
                    s->next[r] = s->pad;
                    s->src[r] = i * nb;
                }
                continue;
            }
            for (int k = 0; k < nb; k++) { /* log_softmax + the beam's score */
                int r = i * nb + k;
                log_softmax(s->lsm, s->lg + (size_t)r * V, V);
                for (int v = 0; v < V; v++)
                    all[(size_t)k * V + v] = s->lsm[v] + s->bscore[r];
            }
            top_candidates(s, i, all);
            const double *cs = s->cand_s + (size_t)i * K;
            const long *ci = s->cand_i + (size_t)i * K;
            int bi = 0;
            for (int rank = 0; rank < K && bi < nb; rank++) {
                int tok = (int)(ci[rank] % V), from = i * nb + (int)(ci[rank] / V);
                if (tok == s->eos) {
                    if (rank >= nb) /* not among the nb best: not a hypothesis */
                        continue;
                    hyp_add(s, h, s->seq + (size_t)from * M, t + 1, 1, cs[rank]);
                } else {
                    int r = i * nb + bi++;
                    s->nscore[r] = cs[rank];
                    s->next[r] = tok;
                    s->src[r] = from;
                }
            }
            s->done[i] = hyp_done(s, h, cs[0], t + 1);
            live += !s->done[i];
        }
        /* the rows' sequences follow their sources, then take their tokens */
        for (int r = 0; r < s->R; r++) {
            memcpy(s->nseq + (size_t)r * M, s->seq + (size_t)s->src[r] * M, sizeof(int32_t) * (size_t)t);
            s->nseq[(size_t)r * M + t] = (int32_t)s->next[r];
            s->bscore[r] = s->nscore[r];
        }
        int32_t *sw = s->seq;
        s->seq = s->nseq;
        s->nseq = sw;
        if ((rc = all_stop(s, live == 0 || t + 1 == M, &stop)) < 0) {
            free(all);
            return rc;
        }
        if (stop || t + 1 == M)
            break;
        if (s->cached)
            zt_engine_gen_reorder(s->e, s->src);
    }
    free(all);
    /* finalize: the open beams of rows not done, at the length reached */
    int gen = t + 1; /* (the loop ends by a break) */
    for (int i = 0; i < s->B; i++)
        if (!s->done[i])
            for (int k = 0; k < nb; k++) {
                int r = i * nb + k;
                hyp_add(s, &s->h[i], s->seq + (size_t)r * M, gen, 0, s->bscore[r]);
            }
    return 0;
}

int zt_generate(zt_engine *e, const zt_batch *b, const zt_generate_config *g, int32_t *ids,
                int *lens, float *scores)
{
    gen_run s;
    zt_generate_config dg;
    zt_model_info mi;
    int rc;
    memset(&s, 0, sizeof s);
    if (!g) {
        zt_generate_config_init(&dg);
        g = &dg;
    }
    if (!e || !b || !ids || !lens)
        return zt_engine_record_error(e, zt_fail(ZT_E_INVAL, "zt_generate: NULL argument"));
    if (b->B < 1 || b->T < 1 || !b->input_ids)
        return zt_engine_record_error(e, zt_fail(ZT_E_INVAL, "zt_generate: the batch needs B "
                                                 ">= 1, T >= 1 and input_ids"));
    if (g->max_new_tokens < 1 || g->num_beams < 1 || !isfinite(g->length_penalty) ||
        g->early_stopping < 0 || g->early_stopping > ZT_EARLY_STOP_NEVER)
        return zt_engine_record_error(e, zt_fail(ZT_E_INVAL, "zt_generate: max_new_tokens %d "
                                                 "and num_beams %d must be >= 1, length_penalty "
                                                 "finite, early_stopping a ZT_EARLY_STOP_*",
                                                 g->max_new_tokens, g->num_beams));
    ZT_TRY(zt_engine_model_info(e, &mi));
    s.e = e;
    s.g = g;
    s.b = b;
    s.B = b->B;
    s.nb = g->num_beams;
    s.R = b->B * g->num_beams;
    s.V = mi.vocab_size;
    s.maxn = g->max_new_tokens;
    s.cached = g->use_cache != 0;
    s.world = zt_engine_world_size(e);
    if (s.nb > 1 && s.V < 2)
        return zt_engine_record_error(e, zt_fail(ZT_E_INVAL, "zt_generate: beam search needs "
                                                 "a vocabulary of 2 or more"));
    /* the model's ids (beginning the caches, or checking the model without them) */
    if ((rc = zt_engine_gen_begin(e, b, s.nb, s.cached ? s.maxn : 1, &s.eos, &s.pad, &s.start)) < 0)
        return zt_engine_record_error(e, rc);
    if (!s.cached)
        zt_engine_gen_end(e);
    s.eos = g->eos_token_id >= 0 ? g->eos_token_id : s.eos;
    s.pad = g->pad_token_id >= 0 ? g->pad_token_id : s.pad;
    if (s.eos >= s.V || s.pad >= s.V) {
        zt_engine_gen_end(e);
        return zt_engine_record_error(e, zt_fail(ZT_E_INVAL, "zt_generate: eos_token_id %d and "
                                                 "pad_token_id %d must be below vocab_size %d",
                                                 s.eos, s.pad, s.V));
    }
    if ((rc = run_alloc(&s)) == 0)
        rc = s.nb == 1 ? greedy(&s) : beam(&s);
    zt_engine_gen_end(e);
    if (rc < 0) {
        run_free(&s);
        return zt_engine_record_error(e, rc);
    }
    for (int i = 0; i < s.B; i++) {
        int32_t *o = ids + (size_t)i * s.maxn;
        int n;
        float sc;
        if (s.nb == 1) {
            n = s.len[i];
            memcpy(o, s.seq + (size_t)i * s.maxn, sizeof *o * (size_t)n);
            sc = (float)s.bscore[i];
        } else { /* the best (the last kept of equal best, as sorted().pop() takes) */
            const hyps *h = &s.h[i];
            int w = 0;
            for (int k = 1; k < h->n; k++)
                w = h->score[k] >= h->score[w] ? k : w;
            n = h->len[w] + h->eos[w];
            memcpy(o, h->tok + (size_t)w * s.maxn, sizeof *o * (size_t)n);
            sc = (float)h->score[w];
        }
        for (int j = n; j < s.maxn; j++)
            o[j] = s.pad;
        lens[i] = n;
        if (scores)
            scores[i] = sc;
    }
    rc = s.steps;
    run_free(&s);
    return rc;
}
