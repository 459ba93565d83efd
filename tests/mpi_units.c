/* mpi_units.c - the unit API across ranks (run under mpirun -np 2 by tests/test_units.sh):
 * ranks that acquire different units while the order is being recorded get an error naming
 * both, not a hang; ranks that declare different orders are refused the same way; stage 3's
 * traffic report (a replay of the recorded order) equals the gathers measured, for holds
 * that do not nest; ranks that register different shapes, or one rank that fails alone at
 * commit, are refused on every rank with a message naming the unit or that rank; with
 * "nonfinite DIR", a NaN in one rank's shard stops every rank's save; with "adafactor ...",
 * Adafactor over 3-D and 4-D tensors (adafactor_run); with "comm16", the 16-bit
 * reduce-scatter (comm16_run). Prints one line per check; the exit status is the verdict. */
#define ZT_EXPERIMENTAL
#include "zerotrain.h"
#include "../optimizer/adafactor.h"
#include "../engine/comm.h"
#include "../common/half.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static zt_engine *model(int stage)
{
    zt_config c;
    zt_engine *e = NULL;
    zt_config_init(&c);
    c.zero_stage = stage;
    c.persist_threshold = 0; /* gather every unit */
    c.collective_timeout = 20;
    if (zt_engine_create(&c, MPI_COMM_WORLD, &e) != 0)
        return NULL;
    for (int u = 0; u < 2; u++) {
        char n[16];
        int64_t sh[1] = {u ? 3000 : 5000};
        int id;
        snprintf(n, sizeof n, "u%d", u);
        zt_param_spec s = {n, 1, sh, ZT_INIT_NORMAL, 0.02f, NULL, 0, NULL};
        if (zt_engine_add_unit(e, n, 1, &id) != 0 || zt_engine_add_param(e, id, &s, NULL) != 0) {
            zt_engine_destroy(e);
            return NULL;
        }
    }
    return e;
}

static int expect(int rank, int rc, const char *msg, const char *needle, const char *what)
{
    int ok = rc < 0 && strstr(msg, needle);
    printf("%s: rank %d: %s: %s\n", ok ? "ok" : "FAIL", rank, what, msg);
    return ok ? 0 : 1;
}

/* one step of five units with overlapping holds: forward 0 (1) 2 3 0 4, backward 4, 3 with
 * 1, 2, 1, 0 */
static int odd_step(zt_engine *e)
{
    float *p, *g, *p1, *g1;
    int rc = 0;
#define T(x) (rc = rc < 0 ? rc : (x))
    T(zt_engine_unit_acquire(e, 0, ZT_FOR_FORWARD, &p, NULL));
    T(zt_engine_unit_acquire(e, 1, ZT_FOR_FORWARD, &p, NULL));
    T(zt_engine_unit_release(e, 1));
    T(zt_engine_unit_acquire(e, 2, ZT_FOR_FORWARD, &p, NULL));
    T(zt_engine_unit_release(e, 0));
    T(zt_engine_unit_release(e, 2));
    T(zt_engine_unit_acquire(e, 3, ZT_FOR_FORWARD, &p, NULL));
    T(zt_engine_unit_acquire(e, 0, ZT_FOR_FORWARD, &p, NULL));
    T(zt_engine_unit_release(e, 3));
    T(zt_engine_unit_release(e, 0));
    T(zt_engine_unit_acquire(e, 4, ZT_FOR_FORWARD, &p, NULL));
    T(zt_engine_unit_release(e, 4));
    int order[5] = {4, 3, 2, 1, 0};
    for (int k = 0; k < 5 && rc == 0; k++) {
        int u = order[k];
        if (u == 1) /* (made ready with unit 3) */
            continue;
        T(zt_engine_unit_acquire(e, u, ZT_FOR_BACKWARD, &p, &g));
        if (u == 3)
            T(zt_engine_unit_acquire(e, 1, ZT_FOR_BACKWARD, &p1, &g1));
        T(zt_engine_unit_grads_ready(e, u));
        T(zt_engine_unit_release(e, u));
        if (u == 3) {
            T(zt_engine_unit_release(e, 1));
            T(zt_engine_unit_acquire(e, 1, ZT_FOR_BACKWARD, &p1, &g1));
            T(zt_engine_unit_grads_ready(e, 1));
            T(zt_engine_unit_release(e, 1));
        }
    }
    T(zt_engine_step(e, 1e-3f, NULL));
    T(zt_engine_zero_grad(e));
#undef T
    return rc;
}

