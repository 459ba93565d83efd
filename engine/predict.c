/* predict.c - a built-in BERT used: a sequence classifier's probabilities and a masked LM's
 * most likely tokens at its [MASK] positions, from one forward pass (zt_engine_evaluate).
 * Built on the public API alone; token ids in, numbers out: no tokenizer, no files. */
#include "zerotrain.h"
#include "../common/err.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int zt_predict_classify(zt_engine *e, const zt_batch *b, float *probs)
{
    zt_model_info mi;
    zt_fb_result r;
    const float *lg;
    int64_t shape[3];
    if (!e || !b || !probs)
        return zt_fail(ZT_E_INVAL, "zt_predict_classify: NULL argument");
    ZT_TRY(zt_engine_model_info(e, &mi));
    if (mi.num_labels < 1)
        return zt_fail(ZT_E_INVAL, "zt_predict_classify: the model is a %s, not a sequence "
                       "classifier", mi.architecture);
    zt_batch x = *b; /* the logits alone: no labels */
    x.labels = NULL;
    x.label_values = NULL;
    ZT_TRY(zt_engine_evaluate(e, &x, &r));
    ZT_TRY(zt_engine_logits(e, &lg, shape));
    int NL = mi.num_labels, pr = mi.problem_type ? mi.problem_type
                                 : NL == 1 ? ZT_PROBLEM_REGRESSION : ZT_PROBLEM_SINGLE_LABEL;
    for (int r0 = 0; r0 < b->B; r0++) {
        const float *l = lg + (size_t)r0 * NL;
        float *p = probs + (size_t)r0 * NL;
        if (pr == ZT_PROBLEM_REGRESSION) {
            memcpy(p, l, sizeof *p * (size_t)NL);
        } else if (pr == ZT_PROBLEM_MULTI_LABEL) {
            for (int k = 0; k < NL; k++)
                p[k] = (float)(1.0 / (1.0 + exp(-(double)l[k])));
        } else { /* softmax, in double */
            double mx = l[0], sum = 0.0;
            for (int k = 1; k < NL; k++)
                mx = l[k] > mx ? l[k] : mx;
            for (int k = 0; k < NL; k++)
                sum += exp((double)l[k] - mx);
            for (int k = 0; k < NL; k++)
                p[k] = (float)(exp((double)l[k] - mx) / sum);
        }
    }
    return 0;
}

int zt_predict_fill_mask(zt_engine *e, const zt_batch *b, int64_t mask_id, int k,
                         int max_masks, int32_t *ids, float *scores, int64_t *positions)
{
    zt_model_info mi;
    zt_fb_result r;
    const float *lg;
    int64_t shape[3];
    size_t BT;
    int n = 0, rc;
    if (!e || !b || !b->input_ids || !ids || !scores || !positions || k < 1 || max_masks < 1)
        return zt_fail(ZT_E_INVAL, "zt_predict_fill_mask: NULL argument, k < 1 or max_masks < 1");
    ZT_TRY(zt_engine_model_info(e, &mi));
    if (mi.num_labels > 0 || strcmp(mi.model_type, "t5") == 0 ||
        strcmp(mi.model_type, "zerotrain") == 0)
        return zt_fail(ZT_E_INVAL, "zt_predict_fill_mask: the model is a %s, not a masked LM "
                       "(create the engine with zt_config.head ZT_HEAD_MLM)", mi.architecture);
    /* ELECTRA: the joint model's masked LM is its generator; a discriminator alone has none */
    int joint = mi.generator_hidden_size > 0;
    if (!joint && strcmp(mi.architecture, "ElectraForPreTraining") == 0)
        return zt_fail(ZT_E_INVAL, "zt_predict_fill_mask: the model is an ElectraForPreTraining (a "
                       "discriminator: replaced-token detection, no masked-LM head); fill-mask "
                       "takes its generator (a joint folder with generator_config.json, or an "
                       "ElectraForMaskedLM)");
    BT = (size_t)b->B * (size_t)b->T;
    int64_t *labels = malloc(sizeof *labels * (BT ? BT : 1));
    int *order = malloc(sizeof *order * (size_t)k);
    if (!labels || !order) {
        free(labels);
        free(order);
        return zt_fail(ZT_E_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < BT; i++) { /* the masks labelled (any id): their logits stay */
        labels[i] = b->input_ids[i] == mask_id ? 0 : -100;
        if (labels[i] == 0 && n < max_masks)
            positions[n] = (int64_t)i;
        n += labels[i] == 0;
    }
    if (n == 0 || n > max_masks) {
        rc = zt_fail(ZT_E_INVAL, n ? "zt_predict_fill_mask: %d masks, room for %d"
                                   : "zt_predict_fill_mask: no input id is the mask id (%d)",
                     n ? n : (int)mask_id, max_masks);
        goto out;
    }
    zt_batch x = *b;
    x.labels = labels;
    x.label_values = NULL;
    if ((rc = zt_engine_evaluate(e, &x, &r)) < 0 || (rc = zt_engine_logits(e, &lg, shape)) < 0)
        goto out;
    if (joint) {
        zt_electra_outputs eo;
        if ((rc = zt_engine_electra_outputs(e, &eo)) < 0)
            goto out;
        lg = eo.generator_logits;
        memcpy(shape, eo.generator_logits_shape, sizeof eo.generator_logits_shape);
    }
    int V = (int)shape[2], kk = k < V ? k : V;
    for (int m = 0; m < n; m++) {
        const float *l = lg + (size_t)m * V;
        double mx = l[0], sum = 0.0;
        for (int v = 1; v < V; v++)
            mx = l[v] > mx ? l[v] : mx;
        for (int v = 0; v < V; v++)
            sum += exp((double)l[v] - mx);
        /* the kk best, highest first (equal logits: the lower id first), by insertion */
        int have = 0;
        for (int v = 0; v < V; v++) {
            if (have == kk && !(l[v] > l[order[kk - 1]]))
                continue;
            int j = have < kk ? have++ : kk - 1;
            while (j > 0 && l[v] > l[order[j - 1]]) {
                order[j] = order[j - 1];
                j--;
            }
            order[j] = v;
        }
        for (int j = 0; j < k; j++) {
            ids[(size_t)m * k + j] = j < kk ? order[j] : -1;
            scores[(size_t)m * k + j] = j < kk ? (float)(exp((double)l[order[j]] - mx) / sum)
                                               : 0.0f;
        }
    }
    rc = n;
out:
    free(labels);
    free(order);
    return rc;
}
