/* charmlp.c - a trainer of its own on zerotrain's unit API: a character-level MLP language
 * model (Bengio et al. 2003: the embeddings of the previous K characters, concatenated, two
 * tanh layers, a softmax over the next character), with its forward and backward written
 * here on OpenBLAS. zerotrain owns the rest: ZeRO sharding of parameters, gradients and
 * AdamW state across the MPI ranks, stage 3 gathers and prefetch, optimizer offload,
 * gradient reduction and checkpoints. Not a tutorial in language modelling: the smallest
 * real model that exercises the API.
 *
 *   mpirun -np 2 charmlp --text README.md --stage 3 --offload cpu --steps 200
 *
 * Each step trains on a global batch of --batch windows of the text (every rank takes its
 * slice; window i of step s is a function of (seed, s, i) only), so any world size and any
 * stage trains the same model: stages 0-3 at one world size give the same bits. */
#include <zerotrain.h>

#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { K = 8, D = 16, H = 128, V = 97 }; /* context, embedding, hidden, vocabulary */
enum { U_EMBED = 0, U_HIDDEN1, U_HIDDEN2, U_HEAD, N_UNITS };

/* the parameters' indices (zt_engine_param_get) and their offsets within their units */
enum { P_E, P_W1, P_B1, P_W2, P_B2, P_WO, P_BO, N_PARAMS };
static size_t off[N_PARAMS];

typedef struct opts {
    const char *text, *save, *ckpt, *nvme;
    int stage, steps, batch, optimizer, print_every, resume;
    zt_offload_device offload;
    float lr;
} opts;

/* the character's id: printable ASCII 32..126 -> 1..95, newline 96, anything else 0 */
static int char_id(unsigned char c)
{
    return c == '\n' ? 96 : c >= 32 && c < 127 ? c - 31 : 0;
}

/* splitmix64: the window of sample i in step s */
static uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static int usage(void)
{
    fprintf(stderr, "usage: charmlp [--text FILE] [--stage 0-3] [--offload none|cpu|nvme] "
                    "[--nvme-path DIR] [--optimizer adamw|adamw8bit] [--steps N] [--batch B] "
                    "[--lr X] [--save DIR] [--checkpoint-dir DIR [--resume]]\n");
    return 2;
}

static int parse(int argc, char **argv, opts *o)
{
    *o = (opts){"README.md", NULL, NULL, NULL, 0, 200, 48, ZT_OPT_ADAMW, 20, 0,
                ZT_OFFLOAD_NONE, 3e-3f};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--resume")) {
            o->resume = 1;
            continue;
        }
        if (!v)
            return usage();
        i++;
        if (!strcmp(a, "--text"))
            o->text = v;
        else if (!strcmp(a, "--stage"))
            o->stage = atoi(v);
        else if (!strcmp(a, "--steps"))
            o->steps = atoi(v);
        else if (!strcmp(a, "--batch"))
            o->batch = atoi(v);
        else if (!strcmp(a, "--lr"))
            o->lr = (float)atof(v);
        else if (!strcmp(a, "--save"))
            o->save = v;
        else if (!strcmp(a, "--checkpoint-dir"))
            o->ckpt = v;
        else if (!strcmp(a, "--nvme-path"))
            o->nvme = v;
        else if (!strcmp(a, "--print-every"))
            o->print_every = atoi(v);
        else if (!strcmp(a, "--optimizer") && (!strcmp(v, "adamw") || !strcmp(v, "adamw8bit")))
            o->optimizer = !strcmp(v, "adamw") ? ZT_OPT_ADAMW : ZT_OPT_ADAMW8BIT;
        else if (!strcmp(a, "--offload") && !strcmp(v, "none"))
            o->offload = ZT_OFFLOAD_NONE;
        else if (!strcmp(a, "--offload") && !strcmp(v, "cpu"))
            o->offload = ZT_OFFLOAD_CPU;
        else if (!strcmp(a, "--offload") && !strcmp(v, "nvme"))
            o->offload = ZT_OFFLOAD_NVME;
        else
            return usage();
    }
    return o->steps >= 0 && o->batch >= 1 ? 0 : usage();
}