/* "nonfinite DIR" at stage 3: the last rank's shard of "a" holds a NaN (element 4500: its
 * initial values differ from the other ranks'), rank 0's shard of "b" an infinity: saving
 * the model and a checkpoint fails on every rank, each naming the first over all ranks ("a",
 * the lower parameter) and the rank, and nothing is written. */
static int nonfinite(int rank, int size, const char *dir)
{
    static float va[5000], vb[3000];
    char model_dir[1024], want[256];
    zt_config c;
    zt_engine *e = NULL;
    int bad = 0, rc = 0;
    for (int i = 0; i < 5000; i++)
        va[i] = 0.001f * (float)i;
    for (int i = 0; i < 3000; i++)
        vb[i] = -0.001f * (float)i;
    if (rank == size - 1)
        va[4500] = NAN;
    if (rank == 0)
        vb[10] = INFINITY;
    zt_config_init(&c);
    c.zero_stage = 3;
    c.persist_threshold = 0;
    c.collective_timeout = 20;
    rc = zt_engine_create(&c, MPI_COMM_WORLD, &e);
    for (int u = 0; rc == 0 && u < 2; u++) {
        int64_t sh[1] = {u ? 3000 : 5000};
        int id;
        zt_param_spec sp = {u ? "b" : "a", 1, sh, ZT_INIT_VALUES, 0, u ? vb : va, 0, NULL};
        rc = zt_engine_add_unit(e, u ? "ub" : "ua", 1, &id);
        rc = rc < 0 ? rc : zt_engine_add_param(e, id, &sp, NULL);
    }
    if (rc < 0 || (rc = zt_engine_commit(e)) < 0) {
        printf("FAIL: rank %d: %s\n", rank, e ? zt_engine_last_error(e) : zt_last_error());
        zt_engine_destroy(e);
        return 1;
    }
    snprintf(want, sizeof want, "parameter \"a\" element 4500 [4500] is NaN (its first "
             "non-finite value, in rank %d's shard): nothing was written", size - 1);
    snprintf(model_dir, sizeof model_dir, "%s/model", dir);
    zt_train_state st = {1, 0, 1};
    rc = zt_engine_save_model(e, model_dir);
    bad |= expect(rank, rc, zt_engine_last_error(e), want, "save_model, a NaN in one shard");
    rc = zt_checkpoint_save(e, dir, &st, NULL, 0);
    bad |= expect(rank, rc, zt_engine_last_error(e), want, "checkpoint_save, a NaN in one shard");
    MPI_Barrier(MPI_COMM_WORLD);
    FILE *f = fopen(dir, "r");
    printf("%s: rank %d: nothing written in %s\n", f ? "FAIL" : "ok", rank, dir);
    bad |= f != NULL;
    if (f)
        fclose(f);
    zt_engine_destroy(e);
    return bad;
}

/* "adafactor STAGE STEPS OUT [save ROOT AT | load DIR]": Adafactor (Hugging Face's defaults
 * with beta1 0.9 and weight decay) over tensors of 3, 4, 2 and 1 dimensions ([4, 24, 20],
 * [2, 3, 8, 12], [48, 40], [20]) in two units at ZeRO stage STAGE. Rank 0 adds the whole
 * gradient, the others zeros, so the reduced gradient has the same bits at every N. After
 * step STEPS rank 0 writes every parameter to OUT (raw floats in order; the stages must give
 * the same bytes) and compares them with the kernels on whole tensors from the start
 * (test_adafactor.c holds those to transformers): within 1e-6 of each tensor's largest |p|
 * (the sums over shards are added in another order). save: a checkpoint after step AT (and
 * the steps go on); load: resumes from DIR first, then steps up to STEPS. */
#define AF_T 4
static const int af_nd[AF_T] = {3, 4, 2, 1};
static const int64_t af_dims[AF_T][4] = {{4, 24, 20}, {2, 3, 8, 12}, {48, 40}, {20}};

