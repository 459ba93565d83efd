/* test_hlayers.c - the 16-bit kernels of models/hlayers.c (and layers.c's half attention and
 * dropout) against the fp32 kernels, in bf16 and fp16. The inputs are random values rounded
 * to the dtype, so both sides see the same numbers:
 *   - every kernel but the products computes in fp32 on the widened inputs with layers.c's
 *     arithmetic: its 16-bit output must be the fp32 kernel's output rounded to nearest even,
 *     bit for bit, and its fp32 outputs (statistics, gradients) the same bits;
 *   - the products (hgemm: bf16 on oneDNN where the CPU has it, else widened into sgemm) may
 *     sum in another order: against the exact product (double, of the same 16-bit values)
 *     each element of the fp32 sums may differ by gamma_K sum |a b| (Higham 3.1, u = 2^-24),
 *     so a rounded output must lie between the roundings of exact - bound and exact + bound;
 *   - attention rounds its probabilities before multiplying v (the backward reads those): the
 *     stored probabilities are the fp32 kernel's rounded; the context is checked against an
 *     fp32 product of the rounded (and dropped-out) probabilities within gamma_T (and a
 *     rounding of its own); the backward equals the fp32 backward fed the widened q, k, v and
 *     stored probabilities, bit for bit (the same arithmetic on the same fp32 values);
 *   - T5's: the RMS norm, the feed-forward's activations and product, the tied head's scale,
 *     the embedding lookup, and its attention (position bias, causal or cross) likewise. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/half.h"
#include "../common/rng.h"
#include "../models/hgemm.h"
#include "../models/hlayers.h"

static const char *const dt_name[2] = {"bf16", "fp16"};

static float *vec(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof(float));
    assert_non_null(p);
    return p;
}

static uint16_t *hvec(size_t n)
{
    uint16_t *p = calloc(n ? n : 1, sizeof(uint16_t));
    assert_non_null(p);
    return p;
}

/* n values N(0, scale) rounded to dt: h holds the bits, f (may be NULL) their fp32 values */
static void fill_h(int dt, uint16_t *h, float *f, size_t n, uint64_t seed, float scale)
{
    float *t = vec(n);
    zt_rng_normal(seed, 0, 7, t, n);
    for (size_t i = 0; i < n; i++)
        t[i] *= scale;
    zt_half_narrow(dt, h, t, n);
    if (f)
        zt_half_widen(dt, f, h, n);
    free(t);
}

static void fill_f(float *f, size_t n, uint64_t seed, float scale)
{
    zt_rng_normal(seed, 0, 9, f, n);
    for (size_t i = 0; i < n; i++)
        f[i] *= scale;
}

/* h must be ref rounded, element by element */
static void same_rounded(const char *what, int dt, const uint16_t *h, const float *ref, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint16_t want = zt_half_of(dt, ref[i]);
        if (h[i] != want)
            fail_msg("%s (%s): element %zu is 0x%04x (%g), the fp32 kernel's %.9g rounds to "
                     "0x%04x", what, dt_name[dt], i, h[i], (double)zt_half_value(dt, h[i]),
                     (double)ref[i], want);
    }
}

static void same_f32(const char *what, int dt, const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], 4) != 0)
            fail_msg("%s (%s): element %zu is %.9g, the fp32 kernel's %.9g", what, dt_name[dt], i,
                     (double)a[i], (double)b[i]);
}

/* |got - exact| <= bound for an fp32 result; a rounded result between the roundings of
 * exact -/+ bound (rounding is monotonic; the ends first taken to floats outside them) */
static void within(const char *what, int dt, double got, double exact, double bound, size_t i,
                   int rounded)
{
    double lo = exact - bound, hi = exact + bound;
    if (rounded) {
        float lf = nextafterf((float)lo, -INFINITY), hf = nextafterf((float)hi, INFINITY);
        lo = zt_half_value(dt, zt_half_of(dt, lf));
        hi = zt_half_value(dt, zt_half_of(dt, hf));
    }
    if (!(got >= lo && got <= hi))
        fail_msg("%s (%s): element %zu is %.9g, exact %.9g, allowed [%.9g, %.9g]", what,
                 dt_name[dt], i, got, exact, lo, hi);
}

/* ---- linear ---------------------------------------------------------------------------- */