/* the model's units and parameters, in the order the forward pass uses them */
static int add_model(zt_engine *e)
{
    static const struct {
        int unit;
        const char *name;
        int ndim;
        int64_t shape[2];
        int init;
        float std;
    } p[N_PARAMS] = {
        {U_EMBED, "embed.weight", 2, {V, D}, ZT_INIT_NORMAL, 1.0f},
        {U_HIDDEN1, "hidden1.weight", 2, {H, K * D}, ZT_INIT_NORMAL, 0.08f},
        {U_HIDDEN1, "hidden1.bias", 1, {H, 1}, ZT_INIT_ZEROS, 0},
        {U_HIDDEN2, "hidden2.weight", 2, {H, H}, ZT_INIT_NORMAL, 0.08f},
        {U_HIDDEN2, "hidden2.bias", 1, {H, 1}, ZT_INIT_ZEROS, 0},
        {U_HEAD, "head.weight", 2, {V, H}, ZT_INIT_NORMAL, 0.05f},
        {U_HEAD, "head.bias", 1, {V, 1}, ZT_INIT_ZEROS, 0},
    };
    static const char *const units[N_UNITS] = {"embed", "hidden1", "hidden2", "head"};
    static const int n_in_unit[N_UNITS] = {1, 2, 2, 2};
    int rc = 0;
    for (int u = 0, i = 0; u < N_UNITS && rc == 0; u++) {
        int id;
        rc = zt_engine_add_unit(e, units[u], n_in_unit[u], &id);
        for (; rc == 0 && i < N_PARAMS && p[i].unit == u; i++) {
            zt_param_spec s = {p[i].name, p[i].ndim, p[i].shape, p[i].init, p[i].std, NULL,
                               p[i].ndim == 1 || u == U_EMBED, NULL};
            rc = zt_engine_add_param(e, id, &s, NULL);
        }
    }
    for (int i = 0; rc == 0 && i < N_PARAMS; i++) {
        zt_param_info pi;
        rc = zt_engine_param_get(e, i, &pi);
        off[i] = pi.offset;
    }
    return rc;
}

/* activations of this rank's rows */
typedef struct acts {
    int b;                                /* rows */
    int *ctx, *next;                      /* [b, K], [b] */
    float *x, *h1, *h2, *prob, *d1, *d2; /* [b, K*D], [b, H] x 2, [b, V], [b, H] x 2 */
} acts;

static void fill_rows(acts *a, const unsigned char *text, size_t len, uint64_t step, int first)
{
    for (int r = 0; r < a->b; r++) {
        size_t at = mix(step * 1000003u + (uint64_t)(first + r)) % (len - K);
        for (int k = 0; k < K; k++)
            a->ctx[r * K + k] = char_id(text[at + k]);
        a->next[r] = char_id(text[at + K]);
    }
}

/* y[b, n] = tanh(x[b, m] W[n, m]^T + bias[n]) */
static void linear_tanh(float *y, const float *x, const float *W, const float *bias, int b,
                        int m, int n)
{
    for (int r = 0; r < b; r++)
        memcpy(y + (size_t)r * n, bias, sizeof *y * (size_t)n);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b, n, m, 1.0f, x, m, W, m, 1.0f, y, n);
    for (size_t i = 0; i < (size_t)b * n; i++)
        y[i] = tanhf(y[i]);
}

/* dy (in: dL/dy; becomes dL/d(pre-activation)), y = tanh(..): dW += dy^T x, db += sum dy,
 * dx = dy W (dx may be NULL) */
static void linear_tanh_back(float *dx, float *dW, float *db, float *dy, const float *y,
                             const float *x, const float *W, int b, int m, int n)
{
    for (size_t i = 0; i < (size_t)b * n; i++)
        dy[i] *= 1.0f - y[i] * y[i];
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, m, b, 1.0f, dy, n, x, m, 1.0f, dW, m);
    for (int r = 0; r < b; r++)
        for (int j = 0; j < n; j++)
            db[j] += dy[(size_t)r * n + j];
    if (dx)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, b, m, n, 1.0f, dy, n, W, m, 0.0f,
                    dx, m);
}

static int check(zt_engine *e, int rc, const char *what)
{
    if (rc < 0)
        fprintf(stderr, "charmlp: %s: %s\n", what, e ? zt_engine_last_error(e) : zt_last_error());
    return rc;
}

/* One step: forward and backward of this rank's rows, unit by unit through the API; returns
 * the sum of this rank's token losses in *loss. scale: 1 / the global batch. */
