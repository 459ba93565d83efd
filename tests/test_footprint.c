/* test_footprint.c - the one footprint (engine/footprint.c) against what the engine
 * allocates and what the planner predicts. For each stage, optimizer and offload placement
 * (bert-tiny, one rank): after a step, the engine's footprint per category equals the bytes
 * its allocations hold (the memory counters' growth since before zt_engine_create: params,
 * grads, optimizer, comm), and the planner's footprint equals the engine's except where the
 * planner can only predict: stage 3's gather pool (a budget), the offload's working buffers
 * and the 8-bit state of the fp32-state tensors (estimated from whole tensors). Two engines
 * in one process report their own bytes each. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zerotrain.h"
#include "../engine/footprint.h"
#include "../models/model.h"
#include "tmpdir.h"

static char tmpdir[256];

static int setup(void **state)
{
    (void)state;
    tmpdir_make(tmpdir, sizeof tmpdir, "zt_footprint");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return tmpdir_remove(tmpdir);
}

typedef struct { int64_t ids[16], mask[16], tt[16], labels[16]; } batch16;

static zt_batch make_batch(batch16 *s)
{
    for (int i = 0; i < 16; i++) {
        s->ids[i] = 5 + (i * 37) % 500;
        s->mask[i] = 1;
        s->tt[i] = 0;
        s->labels[i] = i % 3 == 0 ? (i * 11) % 512 : -100;
    }
    return (zt_batch){2, 8, s->ids, s->mask, s->tt, s->labels, 0, 0, 0, NULL, NULL, NULL, 0, NULL};
}

typedef struct { int stage, opt, off_opt, off_par, accum, precision, grad_dtype; } fp_case;

static void check_case(const fp_case *k)
{
    zt_config c;
    zt_engine *e = NULL;
    zt_mem_report m0, m1;
    zt_footprint now, plan;
    batch16 s;
    zt_fb_result r;
    char what[160];
    snprintf(what, sizeof what, "stage %d optimizer %d offload_optimizer %d offload_param %d "
             "accumulation %d precision %d gradients %d", k->stage, k->opt, k->off_opt,
             k->off_par, k->accum, k->precision, k->grad_dtype);
    zt_config_init(&c);
    c.model_preset = "bert-tiny";
    c.vocab_size = 512;
    c.zero_stage = k->stage;
    c.optimizer = k->opt;
    if (k->opt == ZT_OPT_ADAFACTOR)
        c.lr = 0.0f; /* relative steps */
    c.offload_optimizer = k->off_opt;
    c.offload_param = k->off_par;
    c.nvme_path = tmpdir;
    c.grad_accum_steps = k->accum;
    c.offload_gradients = k->off_opt && k->stage >= 2 ? 1 : 0;
    c.precision = k->precision;
    c.grad_accum_dtype = k->grad_dtype;
    zt_memory_report(&m0);
    if (zt_engine_create(&c, MPI_COMM_NULL, &e) != 0)
        fail_msg("%s: %s", what, zt_last_error());
    zt_batch b = make_batch(&s);
    for (int a = 0; a < k->accum; a++)
        if (zt_engine_forward_backward(e, &b, 0, &r) != 0)
            fail_msg("%s: %s", what, zt_engine_last_error(e));
    if (zt_engine_step(e, 1e-3f, NULL) != 0)
        fail_msg("%s: %s", what, zt_engine_last_error(e));
    zt_memory_report(&m1);
    zt_engine_footprints(e, &now, &plan);
    const double held[4] = {
        (double)(m1.current[ZT_MEM_PARAMS] - m0.current[ZT_MEM_PARAMS]),
        (double)(m1.current[ZT_MEM_GRADS] - m0.current[ZT_MEM_GRADS]),
        (double)(m1.current[ZT_MEM_OPTIMIZER] - m0.current[ZT_MEM_OPTIMIZER]),
        (double)(m1.current[ZT_MEM_COMM] - m0.current[ZT_MEM_COMM])};
    const double fnow[4] = {now.params, now.grads, now.optimizer, now.comm};
    const double fplan[4] = {plan.params, plan.grads, plan.optimizer, plan.comm};
    static const char *const cat[4] = {"params", "grads", "optimizer", "comm"};
    for (int i = 0; i < 4; i++) {
        if (fnow[i] != held[i])
            fail_msg("%s: %s: footprint %.0f bytes, allocated %.0f", what, cat[i], fnow[i],
                     held[i]);
        /* the planner's own estimates: the gather pool (stage 3), the offload's working
         * buffers and the 8-bit compact state */
        int estimated = (i == 0 && k->stage >= 3) ||
                        (i == 2 && (k->off_opt || k->opt == ZT_OPT_ADAMW8BIT));
        if (!estimated && fplan[i] != fnow[i])
            fail_msg("%s: %s: the planner predicts %.0f bytes, the engine holds %.0f", what,
                     cat[i], fplan[i], fnow[i]);
    }
    const double off_now[3] = {now.params_off, now.grads_off, now.optimizer_off};
    const double off_plan[3] = {plan.params_off, plan.grads_off, plan.optimizer_off};
    for (int i = 0; i < 3; i++)
        if (off_now[i] != off_plan[i] && !(i == 2 && k->opt == ZT_OPT_ADAMW8BIT))
            fail_msg("%s: NVMe bytes %d: planner %.0f, engine %.0f", what, i, off_plan[i],
                     off_now[i]);
    /* the report is the same footprint: its formula plus its buffers are what the state
     * categories hold */
    zt_engine_report rep;
    assert_int_equal(zt_engine_report_get(e, &rep), 0);
    if ((double)rep.measured_state_bytes != held[0] + held[1] + held[2])
        fail_msg("%s: the engine counts %zu bytes of its own, the process %.0f", what,
                 rep.measured_state_bytes, held[0] + held[1] + held[2]);
    if ((double)(rep.predicted_state_bytes + rep.buffer_bytes) != held[0] + held[1] + held[2])
        fail_msg("%s: the report's formula %zu + buffers %zu != %.0f allocated", what,
                 rep.predicted_state_bytes, rep.buffer_bytes, held[0] + held[1] + held[2]);
    zt_engine_destroy(e);
}