static void run_linear(int dt, int M, int K, int N, size_t scr_rows)
{
    uint16_t *in = hvec((size_t)M * K), *w = hvec((size_t)N * K), *b = hvec((size_t)N);
    uint16_t *out = hvec((size_t)M * N), *hs = hvec(scr_rows * (size_t)N);
    float *inf = vec((size_t)M * K), *wf = vec((size_t)N * K), *bf = vec((size_t)N);
    float *scr = vec(scr_rows * (size_t)N), *o32 = vec((size_t)M * N);
    float *dout = vec((size_t)M * N), *dinp = vec((size_t)M * K), *dw = vec((size_t)N * K);
    float *db = vec((size_t)N);
    fill_h(dt, in, inf, (size_t)M * K, 1, 1.0f);
    fill_h(dt, w, wf, (size_t)N * K, 2, 0.1f);
    fill_h(dt, b, bf, (size_t)N, 3, 0.5f);
    fill_f(dout, (size_t)M * N, 4, 1.0f);
    fill_f(dinp, (size_t)M * K, 5, 0.1f); /* accumulated into */
    float *dinp0 = vec((size_t)M * K);
    memcpy(dinp0, dinp, 4 * (size_t)M * K);
    xlinear_forward(dt, out, in, w, b, M, K, N, scr, scr_rows * (size_t)N);
    xlinear_forward_f32(dt, o32, in, w, b, M, K, N);
    xlinear_backward(dt, dinp, dw, db, dout, in, w, M, K, N, hs, scr_rows * (size_t)N);
    double u = 0x1p-24;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double s = 0.0, sa = 0.0;
            for (int k = 0; k < K; k++) {
                double p = (double)inf[(size_t)m * K + k] * wf[(size_t)n * K + k];
                s += p;
                sa += fabs(p);
            }
            double g = (K + 2) * u / (1 - (K + 2) * u), bound = g * (sa + fabs(bf[n])) + 1e-30;
            size_t i = (size_t)m * N + n;
            within("linear forward", dt, zt_half_value(dt, out[i]), s + bf[n], bound, i, 1);
            within("linear forward (fp32 out)", dt, o32[i], s + bf[n], bound, i, 0);
        }
    /* the backward: dout rounded to dt first */
    float *dh = vec((size_t)M * N);
    for (size_t i = 0; i < (size_t)M * N; i++)
        dh[i] = zt_half_value(dt, zt_half_of(dt, dout[i]));
    for (int m = 0; m < M; m++)
        for (int k = 0; k < K; k++) {
            double s = 0.0, sa = 0.0;
            for (int n = 0; n < N; n++) {
                double p = (double)dh[(size_t)m * N + n] * wf[(size_t)n * K + k];
                s += p;
                sa += fabs(p);
            }
            double g = (N + 2) * u / (1 - (N + 2) * u), d0 = dinp0[(size_t)m * K + k];
            within("linear dinp", dt, dinp[(size_t)m * K + k], s + d0,
                   g * (sa + fabs(d0)) + 1e-30, (size_t)m * K + k, 0);
        }
    /* dw accumulates over row blocks: at most M/rows + 1 additions more than one product */
    double nb = (double)((M + (int)scr_rows - 1) / (int)scr_rows);
    for (int n = 0; n < N; n++) {
        double cs = 0.0;
        for (int k = 0; k < K; k++) {
            double s = 0.0, sa = 0.0;
            for (int m = 0; m < M; m++) {
                double p = (double)dh[(size_t)m * N + n] * inf[(size_t)m * K + k];
                s += p;
                sa += fabs(p);
            }
            double g = (M + nb + 2) * u / (1 - (M + nb + 2) * u);
            within("linear dw", dt, dw[(size_t)n * K + k], s, g * sa + 1e-30, (size_t)n * K + k, 0);
        }
        for (int m = 0; m < M; m++)
            cs += dh[(size_t)m * N + n];
        within("linear db", dt, db[n], cs, 2 * u * fabs(cs) + 1e-30, (size_t)n, 0);
    }
    free(in); free(w); free(b); free(out); free(hs); free(inf); free(wf); free(bf); free(scr);
    free(o32); free(dout); free(dinp); free(dw); free(db); free(dinp0); free(dh);
}

static void test_linear(void **state)
{
    (void)state;
    for (int dt = 0; dt < 2; dt++) {
        run_linear(dt, 37, 64, 48, 37);     /* one block */
        run_linear(dt, 37, 96, 33, 5);      /* rows in blocks of 5 */
    }
    zt_hgemm_release();
}

/* ---- layernorm, GELU, tanh ------------------------------------------------------------- */