static int train_step(zt_engine *e, acts *a, float scale, double *loss)
{
    float *P, *G;
    int b = a->b, rc;
    /* forward */
    if ((rc = zt_engine_unit_acquire(e, U_EMBED, ZT_FOR_FORWARD, &P, NULL)) < 0)
        return rc;
    for (int r = 0; r < b; r++)
        for (int k = 0; k < K; k++)
            memcpy(a->x + ((size_t)r * K + k) * D, P + off[P_E] + (size_t)a->ctx[r * K + k] * D,
                   sizeof(float) * D);
    if ((rc = zt_engine_unit_release(e, U_EMBED)) < 0 ||
        (rc = zt_engine_unit_acquire(e, U_HIDDEN1, ZT_FOR_FORWARD, &P, NULL)) < 0)
        return rc;
    linear_tanh(a->h1, a->x, P + off[P_W1], P + off[P_B1], b, K * D, H);
    if ((rc = zt_engine_unit_release(e, U_HIDDEN1)) < 0 ||
        (rc = zt_engine_unit_acquire(e, U_HIDDEN2, ZT_FOR_FORWARD, &P, NULL)) < 0)
        return rc;
    linear_tanh(a->h2, a->h1, P + off[P_W2], P + off[P_B2], b, H, H);
    if ((rc = zt_engine_unit_release(e, U_HIDDEN2)) < 0 ||
        (rc = zt_engine_unit_acquire(e, U_HEAD, ZT_FOR_FORWARD, &P, NULL)) < 0)
        return rc;
    for (int r = 0; r < b; r++)
        memcpy(a->prob + (size_t)r * V, P + off[P_BO], sizeof(float) * V);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b, V, H, 1.0f, a->h2, H, P + off[P_WO],
                H, 1.0f, a->prob, V);
    if ((rc = zt_engine_unit_release(e, U_HEAD)) < 0)
        return rc;
    *loss = 0.0;
    for (int r = 0; r < b; r++) { /* softmax cross-entropy; prob becomes dL/dlogits */
        float *z = a->prob + (size_t)r * V, mx = z[0], sum = 0.0f;
        for (int j = 1; j < V; j++)
            mx = z[j] > mx ? z[j] : mx;
        for (int j = 0; j < V; j++)
            sum += (z[j] = expf(z[j] - mx));
        *loss -= log((double)z[a->next[r]] / sum);
        for (int j = 0; j < V; j++)
            z[j] = (z[j] / sum - (j == a->next[r])) * scale;
    }
    /* backward, in reverse; each unit's gradients are ready as soon as they are complete */
    if ((rc = zt_engine_unit_acquire(e, U_HEAD, ZT_FOR_BACKWARD, &P, &G)) < 0)
        return rc;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, V, H, b, 1.0f, a->prob, V, a->h2, H,
                1.0f, G + off[P_WO], H);
    for (int r = 0; r < b; r++)
        for (int j = 0; j < V; j++)
            G[off[P_BO] + j] += a->prob[(size_t)r * V + j];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, b, H, V, 1.0f, a->prob, V,
                P + off[P_WO], H, 0.0f, a->d2, H);
    if ((rc = zt_engine_unit_grads_ready(e, U_HEAD)) < 0 ||
        (rc = zt_engine_unit_release(e, U_HEAD)) < 0 ||
        (rc = zt_engine_unit_acquire(e, U_HIDDEN2, ZT_FOR_BACKWARD, &P, &G)) < 0)
        return rc;
    linear_tanh_back(a->d1, G + off[P_W2], G + off[P_B2], a->d2, a->h2, a->h1, P + off[P_W2], b,
                     H, H);
    if ((rc = zt_engine_unit_grads_ready(e, U_HIDDEN2)) < 0 ||
        (rc = zt_engine_unit_release(e, U_HIDDEN2)) < 0 ||
        (rc = zt_engine_unit_acquire(e, U_HIDDEN1, ZT_FOR_BACKWARD, &P, &G)) < 0)
        return rc;
    float *dx = a->x; /* (x is not needed once hidden1's weight gradient is taken) */
    linear_tanh_back(NULL, G + off[P_W1], G + off[P_B1], a->d1, a->h1, a->x, P + off[P_W1], b,
                     K * D, H);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, b, K * D, H, 1.0f, a->d1, H,
                P + off[P_W1], K * D, 0.0f, dx, K * D);
    if ((rc = zt_engine_unit_grads_ready(e, U_HIDDEN1)) < 0 ||
        (rc = zt_engine_unit_release(e, U_HIDDEN1)) < 0 ||
        (rc = zt_engine_unit_acquire(e, U_EMBED, ZT_FOR_BACKWARD, &P, &G)) < 0)
        return rc;
    for (int r = 0; r < b; r++) /* scatter-add, rows in order (deterministic) */
        for (int k = 0; k < K; k++) {
            float *g = G + off[P_E] + (size_t)a->ctx[r * K + k] * D;
            const float *d = dx + ((size_t)r * K + k) * D;
            for (int j = 0; j < D; j++)
                g[j] += d[j];
        }
    if ((rc = zt_engine_unit_grads_ready(e, U_EMBED)) < 0)
        return rc;
    return zt_engine_unit_release(e, U_EMBED);
}

