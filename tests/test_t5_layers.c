/* test_t5_layers.c - finite-difference gradient checks and property tests for T5's kernels
 * (models/layers.h, "T5's pieces"): rmsnorm, t5_bucket and the position bias, the general
 * multi-head attention (bias, key mask, causal, cross, div, dropout), the activations, mul,
 * lookup and scale. Not the BERT kernels (test_layers.c) nor the assembled model (golden).
 *
 * FD method. L = sum(out * R) for a fixed random R, accumulated in double from the fp32
 * forward; the analytic gradient is the backward with dout = R; the numeric one is the
 * central difference (L(x+) - L(x-)) / (x+ - x-), x+- = fl(x +- h), h = 1e-2 (the
 * denominator is the exact difference of the rounded points). Two error sources:
 *  - truncation, h^2/6 |L'''|: inputs are O(1) and every kernel is smooth on that scale
 *    (scores of a few units, |L'''| of a few |L'|), so about 1e-4 of max|analytic| at most
 *    (none for the linear maps: posbias, v -> ctx): FD_RTOL = 1e-3 of max|analytic|;
 *  - rounding: each fp32 output carries an error of a few ulps of its scale, k u s_j with
 *    u = 2^-24 and s_j = |out_j| + mean|out| (the mean covers a sum that cancels, such as
 *    ctx = sum_j p_j v_j); the products R_j out_j of the outputs a perturbation does not
 *    change are bit-identical in L+ and L-, so the quotient errs by at most
 *    k u (A+ + A-) / (2h), A = sum over the changed outputs of |R_j| s_j (measured per
 *    perturbation). FD_ROUND = k = 4: a few roundings per output (short fp32 sums, the
 *    4-ulp exp, rstd's three roundings): eps32 |L| / h, restricted to the part of L that
 *    moves.
 * tol = FD_RTOL * max|ana| + FD_ROUND * u * (A+ + A-) / (2h), per index: 1.0e-3 to 1.3e-3
 * of max|ana| in the cases below, where the worst errors seen are 0.06 of tol or less. A
 * wrong or missing term gives errors of order max|ana|; each check also runs against a
 * deliberately wrong gradient (a 2% error on one element, a missing factor, the wrong mask
 * or direction) and must reject it (fd_reject): they are seen at 15 to 1400 x tol.
 * ZT_FD_VERBOSE=1 prints every check's worst error / tolerance. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/rng.h"
#include "../models/layers.h"
#include "../models/vmath.h"

#define U32 0x1p-24 /* fp32 unit roundoff */

enum { FD_ROUND = 4 };
static const double FD_STEP = 1e-2, FD_RTOL = 1e-3;

static int verbose(void)
{
    const char *e = getenv("ZT_FD_VERBOSE");
    return e && *e && *e != '0';
}

static void fill(float *x, size_t n, uint64_t seed, float scale)
{
    zt_rng_normal(seed, 0, 7, x, n);
    for (size_t i = 0; i < n; i++)
        x[i] *= scale;
}

static float *vec(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof(float));
    assert_non_null(p);
    return p;
}

static float *copy_of(const float *x, size_t n)
{
    float *p = vec(n);
    memcpy(p, x, n * sizeof(float));
    return p;
}

static double dot(const float *a, const float *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

static double max_abs(const float *x, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs(x[i]));
    return m;
}

/* ---- the finite-difference checker ---------------------------------------------------- */

typedef struct fd_case {
    double (*loss)(struct fd_case *c); /* runs the forward into out, returns dot(out, R) */
    void *ctx;
    const float *out, *R; /* the forward's output [n_out] and the loss weights */
    size_t n_out;
} fd_case;

typedef struct {
    double ratio, err, tol, max_ana, num, ana; /* the worst index's values */
    size_t worst;
} fd_result;

/* sum over the outputs that differ from base of |R_j| (|out_j| + mean) */
static double touched(const fd_case *c, const float *base, double mean)
{
    double a = 0.0;
    for (size_t j = 0; j < c->n_out; j++)
        if (memcmp(&c->out[j], &base[j], sizeof(float)) != 0)
            a += fabs(c->R[j]) * (fabs(base[j]) + mean);
    return a;
}

/* analytic ana[lo, hi) of input x against central differences of c->loss */
static fd_result fd_run(fd_case *c, float *x, const float *ana, size_t lo, size_t hi)
{
    fd_result r = {0};
    r.worst = lo;
    /* thousands of tiny forwards: one thread (a parallel region per call would dominate, and
     * on a loaded machine each costs a time slice); the results do not depend on the thread
     * count (test_threads_determinism), and the analytic side was computed with all of them */
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    c->loss(c);
    float *base = copy_of(c->out, c->n_out);
    double mean = 0.0;
    for (size_t j = 0; j < c->n_out; j++)
        mean += fabs(base[j]) / (double)c->n_out;
    for (size_t i = lo; i < hi; i++)
        r.max_ana = fmax(r.max_ana, fabs(ana[i]));
    r.ratio = -1.0;
    for (size_t i = lo; i < hi; i++) {
        float x0 = x[i], xp = (float)(x0 + FD_STEP), xm = (float)(x0 - FD_STEP);
        x[i] = xp;
        double lp = c->loss(c), ap = touched(c, base, mean);
        x[i] = xm;
        double lm = c->loss(c), am = touched(c, base, mean);
        x[i] = x0;
        double step = (double)xp - (double)xm, num = (lp - lm) / step;
        double err = fabs(num - ana[i]);
        double tol = FD_RTOL * r.max_ana + FD_ROUND * U32 * (ap + am) / step + 1e-30;
        double q = err <= INFINITY ? err / tol : INFINITY; /* NaN: worst of all */
        if (q > r.ratio) {
            r.ratio = q;
            r.err = err;
            r.tol = tol;
            r.num = num;
            r.ana = ana[i];
            r.worst = i;
        }
    }
    c->loss(c); /* leave the outputs of the unperturbed inputs */
    omp_set_num_threads(threads);
    free(base);
    return r;
}

static void fd_check_range(const char *name, fd_case *c, float *x, const float *ana,
                           size_t lo, size_t hi)
{
    fd_result r = fd_run(c, x, ana, lo, hi);
    if (verbose())
        print_message("  fd %-44s max|ana| %.3g  worst err %.2e tol %.2e (%.3f of tol)\n",
                      name, r.max_ana, r.err, r.tol, r.ratio);
    if (r.ratio > 1.0)
        fail_msg("%s: |numeric - analytic| = %.3g at index %zu (numeric %.7g, analytic %.7g), "
                 "tolerance %.3g (max|analytic| %.3g)", name, r.err, r.worst, r.num, r.ana,
                 r.tol, r.max_ana);
    if (!(r.max_ana > 0.0)) /* a check on an all-zero gradient proves nothing */
        fail_msg("%s: the analytic gradient is all zero", name);
}

static void fd_check(const char *name, fd_case *c, float *x, const float *ana, size_t n)
{
    fd_check_range(name, c, x, ana, 0, n);
}

/* the checker must reject a wrong gradient (it can fail) */
static void fd_reject(const char *name, fd_case *c, float *x, const float *wrong, size_t n)
{
    fd_result r = fd_run(c, x, wrong, 0, n);
    if (verbose())
        print_message("  fd %-44s rejected: worst err %.2e = %.1f x tol\n", name, r.err,
                      r.ratio);
    if (!(r.ratio > 1.0))
        fail_msg("%s: the checker accepted a wrong gradient (worst err %.3g, tol %.3g)", name,
                 r.err, r.tol);
}

/* a 2% error of the largest magnitude on one element must be seen */
static void fd_reject_bump(const char *name, fd_case *c, float *x, const float *ana, size_t n)
{
    float *w = copy_of(ana, n);
    w[n / 3] += (float)(0.02 * max_abs(ana, n));
    fd_reject(name, c, x, w, n);
    free(w);
}

/* ---- rmsnorm -------------------------------------------------------------------------- */

typedef struct { int M, C; float eps, *x, *w, *out, *rstd, *R; } rms_ctx;

static double rms_loss(fd_case *c)
{
    rms_ctx *r = c->ctx;
    rmsnorm_forward(r->out, r->rstd, r->x, r->w, r->M, r->C, r->eps);
    return dot(r->out, r->R, (size_t)r->M * r->C);
}