static void test_layernorm(void **state)
{
    (void)state;
    int M = 23, C = 200, slots = omp_get_max_threads();
    for (int dt = 0; dt < 2; dt++) {
        uint16_t *x = hvec((size_t)M * C), *w = hvec(C), *b = hvec(C), *y = hvec((size_t)M * C);
        float *xf = vec((size_t)M * C), *wf = vec(C), *bf = vec(C), *yf = vec((size_t)M * C);
        float *mean = vec(M), *rstd = vec(M), *mf = vec(M), *rf = vec(M);
        float *scr = vec(xlayernorm_scratch(dt, C, slots));
        float *dy = vec((size_t)M * C), *dx = vec((size_t)M * C), *dxf = vec((size_t)M * C);
        float *dw = vec(C), *db = vec(C), *dwf = vec(C), *dbf = vec(C);
        fill_h(dt, x, xf, (size_t)M * C, 11, 2.0f);
        for (size_t i = 0; i < (size_t)M * C; i += 7) /* an offset: the mean matters */
            xf[i] += 3.0f;
        zt_half_narrow(dt, x, xf, (size_t)M * C);
        zt_half_widen(dt, xf, x, (size_t)M * C);
        fill_h(dt, w, wf, C, 12, 1.0f);
        fill_h(dt, b, bf, C, 13, 1.0f);
        fill_f(dy, (size_t)M * C, 14, 1.0f);
        fill_f(dx, (size_t)M * C, 15, 1.0f);
        memcpy(dxf, dx, 4 * (size_t)M * C);
        fill_f(dw, C, 16, 1.0f);
        memcpy(dwf, dw, 4 * (size_t)C);
        fill_f(db, C, 17, 1.0f);
        memcpy(dbf, db, 4 * (size_t)C);
        xlayernorm_forward(dt, y, mean, rstd, x, w, b, M, C, 1e-12f, scr, slots);
        layernorm_forward(yf, mf, rf, xf, wf, bf, M, C, 1e-12f);
        same_rounded("layernorm forward", dt, y, yf, (size_t)M * C);
        same_f32("layernorm mean", dt, mean, mf, M);
        same_f32("layernorm rstd", dt, rstd, rf, M);
        xlayernorm_backward(dt, dx, dw, db, dy, x, mean, rstd, w, M, C, scr, slots);
        layernorm_backward(dxf, dwf, dbf, dy, xf, mf, rf, wf, M, C);
        same_f32("layernorm dinp", dt, dx, dxf, (size_t)M * C);
        same_f32("layernorm dw", dt, dw, dwf, C);
        same_f32("layernorm db", dt, db, dbf, C);
        free(x); free(w); free(b); free(y); free(xf); free(wf); free(bf); free(yf); free(mean);
        free(rstd); free(mf); free(rf); free(scr); free(dy); free(dx); free(dxf); free(dw);
        free(db); free(dwf); free(dbf);
    }
}

static void test_elementwise(void **state)
{
    (void)state;
    size_t n = 10001; /* several GELU chunks and a partial one */
    for (int dt = 0; dt < 2; dt++) {
        uint16_t *x = hvec(n), *y = hvec(n);
        float *xf = vec(n), *yf = vec(n), *dy = vec(n), *dx = vec(n), *dxf = vec(n);
        fill_h(dt, x, xf, n, 21, 3.0f);
        fill_f(dy, n, 22, 1.0f);
        fill_f(dx, n, 23, 1.0f);
        memcpy(dxf, dx, 4 * n);
        xtanh_forward(dt, y, x, n);
        tanh_forward(yf, xf, n);
        same_rounded("tanh forward", dt, y, yf, n);
        zt_half_widen(dt, yf, y, n); /* the backward reads the stored output */
        xtanh_backward(dt, dx, y, dy, n);
        tanh_backward(dxf, yf, dy, n);
        same_f32("tanh backward", dt, dx, dxf, n);
        free(x); free(y); free(xf); free(yf); free(dy); free(dx); free(dxf);
    }
}

/* ---- dropout with the residual --------------------------------------------------------- */

