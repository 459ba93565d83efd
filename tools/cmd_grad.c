/* cmd_grad.c - `zerotrain grad`: one forward+backward (and optionally one AdamW step) of a
 * Hugging Face BERT or T5 folder on a batch file, written as one safetensors file. */
#include "cli.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct batch_file {
    int64_t *ids, *mask, *tt, *labels, *dmask;
    int64_t *sop;  /* AlbertForPreTraining's sentence_order_label [B], or NULL */
    int64_t *rep;  /* ELECTRA's joint pretraining's replacement_ids [B, T], or NULL */
    float *values; /* sequence classification's F32 labels [B] or [B, num_labels] */
    int B, T, Tl;  /* Tl: the labels' length (T5's targets; BERT: T) */
    int per_row;   /* labels are per sequence (classification): I64 [B] or F32 */
} batch_file;

static void batch_free(batch_file *b)
{
    free(b->ids);
    free(b->mask);
    free(b->tt);
    free(b->labels);
    free(b->dmask);
    free(b->values);
    free(b->sop);
    free(b->rep);
}

/* sentence_order_label: I64 [B] (optional) */
static int sop_labels(zt_safetensors *f, const char *path, batch_file *b)
{
    zt_tensor_info t;
    if (zt_safetensors_find(f, "sentence_order_label", &t) < 0)
        return 0;
    if (t.dtype != ZT_I64 || t.ndim != 1 || t.shape[0] != b->B)
        return die("%s: tensor \"sentence_order_label\" must be I64 [%d] (one per row)", path,
                   b->B);
    if (!(b->sop = malloc(t.nbytes ? t.nbytes : 1)))
        return die("out of memory reading %s", path);
    memcpy(b->sop, t.data, t.nbytes);
    return 0;
}

/* a sequence classifier's labels: I64 class ids [B], or F32 [B] / [B, num_labels] targets */
static int row_labels(zt_safetensors *f, const char *path, batch_file *b)
{
    zt_tensor_info t;
    if (zt_safetensors_find(f, "labels", &t) < 0)
        return die("%s: batch has no tensor \"labels\"", path);
    if (!((t.dtype == ZT_I64 && t.ndim == 1) || (t.dtype == ZT_F32 && (t.ndim == 1 || t.ndim == 2))))
        return 0; /* [B, T] token labels: read as such */
    if (t.shape[0] != b->B)
        return die("%s: tensor \"labels\" has %lld rows, input_ids %d", path,
                   (long long)t.shape[0], b->B);
    b->per_row = 1;
    void **dst = t.dtype == ZT_I64 ? (void **)&b->labels : (void **)&b->values;
    if (!(*dst = malloc(t.nbytes ? t.nbytes : 1)))
        return die("out of memory reading %s", path);
    memcpy(*dst, t.data, t.nbytes);
    return 0;
}

/* a [B, *T] I64 tensor (*T 0: taken from this tensor) */
static int batch_tensor(zt_safetensors *f, const char *path, const char *name, int required,
                        batch_file *b, int *T, const char *like, int64_t **out)
{
    zt_tensor_info t;
    *out = NULL;
    if (zt_safetensors_find(f, name, &t) < 0)
        return required ? die("%s: batch has no tensor \"%s\"", path, name) : 0;
    if (t.dtype != ZT_I64)
        return die("%s: tensor \"%s\" has dtype %s, expected I64", path, name,
                   zt_dtype_name(t.dtype));
    if (t.ndim != 2 || t.shape[0] < 1 || t.shape[1] < 1 || t.shape[0] > INT32_MAX ||
        t.shape[1] > INT32_MAX)
        return die("%s: tensor \"%s\" must have shape [batch, seq] with both >= 1", path, name);
    if (b->B == 0)
        b->B = (int)t.shape[0];
    if (t.shape[0] != b->B) /* every tensor has input_ids' batch */
        return die("%s: tensor \"%s\" has shape [%lld, %lld], input_ids has [%d, %d]", path,
                   name, (long long)t.shape[0], (long long)t.shape[1], b->B, b->T);
    if (*T == 0)
        *T = (int)t.shape[1];
    if (t.shape[1] != *T)
        return die("%s: tensor \"%s\" has shape [%lld, %lld], %s has [%d, %d]", path, name,
                   (long long)t.shape[0], (long long)t.shape[1], like, b->B, *T);
    if (!(*out = malloc(t.nbytes)))
        return die("out of memory reading %s", path);
    memcpy(*out, t.data, t.nbytes);
    return 0;
}

