/* hlayers.c - BERT's and T5's kernels over 16-bit activations (hlayers.h): rows or blocks widened to
 * fp32, the fp32 arithmetic of layers.c on them, the results rounded; products through
 * hgemm. With dt < 0 each calls its fp32 kernel. */
#include "hlayers.h"
#include "hgemm.h"
#include "vmath.h"
#include "../common/half.h"
#include "../common/prof.h"

#include <math.h>
#include <omp.h>
#include <string.h>

static int nthreads(int slots)
{
    int n = omp_get_max_threads();
    return slots > 0 && n > slots ? slots : n;
}

/* ---- linear ------------------------------------------------------------------------------ */

/* out[m, :] = round(prod[m, :] + b) for rows [0, rows) */
static void bias_round(int dt, uint16_t *out, const float *prod, const uint16_t *b, int rows,
                       int N)
{
#pragma omp parallel for schedule(static)
    for (int m = 0; m < rows; m++) {
        float row[512];
        for (int n0 = 0; n0 < N; n0 += 512) {
            int k = N - n0 < 512 ? N - n0 : 512;
            const float *p = prod + (size_t)m * N + n0;
            if (b) {
                zt_half_widen(dt, row, b + n0, (size_t)k);
                for (int j = 0; j < k; j++)
                    row[j] += p[j];
                p = row;
            }
            zt_half_narrow(dt, out + (size_t)m * N + n0, p, (size_t)k);
        }
    }
}

void xlinear_forward(int dt, void *out, const void *inp, const void *w, const void *b, int M,
                     int K, int N, float *scr, size_t scr_n)
{
    if (dt < 0) {
        linear_forward(out, inp, w, b, M, K, N);
        return;
    }
    int rb = (int)(scr_n / (size_t)N);
    rb = rb < 1 ? 1 : rb > M ? M : rb;
    for (int m0 = 0; m0 < M; m0 += rb) {
        int rows = M - m0 < rb ? M - m0 : rb;
        double t0 = ZT_PROF_T0();
        zt_hgemm(dt, 0, 1, rows, N, K, 1.0f, (const uint16_t *)inp + (size_t)m0 * K, K, w, K,
                 0.0f, scr, N);
        ZT_PROF(ZT_PROF_GEMM, t0, 2.0 * rows * N * K,
                2.0 * ((double)rows * K + (double)N * K) + 4.0 * rows * N);
        t0 = ZT_PROF_T0();
        bias_round(dt, (uint16_t *)out + (size_t)m0 * N, scr, b, rows, N);
        ZT_PROF(ZT_PROF_ELEMENTWISE, t0, (double)rows * N, 6.0 * rows * N);
    }
}

void xlinear_forward_f32(int dt, float *out, const void *inp, const void *w, const void *b,
                         int M, int K, int N)
{
    if (dt < 0) {
        linear_forward(out, inp, w, b, M, K, N);
        return;
    }
    double t0 = ZT_PROF_T0();
    zt_hgemm(dt, 0, 1, M, N, K, 1.0f, inp, K, w, K, 0.0f, out, N);
    ZT_PROF(ZT_PROF_GEMM, t0, 2.0 * M * N * K,
            2.0 * ((double)M * K + (double)N * K) + 4.0 * M * N);
    if (!b)
        return;
    t0 = ZT_PROF_T0();
#pragma omp parallel for schedule(static)
    for (int m = 0; m < M; m++) {
        float *o = out + (size_t)m * N;
        for (int n = 0; n < N; n++)
            o[n] += zt_half_value(dt, ((const uint16_t *)b)[n]);
    }
    ZT_PROF(ZT_PROF_ELEMENTWISE, t0, (double)M * N, 8.0 * M * N);
}

/* db[N] += the column sums of dh[M,N] (rows in order, columns split across threads, in
 * double: layers.c's colsum_acc over the widened values) */
