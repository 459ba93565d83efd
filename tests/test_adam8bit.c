/* test_adam8bit.c - block-wise 8-bit AdamW (optimizer/adam8bit.c, quant.c) as bitsandbytes:
 *  - the dynamic maps: all 256 entries of both, bit for bit, against the tables torch made by
 *    bitsandbytes' create_dynamic_map (tests/ref/qmap_ref.py) under each of torch's CPU
 *    capabilities (default, AVX2, AVX-512: each flavour of zt_qmap_dynamic_torch), and
 *    zt_qmap_dynamic the AVX2 one;
 *  - quantize_2D: zt_quantize_bnb against the threshold rule (float midpoints, a tie to the
 *    even code), codes to themselves, NaN to 0; the lookup (zt_quantize_fast) against it on
 *    every 61st float (every float with ZT_QUANT_EXHAUSTIVE=1); the sign correction;
 *  - the step against an independent numpy implementation of bitsandbytes' kernels
 *    (tests/ref/adam8bit_ref.py, its output in tests/fixtures/adam8bit/case.bin; another
 *    file by ZT_ADAM8_CASE): every parameter, code, absmax and fp32 moment bit for bit after
 *    each of 5 steps, including gradients of +-0, NaN and infinities, all-zero blocks of
 *    either zero, a partial last block (one element; all non-finite: its padding decides),
 *    g^2 overflowing, no decay, and fp32 state below min_8bit_size;
 *  - bitsandbytes' acceptance test against fp32 Adam (torch.optim.Adam's formula, which
 *    places the bias corrections differently): 50 steps, p = randn * 0.1, g = randn * 0.01;
 *    after each step mean |dp| < 6e-5 and mean relative error < 6e-4, then, as their test
 *    does, the fp32 parameters and the dequantized 8-bit state are copied across, so each
 *    step is compared on its own;
 *  - every kernel (scalar, AVX2, AVX-512; one the CPU lacks is skipped, and says so) gives the
 *    bytes of a plain transcription of the kernel below (zt_quantize_bnb's binary search, the
 *    sign correction written out): the quantizer on every code boundary of both signs and 8
 *    floats either side, the float midpoints (ties), the codes themselves, zeros, ends, NaN,
 *    infinities, denormals and a sweep of every 251st float (every float with
 *    ZT_QUANT_EXHAUSTIVE=1); the whole step, several steps in a row, on random state (every
 *    code, odd absmax values too: negative, infinite, NaN, denormal; blocks of NaN moments),
 *    with NaN and infinite gradients, zero blocks of +0, -0 and both, a partial last block,
 *    tiny and huge magnitudes (g^2 overflowing), ties (beta1 = 0 makes m / absmax the
 *    gradient itself), grad_scale and decay on and off: parameters, codes and absmax byte for
 *    byte; the fp32-state kernel likewise. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "../optimizer/adam8bit.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the reference's output: ZT_ADAM8_CASE, else the committed case */
static const char *fixture_path(void)
{
    static char d[1024];
    const char *f = getenv("ZT_FIXTURES"), *c = getenv("ZT_ADAM8_CASE");
    if (c)
        return c;
    snprintf(d, sizeof d, "%s/adam8bit/case.bin", f ? f : "tests/fixtures");
    return d;
}

/* the table tests/ref/qmap_ref.py wrote for one torch CPU capability: [0] signed, [1] unsigned */
static void read_qmap(const char *name, float out[2][256])
{
    char path[1024], line[4096];
    const char *f = getenv("ZT_FIXTURES");
    snprintf(path, sizeof path, "%s/adam8bit/qmap_%s.txt", f ? f : "tests/fixtures", name);
    FILE *fp = fopen(path, "r");
    if (!fp)
        fail_msg("cannot open %s", path);
    for (int s = 0; s < 2; s++) {
        if (!fgets(line, sizeof line, fp) || strlen(line) < 8 * 256)
            fail_msg("%s: line %d short", path, s + 1);
        for (int i = 0; i < 256; i++) {
            char hex[9];
            memcpy(hex, line + 8 * i, 8);
            hex[8] = 0;
            union { uint32_t u; float f; } c = {(uint32_t)strtoul(hex, NULL, 16)};
            out[s][i] = c.f;
        }
    }
    fclose(fp);
}

