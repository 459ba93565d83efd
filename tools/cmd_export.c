/* cmd_export.c - `zerotrain export`: a verified training checkpoint to a Hugging Face folder
 * (config.json + model.safetensors, sharded with an index above the shard limit), streamed
 * tensor by tensor from the mapped checkpoint: no model is built in memory. The tokenizer of
 * the data it was trained on, stored beside the checkpoints, goes with it. */
#include "cli.h"
#include "tokenizer.h"

#include <stdlib.h>
#include <string.h>

int cmd_export(int argc, char **argv)
{
    const char *ckpt = NULL, *out = NULL, *shard = NULL, *dt = NULL;
    opt opts[] = {{"--checkpoint", &ckpt}, {"--out", &out}, {"--max-shard-size", &shard},
                  {"--save-model-dtype", &dt}};
    long max_shard = 5000000000L;
    int dtype = -1;
    if (parse_opts(argc, argv, opts, 4))
        return 2;
    if (!ckpt || !out)
        return die("export needs --checkpoint DIR and --out DIR"), 2;
    if (dt) { /* (fp32 from a bf16 / fp16 checkpoint: its fp32 master) */
        if (strcmp(dt, "fp32") && strcmp(dt, "bf16") && strcmp(dt, "fp16"))
            return die("--save-model-dtype %s: fp32, bf16 or fp16", dt), 2;
        dtype = !strcmp(dt, "fp32") ? ZT_PREC_FP32 : !strcmp(dt, "bf16") ? ZT_PREC_BF16
                                                                         : ZT_PREC_FP16;
    }
    if (shard && parse_int(shard, "--max-shard-size", 0, 1L << 50, &max_shard))
        return 2;
    char msg[1024];
    int tk;
    if (zt_checkpoint_export_dtype(ckpt, out, (size_t)max_shard, dtype) < 0)
        return die("%s", zt_last_error());
    if ((tk = tok_export_checkpoint(ckpt, out, msg, sizeof msg)) < 0)
        return die("%s: the model is exported, its tokenizer not: %s", out, msg);
    printf("exported %s to %s%s\n", ckpt, out, tk ? " (with its tokenizer)" : "");
    return 0;
}