/* BERT: input_ids, labels, attention_mask, token_type_ids, all [B, T] (ALBERT's pretraining:
 * sentence_order_label [B]; ELECTRA's joint pretraining: replacement_ids [B, T]); T5: input_ids, attention_mask [B, T], labels and
 * decoder_attention_mask [B, T_dec] */
static int read_batch(const char *path, batch_file *b)
{
    zt_safetensors *f;
    int rc;
    memset(b, 0, sizeof *b);
    if (zt_safetensors_open(path, &f) < 0)
        return die("%s", zt_last_error());
    rc = batch_tensor(f, path, "input_ids", 1, b, &b->T, "input_ids", &b->ids) ||
         row_labels(f, path, b) ||
         (!b->per_row && batch_tensor(f, path, "labels", 1, b, &b->Tl, "labels", &b->labels)) ||
         batch_tensor(f, path, "attention_mask", 0, b, &b->T, "input_ids", &b->mask) ||
         batch_tensor(f, path, "token_type_ids", 0, b, &b->T, "input_ids", &b->tt) ||
         batch_tensor(f, path, "decoder_attention_mask", 0, b, &b->Tl, "labels", &b->dmask) ||
         batch_tensor(f, path, "replacement_ids", 0, b, &b->T, "input_ids", &b->rep) ||
         sop_labels(f, path, b);
    zt_safetensors_close(f);
    if (rc)
        batch_free(b);
    return rc;
}

/* step.json: {"optimizer": "AdamW" (the default) or "Lamb", "lr":..., "betas":[b1,b2],
 * "eps":..., "weight_decay":..., Lamb's "max_coeff", "min_coeff", "bias_correction" and
 * "eps_inside_sqrt", "precision": "bf16" or "fp16", "loss_scale": S (fp16's static scale;
 * absent: dynamic from 2^16), "steps": k (k optimizer steps on the one gradient, as the
 * reference repeats opt.step())} */
static int read_step(const char *path, zt_config *cfg, int *steps)
{
    char *buf = NULL;
    cJSON *o, *v;
    int rc = 0;
    if (zt_file_read_all(path, 1u << 20, &buf, NULL) < 0)
        return die("%s", zt_last_error());
    o = cJSON_Parse(buf);
    free(buf);
    if (!o || !cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return die("%s: not a JSON object", path);
    }
    v = cJSON_GetObjectItemCaseSensitive(o, "optimizer");
    if (v && cJSON_IsString(v) && !strcmp(v->valuestring, "Lamb"))
        cfg->optimizer = ZT_OPT_LAMB;
    else if (v && (!cJSON_IsString(v) || strcmp(v->valuestring, "AdamW") != 0))
        rc = die("%s: \"optimizer\" must be \"AdamW\" or \"Lamb\"", path);
    const char *flags[] = {"bias_correction", "eps_inside_sqrt"};
    int *flag_of[] = {&cfg->bias_correction, &cfg->eps_inside_sqrt};
    for (int k = 0; k < 2 && !rc; k++)
        if ((v = cJSON_GetObjectItemCaseSensitive(o, flags[k]))) {
            if (!cJSON_IsBool(v) || cfg->optimizer != ZT_OPT_LAMB)
                rc = die("%s: \"%s\" is Lamb's, true or false", path, flags[k]);
            else
                *flag_of[k] = cJSON_IsTrue(v);
        }
#define NUM(key, dst)                                                                          \
    if (!rc && (v = cJSON_GetObjectItemCaseSensitive(o, key))) {                               \
        if (!cJSON_IsNumber(v))                                                                \
            rc = die("%s: \"%s\" must be a number", path, key);                                \
        else                                                                                   \
            dst = (float)v->valuedouble;                                                       \
    }
    NUM("lr", cfg->lr)
    NUM("eps", cfg->eps)
    NUM("weight_decay", cfg->weight_decay)
    NUM("max_coeff", cfg->max_coeff)
    NUM("min_coeff", cfg->min_coeff)
#undef NUM
    if (!rc && (v = cJSON_GetObjectItemCaseSensitive(o, "loss_scale"))) { /* fp16's, static */
        if (!cJSON_IsNumber(v) || !(v->valuedouble > 0))
            rc = die("%s: \"loss_scale\" must be a number > 0", path);
        else
            cfg->loss_scale = v->valuedouble;
    }
    v = cJSON_GetObjectItemCaseSensitive(o, "betas");
    if (!rc && v) {
        if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2 ||
            !cJSON_IsNumber(cJSON_GetArrayItem(v, 0)) || !cJSON_IsNumber(cJSON_GetArrayItem(v, 1)))
            rc = die("%s: \"betas\" must be [beta1, beta2]", path);
        else {
            cfg->beta1 = (float)cJSON_GetArrayItem(v, 0)->valuedouble;
            cfg->beta2 = (float)cJSON_GetArrayItem(v, 1)->valuedouble;
        }
    }
    v = cJSON_GetObjectItemCaseSensitive(o, "precision");
    if (!rc && v) {
        if (cJSON_IsString(v) && !strcmp(v->valuestring, "bf16"))
            cfg->precision = ZT_PREC_BF16;
        else if (cJSON_IsString(v) && !strcmp(v->valuestring, "fp16"))
            cfg->precision = ZT_PREC_FP16;
        else if (!cJSON_IsString(v) || strcmp(v->valuestring, "fp32"))
            rc = die("%s: \"precision\" must be \"fp32\", \"bf16\" or \"fp16\"", path);
    }
    v = cJSON_GetObjectItemCaseSensitive(o, "steps");
    if (!rc && v && (!cJSON_IsNumber(v) || v->valuedouble != (int)v->valuedouble ||
                     v->valuedouble < 1 || v->valuedouble > 100))
        rc = die("%s: \"steps\" must be an integer from 1 to 100", path);
    else if (!rc && v)
        *steps = (int)v->valuedouble;
    cJSON_Delete(o);
    cfg->decay_all = 1; /* the reference step decays every parameter */
    return rc;
}