static void colsum_h(int dt, float *db, const uint16_t *dh, int M, int N)
{
#pragma omp parallel for schedule(static)
    for (int n0 = 0; n0 < N; n0 += 64) {
        int n1 = n0 + 64 < N ? n0 + 64 : N;
        double acc[64] = {0};
        float row[64];
        for (int m = 0; m < M; m++) {
            zt_half_widen(dt, row, dh + (size_t)m * N + n0, (size_t)(n1 - n0));
            for (int n = n0; n < n1; n++)
                acc[n - n0] += row[n - n0];
        }
        for (int n = n0; n < n1; n++)
            db[n] += (float)acc[n - n0];
    }
}

void xlinear_backward_h(int dt, float *dinp, float *dw, float *db, const uint16_t *dout,
                        const void *inp, const void *w, int M, int K, int N)
{
    double t0 = ZT_PROF_T0();
    if (dinp)
        zt_hgemm(dt, 0, 0, M, K, N, 1.0f, dout, N, w, K, 1.0f, dinp, K);
    zt_hgemm(dt, 1, 0, N, K, M, 1.0f, dout, N, inp, K, 1.0f, dw, K);
    ZT_PROF(ZT_PROF_GEMM, t0, (dinp ? 4.0 : 2.0) * M * N * K,
            2.0 * ((double)M * N + (double)M * K) + 8.0 * N * K +
                (dinp ? 2.0 * ((double)M * N + (double)N * K) + 8.0 * M * K : 0.0));
    if (db) {
        t0 = ZT_PROF_T0();
        colsum_h(dt, db, dout, M, N);
        ZT_PROF(ZT_PROF_ELEMENTWISE, t0, (double)M * N, 2.0 * M * N);
    }
}

void xlinear_backward(int dt, float *dinp, float *dw, float *db, const float *dout,
                      const void *inp, const void *w, int M, int K, int N, uint16_t *hscr,
                      size_t hscr_n)
{
    if (dt < 0) {
        linear_backward(dinp, dw, db, dout, inp, w, M, K, N);
        return;
    }
    int rb = (int)(hscr_n / (size_t)N);
    rb = rb < 1 ? 1 : rb > M ? M : rb;
    for (int m0 = 0; m0 < M; m0 += rb) {
        int rows = M - m0 < rb ? M - m0 : rb;
        double t0 = ZT_PROF_T0();
#pragma omp parallel for schedule(static)
        for (int m = 0; m < rows; m++)
            zt_half_narrow(dt, hscr + (size_t)m * N, dout + (size_t)(m0 + m) * N, (size_t)N);
        ZT_PROF(ZT_PROF_ELEMENTWISE, t0, 0, 6.0 * rows * N);
        xlinear_backward_h(dt, dinp ? dinp + (size_t)m0 * K : NULL, dw, db, hscr,
                           (const uint16_t *)inp + (size_t)m0 * K, w, rows, K, N);
    }
}

/* ---- layernorm ------------------------------------------------------------------------- */

size_t xlayernorm_scratch(int dt, int C, int slots)
{
    return dt < 0 ? 0 : (size_t)(2 + 2 * (slots > 0 ? slots : 1)) * (size_t)C;
}

void xlayernorm_forward(int dt, void *out, float *mean, float *rstd, const void *inp,
                        const void *w, const void *b, int M, int C, float eps, float *scr,
                        int slots)
{
    if (dt < 0) {
        layernorm_forward(out, mean, rstd, inp, w, b, M, C, eps);
        return;
    }
    double t0 = ZT_PROF_T0();
    float *wf = scr, *bf = scr + C;
    zt_half_widen(dt, wf, w, (size_t)C);
    zt_half_widen(dt, bf, b, (size_t)C);
#pragma omp parallel num_threads(nthreads(slots))
    {
        float *x = scr + (size_t)(2 + 2 * omp_get_thread_num()) * C, *y = x + C;
#pragma omp for schedule(static)
        for (int m = 0; m < M; m++) {
            zt_half_widen(dt, x, (const uint16_t *)inp + (size_t)m * C, (size_t)C);
            float mu = (float)(vm_sum(x, NULL, (size_t)C) / C);
            double ss = vm_sqdev(x, mu, (size_t)C);
            float rs = (float)(1.0 / sqrt(ss / C + (double)eps));
            for (int c = 0; c < C; c++)
                y[c] = (x[c] - mu) * rs * wf[c] + bf[c];
            zt_half_narrow(dt, (uint16_t *)out + (size_t)m * C, y, (size_t)C);
            mean[m] = mu;
            rstd[m] = rs;
        }
    }
    ZT_PROF(ZT_PROF_LAYERNORM, t0, 8.0 * M * C, 2.0 * (2.0 * M * C) + 8.0 * M);
}

