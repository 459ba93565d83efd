/* test_layers.c - finite-difference gradient checks for every kernel in models/layers.c.
 * Each check builds L = sum(out * R) for a fixed random R, runs the kernel's backward with
 * dout = R, and compares with central differences of L (accumulated in double).
 *
 * Tolerance argument: inputs and outputs are O(1) fp32 values (rounding 6e-8 relative).
 * With step h = 1e-2, the rounding noise in (L+ - L-)/2h is about 6e-8 * sqrt(#outputs)
 * / 2e-2 < 1e-4 for our sizes, and the truncation error of the central difference is
 * h^2/6 * |f'''| ~ 2e-5. We require max|num - ana| <= 2e-3 * max|ana| + 1e-4 per tensor:
 * ten times above the noise, while a wrong or missing term gives errors of order max|ana|. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/rng.h"
#include "../models/layers.h"
#include "../models/vmath.h"

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

typedef struct fd_case {
    double (*loss)(struct fd_case *c); /* recomputes the forward and returns sum(out * R) */
    void *ctx;
} fd_case;

/* Checks analytic gradient `ana` of input x[n] against central differences. */
static void fd_check(const char *name, fd_case *c, float *x, const float *ana, size_t n)
{
    const double h = 1e-2;
    double max_ana = 0.0, max_err = 0.0;
    size_t worst = 0, step = n > 160 ? n / 160 : 1;
    for (size_t i = 0; i < n; i++)
        max_ana = fmax(max_ana, fabs(ana[i]));
    for (size_t i = 0; i < n; i += step) {
        float x0 = x[i], xp = (float)(x0 + h), xm = (float)(x0 - h);
        x[i] = xp;
        double lp = c->loss(c);
        x[i] = xm;
        double lm = c->loss(c);
        x[i] = x0;
        double num = (lp - lm) / ((double)xp - (double)xm);
        double err = fabs(num - ana[i]);
        if (err > max_err) {
            max_err = err;
            worst = i;
        }
    }
    double tol = 2e-3 * max_ana + 1e-4;
    if (max_err > tol)
        fail_msg("%s: max |numeric - analytic| = %.3g at index %zu (analytic %.6g), tolerance "
                 "%.3g", name, max_err, worst, ana[worst], tol);
    assert_true(max_ana > 0.0); /* a check on an all-zero gradient proves nothing */
}

