/* cmd_train.c - `zerotrain train`: masked-LM training. */
#include "cli.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Synthetic MLM batch: each row is a segment of Zipf-distributed token ids (ids >= 5)
 * followed by the same segment again, so a model can lower the loss first by learning the
 * token frequencies and then by copying from the other half. 15% of positions are
 * labelled: 80% replaced by [MASK] (id 4), 10% by a random id, 10% kept. Row r depends
 * only on (seed, global sample index). cdf: Zipf(1) over V - 5 ids. */
static void synth_batch(int64_t *ids, int64_t *labels, int B, int T, int V, const double *cdf,
                        uint64_t seed, uint64_t first_sample)
{
    int64_t span = V - 5, half = (T + 1) / 2;
    for (int b = 0; b < B; b++) {
        uint64_t st = seed * 0x100000001B3ull ^ (first_sample + (uint64_t)b);
        for (int t = 0; t < T; t++) {
            size_t i = (size_t)b * T + t;
            if (t < half) {
                double u = (double)(splitmix(&st) >> 11) * 0x1p-53;
                int64_t lo = 0, hi = span - 1;
                while (lo < hi) { /* first rank whose cdf exceeds u */
                    int64_t mid = (lo + hi) / 2;
                    if (cdf[mid] > u) hi = mid; else lo = mid + 1;
                }
                ids[i] = 5 + lo;
            } else {
                ids[i] = ids[i - half];
            }
        }
        for (int t = 0; t < T; t++) {
            size_t i = (size_t)b * T + t;
            uint64_t r = splitmix(&st);
            labels[i] = -100;
            if (r % 1000 < 150) {
                uint64_t how = (r / 1000) % 10;
                labels[i] = ids[i];
                if (how < 8)
                    ids[i] = 4;
                else if (how < 9)
                    ids[i] = 5 + (int64_t)((r >> 20) % (uint64_t)span);
            }
        }
    }
}

static double *zipf_cdf(int V)
{
    int64_t n = V - 5;
    double *c = malloc(sizeof *c * (size_t)n), s = 0;
    if (!c)
        return NULL;
    for (int64_t k = 0; k < n; k++)
        c[k] = (s += 1.0 / (double)(k + 1));
    for (int64_t k = 0; k < n; k++)
        c[k] /= s;
    return c;
}



int cmd_train(int argc, char **argv)
{
    const char *model = NULL, *steps_s = "100", *bs_s = "8", *seq_s = "64", *lr_s = "1e-3",
               *seed_s = "42", *vocab_s = "0", *threads_s = "0", *save = NULL, *every_s = "10",
               *warm_s = "0", *clip_s = "1.0";
    opt opts[] = {{"--model", &model},     {"--steps", &steps_s},   {"--batch-size", &bs_s},
                  {"--seq-len", &seq_s},   {"--lr", &lr_s},         {"--seed", &seed_s},
                  {"--vocab", &vocab_s},   {"--threads", &threads_s}, {"--save-model", &save},
                  {"--print-every", &every_s}, {"--warmup", &warm_s}, {"--clip", &clip_s}};
    long steps, bs, seq, seed, vocab, threads, every, warm;
    double lr, clip;
    zt_config cfg;
    zt_engine *e = NULL;
    zt_model_info mi;
    int64_t *ids = NULL, *labels = NULL;
    double *cdf = NULL;
    int rc = 1;
    if (parse_opts(argc, argv, opts, (int)(sizeof opts / sizeof opts[0])))
        return 2;
    if (!model)
        return die("train needs --model DIR or a preset name"), 2;
    if (parse_int(steps_s, "--steps", 1, 1L << 40, &steps) ||
        parse_int(bs_s, "--batch-size", 1, 1 << 20, &bs) ||
        parse_int(seq_s, "--seq-len", 1, 1 << 20, &seq) ||
        parse_int(seed_s, "--seed", 0, INT64_MAX, &seed) ||
        parse_int(vocab_s, "--vocab", 0, 1 << 30, &vocab) ||
        parse_int(threads_s, "--threads", 0, 1024, &threads) ||
        parse_int(every_s, "--print-every", 1, 1L << 40, &every) ||
        parse_int(warm_s, "--warmup", 0, 1L << 40, &warm) ||
        parse_float(lr_s, "--lr", 0, 10, &lr) || parse_float(clip_s, "--clip", 0, 1e9, &clip))
        return 2;
    zt_config_init(&cfg);
    if (access(model, F_OK) == 0)
        cfg.model_dir = model;
    else
        cfg.model_preset = model;
    cfg.seed = (uint64_t)seed;
    cfg.vocab_size = (int)vocab;
    cfg.threads = (int)threads;
    cfg.lr = (float)lr;
    cfg.grad_clip = (float)clip;
    if (zt_engine_create(&cfg, MPI_COMM_WORLD, &e) < 0)
        return die("%s", zt_last_error());
    zt_engine_model_info(e, &mi);
    if (mi.vocab_size < 16)
        return zt_engine_destroy(e), die("synthetic data needs a vocabulary of at least 16");
    if (seq > mi.max_positions) {
        zt_engine_destroy(e);
        return die("--seq-len %ld exceeds the model's max_position_embeddings %d", seq,
                   mi.max_positions);
    }
    fprintf(stderr, "zerotrain %s: BERT L%d H%d A%d, %zu parameters; %ld steps of %ld x %ld "
                    "tokens, lr %g\n",
            zt_version(), mi.num_layers, mi.hidden_size, mi.num_heads, mi.num_parameters, steps,
            bs, seq, lr);
    ids = malloc(sizeof *ids * (size_t)(bs * seq));
    labels = malloc(sizeof *labels * (size_t)(bs * seq));
    cdf = zipf_cdf(mi.vocab_size);
    if (!ids || !labels || !cdf) {
        die("out of memory");
        goto done;
    }
    double t0 = now(), tprint = t0;
    long tokens_since = 0;
    for (long s = 0; s < steps; s++) {
        zt_fb_result res;
        zt_step_info si;
        float cur_lr = (float)(warm > 0 && s < warm ? lr * (double)(s + 1) / (double)warm : lr);
        synth_batch(ids, labels, (int)bs, (int)seq, mi.vocab_size, cdf, (uint64_t)seed,
                    (uint64_t)(s * bs));
        zt_batch b = {(int)bs, (int)seq, ids, NULL, NULL, labels, (uint64_t)(s * bs), 0};
        if (zt_engine_zero_grad(e) < 0 || zt_engine_forward_backward(e, &b, 0, &res) < 0 ||
            zt_engine_step(e, cur_lr, &si) < 0) {
            die("step %ld: %s", s + 1, zt_engine_last_error(e));
            goto done;
        }
        tokens_since += bs * seq;
        if ((s + 1) % every == 0 || s + 1 == steps || s == 0) {
            double t = now();
            printf("step %6ld/%ld  loss %.4f  grad_norm %.3f  lr %.3g  %.0f tokens/s  %.1fs\n",
                   s + 1, steps, res.loss, si.grad_norm, cur_lr,
                   tokens_since / (t - tprint > 1e-9 ? t - tprint : 1e-9), t - t0);
            fflush(stdout);
            tprint = t;
            tokens_since = 0;
        }
    }
    if (save) {
        if (zt_engine_save_model(e, save) < 0) {
            die("%s", zt_engine_last_error(e));
            goto done;
        }
        fprintf(stderr, "saved the model to %s\n", save);
    }
    print_memory(stderr);
    rc = 0;
done:
    free(ids);
    free(labels);
    free(cdf);
    zt_engine_destroy(e);
    return rc;
}
