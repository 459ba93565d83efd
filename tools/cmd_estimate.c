/* cmd_estimate.c - `zerotrain estimate`: the bytes per rank a configuration needs (model
 * states, buffers, activations, NVMe), before anything is allocated: zt_estimate_memory, the
 * memory planner's own footprint. */
#include "cli.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct est_args {
    const char *model, *params, *ranks, *stage, *precision, *optimizer, *off_opt, *off_par,
        *micro, *seq, *recompute, *unit, *grad_dtype;
    int json;
} est_args;

static const char *usage_text =
    "usage: zerotrain estimate (--model MODEL | --params N) --ranks N --stage S\n"
    "         [--precision fp32|bf16|fp16] [--grad-dtype auto|fp32|bf16|fp16]\n"
    "         [--optimizer adamw|adamw8bit|adafactor|lamb]\n"
    "         [--offload-optimizer none|cpu|nvme] [--offload-param none|cpu|nvme]\n"
    "         [--micro-batch B --seq-len T [--recompute none|full|selective|every-k:K]]\n"
    "         [--unit-params N] [--set FIELD=VALUE]... [--json]\n";

/* one zt_config_set, its message on failure */
static int set(zt_config *c, const char *key, const char *value, const char *flag)
{
    if (value && zt_config_set(c, key, value) < 0)
        return die("estimate: %s %s: %s", flag, value, zt_last_error());
    return 0;
}

static const char *gb(double x, char *buf, size_t n)
{
    snprintf(buf, n, "%.4g GB", x / 1e9);
    return buf;
}

static void human(const est_args *a, const zt_estimate *e, const char *optname)
{
    static const char *const prec[] = {"fp32", "bf16", "fp16"};
    char b1[32];
    const double Mi = 1048576.0;
    printf("%s: %.0f parameters (%.0f with shard padding), %d rank%s, ZeRO stage %d, %s\n",
           a->model ? a->model : "--params", e->num_params, e->padded_params, e->world_size,
           e->world_size == 1 ? "" : "s", e->zero_stage, prec[e->precision]);
    printf("bytes per parameter: %g (parameters) + %g (gradients) + %g (optimizer: %s%s, K)"
           " = %g\n",
           e->param_bytes, e->grad_bytes, e->optimizer_bytes_per_param, optname,
           e->master_bytes > 0 ? " with the fp32 master" : "",
           e->param_bytes + e->grad_bytes + e->optimizer_bytes_per_param);
    printf("per rank                %18s %12s %12s\n", "bytes", "GB (1e9)", "MiB");
    const struct { const char *name; double v; } rows[] = {
        {"model states (RAM)", e->model_state_bytes},
        {"buffers", e->buffer_bytes},
        {"activations", e->activation_bytes},
        {"peak (RAM)", e->peak_bytes},
        {"on NVMe", e->nvme_bytes}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        printf("  %-21s %18.0f %12.4g %12.1f\n", rows[i].name, rows[i].v, rows[i].v / 1e9,
               rows[i].v / Mi);
    if (e->nvme_bytes > 0)
        printf("on NVMe: parameters %s, gradients %.4g GB, optimizer state %.4g GB\n",
               gb(e->params_nvme, b1, sizeof b1), e->grads_nvme / 1e9, e->optimizer_nvme / 1e9);
    if (a->micro && e->precision != 0)
        printf("activations are counted as the model keeps them (BERT: in the 16-bit dtype; T5: "
               "fp32, with the units it reads widened)\n");
    if (!a->micro)
        printf("activations not counted: give --micro-batch and --seq-len (with --model)\n");
    printf("the process's own code, libraries and MPI buffers come on top of the peak\n");
}

static int json_out(const est_args *a, const zt_estimate *e, const char *optname,
                    const char *off_opt, const char *off_par, const char *rec, long micro,
                    long seq)
{
    static const char *const prec[] = {"fp32", "bf16", "fp16"};
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return die("estimate: out of memory");
    cJSON_AddStringToObject(o, a->model ? "model" : "params", a->model ? a->model : a->params);
    cJSON_AddNumberToObject(o, "num_params", e->num_params);
    cJSON_AddNumberToObject(o, "padded_params", e->padded_params);
    cJSON_AddNumberToObject(o, "ranks", e->world_size);
    cJSON_AddNumberToObject(o, "stage", e->zero_stage);
    cJSON_AddStringToObject(o, "precision", prec[e->precision]);
    cJSON_AddStringToObject(o, "optimizer", optname);
    cJSON_AddStringToObject(o, "offload_optimizer", off_opt);
    cJSON_AddStringToObject(o, "offload_param", off_par);
    cJSON_AddStringToObject(o, "recompute", rec);
    cJSON_AddNumberToObject(o, "micro_batch", (double)micro);
    cJSON_AddNumberToObject(o, "seq_len", (double)seq);
    cJSON_AddNumberToObject(o, "param_bytes", e->param_bytes);
    cJSON_AddNumberToObject(o, "grad_bytes", e->grad_bytes);
    cJSON_AddNumberToObject(o, "master_bytes", e->master_bytes);
    cJSON_AddNumberToObject(o, "optimizer_bytes_per_param", e->optimizer_bytes_per_param);
    cJSON_AddNumberToObject(o, "model_state_bytes_per_rank", e->model_state_bytes);
    cJSON_AddNumberToObject(o, "buffer_bytes_per_rank", e->buffer_bytes);
    cJSON_AddNumberToObject(o, "activation_bytes_per_rank", e->activation_bytes);
    cJSON_AddNumberToObject(o, "nvme_bytes_per_rank", e->nvme_bytes);
    cJSON_AddNumberToObject(o, "params_nvme_bytes_per_rank", e->params_nvme);
    cJSON_AddNumberToObject(o, "grads_nvme_bytes_per_rank", e->grads_nvme);
    cJSON_AddNumberToObject(o, "optimizer_nvme_bytes_per_rank", e->optimizer_nvme);
    cJSON_AddNumberToObject(o, "params_ram_bytes_per_rank", e->params_ram);
    cJSON_AddNumberToObject(o, "grads_ram_bytes_per_rank", e->grads_ram);
    cJSON_AddNumberToObject(o, "optimizer_ram_bytes_per_rank", e->optimizer_ram);
    cJSON_AddNumberToObject(o, "comm_bytes_per_rank", e->comm_bytes);
    cJSON_AddNumberToObject(o, "io_bytes_per_rank", e->io_bytes);
    cJSON_AddNumberToObject(o, "peak_bytes_per_rank", e->peak_bytes);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!s)
        return die("estimate: out of memory");
    printf("%s\n", s);
    free(s);
    return 0;
}