static double dot(const float *a, const float *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

/* ---- linear ----------------------------------------------------------------------------- */

typedef struct { int M, K, N; float *x, *w, *b, *out, *R; } lin_ctx;

static double lin_loss(fd_case *c)
{
    lin_ctx *l = c->ctx;
    linear_forward(l->out, l->x, l->w, l->b, l->M, l->K, l->N);
    return dot(l->out, l->R, (size_t)l->M * l->N);
}

static void test_linear(void **state)
{
    (void)state;
    lin_ctx l = {.M = 7, .K = 13, .N = 5};
    size_t nx = (size_t)l.M * l.K, nw = (size_t)l.N * l.K, no = (size_t)l.M * l.N;
    l.x = vec(nx); l.w = vec(nw); l.b = vec(l.N); l.out = vec(no); l.R = vec(no);
    fill(l.x, nx, 1, 1); fill(l.w, nw, 2, 0.5f); fill(l.b, l.N, 3, 1); fill(l.R, no, 4, 1);
    float *dx = vec(nx), *dw = vec(nw), *db = vec(l.N);
    linear_backward(dx, dw, db, l.R, l.x, l.w, l.M, l.K, l.N);
    fd_case c = {lin_loss, &l};
    fd_check("linear dx", &c, l.x, dx, nx);
    fd_check("linear dw", &c, l.w, dw, nw);
    fd_check("linear db", &c, l.b, db, l.N);
    /* backward accumulates: a second call doubles every gradient */
    float dw1 = dw[3];
    linear_backward(dx, dw, db, l.R, l.x, l.w, l.M, l.K, l.N);
    assert_float_equal(dw[3], 2 * dw1, 1e-5 * fabsf(dw1) + 1e-12);
    free(l.x); free(l.w); free(l.b); free(l.out); free(l.R); free(dx); free(dw); free(db);
}

/* ---- layernorm -------------------------------------------------------------------------- */

typedef struct { int M, C; float *x, *w, *b, *out, *mean, *rstd, *R; } ln_ctx;

static double ln_loss(fd_case *c)
{
    ln_ctx *l = c->ctx;
    layernorm_forward(l->out, l->mean, l->rstd, l->x, l->w, l->b, l->M, l->C, 1e-5f);
    return dot(l->out, l->R, (size_t)l->M * l->C);
}

static void test_layernorm(void **state)
{
    (void)state;
    ln_ctx l = {.M = 6, .C = 67};
    size_t n = (size_t)l.M * l.C;
    l.x = vec(n); l.w = vec(l.C); l.b = vec(l.C); l.out = vec(n); l.R = vec(n);
    l.mean = vec(l.M); l.rstd = vec(l.M);
    fill(l.x, n, 11, 2); fill(l.w, l.C, 12, 1); fill(l.b, l.C, 13, 1); fill(l.R, n, 14, 1);
    float *dx = vec(n), *dw = vec(l.C), *db = vec(l.C);
    fd_case c = {ln_loss, &l};
    ln_loss(&c);
    /* forward: each row has mean b-weighted... check normalisation directly */
    for (int m = 0; m < l.M; m++) {
        double s = 0, ss = 0;
        for (int k = 0; k < l.C; k++) {
            double xh = (l.out[m * l.C + k] - l.b[k]) / l.w[k];
            s += xh;
            ss += xh * xh;
        }
        assert_true(fabs(s / l.C) < 1e-4 && fabs(ss / l.C - 1.0) < 1e-3);
    }
    layernorm_backward(dx, dw, db, l.R, l.x, l.mean, l.rstd, l.w, l.M, l.C);
    fd_check("layernorm dx", &c, l.x, dx, n);
    fd_check("layernorm dw", &c, l.w, dw, l.C);
    fd_check("layernorm db", &c, l.b, db, l.C);
    free(l.x); free(l.w); free(l.b); free(l.out); free(l.R); free(l.mean); free(l.rstd);
    free(dx); free(dw); free(db);
}

/* ---- gelu ------------------------------------------------------------------------------- */

typedef struct { size_t n; float *x, *out, *R; } gelu_ctx;

static double gelu_loss(fd_case *c)
{
    gelu_ctx *g = c->ctx;
    gelu_forward(g->out, g->x, g->n);
    return dot(g->out, g->R, g->n);
}

static void test_gelu(void **state)
{
    (void)state;
    gelu_ctx g = {.n = 301};
    g.x = vec(g.n); g.out = vec(g.n); g.R = vec(g.n);
    fill(g.x, g.n, 21, 2.5f); fill(g.R, g.n, 22, 1);
    float *dx = vec(g.n);
    gelu_backward(dx, g.x, g.R, g.n);
    fd_case c = {gelu_loss, &g};
    fd_check("gelu dx", &c, g.x, dx, g.n);
    /* exact-erf values: gelu(1) = 0.8413447, gelu(-1) = -0.1586553 */
    float in[2] = {1.0f, -1.0f}, out[2];
    gelu_forward(out, in, 2);
    assert_float_equal(out[0], 0.8413447f, 1e-6);
    assert_float_equal(out[1], -0.1586553f, 1e-6);
    free(g.x); free(g.out); free(g.R); free(dx);
}

/* The eight-wide erf/exp (libmvec, within 4 ulp) against double precision. Bounds: erf's
 * error <= 4 * 2^-24 (values <= 1), 1 + erf and the products add <= 3 roundings of 2^-24
 * relative, so |gelu error| <= 0.5|x| (2.4e-7 + 1.2e-7) + 1.2e-7 |gelu|; the derivative
 * Phi + x phi adds exp's 4 ulp on x phi (<= 0.25): about 3e-7, bound 5e-7. Every element
 * must also give the same bits wherever it sits in an array (the padded last group). */
static void test_vmath(void **state)
{
    (void)state;
    enum { N = 200001 };
    float *x = vec(N), *y = vec(N), *g = vec(N), *one = vec(N);
    for (int i = 0; i < N; i++) {
        x[i] = -10.0f + 20.0f * (float)i / (N - 1);
        one[i] = 1.0f;
    }
    vm_gelu(y, x, N);
    vm_gelu_grad_acc(g, x, one, N);
    double worst = 0.0, worst_g = 0.0;
    for (int i = 0; i < N; i++) {
        double v = x[i], ref = v * 0.5 * (1.0 + erf(v / sqrt(2.0)));
        double dref = 0.5 * (1.0 + erf(v / sqrt(2.0))) + v * exp(-0.5 * v * v) / sqrt(2 * M_PI);
        double e = fabs(y[i] - ref) / (2e-7 * fabs(v) + 1.5e-7 * fabs(ref) + 1e-37);
        worst = e > worst ? e : worst;
        double eg = fabs(g[i] - dref) / 5e-7;
        worst_g = eg > worst_g ? eg : worst_g;
    }
    assert_true(worst <= 1.0);
    assert_true(worst_g <= 1.0);
    /* position independence: every offset and length gives the same bits per value */
    for (int off = 1; off < 9; off++) {
        float o[13], gg[13] = {0};
        vm_gelu(o, x + 1000 * off + off, 13);
        vm_gelu_grad_acc(gg, x + 1000 * off + off, one, 13);
        assert_memory_equal(o, y + 1000 * off + off, sizeof o);
        assert_memory_equal(gg, g + 1000 * off + off, sizeof gg);
    }
    /* exp of shifted values (the float subtraction is the kernel's, so the reference takes
     * its rounded result) and their sum: each term within 4 ulp (5e-7 relative), the sum
     * of positive terms accumulated in double within 3e-7 */
    fill(x, 1000, 31, 8.0f);
    double ref = 0.0;
    for (int i = 0; i < 1000; i++)
        ref += exp((double)(x[i] - 8.0f));
    double s = vm_exp_sum(y, x, 8.0f, 1000), s2 = vm_exp_sum(NULL, x, 8.0f, 1000);
    assert_true(fabs(s - ref) <= 3e-7 * ref);
    assert_true(s == s2);
    for (int i = 0; i < 1000; i++) {
        double e = exp((double)(x[i] - 8.0f));
        assert_true(fabs(y[i] - e) <= 5e-7 * e);
    }
    /* dropout select and mask words, and the recorded mask applied again, against their
     * definitions (n = 1000: 31 whole words and a partial one) */
    uint32_t u[1000], bits[32], thresh = 0x40000000u;
    float *r = vec(1000);
    fill(r, 1000, 32, 1.0f);
    for (int i = 0; i < 1000; i++)
        u[i] = (uint32_t)i * 2654435761u;
    vm_dropout(y, x, r, u, 1000, thresh, 1.25f, bits);
    vm_apply_keep(g, x, bits, 1000, 1.25f);
    for (int i = 0; i < 1000; i++) {
        int kept = u[i] >= thresh;
        float v = kept ? x[i] * 1.25f : 0.0f;
        assert_int_equal((int)((bits[i / 32] >> (i % 32)) & 1u), kept);
        assert_true(memcmp(&(float){v + r[i]}, &y[i], 4) == 0);
        assert_true(memcmp(&v, &g[i], 4) == 0);
    }
    free(x); free(y); free(g); free(one); free(r);
}

/* ---- attention -------------------------------------------------------------------------- */

typedef struct {
    int B, T, C, H;
    float *q, *k, *v, *ctx, *att, *scratch, *R;
    int64_t *mask;
    zt_dropout drop;
} att_ctx;

static double att_loss(fd_case *c)
{
    att_ctx *a = c->ctx;
    attention_forward(a->ctx, a->att, NULL, a->q, a->k, a->v, a->mask, &a->drop, a->scratch, 1,
                      a->B, a->T, a->C, a->H);
    return dot(a->ctx, a->R, (size_t)a->B * a->T * a->C);
}

static void run_attention(float p)
{
    att_ctx a = {.B = 2, .T = 9, .C = 12, .H = 3};
    size_t n = (size_t)a.B * a.T * a.C;
    a.q = vec(n); a.k = vec(n); a.v = vec(n); a.ctx = vec(n); a.R = vec(n);
    a.att = vec((size_t)a.B * a.H * a.T * a.T);
    a.scratch = vec(2 * (size_t)a.T * a.T);
    a.mask = calloc((size_t)a.B * a.T, sizeof *a.mask);
    assert_non_null(a.mask);
    for (int t = 0; t < a.T; t++) {
        a.mask[t] = 1;                 /* row 0: no padding */
        a.mask[a.T + t] = t < 5;       /* row 1: last 4 keys padded */
    }
    a.drop = (zt_dropout){p, 99, 1000, zt_rng_stream(3, ZT_RNG_DROP_ATT)};
    fill(a.q, n, 31, 1); fill(a.k, n, 32, 1); fill(a.v, n, 33, 1); fill(a.R, n, 34, 1);
    fd_case c = {att_loss, &a};
    att_loss(&c);
    /* probabilities: rows sum to 1, padded keys get exactly 0 */
    for (int bh = 0; bh < a.B * a.H; bh++)
        for (int i = 0; i < a.T; i++) {
            const float *row = a.att + ((size_t)bh * a.T + i) * a.T;
            double s = 0;
            for (int j = 0; j < a.T; j++) {
                s += row[j];
                if (bh >= a.H && j >= 5)
                    assert_true(row[j] == 0.0f);
            }
            assert_true(fabs(s - 1.0) < 1e-5);
        }
    float *dq = vec(n), *dk = vec(n), *dv = vec(n);
    attention_backward(dq, dk, dv, a.R, a.att, NULL, a.q, a.k, a.v, &a.drop, a.scratch, 1, a.B,
                       a.T, a.C, a.H);
    fd_check(p > 0 ? "attention dq (dropout)" : "attention dq", &c, a.q, dq, n);
    fd_check(p > 0 ? "attention dk (dropout)" : "attention dk", &c, a.k, dk, n);
    fd_check(p > 0 ? "attention dv (dropout)" : "attention dv", &c, a.v, dv, n);
    /* the keep-mask recorded by the forward gives the same bits as regenerating it, with
     * two slots (threads) or one */
    {
        size_t words = (size_t)a.B * a.H * (((size_t)a.T * a.T + 31) / 32);
        uint32_t *keep = calloc(words, sizeof *keep);
        float *ctx2 = vec(n), *dq2 = vec(n), *dk2 = vec(n), *dv2 = vec(n), *scr2 = vec(4 * (size_t)a.T * a.T);
        assert_non_null(keep);
        attention_forward(ctx2, a.att, keep, a.q, a.k, a.v, a.mask, &a.drop, scr2, 2, a.B, a.T,
                          a.C, a.H);
        attention_backward(dq2, dk2, dv2, a.R, a.att, keep, a.q, a.k, a.v, &a.drop, scr2, 2,
                           a.B, a.T, a.C, a.H);
        att_loss(&c); /* a.ctx again from the unperturbed inputs */
        assert_memory_equal(ctx2, a.ctx, n * sizeof(float));
        assert_memory_equal(dq2, dq, n * sizeof(float));
        assert_memory_equal(dk2, dk, n * sizeof(float));
        assert_memory_equal(dv2, dv, n * sizeof(float));
        free(keep); free(ctx2); free(dq2); free(dk2); free(dv2); free(scr2);
    }
    free(a.q); free(a.k); free(a.v); free(a.ctx); free(a.R); free(a.att); free(a.scratch);
    free(a.mask); free(dq); free(dk); free(dv);
}

/* vm_gemm_nt_small (generation's few-row products): within fp32 accumulation error of a
 * double product (|err| <= (K/8 + 4) * 2^-23 * sum |a b| per element: a lane adds K/8 terms,
 * then the eight lanes meet in three additions), the wide path the portable path's bits,
 * any split of the columns the same bits, and linear_decode_forward (threaded) too. */
static void test_gemm_small(void **state)
{
    (void)state;
    const int Ms[] = {1, 2, 3, 5, 7, 16}, Ks[] = {1, 7, 8, 13, 64, 100}, Ns[] = {1, 5, 67, 130};
    int have[3] = {1, 0, 0};
    for (size_t a = 0; a < sizeof Ms / sizeof *Ms; a++)
        for (size_t b = 0; b < sizeof Ks / sizeof *Ks; b++)
            for (size_t c = 0; c < sizeof Ns / sizeof *Ns; c++) {
                int M = Ms[a], K = Ks[b], N = Ns[c];
                size_t on = (size_t)M * N;
                float *x = vec((size_t)M * K), *w = vec((size_t)N * K), *y1 = vec(on), *yp = vec(on);
                float *y8 = vec(on), *ys = vec(on), *yl = vec(on);
                fill(x, (size_t)M * K, 11 + a, 1.0f);
                fill(w, (size_t)N * K, 17 + b * 7 + c, 0.5f);
                vm_gemm_nt_small_1(y1, (size_t)N, x, w, M, K, 0, N);
                vm_gemm_nt_small(y8, (size_t)N, x, w, M, K, 0, N);
                for (int n0 = 0; n0 < N; n0 += 3) /* another split of the columns */
                    vm_gemm_nt_small(ys, (size_t)N, x, w, M, K, n0, n0 + 3 < N ? n0 + 3 : N);
                linear_decode_forward(yl, x, w, M, K, N);
                for (int m = 0; m < M; m++)
                    for (int n = 0; n < N; n++) {
                        double ref = 0, mag = 0;
                        for (int k = 0; k < K; k++) {
                            ref += (double)x[m * K + k] * w[n * K + k];
                            mag += fabs((double)x[m * K + k] * w[n * K + k]);
                        }
                        double tol = (K / 8 + 4) * 0x1p-23 * mag;
                        if (fabs(y1[m * N + n] - ref) > tol)
                            fail_msg("M %d K %d N %d [%d,%d]: %.9g vs %.9g", M, K, N, m, n,
                                     y1[m * N + n], ref);
                    }
                for (int p = 1; p <= 2; p++) /* each fast path: the portable path's bits */
                    if (vm_gemm_nt_small_path(p, yp, (size_t)N, x, w, M, K, 0, N) == 0) {
                        have[p] = 1;
                        if (memcmp(yp, y1, sizeof(float) * on) != 0)
                            fail_msg("path %d differs from the portable one at M %d K %d N %d", p, M, K, N);
                    }
                assert_memory_equal(y8, y1, sizeof(float) * on);
                assert_memory_equal(ys, y8, sizeof(float) * on);
                assert_memory_equal(yl, y8, sizeof(float) * on);
                free(x), free(w), free(y1), free(yp), free(y8), free(ys), free(yl);
            }
    if (!have[1] || !have[2]) {
        printf("gemm_nt_small: the %s path is not available on this CPU, skipped\n",
               have[1] ? "AVX-512VL" : "AVX2 and AVX-512VL");
        skip();
    }
}

static void test_attention(void **state) { (void)state; run_attention(0.0f); }
static void test_attention_dropout(void **state) { (void)state; run_attention(0.25f); }

/* Packed rows (a classifier's unpadded batches) against the padded call with its key mask:
 * rows of 9, 5 and 1 tokens. Without dropout the real rows agree to fp32 rounding (the
 * softmax sums the same terms, the padded one with exact zeros among them, possibly in
 * another order: a few ulps); with attention dropout query row 0 of each pair draws the
 * padded counters, and the recorded mask replays exactly. Hidden dropout and embeddings:
 * a packed row is its padded row's prefix, bit for bit. */
static void test_packed_rows(void **state)
{
    (void)state;
    enum { B = 3, T = 9, C = 12, H = 3 };
    const int32_t cu[B + 1] = {0, 9, 14, 15};
    size_t n = (size_t)B * T * C, np = (size_t)cu[B] * C, att_n = (size_t)B * H * T * T;
    int64_t mask[B * T];
    float *q = vec(n), *k = vec(n), *v = vec(n), *R = vec(n), *ctx = vec(n), *att = vec(att_n);
    float *pq = vec(np), *pk = vec(np), *pv = vec(np), *pR = vec(np), *pctx = vec(np);
    float *patt = vec(att_n), *scr = vec(4 * (size_t)T * T), *g[6], *pg[6];
    for (int i = 0; i < 6; i++) {
        g[i] = vec(n);
        pg[i] = vec(np);
    }
    fill(q, n, 61, 1); fill(k, n, 62, 1); fill(v, n, 63, 1); fill(R, n, 64, 1);
    for (int b = 0; b < B; b++) {
        int L = cu[b + 1] - cu[b];
        for (int t = 0; t < T; t++) {
            mask[b * T + t] = t < L;
            if (t >= L) /* a padded query row's output reaches no loss: no gradient */
                memset(R + ((size_t)b * T + t) * C, 0, C * sizeof(float));
        }
        size_t from = (size_t)b * T * C, to = (size_t)cu[b] * C, len = (size_t)L * C * 4;
        memcpy(pq + to, q + from, len); memcpy(pk + to, k + from, len);
        memcpy(pv + to, v + from, len); memcpy(pR + to, R + from, len);
    }
    for (int pass = 0; pass < 2; pass++) {
        zt_dropout d = {pass ? 0.25f : 0.0f, 7, 300, zt_rng_stream(2, ZT_RNG_DROP_ATT)};
        attention_forward(ctx, att, NULL, q, k, v, mask, &d, scr, 1, B, T, C, H);
        attention_forward_varlen(pctx, patt, NULL, pq, pk, pv, cu, &d, scr, 1, B, T, C, H);
        attention_backward(g[0], g[1], g[2], R, att, NULL, q, k, v, &d, scr, 1, B, T, C, H);
        attention_backward_varlen(pg[0], pg[1], pg[2], pR, patt, NULL, pq, pk, pv, cu, &d, scr, 1,
                                  B, T, C, H);
        for (int b = 0; b < B; b++)
            for (int t = 0; t < cu[b + 1] - cu[b]; t++)
                for (int c = 0; c < C; c++) {
                    size_t i = ((size_t)b * T + t) * C + c, j = ((size_t)cu[b] + t) * C + c;
                    if (pass == 0 || t == 0)
                        assert_true(fabsf(ctx[i] - pctx[j]) <= 1e-6f * (1.0f + fabsf(ctx[i])));
                    for (int x = 0; pass == 0 && x < 3; x++)
                        assert_true(fabsf(g[x][i] - pg[x][j]) <= 1e-5f * (1.0f + fabsf(g[x][i])));
                }
        /* the keep-mask the forward records replays the regenerated decisions exactly */
        size_t words = (size_t)B * H * (((size_t)T * T + 31) / 32);
        uint32_t *keep = calloc(words, sizeof *keep);
        assert_non_null(keep);
        float *pctx2 = vec(np);
        attention_forward_varlen(pctx2, patt, keep, pq, pk, pv, cu, &d, scr, 2, B, T, C, H);
        attention_backward_varlen(pg[3], pg[4], pg[5], pR, patt, keep, pq, pk, pv, cu, &d, scr, 2,
                                  B, T, C, H);
        assert_memory_equal(pctx2, pctx, np * 4);
        for (int x = 0; x < 3; x++)
            assert_memory_equal(pg[x + 3], pg[x], np * 4);
        free(keep);
        free(pctx2);
    }
    /* hidden dropout with the residual, and its backward, recorded and regenerated */
    zt_dropout d = {0.3f, 11, 50, zt_rng_stream(4, ZT_RNG_DROP_ATTOUT)};
    uint32_t keep[B * T * C / 32 + B];
    memcpy(g[0], q, n * 4); memcpy(pg[0], pq, np * 4);
    memcpy(g[1], R, n * 4); memcpy(pg[1], pR, np * 4); memcpy(pg[2], pR, np * 4);
    dropout_residual(g[0], k, NULL, &d, B, (size_t)T * C);
    dropout_residual_rows(pg[0], pk, keep, &d, B, cu, C);
    dropout_backward(g[1], NULL, &d, B, (size_t)T * C);
    dropout_backward_rows(pg[1], keep, &d, B, cu, C);
    dropout_backward_rows(pg[2], NULL, &d, B, cu, C);
    /* embeddings at the rows' own positions */
    int64_t ids[B * T], pids[B * T], ptt[B * T], ppos[B * T];
    float *word = vec(20 * C), *type = vec(2 * C), *pos = vec(T * C);
    fill(word, 20 * C, 65, 1); fill(type, 2 * C, 66, 1); fill(pos, T * C, 67, 1);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            ids[b * T + t] = (b * 7 + t * 3) % 20;
            if (t < cu[b + 1] - cu[b]) {
                pids[cu[b] + t] = ids[b * T + t];
                ptt[cu[b] + t] = 0;
                ppos[cu[b] + t] = t;
            }
        }
    embedding_forward(g[3], ids, NULL, word, type, pos, B, T, C);
    embedding_forward_pos(pg[3], pids, ptt, ppos, word, type, pos, cu[B], C);
    for (int b = 0; b < B; b++) {
        size_t from = (size_t)b * T * C, to = (size_t)cu[b] * C, len = (size_t)(cu[b + 1] - cu[b]) * C * 4;
        assert_memory_equal(pg[0] + to, g[0] + from, len);
        assert_memory_equal(pg[1] + to, g[1] + from, len);
        assert_memory_equal(pg[2] + to, g[1] + from, len);
        assert_memory_equal(pg[3] + to, g[3] + from, len);
    }
    free(word); free(type); free(pos);
    free(q); free(k); free(v); free(R); free(ctx); free(att);
    free(pq); free(pk); free(pv); free(pR); free(pctx); free(patt); free(scr);
    for (int i = 0; i < 6; i++) {
        free(g[i]);
        free(pg[i]);
    }
}