void xlayernorm_backward(int dt, float *dinp, float *dw, float *db, const float *dout,
                         const void *inp, const float *mean, const float *rstd, const void *w,
                         int M, int C, float *scr, int slots)
{
    if (dt < 0) {
        layernorm_backward(dinp, dw, db, dout, inp, mean, rstd, w, M, C);
        return;
    }
    double t0 = ZT_PROF_T0();
    const uint16_t *in = inp;
    float *wf = scr;
    zt_half_widen(dt, wf, w, (size_t)C);
#pragma omp parallel num_threads(nthreads(slots))
    {
        float *x = scr + (size_t)(2 + 2 * omp_get_thread_num()) * C;
#pragma omp for schedule(static)
        for (int m = 0; m < M; m++) {
            const float *dy = dout + (size_t)m * C;
            float *dx = dinp + (size_t)m * C;
            float mu = mean[m], rs = rstd[m];
            double sd, sdx;
            zt_half_widen(dt, x, in + (size_t)m * C, (size_t)C);
            vm_ln_grad_sums(dy, wf, x, mu, rs, (size_t)C, &sd, &sdx);
            float md = (float)(sd / C), mdx = (float)(sdx / C);
            for (int c = 0; c < C; c++) {
                float xh = (x[c] - mu) * rs, g = dy[c] * wf[c];
                dx[c] += rs * (g - md - xh * mdx);
            }
        }
    }
#pragma omp parallel for schedule(static)
    for (int c0 = 0; c0 < C; c0 += 64) {
        int c1 = c0 + 64 < C ? c0 + 64 : C;
        double aw[64] = {0}, ab[64] = {0};
        float x[64];
        for (int m = 0; m < M; m++) {
            const float *dy = dout + (size_t)m * C;
            zt_half_widen(dt, x, in + (size_t)m * C + c0, (size_t)(c1 - c0));
            for (int c = c0; c < c1; c++) {
                aw[c - c0] += (double)dy[c] * ((x[c - c0] - mean[m]) * rstd[m]);
                ab[c - c0] += dy[c];
            }
        }
        for (int c = c0; c < c1; c++) {
            dw[c] += (float)aw[c - c0];
            db[c] += (float)ab[c - c0];
        }
    }
    ZT_PROF(ZT_PROF_LAYERNORM, t0, 20.0 * M * C, 2.0 * 2.0 * M * C + 4.0 * 4.0 * M * C);
}

/* ---- elementwise ---------------------------------------------------------------------- */

enum { XCHUNK = 4096 }; /* layers.c's GELU chunk: a multiple of 8 */

void xtanh_forward(int dt, void *out, const void *inp, size_t n)
{
    if (dt < 0) {
        tanh_forward(out, inp, n);
        return;
    }
    for (size_t i = 0; i < n; i++)
        ((uint16_t *)out)[i] =
            zt_half_of(dt, tanhf(zt_half_value(dt, ((const uint16_t *)inp)[i])));
}

void xtanh_backward(int dt, float *dinp, const void *out, const float *dout, size_t n)
{
    if (dt < 0) {
        tanh_backward(dinp, out, dout, n);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        float o = zt_half_value(dt, ((const uint16_t *)out)[i]);
        dinp[i] += dout[i] * (1.0f - o * o);
    }
}

/* ---- embeddings ------------------------------------------------------------------------ */

