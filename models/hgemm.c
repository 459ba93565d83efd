/* hgemm.c - matrix products (hgemm.h). 16-bit x 16-bit -> fp32: oneDNN's bf16 matmul primitive
 * with strided memory descriptors (one primitive per shape, kept in a small cache), or
 * widened k-blocks through the fp32 product. fp32: oneDNN's sgemm in fixed blocks of the
 * output, one thread each, where the CPU has AVX-512, else OpenBLAS's sgemm. oneDNN is opened
 * (dlopen) the first time a product that may use it is asked for: a process whose products
 * all take OpenBLAS never maps it (2 MiB resident), and without it every product takes
 * OpenBLAS. */
#include "hgemm.h"
#include "../common/err.h"
#include "../common/half.h"

#include <cblas.h>
#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zerotrain.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- path 0: widened blocks, sgemm ------------------------------------------------------ */

static float *scratch;
static size_t scratch_n;

static int hgemm_f32(int dt, int ta, int tb, int M, int N, int K, float alpha, const uint16_t *A,
                     int lda, const uint16_t *B, int ldb, float beta, float *C, int ldc)
{
    int kb = K < ZT_HGEMM_KB ? K : ZT_HGEMM_KB;
    size_t need = ((size_t)M + (size_t)N) * (size_t)(kb > 0 ? kb : 1);
    if (K == 0 || M == 0 || N == 0) { /* C = beta C */
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++)
                C[(size_t)m * ldc + n] = beta == 0.0f ? 0.0f : beta * C[(size_t)m * ldc + n];
        return 0;
    }
    if (need > scratch_n) {
        float *p = realloc(scratch, need * sizeof *p);
        if (!p)
            return zt_fail(ZT_E_NOMEM, "%s product %dx%dx%d: out of memory",
                           dt == ZT_HALF_F16 ? "fp16" : "bf16", M, N, K);
        scratch = p;
        scratch_n = need;
    }
    float *a = scratch, *b = scratch + (size_t)M * kb;
    for (int k0 = 0; k0 < K; k0 += kb) {
        int kk = K - k0 < kb ? K - k0 : kb;
        /* a: op(A)[:, k0:k0+kk] as M x kk; b: op(B)[k0:k0+kk, :] as kk x N */
        if (!ta)
            for (int m = 0; m < M; m++)
                zt_half_widen(dt, a + (size_t)m * kk, A + (size_t)m * lda + k0, (size_t)kk);
        else /* A is K x M: rows k0.. give kk x M, used transposed */
            for (int k = 0; k < kk; k++)
                zt_half_widen(dt, a + (size_t)k * M, A + (size_t)(k0 + k) * lda, (size_t)M);
        if (!tb)
            for (int k = 0; k < kk; k++)
                zt_half_widen(dt, b + (size_t)k * N, B + (size_t)(k0 + k) * ldb, (size_t)N);
        else /* B is N x K */
            for (int n = 0; n < N; n++)
                zt_half_widen(dt, b + (size_t)n * kk, B + (size_t)n * ldb + k0, (size_t)kk);
        zt_sgemm(ta, tb, M, N, kk, alpha, a, ta ? M : kk, b, tb ? kk : N, k0 == 0 ? beta : 1.0f,
                 C, ldc);
    }
    return 0;
}

/* ---- path 1: oneDNN ------------------------------------------------------------------------ */

/* the oneDNN entry points used, resolved from libdnnl.so.2 by dnnl_open */
#define DNNL_FUNCS(X)                                                                             \
    X(dnnl_engine_create) X(dnnl_engine_destroy) X(dnnl_stream_create) X(dnnl_stream_wait)      \
    X(dnnl_set_verbose) X(dnnl_matmul_desc_init) X(dnnl_memory_create) X(dnnl_memory_destroy)   \
    X(dnnl_memory_desc_init_by_strides) X(dnnl_memory_desc_init_by_tag)                         \
    X(dnnl_memory_set_data_handle) X(dnnl_post_ops_create) X(dnnl_post_ops_destroy)             \
    X(dnnl_post_ops_append_sum) X(dnnl_primitive_attr_create) X(dnnl_primitive_attr_destroy)    \
    X(dnnl_primitive_attr_set_output_scales) X(dnnl_primitive_attr_set_post_ops)                \
    X(dnnl_primitive_create) X(dnnl_primitive_destroy) X(dnnl_primitive_execute)                \
    X(dnnl_primitive_desc_create) X(dnnl_primitive_desc_destroy) X(dnnl_primitive_desc_query)  \
    X(dnnl_sgemm)

static struct {
#define DNNL_PTR(f) __typeof__(&f) f;
    DNNL_FUNCS(DNNL_PTR)
#undef DNNL_PTR
} dn;

static void *dnnl_lib;