/* ---- relative position scores (BERT's relative_key / relative_key_query) ---------------- */

typedef struct {
    int B, T, C, H, P, kq;
    float *q, *k, *v, *E, *ctx, *att, *scratch, *work, *R;
    int64_t *mask;
} rel_ctx_t;

static double rel_loss(fd_case *c)
{
    rel_ctx_t *a = c->ctx;
    zt_relpos r = {a->E, NULL, a->work, a->P, a->kq};
    xattention_forward_rel(-1, a->ctx, a->att, NULL, a->q, a->k, a->v, a->mask, NULL, 0, &r, NULL,
                           a->scratch, 1, a->B, a->T, a->C, a->H);
    return dot(a->ctx, a->R, (size_t)a->B * a->T * a->C);
}

/* The relative terms' forward against scores written out here (q.k + q.E[i-j+P-1] (+ k.E),
 * over sqrt(D), the key mask, softmax, times v: 1e-5 of a double computation), every
 * gradient (q, k, v, and E: the pairs' sum) against central differences, and the packed rows
 * and the first-token-only call against the padded call (fp32 rounding: other summation
 * orders of the same terms). */
static void run_relative(int kq)
{
    rel_ctx_t a = {.B = 2, .T = 7, .C = 12, .H = 3, .P = 9, .kq = kq};
    int D = a.C / a.H, B = a.B, T = a.T, C = a.C, H = a.H, NE = 2 * a.P - 1;
    size_t n = (size_t)B * T * C, ne = (size_t)NE * D;
    size_t wn = attention_rel_scratch(-1, 0, B, H, T, T, D, 2, 1);
    a.q = vec(n); a.k = vec(n); a.v = vec(n); a.ctx = vec(n); a.R = vec(n); a.E = vec(ne);
    a.att = vec((size_t)B * H * T * T); a.scratch = vec(4 * (size_t)T * T); a.work = vec(wn);
    a.mask = calloc((size_t)B * T, sizeof *a.mask);
    assert_non_null(a.mask);
    const int32_t cu[3] = {0, 7, 11};
    for (int t = 0; t < T; t++) {
        a.mask[t] = 1;
        a.mask[T + t] = t < 4; /* row 1: 4 real tokens */
    }
    fill(a.q, n, 41, 1); fill(a.k, n, 42, 1); fill(a.v, n, 43, 1); fill(a.E, ne, 44, 1);
    fill(a.R, n, 45, 1);
    for (int t = 4; t < T; t++) /* padded queries reach no loss */
        memset(a.R + ((size_t)T + t) * C, 0, C * sizeof(float));
    fd_case c = {rel_loss, &a};
    rel_loss(&c);
    for (int b = 0; b < B; b++) /* the forward against scores written out */
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T; i++) {
                double sc[7], mx = -1e300, sum = 0.0;
                for (int j = 0; j < T; j++) {
                    const float *qi = a.q + ((size_t)b * T + i) * C + h * D;
                    const float *kj = a.k + ((size_t)b * T + j) * C + h * D;
                    const float *e = a.E + (size_t)(i - j + a.P - 1) * D;
                    double s = 0.0;
                    for (int d = 0; d < D; d++)
                        s += (double)qi[d] * kj[d] + (double)qi[d] * e[d] + (kq ? (double)kj[d] * e[d] : 0.0);
                    sc[j] = a.mask[b * T + j] ? s / sqrt((double)D) : -1e300;
                    mx = fmax(mx, sc[j]);
                }
                for (int j = 0; j < T; j++)
                    sum += sc[j] > -1e299 ? exp(sc[j] - mx) : 0.0;
                for (int d = 0; d < D; d++) {
                    double o = 0.0;
                    for (int j = 0; j < T; j++)
                        if (sc[j] > -1e299)
                            o += exp(sc[j] - mx) / sum * a.v[((size_t)b * T + j) * C + h * D + d];
                    double got = a.ctx[((size_t)b * T + i) * C + h * D + d];
                    if (fabs(got - o) > 1e-5 * (1.0 + fabs(o)))
                        fail_msg("relative forward [%d,%d,%d,%d]: %.9g, written out %.9g", b, h, i,
                                 d, got, o);
                }
            }
    float *dq = vec(n), *dk = vec(n), *dv = vec(n), *dE = vec(ne);
    zt_relpos r = {a.E, dE, a.work, a.P, kq};
    xattention_backward_rel(-1, dq, dk, dv, a.R, a.att, NULL, a.q, a.k, a.v, NULL, 0, &r, NULL,
                            a.scratch, 1, B, T, C, H);
    fd_check(kq ? "relative_key_query dq" : "relative_key dq", &c, a.q, dq, n);
    fd_check(kq ? "relative_key_query dk" : "relative_key dk", &c, a.k, dk, n);
    fd_check(kq ? "relative_key_query dv" : "relative_key dv", &c, a.v, dv, n);
    fd_check(kq ? "relative_key_query dE" : "relative_key dE", &c, a.E, dE, ne);
    /* packed rows (two threads): the same values within fp32 rounding, E's gradient too */
    {
        size_t np = (size_t)cu[B] * C;
        float *pq = vec(np), *pk = vec(np), *pv = vec(np), *pR = vec(np), *pctx = vec(np);
        float *pdq = vec(np), *pdk = vec(np), *pdv = vec(np), *pdE = vec(ne);
        for (int b = 0; b < B; b++) {
            size_t from = (size_t)b * T * C, to = (size_t)cu[b] * C;
            size_t len = (size_t)(cu[b + 1] - cu[b]) * C * 4;
            memcpy(pq + to, a.q + from, len); memcpy(pk + to, a.k + from, len);
            memcpy(pv + to, a.v + from, len); memcpy(pR + to, a.R + from, len);
        }
        zt_relpos pr = {a.E, pdE, a.work, a.P, kq};
        xattention_forward_rel(-1, pctx, a.att, NULL, pq, pk, pv, NULL, cu, 0, &pr, NULL,
                               a.scratch, 2, B, T, C, H);
        xattention_backward_rel(-1, pdq, pdk, pdv, pR, a.att, NULL, pq, pk, pv, cu, 0, &pr, NULL,
                                a.scratch, 2, B, T, C, H);
        rel_loss(&c);
        for (int b = 0; b < B; b++)
            for (size_t x = 0; x < (size_t)(cu[b + 1] - cu[b]) * C; x++) {
                size_t i = (size_t)b * T * C + x, j = (size_t)cu[b] * C + x;
                assert_true(fabsf(a.ctx[i] - pctx[j]) <= 1e-5f * (1.0f + fabsf(a.ctx[i])));
                assert_true(fabsf(dq[i] - pdq[j]) <= 1e-5f * (1.0f + fabsf(dq[i])));
                assert_true(fabsf(dk[i] - pdk[j]) <= 1e-5f * (1.0f + fabsf(dk[i])));
            }
        for (size_t x = 0; x < ne; x++)
            assert_true(fabsf(dE[x] - pdE[x]) <= 1e-5f * (1.0f + fabsf(dE[x])));
        /* the first token's query alone: the full call's row 0 */
        float *fq = vec((size_t)B * C), *fctx = vec((size_t)B * C), *fatt = vec((size_t)B * H * T);
        for (int b = 0; b < B; b++)
            memcpy(fq + (size_t)b * C, pq + (size_t)cu[b] * C, C * 4);
        xattention_forward_rel(-1, fctx, fatt, NULL, fq, pk, pv, NULL, cu, 1, &pr, NULL,
                               a.scratch, 2, B, T, C, H);
        for (int b = 0; b < B; b++)
            for (int x = 0; x < C; x++)
                assert_true(fabsf(fctx[(size_t)b * C + x] - a.ctx[(size_t)b * T * C + x]) <=
                            1e-5f * (1.0f + fabsf(a.ctx[(size_t)b * T * C + x])));
        free(pq); free(pk); free(pv); free(pR); free(pctx); free(pdq); free(pdk); free(pdv);
        free(pdE); free(fq); free(fctx); free(fatt);
    }
    free(a.q); free(a.k); free(a.v); free(a.ctx); free(a.R); free(a.E); free(a.att);
    free(a.scratch); free(a.work); free(a.mask); free(dq); free(dk); free(dv); free(dE);
}