static size_t af_numel(int t)
{
    size_t n = 1;
    for (int k = 0; k < af_nd[t]; k++)
        n *= (size_t)af_dims[t][k];
    return n;
}

static float af_p0(int t, size_t k) { return 0.05f * sinf(0.7f * (float)k + (float)t); }

static float af_grad(int t, int step, size_t k)
{
    if (t == 0 && k % 97 < 3)
        return 0.0f; /* zero gradients: the eps1 floor */
    return 0.01f * cosf(0.37f * (float)k + 1.3f * (float)step + 0.5f * (float)t);
}

/* the kernels on whole tensors: p[t] after `steps` steps from the start */
static void af_reference(int steps, float beta1, float wd, float **p)
{
    for (int t = 0; t < AF_T; t++) {
        size_t n = af_numel(t);
        zt_adafactor_shape sh = {n, 0, 1};
        if (af_nd[t] >= 2) {
            sh = (zt_adafactor_shape){(size_t)af_dims[t][af_nd[t] - 2],
                                      (size_t)af_dims[t][af_nd[t] - 1], 1};
            for (int k = 0; k < af_nd[t] - 2; k++)
                sh.batch *= (size_t)af_dims[t][k];
        }
        size_t nr = sh.cols ? sh.batch * sh.rows : 1, ncl = sh.cols ? sh.batch * sh.cols : 1;
        float *g = malloc(n * 4), *v = calloc(n, 4), *m = calloc(n, 4), *u = malloc(n * 4);
        float *row = calloc(nr, 4), *col = calloc(ncl, 4);
        double *rs = malloc(nr * 8), *cs = malloc(ncl * 8);
        for (size_t k = 0; k < n; k++)
            p[t][k] = af_p0(t, k);
        for (int s = 1; s <= steps; s++) {
            zt_adafactor_hparams hp;
            zt_adafactor_defaults(&hp);
            hp.beta1 = beta1;
            hp.weight_decay = wd;
            hp.step = s;
            for (size_t k = 0; k < n; k++)
                g[k] = af_grad(t, s, k);
            memset(rs, 0, nr * 8);
            memset(cs, 0, ncl * 8);
            zt_adafactor_sums sm = {rs, cs, 0.0};
            zt_adafactor_sums_add(&sh, 0, n, p[t], g, 1.0f, hp.eps1, &sm);
            float lr = zt_adafactor_stats(&sh, &hp, &sm, row, col);
            double usq = zt_adafactor_precondition(&sh, &hp, 0, n, g, 1.0f, row, col, v, u, NULL);
            zt_adafactor_apply(&hp, n, usq, lr, n, u, m, p[t], 1);
        }
        free(g); free(v); free(m); free(u); free(row); free(col); free(rs); free(cs);
    }
}

