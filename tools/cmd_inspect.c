/* cmd_inspect.c - `zerotrain inspect`: the tensors of a safetensors file. */
#include "cli.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cmd_inspect(int argc, char **argv)
{
    zt_safetensors *f;
    size_t total = 0;
    int n;
    if (argc != 1)
        return die("inspect takes one file"), 2;
    if (zt_safetensors_open(argv[0], &f) < 0)
        return die("%s", zt_last_error());
    n = zt_safetensors_count(f);
    printf("%-64s %-5s %-22s %12s\n", "name", "dtype", "shape", "bytes");
    for (int i = 0; i < n; i++) {
        zt_tensor_info t;
        char shape[128] = "[";
        zt_safetensors_get(f, i, &t);
        for (int k = 0; k < t.ndim; k++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld",
                     k ? ", " : "", (long long)t.shape[k]);
        strncat(shape, "]", sizeof shape - strlen(shape) - 1);
        printf("%-64s %-5s %-22s %12zu\n", t.name, zt_dtype_name(t.dtype), shape, t.nbytes);
        total += t.nbytes;
    }
    printf("%d tensors, %zu bytes of data\n", n, total);
    zt_safetensors_close(f);
    return 0;
}
