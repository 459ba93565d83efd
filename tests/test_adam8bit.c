/* test_adam8bit.c - block-wise 8-bit AdamW (optimizer/adam8bit.c, quant.c):
 *  - the dynamic maps: 256 sorted codes, their ends, zero present, the construction's values;
 *  - nearest-code quantization: codes map to themselves, ties go to the lower code, clamping;
 *  - the step against an independent numpy implementation (tests/ref/adam8bit_ref.py, its
 *    output in tests/fixtures/adam8bit/case.bin): codes exact, absmax and parameters within
 *    1e-6, after every step, including values that round to zero, signs near zero, NaN and
 *    Inf gradients, an all-zero block, a partial last block and fp32 state below
 *    min_8bit_size;
 *  - bitsandbytes' acceptance test against fp32 Adam (torch.optim.Adam's formula, which
 *    places the bias corrections differently): 50 steps, p = randn * 0.1, g = randn * 0.01;
 *    after each step mean |dp| < 6e-5 and mean relative error < 6e-4, then, as their test
 *    does, the fp32 parameters and the dequantized 8-bit state are copied across, so each
 *    step is compared on its own;
 *  - every kernel (scalar, AVX2, AVX-512; one the CPU lacks is skipped, and says so) gives the
 *    bytes of the scalar code they replaced (a verbatim copy below): the quantizer (against
 *    zt_quantize_fast) on every code boundary of both signs and 8 floats
 *    either side, exact midpoints (ties), the codes themselves, zeros, ends, NaN, infinities,
 *    denormals and a sweep of every 251st float (every float with ZT_QUANT_EXHAUSTIVE=1);
 *    the whole step, several steps in a row, on random state (every code, odd absmax values
 *    too: negative, infinite, NaN, denormal), with NaN and infinite gradients, zero blocks,
 *    a partial last block, tiny and huge magnitudes (g^2 overflowing), ties (beta1 = 0 makes
 *    m / absmax the gradient itself), grad_scale and decay on and off: parameters, codes and
 *    absmax byte for byte; the fp32-state kernel likewise. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "../optimizer/adam8bit.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *fixture_path(void)
{
    static char d[1024];
    const char *f = getenv("ZT_FIXTURES");
    snprintf(d, sizeof d, "%s/adam8bit/case.bin", f ? f : "tests/fixtures");
    return d;
}

static void test_maps(void **state)
{
    (void)state;
    zt_adam8_maps q;
    zt_adam8_maps_init(&q);
    for (int s = 0; s < 2; s++) {
        const float *m = s ? q.m : q.v;
        int zeros = 0;
        for (int i = 0; i < 256; i++) {
            zeros += m[i] == 0.0f;
            if (i > 0 && !(m[i] > m[i - 1]))
                fail_msg("map %d not increasing at %d: %g, %g", s, i, m[i - 1], m[i]);
        }
        assert_int_equal(zeros, 1);
        assert_true(m[255] == 1.0f);
    }
    /* signed: 127 values of each sign; the ends are +1 and minus the largest midpoint of
     * exponent 6 (64 intervals on [0.1, 1]: (1 - 0.9/128)); the smallest magnitude is the
     * one midpoint of exponent 0: 0.55e-6 */
    assert_true(q.m[127] == 0.0f);
    assert_true(q.m[0] == (float)-(1.0 - 0.9 / 128.0));
    assert_true(q.m[128] == (float)0.55e-6 && q.m[126] == (float)-0.55e-6);
    /* unsigned: 0, then exponent 0's two midpoints 0.325e-6 and 0.775e-6, ..., 1 */
    assert_true(q.v[0] == 0.0f);
    assert_true(q.v[1] == (float)0.325e-6 && q.v[2] == (float)0.775e-6);
    assert_true(q.v[254] == (float)(1.0 - 0.9 / 256.0));
    assert_int_equal(q.m_zero, 127);
    assert_int_equal(q.v_zero, 0);
}