static void test_footprint_agrees(void **state)
{
    static const fp_case cases[] = {
        {0, ZT_OPT_ADAMW, 0, 0, 1, 0, 0},
        {1, ZT_OPT_ADAMW, 0, 0, 1, 0, 0},
        {2, ZT_OPT_ADAMW, 0, 0, 1, 0, 0},
        {3, ZT_OPT_ADAMW, 0, 0, 1, 0, 0},
        {2, ZT_OPT_ADAMW, 0, 0, 2, 0, 0},
        {1, ZT_OPT_ADAMW8BIT, 0, 0, 1, 0, 0},
        {2, ZT_OPT_ADAFACTOR, 0, 0, 1, 0, 0},
        {0, ZT_OPT_ADAFACTOR, 0, 0, 1, 0, 0},
        {1, ZT_OPT_ADAMW, ZT_OFFLOAD_CPU, 0, 1, 0, 0},
        {2, ZT_OPT_ADAMW, ZT_OFFLOAD_NVME, 0, 2, 0, 0},
        {3, ZT_OPT_ADAMW, ZT_OFFLOAD_CPU, ZT_OFFLOAD_CPU, 1, 0, 0},
        {3, ZT_OPT_ADAMW8BIT, ZT_OFFLOAD_NVME, ZT_OFFLOAD_NVME, 2, 0, 0},
        /* half precision: 2-byte parameters, fp32 or 16-bit gradient sums */
        {2, ZT_OPT_ADAMW, 0, 0, 1, ZT_PREC_BF16, ZT_GRAD_FP32},
        {0, ZT_OPT_ADAMW, 0, 0, 2, ZT_PREC_BF16, ZT_GRAD_BF16},
        {1, ZT_OPT_ADAMW, 0, 0, 1, ZT_PREC_BF16, ZT_GRAD_BF16},
        {2, ZT_OPT_ADAMW, 0, 0, 2, ZT_PREC_BF16, ZT_GRAD_BF16},
        {3, ZT_OPT_ADAMW, 0, 0, 1, ZT_PREC_BF16, ZT_GRAD_BF16},
        {2, ZT_OPT_ADAMW, ZT_OFFLOAD_NVME, 0, 2, ZT_PREC_BF16, ZT_GRAD_BF16},
        {3, ZT_OPT_ADAMW8BIT, ZT_OFFLOAD_NVME, ZT_OFFLOAD_NVME, 2, ZT_PREC_BF16, ZT_GRAD_BF16},
    };
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(&cases[i]);
}

