/* test_config.c - training config: good configs (HF ZeRO-2/3 with "auto", each scheduler) give
 * the asserted settings, bad ones one line per problem, notices for keys that do not apply, lr
 * schedules match closed forms, docs/config.md is current. Does not run the engine. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zerotrain.h"

/* ---- helpers ---------------------------------------------------------------------------- */

static char logbuf[16384];
static int log_warn, log_info;

static void capture_log(int level, const char *msg, void *user)
{
    size_t len = strlen(logbuf);
    (void)user;
    if (level == ZT_LOG_WARN)
        log_warn++;
    else if (level == ZT_LOG_INFO)
        log_info++;
    snprintf(logbuf + len, sizeof logbuf - len, "%s %s\n",
             level == ZT_LOG_WARN ? "W" : level == ZT_LOG_INFO ? "I" : "?", msg);
}

static void log_reset(void)
{
    logbuf[0] = '\0';
    log_warn = log_info = 0;
}

static int setup(void **state)
{
    (void)state;
    zt_log_set(capture_log, NULL, ZT_LOG_INFO);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    zt_log_set(NULL, NULL, ZT_LOG_INFO);
    return 0;
}

static int count_lines(const char *s)
{
    int n = *s ? 1 : 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* A copy of text with every `from` replaced by `to` (caller frees). */
static char *replace(const char *text, const char *from, const char *to)
{
    size_t n = 0, fl = strlen(from), tl = strlen(to);
    for (const char *p = text; (p = strstr(p, from)); p += fl)
        n++;
    char *out = malloc(strlen(text) + n * tl + 1), *o = out;
    assert_non_null(out);
    for (const char *p = text, *q; ; p = q + fl) {
        q = strstr(p, from);
        size_t len = q ? (size_t)(q - p) : strlen(p);
        memcpy(o, p, len);
        o += len;
        if (!q)
            break;
        memcpy(o, to, tl);
        o += tl;
    }
    *o = '\0';
    return out;
}

static const char *sched_name(int t)
{
    static const char *names[] = {"constant", "WarmupLR", "WarmupDecayLR", "WarmupCosineLR"};
    return t >= 0 && t < 4 ? names[t] : "?";
}

static const char *dev_name(int d)
{
    static const char *names[] = {"none", "cpu", "nvme"};
    return d >= 0 && d < 3 ? names[d] : "?";
}

/* Every field of the settings, one canonical line. */
static const char *dump(const zt_train_settings *s)
{
    static char buf[1024];
    snprintf(buf, sizeof buf,
             "batch=%d/%d/%d lr=%.7g betas=%.7g,%.7g eps=%.7g wd=%.7g clip=%.7g print=%d "
             "seed=%llu%s sched=%s min_lr=%.17g max_lr=%.17g ratios=%.17g/%.17g warmup=%lld%s "
             "total=%lld zero=%d offload=%s/%s nvme='%s' ac=%d no_decay=%d threads=%d",
             s->train_batch_size, s->micro_batch_size, s->grad_accum_steps, s->lr, s->beta1,
             s->beta2, s->eps, s->weight_decay, s->grad_clip, s->steps_per_print,
             (unsigned long long)s->seed, s->seed_given ? "" : "(default)",
             sched_name(s->scheduler), s->warmup_min_lr, s->warmup_max_lr, s->warmup_min_ratio,
             s->cos_min_ratio, (long long)s->warmup_num_steps, s->warmup_log ? "(log)" : "",
             (long long)s->total_num_steps, s->zero_stage, dev_name(s->offload_optimizer),
             dev_name(s->offload_param), s->nvme_path, s->activation_checkpointing,
             s->n_no_decay, s->threads);
    return buf;
}

static zt_train_config *parse_ok(const char *json, const char *src, int world, int64_t total)
{
    zt_train_config *c = NULL;
    int rc = zt_train_config_parse(json, src, world, total, &c);
    if (rc != 0)
        fail_msg("%s: rc %d (%s):\n%s", src, rc, zt_strerror(rc), zt_last_error());
    assert_non_null(c);
    return c;
}

/* Transformers' tests/deepspeed/ds_config_zero2.json and ds_config_zero3.json, verbatim. */
static const char HF_ZERO2[] =
    "{\n"
    "    \"fp16\": {\n"
    "        \"enabled\": \"auto\",\n"
    "        \"loss_scale\": 0,\n"
    "        \"loss_scale_window\": 1000,\n"
    "        \"initial_scale_power\": 16,\n"
    "        \"hysteresis\": 2,\n"
    "        \"min_loss_scale\": 1\n"
    "    },\n\n"
    "    \"optimizer\": {\n"
    "        \"type\": \"AdamW\",\n"
    "        \"params\": {\n"
    "            \"lr\": \"auto\",\n"
    "            \"betas\": \"auto\",\n"
    "            \"eps\": \"auto\",\n"
    "            \"weight_decay\": \"auto\"\n"
    "        }\n"
    "    },\n\n"
    "    \"scheduler\": {\n"
    "        \"type\": \"WarmupLR\",\n"
    "        \"params\": {\n"
    "            \"warmup_min_lr\": \"auto\",\n"
    "            \"warmup_max_lr\": \"auto\",\n"
    "            \"warmup_num_steps\": \"auto\"\n"
    "        }\n"
    "    },\n\n"
    "    \"zero_optimization\": {\n"
    "        \"stage\": 2,\n"
    "        \"offload_optimizer\": {\n"
    "            \"device\": \"cpu\",\n"
    "            \"pin_memory\": true\n"
    "        },\n"
    "        \"allgather_partitions\": true,\n"
    "        \"allgather_bucket_size\": 2e8,\n"
    "        \"overlap_comm\": true,\n"
    "        \"reduce_scatter\": true,\n"
    "        \"reduce_bucket_size\": 2e8,\n"
    "        \"contiguous_gradients\": true\n"
    "    },\n\n"
    "    \"gradient_accumulation_steps\": \"auto\",\n"
    "    \"gradient_clipping\": \"auto\",\n"
    "    \"steps_per_print\": 2000,\n"
    "    \"train_batch_size\": \"auto\",\n"
    "    \"train_micro_batch_size_per_gpu\": \"auto\",\n"
    "    \"wall_clock_breakdown\": false\n"
    "}\n";

static const char HF_ZERO3[] =
    "{\n"
    "    \"fp16\": {\n"
    "        \"enabled\": \"auto\",\n"
    "        \"loss_scale\": 0,\n"
    "        \"loss_scale_window\": 1000,\n"
    "        \"initial_scale_power\": 16,\n"
    "        \"hysteresis\": 2,\n"
    "        \"min_loss_scale\": 1\n"
    "    },\n\n"
    "    \"optimizer\": {\n"
    "        \"type\": \"AdamW\",\n"
    "        \"params\": {\n"
    "            \"lr\": \"auto\",\n"
    "            \"betas\": \"auto\",\n"
    "            \"eps\": \"auto\",\n"
    "            \"weight_decay\": \"auto\"\n"
    "        }\n"
    "    },\n\n"
    "    \"scheduler\": {\n"
    "        \"type\": \"WarmupLR\",\n"
    "        \"params\": {\n"
    "            \"warmup_min_lr\": \"auto\",\n"
    "            \"warmup_max_lr\": \"auto\",\n"
    "            \"warmup_num_steps\": \"auto\"\n"
    "        }\n"
    "    },\n\n"
    "    \"zero_optimization\": {\n"
    "        \"stage\": 3,\n"
    "        \"offload_optimizer\": {\n"
    "            \"device\": \"cpu\",\n"
    "            \"pin_memory\": true\n"
    "        },\n"
    "        \"offload_param\": {\n"
    "            \"device\": \"cpu\",\n"
    "            \"pin_memory\": true\n"
    "        },\n"
    "        \"overlap_comm\": true,\n"
    "        \"contiguous_gradients\": true,\n"
    "        \"sub_group_size\": 1e14,\n"
    "        \"reduce_bucket_size\": \"auto\",\n"
    "        \"stage3_prefetch_bucket_size\": \"auto\",\n"
    "        \"stage3_param_persistence_threshold\": \"auto\",\n"
    "        \"stage3_max_live_parameters\": 1e9,\n"
    "        \"stage3_max_reuse_distance\": 1e9,\n"
    "        \"stage3_gather_fp16_weights_on_model_save\": true\n"
    "    },\n\n"
    "    \"gradient_accumulation_steps\": \"auto\",\n"
    "    \"gradient_clipping\": \"auto\",\n"
    "    \"steps_per_print\": 2000,\n"
    "    \"train_batch_size\": \"auto\",\n"
    "    \"train_micro_batch_size_per_gpu\": \"auto\",\n"
    "    \"wall_clock_breakdown\": false\n"
    "}\n";

/* What a Hugging Face user must add: the two values only the Trainer can fill. */
static char *hf_filled(const char *hf)
{
    char *a = replace(hf, "\"train_micro_batch_size_per_gpu\": \"auto\"",
                      "\"train_micro_batch_size_per_gpu\": 8");
    char *b = replace(a, "\"warmup_num_steps\": \"auto\"", "\"warmup_num_steps\": 100");
    free(a);
    return b;
}

/* ---- good configs ----------------------------------------------------------------------- */

typedef struct good_case {
    const char *name, *json;
    int world;
    int64_t total_steps;
    const char *want;      /* dump() of the resolved settings */
    const char *notices;   /* every WARN notice, in order, each line "W <text>"; "" = none */
} good_case;

#define ADAMW_DEFAULTS "lr=0.001 betas=0.9,0.999 eps=1e-08 wd=0" /* DeepSpeed's FusedAdam */
#define HF_AUTO_ADAMW "lr=5e-05 betas=0.9,0.999 eps=1e-08 wd=0" /* the HF Trainer's */
#define NO_SCHED "sched=constant min_lr=0 max_lr=0 ratios=0/0 warmup=0 total=0"

static const good_case good[] = {
    {"minimal", "{\"train_micro_batch_size_per_gpu\": 4}", 1, 0,
     "batch=4/4/1 " ADAMW_DEFAULTS " clip=0 print=10 seed=42(default) " NO_SCHED
     " zero=0 offload=none/none nvme='' ac=0 no_decay=-1 threads=0", ""},
    {"train_batch_size only, 4 ranks", "{\"train_batch_size\": 32}", 4, 0,
     "batch=32/8/1 " ADAMW_DEFAULTS " clip=0 print=10 seed=42(default) " NO_SCHED
     " zero=0 offload=none/none nvme='' ac=0 no_decay=-1 threads=0", ""},
    {"accumulation derived",
     "{\"train_batch_size\": 64, \"train_micro_batch_size_per_gpu\": 4}", 2, 0,
     "batch=64/4/8 " ADAMW_DEFAULTS " clip=0 print=10 seed=42(default) " NO_SCHED
     " zero=0 offload=none/none nvme='' ac=0 no_decay=-1 threads=0", ""},
    {"micro batch derived, all three consistent with auto",
     "{\"train_batch_size\": 48, \"gradient_accumulation_steps\": 2,"
     " \"train_micro_batch_size_per_gpu\": \"auto\"}", 3, 0,
     "batch=48/8/2 " ADAMW_DEFAULTS " clip=0 print=10 seed=42(default) " NO_SCHED
     " zero=0 offload=none/none nvme='' ac=0 no_decay=-1 threads=0", ""},
    {"HF ZeRO-2 example (two values filled)", NULL /* hf_filled(HF_ZERO2) */, 2, 0,
     "batch=16/8/1 " HF_AUTO_ADAMW " clip=1 print=2000 seed=42(default) sched=WarmupLR "
     "min_lr=0 max_lr=5.0000000000000002e-05 ratios=0/0 warmup=100(log) total=0 zero=2 offload=cpu/none "
     "nvme='' ac=0 no_decay=-1 threads=0", ""},
    {"HF ZeRO-3 example (two values filled)", NULL /* hf_filled(HF_ZERO3) */, 1, 0,
     "batch=8/8/1 " HF_AUTO_ADAMW " clip=1 print=2000 seed=42(default) sched=WarmupLR "
     "min_lr=0 max_lr=5.0000000000000002e-05 ratios=0/0 warmup=100(log) total=0 zero=3 offload=cpu/cpu "
     "nvme='' ac=0 no_decay=-1 threads=0",
     "W cfg: zero_optimization.stage3_gather_fp16_weights_on_model_save: ignored: zerotrain "
     "always saves full fp32 weights (safetensors) gathered from all ranks\n"},
    {"WarmupLR linear, explicit optimizer",
     "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 3,"
     " \"gradient_clipping\": 0.5, \"steps_per_print\": 1,"
     " \"optimizer\": {\"type\": \"adamw\", \"params\": {\"lr\": 3e-4, \"betas\": [0.8, 0.99],"
     " \"eps\": 1e-6, \"weight_decay\": 0, \"torch_adam\": true, \"bias_correction\": true}},"
     " \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_min_lr\": 1e-5,"
     " \"warmup_max_lr\": 2e-4, \"warmup_num_steps\": 10, \"warmup_type\": \"linear\","
     " \"last_batch_iteration\": -1}}}", 1, 0,
     "batch=6/2/3 lr=0.0003 betas=0.8,0.99 eps=1e-06 wd=0 clip=0.5 print=1 seed=42(default) "
     "sched=WarmupLR min_lr=1.0000000000000001e-05 max_lr=0.00020000000000000001 ratios=0/0 "
     "warmup=10 total=0 zero=0 offload=none/none nvme='' ac=0 no_decay=-1 threads=0", ""},
    {"WarmupDecayLR, Adam with adam_w_mode, total from the run",
     "{\"train_micro_batch_size_per_gpu\": 1,"
     " \"optimizer\": {\"type\": \"Adam\", \"params\": {\"lr\": 1e-3, \"adam_w_mode\": true}},"
     " \"scheduler\": {\"type\": \"WarmupDecayLR\", \"params\": {\"warmup_max_lr\": \"auto\","
     " \"warmup_num_steps\": 10, \"total_num_steps\": \"auto\"}}}", 1, 1000,
     "batch=1/1/1 lr=0.001 betas=0.9,0.999 eps=1e-08 wd=0 clip=0 print=10 seed=42(default) "
     "sched=WarmupDecayLR min_lr=0 max_lr=0.001 ratios=0/0 warmup=10(log) total=1000 zero=0 "
     "offload=none/none nvme='' ac=0 no_decay=-1 threads=0", ""},
    /* a weight_decay not given: the default of the class DeepSpeed builds (torch's AdamW
     * with torch_adam, else FusedAdam / DeepSpeedCPUAdam), or bitsandbytes' */
    {"torch_adam without weight_decay: torch.optim.AdamW's 0.01",
     "{\"train_micro_batch_size_per_gpu\": 1,"
     " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"torch_adam\": true}}}", 1, 0,
     "batch=1/1/1 lr=0.001 betas=0.9,0.999 eps=1e-08 wd=0.01 clip=0 print=10 seed=42(default) "
     NO_SCHED " zero=0 offload=none/none nvme='' ac=0 no_decay=-1 threads=0", ""},
    {"AdamW8bit without weight_decay: bitsandbytes' 0.01",
     "{\"train_micro_batch_size_per_gpu\": 1, \"optimizer\": {\"type\": \"AdamW8bit\"}}", 1, 0,
     "batch=1/1/1 lr=0.001 betas=0.9,0.999 eps=1e-08 wd=0.01 clip=0 print=10 seed=42(default) "
     NO_SCHED " zero=0 offload=none/none nvme='' ac=0 no_decay=-1 threads=0", ""},
    /* DeepSpeed's deprecated switches, read as DeepSpeedZeroConfig reads them */
    {"cpu_offload, cpu_offload_param: device cpu, each with a notice",
     "{\"train_micro_batch_size_per_gpu\": 1, \"zero_optimization\": {\"stage\": 3,"
     " \"cpu_offload\": true, \"cpu_offload_param\": true, \"cpu_offload_use_pin_memory\": true}}",
     1, 0,
     "batch=1/1/1 " ADAMW_DEFAULTS " clip=0 print=10 seed=42(default) " NO_SCHED
     " zero=3 offload=cpu/cpu nvme='' ac=0 no_decay=-1 threads=0",
     "W cfg: zero_optimization.cpu_offload: deprecated DeepSpeed key, read as DeepSpeed reads it: "
     "\"offload_optimizer\": {\"device\": \"cpu\"} (write that instead)\n"
     "W cfg: zero_optimization.cpu_offload_param: deprecated DeepSpeed key, read as DeepSpeed "
     "reads it: \"offload_param\": {\"device\": \"cpu\"} (write that instead)\n"
     "W cfg: zero_optimization.cpu_offload_use_pin_memory: deprecated DeepSpeed key (pin_memory "
     "of offload_optimizer and offload_param replaced it); nothing to pin here\n"},
    {"cpu_offload false, cpu_offload_param at stage 2: no offload",
     "{\"train_micro_batch_size_per_gpu\": 1, \"zero_optimization\": {\"stage\": 2,"
     " \"cpu_offload\": false, \"cpu_offload_param\": true}}", 1, 0,
     "batch=1/1/1 " ADAMW_DEFAULTS " clip=0 print=10 seed=42(default) " NO_SCHED
     " zero=2 offload=none/none nvme='' ac=0 no_decay=-1 threads=0",
     "W cfg: zero_optimization.cpu_offload: deprecated DeepSpeed key, read as DeepSpeed reads it: "
     "\"offload_optimizer\": {\"device\": \"none\"} (write that instead)\n"
     "W cfg: zero_optimization.cpu_offload_param: deprecated DeepSpeed key, read as DeepSpeed "
     "reads it: \"offload_param\": {\"device\": \"cpu\"} (write that instead)\n"
     "W cfg: zero_optimization.cpu_offload_param: ignored with stage 2: set "
     "zero_optimization.stage to 3, or remove it\n"},
    {"WarmupCosineLR, zerotrain section, NVMe offload, checkpointing",
     "{\"train_micro_batch_size_per_gpu\": 2, \"seed\": 7,"
     " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 5e-4}},"
     " \"scheduler\": {\"type\": \"WarmupCosineLR\", \"params\": {\"warmup_num_steps\": 20,"
     " \"total_num_steps\": 200, \"warmup_min_ratio\": 0.1, \"cos_min_ratio\": 0.01}},"
     " \"zero_optimization\": {\"stage\": 3, \"offload_optimizer\": {\"device\": \"nvme\","
     " \"nvme_path\": \"/local_nvme\", \"buffer_count\": 4, \"fast_init\": false},"
     " \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"/local_nvme\","
     " \"buffer_count\": 5, \"buffer_size\": 1e8, \"max_in_cpu\": 1e9}},"
     " \"aio\": {\"block_size\": 262144, \"queue_depth\": 32, \"thread_count\": 1,"
     " \"single_submit\": false, \"overlap_events\": true},"
     " \"activation_checkpointing\": {\"partition_activations\": false,"
     " \"cpu_checkpointing\": true, \"number_checkpoints\": null},"
     " \"bf16\": {\"enabled\": false},"
     " \"zerotrain\": {\"seed\": 7, \"threads\": 2, \"no_decay\": [\"bias\", \"norm\"],"
     " \"recompute\": \"full\"}}",
     1, 200,
     "batch=2/2/1 lr=0.0005 betas=0.9,0.999 eps=1e-08 wd=0 clip=0 print=10 seed=7 "
     "sched=WarmupCosineLR min_lr=0 max_lr=0 ratios=0.10000000000000001/0.01 warmup=20(log) "
     "total=200 zero=3 offload=nvme/nvme nvme='/local_nvme' ac=1 no_decay=2 threads=2", ""},
    {"seed above 2^53 as a string, empty no_decay",
     "{\"train_micro_batch_size_per_gpu\": 1, \"zerotrain\": {\"seed\":"
     " \"18446744073709551615\", \"no_decay\": []}}", 1, 0,
     "batch=1/1/1 " ADAMW_DEFAULTS " clip=0 print=10 seed=18446744073709551615 " NO_SCHED
     " zero=0 offload=none/none nvme='' ac=0 no_decay=0 threads=0", ""},
};

/* the aio section reaches the settings: DeepSpeed's defaults when absent; the older
 * thread_count name; the new offload_gradients switch (not given / true / false) */
/* optimizer.params.bias_correction: true by default; false reaches zt_config for Adam / AdamW
 * (DeepSpeed's FusedAdam takes it), refused for AdamW8bit */
static void test_bias_correction(void **state)
{
    (void)state;
    zt_config cfg;
    const char *js[] = {"{\"train_micro_batch_size_per_gpu\": 1}",
                        "{\"train_micro_batch_size_per_gpu\": 1, \"optimizer\": {\"type\": \"Adam\","
                        " \"params\": {\"bias_correction\": false}}}"};
    for (int i = 0; i < 2; i++) {
        zt_train_config *c = parse_ok(js[i], "bc", 1, 0);
        assert_int_equal(zt_train_config_settings(c)->bias_correction, !i);
        zt_config_init(&cfg);
        assert_int_equal(zt_train_config_apply(c, &cfg), 0);
        assert_int_equal(cfg.bias_correction, !i);
        zt_train_config_destroy(c);
    }
    zt_train_config *c = NULL;
    assert_int_equal(zt_train_config_parse("{\"train_micro_batch_size_per_gpu\": 1, \"optimizer\":"
                                           " {\"type\": \"AdamW8bit\", \"params\":"
                                           " {\"bias_correction\": false}}}", "bc8", 1, 0, &c),
                     ZT_E_UNSUPPORTED);
    assert_non_null(strstr(zt_last_error(), "bc8: optimizer.params.bias_correction: false is not "
                                            "supported with AdamW8bit"));
}

static void test_aio_and_gradients(void **state)
{
    (void)state;
    const zt_train_settings *s;
    zt_train_config *c = parse_ok("{\"train_micro_batch_size_per_gpu\": 1}", "a", 1, 0);
    s = zt_train_config_settings(c);
    assert_int_equal(s->aio_threads, 1);
    assert_int_equal(s->aio_single_submit, 0);
    assert_int_equal(s->aio_overlap_events, 1);
    assert_int_equal(s->offload_gradients, 0);
    assert_int_equal(s->direct_io, 0);
    zt_train_config_destroy(c);
    c = parse_ok("{\"train_micro_batch_size_per_gpu\": 1, \"aio\": {\"intra_op_parallelism\": 3,"
                 " \"single_submit\": true, \"overlap_events\": false},"
                 " \"zerotrain\": {\"offload_gradients\": false, \"direct_io\": \"off\"}}", "b", 1, 0);
    s = zt_train_config_settings(c);
    assert_int_equal(s->aio_threads, 3);
    assert_int_equal(s->aio_single_submit, 1);
    assert_int_equal(s->aio_overlap_events, 0);
    assert_int_equal(s->offload_gradients, -1);
    assert_int_equal(s->direct_io, -1);
    zt_train_config_destroy(c);
    c = parse_ok("{\"train_micro_batch_size_per_gpu\": 1, \"aio\": {\"thread_count\": 2},"
                 " \"zerotrain\": {\"offload_gradients\": true, \"direct_io\": \"required\"}}",
                 "c", 1, 0);
    s = zt_train_config_settings(c);
    assert_int_equal(s->aio_threads, 2);
    assert_int_equal(s->offload_gradients, 1);
    assert_int_equal(s->direct_io, 1);
    zt_train_config_destroy(c);
    assert_int_equal(zt_train_config_parse("{\"aio\": {\"intra_op_parallelism\": 17}}", "d",
                                           1, 0, &c), ZT_E_CONFIG);
    assert_non_null(strstr(zt_last_error(), "aio.intra_op_parallelism"));
}

/* zerotrain.recompute and the activation_checkpointing keys it works with */
static void test_recompute_settings(void **state)
{
    (void)state;
    static const struct {
        const char *json;
        int mode, k, off, nck, prof;
    } ok[] = {
        {"{\"train_micro_batch_size_per_gpu\": 1}", ZT_RECOMPUTE_NONE, 0, 0, 0, 0},
        {"{\"train_micro_batch_size_per_gpu\": 1, \"zerotrain\": {\"recompute\": \"none\"}}", ZT_RECOMPUTE_NONE, 0, 0, 0, 0},
        {"{\"train_micro_batch_size_per_gpu\": 1, \"zerotrain\": {\"recompute\": \"selective\"}, \"activation_checkpointing\":"
         " {\"profile\": true, \"contiguous_memory_optimization\": true}}",
         ZT_RECOMPUTE_SELECTIVE, 0, 0, 0, 1},
        {"{\"train_micro_batch_size_per_gpu\": 1, \"zerotrain\": {\"recompute\": \"full\"}, \"activation_checkpointing\":"
         " {\"cpu_checkpointing\": true, \"number_checkpoints\": 4}}",
         ZT_RECOMPUTE_FULL, 0, 1, 4, 0},
        {"{\"train_micro_batch_size_per_gpu\": 1, \"zerotrain\": {\"recompute\": \"every-k:3\"}, \"activation_checkpointing\":"
         " {\"cpu_checkpointing\": true}}", ZT_RECOMPUTE_EVERY_K, 3, 1, 0, 0},
        {"{\"train_micro_batch_size_per_gpu\": 1, \"zerotrain\": {\"recompute\": \"auto\", \"memory_limit\": \"2GiB\"}}",
         ZT_RECOMPUTE_AUTO, 0, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        zt_train_config *c = parse_ok(ok[i].json, "r", 1, 0);
        const zt_train_settings *s = zt_train_config_settings(c);
        assert_int_equal(s->recompute, ok[i].mode);
        assert_int_equal(s->recompute_k, ok[i].k);
        assert_int_equal(s->offload_checkpoints, ok[i].off);
        assert_int_equal(s->number_checkpoints, ok[i].nck);
        assert_int_equal(s->recompute_profile, ok[i].prof);
        zt_train_config_destroy(c);
    }
}

/* optimizer.type AdamW8bit and Adafactor: their parameters and defaults */
static void test_optimizer_settings(void **state)
{
    (void)state;
    zt_train_config *c = parse_ok("{\"train_micro_batch_size_per_gpu\": 1, \"optimizer\": "
                                  "{\"type\": \"AdamW8bit\", \"params\": {\"lr\": 0.002, "
                                  "\"min_8bit_size\": 100, \"betas\": [0.8, 0.99]}}, "
                                  "\"zerotrain\": {\"fp32_optimizer_state\": "
                                  "[\"word_embeddings\", \"position\"]}}", "o", 1, 0);
    const zt_train_settings *s = zt_train_config_settings(c);
    assert_int_equal(s->optimizer, ZT_OPT_ADAMW8BIT);
    assert_true(s->lr == 0.002f && s->beta1 == 0.8f && s->beta2 == 0.99f);
    assert_int_equal(s->min_8bit_size, 100);
    assert_int_equal(s->n_fp32_state, 2);
    assert_string_equal(zt_train_config_fp32_state(c, 1), "position");
    assert_null(zt_train_config_fp32_state(c, 2));
    zt_train_config_destroy(c);
    /* Hugging Face's Adafactor defaults */
    c = parse_ok("{\"train_micro_batch_size_per_gpu\": 1, \"optimizer\": {\"type\": "
                 "\"Adafactor\", \"params\": {\"lr\": null}}}", "o", 1, 0);
    s = zt_train_config_settings(c);
    assert_int_equal(s->optimizer, ZT_OPT_ADAFACTOR);
    assert_true(s->adafactor_eps1 == 1e-30f && s->adafactor_eps2 == 1e-3f);
    assert_true(s->clip_threshold == 1.0f && s->decay_rate == -0.8f && s->adafactor_beta1 < 0);
    assert_true(s->relative_step && s->scale_parameter && !s->warmup_init);
    assert_true(s->weight_decay == 0.0f && s->lr == 0.0f);
    zt_train_config_destroy(c);
    /* an lr of 0 is no lr, as null is: relative steps accept it */
    c = parse_ok("{\"train_micro_batch_size_per_gpu\": 1, \"optimizer\": {\"type\": "
                 "\"Adafactor\", \"params\": {\"lr\": 0}}}", "o", 1, 0);
    s = zt_train_config_settings(c);
    assert_true(s->relative_step && s->lr == 0.0f);
    zt_train_config_destroy(c);
    /* the T5 fine-tuning recipe: a fixed lr a scheduler drives */
    c = parse_ok("{\"train_micro_batch_size_per_gpu\": 1, \"optimizer\": {\"type\": "
                 "\"Adafactor\", \"params\": {\"lr\": 0.001, \"relative_step\": false, "
                 "\"scale_parameter\": false, \"eps\": [1e-29, 0.002], \"beta1\": 0.9, "
                 "\"decay_rate\": -0.5, \"clip_threshold\": 2, \"weight_decay\": 0.1}}, "
                 "\"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_num_steps\": 10}}}",
                 "o", 1, 0);
    s = zt_train_config_settings(c);
    assert_true(s->lr == 0.001f && !s->relative_step && !s->scale_parameter);
    assert_true(s->adafactor_eps1 == 1e-29f && s->adafactor_eps2 == 0.002f);
    assert_true(s->adafactor_beta1 == 0.9f && s->decay_rate == -0.5f && s->clip_threshold == 2.0f);
    assert_true(s->weight_decay == 0.1f);
    assert_true(zt_train_config_lr(c, 20) == 0.001);
    zt_train_config_destroy(c);
    /* DeepSpeed's FusedLamb: its defaults, and bing_bert's settings */
    c = parse_ok("{\"train_micro_batch_size_per_gpu\": 1, \"optimizer\": {\"type\": "
                 "\"Lamb\"}}", "o", 1, 0);
    s = zt_train_config_settings(c);
    assert_int_equal(s->optimizer, ZT_OPT_LAMB);
    assert_true(s->max_coeff == 10.0f && s->min_coeff == 0.01f && !s->eps_inside_sqrt);
    assert_true(s->lr == 1e-3f && s->beta1 == 0.9f && s->beta2 == 0.999f && s->eps == 1e-8f);
    assert_true(s->weight_decay == 0.0f && s->bias_correction == 1);
    zt_train_config_destroy(c);
    c = parse_ok("{\"train_micro_batch_size_per_gpu\": 1, \"optimizer\": {\"type\": "
                 "\"lamb\", \"params\": {\"lr\": 11e-3, \"weight_decay\": 0.01, "
                 "\"bias_correction\": false, \"max_coeff\": 0.3, \"min_coeff\": 0.01, "
                 "\"eps_inside_sqrt\": true, \"betas\": [0.8, 0.99]}}}", "o", 1, 0);
    s = zt_train_config_settings(c);
    assert_int_equal(s->optimizer, ZT_OPT_LAMB);
    assert_true(s->lr == 11e-3f && s->weight_decay == 0.01f && s->bias_correction == 0);
    assert_true(s->max_coeff == 0.3f && s->min_coeff == 0.01f && s->eps_inside_sqrt == 1);
    assert_true(s->beta1 == 0.8f && s->beta2 == 0.99f);
    zt_train_config_destroy(c);
    /* a pattern list without AdamW8bit does nothing, and says so */
    log_reset();
    c = parse_ok("{\"train_micro_batch_size_per_gpu\": 1, \"zerotrain\": "
                 "{\"fp32_optimizer_state\": [\"x\"]}}", "o", 1, 0);
    assert_non_null(strstr(logbuf, "zerotrain.fp32_optimizer_state: has no effect"));
    zt_train_config_destroy(c);
}

static void test_good_configs(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        const good_case *g = &good[i];
        char *json = g->json ? NULL : hf_filled(strstr(g->name, "ZeRO-2") ? HF_ZERO2 : HF_ZERO3);
        log_reset();
        zt_train_config *c = parse_ok(g->json ? g->json : json, "cfg", g->world, g->total_steps);
        const char *got = dump(zt_train_config_settings(c));
        if (strcmp(got, g->want))
            fail_msg("%s:\n got  %s\n want %s", g->name, got, g->want);
        /* only the expected notices, nothing else at WARN */
        char warns[8192] = "";
        for (const char *p = logbuf; *p; p = strchr(p, '\n') + 1)
            if (p[0] == 'W')
                strncat(warns, p, strcspn(p, "\n") + 1);
        if (strcmp(warns, g->notices))
            fail_msg("%s: notices\n got:\n%s want:\n%s", g->name, warns, g->notices);
        zt_train_config_destroy(c);
        free(json);
    }
}

static void test_hf_auto_resolution_is_logged(void **state)
{
    (void)state;
    char *json = hf_filled(HF_ZERO2);
    log_reset();
    zt_train_config *c = parse_ok(json, "ds_config_zero2.json", 2, 0);
    static const char *want[] = {
        "I ds_config_zero2.json: train_batch_size: \"auto\" -> 16 (train_batch_size 16 = micro "
        "batch 8 x accumulation 1 x world size 2)\n",
        "I ds_config_zero2.json: gradient_accumulation_steps: \"auto\" -> 1",
        "I ds_config_zero2.json: optimizer.params.lr: \"auto\" -> 5e-05 (the Hugging Face "
        "Trainer's learning_rate default)",
        "I ds_config_zero2.json: optimizer.params.weight_decay: \"auto\" -> 0 (the Hugging Face "
        "Trainer's weight_decay default)",
        "I ds_config_zero2.json: optimizer.params.betas: \"auto\" -> [0.9, 0.999]",
        "I ds_config_zero2.json: gradient_clipping: \"auto\" -> 1 (Hugging Face's max_grad_norm",
        "I ds_config_zero2.json: scheduler.params.warmup_max_lr: \"auto\" -> 5e-05 "
        "(optimizer.params.lr)",
        "I ds_config_zero2.json: fp16.enabled: \"auto\" -> false (the Hugging Face Trainer's "
        "fp16 and bf16 defaults)",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(logbuf, want[i]))
            fail_msg("missing log line: %s\nlog:\n%s", want[i], logbuf);
    assert_int_equal(log_warn, 0);
    zt_train_config_destroy(c);
    free(json);
}

/* ---- bad configs ------------------------------------------------------------------------ */

typedef struct bad_case {
    const char *name, *json;
    int world;
    int64_t total_steps;
    int code;
    int lines;               /* problems reported */
    const char *want[4];     /* each must appear in the message */
} bad_case;

#define MB "\"train_micro_batch_size_per_gpu\": 4, "

static const bad_case bad[] = {
    {"unknown top-level key, did you mean", "{" MB "\"trian_batch_size\": 8}", 1, 0,
     ZT_E_CONFIG, 1, {"src: trian_batch_size: unknown key (did you mean \"train_batch_size\"?)"}},
    {"unknown zero key, did you mean", "{" MB "\"zero_optimization\": {\"stgae\": 2}}", 1, 0,
     ZT_E_CONFIG, 1, {"src: zero_optimization.stgae: unknown key (did you mean \"stage\"?)"}},
    {"unknown optimizer key", "{" MB "\"optimizer\": {\"type\": \"AdamW\", \"parms\": {}}}", 1,
     0, ZT_E_CONFIG, 1, {"src: optimizer.parms: unknown key (did you mean \"params\"?)"}},
    {"unknown optimizer param, list of keys",
     "{" MB "\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"amsgrad\": false}}}", 1, 0,
     ZT_E_CONFIG, 1, {"src: optimizer.params.amsgrad: unknown key (optimizer.params takes lr, "
                      "betas, eps, weight_decay, adam_w_mode, torch_adam, bias_correction)"}},
    {"key at the wrong level",
     "{" MB "\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"gradient_clipping\": 1}}}", 1,
     0, ZT_E_CONFIG, 1, {"optimizer.params.gradient_clipping: unknown key (did you mean the "
                         "top-level \"gradient_clipping\"?)"}},
    {"unknown scheduler param", "{" MB "\"scheduler\": {\"type\": \"WarmupLR\", \"params\":"
     " {\"warmup_num_step\": 10}}}", 1, 0, ZT_E_CONFIG, 1,
     {"src: scheduler.params.warmup_num_step: unknown key (did you mean \"warmup_num_steps\"?)"}},
    {"unknown offload key", "{" MB "\"zero_optimization\": {\"stage\": 2, \"offload_optimizer\":"
     " {\"devise\": \"cpu\"}}}", 1, 0, ZT_E_CONFIG, 1,
     {"src: zero_optimization.offload_optimizer.devise: unknown key (did you mean \"device\"?)"}},
    {"unknown activation_checkpointing key",
     "{" MB "\"activation_checkpointing\": {\"partition_activation\": true}}", 1, 0, ZT_E_CONFIG,
     1, {"activation_checkpointing.partition_activation: unknown key (did you mean "
         "\"partition_activations\"?)"}},
    {"partition_activations (model parallelism only)",
     "{" MB "\"activation_checkpointing\": {\"partition_activations\": true}}", 1, 0,
     ZT_E_UNSUPPORTED, 1, {"activation_checkpointing.partition_activations: partitions "
                           "activations across model-parallel ranks"}},
    {"recompute auto without a limit", "{" MB "\"zerotrain\": {\"recompute\": \"auto\"}}",
     1, 0, ZT_E_CONFIG, 1, {"src: zerotrain.recompute: \"auto\" plans recomputation to fit "
                            "zerotrain.memory_limit: set the limit"}},
    {"recompute not a mode", "{" MB "\"zerotrain\": {\"recompute\": \"everything\"}}", 1, 0,
     ZT_E_CONFIG, 1, {"src: zerotrain.recompute: \"everything\" is not a mode: use \"none\""}},
    {"recompute every-k without K", "{" MB "\"zerotrain\": {\"recompute\": \"every-k:\"}}",
     1, 0, ZT_E_CONFIG, 1, {"src: zerotrain.recompute: \"every-k:\": K in \"every-k:K\" must be "
                            "a whole number from 1"}},
    {"recompute every-k:0", "{" MB "\"zerotrain\": {\"recompute\": \"every-k:0\"}}", 1, 0,
     ZT_E_CONFIG, 1, {"\"every-k:0\": K in"}},
    {"recompute not a string", "{" MB "\"zerotrain\": {\"recompute\": true}}", 1, 0,
     ZT_E_CONFIG, 1, {"src: zerotrain.recompute: expected a string, got true"}},
    {"cpu_checkpointing without full recomputation",
     "{" MB "\"activation_checkpointing\": {\"cpu_checkpointing\": true},"
     " \"zerotrain\": {\"recompute\": \"selective\"}}", 1, 0, ZT_E_CONFIG, 1,
     {"src: activation_checkpointing.cpu_checkpointing: offloads the layer inputs that "
      "zerotrain.recompute \"full\" or \"every-k:K\" keeps; with \"selective\" there are none"}},
    {"number_checkpoints without full recomputation",
     "{" MB "\"activation_checkpointing\": {\"number_checkpoints\": 3}}", 1, 0, ZT_E_CONFIG, 1,
     {"src: activation_checkpointing.number_checkpoints: sets how many layer inputs"}},
    {"unknown aio key, wrong nesting", "{" MB "\"zero_optimization\": {\"aio\": {}}}", 1, 0,
     ZT_E_CONFIG, 1, {"src: zero_optimization.aio: unknown key (did you mean the top-level "
                      "\"aio\"?)"}},
    {"unknown zerotrain key", "{" MB "\"zerotrain\": {\"thread\": 2}}", 1, 0, ZT_E_CONFIG, 1,
     {"src: zerotrain.thread: unknown key (did you mean \"threads\"?)"}},
    {"unknown key without a close match", "{" MB "\"fancy_feature\": true}", 1, 0, ZT_E_CONFIG, 1,
     {"src: fancy_feature: unknown key (neither a DeepSpeed key zerotrain knows nor a zerotrain "
      "one; docs/config.md lists them)"}},
    {"flattened key", "{" MB "\"zero_optimization.stage\": 2}", 1, 0, ZT_E_CONFIG, 1,
     {"src: zero_optimization.stage: unknown key (keys are nested: write \"stage\" inside the "
      "\"zero_optimization\" object)"}},
    {"wrong case", "{" MB "\"Zero_optimization\": {}}", 1, 0, ZT_E_CONFIG, 1,
     {"unknown key (did you mean \"zero_optimization\"? keys are case-sensitive)"}},
    {"wrong types", "{\"train_micro_batch_size_per_gpu\": \"4\", \"steps_per_print\": true,"
     " \"zero_optimization\": {\"stage\": 2.5, \"overlap_comm\": \"true\"}}", 1, 0, ZT_E_CONFIG,
     4, {"src: train_micro_batch_size_per_gpu: expected an integer, got the string \"4\" (write "
         "it without quotes)", "src: steps_per_print: expected an integer, got true",
         "src: zero_optimization.stage: must be a whole number, got 2.5",
         "src: zero_optimization.overlap_comm: expected true or false, got the string \"true\" "
         "(write it without quotes)"}},
    {"duplicate key", "{" MB "\"train_micro_batch_size_per_gpu\": 8}", 1, 0, ZT_E_CONFIG, 1,
     {"src: train_micro_batch_size_per_gpu: duplicate key"}},
    {"inconsistent batch sizes", "{\"train_batch_size\": 32, \"train_micro_batch_size_per_gpu\":"
     " 4, \"gradient_accumulation_steps\": 2}", 2, 0, ZT_E_CONFIG, 1,
     {"src: train_batch_size: 32 is not train_micro_batch_size_per_gpu 4 x "
      "gradient_accumulation_steps 2 x world size 2 = 16"}},
    {"batch sizes that do not divide", "{\"train_batch_size\": 30,"
     " \"train_micro_batch_size_per_gpu\": 4}", 2, 0, ZT_E_CONFIG, 1,
     {"src: train_batch_size: 30 is not a multiple of train_micro_batch_size_per_gpu 4 x world "
      "size 2 = 8, so gradient_accumulation_steps cannot be derived: use 24 or 32"}},
    {"train_batch_size not a multiple of the world size", "{\"train_batch_size\": 10}", 4, 0,
     ZT_E_CONFIG, 1, {"train_batch_size: 10 is not a multiple of the world size 4"}},
    {"no batch size", "{\"gradient_accumulation_steps\": 4}", 1, 0, ZT_E_CONFIG, 1,
     {"src: train_micro_batch_size_per_gpu: cannot derive the batch size"}},
    {"negative lr, betas out of range", "{" MB "\"optimizer\": {\"type\": \"AdamW\", \"params\":"
     " {\"lr\": -0.001, \"betas\": [0.9, 1.0], \"eps\": -1}}}", 1, 0, ZT_E_CONFIG, 3,
     {"src: optimizer.params.lr: must be >= 0, got -0.001",
      "src: optimizer.params.betas[1]: must be in [0, 1), got 1",
      "src: optimizer.params.eps: must be >= 0, got -1"}},
    {"bad stage", "{" MB "\"zero_optimization\": {\"stage\": 5}}", 1, 0, ZT_E_CONFIG, 1,
     {"src: zero_optimization.stage: must be 0 to 3, got 5"}},
    {"unknown scheduler type", "{" MB "\"scheduler\": {\"type\": \"WarmupCosine\"}}", 1, 0,
     ZT_E_CONFIG, 1, {"src: scheduler.type: must be one of \"WarmupLR\", \"WarmupDecayLR\", "
                      "\"WarmupCosineLR\", got \"WarmupCosine\" (did you mean "
                      "\"WarmupCosineLR\"?)"}},
    {"scheduler type in the wrong case", "{" MB "\"scheduler\": {\"type\": \"warmuplr\"}}", 1, 0,
     ZT_E_CONFIG, 1, {"(did you mean \"WarmupLR\"? names are case-sensitive)"}},
    {"DeepSpeed scheduler outside zerotrain's set", "{" MB "\"scheduler\": {\"type\": \"OneCycle\"}}", 1,
     0, ZT_E_UNSUPPORTED, 1, {"src: scheduler.type: \"OneCycle\" is not supported"}},
    {"parameter of another scheduler", "{" MB "\"scheduler\": {\"type\": \"WarmupLR\", \"params\":"
     " {\"total_num_steps\": 100}}}", 1, 0, ZT_E_CONFIG, 1,
     {"src: scheduler.params.total_num_steps: not a parameter of WarmupLR"}},
    {"decay without total_num_steps", "{" MB "\"scheduler\": {\"type\": \"WarmupDecayLR\"}}", 1, 0,
     ZT_E_CONFIG, 1, {"src: scheduler.params.total_num_steps: missing: WarmupDecayLR needs it"}},
    {"optimizer without type", "{" MB "\"optimizer\": {\"params\": {\"lr\": 0.001}}}", 1, 0,
     ZT_E_CONFIG, 1, {"src: optimizer.type: missing: the \"optimizer\" section needs it"}},
    {"fp16 master in fp16", "{" MB "\"fp16\": {\"enabled\": true, "
     "\"fp16_master_weights_and_grads\": true}}", 1, 0, ZT_E_UNSUPPORTED, 1,
     {"src: fp16.fp16_master_weights_and_grads: true is not supported: zerotrain keeps an fp32 "
      "master"}},
    {"fp16 scale below 0", "{" MB "\"fp16\": {\"enabled\": true, \"loss_scale\": -1}}", 1, 0,
     ZT_E_CONFIG, 1, {"src: fp16.loss_scale: must be >= 0, got -1"}},
    {"grad_accum_dtype", "{" MB "\"data_types\": {\"grad_accum_dtype\": \"int8\"}}", 1, 0,
     ZT_E_CONFIG, 1, {"src: data_types.grad_accum_dtype: must be one of \"fp32\", \"bf16\", "
                      "\"fp16\""}},
    {"fp16 and bf16", "{" MB "\"fp16\": {\"enabled\": true}, \"bf16\": {\"enabled\": true}}",
     1, 0, ZT_E_CONFIG, 1, {"src: fp16.enabled: fp16 and bf16 are both enabled"}},
    {"Adam without adam_w_mode", "{" MB "\"optimizer\": {\"type\": \"Adam\", \"params\":"
     " {\"adam_w_mode\": false}}}", 1, 0, ZT_E_UNSUPPORTED, 1,
     {"src: optimizer.params.adam_w_mode: false selects Adam with L2 regularisation, which is "
      "not supported"}},
    {"other optimizer", "{" MB "\"optimizer\": {\"type\": \"OneBitLamb\"}}", 1, 0,
     ZT_E_UNSUPPORTED, 1,
     {"src: optimizer.type: \"OneBitLamb\" is not supported: zerotrain implements AdamW, "
      "AdamW8bit, Adafactor and Lamb"}},
    {"Lamb: a clamp upside down, AdamW8bit's parameter",
     "{" MB "\"optimizer\": {\"type\": \"Lamb\", \"params\": {\"max_coeff\": 0.1,"
     " \"min_coeff\": 0.5, \"min_8bit_size\": 10}}}", 1, 0, ZT_E_CONFIG, 2,
     {"src: optimizer.params.min_8bit_size: not a parameter of Lamb: remove it; Lamb takes lr, "
      "betas, eps, weight_decay, bias_correction, max_coeff, min_coeff, eps_inside_sqrt",
      "src: optimizer.params.min_coeff: 0.5 is above max_coeff 0.1"}},
    {"AdamW with Lamb's clamp",
     "{" MB "\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"max_coeff\": 1}}}", 1, 0,
     ZT_E_CONFIG, 1, {"src: optimizer.params.max_coeff: not a parameter of AdamW"}},
    {"Adafactor with an lr and relative steps",
     "{" MB "\"optimizer\": {\"type\": \"Adafactor\", \"params\": {\"lr\": 0.001}}}", 1, 0,
     ZT_E_CONFIG, 1, {"src: optimizer.params.lr: Adafactor with relative_step true computes its "
                      "own step size"}},
    {"Adafactor without relative steps needs lr",
     "{" MB "\"optimizer\": {\"type\": \"Adafactor\", \"params\": {\"relative_step\": false}}}",
     1, 0, ZT_E_CONFIG, 1, {"src: optimizer.params.lr: missing: Adafactor with relative_step "
                            "false needs a learning rate"}},
    {"Adafactor: AdamW's parameters and one eps",
     "{" MB "\"optimizer\": {\"type\": \"adafactor\", \"params\": {\"betas\": [0.9, 0.99],"
     " \"eps\": 1e-8, \"warmup_init\": true, \"relative_step\": false, \"lr\": 1e-3}}}", 1, 0,
     ZT_E_CONFIG, 3,
     {"src: optimizer.params.betas: not a parameter of Adafactor: remove it; Adafactor takes lr, "
      "eps, weight_decay, clip_threshold, decay_rate, beta1, scale_parameter, relative_step, "
      "warmup_init", "src: optimizer.params.eps: Adafactor takes [eps1, eps2]",
      "src: optimizer.params.warmup_init: true needs relative_step true"}},
    {"Adafactor's relative steps and a scheduler",
     "{" MB "\"optimizer\": {\"type\": \"Adafactor\"}, \"scheduler\": {\"type\": \"WarmupLR\"}}",
     1, 0, ZT_E_CONFIG, 1, {"src: scheduler: Adafactor with relative_step true follows its own "
                            "schedule"}},
    {"Adafactor: decay_rate, beta1, clip_threshold out of range",
     "{" MB "\"optimizer\": {\"type\": \"Adafactor\", \"params\": {\"decay_rate\": 0,"
     " \"beta1\": 1, \"clip_threshold\": 0}}}", 1, 0, ZT_E_CONFIG, 3,
     {"src: optimizer.params.decay_rate: must be < 0, got 0",
      "src: optimizer.params.beta1: must be in [0, 1), got 1",
      "src: optimizer.params.clip_threshold: must be > 0"}},
    {"AdamW with Adafactor's parameters",
     "{" MB "\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"eps\": [1e-30, 1e-3],"
     " \"min_8bit_size\": 10, \"clip_threshold\": 1}}}", 1, 0, ZT_E_CONFIG, 3,
     {"src: optimizer.params.min_8bit_size: not a parameter of AdamW: remove it; AdamW takes lr, "
      "betas, eps, weight_decay, adam_w_mode, torch_adam, bias_correction",
      "src: optimizer.params.clip_threshold: not a parameter of AdamW",
      "src: optimizer.params.eps: [eps1, eps2] is Adafactor's; AdamW takes one number"}},
    {"AdamW8bit: bad min_8bit_size and an empty fp32 pattern",
     "{" MB "\"optimizer\": {\"type\": \"AdamW8bit\", \"params\": {\"min_8bit_size\": -1}},"
     " \"zerotrain\": {\"fp32_optimizer_state\": [\"\"]}}", 1, 0, ZT_E_CONFIG, 2,
     {"src: optimizer.params.min_8bit_size: must be >= 0, got -1",
      "src: zerotrain.fp32_optimizer_state[0]: an empty pattern matches every parameter (to "
      "keep all of them in fp32"}},
    {"bitsandbytes' paged optimizer", "{" MB "\"optimizer\": {\"type\": \"PagedAdamW8bit\"}}",
     1, 0, ZT_E_UNSUPPORTED, 1, {"src: optimizer.type: \"PagedAdamW8bit\" is not supported"}},
    {"amp enabled", "{" MB "\"amp\": {\"enabled\": true, \"opt_level\": \"O1\"}}", 1, 0,
     ZT_E_UNSUPPORTED, 1, {"src: amp: Apex AMP (NVIDIA GPU mixed precision) is not supported"}},
    {"deprecated cpu_offload beside offload_optimizer", "{" MB "\"zero_optimization\": "
     "{\"stage\": 2, \"cpu_offload\": true, \"offload_optimizer\": {\"device\": \"cpu\"}}}",
     1, 0, ZT_E_CONFIG, 1, {"src: zero_optimization.cpu_offload: deprecated DeepSpeed key given "
                            "together with offload_optimizer, which replaced it: remove it"}},
    {"max_grad_norm as an optimizer parameter (DeepSpeed's engine refuses it)",
     "{" MB "\"optimizer\": {\"type\": \"Adam\", \"params\": {\"max_grad_norm\": 1.0}}}", 1,
     0, ZT_E_CONFIG, 1, {"src: optimizer.params.max_grad_norm: not an optimizer parameter "
                         "(DeepSpeed refuses it too): use the top-level gradient_clipping"}},
    {"auto that cannot be derived: warmup_num_steps", "{" MB "\"scheduler\": {\"type\":"
     " \"WarmupLR\", \"params\": {\"warmup_num_steps\": \"auto\"}}}", 1, 0, ZT_E_CONFIG, 1,
     {"src: scheduler.params.warmup_num_steps: \"auto\" cannot be resolved (Hugging Face "
      "computes it from TrainingArguments warmup_steps or warmup_ratio, which zerotrain does "
      "not see): set a number"}},
    {"auto that cannot be derived: total_num_steps", "{" MB "\"scheduler\": {\"type\":"
     " \"WarmupCosineLR\", \"params\": {\"total_num_steps\": \"auto\"}}}", 1, 0, ZT_E_CONFIG, 1,
     {"src: scheduler.params.total_num_steps: \"auto\" needs the run's total number of "
      "optimizer steps"}},
    {"auto where nothing derives it", "{" MB "\"zero_optimization\": {\"stage\": \"auto\"}}", 1,
     0, ZT_E_CONFIG, 1, {"src: zero_optimization.stage: \"auto\" is not accepted here"}},
    {"nvme without a path", "{" MB "\"zero_optimization\": {\"stage\": 3, \"offload_param\":"
     " {\"device\": \"nvme\"}}}", 1, 0, ZT_E_CONFIG, 1,
     {"src: zero_optimization.offload_param.nvme_path: missing: device \"nvme\" needs"}},
    {"two seeds", "{" MB "\"seed\": 1, \"zerotrain\": {\"seed\": 2}}", 1, 0, ZT_E_CONFIG, 1,
     {"src: seed: 1 differs from zerotrain.seed 2"}},
    {"unsupported and config problems together give ZT_E_CONFIG",
     "{" MB "\"fp16\": {\"enabled\": true, \"fp16_master_weights_and_grads\": true}, "
     "\"stage\": 2}", 1, 0, ZT_E_CONFIG, 2,
     {"src: stage: unknown key (did you mean \"zero_optimization.stage\"?)",
      "src: fp16.fp16_master_weights_and_grads: true is not supported"}},
    {"not an object", "[1, 2]", 1, 0, ZT_E_CONFIG, 1,
     {"src: the config must be a JSON object ({...}), got an array"}},
    {"not JSON", "{\n  \"train_micro_batch_size_per_gpu\": 4,\n  \"x\": tru\n}", 1, 0,
     ZT_E_FORMAT, 1, {"src:3:"}},
};

static void test_bad_configs(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const bad_case *b = &bad[i];
        zt_train_config *c = (zt_train_config *)&c; /* must be reset to NULL */
        log_reset();
        int rc = zt_train_config_parse(b->json, "src", b->world, b->total_steps, &c);
        const char *msg = zt_last_error();
        if (rc != b->code)
            fail_msg("%s: rc %d (%s), want %d (%s):\n%s", b->name, rc, zt_strerror(rc), b->code,
                     zt_strerror(b->code), msg);
        assert_null(c);
        for (int j = 0; j < 4 && b->want[j]; j++)
            if (!strstr(msg, b->want[j]))
                fail_msg("%s: message lacks\n  %s\ngot:\n%s", b->name, b->want[j], msg);
        if (count_lines(msg) != b->lines)
            fail_msg("%s: %d lines, want %d:\n%s", b->name, count_lines(msg), b->lines, msg);
        /* no notices from a config that failed */
        assert_int_equal(log_warn + log_info, 0);
    }
}