static void test_quantize_nearest(void **state)
{
    (void)state;
    zt_adam8_maps q;
    zt_adam8_maps_init(&q);
    for (int i = 0; i < 256; i++) {
        assert_int_equal(zt_quantize_nearest(q.m, q.m[i]), i);
        assert_int_equal(zt_quantize_nearest(q.v, q.v[i]), i);
    }
    int ties = 0;
    for (int i = 0; i < 255; i++) { /* a quarter and three quarters in; an exact midpoint */
        for (int s = 0; s < 2; s++) {
            const float *m = s ? q.v : q.m;
            float lo = m[i], hi = m[i + 1], mid = lo + (hi - lo) / 2.0f;
            assert_int_equal(zt_quantize_nearest(m, lo + (hi - lo) * 0.25f), i);
            assert_int_equal(zt_quantize_nearest(m, lo + (hi - lo) * 0.75f), i + 1);
            if (mid - lo == hi - mid) {
                assert_int_equal(zt_quantize_nearest(m, mid), i);
                ties++;
            }
        }
    }
    assert_true(ties > 0);
    /* the lookup gives the binary search's code: every 61st float of [-1.5, 1.5] */
    for (uint32_t sgn = 0; sgn < 2; sgn++)
        for (uint32_t u = 0; u <= 0x3FC00000u; u += 61) {
            union { uint32_t u; float f; } x = {u | (sgn << 31)};
            if (zt_quantize_fast(q.m, q.m_idx, x.f) != zt_quantize_nearest(q.m, x.f) ||
                zt_quantize_fast(q.v, q.v_idx, x.f) != zt_quantize_nearest(q.v, x.f))
                fail_msg("lookup and search differ at %.9g", x.f);
        }
    assert_int_equal(zt_quantize_nearest(q.m, -2.0f), 0);
    assert_int_equal(zt_quantize_nearest(q.m, 2.0f), 255);
    assert_int_equal(zt_quantize_nearest(q.v, -1e-9f), 0);
    assert_int_equal(zt_quantize_nearest(q.m, 1e-12f), 127); /* rounds to zero */
    assert_int_equal(zt_quantize_nearest(q.m, -1e-12f), 127);
}

static void read_or_fail(void *dst, size_t n, FILE *f)
{
    if (fread(dst, 1, n, f) != n)
        fail_msg("%s: truncated", fixture_path());
}

static void test_reference_fixture(void **state)
{
    (void)state;
    FILE *f = fopen(fixture_path(), "rb");
    char magic[4];
    uint32_t nt, steps;
    float hpf[5];
    if (!f)
        fail_msg("cannot open %s", fixture_path());
    read_or_fail(magic, 4, f);
    assert_memory_equal(magic, "ZTA8", 4);
    read_or_fail(&nt, 4, f);
    read_or_fail(&steps, 4, f);
    read_or_fail(hpf, sizeof hpf, f);
    assert_true(nt >= 1 && nt <= 8 && steps >= 1 && steps <= 100);
    zt_adam8_maps q;
    zt_adam8_maps_init(&q);
    uint32_t n[8], is8[8];
    float *p[8], *m[8], *v[8], *am[8], *av[8];
    uint8_t *cm[8], *cv[8];
    for (uint32_t t = 0; t < nt; t++) {
        read_or_fail(&n[t], 4, f);
        read_or_fail(&is8[t], 4, f);
        assert_true(n[t] > 0 && n[t] < (1u << 24));
        size_t nb = (n[t] + ZT_QBLOCK - 1) / ZT_QBLOCK;
        p[t] = malloc(n[t] * 4);
        m[t] = calloc(n[t], 4);
        v[t] = calloc(n[t], 4);
        cm[t] = malloc(n[t]);
        cv[t] = malloc(n[t]);
        am[t] = malloc(nb * 4);
        av[t] = malloc(nb * 4);
        read_or_fail(p[t], n[t] * 4, f);
        zt_adam8bit_init(&q, cm[t], cv[t], am[t], av[t], n[t]);
    }
    size_t nmax = 0;
    for (uint32_t t = 0; t < nt; t++)
        nmax = n[t] > nmax ? n[t] : nmax;
    float *g = malloc(nmax * 4), *ep = malloc(nmax * 4), *ex = malloc(nmax * 4);
    uint8_t *ec = malloc(nmax);
    int special = 0;
    for (uint32_t s = 1; s <= steps; s++) {
        zt_adamw_hparams hp = {hpf[0], hpf[1], hpf[2], hpf[3], hpf[4], (int64_t)s, 1.0f};
        for (uint32_t t = 0; t < nt; t++) {
            size_t nn = n[t], nb = (nn + ZT_QBLOCK - 1) / ZT_QBLOCK;
            read_or_fail(g, nn * 4, f);
            for (size_t i = 0; i < nn; i++)
                special += !isfinite(g[i]) || g[i] == 0.0f;
            if (is8[t])
                zt_adam8bit_update(&q, p[t], g, cm[t], cv[t], am[t], av[t], nn, &hp, 1);
            else
                zt_adam32_update(p[t], g, m[t], v[t], nn, &hp, 1);
            read_or_fail(ep, nn * 4, f);
            for (size_t i = 0; i < nn; i++)
                if (!(fabsf(p[t][i] - ep[i]) <= 1e-6f))
                    fail_msg("step %u tensor %u: p[%zu] = %.9g, reference %.9g", s, t, i,
                             p[t][i], ep[i]);
            if (is8[t]) {
                for (int k = 0; k < 2; k++) {
                    read_or_fail(ec, nn, f);
                    const uint8_t *c = k ? cv[t] : cm[t];
                    for (size_t i = 0; i < nn; i++)
                        if (c[i] != ec[i])
                            fail_msg("step %u tensor %u: %s code[%zu] = %d, reference %d", s,
                                     t, k ? "v" : "m", i, c[i], ec[i]);
                }
                for (int k = 0; k < 2; k++) {
                    read_or_fail(ex, nb * 4, f);
                    const float *a = k ? av[t] : am[t];
                    for (size_t b = 0; b < nb; b++)
                        if (!(fabsf(a[b] - ex[b]) <= 1e-6f * fabsf(ex[b])))
                            fail_msg("step %u tensor %u: %s absmax[%zu] = %.9g, reference %.9g",
                                     s, t, k ? "v" : "m", b, a[b], ex[b]);
                }
            } else {
                for (int k = 0; k < 2; k++) {
                    read_or_fail(ex, nn * 4, f);
                    const float *a = k ? v[t] : m[t];
                    for (size_t i = 0; i < nn; i++)
                        if (!(fabsf(a[i] - ex[i]) <= 1e-6f * fabsf(ex[i])))
                            fail_msg("step %u tensor %u: %s[%zu] = %.9g, reference %.9g", s, t,
                                     k ? "v" : "m", i, a[i], ex[i]);
                }
            }
        }
    }
    assert_true(special > 0); /* the fixture does exercise the special values */
    assert_int_equal(fgetc(f), EOF);
    fclose(f);
    for (uint32_t t = 0; t < nt; t++) {
        free(p[t]); free(m[t]); free(v[t]); free(cm[t]); free(cv[t]); free(am[t]); free(av[t]);
    }
    free(g);
    free(ep);
    free(ex);
    free(ec);
}