static void test_relative_key(void **state) { (void)state; run_relative(0); }
static void test_relative_key_query(void **state) { (void)state; run_relative(1); }

/* ---- dropout ---------------------------------------------------------------------------- */

static void test_dropout(void **state)
{
    (void)state;
    enum { B = 4, N = 5000 };
    float *x = vec((size_t)B * N), *y = vec((size_t)B * N);
    zt_dropout d = {0.3f, 5, 40, zt_rng_stream(1, ZT_RNG_DROP_ATTOUT)};
    for (size_t i = 0; i < (size_t)B * N; i++)
        x[i] = 1.0f;
    memcpy(y, x, sizeof(float) * B * N);
    dropout_apply(x, &d, B, N);
    size_t zeros = 0;
    for (size_t i = 0; i < (size_t)B * N; i++) {
        assert_true(x[i] == 0.0f || fabsf(x[i] - 1.0f / 0.7f) < 1e-6f);
        zeros += x[i] == 0.0f;
    }
    /* 20000 Bernoulli(0.3): mean 6000, sd 65; 6 sd bounds */
    assert_true(zeros > 6000 - 390 && zeros < 6000 + 390);
    /* a row's mask depends on its global sample index only: rows 1..3 of a batch starting at
     * sample 40 equal rows 0..2 of a batch starting at sample 41 */
    zt_dropout d2 = d;
    d2.first_sample = 41;
    dropout_apply(y, &d2, B - 1, N);
    assert_memory_equal(x + N, y, sizeof(float) * (B - 1) * N);
    free(x); free(y);
}