static void test_maps(void **state)
{
    (void)state;
    static const char *const names[3] = {"default", "avx2", "avx512"};
    float ref[3][2][256], got[256];
    for (int fl = 0; fl < 3; fl++) { /* every entry of each flavour, bit for bit */
        read_qmap(names[fl], ref[fl]);
        for (int s = 0; s < 2; s++) {
            zt_qmap_dynamic_torch(got, s == 0, fl);
            for (int i = 0; i < 256; i++)
                if (memcmp(&got[i], &ref[fl][s][i], 4) != 0)
                    fail_msg("torch %s flavour, %s map[%d] = %a, torch %a", names[fl],
                             s ? "unsigned" : "signed", i, got[i], ref[fl][s][i]);
        }
    }
    int differ = 0; /* the flavours are not all the same map (else the test shows nothing) */
    for (int i = 0; i < 256; i++)
        differ += memcmp(&ref[0][0][i], &ref[1][0][i], 4) != 0;
    assert_true(differ > 0);
    zt_adam8_maps q;
    zt_adam8_maps_init(&q);
    assert_memory_equal(q.m, ref[ZT_QMAP_TORCH_AVX2][0], sizeof q.m);
    assert_memory_equal(q.v, ref[ZT_QMAP_TORCH_AVX2][1], sizeof q.v);
    for (int s = 0; s < 2; s++) {
        const float *m = s ? q.v : q.m;
        int zeros = 0;
        for (int i = 0; i < 256; i++) {
            zeros += m[i] == 0.0f;
            if (i > 0 && !(m[i] > m[i - 1]))
                fail_msg("map %d not increasing at %d: %g, %g", s, i, m[i - 1], m[i]);
        }
        assert_int_equal(zeros, 1);
        assert_true(m[255] == 1.0f);
    }
    /* signed: codes 0..126 negative, 127 +0 (its sign bit clear), the mirror image of the
     * positive ones up to 254; unsigned: +0 first */
    assert_int_equal(zt_qmap_zero(q.m), 127);
    assert_int_equal(zt_qmap_zero(q.v), 0);
    assert_false(signbit(q.m[127]));
    assert_false(signbit(q.v[0]));
    for (int i = 0; i < 127; i++)
        assert_true(q.m[i] == -q.m[254 - i]);
}

/* the threshold rule of quant.h, written out: the count of float midpoints x is past */
static unsigned threshold_code(const float *map, float x)
{
    unsigned c = 0;
    if (x != x)
        return 0;
    for (unsigned k = 0; k < 255; k++) {
        float t = (map[k] + map[k + 1]) * 0.5f;
        c += x > t || (x == t && (k & 1));
    }
    return c;
}