void xembedding_forward(int dt, void *out, const int64_t *ids, const int64_t *tt,
                        const int64_t *pos_ids, const void *word, const void *type,
                        const void *pos, int B, int T, int C)
{
    if (dt < 0) {
        if (pos_ids)
            embedding_forward_pos(out, ids, tt, pos_ids, word, type, pos, B, C);
        else
            embedding_forward(out, ids, tt, word, type, pos, B, T, C);
        return;
    }
    double t0 = ZT_PROF_T0();
    const uint16_t *wd = word, *ty = type, *ps = pos;
#pragma omp parallel for schedule(static)
    for (int bt = 0; bt < B * T; bt++) {
        float a[512], y[512], p[512];
        size_t w0 = (size_t)ids[bt] * C, y0 = (size_t)(tt ? tt[bt] : 0) * C;
        size_t p0 = (pos_ids ? (size_t)pos_ids[bt] : (size_t)(bt % T)) * C;
        for (int c0 = 0; c0 < C; c0 += 512) {
            int k = C - c0 < 512 ? C - c0 : 512;
            zt_half_widen(dt, a, wd + w0 + c0, (size_t)k);
            if (ps)
                zt_half_widen(dt, p, ps + p0 + c0, (size_t)k);
            else /* no absolute positions */
                memset(p, 0, sizeof(float) * (size_t)k);
            if (ty && !ps) {
                zt_half_widen(dt, y, ty + y0 + c0, (size_t)k);
                for (int c = 0; c < k; c++)
                    a[c] = a[c] + y[c];
            } else if (ty) {
                zt_half_widen(dt, y, ty + y0 + c0, (size_t)k);
                for (int c = 0; c < k; c++)
                    a[c] = (a[c] + y[c]) + p[c];
            } else {
                for (int c = 0; c < k; c++)
                    a[c] = a[c] + p[c];
            }
            zt_half_narrow(dt, (uint16_t *)out + (size_t)bt * C + c0, a, (size_t)k);
        }
    }
    ZT_PROF(ZT_PROF_EMBEDDING, t0, 2.0 * B * T * C, 8.0 * B * T * C);
}

/* ---- cross-entropy --------------------------------------------------------------------- */

size_t xcrossentropy_scratch(int dt, int V, int slots)
{
    return dt < 0 ? 0 : 2 * (size_t)V * (size_t)(slots > 0 ? slots : 1);
}

double xcrossentropy_forward_backward(int dt, void *dlogits, double *row_loss, int64_t *count,
                                      const void *logits, const int64_t *labels, int M, int V,
                                      float grad_scale, float *scr, int slots)
{
    if (dt < 0)
        return crossentropy_forward_backward(dlogits, row_loss, count, logits, labels, M, V,
                                             grad_scale);
    /* each row widened, then crossentropy_forward_backward's arithmetic, the gradient
     * rounded into dlogits (which may be logits itself: the row is read first) */
    double total = 0.0, t0 = ZT_PROF_T0();
    int64_t n = 0;
    uint16_t *dl = dlogits;
#pragma omp parallel num_threads(nthreads(slots))
    {
        float *x = scr + (size_t)omp_get_thread_num() * 2 * (size_t)V, *d = x + V;
#pragma omp for schedule(static)
        for (int m = 0; m < M; m++) {
            int64_t y = labels[m];
            row_loss[m] = 0.0;
            if (y == -100) {
                if (dl)
                    memset(dl + (size_t)m * V, 0, sizeof *dl * (size_t)V);
                continue;
            }
            zt_half_widen(dt, x, (const uint16_t *)logits + (size_t)m * V, (size_t)V);
            float mx = -INFINITY;
            for (int j = 0; j < V; j++)
                mx = x[j] > mx ? x[j] : mx;
            float xy = x[y];
            double sum = vm_exp_sum(d, x, mx, (size_t)V);
            row_loss[m] = mx + log(sum) - xy;
            if (dl) {
                float f = (float)(grad_scale / sum);
                for (int j = 0; j < V; j++)
                    d[j] *= f;
                d[y] -= grad_scale;
                zt_half_narrow(dt, dl + (size_t)m * V, d, (size_t)V);
            }
        }
    }
    for (int m = 0; m < M; m++) { /* in order: the sum does not depend on threads */
        total += row_loss[m];
        n += labels[m] != -100;
    }
    *count = n;
    ZT_PROF(ZT_PROF_LOSS, t0, 6.0 * M * (double)V, (dlogits ? 4.0 : 2.0) * M * (double)V);
    return total;
}