static void test_dropout(void **state)
{
    (void)state;
    int B = 3, C = 40;
    int32_t cu[4] = {0, 17, 17 + 600, 17 + 600 + 9}; /* 600 rows x 40: two pieces */
    size_t n = (size_t)cu[B] * C, words = n / 32 + B + 1;
    for (int dt = 0; dt < 2; dt++)
        for (int pass = 0; pass < 4; pass++) {
            zt_dropout d = {pass & 1 ? 0.0f : 0.3f, 77, 5, 123};
            int rows = pass >= 2; /* dropout_residual over B rows of per_row, or packed rows */
            size_t per = 4111, m = rows ? n : (size_t)B * per;
            uint16_t *x = hvec(m), *r = hvec(m);
            float *xf = vec(m), *rf = vec(m);
            uint32_t *k = calloc(words + (size_t)B * (per / 32 + 1), 4),
                     *kf = calloc(words + (size_t)B * (per / 32 + 1), 4);
            assert_non_null(k);
            assert_non_null(kf);
            fill_h(dt, x, xf, m, 31, 1.0f);
            fill_h(dt, r, rf, m, 32, 1.0f);
            if (rows) {
                xdropout_residual_rows(dt, x, r, k, &d, B, cu, (size_t)C);
                dropout_residual_rows(xf, rf, kf, &d, B, cu, (size_t)C);
            } else {
                xdropout_residual(dt, x, r, k, &d, B, per);
                dropout_residual(xf, rf, kf, &d, B, per);
            }
            same_rounded(rows ? "dropout_residual_rows" : "dropout_residual", dt, x, xf, m);
            assert_memory_equal(k, kf, 4 * (words + (size_t)B * (per / 32 + 1)));
            free(x); free(r); free(xf); free(rf); free(k); free(kf);
        }
}

/* ---- embeddings and cross-entropy ------------------------------------------------------ */

static void test_embedding(void **state)
{
    (void)state;
    int B = 3, T = 7, C = 700, V = 50, TT = 2, P = 16;
    int64_t ids[21], tt[21], pos[21];
    for (int i = 0; i < B * T; i++) {
        ids[i] = (i * 17) % V;
        tt[i] = i % TT;
        pos[i] = (i * 5) % P;
    }
    for (int dt = 0; dt < 2; dt++) {
        uint16_t *w = hvec((size_t)V * C), *ty = hvec((size_t)TT * C), *ps = hvec((size_t)P * C);
        uint16_t *o = hvec((size_t)B * T * C);
        float *wf = vec((size_t)V * C), *tf = vec((size_t)TT * C), *pf = vec((size_t)P * C);
        float *of = vec((size_t)B * T * C);
        fill_h(dt, w, wf, (size_t)V * C, 41, 1.0f);
        fill_h(dt, ty, tf, (size_t)TT * C, 42, 1.0f);
        fill_h(dt, ps, pf, (size_t)P * C, 43, 1.0f);
        xembedding_forward(dt, o, ids, tt, NULL, w, ty, ps, B, T, C);
        embedding_forward(of, ids, tt, wf, tf, pf, B, T, C);
        same_rounded("embedding", dt, o, of, (size_t)B * T * C);
        xembedding_forward(dt, o, ids, tt, pos, w, ty, ps, B * T, 1, C);
        embedding_forward_pos(of, ids, tt, pos, wf, tf, pf, B * T, C);
        same_rounded("embedding (positions)", dt, o, of, (size_t)B * T * C);
        free(w); free(ty); free(ps); free(o); free(wf); free(tf); free(pf); free(of);
    }
}

static void test_crossentropy(void **state)
{
    (void)state;
    int M = 9, V = 1000, slots = omp_get_max_threads();
    int64_t labels[9] = {3, -100, 999, 0, 500, -100, 7, 7, 123};
    for (int dt = 0; dt < 2; dt++) {
        uint16_t *x = hvec((size_t)M * V), *d = hvec((size_t)M * V);
        float *xf = vec((size_t)M * V), *df = vec((size_t)M * V);
        float *scr = vec(xcrossentropy_scratch(dt, V, slots));
        double rl[9], rlf[9];
        int64_t n, nf;
        fill_h(dt, x, xf, (size_t)M * V, 51, 3.0f);
        double s = xcrossentropy_forward_backward(dt, d, rl, &n, x, labels, M, V, 0.25f, scr,
                                                  slots);
        double sf = crossentropy_forward_backward(df, rlf, &nf, xf, labels, M, V, 0.25f);
        assert_true(s == sf);
        assert_int_equal(n, nf);
        assert_memory_equal(rl, rlf, sizeof rl);
        same_rounded("cross-entropy gradient", dt, d, df, (size_t)M * V);
        /* in place (the training head's layout) */
        memcpy(d, x, 2 * (size_t)M * V);
        s = xcrossentropy_forward_backward(dt, d, rl, &n, d, labels, M, V, 0.25f, scr, slots);
        assert_true(s == sf);
        same_rounded("cross-entropy gradient in place", dt, d, df, (size_t)M * V);
        free(x); free(d); free(xf); free(df); free(scr);
    }
}

