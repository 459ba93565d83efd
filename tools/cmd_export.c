/* cmd_export.c - `zerotrain export`: a verified training checkpoint to a Hugging Face folder
 * (config.json + model.safetensors, sharded with an index above the shard limit), streamed
 * tensor by tensor from the mapped checkpoint: no model is built in memory. */
#include "cli.h"

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
    if (zt_checkpoint_export(ckpt, out, (size_t)max_shard) < 0)
        return die("%s", zt_last_error());
    printf("exported %s to %s\n", ckpt, out);
    return 0;
}