static void test_hf_examples_verbatim(void **state)
{
    (void)state;
    /* As shipped, each needs exactly the two values only the Trainer can fill. */
    const char *files[] = {HF_ZERO2, HF_ZERO3};
    for (int i = 0; i < 2; i++) {
        zt_train_config *c = NULL;
        int rc = zt_train_config_parse(files[i], "ds.json", 1, 0, &c);
        const char *msg = zt_last_error();
        assert_int_equal(rc, ZT_E_CONFIG);
        assert_int_equal(count_lines(msg), 2);
        assert_non_null(strstr(msg, "ds.json: scheduler.params.warmup_num_steps: \"auto\" cannot "
                                    "be resolved"));
        assert_non_null(strstr(msg, "ds.json: train_micro_batch_size_per_gpu: cannot derive the "
                                    "batch size"));
    }
}

static void test_three_problems_three_lines(void **state)
{
    (void)state;
    zt_train_config *c = NULL;
    int rc = zt_train_config_parse("{\"train_micro_batch_size_per_gpu\": 0, \"optimizer\":"
                                   " {\"type\": \"AdamW\", \"params\": {\"lr\": -1}},"
                                   " \"zero_optimization\": {\"stgae\": 1}}",
                                   "three.json", 1, 0, &c);
    const char *msg = zt_last_error();
    assert_int_equal(rc, ZT_E_CONFIG);
    assert_null(c);
    assert_string_equal(msg,
                        "three.json: train_micro_batch_size_per_gpu: must be >= 1, got 0\n"
                        "three.json: optimizer.params.lr: must be >= 0, got -1\n"
                        "three.json: zero_optimization.stgae: unknown key (did you mean "
                        "\"stage\"?)");
}