void xgather_rows(int dt, void *dst, const void *src, const int32_t *idx, int n, int C)
{
    size_t row = (size_t)C * x_es(dt);
    for (int i = 0; i < n; i++)
        memcpy((char *)dst + (size_t)i * row, (const char *)src + (size_t)idx[i] * row, row);
}

/* ---- T5 --------------------------------------------------------------------------------- */

void xrmsnorm_forward(int dt, void *out, float *rstd, const void *inp, const void *w, int M,
                      int C, float eps, float *scr, int slots)
{
    if (dt < 0) {
        rmsnorm_forward(out, rstd, inp, w, M, C, eps);
        return;
    }
    double t0 = ZT_PROF_T0();
    float *wf = scr;
    zt_half_widen(dt, wf, w, (size_t)C);
#pragma omp parallel num_threads(nthreads(slots))
    {
        float *x = scr + (size_t)(2 + 2 * omp_get_thread_num()) * C, *y = x + C;
#pragma omp for schedule(static)
        for (int m = 0; m < M; m++) { /* rmsnorm_forward's arithmetic on the widened row */
            zt_half_widen(dt, x, (const uint16_t *)inp + (size_t)m * C, (size_t)C);
            float var = (float)(vm_sum(x, x, (size_t)C) / C);
            float rs = 1.0f / sqrtf(var + eps);
            for (int c = 0; c < C; c++)
                y[c] = wf[c] * (x[c] * rs);
            zt_half_narrow(dt, (uint16_t *)out + (size_t)m * C, y, (size_t)C);
            rstd[m] = rs;
        }
    }
    ZT_PROF(ZT_PROF_LAYERNORM, t0, 5.0 * M * C, 2.0 * (2.0 * M * C) + 4.0 * M);
}

void xrmsnorm_backward(int dt, float *dinp, float *dw, const float *dout, const void *inp,
                       const float *rstd, const void *w, int M, int C, float *scr, int slots)
{
    if (dt < 0) {
        rmsnorm_backward(dinp, dw, dout, inp, rstd, w, M, C);
        return;
    }
    double t0 = ZT_PROF_T0();
    const uint16_t *in = inp;
    float *wf = scr;
    zt_half_widen(dt, wf, w, (size_t)C);
#pragma omp parallel num_threads(nthreads(slots))
    {
        float *x = scr + (size_t)(2 + 2 * omp_get_thread_num()) * C;
#pragma omp for schedule(static)
        for (int m = 0; m < M; m++) { /* rmsnorm_backward's arithmetic */
            const float *dy = dout + (size_t)m * C;
            float *dx = dinp + (size_t)m * C;
            float rs = rstd[m];
            double s = 0.0;
            zt_half_widen(dt, x, in + (size_t)m * C, (size_t)C);
            for (int c = 0; c < C; c++)
                s += (double)(dy[c] * wf[c]) * (double)(x[c] * rs);
            float mg = (float)(s / C);
            for (int c = 0; c < C; c++)
                dx[c] += rs * (dy[c] * wf[c] - (x[c] * rs) * mg);
        }
    }
#pragma omp parallel for schedule(static)
    for (int c0 = 0; c0 < C; c0 += 64) {
        int c1 = c0 + 64 < C ? c0 + 64 : C;
        double aw[64] = {0};
        float x[64];
        for (int m = 0; m < M; m++) {
            const float *dy = dout + (size_t)m * C;
            zt_half_widen(dt, x, in + (size_t)m * C + c0, (size_t)(c1 - c0));
            for (int c = c0; c < c1; c++)
                aw[c - c0] += (double)dy[c] * (x[c - c0] * rstd[m]);
        }
        for (int c = c0; c < c1; c++)
            dw[c] += (float)aw[c - c0];
    }
    ZT_PROF(ZT_PROF_LAYERNORM, t0, 10.0 * M * C, 2.0 * 2.0 * M * C + 4.0 * 3.0 * M * C);
}