static int adafactor_run(int rank, int argc, char **argv)
{
    int stage = atoi(argv[2]), steps = atoi(argv[3]), save_at = -1, rc = 0, bad = 0;
    const char *out = argv[4], *save = NULL, *load = NULL;
    const float beta1 = 0.9f, wd = 0.01f;
    if (argc == 8 && strcmp(argv[5], "save") == 0)
        save = argv[6], save_at = atoi(argv[7]);
    else if (argc == 7 && strcmp(argv[5], "load") == 0)
        load = argv[6];
    zt_config c;
    zt_engine *e = NULL;
    int idx[AF_T];
    static char names[AF_T][8];
    zt_config_init(&c);
    c.zero_stage = stage;
    c.persist_threshold = 0;
    c.collective_timeout = 60;
    c.optimizer = ZT_OPT_ADAFACTOR;
    c.lr = 0.0f; /* relative steps */
    c.adafactor_beta1 = beta1;
    c.weight_decay = wd;
    c.decay_all = 1;
    c.bucket_size = 700; /* several pieces per unit */
    rc = zt_engine_create(&c, MPI_COMM_WORLD, &e);
    for (int u = 0; rc == 0 && u < 2; u++) {
        int id;
        rc = zt_engine_add_unit(e, u ? "u1" : "u0", 2, &id);
        for (int t = 2 * u; rc == 0 && t < 2 * u + 2; t++) {
            size_t n = af_numel(t);
            float *v0 = malloc(n * 4);
            for (size_t k = 0; k < n; k++)
                v0[k] = af_p0(t, k);
            snprintf(names[t], sizeof names[t], "t%d", t);
            zt_param_spec sp = {names[t], af_nd[t], af_dims[t], ZT_INIT_VALUES, 0, v0, 0, NULL};
            rc = zt_engine_add_param(e, id, &sp, &idx[t]);
            free(v0);
        }
    }
    if (rc == 0)
        rc = zt_engine_commit(e);
    zt_train_state st = {0, 0, 1};
    if (rc == 0 && load)
        rc = zt_checkpoint_load(e, load, &st);
    for (int s = (int)st.step + 1; rc == 0 && s <= steps; s++) {
        float *p, *g;
        for (int u = 0; rc == 0 && u < 2; u++)
            if ((rc = zt_engine_unit_acquire(e, u, ZT_FOR_FORWARD, &p, NULL)) == 0)
                rc = zt_engine_unit_release(e, u);
        for (int u = 1; rc == 0 && u >= 0; u--) {
            if ((rc = zt_engine_unit_acquire(e, u, ZT_FOR_BACKWARD, &p, &g)) < 0)
                break;
            for (int t = 2 * u; rank == 0 && t < 2 * u + 2; t++) {
                zt_param_info pi;
                zt_engine_param_get(e, idx[t], &pi);
                for (size_t k = 0; k < pi.numel; k++)
                    g[pi.offset + k] += af_grad(t, s, k);
            }
            if ((rc = zt_engine_unit_grads_ready(e, u)) == 0)
                rc = zt_engine_unit_release(e, u);
        }
        if (rc == 0)
            rc = zt_engine_step(e, 0.0f, NULL);
        if (rc == 0)
            rc = zt_engine_zero_grad(e);
        st.step = s;
        if (rc == 0 && s == save_at)
            rc = zt_checkpoint_save(e, save, &st, NULL, 0);
    }
    float *mine[AF_T] = {0}, *ref[AF_T] = {0};
    for (int t = 0; t < AF_T; t++) {
        mine[t] = calloc(af_numel(t), 4);
        ref[t] = calloc(af_numel(t), 4);
    }
    for (int u = 0; rc == 0 && u < 2; u++) {
        float *p;
        if ((rc = zt_engine_unit_acquire(e, u, ZT_FOR_FORWARD | ZT_FOR_EVAL, &p, NULL)) < 0)
            break;
        for (int t = 2 * u; t < 2 * u + 2; t++) {
            zt_param_info pi;
            zt_engine_param_get(e, idx[t], &pi);
            memcpy(mine[t], p + pi.offset, pi.numel * 4);
        }
        rc = zt_engine_unit_release(e, u);
    }
    if (rc < 0) {
        printf("FAIL: rank %d: adafactor stage %d: %s\n", rank, stage,
               e ? zt_engine_last_error(e) : zt_last_error());
        bad = 1;
    } else if (rank == 0) {
        FILE *f = fopen(out, "wb");
        double worst = 0.0;
        af_reference(steps, beta1, wd, ref);
        for (int t = 0; t < AF_T; t++) {
            size_t n = af_numel(t);
            float dmax = 0.0f, pmax = 0.0f, moved = 0.0f;
            for (size_t k = 0; k < n; k++) {
                float d = fabsf(mine[t][k] - ref[t][k]);
                dmax = d > dmax ? d : dmax;
                pmax = fabsf(ref[t][k]) > pmax ? fabsf(ref[t][k]) : pmax;
                moved = fmaxf(moved, fabsf(mine[t][k] - af_p0(t, k)));
            }
            bad |= !(dmax <= 1e-6f * pmax) || !(moved > 1e-4f); /* (steps of ~5e-4) */
            worst = dmax / pmax > worst ? dmax / pmax : worst;
            if (f)
                bad |= fwrite(mine[t], 4, n, f) != n;
        }
        bad |= !f || fclose(f) != 0;
        printf("%s: rank 0: adafactor stage %d: %d steps: max |p - kernels| / max |p| = %.3g\n",
               bad ? "FAIL" : "ok", stage, steps, worst);
    }
    for (int t = 0; t < AF_T; t++) {
        free(mine[t]);
        free(ref[t]);
    }
    zt_engine_destroy(e);
    return bad;
}

