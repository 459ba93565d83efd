/* test_adafactor.c - Adafactor over tensor pieces (optimizer/adafactor.c) against a torch
 * transcription of transformers' Adafactor.step on whole tensors (tests/ref/adafactor_ref.py,
 * its output in tests/fixtures/adafactor/case.bin): three configurations (the defaults; a
 * fixed lr with beta1 and weight decay; warmup_init), five steps, a 48 x 40 matrix cut into
 * three pieces that do not follow its rows (as a ZeRO shard cuts it) and a vector in two.
 *
 * Tolerance: the reference sums in float32 (torch's vectorised, cascaded sums: a relative
 * error of a few float32 epsilons, log2(1920) x 2^-24 ~ 7e-7) and may fuse multiply-adds;
 * the C sums in double and rounds once. The moments may therefore differ by a few 1e-7
 * relative, which the rsqrt and the RMS normalisation carry into the update: moments within
 * 2e-5 relative; each step's update within 2e-5 relative, carried through the first moment
 * (weight beta1) and added up in the parameter with 4 float32 ulps per step. The same run
 * as one whole piece must agree as closely (only the order of the double additions
 * differs). */
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
    size_t numel, cut[4];
    int pieces;
    float *p, *row, *col, *v, *m, *u;
    double *rs, *cs;
    float *bound_m, *bound_p; /* error bounds carried through the momentum and the steps */
} tens;

static void tens_init(tens *t, size_t rows, size_t cols, const size_t *cut, int pieces)
{
    memset(t, 0, sizeof *t);
    t->sh = (zt_adafactor_shape){rows, cols};
    t->numel = rows * (cols ? cols : 1);
    t->pieces = pieces;
    memcpy(t->cut, cut, sizeof t->cut);
    t->p = calloc(t->numel, 4);
    t->v = calloc(t->numel, 4);
    t->m = calloc(t->numel, 4);
    t->u = calloc(t->numel, 4);
    t->row = calloc(rows, 4);
    t->col = calloc(cols ? cols : 1, 4);
    t->rs = calloc(rows, 8);
    t->cs = calloc(cols ? cols : 1, 8);
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
    memset(t->rs, 0, t->sh.rows * 8);
    memset(t->cs, 0, (t->sh.cols ? t->sh.cols : 1) * 8);
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

static void near_rel(const char *what, int cfg, int step, const float *got, const float *want,
                     size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabsf(got[i] - want[i]) <= 2e-5f * fabsf(want[i])))
            fail_msg("config %d step %d: %s[%zu] = %.9g, reference %.9g", cfg, step, what, i,
                     got[i], want[i]);
}

static void near_p(const char *what, int cfg, int step, const tens *t, const float *want)
{
    for (size_t i = 0; i < t->numel; i++)
        if (!(fabsf(t->p[i] - want[i]) <= t->bound_p[i]))
            fail_msg("config %d step %d: %s[%zu] = %.9g, reference %.9g (bound %.3g)", cfg,
                     step, what, i, t->p[i], want[i], t->bound_p[i]);
}

static void test_against_reference(void **state)
{
    (void)state;
    FILE *f = fopen(fixture_path(), "rb");
    char magic[4];
    uint32_t nc, steps;
    if (!f)
        fail_msg("cannot open %s", fixture_path());
    rd(magic, 4, f);
    assert_memory_equal(magic, "ZTAF", 4);
    rd(&nc, 4, f);
    rd(&steps, 4, f);
    assert_true(nc >= 1 && nc <= 8 && steps >= 1 && steps <= 50);
    for (uint32_t c = 0; c < nc; c++) {
        float hf[3];
        uint32_t flags[3], dims[3];
        rd(hf, sizeof hf, f);
        rd(flags, sizeof flags, f);
        rd(dims, sizeof dims, f);
        size_t R = dims[0], C = dims[1], N = dims[2], RC = R * C;
        assert_true(R > 0 && C > 0 && N > 0 && RC < (1u << 20));
        zt_adafactor_hparams hp;
        zt_adafactor_defaults(&hp);
        hp.lr = hf[0];
        hp.beta1 = hf[1];
        hp.weight_decay = hf[2];
        hp.relative_step = (int)flags[0];
        hp.scale_parameter = (int)flags[1];
        hp.warmup_init = (int)flags[2];
        /* pieces that cut rows: [0, RC/3 + 7), [.., 2RC/3 - 5), [.., RC); the vector in two */
        size_t mcut[4] = {0, RC / 3 + 7, 2 * RC / 3 - 5, RC}, vcut[4] = {0, N / 2 + 3, N, N};
        size_t wcut[4] = {0, RC, RC, RC}, wvcut[4] = {0, N, N, N};
        tens mat, vec, whole, wvec;
        tens_init(&mat, R, C, mcut, 3);
        tens_init(&vec, N, 0, vcut, 2);
        tens_init(&whole, R, C, wcut, 1);
        tens_init(&wvec, N, 0, wvcut, 1);
        rd(mat.p, RC * 4, f);
        rd(vec.p, N * 4, f);
        memcpy(whole.p, mat.p, RC * 4);
        memcpy(wvec.p, vec.p, N * 4);
        float *gm = malloc(RC * 4), *gv = malloc(N * 4), *ep = malloc(RC * 4),
              *evp = malloc(N * 4), *er = malloc(R * 4), *ec = malloc(C * 4),
              *ev = malloc(N * 4);
        for (uint32_t s = 1; s <= steps; s++) {
            hp.step = s;
            rd(gm, RC * 4, f);
            rd(gv, N * 4, f);
            tens_step(&mat, &hp, gm);
            tens_step(&vec, &hp, gv);
            tens_step(&whole, &hp, gm);
            tens_step(&wvec, &hp, gv);
            rd(ep, RC * 4, f);
            rd(evp, N * 4, f);
            rd(er, R * 4, f);
            rd(ec, C * 4, f);
            rd(ev, N * 4, f);
            near_rel("row", (int)c, (int)s, mat.row, er, R);
            near_rel("col", (int)c, (int)s, mat.col, ec, C);
            near_rel("v", (int)c, (int)s, vec.v, ev, N);
            near_p("p (matrix)", (int)c, (int)s, &mat, ep);
            near_p("p (vector)", (int)c, (int)s, &vec, evp);
            /* one whole piece: the same within the order of the double additions */
            near_p("p (matrix, one piece)", (int)c, (int)s, &whole, ep);
            near_p("p (vector, one piece)", (int)c, (int)s, &wvec, evp);
        }
        tens_free(&mat);
        tens_free(&vec);
        tens_free(&whole);
        tens_free(&wvec);
        free(gm); free(gv); free(ep); free(evp); free(er); free(ec); free(ev);
    }
    assert_int_equal(fgetc(f), EOF);
    fclose(f);
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
    zt_adafactor_shape sh = {4, 0};
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
    zt_adafactor_shape sh = {R, C}, vs = {N, 0};
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