static void rms_case(float eps, uint64_t seed)
{
    rms_ctx r = {.M = 5, .C = 131, .eps = eps}; /* C: two 64-channel chunks and a tail */
    size_t n = (size_t)r.M * r.C;
    r.x = vec(n); r.w = vec(r.C); r.out = vec(n); r.R = vec(n); r.rstd = vec(r.M);
    fill(r.x, n, seed, 1.0f); fill(r.w, r.C, seed + 1, 1.0f); fill(r.R, n, seed + 2, 1.0f);
    for (int m = 0; m < r.M; m++) /* rows of different scales, eps mattering more or less */
        for (int c = 0; c < r.C; c++)
            r.x[(size_t)m * r.C + c] *= eps > 0.01f ? 0.3f + 0.2f * m : 0.5f + 0.3f * m;
    fd_case c = {rms_loss, &r, r.out, r.R, n};
    rms_loss(&c);
    for (int m = 0; m < r.M; m++) { /* rstd = 1 / sqrt(mean x^2 + eps) */
        double ss = 0.0;
        for (int k = 0; k < r.C; k++)
            ss += (double)r.x[(size_t)m * r.C + k] * r.x[(size_t)m * r.C + k];
        double want = 1.0 / sqrt(ss / r.C + eps);
        assert_true(fabs(r.rstd[m] - want) <= 4 * U32 * want);
    }
    float *dx = vec(n), *dw = vec(r.C);
    rmsnorm_backward(dx, dw, r.R, r.x, r.rstd, r.w, r.M, r.C);
    char name[64];
    snprintf(name, sizeof name, "rmsnorm dinp (eps %g)", eps);
    fd_check(name, &c, r.x, dx, n);
    snprintf(name, sizeof name, "rmsnorm dw (eps %g)", eps);
    fd_check(name, &c, r.w, dw, r.C);
    /* wrong backwards: dx without the projection on xh (rs * g), dw without rstd */
    float *bad = vec(n), *badw = vec(r.C);
    for (int m = 0; m < r.M; m++)
        for (int k = 0; k < r.C; k++) {
            size_t i = (size_t)m * r.C + k;
            bad[i] = r.rstd[m] * r.R[i] * r.w[k];
            badw[k] += r.R[i] * r.x[i];
        }
    fd_reject("rmsnorm dinp without the rstd term", &c, r.x, bad, n);
    fd_reject("rmsnorm dw without rstd", &c, r.w, badw, r.C);
    fd_reject_bump("rmsnorm dinp + 2% on one element", &c, r.x, dx, n);
    /* backward accumulates (+=) into both */
    float *dx2 = vec(n), *dw2 = vec(r.C);
    fill(dx2, n, seed + 3, 1.0f); fill(dw2, r.C, seed + 4, 1.0f);
    float *dx0 = copy_of(dx2, n), *dw0 = copy_of(dw2, r.C);
    rmsnorm_backward(dx2, dw2, r.R, r.x, r.rstd, r.w, r.M, r.C);
    for (size_t i = 0; i < n; i++)
        assert_true(fabs(dx2[i] - (dx0[i] + (double)dx[i])) <=
                    2 * U32 * (fabs(dx0[i]) + fabs(dx[i])));
    for (int k = 0; k < r.C; k++)
        assert_true(fabs(dw2[k] - (dw0[k] + (double)dw[k])) <=
                    2 * U32 * (fabs(dw0[k]) + fabs(dw[k])));
    free(r.x); free(r.w); free(r.out); free(r.R); free(r.rstd); free(dx); free(dw);
    free(bad); free(badw); free(dx2); free(dw2); free(dx0); free(dw0);
}

static void test_rmsnorm_fd(void **state)
{
    (void)state;
    rms_case(1e-6f, 100);
    rms_case(0.3f, 110); /* eps comparable with mean(x^2) */
}

/* mean_c (y/w)^2 = mean x^2 rstd^2 = 1 / (1 + eps / mean x^2). y = w (x rs): two roundings
 * on top of rs's 3.5u (the double sum cast to float, + eps, sqrtf, the division), y/w one
 * more: within 6.5u, its square within 13u = 7.7e-7 relative: tolerance 2e-6 relative. Row
 * scales 1e-3 .. 1e2 make eps / mean x^2 range from 1e-10 to 2.5e5 (eps = 1e-6 and 0.25);
 * an eps outside the square root, or missing, is off by far more in some row. */
static void test_rmsnorm_property(void **state)
{
    (void)state;
    enum { M = 6, C = 77 };
    static const float eps_list[2] = {1e-6f, 0.25f};
    float *x = vec(M * C), *w = vec(C), *y = vec(M * C), rstd[M];
    fill(x, M * C, 120, 1.0f);
    fill(w, C, 121, 1.0f);
    for (int c = 0; c < C; c++)
        w[c] = 0.5f + fabsf(w[c]); /* away from 0: we divide by it */
    for (int m = 0; m < M; m++)
        for (int c = 0; c < C; c++)
            x[m * C + c] *= powf(10.0f, (float)m - 3.0f);
    for (int e = 0; e < 2; e++) {
        rmsnorm_forward(y, rstd, x, w, M, C, eps_list[e]);
        for (int m = 0; m < M; m++) {
            double ms = 0.0, my = 0.0;
            for (int c = 0; c < C; c++) {
                double xv = x[m * C + c], yv = (double)y[m * C + c] / w[c];
                ms += xv * xv / C;
                my += yv * yv / C;
            }
            double want = 1.0 / (1.0 + eps_list[e] / ms);
            if (!(fabs(my - want) <= 2e-6 * want))
                fail_msg("rmsnorm eps %g row %d: mean (y/w)^2 = %.9g, want %.9g", eps_list[e],
                         m, my, want);
        }
    }
    /* a zero row: y = 0, rstd = 1/sqrt(eps) */
    memset(x, 0, sizeof(float) * C);
    rmsnorm_forward(y, rstd, x, w, 1, C, 1e-6f);
    assert_true(max_abs(y, C) == 0.0);
    assert_true(fabs(rstd[0] - 1e3) <= 1e3 * 4 * U32);
    free(x); free(w); free(y);
}

/* ---- t5_bucket ------------------------------------------------------------------------- */

/* Hugging Face's T5Attention._relative_position_bucket, line by line, on one position:
 * relative_position.float() / max_exact, torch.log and the two scalar operations in float32
 * (a Python scalar is cast to the tensor's dtype), .to(torch.long) truncating toward 0. */
static int hf_bucket(int relative_position, int bidirectional, int num_buckets,
                     int max_distance)
{
    int relative_buckets = 0;
    if (bidirectional) {
        num_buckets /= 2;
        relative_buckets += (relative_position > 0) * num_buckets;
        relative_position = abs(relative_position);
    } else {
        relative_position = -(relative_position < 0 ? relative_position : 0);
    }
    int max_exact = num_buckets / 2;
    int is_small = relative_position < max_exact;
    if (is_small)
        return relative_buckets + relative_position;
    float t = logf((float)relative_position / (float)max_exact);
    t = t / (float)log((double)max_distance / (double)max_exact); /* math.log: a double */
    t = t * (float)(num_buckets - max_exact);
    long large = max_exact + (long)t;
    if (large > num_buckets - 1)
        large = num_buckets - 1;
    return relative_buckets + (int)large;
}

/* the same formula in exact (double) arithmetic: where it differs, float32 matters */
static int exact_bucket(int n, int bidir, int NB, int maxd)
{
    int off = 0;
    if (bidir) {
        NB /= 2;
        off = n > 0 ? NB : 0;
        n = abs(n);
    } else {
        n = n < 0 ? -n : 0;
    }
    int ex = NB / 2;
    if (n < ex)
        return off + n;
    int big = ex + (int)floor(log((double)n / ex) / log((double)maxd / ex) * (NB - ex));
    return off + (big < NB - 1 ? big : NB - 1);
}

static void test_t5_bucket(void **state)
{
    (void)state;
    static const int nbs[3] = {8, 32, 64}, mds[2] = {16, 128};
    for (int bidir = 1; bidir >= 0; bidir--)
        for (int a = 0; a < 3; a++)
            for (int m = 0; m < 2; m++) {
                int NB = nbs[a], maxd = mds[m], half = bidir ? NB / 2 : NB, exact = half / 2;
                if (maxd <= exact) {
                    /* HF divides by log(max_distance / max_exact) <= 0: inf or NaN cast to
                     * long, an index out of range; t5_bucket's results are out of [0, NB)
                     * there too. Outside the formula's domain: nothing to compare */
                    print_message("  t5_bucket: NB %d max_distance %d %s: max_distance <= "
                                  "max_exact %d, outside the formula's domain, skipped\n",
                                  NB, maxd, bidir ? "bidirectional" : "causal", exact);
                    continue;
                }
                int prev[2] = {-1, -1}, fragile = 0;
                for (int d = 0; d <= 300; d++)
                    for (int s = 0; s < (d ? 2 : 1); s++) {
                        int n = s ? -d : d, b = t5_bucket(n, bidir, NB, maxd);
                        int want = hf_bucket(n, bidir, NB, maxd);
                        if (b != want)
                            fail_msg("t5_bucket(%d, %s, NB %d, max_distance %d) = %d, Hugging "
                                     "Face's gives %d", n, bidir ? "bidir" : "causal", NB, maxd,
                                     b, want);
                        fragile += exact_bucket(n, bidir, NB, maxd) != want;
                        assert_true(b >= 0 && b < NB);
                        int off = bidir && n > 0 ? NB / 2 : 0;
                        if (bidir)
                            assert_true(n > 0 ? b >= NB / 2 : b < NB / 2);
                        else if (n > 0)
                            assert_int_equal(b, 0);
                        if (!bidir && n > 0)
                            continue;
                        if (d < exact)
                            assert_int_equal(b, off + d); /* one bucket per position */
                        if (d >= maxd)
                            assert_int_equal(b, off + half - 1); /* saturated */
                        int *p = &prev[n > 0];
                        assert_true(b >= *p); /* non-decreasing in |n| within a half */
                        *p = b;
                    }
                if (verbose())
                    print_message("  t5_bucket NB %d maxd %d %s: HF's float32 formula and "
                                  "exact arithmetic differ at %d of 601 positions\n", NB, maxd,
                                  bidir ? "bidir" : "causal", fragile);
            }
    /* a few values worked by hand for T5's NB 32, max_distance 128 */
    static const int bi[][2] = {{0, 0}, {-1, 1}, {1, 17}, {-8, 8}, {8, 24}, {-20, 10},
                                {20, 26}, {-127, 15}, {127, 31}, {300, 31}, {-300, 15}};
    for (size_t i = 0; i < sizeof bi / sizeof bi[0]; i++)
        assert_int_equal(t5_bucket(bi[i][0], 1, 32, 128), bi[i][1]);
    static const int ca[][2] = {{5, 0}, {0, 0}, {-5, 5}, {-16, 16}, {-40, 23}, {-300, 31}};
    for (size_t i = 0; i < sizeof ca / sizeof ca[0]; i++)
        assert_int_equal(t5_bucket(ca[i][0], 0, 32, 128), ca[i][1]);
}