int cmd_estimate(int argc, char **argv)
{
    est_args a = {0};
    const opt opts[] = {
        {"--model", &a.model},         {"--params", &a.params},
        {"--ranks", &a.ranks},         {"--stage", &a.stage},
        {"--precision", &a.precision}, {"--optimizer", &a.optimizer},
        {"--offload-optimizer", &a.off_opt}, {"--offload-param", &a.off_par},
        {"--micro-batch", &a.micro},   {"--seq-len", &a.seq},
        {"--recompute", &a.recompute}, {"--unit-params", &a.unit},
        {"--grad-dtype", &a.grad_dtype}};
    int n = 0, nset = 0;
    char *rest[64];
    const char *sets[32];
    for (int i = 0; i < argc; i++) { /* --json takes no value, --set may repeat */
        if (strcmp(argv[i], "--json") == 0)
            a.json = 1;
        else if (strcmp(argv[i], "--set") == 0) {
            if (i + 1 >= argc || !strchr(argv[i + 1], '='))
                return die("estimate: --set takes FIELD=VALUE (a zt_config field, as "
                           "docs/config.md's zt_config column names it)"), 2;
            if (nset == 32)
                return die("estimate: more than 32 --set"), 2;
            sets[nset++] = argv[++i];
        }
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return fputs(usage_text, stdout), 0;
        else if (n < 64)
            rest[n++] = argv[i];
        else
            return die("estimate: too many arguments"), 2;
    }
    if (parse_opts(n, rest, opts, (int)(sizeof opts / sizeof opts[0])))
        return fputs(usage_text, stderr), 2;
    if (!a.model == !a.params)
        return die("estimate: give --model MODEL or --params N (one of them)"), 2;
    if (!a.ranks || !a.stage)
        return die("estimate: give --ranks N and --stage S"), 2;
    if (!a.micro != !a.seq)
        return die("estimate: the activations need both --micro-batch and --seq-len"), 2;
    if (a.recompute && !a.micro)
        return die("estimate: --recompute changes the activations: give --micro-batch and "
                   "--seq-len too"), 2;
    if (a.params && a.micro)
        return die("estimate: activations are counted for a model's layers: give --model "
                   "instead of --params, or no --micro-batch"), 2;
    long ranks, stage, micro = 0, seq = 0;
    double params = 0.0, unit = 0.0;
    if (parse_int(a.ranks, "--ranks", 1, 1 << 20, &ranks) ||
        parse_int(a.stage, "--stage", 0, 3, &stage) ||
        (a.micro && parse_int(a.micro, "--micro-batch", 1, 1 << 20, &micro)) ||
        (a.seq && parse_int(a.seq, "--seq-len", 1, 1 << 20, &seq)) ||
        (a.params && parse_float(a.params, "--params", 1.0, 1e15, &params)) ||
        (a.unit && parse_float(a.unit, "--unit-params", 1024.0, 1e12, &unit)))
        return 2;
    if (a.unit && !a.params)
        return die("estimate: --unit-params cuts a --params model into units; a --model has "
                   "its own"), 2;
    if (a.params && params != floor(params))
        return die("estimate: --params %s: a whole number of parameters", a.params), 2;
    zt_config c;
    zt_config_init(&c);
    c.zero_stage = (int)stage;
    c.plan_micro_batch = (int)micro;
    c.plan_seq_len = (int)seq;
    const char *optname = a.optimizer ? a.optimizer : "adamw";
    const char *off_opt = a.off_opt ? a.off_opt : "none", *off_par = a.off_par ? a.off_par : "none";
    const char *rec = a.recompute ? a.recompute : "none";
    char kbuf[24];
    if (strncmp(rec, "every-", 6) == 0 && strcmp(rec, "every-k") != 0) { /* every-K, every-k:K */
        long k;
        if (parse_int(rec + (strncmp(rec, "every-k:", 8) == 0 ? 8 : 6), "--recompute every-K",
                      1, 1 << 20, &k))
            return 2;
        c.recompute_k = (int)k;
        snprintf(kbuf, sizeof kbuf, "every-k");
    } else if (strcmp(rec, "every-k") == 0) {
        return die("estimate: --recompute every-K takes the segment length (every-2 or every-k:2, ...)"), 2;
    } else {
        snprintf(kbuf, sizeof kbuf, "%s", rec);
    }
    if (set(&c, "precision", a.precision, "--precision") ||
        set(&c, "grad_accum_dtype", a.grad_dtype, "--grad-dtype") ||
        set(&c, "optimizer", optname, "--optimizer") ||
        set(&c, "offload_optimizer", off_opt, "--offload-optimizer") ||
        set(&c, "offload_param", off_par, "--offload-param") ||
        set(&c, "recompute", kbuf, "--recompute"))
        return 2;
    if (c.recompute == ZT_RECOMPUTE_AUTO)
        return die("estimate: --recompute auto plans to fit a memory limit: give the mode "
                   "(none, full, selective, every-K)"), 2;
    if (c.optimizer == ZT_OPT_ADAFACTOR)
        c.lr = 0.0f; /* its relative steps */
    if (a.model && cli_set_model(&c, a.model))
        return 2;
    for (int i = 0; i < nset; i++) { /* the config's other fields (after the flags: they win) */
        char key[64];
        size_t k = (size_t)(strchr(sets[i], '=') - sets[i]);
        if (k == 0 || k >= sizeof key)
            return die("estimate: --set %s: no field name before '='", sets[i]), 2;
        memcpy(key, sets[i], k);
        key[k] = '\0';
        if (zt_config_set(&c, key, sets[i] + k + 1) < 0)
            return die("estimate: --set %s: %s", sets[i], zt_last_error()), 2;
    }
    zt_estimate e;
    if (zt_estimate_memory(&c, (int)ranks, params, (size_t)unit, &e) < 0)
        return die("estimate: %s", zt_last_error());
    if (a.json)
        return json_out(&a, &e, optname, off_opt, off_par, rec, micro, seq);
    human(&a, &e, optname);
    return 0;
}