/* dropout fused with the residual add equals dropout then add; the recorded mask applied
 * in backward equals the regenerated one; rows longer than one piece and a partial last
 * mask word */
static void test_dropout_residual(void **state)
{
    (void)state;
    enum { B = 3, N = 40001 };
    size_t n = (size_t)B * N, words = (size_t)B * ((N + 31) / 32);
    float *x = vec(n), *r = vec(n), *want = vec(n), *g = vec(n), *g1 = vec(n), *g2 = vec(n);
    uint32_t *keep = calloc(words, sizeof *keep);
    zt_dropout d = {0.1f, 9, 12, zt_rng_stream(3, ZT_RNG_DROP_FFOUT)};
    fill(x, n, 41, 1.0f); fill(r, n, 42, 1.0f); fill(g, n, 43, 1.0f);
    memcpy(want, x, n * sizeof(float));
    dropout_apply(want, &d, B, N);
    for (size_t i = 0; i < n; i++)
        want[i] += r[i];
    dropout_residual(x, r, keep, &d, B, N);
    assert_memory_equal(x, want, n * sizeof(float));
    memcpy(g1, g, n * sizeof(float));
    memcpy(g2, g, n * sizeof(float));
    dropout_apply(g1, &d, B, N);
    dropout_backward(g2, keep, &d, B, N);
    assert_memory_equal(g1, g2, n * sizeof(float));
    memcpy(g2, g, n * sizeof(float));
    dropout_backward(g2, NULL, &d, B, N);
    assert_memory_equal(g1, g2, n * sizeof(float));
    /* bit j of a row's word w is element 32 w + j of that row */
    size_t kept = 0, wpr = (N + 31) / 32;
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < N; i++) {
            int bit = (int)((keep[b * wpr + i / 32] >> (i % 32)) & 1u);
            assert_int_equal(bit, g1[b * N + i] != 0.0f || g[b * N + i] == 0.0f);
            kept += (size_t)bit;
        }
    /* 120003 Bernoulli(0.9) keeps: sd 104, 6 sd */
    assert_true(kept > 108003 - 624 && kept < 108003 + 624);
    free(x); free(r); free(want); free(g); free(g1); free(g2); free(keep);
}