static void test_many_problems_fit_the_message(void **state)
{
    (void)state;
    /* 400 unknown keys: the message stays within the 8 KiB buffer and says how many more */
    char *json = malloc(400 * 32 + 64);
    size_t len = (size_t)sprintf(json, "{\"train_micro_batch_size_per_gpu\": 1");
    for (int i = 0; i < 400; i++)
        len += (size_t)sprintf(json + len, ", \"unknown_key_%03d\": 1", i);
    strcpy(json + len, "}");
    zt_train_config *c = NULL;
    assert_int_equal(zt_train_config_parse(json, "big.json", 1, 0, &c), ZT_E_CONFIG);
    const char *msg = zt_last_error();
    assert_true(strlen(msg) < 8192);
    assert_non_null(strstr(msg, "big.json: unknown_key_000: unknown key"));
    const char *more = strstr(msg, "big.json: ... and ");
    assert_non_null(more);
    int shown = count_lines(msg) - 1, rest = atoi(more + strlen("big.json: ... and "));
    assert_int_equal(shown + rest, 400);
    free(json);
}

/* ---- notices ---------------------------------------------------------------------------- */

static void test_notices_for_keys_that_do_not_apply(void **state)
{
    (void)state;
    log_reset();
    zt_train_config *c = parse_ok(
        "{\"train_micro_batch_size_per_gpu\": 4,"
        " \"wall_clock_breakdown\": true,"         /* notice */
        " \"memory_breakdown\": false,"            /* asks for nothing: silent */
        " \"flops_profiler\": {\"enabled\": false, \"profile_step\": 1},"   /* silent */
        " \"tensorboard\": {\"enabled\": true, \"output_path\": \"tb/\"},"  /* notice */
        " \"communication_data_type\": \"fp32\","  /* what zerotrain does: silent */
        " \"prescale_gradients\": true,"           /* notice */
        " \"amp\": {\"enabled\": \"auto\", \"opt_level\": \"auto\"},"       /* silent */
        " \"elasticity\": {\"enabled\": false},"   /* silent */
        " \"fp16\": {\"enabled\": false, \"loss_scale\": 0},"              /* silent */
        " \"zero_optimization\": {\"stage\": 2,"
        "   \"ignore_unused_parameters\": true,"   /* DeepSpeed's default: silent */
        "   \"zero_quantized_weights\": true,"     /* notice */
        "   \"offload_param\": {\"device\": \"cpu\"}}," /* stage 2: notice, not applied */
        " \"checkpoint\": {\"load_universal\": true}," /* notice */
        " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-4}},"
        " \"scheduler\": {\"type\": \"WarmupDecayLR\", \"params\": {\"warmup_num_steps\": 1,"
        "   \"total_num_steps\": 50}}}",
        "ds.json", 1, 100);
    const char *want =
        "W ds.json: wall_clock_breakdown: ignored: use `zerotrain train --profile` for time per "
        "kernel kind\n"
        "W ds.json: tensorboard: ignored: no built-in monitoring backend; the command logs to "
        "the terminal\n"
        "W ds.json: prescale_gradients: ignored: the reduction adds in fp32 (16-bit sums are "
        "rounded from it); an fp16 sum that overflows skips the step and lowers the loss "
        "scale, as any overflow\n"
        "W ds.json: zero_optimization.zero_quantized_weights: ignored: ZeRO++ quantized "
        "communication is not offered by zerotrain (a DeepSpeed feature outside its scope); "
        "communication is in the parameters' and gradients' own dtypes\n"
        "W ds.json: checkpoint: ignored: DeepSpeed checkpoint-layout options; zerotrain writes "
        "its own checkpoints\n"
        "W ds.json: scheduler.params.warmup_num_steps: 1 acts as 2 (DeepSpeed warms up over at "
        "least 2 steps): set 2, or remove the warmup with a constant lr\n"
        "W ds.json: scheduler.params.warmup_max_lr: not given: WarmupDecayLR peaks at "
        "DeepSpeed's default 0.001, not at optimizer.params.lr 0.0001: set it (or \"auto\") to "
        "choose\n"
        "W ds.json: scheduler.params.total_num_steps: 50, but this run has 100 steps: the "
        "schedule will stay at its final lr after its end; set \"auto\" to use the run's length\n"
        "W ds.json: zero_optimization.offload_param: ignored with stage 2 (DeepSpeed offloads "
        "parameters with ZeRO stage 3 only): set zero_optimization.stage to 3, or remove it\n";
    char warns[8192] = "";
    for (const char *p = logbuf; *p; p = strchr(p, '\n') + 1)
        if (p[0] == 'W')
            strncat(warns, p, strcspn(p, "\n") + 1);
    assert_string_equal(warns, want);
    const zt_train_settings *s = zt_train_config_settings(c);
    assert_int_equal(s->offload_param, ZT_OFFLOAD_NONE);
    assert_int_equal(s->zero_stage, 2);
    zt_train_config_destroy(c);

    /* nothing is logged when the callback's level excludes it */
    log_reset();
    zt_log_set(capture_log, NULL, ZT_LOG_ERROR);
    c = parse_ok("{\"train_micro_batch_size_per_gpu\": 4, \"wall_clock_breakdown\": true}", "x",
                 1, 0);
    zt_train_config_destroy(c);
    zt_log_set(capture_log, NULL, ZT_LOG_INFO);
    assert_string_equal(logbuf, "");
}