/* a normal deviate (Box-Muller over a 64-bit LCG): the test's own, reproducible */
static double randn(uint64_t *s)
{
    double u[2];
    for (int i = 0; i < 2; i++) {
        *s = *s * 6364136223846793005ull + 1442695040888963407ull;
        u[i] = ((*s >> 11) + 0.5) / 9007199254740992.0;
    }
    return sqrt(-2.0 * log(u[0])) * cos(6.283185307179586 * u[1]);
}

static void test_acceptance_vs_fp32(void **state)
{
    (void)state;
    enum { N = 64 * 1024 };
    zt_adam8_maps q;
    zt_adam8_maps_init(&q);
    float *p1 = malloc(N * 4), *p2 = malloc(N * 4), *g = malloc(N * 4), *m = calloc(N, 4),
          *v = calloc(N, 4), *am = malloc(N / ZT_QBLOCK * 4), *av = malloc(N / ZT_QBLOCK * 4);
    uint8_t *cm = malloc(N), *cv = malloc(N);
    uint64_t s = 42;
    for (int i = 0; i < N; i++)
        p1[i] = p2[i] = (float)(randn(&s) * 0.1);
    zt_adam8bit_init(&q, cm, cv, am, av, N);
    double worst_err = 0.0, worst_rel = 0.0;
    for (int step = 1; step <= 50; step++) {
        zt_adamw_hparams hp = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, step, 1.0f};
        for (int i = 0; i < N; i++)
            g[i] = (float)(randn(&s) * 0.01);
        zt_adamw_update(p1, g, m, v, N, &hp, 1); /* torch.optim.Adam(W)'s formula */
        zt_adam8bit_update(&q, p2, g, cm, cv, am, av, N, &hp, 1);
        double err = 0.0, rel = 0.0;
        for (int i = 0; i < N; i++) {
            double d = fabs((double)p1[i] - p2[i]);
            err += d;
            rel += d / (fabs((double)p1[i]) + 1e-9);
        }
        err /= N;
        rel /= N;
        worst_err = err > worst_err ? err : worst_err;
        worst_rel = rel > worst_rel ? rel : worst_rel;
        if (!(err < 6e-5 && rel < 6e-4))
            fail_msg("step %d: mean |dp| %.3g (< 6e-5), mean relative %.3g (< 6e-4)", step, err,
                     rel);
        /* as bitsandbytes' test: brought together again after each step (fp32 Adam's
         * parameters, the 8-bit state dequantized into fp32 Adam's moments) */
        memcpy(p2, p1, N * sizeof(float));
        for (int i = 0; i < N; i++) {
            m[i] = q.m[cm[i]] * am[i / ZT_QBLOCK];
            v[i] = q.v[cv[i]] * av[i / ZT_QBLOCK];
        }
    }
    printf("8-bit vs fp32 Adam, 50 steps: worst mean |dp| %.3g (< 6e-5), worst mean relative "
           "%.3g (< 6e-4)\n", worst_err, worst_rel);
    free(p1); free(p2); free(g); free(m); free(v); free(am); free(av); free(cm); free(cv);
}