static pthread_once_t open_once = PTHREAD_ONCE_INIT;
static int open_rc = -1;

static void dnnl_open_once(void)
{
    if (!(dnnl_lib = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL)))
        return;
    int ok = 1;
#define DNNL_SYM(f)                                                                               \
    if (ok && !(*(void **)&dn.f = dlsym(dnnl_lib, #f)))                                           \
        ok = 0;
    DNNL_FUNCS(DNNL_SYM)
#undef DNNL_SYM
    if (!ok) {
        dlclose(dnnl_lib);
        dnnl_lib = NULL;
        memset(&dn, 0, sizeof dn);
        return;
    }
    open_rc = 0;
}

/* 0 when libdnnl.so.2 opened and every entry point resolved (tried once per process) */
static int dnnl_open(void)
{
    pthread_once(&open_once, dnnl_open_once);
    return open_rc;
}

#define CACHE 64

typedef struct prim {
    int ta, tb, M, N, K, lda, ldb, ldc;
    float alpha, beta;
    dnnl_primitive_t p;
    dnnl_memory_t ma, mb, mc;
} prim;

static dnnl_engine_t eng;
static dnnl_stream_t stream;
static int dnnl_state; /* 0 unknown, 1 usable, -1 not */
static char impl[96] = ""; /* oneDNN's bf16 matmul, or "" */
static prim cache[CACHE];
static int n_cache, next_evict;

static void prim_free(prim *q)
{
    if (q->p)
        dn.dnnl_primitive_destroy(q->p);
    if (q->ma)
        dn.dnnl_memory_destroy(q->ma);
    if (q->mb)
        dn.dnnl_memory_destroy(q->mb);
    if (q->mc)
        dn.dnnl_memory_destroy(q->mc);
    memset(q, 0, sizeof *q);
}

/* the primitive for a shape (made and cached on first use); NULL when oneDNN has none */
static prim *prim_get(int ta, int tb, int M, int N, int K, float alpha, int lda, int ldb,
                      float beta, int ldc, const char **why)
{
    for (int i = 0; i < n_cache; i++) {
        prim *q = &cache[i];
        if (q->ta == ta && q->tb == tb && q->M == M && q->N == N && q->K == K &&
            q->lda == lda && q->ldb == ldb && q->ldc == ldc && q->alpha == alpha &&
            q->beta == beta)
            return q;
    }
    prim *q = n_cache < CACHE ? &cache[n_cache++] : &cache[next_evict++ % CACHE];
    prim_free(q);
    dnnl_memory_desc_t a, b, c;
    dnnl_dims_t da = {M, K}, db = {K, N}, dc = {M, N};
    dnnl_dims_t sa = {ta ? 1 : lda, ta ? lda : 1}, sb = {tb ? 1 : ldb, tb ? ldb : 1};
    dnnl_dims_t sc = {ldc, 1};
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_matmul_desc_t md;
    *why = "memory descriptors";
    int ok = dn.dnnl_memory_desc_init_by_strides(&a, 2, da, dnnl_bf16, sa) == dnnl_success &&
             dn.dnnl_memory_desc_init_by_strides(&b, 2, db, dnnl_bf16, sb) == dnnl_success &&
             dn.dnnl_memory_desc_init_by_strides(&c, 2, dc, dnnl_f32, sc) == dnnl_success &&
             dn.dnnl_matmul_desc_init(&md, &a, &b, NULL, &c) == dnnl_success &&
             dn.dnnl_primitive_attr_create(&attr) == dnnl_success;
    if (ok && alpha != 1.0f) {
        *why = "output scale";
        ok = dn.dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha) == dnnl_success;
    }
    if (ok && beta != 0.0f) { /* C = product + beta C */
        *why = "sum post-op";
        ok = dn.dnnl_post_ops_create(&po) == dnnl_success &&
             dn.dnnl_post_ops_append_sum(po, beta) == dnnl_success &&
             dn.dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success;
    }
    if (ok) {
        *why = "no matmul implementation for bf16 on this CPU";
        ok = dn.dnnl_primitive_desc_create(&pd, &md, attr, eng, NULL) == dnnl_success;
    }
    if (ok) {
        *why = "primitive";
        ok = dn.dnnl_primitive_create(&q->p, pd) == dnnl_success &&
             dn.dnnl_memory_create(&q->ma, &a, eng, DNNL_MEMORY_NONE) == dnnl_success &&
             dn.dnnl_memory_create(&q->mb, &b, eng, DNNL_MEMORY_NONE) == dnnl_success &&
             dn.dnnl_memory_create(&q->mc, &c, eng, DNNL_MEMORY_NONE) == dnnl_success;
    }
    if (pd)
        dn.dnnl_primitive_desc_destroy(pd);
    if (po)
        dn.dnnl_post_ops_destroy(po);
    if (attr)
        dn.dnnl_primitive_attr_destroy(attr);
    if (!ok) {
        prim_free(q);
        if (q == &cache[n_cache - 1])
            n_cache--;
        return NULL;
    }
    q->ta = ta; q->tb = tb; q->M = M; q->N = N; q->K = K;
    q->lda = lda; q->ldb = ldb; q->ldc = ldc; q->alpha = alpha; q->beta = beta;
    return q;
}

/* oneDNN's engine and whether it has a bf16 matmul on bf16 instructions (AVX512_BF16 or
 * AMX: 1), another one (2: emulated on AVX-512), or none (-1) */
static int dnnl_probe(void)
{
    if (dnnl_state)
        return dnnl_state;
    dnnl_state = -1;
    if (dnnl_open() < 0)
        return dnnl_state;
    dn.dnnl_set_verbose(0);
    if (dn.dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success)
        return dnnl_state;
    if (dn.dnnl_stream_create(&stream, eng, dnnl_stream_default_flags) != dnnl_success) {
        dn.dnnl_engine_destroy(eng);
        return dnnl_state;
    }
    dnnl_memory_desc_t a, b, c;
    dnnl_dims_t d = {64, 64};
    dnnl_matmul_desc_t md;
    dnnl_primitive_desc_t pd = NULL;
    const char *s = NULL;
    if (dn.dnnl_memory_desc_init_by_tag(&a, 2, d, dnnl_bf16, dnnl_ab) == dnnl_success &&
        dn.dnnl_memory_desc_init_by_tag(&b, 2, d, dnnl_bf16, dnnl_ab) == dnnl_success &&
        dn.dnnl_memory_desc_init_by_tag(&c, 2, d, dnnl_f32, dnnl_ab) == dnnl_success &&
        dn.dnnl_matmul_desc_init(&md, &a, &b, NULL, &c) == dnnl_success &&
        dn.dnnl_primitive_desc_create(&pd, &md, NULL, eng, NULL) == dnnl_success &&
        dn.dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &s) == dnnl_success && s) {
        dnnl_state = strstr(s, "amx") || strstr(s, "avx512_core_bf16") ? 1 : 2;
        snprintf(impl, sizeof impl, "%s", s);
    }
    if (pd)
        dn.dnnl_primitive_desc_destroy(pd);
    return dnnl_state;
}