/* ---- position bias ---------------------------------------------------------------------- */

typedef struct { int bidir, NB, maxd, Tq, Tk, H; float *table, *bias, *R; } pb_ctx;

static double pb_loss(fd_case *c)
{
    pb_ctx *p = c->ctx;
    posbias_forward(p->bias, p->table, p->bidir, p->NB, p->maxd, p->Tq, p->Tk, p->H);
    return dot(p->bias, p->R, (size_t)p->H * p->Tq * p->Tk);
}

/* posbias is linear in the table: no truncation error, and the central difference of the
 * double-accumulated loss is exact up to ~1e-16 |L| / h, far inside the tolerance */
static void pb_case(int bidir, int Tq, int Tk)
{
    pb_ctx p = {.bidir = bidir, .NB = 32, .maxd = 40, .Tq = Tq, .Tk = Tk, .H = 3};
    size_t nt = (size_t)p.NB * p.H, nb = (size_t)p.H * Tq * Tk;
    p.table = vec(nt); p.bias = vec(nb); p.R = vec(nb);
    fill(p.table, nt, 200 + bidir, 1.0f); fill(p.R, nb, 210 + bidir, 1.0f);
    fd_case c = {pb_loss, &p, p.bias, p.R, nb};
    pb_loss(&c);
    for (int h = 0; h < p.H; h++) /* bias[h,i,j] = table[bucket(j - i), h], bit for bit */
        for (int i = 0; i < Tq; i++)
            for (int j = 0; j < Tk; j++) {
                float want = p.table[(size_t)hf_bucket(j - i, bidir, p.NB, p.maxd) * p.H + h];
                assert_true(memcmp(&p.bias[((size_t)h * Tq + i) * Tk + j], &want, 4) == 0);
            }
    float *dt = vec(nt);
    posbias_backward(dt, p.R, bidir, p.NB, p.maxd, Tq, Tk, p.H);
    double *ref = calloc(nt, sizeof *ref);
    assert_non_null(ref);
    for (int h = 0; h < p.H; h++)
        for (int i = 0; i < Tq; i++)
            for (int j = 0; j < Tk; j++)
                ref[(size_t)hf_bucket(j - i, bidir, p.NB, p.maxd) * p.H + h] +=
                    p.R[((size_t)h * Tq + i) * Tk + j];
    for (size_t i = 0; i < nt; i++)
        assert_true(fabs(dt[i] - ref[i]) <= 2 * U32 * fabs(ref[i]));
    fd_check(bidir ? "posbias dtable (bidirectional)" : "posbias dtable (causal)", &c, p.table,
             dt, nt);
    /* wrong backwards: the other direction's buckets; for a square one, bucket(i - j) */
    float *bad = vec(nt);
    posbias_backward(bad, p.R, !bidir, p.NB, p.maxd, Tq, Tk, p.H);
    fd_reject("posbias dtable with the other direction", &c, p.table, bad, nt);
    if (Tq == Tk) {
        float *rt = vec(nb);
        for (int h = 0; h < p.H; h++)
            for (int i = 0; i < Tq; i++)
                for (int j = 0; j < Tk; j++)
                    rt[((size_t)h * Tq + i) * Tk + j] = p.R[((size_t)h * Tq + j) * Tk + i];
        memset(bad, 0, nt * sizeof(float));
        posbias_backward(bad, rt, bidir, p.NB, p.maxd, Tq, Tk, p.H);
        fd_reject("posbias dtable with bucket(i - j)", &c, p.table, bad, nt);
        free(rt);
    }
    /* accumulates: dtable0 + the sums, one float addition each */
    float *acc = vec(nt);
    fill(acc, nt, 220, 1.0f);
    float *acc0 = copy_of(acc, nt);
    posbias_backward(acc, p.R, bidir, p.NB, p.maxd, Tq, Tk, p.H);
    for (size_t i = 0; i < nt; i++) {
        float want = acc0[i] + dt[i];
        assert_true(memcmp(&acc[i], &want, 4) == 0);
    }
    free(p.table); free(p.bias); free(p.R); free(dt); free(ref); free(bad); free(acc);
    free(acc0);
}

static void test_posbias(void **state)
{
    (void)state;
    pb_case(1, 48, 48); /* |j - i| up to 47 > max_distance 40: saturated buckets too */
    pb_case(0, 48, 48);
    pb_case(1, 5, 19);  /* Tq != Tk */
    pb_case(0, 11, 4);
}

/* ---- multi-head attention ------------------------------------------------------------- */

typedef struct {
    const char *name;
    int B, Tq, Tk, H, D, causal, bias;
    float div, p;
    const char *mask; /* B*Tk of '1' (key kept) and '0' (masked), or NULL */
} mha_cfg;

typedef struct {
    int B, Tq, Tk, H, D, causal, slots;
    float div;
    float *q, *k, *v, *bias, *ctx, *att, *R, *scratch;
    int64_t *kmask;
    zt_dropout drop;
    const zt_dropout *dp; /* &drop, or NULL when p = 0 */
} mha_ctx;

static size_t nq_of(const mha_ctx *a) { return (size_t)a->B * a->Tq * a->H * a->D; }
static size_t nk_of(const mha_ctx *a) { return (size_t)a->B * a->Tk * a->H * a->D; }
static size_t nb_of(const mha_ctx *a) { return (size_t)a->H * a->Tq * a->Tk; }
static size_t na_of(const mha_ctx *a) { return (size_t)a->B * nb_of(a); }

/* allocations of exactly the documented sizes (ASan sees an overrun) */
static void mha_setup(mha_ctx *a, const mha_cfg *cfg, int slots, uint64_t seed)
{
    *a = (mha_ctx){.B = cfg->B, .Tq = cfg->Tq, .Tk = cfg->Tk, .H = cfg->H, .D = cfg->D,
                   .causal = cfg->causal, .slots = slots, .div = cfg->div};
    size_t nq = nq_of(a), nk = nk_of(a);
    a->q = vec(nq); a->k = vec(nk); a->v = vec(nk); a->ctx = vec(nq); a->R = vec(nq);
    a->att = vec(na_of(a));
    a->scratch = vec((size_t)slots * 2 * a->Tq * a->Tk);
    fill(a->q, nq, seed, 0.7f); fill(a->k, nk, seed + 1, 0.7f); fill(a->v, nk, seed + 2, 1.0f);
    fill(a->R, nq, seed + 3, 1.0f);
    if (cfg->bias) {
        a->bias = vec(nb_of(a));
        fill(a->bias, nb_of(a), seed + 4, 1.0f);
    }
    if (cfg->mask) {
        assert_int_equal(strlen(cfg->mask), (size_t)a->B * a->Tk);
        a->kmask = calloc((size_t)a->B * a->Tk, sizeof *a->kmask);
        assert_non_null(a->kmask);
        for (int i = 0; i < a->B * a->Tk; i++)
            a->kmask[i] = cfg->mask[i] == '1';
    }
    a->drop = (zt_dropout){cfg->p, 4242, 1000, zt_rng_stream(5, ZT_RNG_DROP_ATT)};
    a->dp = cfg->p > 0.0f ? &a->drop : NULL;
}

static void mha_free(mha_ctx *a)
{
    free(a->q); free(a->k); free(a->v); free(a->ctx); free(a->R); free(a->att);
    free(a->scratch); free(a->bias); free(a->kmask);
}

static void mha_fwd(mha_ctx *a, float *att)
{
    mha_forward(a->ctx, att, a->q, a->k, a->v, a->bias, a->kmask, a->causal, a->div, a->dp,
                a->scratch, a->slots, a->B, a->Tq, a->Tk, a->H, a->D);
}

static void mha_bwd(mha_ctx *a, float *dq, float *dk, float *dv, float *dbias, const float *att,
                    const zt_dropout *dp)
{
    mha_backward(dq, dk, dv, dbias, a->R, att, a->q, a->k, a->v, a->div, dp, a->scratch,
                 a->slots, a->B, a->Tq, a->Tk, a->H, a->D);
}

static double mha_loss(fd_case *c)
{
    mha_ctx *a = c->ctx;
    mha_fwd(a, a->att);
    return dot(a->ctx, a->R, nq_of(a));
}