/* ---- every kernel against the scalar one --------------------------------------------- */

static uint32_t f2u(float f)
{
    union { float f; uint32_t u; } c = {f};
    return c.u;
}

static float u2f(uint32_t u)
{
    union { uint32_t u; float f; } c = {u};
    return c.f;
}

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 11;
}

/* the least a in [0, 1] (bits) with code(sign * a) past `code` (>= for +, <= for -) */
static uint32_t code_boundary(const zt_adam8_maps *q, int is_signed, int neg, unsigned code)
{
    const float *map = is_signed ? q->m : q->v;
    const uint16_t *idx = is_signed ? q->m_idx : q->v_idx;
    uint32_t lo = 0, hi = 0x3F800001u; /* not past at lo (checked), past at hi */
    unsigned c0 = zt_quantize_fast(map, idx, neg ? -0.0f : 0.0f);
    if (neg ? c0 <= code : c0 >= code)
        return 0;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        float x = u2f(mid);
        unsigned c = zt_quantize_fast(map, idx, neg ? -x : x);
        if (neg ? c <= code : c >= code)
            hi = mid;
        else
            lo = mid;
    }
    return hi;
}

/* the signed map's code boundaries (both signs) and 2 floats either side, and the exact
 * midpoints: x values where the nearest code is decided by a hair or a tie */
static size_t tie_values(const zt_adam8_maps *q, float *out)
{
    size_t n = 0;
    for (unsigned k = 1; k < 256; k++)
        for (int neg = 0; neg < 2; neg++) {
            uint32_t t = code_boundary(q, 1, neg, neg ? 255 - k : k);
            for (int d = -2; d <= 2; d++)
                if (t + (uint32_t)d <= 0x3F800000u)
                    out[n++] = (neg ? -1.0f : 1.0f) * u2f(t + (uint32_t)d);
        }
    for (int i = 0; i < 255; i++) {
        float lo = q->m[i], hi = q->m[i + 1], mid = lo + (hi - lo) / 2.0f;
        if (mid - lo == hi - mid)
            out[n++] = mid;
    }
    return n;
}

/* the path's codes of x[0..n) against zt_quantize_fast's; n a multiple of 16 */
static void quant_compare(int path, const zt_adam8_maps *q, int is_signed, const float *x,
                          uint8_t *got, size_t n, const char *what)
{
    assert_int_equal(zt_adam8_quantize_path(path, q, is_signed, x, got, n), 0);
    for (size_t i = 0; i < n; i++) {
        uint8_t want = zt_quantize_fast(is_signed ? q->m : q->v, is_signed ? q->m_idx : q->v_idx,
                                        x[i]);
        if (got[i] != want)
            fail_msg("%s: %s map, %s: x = %.9g (0x%08x): code %d, scalar %d",
                     zt_adam8bit_path_name(path), is_signed ? "signed" : "unsigned", what, x[i],
                     f2u(x[i]), got[i], want);
    }
}

