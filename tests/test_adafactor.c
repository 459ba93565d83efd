/* test_adafactor.c - Adafactor over tensor pieces (optimizer/adafactor.c) against a torch
 * transcription of transformers' Adafactor.step on whole tensors (tests/ref/adafactor_ref.py,
 * its output in tests/fixtures/adafactor/case.bin): four configurations (1: the defaults,
 * relative steps and parameter scaling; 2: the T5 fine-tuning settings, a fixed lr without
 * scaling; 3: a first moment with a fixed lr and weight decay, and with warmup_init), five
 * steps, a 48 x 40 matrix, a vector, a [4, 24, 20] and a [2, 3, 8, 12] tensor (factored over
 * their last two dimensions), each cut into pieces that do not follow its rows or matrices
 * (as a ZeRO shard cuts it), and as one whole piece.
 *
 * Tolerance: the reference sums in float32 (torch's vectorised, cascaded sums: a relative
 * error of a few float32 epsilons, log2(1920) x 2^-24 ~ 7e-7) and may fuse multiply-adds;
 * the C sums in double and rounds once. The moments (means of g^2 over a row or a column)
 * may therefore differ by a few 1e-7 relative; the row mean, the division and the rsqrt add
 * a few ulps each, and rms(u) over the whole tensor (a sum of up to 1920 squares) another
 * few 1e-7: moments within 2e-5 relative; each step's update within 2e-5 relative, carried
 * through the first moment (weight beta1) and added up in the parameter with 4 float32 ulps
 * per step. The criterion, per tensor max |p - ref| <= 1e-6 x max |p|, follows: the
 * update is at most lr x clip_threshold in RMS (lr 1e-3, or 1e-2 x rms(p) ~ 5e-4), so its
 * error is at most 2e-5 x 1e-3 = 2e-8 per step, plus the rounding of p (half an ulp, 4e-9
 * at 0.1): five steps 1.2e-7, below 1e-6 x max |p| (about 0.17 for these 0.05 x randn
 * tensors; elements beyond the RMS are held by the per-element bound). The worst ratio is
 * printed (9e-8 when written). The same run as one whole piece must agree as closely (only
 * the order of the double additions differs). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "../optimizer/adafactor.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *fixture_path(void)
{
    static char d[1024];
    const char *f = getenv("ZT_FIXTURES");
    snprintf(d, sizeof d, "%s/adafactor/case.bin", f ? f : "tests/fixtures");
    return d;
}

static void rd(void *dst, size_t n, FILE *f)
{
    if (fread(dst, 1, n, f) != n)
        fail_msg("%s: truncated", fixture_path());
}

/* one tensor's state and pieces */
typedef struct tens {
    zt_adafactor_shape sh;
    size_t numel, nrow, ncol, cut[4];
    int pieces;
    float *p, *row, *col, *v, *m, *u;
    double *rs, *cs;
    float *bound_m, *bound_p; /* error bounds carried through the momentum and the steps */
} tens;

/* shape[ndim] as Adafactor sees it: [..., R, C] factored (B = the leading dimensions'
 * product), one dimension a vector */
static zt_adafactor_shape shape_of(int ndim, const uint32_t *shape)
{
    zt_adafactor_shape sh = {shape[0], 0, 1};
    if (ndim >= 2) {
        sh = (zt_adafactor_shape){shape[ndim - 2], shape[ndim - 1], 1};
        for (int k = 0; k < ndim - 2; k++)
            sh.batch *= shape[k];
    }
    return sh;
}

static void tens_init(tens *t, zt_adafactor_shape sh, const size_t *cut, int pieces)
{
    memset(t, 0, sizeof *t);
    t->sh = sh;
    t->numel = sh.batch * sh.rows * (sh.cols ? sh.cols : 1);
    t->nrow = sh.cols ? sh.batch * sh.rows : 0;
    t->ncol = sh.cols ? sh.batch * sh.cols : 0;
    t->pieces = pieces;
    memcpy(t->cut, cut, sizeof t->cut);
    t->p = calloc(t->numel, 4);
    t->v = calloc(t->numel, 4);
    t->m = calloc(t->numel, 4);
    t->u = calloc(t->numel, 4);
    t->row = calloc(t->nrow + 1, 4);
    t->col = calloc(t->ncol + 1, 4);
    t->rs = calloc(t->nrow + 1, 8);
    t->cs = calloc(t->ncol + 1, 8);
    t->bound_m = calloc(t->numel, 4);
    t->bound_p = calloc(t->numel, 4);
}