static int key_masked(const mha_ctx *a, int b, int i, int j)
{
    return (a->kmask && a->kmask[(size_t)b * a->Tk + j] == 0) || (a->causal && j > i);
}

/* att against the layers.h definition evaluated in double: softmax over the kept keys of
 * q k^T / div + bias, exactly 0 on masked keys; a row with every key masked is uniform
 * (all its scores are -FLT_MAX, Hugging Face's additive finfo.min gives the same). Bounds:
 * each score's fp32 error is <= (D + 3) u (sum_d |q k| / div + |bias| + |s - max|) (the dot,
 * the division, the addition, the shift by the row maximum), exp adds 4 ulp and the
 * normalisation 2 roundings, so |p - ref| <= ref (2 max_j err_j + 8u), max over the row. Rows
 * sum to 1 within 2u (inv = fl(1 / sum) applied to each term) plus Tk roundings: 1e-6. */
static double worst_p, worst_ctx; /* the largest error / bound seen, for ZT_FD_VERBOSE */

static void check_probs(const mha_ctx *a, const char *name)
{
    int C = a->H * a->D;
    double *s = calloc((size_t)a->Tk, sizeof *s), *e = calloc((size_t)a->Tk, sizeof *e);
    assert_non_null(s);
    assert_non_null(e);
    for (int b = 0; b < a->B; b++)
        for (int h = 0; h < a->H; h++)
            for (int i = 0; i < a->Tq; i++) {
                const float *row = a->att + (((size_t)b * a->H + h) * a->Tq + i) * a->Tk;
                const float *qi = a->q + ((size_t)b * a->Tq + i) * C + (size_t)h * a->D;
                double mx = -INFINITY, sum = 0.0, psum = 0.0, emax = 0.0;
                int kept = 0;
                for (int j = 0; j < a->Tk; j++) {
                    const float *kj = a->k + ((size_t)b * a->Tk + j) * C + (size_t)h * a->D;
                    double dq = 0.0, mag = 0.0;
                    for (int d = 0; d < a->D; d++) {
                        dq += (double)qi[d] * kj[d];
                        mag += fabs((double)qi[d] * kj[d]);
                    }
                    double bb = a->bias ? a->bias[((size_t)h * a->Tq + i) * a->Tk + j] : 0.0;
                    s[j] = dq / a->div + bb;
                    e[j] = (a->D + 3) * U32 * (mag / a->div + fabs(bb));
                    if (!key_masked(a, b, i, j)) {
                        kept++;
                        mx = fmax(mx, s[j]);
                    }
                }
                for (int j = 0; j < a->Tk; j++)
                    if (!key_masked(a, b, i, j)) {
                        emax = fmax(emax, e[j] + (a->D + 3) * U32 * fabs(s[j] - mx));
                        sum += exp(s[j] - mx);
                    }
                for (int j = 0; j < a->Tk; j++) {
                    double ref = kept == 0 ? 1.0 / a->Tk
                                 : key_masked(a, b, i, j) ? 0.0 : exp(s[j] - mx) / sum;
                    psum += row[j];
                    if (kept && key_masked(a, b, i, j) && row[j] != 0.0f)
                        fail_msg("%s: att[%d,%d,%d,%d] = %g on a masked key (want exactly 0)",
                                 name, b, h, i, j, row[j]);
                    worst_p = fmax(worst_p, fabs(row[j] - ref) /
                                                (ref * (2 * emax + 8 * U32) + 1e-30));
                    if (!(fabs(row[j] - ref) <= ref * (2 * emax + 8 * U32) + 1e-30))
                        fail_msg("%s: att[%d,%d,%d,%d] = %.8g, softmax in double %.8g (bound "
                                 "%.3g)", name, b, h, i, j, row[j], ref,
                                 ref * (2 * emax + 8 * U32));
                }
                if (!(fabs(psum - 1.0) <= 1e-6))
                    fail_msg("%s: row (%d,%d,%d) of att sums to %.9g", name, b, h, i, psum);
            }
    free(s); free(e);
}

/* ctx = att v without dropout, in double from the kernel's own att: an fp32 sum of Tk terms
 * errs by at most (Tk + 1) u sum_j |p_j v_j| */
static void check_ctx(const mha_ctx *a, const char *name)
{
    int C = a->H * a->D;
    for (int b = 0; b < a->B; b++)
        for (int h = 0; h < a->H; h++)
            for (int i = 0; i < a->Tq; i++)
                for (int d = 0; d < a->D; d++) {
                    const float *row = a->att + (((size_t)b * a->H + h) * a->Tq + i) * a->Tk;
                    double ref = 0.0, mag = 0.0;
                    for (int j = 0; j < a->Tk; j++) {
                        double t = (double)row[j] * a->v[((size_t)b * a->Tk + j) * C +
                                                         (size_t)h * a->D + d];
                        ref += t;
                        mag += fabs(t);
                    }
                    float got = a->ctx[((size_t)b * a->Tq + i) * C + (size_t)h * a->D + d];
                    double bound = (a->Tk + 1) * U32 * mag + 1e-30;
                    worst_ctx = fmax(worst_ctx, fabs(got - ref) / bound);
                    if (!(fabs(got - ref) <= bound))
                        fail_msg("%s: ctx[%d,%d,%d] = %.8g, att v in double %.8g", name, b, i,
                                 h * a->D + d, got, ref);
                }
}

static void run_mha_case(const mha_cfg *cfg, uint64_t seed)
{
    mha_ctx a;
    mha_setup(&a, cfg, 1, seed);
    size_t nq = nq_of(&a), nk = nk_of(&a), nb = nb_of(&a), na = na_of(&a);
    int C = a.H * a.D;
    fd_case c = {mha_loss, &a, a.ctx, a.R, nq};
    char name[160];
    mha_loss(&c);
    worst_p = worst_ctx = 0.0;
    check_probs(&a, cfg->name);
    if (!a.dp)
        check_ctx(&a, cfg->name);
    if (verbose())
        print_message("  mha [%s]: att vs softmax in double %.3f of bound, ctx vs att v %.3f\n",
                      cfg->name, worst_p, worst_ctx);
    /* samples whose keys are all masked: placed last; q and k do not enter their forward */
    int nvalid = a.B;
    while (a.kmask && nvalid > 0) {
        int any = 0;
        for (int j = 0; j < a.Tk; j++)
            any |= a.kmask[(size_t)(nvalid - 1) * a.Tk + j] != 0;
        if (any)
            break;
        nvalid--;
    }
    assert_true(nvalid > 0);
    if (nvalid < a.B)
        assert_null(a.bias); /* dbias would take their rows' gradient too (see below) */

    /* dq, dk, dv are overwritten: prefilled with garbage, the same bits as from zeros */
    float *dq = vec(nq), *dk = vec(nk), *dv = vec(nk), *db = a.bias ? vec(nb) : NULL;
    float *gq = vec(nq), *gk = vec(nk), *gv = vec(nk);
    for (size_t i = 0; i < nq; i++)
        gq[i] = 1e3f;
    for (size_t i = 0; i < nk; i++)
        gk[i] = gv[i] = -1e3f;
    mha_bwd(&a, dq, dk, dv, db, a.att, a.dp);
    mha_bwd(&a, gq, gk, gv, NULL, a.att, a.dp);
    assert_memory_equal(gq, dq, nq * sizeof(float));
    assert_memory_equal(gk, dk, nk * sizeof(float));
    assert_memory_equal(gv, dv, nk * sizeof(float));
    for (size_t i = 0; i < nq; i++)
        assert_true(isfinite(dq[i]));
    for (size_t i = 0; i < nk; i++)
        assert_true(isfinite(dk[i]) && isfinite(dv[i]));

    snprintf(name, sizeof name, "mha dq [%s]", cfg->name);
    fd_check_range(name, &c, a.q, dq, 0, (size_t)nvalid * a.Tq * C);
    snprintf(name, sizeof name, "mha dk [%s]", cfg->name);
    fd_check_range(name, &c, a.k, dk, 0, (size_t)nvalid * a.Tk * C);
    snprintf(name, sizeof name, "mha dv [%s]", cfg->name);
    fd_check(name, &c, a.v, dv, nk);
    snprintf(name, sizeof name, "mha + 2%% on one element of dq [%s]", cfg->name);
    fd_reject_bump(name, &c, a.q, dq, (size_t)nvalid * a.Tq * C);
    if (a.bias) {
        snprintf(name, sizeof name, "mha dbias [%s]", cfg->name);
        fd_check(name, &c, a.bias, db, nb);
        /* dbias accumulates (+=) over samples into what it holds */
        float *acc = vec(nb);
        fill(acc, nb, seed + 9, 1.0f);
        float *acc0 = copy_of(acc, nb);
        mha_bwd(&a, gq, gk, gv, acc, a.att, a.dp);
        double m = max_abs(db, nb);
        for (size_t i = 0; i < nb; i++)
            assert_true(fabs(acc[i] - (acc0[i] + (double)db[i])) <=
                        4 * U32 * (fabs(acc0[i]) + fabs(db[i]) + m));
        /* keys after the query (causal) have no gradient in any sample: untouched */
        for (int h = 0; h < a.H && a.causal; h++)
            for (int i = 0; i < a.Tq; i++)
                for (int j = i + 1; j < a.Tk; j++) {
                    size_t o = ((size_t)h * a.Tq + i) * a.Tk + j;
                    assert_true(db[o] == 0.0f && memcmp(&acc[o], &acc0[o], 4) == 0);
                }
        if (a.div != 1.0f) { /* the additive term's gradient is the scores', not / div */
            float *bad = copy_of(db, nb);
            scale_inplace(bad, 1.0f / a.div, nb);
            snprintf(name, sizeof name, "mha dbias / div [%s]", cfg->name);
            fd_reject(name, &c, a.bias, bad, nb);
            free(bad);
        }
        free(acc); free(acc0);
    }
    if (a.causal) { /* a backward from the probabilities of a non-causal forward */
        float *att2 = vec(na);
        a.causal = 0;
        mha_fwd(&a, att2);
        a.causal = 1;
        mha_bwd(&a, gq, gk, gv, NULL, att2, a.dp);
        snprintf(name, sizeof name, "mha dk from non-causal att [%s]", cfg->name);
        fd_reject(name, &c, a.k, gk, nk);
        free(att2);
    }
    if (a.dp) { /* dropout on: it changes ctx, and a backward without it is wrong */
        float *ctx1 = copy_of(a.ctx, nq);
        a.dp = NULL;
        mha_fwd(&a, a.att);
        int differ = memcmp(ctx1, a.ctx, nq * sizeof(float)) != 0;
        a.dp = &a.drop;
        mha_loss(&c);
        assert_true(differ);
        mha_bwd(&a, gq, gk, gv, NULL, a.att, NULL);
        snprintf(name, sizeof name, "mha dq without the dropout mask [%s]", cfg->name);
        fd_reject(name, &c, a.q, gq, nq);
        snprintf(name, sizeof name, "mha dv without the dropout mask [%s]", cfg->name);
        fd_reject(name, &c, a.v, gv, nk);
        free(ctx1);
    }
    if (nvalid < a.B && verbose()) {
        /* the padded sample's dq (and, with a bias, its share of dbias) is the gradient
         * through its uniform softmax, as PyTorch's autograd gives through Hugging Face's
         * additive finfo.min, not the zero derivative of its constant forward */
        size_t o = (size_t)nvalid * a.Tq * C;
        print_message("  mha [%s]: fully padded sample: max|dq| %.3g (forward constant in q)\n",
                      cfg->name, max_abs(dq + o, nq - o));
    }
    free(dq); free(dk); free(dv); free(db); free(gq); free(gk); free(gv);
    mha_free(&a);
}