static void check_quantizer(int path, const zt_adam8_maps *q)
{
    enum { CAP = 1 << 20 };
    float *x = malloc(CAP * sizeof(float));
    uint8_t *c = malloc(CAP);
    assert_non_null(x);
    assert_non_null(c);
    int ties = 0;
    for (int s = 0; s < 2; s++) {
        const float *map = s ? q->m : q->v;
        size_t n = 0;
        /* every code boundary, both signs, and 8 floats either side of it */
        for (unsigned k = 1; k < 256; k++)
            for (int neg = 0; neg < 2; neg++) {
                uint32_t t = code_boundary(q, s, neg, neg ? 255 - k : k);
                for (int d = -8; d <= 8; d++) {
                    uint32_t u = t + (uint32_t)d;
                    x[n++] = neg ? -u2f(u) : u2f(u);
                }
            }
        /* the codes, exact midpoints between neighbours (ties: the lower code), special values */
        for (int i = 0; i < 256; i++) {
            x[n++] = map[i];
            x[n++] = -map[i];
            if (i < 255) {
                float lo = map[i], hi = map[i + 1], mid = lo + (hi - lo) / 2.0f;
                ties += mid - lo == hi - mid;
                x[n++] = mid;
                x[n++] = -mid;
            }
        }
        const float special[] = {0.0f, -0.0f, 1.0f, -1.0f, 1.5f, -1.5f, 2.0f, -3.0e38f,
                                 INFINITY, -INFINITY, NAN, -NAN, 1e-45f, -1e-45f, 1e-40f,
                                 -1e-40f, 1.17549435e-38f, 1e-30f, 1e-12f, 1e-7f, -1e-7f,
                                 0.99999994f, -0.99999994f, 1.00000012f};
        for (size_t i = 0; i < sizeof special / sizeof special[0]; i++)
            x[n++] = special[i];
        uint64_t r = 7;
        while (n % 16)
            x[n++] = u2f((uint32_t)lcg(&r));
        quant_compare(path, q, s, x, c, n, "boundaries, ties, special values");
        /* every 251st float (with the flag set, every float) */
        int all = getenv("ZT_QUANT_EXHAUSTIVE") != NULL;
        uint64_t stride = all ? 1 : 251;
        for (uint64_t u = 0; u < (1ull << 32); ) {
            for (n = 0; n < CAP && u < (1ull << 32); u += stride)
                x[n++] = u2f((uint32_t)u);
            n -= n % 16;
            quant_compare(path, q, s, x, c, n, all ? "every float" : "every 251st float");
        }
    }
    assert_true(ties > 0);
    free(x);
    free(c);
}

/* one state of the step: p, g: [n]; codes, absmax */
typedef struct state8 {
    float *p, *am, *av;
    uint8_t *cm, *cv;
} state8;

static void state_alloc(state8 *s, size_t n)
{
    size_t nb = (n + ZT_QBLOCK - 1) / ZT_QBLOCK;
    s->p = malloc(n * 4);
    s->am = malloc(nb * 4);
    s->av = malloc(nb * 4);
    s->cm = malloc(n);
    s->cv = malloc(n);
    assert_true(s->p && s->am && s->av && s->cm && s->cv);
}

static void state_copy(state8 *d, const state8 *s, size_t n)
{
    size_t nb = (n + ZT_QBLOCK - 1) / ZT_QBLOCK;
    memcpy(d->p, s->p, n * 4);
    memcpy(d->am, s->am, nb * 4);
    memcpy(d->av, s->av, nb * 4);
    memcpy(d->cm, s->cm, n);
    memcpy(d->cv, s->cv, n);
}

static void state_free(state8 *s)
{
    free(s->p); free(s->am); free(s->av); free(s->cm); free(s->cv);
}

static void bytes_equal(const void *a, const void *b, size_t n, size_t width, const char *path,
                        const char *what, int step)
{
    const unsigned char *x = a, *y = b;
    for (size_t i = 0; i < n * width; i++)
        if (x[i] != y[i]) {
            size_t e = i / width;
            if (width == 4)
                fail_msg("%s, step %d: %s[%zu] = %.9g (0x%08x), before %.9g (0x%08x)", path,
                         step, what, e, ((const float *)a)[e], f2u(((const float *)a)[e]),
                         ((const float *)b)[e], f2u(((const float *)b)[e]));
            fail_msg("%s, step %d: %s[%zu] = %d, before %d", path, step, what, e, x[e], y[e]);
        }
}

/* the gradients of one step: block b of a kind (by b and the step), some elements NaN or
 * infinite; with ties (beta1 = 0: m = g), every block's first element 1 (its absmax) and the
 * others drawn from tv[0..nt) (x = m / absmax = g exactly) */