static int hgemm_dnnl(int ta, int tb, int M, int N, int K, float alpha, const uint16_t *A,
                      int lda, const uint16_t *B, int ldb, float beta, float *C, int ldc)
{
    const char *why = "";
    prim *q = prim_get(ta, tb, M, N, K, alpha, lda, ldb, beta, ldc, &why);
    if (!q)
        return zt_fail(ZT_E_UNSUPPORTED, "bf16 product %dx%dx%d (oneDNN): %s", M, N, K, why);
    dn.dnnl_memory_set_data_handle(q->ma, (void *)A);
    dn.dnnl_memory_set_data_handle(q->mb, (void *)B);
    dn.dnnl_memory_set_data_handle(q->mc, C);
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, q->ma}, {DNNL_ARG_WEIGHTS, q->mb},
                               {DNNL_ARG_DST, q->mc}};
    if (dn.dnnl_primitive_execute(q->p, stream, 3, args) != dnnl_success ||
        dn.dnnl_stream_wait(stream) != dnnl_success)
        return zt_fail(ZT_E_UNSUPPORTED, "bf16 product %dx%dx%d: oneDNN's matmul failed", M, N,
                       K);
    return 0;
}

/* ---- dispatch ----------------------------------------------------------------------------- */

int zt_hgemm_path(int path, int dt, int ta, int tb, int M, int N, int K, float alpha,
                  const uint16_t *A, int lda, const uint16_t *B, int ldb, float beta, float *C,
                  int ldc)
{
    int rc;
    pthread_mutex_lock(&lock);
    if (path == 0)
        rc = hgemm_f32(dt, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    else if (path == 1 && dt == ZT_HALF_BF16 && dnnl_probe() > 0 && M > 0 && N > 0 && K > 0)
        rc = hgemm_dnnl(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    else
        rc = -1;
    pthread_mutex_unlock(&lock);
    return rc;
}

int zt_hgemm_default(int dt)
{
    pthread_mutex_lock(&lock);
    int d = dt == ZT_HALF_BF16 && dnnl_probe() == 1;
    pthread_mutex_unlock(&lock);
    return d;
}

const char *zt_hgemm_onednn(void)
{
    pthread_mutex_lock(&lock);
    dnnl_probe();
    pthread_mutex_unlock(&lock);
    return impl;
}

const char *zt_hgemm_describe(int dt)
{
    static char buf[2][128];
    char *b = buf[dt == ZT_HALF_F16];
    if (zt_hgemm_default(dt))
        snprintf(b, 128, "oneDNN %s", impl);
    else
        snprintf(b, 128, "%s widened to fp32 sgemm", dt == ZT_HALF_F16 ? "fp16" : "bf16");
    return b;
}

int zt_hgemm(int dt, int ta, int tb, int M, int N, int K, float alpha, const uint16_t *A,
             int lda, const uint16_t *B, int ldb, float beta, float *C, int ldc)
{
    int rc;
    pthread_mutex_lock(&lock);
    if (dt == ZT_HALF_BF16 && dnnl_probe() == 1 && M > 0 && N > 0 && K > 0)
        rc = hgemm_dnnl(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    else
        rc = hgemm_f32(dt, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    pthread_mutex_unlock(&lock);
    return rc;
}

void zt_hgemm_release(void)
{
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n_cache; i++)
        prim_free(&cache[i]);
    n_cache = next_evict = 0;
    free(scratch);
    scratch = NULL;
    scratch_n = 0;
    pthread_mutex_unlock(&lock);
}

/* ---- fp32 products -------------------------------------------------------------------------- */

static pthread_once_t sgemm_once = PTHREAD_ONCE_INIT;
static int sgemm_fast; /* 1: oneDNN's sgemm (AVX-512 and oneDNN present), 0: OpenBLAS */

static void sgemm_choose(void)
{
    int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    sgemm_fast = avx512 && dnnl_open() == 0;
}

int zt_sgemm_default(void)
{
    pthread_once(&sgemm_once, sgemm_choose);
    return sgemm_fast;
}

const char *zt_sgemm_describe(void)
{
    return zt_sgemm_default() ? "oneDNN sgemm (AVX-512), fixed output blocks"
                              : "OpenBLAS sgemm";
}

/* The blocks of C one oneDNN call each computes, from the shape alone: rows (M >= N) or
 * columns cut into *nb pieces of *bs (a multiple of 16, the last one shorter); one piece
 * below ZT_SGEMM_SPLIT flops or when the cut dimension is under 128. */
static void sgemm_blocks(int M, int N, int K, int *bs, int *nb)
{
    int d = M >= N ? M : N;
    if (2.0 * M * N * K < ZT_SGEMM_SPLIT || d < 128) {
        *bs = d;
        *nb = 1;
        return;
    }
    int b = (d + ZT_SGEMM_BLOCKS - 1) / ZT_SGEMM_BLOCKS;
    b = b < 64 ? 64 : (b + 15) / 16 * 16;
    *bs = b;
    *nb = (d + b - 1) / b;
}

static void sgemm_block(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                        const float *B, int ldb, float beta, float *C, int ldc, int bs, int i)
{
    int lo = i * bs;
    if (M >= N) { /* rows lo.. of C: rows of op(A) */
        int m = M - lo < bs ? M - lo : bs;
        const float *a = ta ? A + lo : A + (size_t)lo * lda;
        dn.dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, N, K, alpha, a, lda, B, ldb, beta,
                      C + (size_t)lo * ldc, ldc);
    } else { /* columns lo..: columns of op(B) */
        int n = N - lo < bs ? N - lo : bs;
        const float *b = tb ? B + (size_t)lo * ldb : B + lo;
        dn.dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, n, K, alpha, A, lda, b, ldb, beta,
                      C + lo, ldc);
    }
}

/* oneDNN's sgemm, each block on one thread: inside a parallel region (the attention's pairs)
 * oneDNN runs sequentially; outside, the blocks are spread over the OpenMP threads and each
 * thread's oneDNN limited to itself. A block's bits depend on its shape only, so C does not
 * depend on the thread count. */
static void sgemm_dnnl(int ta, int tb, int M, int N, int K, float alpha, const float *A,
                       int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    int bs, nb;
    sgemm_blocks(M, N, K, &bs, &nb);
    if (omp_in_parallel()) {
        for (int i = 0; i < nb; i++)
            sgemm_block(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bs, i);
        return;
    }
    int nt = omp_get_max_threads();
#pragma omp parallel num_threads(nt < nb ? nt : nb)
    {
        omp_set_num_threads(1); /* this thread's oneDNN, for a team of one */
#pragma omp for schedule(static)
        for (int i = 0; i < nb; i++)
            sgemm_block(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bs, i);
    }
}

void zt_sgemm_path(int path, int ta, int tb, int M, int N, int K, float alpha, const float *A,
                   int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    if (path == 1 && M > 0 && N > 0 && K > 0 && dnnl_open() == 0)
        sgemm_dnnl(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    else
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                    M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void zt_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc)
{
    zt_sgemm_path(zt_sgemm_default(), ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