/* Packed rows (xmha_forward_packed / _backward_packed: T5's right-padded batches without
 * their padding) against the padded kernel: the encoder's self-attention (bias, key mask),
 * the decoder's (bias, causal, no mask) and the cross-attention (its own key rows, the
 * encoder's mask), samples of full, partial and single-token lengths. A padded query row's
 * output reaches no loss (its R is 0). Without dropout the real rows agree to fp32 rounding:
 * the scores and the products over D are the same, the softmax sums the same terms (the
 * padded one with exact zeros among them, possibly in another order): a few ulps, 1e-6 of
 * the value (+1); the gradients chain a few such sums and products: 1e-5. The bias's
 * gradient is zero outside each sample's block in both. */
static void packed_case(int causal, int cross, const int *lq, const int *lk, int Tq, int Tk,
                        int bias_on, uint64_t seed)
{
    enum { B = 3, H = 3, D = 5, C = H * D, slots = 2 };
    int32_t cuq[B + 1] = {0}, cuk[B + 1] = {0};
    for (int b = 0; b < B; b++) {
        cuq[b + 1] = cuq[b] + lq[b];
        cuk[b + 1] = cuk[b] + (cross ? lk[b] : lq[b]);
    }
    size_t nq = (size_t)B * Tq * C, nk = (size_t)B * Tk * C, nb = (size_t)H * Tq * Tk;
    float *q = vec(nq), *k = vec(nk), *v = vec(nk), *R = vec(nq), *ctx = vec(nq);
    float *pq = vec(nq), *pk = vec(nk), *pv = vec(nk), *pR = vec(nq), *pctx = vec(nq);
    float *att = vec((size_t)B * nb), *patt = vec((size_t)B * nb);
    float *bias = bias_on ? vec(nb) : NULL, *db = vec(nb), *pdb = vec(nb);
    float *scr = vec((size_t)slots * (2 * (size_t)Tq * Tk + (size_t)Tk));
    float *g[3] = {vec(nq), vec(nk), vec(nk)}, *pg[3] = {vec(nq), vec(nk), vec(nk)};
    int64_t *kmask = causal ? NULL : calloc((size_t)B * Tk, sizeof *kmask);
    fill(q, nq, seed, 0.7f); fill(k, nk, seed + 1, 0.7f); fill(v, nk, seed + 2, 1.0f);
    fill(R, nq, seed + 3, 1.0f);
    if (bias)
        fill(bias, nb, seed + 4, 1.0f);
    for (int b = 0; b < B; b++) {
        int kl = cuk[b + 1] - cuk[b];
        for (int j = 0; kmask && j < Tk; j++)
            kmask[(size_t)b * Tk + j] = j < kl;
        for (int i = lq[b]; i < Tq; i++)
            memset(R + ((size_t)b * Tq + i) * C, 0, C * sizeof(float));
        memcpy(pq + (size_t)cuq[b] * C, q + (size_t)b * Tq * C, (size_t)lq[b] * C * 4);
        memcpy(pR + (size_t)cuq[b] * C, R + (size_t)b * Tq * C, (size_t)lq[b] * C * 4);
        memcpy(pk + (size_t)cuk[b] * C, k + (size_t)b * Tk * C, (size_t)kl * C * 4);
        memcpy(pv + (size_t)cuk[b] * C, v + (size_t)b * Tk * C, (size_t)kl * C * 4);
    }
    mha_forward(ctx, att, q, k, v, bias, kmask, causal, 1.0f, NULL, scr, 1, B, Tq, Tk, H, D);
    mha_backward(g[0], g[1], g[2], db, R, att, q, k, v, 1.0f, NULL, scr, 1, B, Tq, Tk, H, D);
    xmha_forward_packed(-1, pctx, patt, pq, pk, pv, bias, causal, cuq, cross ? cuk : NULL, 1.0f,
                        NULL, scr, slots, B, Tq, Tk, H, D);
    xmha_backward_packed(-1, pg[0], pg[1], pg[2], pdb, pR, patt, pq, pk, pv, cuq,
                         cross ? cuk : NULL, 1.0f, NULL, scr, slots, B, Tq, Tk, H, D);
    for (int b = 0; b < B; b++)
        for (int side = 0; side < 2; side++) /* query rows, then key rows */
            for (int t = 0; t < (side ? cuk[b + 1] - cuk[b] : lq[b]); t++)
                for (int c = 0; c < C; c++) {
                    size_t i = ((size_t)b * (side ? Tk : Tq) + t) * C + c;
                    size_t j = ((size_t)(side ? cuk : cuq)[b] + t) * C + c;
                    if (!side && fabsf(ctx[i] - pctx[j]) > 1e-6f * (1.0f + fabsf(ctx[i])))
                        fail_msg("ctx[%d,%d,%d]: packed %.9g, padded %.9g", b, t, c, pctx[j],
                                 ctx[i]);
                    for (int x = side ? 1 : 0; x < (side ? 3 : 1); x++)
                        if (fabsf(g[x][i] - pg[x][j]) > 1e-5f * (1.0f + fabsf(g[x][i])))
                            fail_msg("d%c[%d,%d,%d]: packed %.9g, padded %.9g", "qkv"[x], b, t,
                                     c, pg[x][j], g[x][i]);
                }
    for (size_t i = 0; i < nb; i++)
        if (fabsf(db[i] - pdb[i]) > 1e-5f * (1.0f + fabsf(db[i])))
            fail_msg("dbias[%zu]: packed %.9g, padded %.9g", i, pdb[i], db[i]);
    float *all[] = {q, k, v, R, ctx, pq, pk, pv, pR, pctx, att, patt, bias, db, pdb, scr,
                    g[0], g[1], g[2], pg[0], pg[1], pg[2]};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
    free(kmask);
}

static void test_mha_packed(void **state)
{
    (void)state;
    const int enc[3] = {9, 5, 1}, dec[3] = {3, 7, 1};
    packed_case(0, 0, enc, NULL, 9, 9, 1, 310); /* encoder self-attention */
    packed_case(1, 0, dec, NULL, 7, 7, 1, 320); /* decoder self-attention */
    packed_case(0, 1, dec, enc, 7, 9, 0, 330);  /* cross-attention */
    packed_case(0, 1, dec, enc, 7, 9, 1, 340);  /* (a bias over cross keys: the kernel's) */
}