static void make_grads(float *g, size_t n, uint64_t *r, int step, const float *tv, size_t nt)
{
    size_t nb = (n + ZT_QBLOCK - 1) / ZT_QBLOCK;
    for (size_t b = 0; b < nb; b++) {
        size_t lo = b * ZT_QBLOCK, hi = lo + ZT_QBLOCK < n ? lo + ZT_QBLOCK : n;
        int kind = (int)((b + (size_t)step) % 8);
        for (size_t i = lo; i < hi; i++) {
            double z = randn(r);
            float gi;
            switch (kind) {
            case 0: gi = (float)(z * 1e-2); break;              /* ordinary */
            case 1: gi = 0.0f; break;                           /* zero */
            case 2: gi = (float)(z * 1e-30); break;             /* tiny: g^2 underflows */
            case 3: gi = (float)(z * 1e30); break;              /* huge: g^2 overflows */
            case 4: gi = (float)(z * pow(10.0, (double)(lcg(r) % 41) - 30.0)); break;
            case 5: gi = u2f((uint32_t)(lcg(r) % 0x00800000u) | (z < 0 ? 0x80000000u : 0u));
                    break;                                      /* denormal */
            case 6: gi = (float)(z * 1e-3); break;
            default: gi = (float)(z * 3.0); break;
            }
            if (nt)
                gi = i == lo ? 1.0f : tv[lcg(r) % nt];
            if (kind != 1 && lcg(r) % 29 == 0) { /* non-finite */
                static const float bad[] = {NAN, -NAN, INFINITY, -INFINITY};
                gi = bad[lcg(r) % 4];
            }
            g[i] = gi;
        }
        if (kind == 6 && !nt) /* a whole block of non-finite gradients */
            for (size_t i = lo; i < hi; i++)
                g[i] = (i & 1) ? NAN : INFINITY;
    }
}

/* zt_adam8bit_update and zt_adam32_update as they were before the SIMD kernels (one thread),
 * verbatim: the bytes every kernel must give */
typedef struct consts0 {
    float b1, b2, one_b1, one_b2, eps_c2, step_size, keep, gs;
} consts0;

static consts0 make_consts0(const zt_adamw_hparams *hp, int decay)
{
    consts0 k;
    float t = (float)hp->step;
    float c1 = 1.0f - powf(hp->beta1, t), c2 = sqrtf(1.0f - powf(hp->beta2, t));
    k.b1 = hp->beta1;
    k.b2 = hp->beta2;
    k.one_b1 = 1.0f - hp->beta1;
    k.one_b2 = 1.0f - hp->beta2;
    k.eps_c2 = hp->eps * c2;
    k.step_size = -hp->lr * c2 / c1;
    k.keep = decay && hp->weight_decay > 0.0f ? 1.0f - hp->lr * hp->weight_decay : 1.0f;
    k.gs = hp->grad_scale;
    return k;
}

static void adam8bit_before(const zt_adam8_maps *q, float *p, const float *g, uint8_t *cm,
                            uint8_t *cv, float *am, float *av, size_t n,
                            const zt_adamw_hparams *hp, int decay)
{
    consts0 k = make_consts0(hp, decay);
    size_t nb = (n + ZT_QBLOCK - 1) / ZT_QBLOCK;
    for (size_t b = 0; b < nb; b++) {
        size_t lo = b * ZT_QBLOCK, len = n - lo < ZT_QBLOCK ? n - lo : ZT_QBLOCK;
        float m[ZT_QBLOCK], v[ZT_QBLOCK], gb[ZT_QBLOCK], am1 = 0.0f, av1 = 0.0f;
        float a_m = am[b], a_v = av[b];
        const uint8_t *cmb = cm + lo, *cvb = cv + lo;
        float *pb = p + lo;
        for (size_t j = 0; j < len; j++) { /* dequantize (a table read each) */
            m[j] = q->m[cmb[j]] * a_m;
            v[j] = q->v[cvb[j]] * a_v;
            gb[j] = g[lo + j] * k.gs;
        }
        for (size_t j = 0; j < len; j++) { /* the moments, their block maxima */
            int fin = isfinite(gb[j]);
            float gj = fin ? gb[j] : 0.0f;
            float mj = m[j] * k.b1 + k.one_b1 * gj, vj = v[j] * k.b2 + k.one_b2 * gj * gj;
            m[j] = fin ? mj : 0.0f; /* a non-finite gradient: the element starts again */
            v[j] = fin ? vj : 0.0f;
            float am_j = fabsf(m[j]), av_j = fabsf(v[j]);
            am1 = am_j > am1 ? am_j : am1;
            av1 = av_j > av1 ? av_j : av1;
        }
        for (size_t j = 0; j < len; j++) { /* the parameters (unchanged where g is not finite) */
            float upd = (pb[j] + k.step_size * (m[j] / (sqrtf(v[j]) + k.eps_c2))) * k.keep;
            pb[j] = isfinite(gb[j]) ? upd : pb[j];
        }
        uint8_t *cmw = cm + lo, *cvw = cv + lo;
        if (am1 > 0.0f)
            for (size_t j = 0; j < len; j++)
                cmw[j] = zt_quantize_fast(q->m, q->m_idx, m[j] / am1);
        else
            memset(cmw, q->m_zero, len);
        if (av1 > 0.0f)
            for (size_t j = 0; j < len; j++)
                cvw[j] = zt_quantize_fast(q->v, q->v_idx, v[j] / av1);
        else
            memset(cvw, q->v_zero, len);
        am[b] = am1;
        av[b] = av1;
    }
}