static void test_quantize(void **state)
{
    (void)state;
    zt_adam8_maps q;
    zt_adam8_maps_init(&q);
    int ties = 0;
    for (int s = 0; s < 2; s++) {
        const float *m = s ? q.v : q.m;
        const uint16_t *idx = s ? q.v_idx : q.m_idx;
        int sg = s == 0;
        for (int i = 0; i < 256; i++) {
            assert_int_equal(zt_quantize_bnb(m, sg, m[i]), i);
            assert_int_equal(zt_quantize_fast(m, idx, m[i]), i);
        }
        for (int k = 0; k < 255; k++) { /* each midpoint: a tie to the even code */
            float t = (m[k] + m[k + 1]) * 0.5f;
            unsigned even = (k & 1) ? (unsigned)k + 1 : (unsigned)k;
            assert_int_equal(zt_quantize_bnb(m, sg, t), even);
            assert_int_equal(zt_quantize_fast(m, idx, t), even);
            assert_int_equal(zt_quantize_bnb(m, sg, nextafterf(t, 2.0f)), k + 1);
            assert_int_equal(zt_quantize_bnb(m, sg, nextafterf(t, -2.0f)), k);
            ties++;
        }
        const float special[] = {NAN, -NAN, INFINITY, -INFINITY, 2.0f, -2.0f, 0.0f, -0.0f,
                                 1e-12f, -1e-12f, 1e-45f, -1e-45f};
        for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) {
            unsigned want = threshold_code(m, special[i]);
            assert_int_equal(zt_quantize_bnb(m, sg, special[i]), want);
            assert_int_equal(zt_quantize_fast(m, idx, special[i]), want);
        }
        assert_int_equal(zt_quantize_bnb(m, sg, NAN), 0);
        /* the search against the rule written out: every 4093rd float of [-1.5, 1.5] */
        for (uint32_t neg = 0; neg < 2; neg++)
            for (uint32_t u = 0; u <= 0x3FC00000u; u += 4093) {
                union { uint32_t u; float f; } x = {u | (neg << 31)};
                if (zt_quantize_bnb(m, sg, x.f) != threshold_code(m, x.f))
                    fail_msg("%s map: quantize_2D and the threshold rule differ at %a",
                             sg ? "signed" : "unsigned", x.f);
            }
        /* the lookup against the search: every 61st float, all of them with the flag */
        uint64_t stride = getenv("ZT_QUANT_EXHAUSTIVE") ? 1 : 61;
        for (uint64_t u = 0; u < (1ull << 32); u += stride) {
            union { uint32_t u; float f; } x = {(uint32_t)u};
            if (zt_quantize_fast(m, idx, x.f) != zt_quantize_bnb(m, sg, x.f))
                fail_msg("%s map: lookup %d and search %d differ at %a (0x%08x)",
                         sg ? "signed" : "unsigned", zt_quantize_fast(m, idx, x.f),
                         zt_quantize_bnb(m, sg, x.f), x.f, x.u);
        }
    }
    assert_int_equal(ties, 2 * 255);
    /* the sign correction: negative m and -0 that round to 127 go just below zero; where
     * m / absmax is NaN (code 0): 0 for -0 and negative m, 1 for +inf, 255 for +0 and NaN */
    assert_int_equal(zt_qsign_fix(zt_quantize_bnb(q.m, 1, -0.0f), -0.0f), 126);
    assert_int_equal(zt_qsign_fix(zt_quantize_bnb(q.m, 1, -1e-12f), -1e-12f), 126);
    assert_int_equal(zt_qsign_fix(zt_quantize_bnb(q.m, 1, 1e-12f), 1e-12f), 127);
    assert_int_equal(zt_qsign_fix(zt_quantize_bnb(q.m, 1, 0.0f), 0.0f), 127);
    assert_int_equal(zt_qsign_fix(zt_quantize_bnb(q.m, 1, -0.5f), -0.5f),
                     zt_quantize_bnb(q.m, 1, -0.5f));
    assert_int_equal(zt_qsign_fix(0, 0.0f), 255);
    assert_int_equal(zt_qsign_fix(0, -0.0f), 0);
    assert_int_equal(zt_qsign_fix(0, INFINITY), 1);
    assert_int_equal(zt_qsign_fix(0, -INFINITY), 0);
    assert_int_equal(zt_qsign_fix(0, NAN), 255);
    assert_int_equal(zt_qsign_fix(0, -NAN), 255);
    assert_int_equal(zt_qsign_fix(255, 0.5f), 255);
}

static void read_or_fail(void *dst, size_t n, FILE *f)
{
    if (fread(dst, 1, n, f) != n)
        fail_msg("%s: truncated", fixture_path());
}