void xact_forward(int dt, int act, void *out, const void *inp, size_t n)
{
    if (dt < 0) {
        act_forward(act, out, inp, n);
        return;
    }
    double t0 = ZT_PROF_T0();
    long chunks = (long)((n + XCHUNK - 1) / XCHUNK);
#pragma omp parallel for schedule(static)
    for (long c = 0; c < chunks; c++) {
        float x[XCHUNK];
        size_t i = (size_t)c * XCHUNK, k = n - i < XCHUNK ? n - i : XCHUNK;
        zt_half_widen(dt, x, (const uint16_t *)inp + i, k);
        if (act == ZT_ACT_GELU)
            vm_gelu(x, x, k);
        else if (act == ZT_ACT_GELU_TANH)
            vm_gelu_tanh(x, x, k);
        else if (act == ZT_ACT_SILU)
            vm_silu(x, x, k);
        else
            for (size_t j = 0; j < k; j++)
                x[j] = x[j] > 0.0f ? x[j] : 0.0f;
        zt_half_narrow(dt, (uint16_t *)out + i, x, k);
    }
    ZT_PROF(ZT_PROF_GELU, t0, (act == ZT_ACT_RELU ? 1.0 : 20.0) * (double)n, 4.0 * (double)n);
}

void xact_backward(int dt, int act, float *dinp, const void *inp, const float *dout, size_t n)
{
    if (dt < 0) {
        act_backward(act, dinp, inp, dout, n);
        return;
    }
    double t0 = ZT_PROF_T0();
    long chunks = (long)((n + XCHUNK - 1) / XCHUNK);
#pragma omp parallel for schedule(static)
    for (long c = 0; c < chunks; c++) {
        float x[XCHUNK];
        size_t i = (size_t)c * XCHUNK, k = n - i < XCHUNK ? n - i : XCHUNK;
        zt_half_widen(dt, x, (const uint16_t *)inp + i, k);
        if (act == ZT_ACT_GELU)
            vm_gelu_grad_acc(dinp + i, x, dout + i, k);
        else if (act == ZT_ACT_GELU_TANH)
            vm_gelu_tanh_grad_acc(dinp + i, x, dout + i, k);
        else if (act == ZT_ACT_SILU)
            vm_silu_grad_acc(dinp + i, x, dout + i, k);
        else
            for (size_t j = 0; j < k; j++) {
                float d = dout[i + j];
                dinp[i + j] += x[j] > 0.0f ? d : 0.0f;
            }
    }
    ZT_PROF(ZT_PROF_GELU, t0, (act == ZT_ACT_RELU ? 1.0 : 25.0) * (double)n, 10.0 * (double)n);
}

void xmul_forward(int dt, void *out, const void *a, const void *b, size_t n)
{
    if (dt < 0) {
        mul_forward(out, a, b, n);
        return;
    }
    double t0 = ZT_PROF_T0();
    long chunks = (long)((n + XCHUNK - 1) / XCHUNK);
#pragma omp parallel for schedule(static)
    for (long c = 0; c < chunks; c++) {
        float x[XCHUNK], y[XCHUNK];
        size_t i = (size_t)c * XCHUNK, k = n - i < XCHUNK ? n - i : XCHUNK;
        zt_half_widen(dt, x, (const uint16_t *)a + i, k);
        zt_half_widen(dt, y, (const uint16_t *)b + i, k);
        for (size_t j = 0; j < k; j++)
            x[j] *= y[j];
        zt_half_narrow(dt, (uint16_t *)out + i, x, k);
    }
    ZT_PROF(ZT_PROF_ELEMENTWISE, t0, (double)n, 6.0 * (double)n);
}