/* ---- attention --------------------------------------------------------------------------- */

/* mode 0: padded with a key mask, 1: packed rows (cu), 2: the first token's query alone over
 * padded keys, 3: over packed keys */
static void run_attention(int dt, int mode, float p)
{
    int B = 3, T = 19, H = 2, D = 16, C = H * D, slots = omp_get_max_threads();
    int first = mode >= 2, packed = mode & 1, Tq = first ? 1 : T;
    int32_t cu[4] = {0, 19, 19 + 11, 19 + 11 + 6};
    int64_t mask[57];
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            mask[b * T + t] = t < T - 4 * b;
    const int32_t *cup = packed ? cu : NULL;
    int rows_q = first ? B : packed ? cu[B] : B * T, rows_k = packed ? cu[B] : B * T;
    size_t tt = (size_t)Tq * T, wpp = (tt + 31) / 32;
    zt_dropout d = {p, 9, 100, 55};
    uint16_t *q = hvec((size_t)rows_q * C), *k = hvec((size_t)rows_k * C),
             *v = hvec((size_t)rows_k * C), *ctx = hvec((size_t)rows_q * C),
             *att = hvec((size_t)B * H * tt);
    float *qf = vec((size_t)rows_q * C), *kf = vec((size_t)rows_k * C),
          *vf = vec((size_t)rows_k * C), *cf = vec((size_t)rows_q * C),
          *af = vec((size_t)B * H * tt), *aw = vec((size_t)B * H * tt);
    uint32_t *keep = calloc((size_t)B * H * wpp + 1, 4), *keepf = calloc((size_t)B * H * wpp + 1, 4);
    float *scr = vec((size_t)slots * attention_scratch(dt, Tq, T, D, 1) +
                     (size_t)slots * attention_scratch(dt, Tq, T, D, 0));
    float *scrf = vec((size_t)slots * attention_scratch(-1, Tq, T, D, 1));
    fill_h(dt, q, qf, (size_t)rows_q * C, 61, 1.0f);
    fill_h(dt, k, kf, (size_t)rows_k * C, 62, 1.0f);
    fill_h(dt, v, vf, (size_t)rows_k * C, 63, 1.0f);
    xattention_forward(dt, ctx, att, keep, q, k, v, mask, cup, first, &d, scr, slots, B, T, C, H);
    xattention_forward(-1, cf, af, keepf, qf, kf, vf, mask, cup, first, &d, scrf, slots, B, T, C,
                       H);
    /* the probabilities: the fp32 kernel's, rounded; the dropout decisions the same */
    for (int bh = 0; bh < B * H; bh++) {
        int b = bh / H, L = packed ? cu[b + 1] - cu[b] : T, lq = first ? 1 : L;
        same_rounded("attention probabilities", dt, att + (size_t)bh * tt, af + (size_t)bh * tt,
                     (size_t)lq * L);
    }
    if (p > 0.0f)
        assert_memory_equal(keep, keepf, 4 * (size_t)B * H * wpp);
    /* the context: rounded probabilities (dropped out as recorded) times v, in double */
    zt_half_widen(dt, aw, att, (size_t)B * H * tt);
    for (int bh = 0; bh < B * H; bh++) {
        int b = bh / H, h = bh % H, L = packed ? cu[b + 1] - cu[b] : T, lq = first ? 1 : L;
        size_t q0 = first ? (size_t)b : packed ? (size_t)cu[b] : (size_t)b * T;
        size_t k0 = packed ? (size_t)cu[b] : (size_t)b * T;
        for (int i = 0; i < lq; i++)
            for (int j = 0; j < D; j++) {
                double s = 0.0, sa = 0.0;
                for (int t = 0; t < L; t++) {
                    size_t e = (size_t)i * L + t;
                    int kept = p == 0.0f || (keep[(size_t)bh * wpp + e / 32] >> (e % 32) & 1);
                    double pr = kept ? (double)(aw[(size_t)bh * tt + e] * (1.0f / (1.0f - p))) : 0.0;
                    double x = pr * vf[(k0 + t) * C + (size_t)h * D + j];
                    s += x;
                    sa += fabs(x);
                }
                double g = (L + 2) * 0x1p-24 / (1 - (L + 2) * 0x1p-24);
                size_t o = (q0 + i) * C + (size_t)h * D + j;
                within("attention context", dt, zt_half_value(dt, ctx[o]), s, g * sa + 1e-30, o,
                       1);
            }
    }
    /* the backward: the fp32 kernel on the widened inputs and stored probabilities */
    float *dctx = vec((size_t)rows_q * C), *dq = vec((size_t)rows_q * C),
          *dk = vec((size_t)rows_k * C), *dv = vec((size_t)rows_k * C),
          *dqf = vec((size_t)rows_q * C), *dkf = vec((size_t)rows_k * C),
          *dvf = vec((size_t)rows_k * C);
    fill_f(dctx, (size_t)rows_q * C, 64, 1.0f);
    xattention_backward(dt, dq, dk, dv, dctx, att, keep, q, k, v, cup, first, &d, scr, slots, B,
                        T, C, H);
    xattention_backward(-1, dqf, dkf, dvf, dctx, aw, keepf, qf, kf, vf, cup, first, &d, scrf,
                        slots, B, T, C, H);
    same_f32("attention dq", dt, dq, dqf, (size_t)rows_q * C);
    same_f32("attention dk", dt, dk, dkf, (size_t)rows_k * C);
    same_f32("attention dv", dt, dv, dvf, (size_t)rows_k * C);
    free(q); free(k); free(v); free(ctx); free(att); free(qf); free(kf); free(vf); free(cf);
    free(af); free(aw); free(keep); free(keepf); free(scr); free(scrf); free(dctx); free(dq);
    free(dk); free(dv); free(dqf); free(dkf); free(dvf);
}