/* n floats bit for bit (a NaN too: the reference's operations are the same) */
static void floats_exact(const float *a, const float *ref, size_t n, const char *what,
                         uint32_t step, uint32_t t)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &ref[i], 4) != 0)
            fail_msg("%s: step %u tensor %u: %s[%zu] = %a, reference %a (%.9g, %.9g)",
                     fixture_path(), step, t, what, i, a[i], ref[i], a[i], ref[i]);
}

static void test_reference_fixture(void **state)
{
    (void)state;
    FILE *f = fopen(fixture_path(), "rb");
    char magic[4];
    uint32_t version, nt, steps;
    float hpf[6];
    if (!f)
        fail_msg("cannot open %s", fixture_path());
    read_or_fail(magic, 4, f);
    assert_memory_equal(magic, "ZTA8", 4);
    read_or_fail(&version, 4, f);
    assert_int_equal(version, 2);
    read_or_fail(&nt, 4, f);
    read_or_fail(&steps, 4, f);
    read_or_fail(hpf, sizeof hpf, f);
    assert_true(nt >= 1 && nt <= 8 && steps >= 1 && steps <= 100);
    zt_adam8_maps *q = malloc(sizeof *q);
    assert_non_null(q);
    zt_adam8_maps_init(q);
    uint32_t n[8], is8[8], decay[8];
    float *p[8], *m[8], *v[8], *am[8], *av[8];
    uint8_t *cm[8], *cv[8];
    for (uint32_t t = 0; t < nt; t++) {
        read_or_fail(&n[t], 4, f);
        read_or_fail(&is8[t], 4, f);
        read_or_fail(&decay[t], 4, f);
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
        zt_adam8bit_init(cm[t], cv[t], am[t], av[t], n[t]);
    }
    size_t nmax = 0;
    for (uint32_t t = 0; t < nt; t++)
        nmax = n[t] > nmax ? n[t] : nmax;
    float *g = malloc(nmax * 4), *ep = malloc(nmax * 4), *ex = malloc(nmax * 4);
    uint8_t *ec = malloc(nmax);
    size_t special = 0, checked = 0;
    for (uint32_t s = 1; s <= steps; s++) {
        zt_adamw_hparams hp = {hpf[0], hpf[1], hpf[2], hpf[3], hpf[4], (int64_t)s, hpf[5], 0};
        for (uint32_t t = 0; t < nt; t++) {
            size_t nn = n[t], nb = (nn + ZT_QBLOCK - 1) / ZT_QBLOCK;
            read_or_fail(g, nn * 4, f);
            for (size_t i = 0; i < nn; i++)
                special += !isfinite(g[i]) || g[i] == 0.0f;
            if (is8[t])
                zt_adam8bit_update(q, p[t], g, cm[t], cv[t], am[t], av[t], nn, &hp,
                                   (int)decay[t]);
            else
                zt_adam32_update(p[t], g, m[t], v[t], nn, &hp, (int)decay[t]);
            read_or_fail(ep, nn * 4, f);
            floats_exact(p[t], ep, nn, "p", s, t);
            checked += nn;
            if (is8[t]) {
                for (int k = 0; k < 2; k++) {
                    read_or_fail(ec, nn, f);
                    const uint8_t *c = k ? cv[t] : cm[t];
                    for (size_t i = 0; i < nn; i++)
                        if (c[i] != ec[i])
                            fail_msg("%s: step %u tensor %u: %s code[%zu] = %d, reference %d",
                                     fixture_path(), s, t, k ? "v" : "m", i, c[i], ec[i]);
                    checked += nn;
                }
                for (int k = 0; k < 2; k++) {
                    read_or_fail(ex, nb * 4, f);
                    floats_exact(k ? av[t] : am[t], ex, nb, k ? "v absmax" : "m absmax", s, t);
                    checked += nb;
                }
            } else {
                for (int k = 0; k < 2; k++) {
                    read_or_fail(ex, nn * 4, f);
                    floats_exact(k ? v[t] : m[t], ex, nn, k ? "fp32 v" : "fp32 m", s, t);
                    checked += nn;
                }
            }
        }
    }
    assert_true(special > 0); /* the fixture does exercise the special values */
    assert_int_equal(fgetc(f), EOF);
    fclose(f);
    printf("%s: %u steps of %u tensors, %zu values bit for bit (no near-ties flagged: the "
           "reference makes the same float operations)\n", fixture_path(), steps, nt, checked);
    for (uint32_t t = 0; t < nt; t++) {
        free(p[t]); free(m[t]); free(v[t]); free(cm[t]); free(cv[t]); free(am[t]); free(av[t]);
    }
    free(g);
    free(ep);
    free(ex);
    free(ec);
    free(q);
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
    zt_adam8bit_init(cm, cv, am, av, N);
    double worst_err = 0.0, worst_rel = 0.0;
    for (int step = 1; step <= 50; step++) {
        zt_adamw_hparams hp = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, step, 1.0f, 0};
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

/* the signed map's code boundaries (both signs) and 2 floats either side, and the float
 * midpoints: x values where the code is decided by a hair or a tie */
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
    for (int i = 0; i < 255; i++) /* the float midpoints: ties */
        out[n++] = (q->m[i] + q->m[i + 1]) * 0.5f;
    return n;
}