/* zt_comm_start_reduce_scatter16 in bf16 and fp16: small integers (every partial sum exact,
 * any order) sum exactly; 1 + 2^-9 rounds to 1 in bf16 (8 bits) and stays in fp16 (11 bits);
 * 40000 + 40000 overflows fp16 to infinity; the input buffer is the same bits after the wait,
 * and half fp32's bytes moved. */
static int comm16_run(int rank, int size)
{
    zt_comm c;
    int bad = 0;
    const size_t s = 1000, n = s * (size_t)size;
    float *full = malloc(n * sizeof *full), *keep = malloc(n * sizeof *keep);
    float *shard = malloc(s * sizeof *shard);
    if (!full || !keep || !shard || zt_comm_open(&c, MPI_COMM_WORLD) < 0) {
        printf("FAIL: rank %d: comm16 setup: %s\n", rank, zt_last_error());
        return 1;
    }
    for (int dt = ZT_HALF_BF16; dt <= ZT_HALF_F16; dt++) {
        int64_t h;
        uint64_t b0 = c.bytes[ZT_COLL_REDUCE_SCATTER];
        for (size_t i = 0; i < n; i++)
            full[i] = (float)((int)(i % 16) - 8) * (float)(rank + 1);
        size_t last = n - s; /* rank size-1's slice: elements 0-1 hold the rounding cases */
        full[last] = rank == 0 ? 1.0f : rank == 1 ? 0x1p-9f : 0.0f;
        full[last + 1] = rank < 2 ? 40000.0f : 0.0f;
        if (dt == ZT_HALF_BF16)
            full[last + 1] = rank < 2 ? 32768.0f : 0.0f; /* (bf16: exact) */
        memcpy(keep, full, n * sizeof *full);
        int rc = zt_comm_start_reduce_scatter16(&c, dt, full, shard, n, &h);
        rc = rc < 0 ? rc : zt_comm_wait(&c, h);
        int ok = rc == 0 && memcmp(keep, full, n * sizeof *full) == 0 &&
                 c.bytes[ZT_COLL_REDUCE_SCATTER] - b0 == n * 2;
        const int tri = size * (size + 1) / 2; /* sum over ranks of (rank + 1) */
        for (size_t i = 0; ok && i < s; i++) {
            size_t g = (size_t)rank * s + i;
            float want = (float)((int)(g % 16) - 8) * (float)tri;
            if (g == last)
                want = dt == ZT_HALF_BF16 ? 1.0f : 1.0f + 0x1p-9f;
            else if (g == last + 1)
                want = dt == ZT_HALF_BF16 ? 65536.0f : INFINITY;
            ok = shard[i] == want;
            if (!ok)
                printf("  rank %d: %s element %zu: %g, want %g\n", rank,
                       dt == ZT_HALF_F16 ? "fp16" : "bf16", g, shard[i], want);
        }
        printf("%s: rank %d: %s reduce-scatter over %d ranks: sums, rounding, overflow, the "
               "input restored, %llu bytes\n", ok ? "ok" : "FAIL", rank,
               dt == ZT_HALF_F16 ? "fp16" : "bf16", size,
               (unsigned long long)(c.bytes[ZT_COLL_REDUCE_SCATTER] - b0));
        bad |= !ok;
    }
    zt_comm_close(&c);
    free(full);
    free(keep);
    free(shard);
    return bad;
}

/* A unit used several times in one pass (ALBERT's one layer serving every depth), through the
 * unit API: units "embed", "shared", "head" of RU_F floats each (a multiple of N x 1024, so
 * the units are not padded); the forward pass acquires embed, shared K times, head; the
 * backward pass head, shared K times (variant 2: each use recomputed first, as a recomputed
 * layer is), embed, and each backward use of shared adds its own gradient into the buffer
 * it lends, made ready after the last. Variant 1 acquires shared once per pass and adds the
 * same K gradients, in the same order, in that one use: the same fp32 sums, so the same
 * bits -- the gradient was neither cleared nor reduced between uses. Writes the parameters
 * after `steps` AdamW steps; stage 3 (no prefetch, nothing persistent) checks the all-gather
 * bytes of a step against the formula with shared gathered once per pass, 2 embed + 2 shared
 * + head (the head's last forward use runs into its backward use), and the reduce-scatter
 * bytes against one reduction per unit: embed + shared + head. */
