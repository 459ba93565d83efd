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
    const char *ckpt = NULL, *out = NULL, *shard = NULL;
    opt opts[] = {{"--checkpoint", &ckpt}, {"--out", &out}, {"--max-shard-size", &shard}};
    long max_shard = 5000000000L;
    if (parse_opts(argc, argv, opts, 3))
        return 2;
    if (!ckpt || !out)
        return die("export needs --checkpoint DIR and --out DIR"), 2;
    if (shard && parse_int(shard, "--max-shard-size", 0, 1L << 50, &max_shard))
        return 2;
    char msg[1024];
    int tk;
    if (zt_checkpoint_export(ckpt, out, (size_t)max_shard) < 0)
        return die("%s", zt_last_error());
    if ((tk = tok_export_checkpoint(ckpt, out, msg, sizeof msg)) < 0)
        return die("%s: the model is exported, its tokenizer not: %s", out, msg);
    printf("exported %s to %s%s\n", ckpt, out, tk ? " (with its tokenizer)" : "");
    return 0;
}