/* ---- embeddings ------------------------------------------------------------------------- */

typedef struct { int B, T, C; int64_t *ids, *tt; float *word, *type, *pos, *out, *R; } emb_ctx;

static double emb_loss(fd_case *c)
{
    emb_ctx *e = c->ctx;
    embedding_forward(e->out, e->ids, e->tt, e->word, e->type, e->pos, e->B, e->T, e->C);
    return dot(e->out, e->R, (size_t)e->B * e->T * e->C);
}

static void test_embedding(void **state)
{
    (void)state;
    emb_ctx e = {.B = 2, .T = 6, .C = 10};
    int V = 7, TT = 3;
    size_t n = (size_t)e.B * e.T * e.C;
    int64_t ids[12] = {1, 3, 3, 0, 6, 2, 5, 5, 5, 1, 0, 4}, tt[12] = {0, 0, 1, 1, 2, 2,
                                                                         0, 1, 1, 1, 1, 0};
    e.ids = ids; e.tt = tt;
    e.word = vec((size_t)V * e.C); e.type = vec((size_t)TT * e.C); e.pos = vec((size_t)e.T * e.C);
    e.out = vec(n); e.R = vec(n);
    fill(e.word, (size_t)V * e.C, 41, 1); fill(e.type, (size_t)TT * e.C, 42, 1);
    fill(e.pos, (size_t)e.T * e.C, 43, 1); fill(e.R, n, 44, 1);
    float *dw = vec((size_t)V * e.C), *dt = vec((size_t)TT * e.C), *dp = vec((size_t)e.T * e.C);
    embedding_backward(dw, dt, dp, e.R, e.ids, e.tt, e.B, e.T, e.C);
    fd_case c = {emb_loss, &e};
    fd_check("embedding dword", &c, e.word, dw, (size_t)V * e.C);
    fd_check("embedding dtype", &c, e.type, dt, (size_t)TT * e.C);
    fd_check("embedding dpos", &c, e.pos, dp, (size_t)e.T * e.C);
    free(e.word); free(e.type); free(e.pos); free(e.out); free(e.R); free(dw); free(dt); free(dp);
}