/* ---- learning-rate schedules ------------------------------------------------------------- */

/* The expected values below are written from the schedule definitions (DeepSpeed's docs:
 * warmup from min to max over W steps, then constant / linear to 0 at T / cosine to
 * cos_min_ratio at T), with optimizer update k running at scheduler iteration k - 1. */

static void expect_lr(const zt_train_config *c, int64_t step, double want, const char *what)
{
    double got = zt_train_config_lr(c, step);
    double tol = 1e-14 * fabs(want) + 1e-300;
    if (!(fabs(got - want) <= tol))
        fail_msg("%s, step %lld: lr %.17g, want %.17g", what, (long long)step, got, want);
}

static void test_lr_constant(void **state)
{
    (void)state;
    zt_train_config *c = parse_ok("{\"train_micro_batch_size_per_gpu\": 1, \"optimizer\":"
                                  " {\"type\": \"AdamW\", \"params\": {\"lr\": 3e-4}}}", "c", 1, 0);
    for (int64_t k = 0; k < 5; k++)
        assert_true(zt_train_config_lr(c, k) == 3e-4); /* the JSON double, not the float */
    assert_true(zt_train_config_lr(c, 1000000) == 3e-4);
    zt_train_config_destroy(c);
    assert_true(zt_train_config_lr(NULL, 3) == 0.0);
}