static void tens_free(tens *t)
{
    free(t->p); free(t->v); free(t->m); free(t->u); free(t->row); free(t->col);
    free(t->rs); free(t->cs); free(t->bound_m); free(t->bound_p);
}

/* one step over the pieces, the sums added in piece order (what the engine's reduction
 * does across ranks) */
static void tens_step(tens *t, const zt_adafactor_hparams *hp, const float *g)
{
    zt_adafactor_sums s = {t->rs, t->cs, 0.0};
    memset(t->rs, 0, (t->nrow + 1) * 8);
    memset(t->cs, 0, (t->ncol + 1) * 8);
    for (int k = 0; k < t->pieces; k++) {
        size_t a = t->cut[k], b = t->cut[k + 1];
        zt_adafactor_sums_add(&t->sh, a, b - a, t->p + a, g + a, 1.0f, hp->eps1, &s);
    }
    float lr = zt_adafactor_stats(&t->sh, hp, &s, t->row, t->col);
    double usq = 0.0;
    for (int k = 0; k < t->pieces; k++) {
        size_t a = t->cut[k], b = t->cut[k + 1];
        usq += zt_adafactor_precondition(&t->sh, hp, a, b - a, g + a, 1.0f, t->row, t->col,
                                         t->v + a, t->u + a, NULL);
    }
    for (int k = 0; k < t->pieces; k++) {
        size_t a = t->cut[k], b = t->cut[k + 1];
        zt_adafactor_apply(hp, t->numel, usq, lr, b - a, t->u + a, t->m + a, t->p + a, 1);
    }
    /* the step's update x = u / max(1, rms(u)) * lr may be 2e-5 off relative; the first
     * moment carries earlier errors with weight beta1; the parameter adds them up, plus a
     * few ulps of its own per step */
    float denom = (float)sqrt(usq / (double)t->numel) / hp->clip_threshold;
    denom = denom > 1.0f ? denom : 1.0f;
    for (size_t i = 0; i < t->numel; i++) {
        float e = 2e-5f * fabsf(t->u[i] / denom * lr);
        t->bound_m[i] = hp->beta1 >= 0.0f ? hp->beta1 * t->bound_m[i] + (1.0f - hp->beta1) * e : e;
        t->bound_p[i] += t->bound_m[i] +
                         4.0f * (nextafterf(fabsf(t->p[i]), INFINITY) - fabsf(t->p[i]));
    }
}

static void near_rel(const char *what, int ti, int cfg, int step, const float *got,
                     const float *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabsf(got[i] - want[i]) <= 2e-5f * fabsf(want[i])))
            fail_msg("tensor %d config %d step %d: %s[%zu] = %.9g, reference %.9g", ti, cfg,
                     step, what, i, got[i], want[i]);
}

static double worst_ratio; /* the largest max|dp| / max|p| seen (printed) */

/* per element within its carried bound, and the tensor within 1e-6 of its largest |p| */
static void near_p(const char *what, int ti, int cfg, int step, const tens *t, const float *want)
{
    float dmax = 0.0f, pmax = 0.0f;
    size_t at = 0;
    for (size_t i = 0; i < t->numel; i++) {
        float d = fabsf(t->p[i] - want[i]);
        if (!(d <= t->bound_p[i]))
            fail_msg("tensor %d config %d step %d: %s[%zu] = %.9g, reference %.9g (bound %.3g)",
                     ti, cfg, step, what, i, t->p[i], want[i], t->bound_p[i]);
        at = d > dmax ? i : at;
        dmax = d > dmax ? d : dmax;
        pmax = fabsf(want[i]) > pmax ? fabsf(want[i]) : pmax;
    }
    if (!(dmax <= 1e-6f * pmax))
        fail_msg("tensor %d config %d step %d: %s: max |p - ref| = %.3g at [%zu] > 1e-6 x max "
                 "|p| = %.3g", ti, cfg, step, what, dmax, at, 1e-6 * pmax);
    worst_ratio = dmax / pmax > worst_ratio ? dmax / pmax : worst_ratio;
}

#define MAX_T 8