/* bitsandbytes' sign correction, written out (a NaN s1 positive, as CUDA's) */
static uint8_t sign_fix0(const float *map, uint8_t c, float s1)
{
    int neg_s1 = signbit(s1) && !isnan(s1); /* CUDA's NaN is positive */
    if ((signbit(map[c]) != 0) != neg_s1)
        c = (uint8_t)(s1 > 0.0f ? c + 1 : c - 1);
    return c;
}

/* the path's codes of x[0..n) against zt_quantize_fast's; n a multiple of 16 */
static void quant_compare(int path, const zt_adam8_maps *q, int is_signed, const float *x,
                          uint8_t *got, size_t n, const char *what)
{
    assert_int_equal(zt_adam8_quantize_path(path, q, is_signed, x, got, n), 0);
    for (size_t i = 0; i < n; i++) {
        /* the lookup: test_quantize finds it equal to zt_quantize_bnb (on every float with
         * ZT_QUANT_EXHAUSTIVE), at a fraction of the cost; the sign correction the test's own */
        uint8_t want = is_signed ? sign_fix0(q->m, zt_quantize_fast(q->m, q->m_idx, x[i]), x[i])
                                 : zt_quantize_fast(q->v, q->v_idx, x[i]);
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
        /* the codes, the float midpoints between neighbours (ties: the even code), special
         * values */
        for (int i = 0; i < 256; i++) {
            x[n++] = map[i];
            x[n++] = -map[i];
            if (i < 255) {
                float mid = (map[i] + map[i + 1]) * 0.5f;
                ties++;
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
                fail_msg("%s, step %d: %s[%zu] = %.9g (0x%08x), spec %.9g (0x%08x)", path,
                         step, what, e, ((const float *)a)[e], f2u(((const float *)a)[e]),
                         ((const float *)b)[e], f2u(((const float *)b)[e]));
            fail_msg("%s, step %d: %s[%zu] = %d, spec %d", path, step, what, e, x[e], y[e]);
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
            case 1: gi = (b / 8) % 3 == 0 ? 0.0f : (b / 8) % 3 == 1 ? -0.0f
                         : (i & 1) ? -0.0f : 0.0f; break;      /* +0, -0, both */
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
            if (kind != 1 && lcg(r) % 31 == 0) /* finite, but not once scaled by 4 */
                gi = z < 0 ? -3e38f : 3e38f;
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

/* bitsandbytes' kernels transcribed plainly (one thread, no lookup tables): the bytes every
 * kernel must give. The 8-bit one: kOptimizerStatic8bit2StateBlockwise, a block padded to 256
 * as its loads do (g 0, codes 128 and 0), absmax by fmaxf from -FLT_MAX, quantize_2D
 * (zt_quantize_bnb, checked against the threshold rule above) and the sign correction; the
 * fp32 one: kOptimizer32bit2State with zerotrain's rule for a non-finite gradient. */
typedef struct consts0 {
    float b1, b2, eps, lr, wd, gs, c2, step_size;
    int decay;
} consts0;

static consts0 make_consts0(const zt_adamw_hparams *hp, int decay)
{
    consts0 k;
    float t = (float)hp->step;
    float c1 = 1.0f - powf(hp->beta1, t);
    k.c2 = sqrtf(1.0f - powf(hp->beta2, t));
    k.b1 = hp->beta1;
    k.b2 = hp->beta2;
    k.eps = hp->eps;
    k.lr = hp->lr;
    k.wd = hp->weight_decay;
    k.gs = hp->grad_scale;
    k.step_size = -hp->lr * k.c2 / c1;
    k.decay = decay;
    return k;
}

/* p + t, p's NaN where both are NaN (x86), as the library fixes it for every kernel: the
 * compiler may swap a plain sum's operands */
static float add_p0(float p, float t)
{
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    __asm__("addss %1, %0" : "+x"(p) : "x"(t));
    return p;
#else
    return p + t;
#endif
}

static void adam8bit_spec(const zt_adam8_maps *q, float *p, const float *g, uint8_t *cm,
                          uint8_t *cv, float *am, float *av, size_t n,
                          const zt_adamw_hparams *hp, int decay)
{
    consts0 k = make_consts0(hp, decay);
    size_t nb = (n + ZT_QBLOCK - 1) / ZT_QBLOCK;
    for (size_t b = 0; b < nb; b++) {
        size_t lo = b * ZT_QBLOCK, valid = n - lo < ZT_QBLOCK ? n - lo : ZT_QBLOCK;
        float g_vals[ZT_QBLOCK], s1[ZT_QBLOCK], s2[ZT_QBLOCK];
        uint8_t c1s[ZT_QBLOCK], c2s[ZT_QBLOCK];
        float a1 = -FLT_MAX, a2 = -FLT_MAX;
        for (size_t j = 0; j < ZT_QBLOCK; j++) {
            g_vals[j] = j < valid ? g[lo + j] : 0.0f;
            c1s[j] = j < valid ? cm[lo + j] : 128;
            c2s[j] = j < valid ? cv[lo + j] : 0;
        }
        for (size_t j = 0; j < ZT_QBLOCK; j++) {
            if (!isnan(g_vals[j]) && !isinf(g_vals[j])) {
                s2[j] = q->v[c2s[j]] * av[b];
                float g_val = g_vals[j];
                g_val *= k.gs;
                s2[j] = (s2[j] * k.b2) + (((1.0f - k.b2) * g_val * g_val));
                s1[j] = q->m[c1s[j]] * am[b];
                s1[j] = (s1[j] * k.b1) + (((1.0f - k.b1) * g_val));
            } else {
                s1[j] = 0.0f;
                s2[j] = 0.0f;
            }
            a1 = fmaxf(a1, fabsf(s1[j]));
            a2 = fmaxf(a2, fabsf(s2[j]));
        }
        am[b] = a1;
        av[b] = a2;
        for (size_t j = 0; j < valid; j++)
            if (!isnan(g_vals[j]) && !isinf(g_vals[j])) {
                p[lo + j] = add_p0(p[lo + j], k.step_size * (s1[j] / (sqrtf(s2[j]) + k.c2 * k.eps)));
                if (k.decay && k.wd > 0.0f)
                    p[lo + j] = p[lo + j] * (1.0f - k.lr * k.wd);
            }
        for (size_t j = 0; j < valid; j++) {
            cm[lo + j] = sign_fix0(q->m, zt_quantize_bnb(q->m, 1, s1[j] / a1), s1[j]);
            cv[lo + j] = zt_quantize_bnb(q->v, 0, s2[j] / a2);
        }
    }
}

static void adam32_spec(float *p, const float *g, float *m, float *v, size_t n,
                        const zt_adamw_hparams *hp, int decay)
{
    consts0 k = make_consts0(hp, decay);
    for (size_t i = 0; i < n; i++) {
        float gi = k.gs * g[i];
        if (!isfinite(gi)) {
            m[i] = v[i] = 0.0f;
            continue;
        }
        m[i] = m[i] * k.b1 + ((1.0f - k.b1) * gi);
        v[i] = v[i] * k.b2 + ((1.0f - k.b2) * (gi * gi));
        p[i] = add_p0(p[i], k.step_size * (m[i] / (sqrtf(v[i]) + k.eps * k.c2)));
        if (k.decay && k.wd > 0.0f)
            p[i] = p[i] * (1.0f - k.lr * k.wd);
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
        case 3: a = INFINITY; break;                  /* with codes 127: NaN moments */
        case 4: a = -a; av = -av; break;              /* negative absmax read back */
        case 7: a = 1e-42f; av = 3e-44f; break;       /* denormal */
        case 9: a = INFINITY; break;                  /* what an overflowed moment leaves */
        case 10: av = NAN; break;
        default: break;
        }
        ref.am[b] = a;
        ref.av[b] = av;
        size_t len = b + 1 < nb ? ZT_QBLOCK : n - b * ZT_QBLOCK;
        if (b % 11 == 1) {
            memset(ref.cm + b * ZT_QBLOCK, 0, len);
            memset(ref.cv + b * ZT_QBLOCK, 0, len);
        }
        if (b % 11 == 3)
            memset(ref.cm + b * ZT_QBLOCK, 127, len);
    }
    state_copy(&got, &ref, n);
    for (int step = 1; step <= 8; step++) {
        int ties = step == 4 || step == 7;
        zt_adamw_hparams hp = {1e-3f, ties ? 0.0f : 0.9f, 0.999f, 1e-8f, 0.01f, step,
                               step == 8 ? 4.0f : step % 3 == 2 ? 0.5f : 1.0f, 0};
        int decay = step % 2;
        make_grads(g, n, &r, step, tv, ties ? nt : 0);
        for (size_t b = 3; step == 1 && b < nb; b += 11) /* NaN moments throughout: absmax */
            for (size_t i = b * ZT_QBLOCK; i < n && i < (b + 1) * ZT_QBLOCK; i++) /* -FLT_MAX */
                g[i] = isfinite(g[i]) ? g[i] : 1e-3f;
        adam8bit_spec(q, ref.p, g, ref.cm, ref.cv, ref.am, ref.av, n, &hp, decay);
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
        zt_adamw_hparams hp = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, step, step == 3 ? 0.5f : 1.0f, 0};
        make_grads(g, n, &r, step, NULL, 0);
        for (size_t i = 3; i < n; i += 89) /* moments that overflow: inf / inf */
            g[i] = (i / 89) % 2 ? 3.4e38f : -3.4e38f;
        adam32_spec(p[0], g, m[0], v[0], n, &hp, step % 2);
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
    printf("%s kernel: the bytes of the kernels transcribed (quantizer, 8 steps of 8-bit "
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
        cmocka_unit_test(test_quantize),
        cmocka_unit_test(test_reference_fixture),
        cmocka_unit_test(test_acceptance_vs_fp32),
        cmocka_unit_test(test_path_dispatch),
        cmocka_unit_test(test_path_scalar),
        cmocka_unit_test(test_path_avx2),
        cmocka_unit_test(test_path_avx512),
    };
    const struct CMUnitTest one_case[] = {cmocka_unit_test(test_reference_fixture)};
    if (getenv("ZT_ADAM8_CASE")) /* a reference case of tests/test_adam8bit_ref.sh: only it */
        return cmocka_run_group_tests(one_case, NULL, NULL);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