static void test_lr_warmup_linear(void **state)
{
    (void)state;
    /* min 1e-5, max 1e-3 over W = 10: update k uses iteration k-1, lr = min + (max-min)(k-1)/10 */
    zt_train_config *c = parse_ok(
        "{\"train_micro_batch_size_per_gpu\": 1, \"scheduler\": {\"type\": \"WarmupLR\","
        " \"params\": {\"warmup_min_lr\": 1e-5, \"warmup_max_lr\": 1e-3, \"warmup_num_steps\": 10,"
        " \"warmup_type\": \"linear\"}}}", "c", 1, 0);
    expect_lr(c, 0, 1e-5, "before the first scheduler step (warmup_min_lr)");
    expect_lr(c, 1, 1e-5, "iteration 0");
    expect_lr(c, 2, 1e-5 + 0.99e-3 * 0.1, "iteration 1");
    expect_lr(c, 6, 1e-5 + 0.99e-3 * 0.5, "iteration 5");
    expect_lr(c, 10, 1e-5 + 0.99e-3 * 0.9, "last warmup iteration");
    expect_lr(c, 11, 1e-3, "warmup boundary");
    expect_lr(c, 12, 1e-3, "after warmup");
    expect_lr(c, 100000, 1e-3, "long after");
    zt_train_config_destroy(c);
}