enum { RU_F = 6144 };
static float ru_grad(int u, int use, int step, size_t k)
{
    return 0.01f * sinf(0.37f * (float)k + 1.3f * (float)u + 0.61f * (float)use + (float)step);
}

static int ru_use(zt_engine *e, int u, int purpose, int uses, int step, int rank)
{
    float *p, *g;
    int rc = zt_engine_unit_acquire(e, u, purpose, &p, purpose == ZT_FOR_BACKWARD ? &g : NULL);
    for (int k = 0; rc == 0 && purpose == ZT_FOR_BACKWARD && rank == 0 && k < uses; k++)
        for (size_t i = 0; i < RU_F; i++) /* rank 0's gradient alone: the sum is that */
            g[i] += ru_grad(u, k, step, i);
    return rc < 0 ? rc : zt_engine_unit_release(e, u);
}

static int reuse_run(int rank, int size, char **argv)
{
    int stage = atoi(argv[2]), K = atoi(argv[3]), variant = atoi(argv[4]), steps = 3, rc, bad = 0;
    const char *out = argv[5];
    zt_config c;
    zt_engine *e = NULL;
    zt_engine_report r0 = {0}, r1 = {0};
    zt_config_init(&c);
    c.zero_stage = stage;
    c.persist_threshold = 0;
    c.prefetch_size = 0;
    c.collective_timeout = 60;
    c.lr = 1e-2f;
    rc = zt_engine_create(&c, MPI_COMM_WORLD, &e);
    const char *names[3] = {"embed", "shared", "head"};
    for (int u = 0; rc == 0 && u < 3; u++) {
        int64_t sh[1] = {RU_F};
        int id;
        char pn[32];
        snprintf(pn, sizeof pn, "%s.weight", names[u]);
        zt_param_spec sp = {pn, 1, sh, ZT_INIT_NORMAL, 0.02f, NULL, 0, NULL};
        if ((rc = zt_engine_add_unit(e, names[u], 1, &id)) == 0)
            rc = zt_engine_add_param(e, id, &sp, NULL);
    }
    for (int s = 1; rc == 0 && s <= steps; s++) {
        if (s == steps)
            rc = zt_engine_report_get(e, &r0);
        rc = rc < 0 ? rc : ru_use(e, 0, ZT_FOR_FORWARD, 0, s, rank);
        for (int k = 0; rc == 0 && k < (variant == 1 ? 1 : K); k++)
            rc = ru_use(e, 1, ZT_FOR_FORWARD, 0, s, rank);
        rc = rc < 0 ? rc : ru_use(e, 2, ZT_FOR_FORWARD, 0, s, rank);
        rc = rc < 0 ? rc : ru_use(e, 2, ZT_FOR_BACKWARD, 1, s, rank);
        if (rc == 0)
            rc = zt_engine_unit_grads_ready(e, 2);
        for (int k = 0; rc == 0 && k < (variant == 1 ? 1 : K); k++) {
            float *p, *g;
            if (variant == 2)
                rc = ru_use(e, 1, ZT_FOR_RECOMPUTE, 0, s, rank);
            rc = rc < 0 ? rc : zt_engine_unit_acquire(e, 1, ZT_FOR_BACKWARD, &p, &g);
            /* the uses in reverse, layer K - 1 first (variant 1: all of them here) */
            int first = variant == 1 ? K - 1 : K - 1 - k, last = variant == 1 ? 0 : K - 1 - k;
            for (int j = first; rc == 0 && rank == 0 && j >= last; j--)
                for (size_t i = 0; i < RU_F; i++)
                    g[i] += ru_grad(1, j, s, i);
            rc = rc < 0 ? rc : zt_engine_unit_release(e, 1);
        }
        if (rc == 0)
            rc = zt_engine_unit_grads_ready(e, 1);
        rc = rc < 0 ? rc : ru_use(e, 0, ZT_FOR_BACKWARD, 1, s, rank);
        if (rc == 0)
            rc = zt_engine_unit_grads_ready(e, 0);
        if (rc == 0)
            rc = zt_engine_step(e, 0.0f, NULL);
        if (rc == 0)
            rc = zt_engine_zero_grad(e);
        if (rc == 0 && s == steps)
            rc = zt_engine_report_get(e, &r1);
    }
    float *w = calloc(3 * RU_F + 2, sizeof *w); /* (an evaluation pass: the forward order) */
    for (int k = 0; rc == 0 && k < (variant == 1 ? 3 : K + 2); k++) {
        float *p;
        int u = k == 0 ? 0 : k == (variant == 1 ? 2 : K + 1) ? 2 : 1;
        if ((rc = zt_engine_unit_acquire(e, u, ZT_FOR_FORWARD | ZT_FOR_EVAL, &p, NULL)) == 0) {
            memcpy(w + (size_t)u * RU_F, p, RU_F * sizeof *w);
            rc = zt_engine_unit_release(e, u);
        }
    }
    if (rc < 0) {
        printf("FAIL: rank %d: reuse stage %d K %d variant %d: %s\n", rank, stage, K, variant,
               e ? zt_engine_last_error(e) : zt_last_error());
        bad = 1;
    } else {
        /* a step's bytes: one reduction per unit (whatever K), the all-gathers measured
         * against the report's replay of the schedule; both go into the file, which the
         * caller compares with variant 1's (one use per pass: the same traffic) */
        double rs = (double)(r1.coll_bytes[0] - r0.coll_bytes[0]);
        double ag = (double)(r1.coll_bytes[1] - r0.coll_bytes[1]);
        int same = size < 2 ? rs == 0.0 && ag == 0.0
                            : rs == 3.0 * 4 * RU_F && fabs((rs + ag) / rs - r1.traffic_schedule) < 1e-9;
        printf("%s: rank %d: reuse stage %d K %d variant %d: all-gather %.0f bytes (%.2f units), "
               "reduce-scatter %.0f (%.2f units), the report's schedule %.4f x\n",
               same ? "ok" : "FAIL", rank, stage, K, variant, ag, ag / (4.0 * RU_F), rs,
               rs / (4.0 * RU_F), r1.traffic_schedule);
        bad |= !same;
        w[3 * RU_F] = (float)(ag / (4.0 * RU_F));
        w[3 * RU_F + 1] = (float)(rs / (4.0 * RU_F));
        if (rank == 0) {
            FILE *f = fopen(out, "wb");
            bad |= !f || fwrite(w, sizeof *w, 3 * RU_F + 2, f) != 3 * RU_F + 2 || fclose(f) != 0;
        }
    }
    free(w);
    zt_engine_destroy(e);
    return bad;
}