int cmd_grad(int argc, char **argv)
{
    const char *model = NULL, *batch = NULL, *out = NULL, *step = NULL, *threads = NULL;
    opt opts[] = {{"--model", &model}, {"--batch", &batch}, {"--out", &out},
                  {"--step", &step}, {"--threads", &threads}};
    zt_config cfg;
    zt_engine *e = NULL;
    batch_file bf;
    zt_fb_result res;
    zt_tensor_view *views = NULL;
    float **bufs = NULL;
    int64_t *erep = NULL;
    int np, nv = 0, nfixed = 1 << 30, rc = 1, nsteps = 1;
    long nt = 0;
    int no_logits = 0, n = 0; /* the flag --no-logits: training's pass (see the help) */
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--no-logits") == 0)
            no_logits = 1;
        else
            argv[n++] = argv[i];
    }
    if (parse_opts(n, argv, opts, 5))
        return 2;
    if (!model || !batch || !out)
        return die("grad needs --model DIR, --batch FILE and --out FILE"), 2;
    if (threads && parse_int(threads, "--threads", 1, 1024, &nt))
        return 2;
    zt_config_init(&cfg);
    cfg.model_dir = model;
    cfg.threads = (int)nt;
    if (step && read_step(step, &cfg, &nsteps))
        return 1;
    if (read_batch(batch, &bf))
        return 1;
    if (zt_engine_create(&cfg, MPI_COMM_NULL, &e) < 0) {
        die("%s", zt_last_error());
        goto done;
    }
    zt_batch b = {bf.B, bf.T, bf.ids, bf.mask, bf.tt, bf.labels, 0, 0, bf.Tl, bf.dmask,
                  bf.values, bf.sop, 0, bf.rep};
    if (zt_engine_forward_backward(e, &b, !no_logits, &res) < 0) {
        die("%s: %s", batch, zt_engine_last_error(e));
        goto done;
    }
    np = zt_engine_param_count(e);
    /* loss, logits, a grad (and maybe an alias grad) per parameter, adamw per parameter */
    views = calloc((size_t)(8 + 3 * np), sizeof *views);
    bufs = calloc((size_t)(2 * np), sizeof *bufs);
    if (!views || !bufs) {
        die("out of memory");
        goto done;
    }
    views[nv++] = (zt_tensor_view){"loss", ZT_F32, 1, {1}, &res.loss};
    if (!no_logits) {
        const float *lg;
        int64_t shape[3];
        zt_engine_logits(e, &lg, shape);
        if (bf.per_row) /* a sequence classifier's: [B, num_labels], as HF's */
            views[nv++] = (zt_tensor_view){"logits", ZT_F32, 2, {shape[0], shape[2]}, lg};
        else if (shape[2] == 1) /* ElectraForPreTraining's, squeezed as HF's: [B, T] */
            views[nv++] = (zt_tensor_view){"logits", ZT_F32, 2, {shape[0], shape[1]}, lg};
        else
            views[nv++] = (zt_tensor_view){"logits", ZT_F32, 3, {shape[0], shape[1], shape[2]},
                                           lg};
    }
    zt_electra_outputs eo; /* ELECTRA's joint pretraining: the generator's side too */
    float eloss[2];
    if (zt_engine_electra_outputs(e, &eo) == 0) {
        size_t bt = (size_t)eo.B * (size_t)eo.T;
        if (!(erep = malloc(sizeof *erep * bt))) {
            die("out of memory");
            goto done;
        }
        for (size_t i = 0; i < bt; i++) /* -100 where nothing was masked, as the reference's */
            erep[i] = bf.labels[i] != -100 ? eo.disc_input_ids[i] : -100;
        eloss[0] = (float)eo.generator_loss;
        eloss[1] = (float)eo.discriminator_loss;
        if (eo.generator_logits)
            views[nv++] = (zt_tensor_view){"logits.generator", ZT_F32, 3,
                                           {eo.generator_logits_shape[0],
                                            eo.generator_logits_shape[1],
                                            eo.generator_logits_shape[2]}, eo.generator_logits};
        views[nv++] = (zt_tensor_view){"aux.replacement_ids", ZT_I64, 2, {eo.B, eo.T}, erep};
        views[nv++] = (zt_tensor_view){"aux.disc_input_ids", ZT_I64, 2, {eo.B, eo.T},
                                       eo.disc_input_ids};
        views[nv++] = (zt_tensor_view){"aux.disc_labels", ZT_I64, 2, {eo.B, eo.T},
                                       eo.disc_labels};
        views[nv++] = (zt_tensor_view){"aux.loss_generator", ZT_F32, 1, {1}, &eloss[0]};
        views[nv++] = (zt_tensor_view){"aux.loss_discriminator", ZT_F32, 1, {1}, &eloss[1]};
    }
    nfixed = nv; /* (the views so far name themselves; the rest allocate their names) */
    for (int i = 0; i < np; i++) {
        zt_param_info pi;
        zt_engine_param_get(e, i, &pi);
        if (!(bufs[i] = malloc(pi.numel * sizeof(float)))) {
            die("out of memory");
            goto done;
        }
        zt_engine_read_grad(e, pi.name, bufs[i], pi.numel);
        if (zt_engine_loss_scale(e) != 1.0) /* fp16: the gradient of the loss, unscaled */
            for (size_t k = 0; k < pi.numel; k++)
                bufs[i][k] = (float)(bufs[i][k] / zt_engine_loss_scale(e));
        for (int alias = 0; alias < 2; alias++) {
            const char *nm = alias ? pi.alias : pi.name;
            char *full;
            if (!nm || asprintf(&full, "grad.%s", nm) < 0)
                continue;
            views[nv] = (zt_tensor_view){full, ZT_F32, pi.ndim, {0}, bufs[i]};
            memcpy(views[nv].shape, pi.shape, sizeof pi.shape);
            nv++;
        }
    }
    if (step) {
        for (int k = 0; k < nsteps; k++)
            if (zt_engine_step(e, cfg.lr, NULL) < 0) {
                die("%s", zt_engine_last_error(e));
                goto done;
            }
        for (int i = 0; i < np; i++) {
            zt_param_info pi;
            char *full;
            zt_engine_param_get(e, i, &pi);
            if (!(bufs[np + i] = malloc(pi.numel * sizeof(float))) ||
                asprintf(&full, "%s.%s", cfg.optimizer == ZT_OPT_LAMB ? "lamb" : "adamw",
                         pi.name) < 0) {
                die("out of memory");
                goto done;
            }
            zt_engine_read_param(e, pi.name, bufs[np + i], pi.numel);
            views[nv] = (zt_tensor_view){full, ZT_F32, pi.ndim, {0}, bufs[np + i]};
            memcpy(views[nv].shape, pi.shape, sizeof pi.shape);
            nv++;
        }
    }
    if (zt_safetensors_write(out, views, nv, NULL, 0) < 0) {
        die("%s", zt_last_error());
        goto done;
    }
    printf("loss %.8g over %" PRId64 " labelled tokens; wrote %d tensors to %s\n", res.loss,
           res.n_labels, nv, out);
    rc = 0;
done:
    for (int i = nfixed; views && i < nv; i++)
        free((char *)views[i].name);
    free(erep);
    for (int i = 0; bufs && i < 2 * np; i++)
        free(bufs[i]);
    free(views);
    free(bufs);
    zt_engine_destroy(e);
    batch_free(&bf);
    return rc;
}