static void test_lr_warmup_log(void **state)
{
    (void)state;
    /* HF-style: max = optimizer lr (auto), min 0, W = 100, log curve ln(k) / ln(100) */
    zt_train_config *c = parse_ok(
        "{\"train_micro_batch_size_per_gpu\": 1, \"optimizer\": {\"type\": \"AdamW\", \"params\":"
        " {\"lr\": 2e-4}}, \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_min_lr\":"
        " \"auto\", \"warmup_max_lr\": \"auto\", \"warmup_num_steps\": 100}}}", "c", 1, 0);
    expect_lr(c, 0, 0.0, "before the first scheduler step");
    expect_lr(c, 1, 0.0, "iteration 0: ln 1 = 0");
    expect_lr(c, 2, 2e-4 * log(2.0) / log(100.0), "iteration 1");
    expect_lr(c, 10, 2e-4 * 0.5, "iteration 9: ln 10 / ln 100 = 1/2");
    expect_lr(c, 100, 2e-4, "iteration 99: ln 100 / ln 100");
    expect_lr(c, 101, 2e-4, "warmup boundary");
    expect_lr(c, 5000, 2e-4, "long after");
    zt_train_config_destroy(c);

    /* warmup_num_steps 1 acts as 2 (DeepSpeed's max(2, W)) */
    c = parse_ok("{\"train_micro_batch_size_per_gpu\": 1, \"scheduler\": {\"type\": \"WarmupLR\","
                 " \"params\": {\"warmup_max_lr\": 1e-3, \"warmup_num_steps\": 1}}}", "c", 1, 0);
    expect_lr(c, 1, 0.0, "W=1: iteration 0");
    expect_lr(c, 2, 1e-3 * log(2.0) / log(2.0), "W=1 acts as 2: iteration 1");
    expect_lr(c, 3, 1e-3, "W=1 acts as 2: iteration 2");
    zt_train_config_destroy(c);
}