static void test_attention(void **state)
{
    (void)state;
    for (int dt = 0; dt < 2; dt++)
        for (int mode = 0; mode < 4; mode++) {
            run_attention(dt, mode, 0.0f);
            run_attention(dt, mode, 0.2f);
        }
}

/* ---- T5's kernels ---------------------------------------------------------------------- */

static void test_rmsnorm(void **state)
{
    (void)state;
    int M = 23, C = 200, slots = omp_get_max_threads();
    for (int dt = 0; dt < 2; dt++) {
        size_t n = (size_t)M * C;
        uint16_t *x = hvec(n), *w = hvec(C), *y = hvec(n);
        float *xf = vec(n), *wf = vec(C), *yf = vec(n), *rstd = vec(M), *rf = vec(M);
        float *scr = vec(xlayernorm_scratch(dt, C, slots));
        float *dy = vec(n), *dx = vec(n), *dxf = vec(n), *dw = vec(C), *dwf = vec(C);
        fill_h(dt, x, xf, n, 111, 2.0f);
        fill_h(dt, w, wf, C, 112, 1.0f);
        fill_f(dy, n, 114, 1.0f);
        fill_f(dx, n, 115, 1.0f);
        memcpy(dxf, dx, 4 * n);
        fill_f(dw, C, 116, 1.0f);
        memcpy(dwf, dw, 4 * (size_t)C);
        xrmsnorm_forward(dt, y, rstd, x, w, M, C, 1e-6f, scr, slots);
        rmsnorm_forward(yf, rf, xf, wf, M, C, 1e-6f);
        same_rounded("rmsnorm forward", dt, y, yf, n);
        same_f32("rmsnorm rstd", dt, rstd, rf, M);
        xrmsnorm_backward(dt, dx, dw, dy, x, rstd, w, M, C, scr, slots);
        rmsnorm_backward(dxf, dwf, dy, xf, rf, wf, M, C);
        same_f32("rmsnorm dinp", dt, dx, dxf, n);
        same_f32("rmsnorm dw", dt, dw, dwf, C);
        free(x); free(w); free(y); free(xf); free(wf); free(yf); free(rstd); free(rf); free(scr);
        free(dy); free(dx); free(dxf); free(dw); free(dwf);
    }
}

/* the fp16 clamp of transformers' T5Block: only when something is infinite, then every
 * element to within +-(65504 - 1000) rounded (64512); NaN stays; bf16 untouched */
static void test_clamp(void **state)
{
    (void)state;
    float v[6] = {5.0f, 65000.0f, -60000.0f, INFINITY, -INFINITY, NAN};
    float want[6] = {5.0f, 64512.0f, -60000.0f, 64512.0f, -64512.0f, NAN};
    uint16_t h[6], g[6];
    zt_half_narrow(ZT_HALF_F16, h, v, 6);
    memcpy(g, h, sizeof g);
    assert_int_equal(xclamp_f16(ZT_HALF_BF16, g, 6), 0);
    assert_memory_equal(g, h, sizeof g);
    assert_int_equal(xclamp_f16(ZT_HALF_F16, h, 3), 0); /* finite: nothing */
    assert_memory_equal(g, h, sizeof g);
    assert_int_equal(xclamp_f16(ZT_HALF_F16, h, 6), 1);
    for (int i = 0; i < 6; i++) {
        float x = zt_half_value(ZT_HALF_F16, h[i]);
        if (isnan(want[i]) ? !isnan(x) : x != want[i])
            fail_msg("clamp: element %d is %g, want %g", i, (double)x, (double)want[i]);
    }
}