void xmul_backward(int dt, float *da, float *db, const float *dout, const void *a,
                   const void *b, size_t n)
{
    if (dt < 0) {
        mul_backward(da, db, dout, a, b, n);
        return;
    }
    double t0 = ZT_PROF_T0();
    long chunks = (long)((n + XCHUNK - 1) / XCHUNK);
#pragma omp parallel for schedule(static)
    for (long c = 0; c < chunks; c++) {
        float x[XCHUNK], y[XCHUNK];
        size_t i = (size_t)c * XCHUNK, k = n - i < XCHUNK ? n - i : XCHUNK;
        zt_half_widen(dt, x, (const uint16_t *)a + i, k);
        zt_half_widen(dt, y, (const uint16_t *)b + i, k);
        for (size_t j = 0; j < k; j++) {
            if (da)
                da[i + j] += dout[i + j] * y[j];
            if (db)
                db[i + j] += dout[i + j] * x[j];
        }
    }
    ZT_PROF(ZT_PROF_ELEMENTWISE, t0, 2.0 * (double)n, 16.0 * (double)n);
}

void xlookup_forward(int dt, void *out, const int64_t *ids, const void *word, int M, int C)
{
    if (dt < 0) {
        lookup_forward(out, ids, word, M, C);
        return;
    }
    double t0 = ZT_PROF_T0();
    size_t row = (size_t)C * x_es(dt);
#pragma omp parallel for schedule(static)
    for (int m = 0; m < M; m++)
        memcpy((char *)out + (size_t)m * row, (const char *)word + (size_t)ids[m] * row, row);
    ZT_PROF(ZT_PROF_EMBEDDING, t0, 0, 4.0 * M * C);
}

void xscale(int dt, void *out, const void *inp, float s, size_t n)
{
    if (dt < 0) {
        if (out != inp)
            memcpy(out, inp, n * sizeof(float));
        scale_inplace(out, s, n);
        return;
    }
    double t0 = ZT_PROF_T0();
    long chunks = (long)((n + XCHUNK - 1) / XCHUNK);
#pragma omp parallel for schedule(static)
    for (long c = 0; c < chunks; c++) {
        float x[XCHUNK];
        size_t i = (size_t)c * XCHUNK, k = n - i < XCHUNK ? n - i : XCHUNK;
        zt_half_widen(dt, x, (const uint16_t *)inp + i, k);
        for (size_t j = 0; j < k; j++)
            x[j] *= s;
        zt_half_narrow(dt, (uint16_t *)out + i, x, k);
    }
    ZT_PROF(ZT_PROF_ELEMENTWISE, t0, (double)n, 4.0 * (double)n);
}

void xwiden_rows(int dt, float *dst, const void *src, const int64_t *idx, int n, int C)
{
    for (int i = 0; i < n; i++) {
        size_t r = idx ? (size_t)idx[i] : (size_t)i;
        if (dt < 0)
            memcpy(dst + (size_t)i * C, (const float *)src + r * C, sizeof(float) * (size_t)C);
        else
            zt_half_widen(dt, dst + (size_t)i * C, (const uint16_t *)src + r * C, (size_t)C);
    }
}

int xclamp_f16(int dt, void *x, size_t n)
{
    if (dt != ZT_HALF_F16)
        return 0;
    uint16_t *h = x;
    int inf = 0;
#pragma omp parallel for schedule(static) reduction(| : inf)
    for (size_t i = 0; i < n; i++)
        inf |= (h[i] & 0x7fffu) == 0x7c00u;
    if (!inf)
        return 0;
    uint16_t hi = zt_half_of(dt, 65504.0f - 1000.0f), lo = (uint16_t)(hi | 0x8000u);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        uint16_t a = h[i] & 0x7fffu;
        if (a > (hi & 0x7fffu) && a <= 0x7c00u) /* beyond the bound, or infinite (NaN stays) */
            h[i] = h[i] & 0x8000u ? lo : hi;
    }
    return 1;
}