static void test_lr_warmup_decay(void **state)
{
    (void)state;
    /* linear warmup to 1e-3 over 10, then linear to 0 at T = 100: (T - it) / (T - W) */
    zt_train_config *c = parse_ok(
        "{\"train_micro_batch_size_per_gpu\": 1, \"scheduler\": {\"type\": \"WarmupDecayLR\","
        " \"params\": {\"warmup_max_lr\": 1e-3, \"warmup_num_steps\": 10, \"warmup_type\":"
        " \"linear\", \"total_num_steps\": 100}}}", "c", 1, 0);
    expect_lr(c, 0, 0.0, "before the first scheduler step");
    expect_lr(c, 5, 1e-3 * 0.4, "warmup iteration 4");
    expect_lr(c, 10, 1e-3 * 0.9, "last warmup iteration");
    expect_lr(c, 11, 1e-3, "warmup boundary (iteration 10: 90/90)");
    expect_lr(c, 12, 1e-3 * 89.0 / 90.0, "iteration 11");
    expect_lr(c, 56, 1e-3 * 0.5, "iteration 55: half way");
    expect_lr(c, 100, 1e-3 / 90.0, "iteration 99");
    expect_lr(c, 101, 0.0, "iteration 100 = total_num_steps");
    expect_lr(c, 150, 0.0, "past total_num_steps (clamped at 0)");
    zt_train_config_destroy(c);

    /* with warmup_min_lr the decay ends at warmup_min_lr, not 0 */
    c = parse_ok("{\"train_micro_batch_size_per_gpu\": 1, \"scheduler\": {\"type\":"
                 " \"WarmupDecayLR\", \"params\": {\"warmup_min_lr\": 1e-5, \"warmup_max_lr\":"
                 " 1e-3, \"warmup_num_steps\": 10, \"total_num_steps\": \"auto\"}}}", "c", 1, 40);
    expect_lr(c, 0, 1e-5, "before the first scheduler step");
    expect_lr(c, 11, 1e-3, "warmup boundary");
    expect_lr(c, 26, 1e-5 + (1e-3 - 1e-5) * 15.0 / 30.0, "iteration 25 of 40");
    expect_lr(c, 41, 1e-5, "iteration 40 = total (auto = the run's 40 steps)");
    expect_lr(c, 99, 1e-5, "past total");
    zt_train_config_destroy(c);
}