/* ---- cross-entropy ---------------------------------------------------------------------- */

typedef struct { int M, V; float *logits; int64_t *labels; double *rows; } ce_ctx;

static double ce_loss(fd_case *c)
{
    ce_ctx *e = c->ctx;
    int64_t n;
    return crossentropy_forward_backward(NULL, e->rows, &n, e->logits, e->labels, e->M, e->V,
                                         0.0f);
}

static void test_crossentropy(void **state)
{
    (void)state;
    ce_ctx e = {.M = 6, .V = 11};
    int64_t labels[6] = {3, -100, 0, 10, -100, 7}, n;
    size_t nl = (size_t)e.M * e.V;
    e.labels = labels;
    e.logits = vec(nl);
    e.rows = calloc((size_t)e.M, sizeof(double));
    fill(e.logits, nl, 51, 3);
    float *d = vec(nl);
    double loss = crossentropy_forward_backward(d, e.rows, &n, e.logits, labels, e.M, e.V, 1.0f);
    assert_int_equal(n, 4);
    /* the loss of a row is logsumexp - logit[label], computed here independently */
    double want = 0;
    for (int m = 0; m < e.M; m++) {
        if (labels[m] == -100)
            continue;
        double s = 0;
        for (int j = 0; j < e.V; j++)
            s += exp((double)e.logits[m * e.V + j]);
        want += log(s) - e.logits[m * e.V + labels[m]];
    }
    assert_true(fabs(loss - want) < 1e-5 * fabs(want));
    for (int j = 0; j < e.V; j++)
        assert_true(d[1 * e.V + j] == 0.0f && d[4 * e.V + j] == 0.0f);
    fd_case c = {ce_loss, &e};
    fd_check("cross-entropy dlogits", &c, e.logits, d, nl);
    free(e.logits); free(e.rows); free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear),     cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_gelu),       cmocka_unit_test(test_attention),
        cmocka_unit_test(test_attention_dropout), cmocka_unit_test(test_packed_rows),
        cmocka_unit_test(test_relative_key), cmocka_unit_test(test_relative_key_query),
        cmocka_unit_test(test_dropout),
        cmocka_unit_test(test_embedding),  cmocka_unit_test(test_crossentropy),
        cmocka_unit_test(test_vmath),      cmocka_unit_test(test_gemm_small),      cmocka_unit_test(test_dropout_residual),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