static void test_t5_elementwise(void **state)
{
    (void)state;
    size_t n = 10001; /* several chunks and a partial one */
    static const char *const act_name[4] = {"relu", "gelu", "gelu_tanh", "silu"};
    for (int dt = 0; dt < 2; dt++) {
        uint16_t *x = hvec(n), *x2 = hvec(n), *y = hvec(n);
        float *xf = vec(n), *x2f = vec(n), *yf = vec(n), *dy = vec(n), *dx = vec(n),
              *dxf = vec(n), *d2 = vec(n), *d2f = vec(n);
        fill_h(dt, x, xf, n, 121, 3.0f);
        fill_h(dt, x2, x2f, n, 122, 2.0f);
        fill_f(dy, n, 123, 1.0f);
        for (int act = 0; act <= ZT_ACT_SILU; act++) {
            char what[64];
            fill_f(dx, n, 124 + (uint64_t)act, 1.0f);
            memcpy(dxf, dx, 4 * n);
            xact_forward(dt, act, y, x, n);
            act_forward(act, yf, xf, n);
            snprintf(what, sizeof what, "%s forward", act_name[act]);
            same_rounded(what, dt, y, yf, n);
            xact_backward(dt, act, dx, x, dy, n);
            act_backward(act, dxf, xf, dy, n);
            snprintf(what, sizeof what, "%s backward", act_name[act]);
            same_f32(what, dt, dx, dxf, n);
        }
        xmul_forward(dt, y, x, x2, n);
        mul_forward(yf, xf, x2f, n);
        same_rounded("mul forward", dt, y, yf, n);
        fill_f(dx, n, 131, 1.0f);
        memcpy(dxf, dx, 4 * n);
        fill_f(d2, n, 132, 1.0f);
        memcpy(d2f, d2, 4 * n);
        xmul_backward(dt, dx, d2, dy, x, x2, n);
        mul_backward(dxf, d2f, dy, xf, x2f, n);
        same_f32("mul backward (a)", dt, dx, dxf, n);
        same_f32("mul backward (b)", dt, d2, d2f, n);
        xscale(dt, y, x, 0.0883883f, n);
        memcpy(yf, xf, 4 * n);
        scale_inplace(yf, 0.0883883f, n);
        same_rounded("scale", dt, y, yf, n);
        xscale(dt, x2, x2, 0.0883883f, n); /* in place */
        scale_inplace(x2f, 0.0883883f, n);
        same_rounded("scale in place", dt, x2, x2f, n);
        /* lookup: rows copied; widened rows: the fp32 values */
        int V = 50, C = 40, M = 17;
        int64_t ids[17];
        for (int i = 0; i < M; i++)
            ids[i] = (i * 31 + 7) % V;
        xlookup_forward(dt, y, ids, x, M, C);
        lookup_forward(yf, ids, xf, M, C);
        same_rounded("lookup", dt, y, yf, (size_t)M * C);
        xwiden_rows(dt, dxf, x, ids, M, C);
        same_f32("widened rows", dt, dxf, yf, (size_t)M * C);
        free(x); free(x2); free(y); free(xf); free(x2f); free(yf); free(dy); free(dx);
        free(dxf); free(d2); free(d2f);
    }
}

/* T5's attention: unscaled scores, the position bias, the key mask, causal (self) or not
 * (cross, Tq != Tk); dropout regenerated in the backward. As run_attention: probabilities
 * the fp32 kernel's rounded, the context within gamma_T of the rounded probabilities times v
 * (without dropout), the backward (with dbias) the fp32 kernel's on the widened values. */