static void test_against_reference(void **state)
{
    (void)state;
    FILE *f = fopen(fixture_path(), "rb");
    char magic[4];
    uint32_t nc, steps, nt, dims[MAX_T][5];
    if (!f)
        fail_msg("cannot open %s", fixture_path());
    rd(magic, 4, f);
    assert_memory_equal(magic, "ZTA2", 4);
    rd(&nc, 4, f);
    rd(&steps, 4, f);
    rd(&nt, 4, f);
    assert_true(nc >= 1 && nc <= 8 && steps >= 1 && steps <= 50 && nt >= 1 && nt <= MAX_T);
    for (uint32_t ti = 0; ti < nt; ti++) {
        rd(dims[ti], sizeof dims[ti], f);
        assert_true(dims[ti][0] >= 1 && dims[ti][0] <= 4);
    }
    int seen_nd[5] = {0};
    for (uint32_t c = 0; c < nc; c++) {
        float hf[3];
        uint32_t flags[3];
        rd(hf, sizeof hf, f);
        rd(flags, sizeof flags, f);
        zt_adafactor_hparams hp;
        zt_adafactor_defaults(&hp);
        hp.lr = hf[0];
        hp.beta1 = hf[1];
        hp.weight_decay = hf[2];
        hp.relative_step = (int)flags[0];
        hp.scale_parameter = (int)flags[1];
        hp.warmup_init = (int)flags[2];
        /* each tensor in pieces that cut its rows (and matrices): [0, n/3 + 7), [.., 2n/3 -
         * 5), [.., n); a vector in two; and as one whole piece */
        tens cut[MAX_T], whole[MAX_T];
        float *g[MAX_T], *ep[MAX_T], *em[MAX_T];
        for (uint32_t ti = 0; ti < nt; ti++) {
            zt_adafactor_shape sh = shape_of((int)dims[ti][0], dims[ti] + 1);
            size_t n = sh.batch * sh.rows * (sh.cols ? sh.cols : 1);
            assert_true(n > 8 && n < (1u << 20));
            size_t mcut[4] = {0, n / 3 + 7, 2 * n / 3 - 5, n}, vcut[4] = {0, n / 2 + 3, n, n};
            size_t wcut[4] = {0, n, n, n};
            tens_init(&cut[ti], sh, sh.cols ? mcut : vcut, sh.cols ? 3 : 2);
            tens_init(&whole[ti], sh, wcut, 1);
            rd(cut[ti].p, n * 4, f);
            memcpy(whole[ti].p, cut[ti].p, n * 4);
            g[ti] = malloc(n * 4);
            ep[ti] = malloc(n * 4);
            em[ti] = malloc((sh.cols ? cut[ti].nrow + cut[ti].ncol : n) * 4);
            seen_nd[dims[ti][0]] = 1;
        }
        for (uint32_t s = 1; s <= steps; s++) {
            hp.step = s;
            for (uint32_t ti = 0; ti < nt; ti++)
                rd(g[ti], cut[ti].numel * 4, f);
            for (uint32_t ti = 0; ti < nt; ti++) {
                tens *t = &cut[ti];
                tens_step(t, &hp, g[ti]);
                tens_step(&whole[ti], &hp, g[ti]);
                rd(ep[ti], t->numel * 4, f);
                if (t->sh.cols) {
                    rd(em[ti], (t->nrow + t->ncol) * 4, f);
                    near_rel("exp_avg_sq_row", (int)ti, (int)c, (int)s, t->row, em[ti], t->nrow);
                    near_rel("exp_avg_sq_col", (int)ti, (int)c, (int)s, t->col,
                             em[ti] + t->nrow, t->ncol);
                } else {
                    rd(em[ti], t->numel * 4, f);
                    near_rel("exp_avg_sq", (int)ti, (int)c, (int)s, t->v, em[ti], t->numel);
                }
                near_p("p", (int)ti, (int)c, (int)s, t, ep[ti]);
                /* one whole piece: the same within the order of the double additions */
                near_p("p (one piece)", (int)ti, (int)c, (int)s, &whole[ti], ep[ti]);
            }
        }
        for (uint32_t ti = 0; ti < nt; ti++) {
            tens_free(&cut[ti]);
            tens_free(&whole[ti]);
            free(g[ti]); free(ep[ti]); free(em[ti]);
        }
    }
    assert_int_equal(fgetc(f), EOF);
    fclose(f);
    assert_true(seen_nd[1] && seen_nd[2] && seen_nd[3] && seen_nd[4]);
    printf("adafactor: %u configurations x %u steps x %u tensors: max |p - ref| / max |p| = "
           "%.3g (limit 1e-6)\n", nc, steps, nt, worst_ratio);
}