static const mha_cfg MHA_CASES[] = {
    {"self, bias, key mask (holes and padding)", 2, 7, 7, 3, 5, 0, 1, 1.0f, 0.0f,
     "1111111" "1101100"},
    {"decoder: causal, bias, padded sample", 2, 6, 6, 2, 7, 1, 1, 1.0f, 0.0f,
     "111111" "111100"},
    {"cross: Tq 4, Tk 19, key mask", 2, 4, 19, 3, 5, 0, 0, 1.0f, 0.0f,
     "1111111111111111111" "1111111111110000000"},
    {"cross: Tq 5 > Tk 3, bias, div 1.7", 3, 5, 3, 4, 3, 0, 1, 1.7f, 0.0f, "111" "111" "101"},
    {"no bias, no mask, Tq = Tk = 8, div sqrt(5)", 2, 8, 8, 3, 5, 0, 0, 2.2360680f, 0.0f, NULL},
    {"cross: a fully padded sample", 2, 3, 5, 3, 5, 0, 0, 1.0f, 0.0f, "11101" "00000"},
    {"self, bias, key mask, dropout 0.3", 2, 8, 8, 3, 5, 0, 1, 1.0f, 0.3f,
     "11111111" "11111100"},
    {"decoder: causal, bias, dropout 0.3", 2, 9, 9, 3, 5, 1, 1, 1.0f, 0.3f, NULL},
};

static void test_mha_fd(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof MHA_CASES / sizeof MHA_CASES[0]; i++)
        run_mha_case(&MHA_CASES[i], 300 + 10 * i);
}

/* bias = 0 and no mask: the plain softmax(q k^T / div), and a zero bias gives the same bits
 * as none (s / div + 0 is s / div) */
static void test_mha_plain_softmax(void **state)
{
    (void)state;
    mha_cfg cfg = {"plain", 2, 6, 10, 3, 5, 0, 1, 1.3f, 0.0f, NULL};
    mha_ctx a;
    mha_setup(&a, &cfg, 1, 400);
    memset(a.bias, 0, nb_of(&a) * sizeof(float));
    mha_fwd(&a, a.att);
    float *att0 = copy_of(a.att, na_of(&a)), *ctx0 = copy_of(a.ctx, nq_of(&a));
    float *bias = a.bias;
    a.bias = NULL;
    mha_fwd(&a, a.att);
    assert_memory_equal(att0, a.att, na_of(&a) * sizeof(float));
    assert_memory_equal(ctx0, a.ctx, nq_of(&a) * sizeof(float));
    check_probs(&a, "bias NULL, no mask");
    check_ctx(&a, "bias NULL, no mask");
    a.bias = bias;
    free(att0); free(ctx0);
    mha_free(&a);
}

/* With v one-hot (v[b,j,h*D + d] = (d == j), D = Tk), ctx[b,i,h*D + j] is the dropped-out
 * probability itself (a sum of one product by 1 and exact zeros): each must be exactly 0
 * or fl(att * fl(1 / (1 - p))); the drops are about p of them and differ between heads and
 * samples; the mask is a function of the global sample (first_sample + b). */
static void test_mha_dropout_mask(void **state)
{
    (void)state;
    mha_cfg cfg = {"one-hot v", 2, 6, 8, 3, 8, 0, 1, 1.0f, 0.3f, NULL};
    mha_ctx a;
    mha_setup(&a, &cfg, 1, 500);
    int B = a.B, Tq = a.Tq, Tk = a.Tk, H = a.H, D = a.D, C = H * D;
    memset(a.v, 0, nk_of(&a) * sizeof(float));
    for (int b = 0; b < B; b++)
        for (int j = 0; j < Tk; j++)
            for (int h = 0; h < H; h++)
                a.v[((size_t)b * Tk + j) * C + (size_t)h * D + j] = 1.0f;
    mha_fwd(&a, a.att);
    float scale = 1.0f / (1.0f - a.drop.p);
    int dropped = 0;
    unsigned char *z = calloc(na_of(&a), 1);
    assert_non_null(z);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < Tq; i++)
                for (int j = 0; j < Tk; j++) {
                    size_t ia = (((size_t)b * H + h) * Tq + i) * Tk + j;
                    float got = a.ctx[((size_t)b * Tq + i) * C + (size_t)h * D + j];
                    float kept = a.att[ia] * scale;
                    assert_true(a.att[ia] > 0.0f);
                    if (got == 0.0f) {
                        dropped++;
                        z[ia] = 1;
                    } else if (memcmp(&got, &kept, 4) != 0) {
                        fail_msg("dropout: ctx %.9g is neither 0 nor att / (1 - p) = %.9g",
                                 got, kept);
                    }
                }
    /* 288 Bernoulli(0.3): mean 86.4, sd 7.8; 6 sd */
    assert_true(dropped > 86 - 47 && dropped < 86 + 47);
    size_t tt = (size_t)Tq * Tk;
    assert_true(memcmp(z, z + tt, tt) != 0);          /* (b 0, h 0) vs (b 0, h 1) */
    assert_true(memcmp(z, z + (size_t)H * tt, tt) != 0); /* (b 0, h 0) vs (b 1, h 0) */
    /* sample 1 of a batch from sample 1000 = sample 0 of a batch from sample 1001 */
    mha_ctx s1 = a;
    s1.B = 1;
    s1.q = a.q + (size_t)Tq * C;
    s1.k = a.k + (size_t)Tk * C;
    s1.v = a.v + (size_t)Tk * C;
    s1.ctx = vec((size_t)Tq * C);
    s1.att = vec((size_t)H * tt);
    s1.drop.first_sample = a.drop.first_sample + 1;
    s1.dp = &s1.drop;
    mha_fwd(&s1, s1.att);
    assert_memory_equal(s1.ctx, a.ctx + (size_t)Tq * C, (size_t)Tq * C * sizeof(float));
    assert_memory_equal(s1.att, a.att + (size_t)H * tt, (size_t)H * tt * sizeof(float));
    free(s1.ctx); free(s1.att); free(z);
    mha_free(&a);
}

/* ---- determinism across thread counts -------------------------------------------------- */

typedef struct { float *ctx, *att, *dq, *dk, *dv, *dbias, *dq2, *dk2, *dv2; } mha_run;

static void mha_threads_run(mha_ctx *a, const float *dbias0, mha_run *r)
{
    size_t nq = nq_of(a), nk = nk_of(a), nb = nb_of(a);
    r->att = vec(na_of(a)); r->dq = vec(nq); r->dk = vec(nk); r->dv = vec(nk);
    r->dq2 = vec(nq); r->dk2 = vec(nk); r->dv2 = vec(nk);
    r->dbias = copy_of(dbias0, nb);
    mha_fwd(a, r->att);
    r->ctx = copy_of(a->ctx, nq);
    mha_bwd(a, r->dq, r->dk, r->dv, r->dbias, r->att, a->dp); /* heads parallel */
    mha_bwd(a, r->dq2, r->dk2, r->dv2, NULL, r->att, a->dp);  /* (sample, head) pairs */
}

static void mha_run_free(mha_run *r)
{
    free(r->ctx); free(r->att); free(r->dq); free(r->dk); free(r->dv); free(r->dbias);
    free(r->dq2); free(r->dk2); free(r->dv2);
}

static void mha_run_same(const mha_run *x, const mha_run *y, const mha_ctx *a)
{
    size_t nq = nq_of(a), nk = nk_of(a);
    assert_memory_equal(x->ctx, y->ctx, nq * sizeof(float));
    assert_memory_equal(x->att, y->att, na_of(a) * sizeof(float));
    assert_memory_equal(x->dq, y->dq, nq * sizeof(float));
    assert_memory_equal(x->dk, y->dk, nk * sizeof(float));
    assert_memory_equal(x->dv, y->dv, nk * sizeof(float));
    assert_memory_equal(x->dbias, y->dbias, nb_of(a) * sizeof(float));
    assert_memory_equal(x->dq2, y->dq2, nq * sizeof(float));
    assert_memory_equal(x->dk2, y->dk2, nk * sizeof(float));
    assert_memory_equal(x->dv2, y->dv2, nk * sizeof(float));
}

/* one thread vs two: bit-identical outputs, dbias (summed over samples in a fixed order)
 * included; posbias_backward, lookup_backward with repeated ids and rmsnorm's dw too. The
 * dbias and dtable starting values are nonzero, so a different summation order would show.
 * The attention pairs are large enough (40 x 48 x 8) for the two threads to overlap in time,
 * and the two-thread run is repeated: an order that depends on the scheduling (atomics
 * across samples) is seen with high probability, not certainty. */