static unsigned char *read_text(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    unsigned char *t = NULL;
    long n;
    if (!f || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0 ||
        !(t = malloc((size_t)n + 1)) || fread(t, 1, (size_t)n, f) != (size_t)n) {
        if (f)
            fclose(f);
        free(t);
        return NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return t;
}

int main(int argc, char **argv)
{
    opts o;
    zt_config c;
    zt_engine *e = NULL;
    acts a = {0};
    int rank = 0, N = 1, rc, status = 1;
    size_t len = 0;
    unsigned char *text = NULL;
    if (parse(argc, argv, &o) != 0)
        return 2;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &N);
    if (zt_abi_version() != ZT_ABI_VERSION) {
        fprintf(stderr, "charmlp: built for zerotrain ABI %d, linked with %d\n", ZT_ABI_VERSION,
                zt_abi_version());
        goto out;
    }
    if (!(text = read_text(o.text, &len)) || len < K + 1) {
        fprintf(stderr, "charmlp: %s: cannot read a text of more than %d bytes\n", o.text, K);
        goto out;
    }
    if (o.batch % N != 0) {
        fprintf(stderr, "charmlp: --batch %d does not divide over %d ranks\n", o.batch, N);
        goto out;
    }
    zt_config_init(&c);
    c.zero_stage = o.stage;
    c.optimizer = o.optimizer;
    c.offload_optimizer = o.offload;
    c.nvme_path = o.nvme;
    c.threads = 1;
    c.lr = o.lr;
    c.seed = 1234;
    /* units this small would stay gathered whole at stage 3 (DeepSpeed's
     * stage3_param_persistence_threshold, 100000 floats): gather every unit before each use,
     * as a large model's are */
    c.persist_threshold = 0;
    if (check(e, zt_engine_create(&c, MPI_COMM_WORLD, &e), "creating the engine") < 0 ||
        check(e, add_model(e), "registering the model") < 0 ||
        check(e, zt_engine_commit(e), "committing the model") < 0)
        goto out;
    a.b = o.batch / N;
    a.ctx = malloc(sizeof *a.ctx * (size_t)a.b * K);
    a.next = malloc(sizeof *a.next * (size_t)a.b);
    a.x = malloc(sizeof(float) * (size_t)a.b * K * D);
    a.h1 = malloc(sizeof(float) * (size_t)a.b * H);
    a.h2 = malloc(sizeof(float) * (size_t)a.b * H);
    a.d1 = malloc(sizeof(float) * (size_t)a.b * H);
    a.d2 = malloc(sizeof(float) * (size_t)a.b * H);
    a.prob = malloc(sizeof(float) * (size_t)a.b * V);
    if (!a.ctx || !a.next || !a.x || !a.h1 || !a.h2 || !a.d1 || !a.d2 || !a.prob) {
        fprintf(stderr, "charmlp: out of memory\n");
        goto out;
    }
    zt_train_state st = {0, 0, c.seed};
    char latest[4096];
    if (o.ckpt && o.resume && (rc = zt_checkpoint_find_latest(o.ckpt, latest, sizeof latest)) > 0) {
        if (check(e, zt_checkpoint_load(e, latest, &st), latest) < 0)
            goto out;
        if (rank == 0)
            printf("resumed from %s (step %lld)\n", latest, (long long)st.step);
    }
    for (int64_t s = st.step; s < o.steps; s++) {
        double loss = 0.0, sum = 0.0;
        zt_step_info si;
        fill_rows(&a, text, len, (uint64_t)s, rank * a.b);
        if (check(e, train_step(e, &a, 1.0f / (float)o.batch, &loss), "training step") < 0 ||
            check(e, zt_engine_step(e, o.lr, &si), "optimizer step") < 0 ||
            check(e, zt_engine_zero_grad(e), "zero_grad") < 0)
            goto out;
        MPI_Allreduce(&loss, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (rank == 0 && (s % o.print_every == 0 || s + 1 == o.steps))
            printf("step %lld loss %.6f grad_norm %.6f\n", (long long)s, sum / o.batch,
                   si.grad_norm);
        st.step = s + 1;
        st.samples += (uint64_t)o.batch;
    }
    if (o.ckpt && check(e, zt_checkpoint_save(e, o.ckpt, &st, NULL, 2), o.ckpt) < 0)
        goto out;
    if (o.save && check(e, zt_engine_save_model(e, o.save), o.save) < 0)
        goto out;
    if (rank == 0) {
        zt_engine_report r;
        if (zt_engine_report_get(e, &r) == 0)
            printf("stage %d, %d ranks: model state %zu bytes per rank (formula %zu), "
                   "optimizer %.2f bytes/param, %llu collectives\n", r.zero_stage, r.world_size,
                   r.measured_state_bytes, r.predicted_state_bytes, r.optimizer_bytes_per_param,
                   (unsigned long long)r.collectives);
    }
    status = 0;
out:
    zt_engine_destroy(e);
    free(text);
    free(a.ctx);
    free(a.next);
    free(a.x);
    free(a.h1);
    free(a.h2);
    free(a.d1);
    free(a.d2);
    free(a.prob);
    MPI_Finalize();
    return status;
}
