/* cmd_config.c - `zerotrain config-reference` prints the training-config reference
 * (docs/config.md) generated from the parser's key table; `zerotrain check-config FILE`
 * validates a config and prints what it resolves to. */
#include "cli.h"

int cmd_config_reference(int argc, char **argv)
{
    (void)argv;
    if (argc != 0)
        return die("config-reference takes no arguments"), 2;
    fputs(zt_train_config_reference(), stdout);
    return 0;
}

int cmd_check_config(int argc, char **argv)
{
    zt_train_config *c;
    long world = 1, steps = 0;
    if (argc < 1 || argc > 3)
        return die("usage: zerotrain check-config FILE [WORLD_SIZE [TOTAL_STEPS]]"), 2;
    if ((argc > 1 && parse_int(argv[1], "WORLD_SIZE", 1, 1 << 20, &world)) ||
        (argc > 2 && parse_int(argv[2], "TOTAL_STEPS", 0, 1L << 40, &steps)))
        return 2;
    if (zt_train_config_load(argv[0], (int)world, steps, &c) < 0)
        return die("%s", zt_last_error());
    const zt_train_settings *s = zt_train_config_settings(c);
    static const char *const sched[] = {"constant", "WarmupLR", "WarmupDecayLR",
                                        "WarmupCosineLR"};
    printf("%s: valid for %ld rank(s)\n", argv[0], world);
    printf("  batch: train_batch_size %d = micro %d x accumulation %d x %ld ranks\n",
           s->train_batch_size, s->micro_batch_size, s->grad_accum_steps, world);
    if (s->optimizer == ZT_OPT_ADAFACTOR) {
        char lr[32], b1[32];
        if (s->relative_step)
            snprintf(lr, sizeof lr, "relative steps%s", s->warmup_init ? " (warmup_init)" : "");
        else
            snprintf(lr, sizeof lr, "%g", s->lr);
        snprintf(b1, sizeof b1, s->adafactor_beta1 >= 0 ? "%g" : "none", s->adafactor_beta1);
        printf("  optimizer: Adafactor lr %s eps (%g, %g) clip_threshold %g decay_rate %g beta1 "
               "%s scale_parameter %s weight_decay %g, clipping %g\n", lr, s->adafactor_eps1,
               s->adafactor_eps2, s->clip_threshold, s->decay_rate, b1,
               s->scale_parameter ? "true" : "false", s->weight_decay, s->grad_clip);
    } else {
        printf("  optimizer: %s lr %g betas (%g, %g) eps %g weight_decay %g, clipping %g",
               s->optimizer == ZT_OPT_ADAMW8BIT ? "AdamW8bit"
               : s->optimizer == ZT_OPT_LAMB    ? "Lamb"
                                                : "AdamW",
               s->lr, s->beta1, s->beta2, s->eps, s->weight_decay, s->grad_clip);
        if (!s->bias_correction)
            printf(", no bias correction");
        if (s->optimizer == ZT_OPT_LAMB)
            printf(", trust ratio in [%g, %g]%s", s->min_coeff, s->max_coeff,
                   s->eps_inside_sqrt ? ", eps inside the square root" : "");
        if (s->optimizer == ZT_OPT_ADAMW8BIT) {
            printf(", fp32 state below %zu elements", s->min_8bit_size);
            if (s->n_fp32_state < 0)
                printf(" and for the embedding tables");
            for (int i = 0; i < s->n_fp32_state; i++)
                printf("%s\"%s\"", i ? ", " : " and for ", zt_train_config_fp32_state(c, i));
        }
        printf("\n");
    }
    printf("  scheduler: %s; lr at steps 0, 1, 10, 100: %g %g %g %g\n",
           sched[s->scheduler], zt_train_config_lr(c, 0), zt_train_config_lr(c, 1),
           zt_train_config_lr(c, 10), zt_train_config_lr(c, 100));
    printf("  zero stage %d, seed %llu%s\n", s->zero_stage, (unsigned long long)s->seed,
           s->seed_given ? "" : " (default)");
    zt_train_config_destroy(c);
    return 0;
}