int main(int argc, char **argv)
{
    int rank, size, bad = 0;
    float *p;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc == 3 && strcmp(argv[1], "nonfinite") == 0) {
        bad = nonfinite(rank, size, argv[2]);
        MPI_Finalize();
        return bad;
    }
    if (argc == 2 && strcmp(argv[1], "comm16") == 0) {
        bad = comm16_run(rank, size);
        MPI_Finalize();
        return bad;
    }
    if (argc == 6 && strcmp(argv[1], "reuse") == 0) {
        bad = reuse_run(rank, size, argv);
        MPI_Finalize();
        return bad;
    }
    if ((argc == 5 || argc == 7 || argc == 8) && strcmp(argv[1], "adafactor") == 0) {
        bad = adafactor_run(rank, argc, argv);
        MPI_Finalize();
        return bad;
    }
    for (int stage = 0; stage <= 3; stage += 3) {
        zt_engine *e = model(stage);
        if (!e) {
            printf("FAIL: rank %d: %s\n", rank, zt_last_error());
            bad = 1;
            break;
        }
        int rc = zt_engine_unit_acquire(e, rank == 0 ? 0 : 1, ZT_FOR_FORWARD, &p, NULL);
        bad |= expect(rank, rc, zt_engine_last_error(e), "the ranks acquire different units",
                      stage ? "stage 3, mismatched acquires" : "stage 0, mismatched acquires");
        zt_engine_destroy(e);
    }
    for (int pf = 0; pf <= 1; pf++) {
        zt_config c;
        zt_engine *t = NULL;
        zt_engine_report r0, r1;
        zt_config_init(&c);
        c.zero_stage = 3;
        c.persist_threshold = 0;
        c.prefetch_size = pf ? 100000 : 0;
        int rc = zt_engine_create(&c, MPI_COMM_WORLD, &t);
        for (int u = 0; rc == 0 && u < 5; u++) {
            char n[16];
            int64_t sh[1] = {300 + 1000 * u};
            int id;
            snprintf(n, sizeof n, "t%d", u);
            zt_param_spec sp = {n, 1, sh, ZT_INIT_ONES, 0, NULL, 0, NULL};
            rc = zt_engine_add_unit(t, n, 1, &id);
            rc = rc < 0 ? rc : zt_engine_add_param(t, id, &sp, NULL);
        }
        if (rc < 0 || (rc = odd_step(t)) < 0 || (rc = zt_engine_report_get(t, &r0)) < 0 ||
            (rc = odd_step(t)) < 0 || (rc = zt_engine_report_get(t, &r1)) < 0) {
            printf("FAIL: rank %d: the overlapping holds: %s\n", rank, zt_engine_last_error(t));
            bad = 1;
        } else {
            double rs = (double)(r1.coll_bytes[0] - r0.coll_bytes[0]);
            double ag = (double)(r1.coll_bytes[1] - r0.coll_bytes[1]);
            int same = fabs((rs + ag) / rs - r1.traffic_schedule) < 1e-9;
            printf("%s: rank %d: prefetch %d: traffic report %.4f, measured %.4f\n",
                   same ? "ok" : "FAIL", rank, pf ? 100000 : 0, r1.traffic_schedule,
                   (rs + ag) / rs);
            bad |= !same;
        }
        zt_engine_destroy(t);
    }
    /* the last rank registers another shape; then it fails alone at commit: every rank is
     * refused, naming the unit or the failing rank and its message, none waits */
    for (int k = 0; k < 2; k++) {
        int last;
        zt_config c;
        zt_engine *t = NULL;
        last = rank == size - 1;
        zt_config_init(&c);
        c.zero_stage = 3;
        c.collective_timeout = 20;
        int rc = zt_engine_create(&c, MPI_COMM_WORLD, &t), id;
        int64_t sh[1] = {k == 0 && last ? 1001 : 1000};
        zt_param_spec sp = {"w", 1, sh, ZT_INIT_ONES, 0, NULL, 0, NULL};
        if (rc == 0 && !(k == 1 && last)) /* (k = 1: the last rank registers no unit) */
            rc = zt_engine_add_unit(t, "w", 1, &id) < 0 ? -1 : zt_engine_add_param(t, id, &sp, NULL);
        if (rc == 0)
            rc = zt_engine_commit(t);
        char want[96];
        if (k == 0)
            snprintf(want, sizeof want, "the ranks disagree on unit 0: rank 0 has \"w, 1000 floats\", "
                     "rank %d has \"w, 1001 floats\"", size - 1);
        else if (last)
            snprintf(want, sizeof want, "no units registered");
        else
            snprintf(want, sizeof want, "rank %d: zt_engine_commit: no units registered", size - 1);
        bad |= expect(rank, rc, t ? zt_engine_last_error(t) : zt_last_error(), want,
                      k ? "one rank fails at commit" : "different shapes");
        zt_engine_destroy(t);
    }
    zt_engine *e = model(3);
    int units[2] = {0, 1}, purp[2] = {ZT_FOR_FORWARD, ZT_FOR_FORWARD};
    if (rank == 1)
        units[0] = 1, units[1] = 0;
    int rc = e ? zt_engine_set_order(e, ZT_FOR_FORWARD, units, purp, NULL, 2) : -1;
    bad |= expect(rank, rc, e ? zt_engine_last_error(e) : zt_last_error(),
                  "declared a different forward order", "mismatched declared orders");
    zt_engine_destroy(e);
    MPI_Finalize();
    return bad;
}