static void test_threads_determinism(void **state)
{
    (void)state;
    enum { MB = 5, MTQ = 40, MTK = 48, REPS = 6 };
    int saved = omp_get_max_threads();
    char mask[MB * MTK + 1];
    for (int b = 0; b < MB; b++) /* sample b keeps its first 48 - 7 b keys, a hole at 3 */
        for (int j = 0; j < MTK; j++)
            mask[b * MTK + j] = j < MTK - 7 * b && !(b == 2 && j == 3) ? '1' : '0';
    mask[MB * MTK] = 0;
    mha_cfg cfg = {"threads", MB, MTQ, MTK, 4, 8, 0, 1, 1.0f, 0.3f, mask};
    mha_ctx a;
    mha_setup(&a, &cfg, 2, 600);
    size_t nq = nq_of(&a), nk = nk_of(&a), nb = nb_of(&a);
    float *dbias0 = vec(nb);
    fill(dbias0, nb, 610, 1.0f);
    mha_run r1, r2;
    /* posbias */
    enum { NB = 32, PH = 5, PT = 50, V = 9, M = 60, LC = 37, RM = 7, RC = 131 };
    float *dpb = vec((size_t)PH * PT * PT), *tab[2][2];
    fill(dpb, (size_t)PH * PT * PT, 620, 1.0f);
    /* lookup: ids repeat (V = 9 words for 60 rows) */
    int64_t ids[M];
    for (int m = 0; m < M; m++)
        ids[m] = (m * 7 + m / 5) % V;
    float *lout = vec((size_t)M * LC), *lw[2];
    fill(lout, (size_t)M * LC, 630, 1.0f);
    /* rmsnorm */
    float *rx = vec(RM * RC), *rw = vec(RC), *ry = vec(RM * RC), *rg = vec(RM * RC), rs[RM];
    float *rdx[2], *rdw[2];
    fill(rx, RM * RC, 640, 1.0f); fill(rw, RC, 641, 1.0f); fill(rg, RM * RC, 642, 1.0f);
    rmsnorm_forward(ry, rs, rx, rw, RM, RC, 1e-6f);
    for (int t = 0; t < 2; t++) {
        omp_set_num_threads(t + 1);
        assert_int_equal(omp_get_max_threads(), t + 1);
        for (int rep = 0; rep < (t ? REPS : 1); rep++) {
            mha_threads_run(&a, dbias0, t ? &r2 : &r1);
            if (t) {
                mha_run_same(&r1, &r2, &a);
                mha_run_free(&r2);
            }
        }
        for (int bidir = 0; bidir < 2; bidir++) {
            tab[t][bidir] = vec((size_t)NB * PH);
            fill(tab[t][bidir], (size_t)NB * PH, 650, 1.0f);
            posbias_backward(tab[t][bidir], dpb, bidir, NB, 40, PT, PT, PH);
        }
        lw[t] = vec((size_t)V * LC);
        fill(lw[t], (size_t)V * LC, 660, 1.0f);
        lookup_backward(lw[t], lout, ids, M, LC);
        rdx[t] = vec(RM * RC);
        rdw[t] = vec(RC);
        rmsnorm_backward(rdx[t], rdw[t], rg, rx, rs, rw, RM, RC);
    }
    omp_set_num_threads(saved);
    /* with and without dbias: the same per-pair arithmetic, only the loop order differs */
    assert_memory_equal(r1.dq, r1.dq2, nq * sizeof(float));
    assert_memory_equal(r1.dk, r1.dk2, nk * sizeof(float));
    assert_memory_equal(r1.dv, r1.dv2, nk * sizeof(float));
    for (int bidir = 0; bidir < 2; bidir++)
        assert_memory_equal(tab[0][bidir], tab[1][bidir], (size_t)NB * PH * sizeof(float));
    assert_memory_equal(lw[0], lw[1], (size_t)V * LC * sizeof(float));
    assert_memory_equal(rdx[0], rdx[1], RM * RC * sizeof(float));
    assert_memory_equal(rdw[0], rdw[1], RC * sizeof(float));
    /* lookup_backward adds the rows in order: the serial float loop's bits */
    float *want = vec((size_t)V * LC);
    fill(want, (size_t)V * LC, 660, 1.0f);
    for (int m = 0; m < M; m++)
        for (int c = 0; c < LC; c++)
            want[ids[m] * LC + c] += lout[(size_t)m * LC + c];
    assert_memory_equal(want, lw[0], (size_t)V * LC * sizeof(float));
    mha_run_free(&r1);
    for (int t = 0; t < 2; t++) {
        free(tab[t][0]); free(tab[t][1]); free(lw[t]); free(rdx[t]); free(rdw[t]);
    }
    free(dbias0); free(dpb); free(lout); free(rx); free(rw); free(ry); free(rg); free(want);
    mha_free(&a);
}

/* ---- activations ------------------------------------------------------------------------ */

typedef struct { int act; size_t n; float *x, *out, *R; } act_ctx;

static double act_loss(fd_case *c)
{
    act_ctx *g = c->ctx;
    act_forward(g->act, g->out, g->x, g->n);
    return dot(g->out, g->R, g->n);
}

static void test_act_fd(void **state)
{
    (void)state;
    static const char *names[4] = {"relu", "gelu (erf)", "gelu (tanh)", "silu"};
    for (int act = 0; act < 4; act++) {
        act_ctx g = {.act = act, .n = 301};
        g.x = vec(g.n); g.out = vec(g.n); g.R = vec(g.n);
        fill(g.x, g.n, 700 + act, 2.5f); fill(g.R, g.n, 710 + act, 1.0f);
        for (size_t i = 0; i < g.n; i++) /* relu's kink: keep 3h away from it */
            if (fabsf(g.x[i]) < 3 * FD_STEP)
                g.x[i] = g.x[i] < 0 ? -0.1f : 0.1f;
        fd_case c = {act_loss, &g, g.out, g.R, g.n};
        float *dx = vec(g.n);
        act_backward(act, dx, g.x, g.R, g.n);
        char name[64];
        snprintf(name, sizeof name, "act %s", names[act]);
        fd_check(name, &c, g.x, dx, g.n);
        snprintf(name, sizeof name, "act %s + 2%% on one element", names[act]);
        fd_reject_bump(name, &c, g.x, dx, g.n);
        /* the derivative of another activation is rejected (not erf's vs tanh's: they
         * differ by 2e-3 at most, below this tolerance; test_gelu_tanh_formula tells them
         * apart) */
        int other = act == ZT_ACT_RELU ? ZT_ACT_GELU : ZT_ACT_RELU;
        float *bad = vec(g.n);
        act_backward(other, bad, g.x, g.R, g.n);
        snprintf(name, sizeof name, "act %s with %s's derivative", names[act], names[other]);
        fd_reject(name, &c, g.x, bad, g.n);
        /* backward accumulates; forward may run in place */
        float *acc = vec(g.n);
        fill(acc, g.n, 720, 1.0f);
        float *acc0 = copy_of(acc, g.n);
        act_backward(act, acc, g.x, g.R, g.n);
        for (size_t i = 0; i < g.n; i++)
            assert_true(fabs(acc[i] - (acc0[i] + (double)dx[i])) <=
                        2 * U32 * (fabs(acc0[i]) + fabs(dx[i])));
        act_loss(&c);
        float *in = copy_of(g.x, g.n);
        act_forward(act, in, in, g.n);
        assert_memory_equal(in, g.out, g.n * sizeof(float));
        free(g.x); free(g.out); free(g.R); free(dx); free(bad); free(acc); free(acc0); free(in);
    }
}

/* gelu_tanh against 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) in double. fp32 bound:
 * inner = c (x + a x^3) has <= 4 roundings (4u relative, no cancellation: same signs),
 * tanhf is within 2 ulp and passes on |inner| sech^2(inner) 4u <= 1.8u, 1 + tanh one more
 * rounding: |error of 1 + tanh| <= 6u; times 0.5 x, and two product roundings on the value:
 * |err| <= 3u |x| + 2u |ref|; bound 6u |x| + 4u |ref| ("a few ulps" of x: near x << 0 the
 * value is tiny and 1 + tanh cancels, so a bound relative to the value alone cannot hold).
 * The derivative 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3a x^2): 1 - t^2 errs by <= 6u, times
 * P = 0.5 |x| c (1 + 3a x^2), so bound 8u (1 + P). The exact GELU differs by up to 5e-4 (at
 * |x| ~ 2) and a wrong constant (0.0447) by 1e-5: both far outside. */
static void test_gelu_tanh_formula(void **state)
{
    (void)state;
    enum { N = 120001 };
    const double c = sqrt(2.0 / M_PI), a3 = 0.044715;
    float *x = vec(N + 8), *y = vec(N + 8), *g = vec(N + 8), *one = vec(N + 8);
    for (int i = 0; i < N; i++)
        x[i] = -12.0f + 24.0f * (float)i / (N - 1);
    static const float extra[8] = {-1e3f, -30.0f, -1e-30f, 1e-30f, 1e-3f, 30.0f, 1e3f, 0.0f};
    memcpy(x + N, extra, sizeof extra);
    for (int i = 0; i < N + 8; i++)
        one[i] = 1.0f;
    act_forward(ZT_ACT_GELU_TANH, y, x, N + 8);
    act_backward(ZT_ACT_GELU_TANH, g, x, one, N + 8);
    double worst = 0.0, worst_g = 0.0;
    for (int i = 0; i < N + 8; i++) {
        double v = x[i], t = tanh(c * (v + a3 * v * v * v));
        double ref = 0.5 * v * (1.0 + t);
        double P = 0.5 * fabs(v) * c * (1.0 + 3 * a3 * v * v);
        double dref = 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * c * (1.0 + 3 * a3 * v * v);
        double e = fabs(y[i] - ref) / (6 * U32 * fabs(v) + 4 * U32 * fabs(ref) + 1e-44);
        double eg = fabs(g[i] - dref) / (8 * U32 * (1.0 + P));
        if (e > 1.0 || eg > 1.0)
            fail_msg("gelu_tanh(%.9g) = %.9g (want %.9g), derivative %.9g (want %.9g)", v, y[i],
                     ref, g[i], dref);
        worst = fmax(worst, e);
        worst_g = fmax(worst_g, eg);
    }
    if (verbose())
        print_message("  gelu_tanh: worst value error %.3f of bound, derivative %.3f\n", worst,
                      worst_g);
    /* GELU (erf) is the exact one: gelu(1) = 0.8413447, the tanh form gives 0.8411920 */
    float in = 1.0f, o[2];
    act_forward(ZT_ACT_GELU, &o[0], &in, 1);
    act_forward(ZT_ACT_GELU_TANH, &o[1], &in, 1);
    assert_float_equal(o[0], 0.8413447f, 1e-6);
    assert_float_equal(o[1], 0.8411920f, 1e-6);
    free(x); free(y); free(g); free(one);
}