/* The defaults are transformers' and the learning rate follows its rules. */
static void test_defaults_and_lr(void **state)
{
    (void)state;
    zt_adafactor_hparams hp;
    zt_adafactor_defaults(&hp);
    assert_true(hp.eps1 == 1e-30f && hp.eps2 == 1e-3f && hp.clip_threshold == 1.0f &&
                hp.decay_rate == -0.8f && hp.beta1 < 0 && hp.relative_step &&
                hp.scale_parameter && !hp.warmup_init);
    zt_adafactor_shape sh = {4, 0, 1};
    double rs[4] = {0}, cs[1] = {0};
    float row[4] = {0}, col[1] = {0};
    zt_adafactor_sums s = {rs, cs, 4 * 0.25}; /* rms(p) = 0.5 */
    hp.step = 100; /* min(1e-2, 1/sqrt(100) = 0.1) = 1e-2, times max(1e-3, 0.5) */
    assert_true(fabsf(zt_adafactor_stats(&sh, &hp, &s, row, col) - 0.005f) < 1e-9f);
    hp.step = 10000; /* 1/sqrt(t) = 1e-2 */
    s.p_sumsq = 0.0; /* rms 0: the scale floor eps2 */
    assert_true(fabsf(zt_adafactor_stats(&sh, &hp, &s, row, col) - 1e-5f) < 1e-12f);
    hp.warmup_init = 1;
    hp.step = 10; /* min(1e-5, 1/sqrt(10)) */
    assert_true(fabsf(zt_adafactor_stats(&sh, &hp, &s, row, col) - 1e-8f) < 1e-14f);
    hp.relative_step = 0;
    hp.scale_parameter = 0;
    hp.lr = 0.25f;
    assert_true(zt_adafactor_stats(&sh, &hp, &s, row, col) == 0.25f);
}

/* one step over a 300 x 700 matrix cut at an odd offset and a vector: the sums (in fixed
 * chunks, rows and columns) and the update give the same bits with 1 and 2 threads */
static void step_with_threads(int threads, double *sums, float *p, float *v)
{
    enum { R = 300, C = 700, N = R * C, OFF = 1234 };
    static float g[N], row[R], col[C];
    static double rs[R], cs[C];
    zt_adafactor_shape sh = {R, C, 1}, vs = {N, 0, 1};
    zt_adafactor_hparams hp;
    zt_adafactor_defaults(&hp);
    hp.beta1 = -1.0f;
    omp_set_num_threads(threads);
    for (size_t k = 0; k < N; k++) {
        p[k] = sinf((float)k * 0.37f) * 0.1f;
        g[k] = cosf((float)k * 1.1f) * 0.01f;
        v[k] = 0.0f;
    }
    memset(rs, 0, sizeof rs);
    memset(cs, 0, sizeof cs);
    memset(row, 0, sizeof row);
    memset(col, 0, sizeof col);
    zt_adafactor_sums s = {rs, cs, 0.0};
    zt_adafactor_sums_add(&sh, OFF, N - OFF, p + OFF, g + OFF, 0.9f, hp.eps1, &s);
    zt_adafactor_sums_add(&sh, 0, OFF, p, g, 0.9f, hp.eps1, &s);
    float lr = zt_adafactor_stats(&sh, &hp, &s, row, col);
    double usq = zt_adafactor_precondition(&sh, &hp, 0, N, g, 0.9f, row, col, NULL, NULL, NULL);
    double vsq = zt_adafactor_precondition(&vs, &hp, 0, N, g, 0.9f, NULL, NULL, v, NULL, NULL);
    zt_adafactor_apply_grad(&sh, &hp, 0, N, g, 0.9f, row, col, NULL, usq, lr, NULL, p, 1, NULL);
    sums[0] = s.p_sumsq;
    sums[1] = usq;
    sums[2] = vsq;
    sums[3] = rs[17] + cs[650];
}

static void test_threads(void **state)
{
    static float p1[210000], p2[210000], v1[210000], v2[210000];
    double s1[4], s2[4];
    (void)state;
    step_with_threads(1, s1, p1, v1);
    step_with_threads(2, s2, p2, v2);
    omp_set_num_threads(0 + omp_get_num_procs());
    assert_memory_equal(s1, s2, sizeof s1);
    assert_memory_equal(p1, p2, sizeof p1);
    assert_memory_equal(v1, v2, sizeof v1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_reference),
        cmocka_unit_test(test_defaults_and_lr),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
