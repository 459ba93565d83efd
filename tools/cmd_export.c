/* cmd_export.c - `zerotrain export`: a verified training checkpoint to a Hugging Face folder
 * (config.json + model.safetensors, sharded with an index above the shard limit). */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

int cmd_export(int argc, char **argv)
{
    const char *ckpt = NULL, *out = NULL, *shard = NULL;
    opt opts[] = {{"--checkpoint", &ckpt}, {"--out", &out}, {"--max-shard-size", &shard}};
    long max_shard = 5000000000L;
    zt_config cfg;
    zt_engine *e = NULL;
    int rc = 1;
    if (parse_opts(argc, argv, opts, 3))
        return 2;
    if (!ckpt || !out)
        return die("export needs --checkpoint DIR and --out DIR"), 2;
    if (shard && parse_int(shard, "--max-shard-size", 0, 1L << 50, &max_shard))
        return 2;
    if (zt_checkpoint_verify(ckpt) < 0)
        return die("%s", zt_last_error());
    zt_config_init(&cfg);
    cfg.model_dir = ckpt; /* a checkpoint folder is a Hugging Face folder plus state */
    cfg.dropout = 0;
    if (zt_engine_create(&cfg, MPI_COMM_NULL, &e) < 0)
        return die("%s", zt_last_error());
    if (zt_engine_save_model_ex(e, out, (size_t)max_shard) < 0)
        die("%s", zt_engine_last_error(e));
    else {
        printf("exported %s to %s\n", ckpt, out);
        rc = 0;
    }
    zt_engine_destroy(e);
    return rc;
}