static void adam32_before(float *p, const float *g, float *m, float *v, size_t n,
                          const zt_adamw_hparams *hp, int decay)
{
    consts0 k = make_consts0(hp, decay);
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * k.gs;
        if (!isfinite(gi)) {
            m[i] = v[i] = 0.0f;
            continue;
        }
        float mi = m[i] * k.b1 + k.one_b1 * gi, vi = v[i] * k.b2 + k.one_b2 * gi * gi;
        p[i] = (p[i] + k.step_size * (mi / (sqrtf(vi) + k.eps_c2))) * k.keep;
        m[i] = mi;
        v[i] = vi;
    }
}

static void check_update(int path, const zt_adam8_maps *q)
{
    /* 41 blocks and a partial one; several blocks each of every gradient kind and state */
    const size_t n = 41 * ZT_QBLOCK + 77, nb = (n + ZT_QBLOCK - 1) / ZT_QBLOCK;
    const char *name = zt_adam8bit_path_name(path);
    state8 ref, got;
    state_alloc(&ref, n);
    state_alloc(&got, n);
    float *g = malloc(n * 4), *tv = malloc(4096 * sizeof(float));
    assert_non_null(g);
    assert_non_null(tv);
    size_t nt = tie_values(q, tv);
    assert_true(nt > 2000 && nt <= 4096);
    uint64_t r = 1234;
    for (size_t i = 0; i < n; i++) {
        ref.p[i] = (float)(randn(&r) * 0.1);
        ref.cm[i] = (uint8_t)lcg(&r);
        ref.cv[i] = (uint8_t)lcg(&r);
    }
    ref.p[5] = INFINITY; /* odd parameters: kept or updated alike */
    ref.p[6] = -INFINITY;
    ref.p[7] = NAN;
    ref.p[8] = 1e-40f;
    for (size_t b = 0; b < nb; b++) {
        float a = (float)exp(randn(&r) * 3.0 - 4.0), av = (float)exp(randn(&r) * 3.0 - 8.0);
        switch (b % 11) {
        case 1: a = av = 0.0f; break;                 /* a fresh (all-zero) block */
        case 4: a = -a; av = -av; break;              /* negative absmax read back */
        case 7: a = 1e-42f; av = 3e-44f; break;       /* denormal */
        case 9: a = INFINITY; break;                  /* what an overflowed moment leaves */
        case 10: av = NAN; break;
        default: break;
        }
        ref.am[b] = a;
        ref.av[b] = av;
        if (b % 11 == 1) {
            memset(ref.cm + b * ZT_QBLOCK, q->m_zero, b + 1 < nb ? ZT_QBLOCK : n - b * ZT_QBLOCK);
            memset(ref.cv + b * ZT_QBLOCK, q->v_zero, b + 1 < nb ? ZT_QBLOCK : n - b * ZT_QBLOCK);
        }
    }
    state_copy(&got, &ref, n);
    for (int step = 1; step <= 8; step++) {
        int ties = step == 4 || step == 7;
        zt_adamw_hparams hp = {1e-3f, ties ? 0.0f : 0.9f, 0.999f, 1e-8f, 0.01f, step,
                               step % 3 == 2 ? 0.5f : 1.0f};
        int decay = step % 2;
        make_grads(g, n, &r, step, tv, ties ? nt : 0);
        adam8bit_before(q, ref.p, g, ref.cm, ref.cv, ref.am, ref.av, n, &hp, decay);
        assert_int_equal(zt_adam8bit_update_path(path, q, got.p, g, got.cm, got.cv, got.am,
                                                 got.av, n, &hp, decay), 0);
        bytes_equal(got.p, ref.p, n, 4, name, "p", step);
        bytes_equal(got.cm, ref.cm, n, 1, name, "m code", step);
        bytes_equal(got.cv, ref.cv, n, 1, name, "v code", step);
        bytes_equal(got.am, ref.am, nb, 4, name, "m absmax", step);
        bytes_equal(got.av, ref.av, nb, 4, name, "v absmax", step);
    }
    state_free(&ref);
    state_free(&got);
    free(g);
    free(tv);
}