static void run_mha(int dt, int causal, float p)
{
    int B = 2, Tq = causal ? 13 : 9, Tk = 13, H = 3, D = 8, C = H * D, slots = omp_get_max_threads();
    size_t tt = (size_t)Tq * Tk, nq = (size_t)B * Tq * C, nk = (size_t)B * Tk * C;
    int64_t mask[26];
    for (int b = 0; b < B; b++)
        for (int t = 0; t < Tk; t++)
            mask[b * Tk + t] = t < Tk - 3 * b;
    zt_dropout d = {p, 5, 40, 77};
    uint16_t *q = hvec(nq), *k = hvec(nk), *v = hvec(nk), *ctx = hvec(nq), *att = hvec(B * H * tt);
    float *qf = vec(nq), *kf = vec(nk), *vf = vec(nk), *cf = vec(nq), *af = vec(B * H * tt),
          *aw = vec(B * H * tt), *bias = vec(H * tt);
    size_t per = attention_scratch(dt, Tq, Tk, D, 1) > attention_scratch(dt, Tq, Tk, D, 0)
                     ? attention_scratch(dt, Tq, Tk, D, 1) : attention_scratch(dt, Tq, Tk, D, 0);
    float *scr = vec((size_t)slots * per), *scrf = vec((size_t)slots * 2 * (tt + Tk));
    fill_h(dt, q, qf, nq, 141, 1.0f);
    fill_h(dt, k, kf, nk, 142, 1.0f);
    fill_h(dt, v, vf, nk, 143, 1.0f);
    fill_f(bias, H * tt, 144, 1.0f);
    xmha_forward(dt, ctx, att, q, k, v, bias, mask, causal, 1.0f, &d, scr, slots, B, Tq, Tk, H, D);
    mha_forward(cf, af, qf, kf, vf, bias, mask, causal, 1.0f, &d, scrf, slots, B, Tq, Tk, H, D);
    same_rounded("mha probabilities", dt, att, af, (size_t)B * H * tt);
    zt_half_widen(dt, aw, att, (size_t)B * H * tt);
    for (int bh = 0; p == 0.0f && bh < B * H; bh++) {
        int b = bh / H, h = bh % H;
        for (int i = 0; i < Tq; i++)
            for (int j = 0; j < D; j++) {
                double s = 0.0, sa = 0.0;
                for (int t = 0; t < Tk; t++) {
                    double x = (double)aw[(size_t)bh * tt + (size_t)i * Tk + t] *
                               vf[((size_t)b * Tk + t) * C + (size_t)h * D + j];
                    s += x;
                    sa += fabs(x);
                }
                double g = (Tk + 2) * 0x1p-24 / (1 - (Tk + 2) * 0x1p-24);
                size_t o = ((size_t)b * Tq + i) * C + (size_t)h * D + j;
                within("mha context", dt, zt_half_value(dt, ctx[o]), s, g * sa + 1e-30, o, 1);
            }
    }
    float *dctx = vec(nq), *dq = vec(nq), *dk = vec(nk), *dv = vec(nk), *dqf = vec(nq),
          *dkf = vec(nk), *dvf = vec(nk), *db = vec(H * tt), *dbf = vec(H * tt);
    fill_f(dctx, nq, 145, 1.0f);
    fill_f(db, H * tt, 146, 1.0f);
    memcpy(dbf, db, 4 * (size_t)H * tt);
    xmha_backward(dt, dq, dk, dv, db, dctx, att, q, k, v, 1.0f, &d, scr, slots, B, Tq, Tk, H, D);
    mha_backward(dqf, dkf, dvf, dbf, dctx, aw, qf, kf, vf, 1.0f, &d, scrf, slots, B, Tq, Tk, H, D);
    same_f32("mha dq", dt, dq, dqf, nq);
    same_f32("mha dk", dt, dk, dkf, nk);
    same_f32("mha dv", dt, dv, dvf, nk);
    same_f32("mha dbias", dt, db, dbf, (size_t)H * tt);
    free(q); free(k); free(v); free(ctx); free(att); free(qf); free(kf); free(vf); free(cf);
    free(af); free(aw); free(bias); free(scr); free(scrf); free(dctx); free(dq); free(dk);
    free(dv); free(dqf); free(dkf); free(dvf); free(db); free(dbf);
}

static void test_mha(void **state)
{
    (void)state;
    for (int dt = 0; dt < 2; dt++)
        for (int causal = 0; causal < 2; causal++) {
            run_mha(dt, causal, 0.0f);
            run_mha(dt, causal, 0.1f);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear),      cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_elementwise), cmocka_unit_test(test_dropout),
        cmocka_unit_test(test_embedding),   cmocka_unit_test(test_crossentropy),
        cmocka_unit_test(test_attention),   cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_t5_elementwise), cmocka_unit_test(test_mha),
        cmocka_unit_test(test_clamp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