/* silu against x / (1 + exp(-x)) in double, each path (portable: libm's expf; eight-wide:
 * libmvec's, within 4 ulp). fp32 bound: exp(-x) within 4u relative, 1 + e one rounding (its
 * relative error at most that of e, no cancellation: both positive), the division and the
 * product one each: |err| <= 7u |ref|, bound 8u |ref|. The derivative s (1 + x (1 - s)):
 * s within 6u relative; 1 - s has absolute error <= 6u s + u (cancellation near s = 1), times
 * |x|, then three roundings: bound 8u s (1 + |x|) + 2u |ref'|. The GELU (tanh) differs by
 * 0.05 at x = 1 and a missing (1 - s) factor by s x (1 - s)... far outside. The two paths are
 * each held to the bound on the same points (the fast one cross-checked by the slow one's
 * reference), and the dispatched kernels (act_forward) give one of them bit for bit. */
static void test_silu_formula(void **state)
{
    (void)state;
    enum { N = 60001 };
    float *x = vec(N + 6), *y = vec(N + 6), *g = vec(N + 6), *one = vec(N + 6);
    for (int i = 0; i < N; i++)
        x[i] = -40.0f + 80.0f * (float)i / (N - 1);
    static const float extra[6] = {-1e3f, -1e-30f, 1e-30f, 1e-3f, 1e3f, 0.0f};
    memcpy(x + N, extra, sizeof extra);
    for (int i = 0; i < N + 6; i++)
        one[i] = 1.0f;
    for (int path = 0; path < 2; path++) {
        memset(g, 0, (N + 6) * sizeof(float));
        if (vm_silu_path(path, 0, y, x, NULL, N + 6) < 0 ||
            vm_silu_path(path, 1, g, x, one, N + 6) < 0) {
            print_message("  silu: no eight-wide path on this CPU (skipped)\n");
            continue;
        }
        double worst = 0.0, worst_g = 0.0;
        for (int i = 0; i < N + 6; i++) {
            double v = x[i], sg = 1.0 / (1.0 + exp(-v)), ref = v * sg;
            double dref = sg * (1.0 + v * (1.0 - sg));
            double e = fabs(y[i] - ref) / (8 * U32 * fabs(ref) + 1e-44);
            double eg = fabs(g[i] - dref) / (8 * U32 * sg * (1.0 + fabs(v)) + 2 * U32 * fabs(dref) + 1e-44);
            if (e > 1.0 || eg > 1.0)
                fail_msg("silu path %d: silu(%.9g) = %.9g (want %.9g), derivative %.9g (want "
                         "%.9g)", path, v, y[i], ref, g[i], dref);
            worst = fmax(worst, e);
            worst_g = fmax(worst_g, eg);
        }
        if (verbose())
            print_message("  silu path %d: worst value error %.3f of bound, derivative %.3f\n",
                          path, worst, worst_g);
    }
    /* silu(1) = 0.7310586, silu(-1) = -0.2689414 */
    float in[2] = {1.0f, -1.0f}, o[2];
    act_forward(ZT_ACT_SILU, o, in, 2);
    assert_float_equal(o[0], 0.7310586f, 1e-6);
    assert_float_equal(o[1], -0.2689414f, 1e-6);
    free(x); free(y); free(g); free(one);
}

/* relu at exact points: the value, +0 for x <= 0; the derivative 1 for x > 0 and 0 at 0
 * (PyTorch's threshold_backward), added to what dinp holds */
static void test_relu_points(void **state)
{
    (void)state;
    enum { N = 9 };
    const float x[N] = {-3.0f, -0.0f, 0.0f, 1e-45f, 2.5f, FLT_MAX, -INFINITY, INFINITY, -1e-45f};
    const float want[N] = {0.0f, 0.0f, 0.0f, 1e-45f, 2.5f, FLT_MAX, 0.0f, INFINITY, 0.0f};
    const float gate[N] = {0, 0, 0, 1, 1, 1, 0, 1, 0};
    float y[N], d[N], dout[N];
    for (int i = 0; i < N; i++) {
        d[i] = 0.5f;
        dout[i] = 1.0f + (float)i;
    }
    act_forward(ZT_ACT_RELU, y, x, N);
    assert_memory_equal(y, want, sizeof y); /* +0, never -0 */
    act_backward(ZT_ACT_RELU, d, x, dout, N);
    for (int i = 0; i < N; i++)
        assert_true(d[i] == 0.5f + gate[i] * dout[i]);
}

/* ---- mul, lookup, scale ---------------------------------------------------------------- */

static void test_mul_lookup_scale(void **state)
{
    (void)state;
    enum { N = 203, V = 6, C = 21, M = 9 };
    float *a = vec(N), *b = vec(N), *o = vec(N), *g = vec(N), *da = vec(N), *db = vec(N);
    fill(a, N, 800, 1.0f); fill(b, N, 801, 1.0f); fill(g, N, 802, 1.0f);
    fill(da, N, 803, 1.0f); fill(db, N, 804, 1.0f);
    float *da0 = copy_of(da, N), *db0 = copy_of(db, N);
    mul_forward(o, a, b, N);
    for (int i = 0; i < N; i++)
        assert_true(o[i] == a[i] * b[i]);
    /* da += dout b, db += dout a, one rounding each (the build does not contract to fma) */
    mul_backward(da, db, g, a, b, N);
    for (int i = 0; i < N; i++) {
        assert_true(da[i] == da0[i] + g[i] * b[i]);
        assert_true(db[i] == db0[i] + g[i] * a[i]);
    }
    mul_backward(NULL, db, g, a, b, N); /* either may be NULL */
    mul_backward(da, NULL, g, a, b, N);
    for (int i = 0; i < N; i++) {
        float wa = da0[i] + g[i] * b[i], wb = db0[i] + g[i] * a[i];
        wa += g[i] * b[i];
        wb += g[i] * a[i];
        assert_true(da[i] == wa && db[i] == wb);
    }
    /* lookup: rows copied; backward adds each row's gradient into its word, words that no
     * row names keep their bits */
    float *word = vec(V * C), *out = vec(M * C), *dw = vec(V * C), *go = vec(M * C);
    const int64_t ids[M] = {3, 0, 3, 5, 3, 0, 1, 1, 3};
    fill(word, V * C, 810, 1.0f); fill(dw, V * C, 811, 1.0f); fill(go, M * C, 812, 1.0f);
    float *dw0 = copy_of(dw, V * C);
    lookup_forward(out, ids, word, M, C);
    for (int m = 0; m < M; m++)
        assert_memory_equal(out + m * C, word + ids[m] * C, C * sizeof(float));
    lookup_backward(dw, go, ids, M, C);
    float *want = copy_of(dw0, V * C);
    for (int m = 0; m < M; m++)
        for (int c = 0; c < C; c++)
            want[ids[m] * C + c] += go[m * C + c];
    assert_memory_equal(dw, want, V * C * sizeof(float));
    assert_memory_equal(dw + 2 * C, dw0 + 2 * C, C * sizeof(float)); /* word 2: unused */
    assert_memory_equal(dw + 4 * C, dw0 + 4 * C, C * sizeof(float));
    /* scale: x * s per element; n = 0 touches nothing */
    float *x = copy_of(a, N);
    scale_inplace(x, -0.37f, N);
    for (int i = 0; i < N; i++)
        assert_true(x[i] == a[i] * -0.37f);
    float sentinel = 1.25f;
    scale_inplace(&sentinel, 0.0f, 0);
    assert_true(sentinel == 1.25f);
    free(a); free(b); free(o); free(g); free(da); free(db); free(da0); free(db0);
    free(word); free(out); free(dw); free(go); free(dw0); free(want); free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rmsnorm_fd),        cmocka_unit_test(test_rmsnorm_property),
        cmocka_unit_test(test_t5_bucket),         cmocka_unit_test(test_posbias),
        cmocka_unit_test(test_mha_fd),            cmocka_unit_test(test_mha_plain_softmax),
        cmocka_unit_test(test_mha_dropout_mask),  cmocka_unit_test(test_threads_determinism),
        cmocka_unit_test(test_mha_packed),
        cmocka_unit_test(test_act_fd),            cmocka_unit_test(test_gelu_tanh_formula),
        cmocka_unit_test(test_silu_formula),
        cmocka_unit_test(test_relu_points),       cmocka_unit_test(test_mul_lookup_scale),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