static void check_adam32(int path)
{
    const size_t n = 3000 + 13;
    float *p[2], *m[2], *v[2], *g = malloc(n * 4);
    uint64_t r = 99;
    for (int k = 0; k < 2; k++) {
        p[k] = malloc(n * 4);
        m[k] = calloc(n, 4);
        v[k] = calloc(n, 4);
    }
    for (size_t i = 0; i < n; i++)
        p[0][i] = p[1][i] = (float)(randn(&r) * 0.1);
    for (size_t i = 0; i < n; i += 97) /* odd parameters */
        p[0][i] = p[1][i] = (i / 97) % 3 == 0 ? NAN : (i / 97) % 3 == 1 ? INFINITY : -1e-40f;
    for (int step = 1; step <= 5; step++) {
        zt_adamw_hparams hp = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, step, step == 3 ? 0.5f : 1.0f};
        make_grads(g, n, &r, step, NULL, 0);
        for (size_t i = 3; i < n; i += 89) /* moments that overflow: inf / inf */
            g[i] = (i / 89) % 2 ? 3.4e38f : -3.4e38f;
        adam32_before(p[0], g, m[0], v[0], n, &hp, step % 2);
        assert_int_equal(zt_adam32_update_path(path, p[1], g, m[1], v[1], n, &hp, step % 2), 0);
        bytes_equal(p[1], p[0], n, 4, zt_adam8bit_path_name(path), "fp32 p", step);
        bytes_equal(m[1], m[0], n, 4, zt_adam8bit_path_name(path), "fp32 m", step);
        bytes_equal(v[1], v[0], n, 4, zt_adam8bit_path_name(path), "fp32 v", step);
    }
    for (int k = 0; k < 2; k++) {
        free(p[k]); free(m[k]); free(v[k]);
    }
    free(g);
}

static void check_path(int path)
{
    zt_adam8_maps *q = malloc(sizeof *q);
    assert_non_null(q);
    zt_adam8_maps_init(q);
    if (!zt_adam8bit_path_available(q, path)) {
        printf("%s kernel: not available on this CPU, skipped\n", zt_adam8bit_path_name(path));
        free(q);
        skip();
    }
    check_quantizer(path, q);
    check_update(path, q);
    check_adam32(path);
    printf("%s kernel: the bytes of the scalar code before it (quantizer, 8 steps of 8-bit "
           "AdamW, fp32 state)\n", zt_adam8bit_path_name(path));
    free(q);
}

static void test_path_scalar(void **state)
{
    (void)state;
    check_path(ZT_ADAM8_SCALAR);
}

static void test_path_avx2(void **state)
{
    (void)state;
    check_path(ZT_ADAM8_AVX2);
}

static void test_path_avx512(void **state)
{
    (void)state;
    check_path(ZT_ADAM8_AVX512);
}

/* the dispatch: the zone tables build for these maps, AUTO is the best kernel the CPU runs */
static void test_path_dispatch(void **state)
{
    (void)state;
    zt_adam8_maps *q = malloc(sizeof *q);
    assert_non_null(q);
    zt_adam8_maps_init(q);
    assert_int_equal(q->zones_ok, 1);
    int path = zt_adam8bit_path(q);
    assert_true(zt_adam8bit_path_available(q, path));
    for (int k = path + 1; k <= ZT_ADAM8_AVX512; k++)
        assert_false(zt_adam8bit_path_available(q, k));
    assert_true(zt_adam8bit_path_available(q, ZT_ADAM8_SCALAR));
    assert_int_equal(zt_adam8bit_update_path(7, q, NULL, NULL, NULL, NULL, NULL, NULL, 0, NULL, 0),
                     -ENOTSUP);
    printf("dispatched kernel: %s\n", zt_adam8bit_path_name(path));
    free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_maps),
        cmocka_unit_test(test_quantize_nearest),
        cmocka_unit_test(test_reference_fixture),
        cmocka_unit_test(test_acceptance_vs_fp32),
        cmocka_unit_test(test_path_dispatch),
        cmocka_unit_test(test_path_scalar),
        cmocka_unit_test(test_path_avx2),
        cmocka_unit_test(test_path_avx512),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