/* the function itself, on a layout of three units: the ZeRO paper's figures for AdamW */
static void test_footprint_formula(void **state)
{
    zt_layout L;
    (void)state;
    memset(&L, 0, sizeof L);
    L.n_units = 3;
    L.units = calloc(3, sizeof *L.units);
    assert_non_null(L.units);
    L.units[0].numel = 6144; /* multiples of N x 1024 for N = 1, 2, 3: no padding */
    L.units[1].numel = 12288;
    L.units[2].numel = 6144;
    for (int N = 1; N <= 3; N++)
        for (int st = 0; st <= 3; st++) {
            double P = 24576, F = 4, ost = 8 * (st == 0 ? P : P / N);
            zt_fp_in in = {.L = &L, .N = N, .stage = st, .whole_grad = 0,
                           .opt_state = ost};
            zt_footprint f;
            zt_footprint_of(&in, &f);
            double want = st == 0 ? 16 * P : st == 1 ? 8 * P + 8 * P / N
                        : st == 2 ? 4 * P + 12 * P / N : 16 * P / N;
            if (f.formula != want)
                fail_msg("N=%d stage %d: formula %.0f, the paper's %.0f", N, st, f.formula, want);
            /* stages 2-3: unit 0 whole plus two scratch buffers of the largest other unit */
            double grads = st < 2 ? F * P + (N > 1 ? F * P / N : 0)
                                  : F * (6144 + 2 * 12288) + F * P / N;
            if (f.grads != grads)
                fail_msg("N=%d stage %d: grads %.0f, want %.0f", N, st, f.grads, grads);
        }
    free(L.units);
}

/* Two engines in one process: each report counts its own buffers, not the other's. */
static void test_report_per_engine(void **state)
{
    zt_config c;
    zt_engine *e[2] = {NULL, NULL};
    zt_engine_report r[2];
    batch16 s;
    zt_fb_result fb;
    (void)state;
    for (int i = 0; i < 2; i++) {
        zt_config_init(&c);
        c.model_preset = "bert-tiny";
        c.vocab_size = 512;
        c.zero_stage = i ? 2 : 0;
        if (zt_engine_create(&c, MPI_COMM_NULL, &e[i]) != 0)
            fail_msg("%s", zt_last_error());
        zt_batch b = make_batch(&s);
        assert_int_equal(zt_engine_forward_backward(e[i], &b, 0, &fb), 0);
        assert_int_equal(zt_engine_step(e[i], 1e-3f, NULL), 0);
    }
    for (int i = 0; i < 2; i++) {
        zt_footprint now, plan;
        assert_int_equal(zt_engine_report_get(e[i], &r[i]), 0);
        zt_engine_footprints(e[i], &now, &plan);
        if ((double)r[i].measured_state_bytes != now.params + now.grads + now.optimizer)
            fail_msg("engine %d: measured %zu bytes, its footprint %.0f", i,
                     r[i].measured_state_bytes, now.params + now.grads + now.optimizer);
    }
    zt_mem_report m;
    zt_memory_report(&m);
    size_t process = m.current[ZT_MEM_PARAMS] + m.current[ZT_MEM_GRADS] +
                     m.current[ZT_MEM_OPTIMIZER];
    assert_true(process >= r[0].measured_state_bytes + r[1].measured_state_bytes);
    assert_true(r[0].measured_state_bytes != r[1].measured_state_bytes); /* stage 0 vs 2 */
    zt_engine_destroy(e[0]);
    zt_engine_destroy(e[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_footprint_formula),
        cmocka_unit_test(test_footprint_agrees),
        cmocka_unit_test(test_report_per_engine),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