static void test_lr_warmup_cosine(void **state)
{
    (void)state;
    const double pi = 3.14159265358979323846, lr = 1e-3, wmr = 0.1, cmr = 0.01;
    /* lr 1e-3, warmup ratio 0.1 -> 1 linearly over 10, cosine from 1 to 0.01 at T = 110 */
    zt_train_config *c = parse_ok(
        "{\"train_micro_batch_size_per_gpu\": 1, \"optimizer\": {\"type\": \"AdamW\", \"params\":"
        " {\"lr\": 1e-3}}, \"scheduler\": {\"type\": \"WarmupCosineLR\", \"params\":"
        " {\"warmup_num_steps\": 10, \"warmup_type\": \"linear\", \"total_num_steps\": 110,"
        " \"warmup_min_ratio\": 0.1, \"cos_min_ratio\": 0.01}}}", "c", 1, 0);
    expect_lr(c, 0, 0.0, "before the first scheduler step (DeepSpeed sets 0)");
    expect_lr(c, 1, lr * wmr, "iteration 0");
    expect_lr(c, 6, lr * (wmr + 0.5 * (1 - wmr)), "iteration 5");
    expect_lr(c, 10, lr * (wmr + 0.9 * (1 - wmr)), "last warmup iteration");
    /* after the warmup, iteration it is (it - W + 1) / (T - W) of the way down */
    expect_lr(c, 11, lr * (cmr + (1 - cmr) * 0.5 * (1 + cos(pi * 0.01))), "warmup boundary");
    expect_lr(c, 60, lr * (cmr + (1 - cmr) * 0.5), "half way (iteration 59)");
    expect_lr(c, 85, lr * (cmr + (1 - cmr) * 0.5 * (1 + cos(pi * 0.75))), "iteration 84");
    expect_lr(c, 110, lr * cmr, "iteration 109: the end");
    expect_lr(c, 111, lr * cmr, "past total_num_steps (stays at cos_min_ratio)");
    expect_lr(c, 400, lr * cmr, "long past total_num_steps");
    zt_train_config_destroy(c);

    /* defaults: log warmup over 1000 from ratio 0, cos_min_ratio 0.0001 */
    c = parse_ok("{\"train_micro_batch_size_per_gpu\": 1, \"scheduler\": {\"type\":"
                 " \"WarmupCosineLR\", \"params\": {\"total_num_steps\": 3000}}}", "c", 1, 0);
    expect_lr(c, 1, 0.0, "default: iteration 0");
    /* (and the optimizer's default lr 1e-3, DeepSpeed's) */
    expect_lr(c, 1000, 1e-3 * log(1000.0) / log(1000.0), "default: last warmup iteration");
    expect_lr(c, 2000, 1e-3 * (1e-4 + (1 - 1e-4) * 0.5), "default: half way");
    expect_lr(c, 3001, 1e-3 * 1e-4, "default: after the end");
    zt_train_config_destroy(c);
}

/* ---- files, API misuse, accessors ------------------------------------------------------ */

static void test_load_files(void **state)
{
    (void)state;
    char dir[] = "/tmp/zt_config_XXXXXX", path[300];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/ds.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("\xEF\xBB\xBF{\"train_micro_batch_size_per_gpu\": 2, \"zerotrain\":"
          " {\"no_decay\": [\"bias\", \"LayerNorm.weight\"]}}", f);
    fclose(f);
    zt_train_config *c = NULL;
    assert_int_equal(zt_train_config_load(path, 1, 0, &c), 0);
    assert_int_equal(zt_train_config_settings(c)->micro_batch_size, 2);
    assert_int_equal(zt_train_config_settings(c)->n_no_decay, 2);
    assert_string_equal(zt_train_config_no_decay(c, 0), "bias");
    assert_string_equal(zt_train_config_no_decay(c, 1), "LayerNorm.weight");
    assert_null(zt_train_config_no_decay(c, 2));
    assert_null(zt_train_config_no_decay(c, -1));
    zt_train_config_destroy(c);

    /* messages name the file */
    f = fopen(path, "w");
    fputs("{\"train_micro_batch_size_per_gpu\": 2, \"zero_optimization\": {\"stgae\": 1}}", f);
    fclose(f);
    assert_int_equal(zt_train_config_load(path, 1, 0, &c), ZT_E_CONFIG);
    char want[400];
    snprintf(want, sizeof want, "%s: zero_optimization.stgae: unknown key", path);
    assert_non_null(strstr(zt_last_error(), want));

    snprintf(path, sizeof path, "%s/missing.json", dir);
    assert_int_equal(zt_train_config_load(path, 1, 0, &c), -ENOENT);
    assert_non_null(strstr(zt_last_error(), "missing.json: cannot open"));
    assert_int_equal(zt_train_config_load(dir, 1, 0, &c), ZT_E_CONFIG);
    assert_non_null(strstr(zt_last_error(), "not a regular file"));
    assert_null(c);
    rmdir(dir);
}

static void test_api_misuse(void **state)
{
    (void)state;
    zt_train_config *c = NULL;
    assert_int_equal(zt_train_config_parse(NULL, "x", 1, 0, &c), ZT_E_INVAL);
    assert_int_equal(zt_train_config_parse("{}", "x", 1, 0, NULL), ZT_E_INVAL);
    assert_int_equal(zt_train_config_parse("{}", "x", 0, 0, &c), ZT_E_INVAL);
    assert_non_null(strstr(zt_last_error(), "world_size"));
    assert_int_equal(zt_train_config_parse("{}", "x", 1, -5, &c), ZT_E_INVAL);
    assert_int_equal(zt_train_config_load(NULL, 1, 0, &c), ZT_E_INVAL);
    assert_null(zt_train_config_settings(NULL));
    assert_null(zt_train_config_no_decay(NULL, 0));
    zt_train_config_destroy(NULL);
    /* a NULL source is named "config" */
    assert_int_equal(zt_train_config_parse("{\"x\": 1}", NULL, 1, 0, &c), ZT_E_CONFIG);
    assert_non_null(strstr(zt_last_error(), "config: x: unknown key"));
}

/* ---- the generated reference ------------------------------------------------------------ */

static void test_reference_is_docs_config_md(void **state)
{
    (void)state;
    const char *ref = zt_train_config_reference();
    const char *root = getenv("ZT_REPO_ROOT");
    char path[1024];
    snprintf(path, sizeof path, "%s/docs/config.md", root && *root ? root : ".");
    assert_ptr_equal(ref, zt_train_config_reference()); /* built once */
    /* one table row per key path, the reference names every section */
    assert_non_null(strstr(ref, "| `zero_optimization.offload_param.max_in_cpu` |"));
    assert_non_null(strstr(ref, "| `scheduler.params.cos_min_ratio` |"));
    assert_non_null(strstr(ref, "## DeepSpeed keys that do not apply"));
    assert_non_null(strstr(ref, "| `wall_clock_breakdown` |"));

    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s (%s): run from the repository root or set ZT_REPO_ROOT; "
                 "generate it with `build/zerotrain config-reference > docs/config.md`", path,
                 strerror(errno));
    size_t cap = strlen(ref) + 2, n;
    char *text = malloc(cap + 1);
    assert_non_null(text);
    n = fread(text, 1, cap, f);
    fclose(f);
    text[n] = '\0';
    int same = n == strlen(ref) && memcmp(text, ref, n) == 0;
    free(text);
    if (!same)
        fail_msg("docs/config.md is stale: regenerate it with "
                 "`build/zerotrain config-reference > docs/config.md`");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_optimizer_settings),
        cmocka_unit_test(test_good_configs),
        cmocka_unit_test(test_aio_and_gradients),
        cmocka_unit_test(test_recompute_settings),
        cmocka_unit_test(test_hf_auto_resolution_is_logged),
        cmocka_unit_test(test_bad_configs),
        cmocka_unit_test(test_hf_examples_verbatim),
        cmocka_unit_test(test_bias_correction),
        cmocka_unit_test(test_three_problems_three_lines),
        cmocka_unit_test(test_many_problems_fit_the_message),
        cmocka_unit_test(test_notices_for_keys_that_do_not_apply),
        cmocka_unit_test(test_lr_constant),
        cmocka_unit_test(test_lr_warmup_linear),
        cmocka_unit_test(test_lr_warmup_log),
        cmocka_unit_test(test_lr_warmup_decay),
        cmocka_unit_test(test_lr_warmup_cosine),
        cmocka_unit_test(test_load_files),
        cmocka_unit_test(test_api_misuse),
        cmocka_unit_test(test_reference_is_docs_config_md),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
