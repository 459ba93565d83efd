/* fuzz_safetensors.c - libFuzzer target for the safetensors reader: each input becomes a file
 * (a memfd opened through /proc/self/fd) that is opened, walked, looked up and converted.
 * It checks the reader's own invariants; it does not exercise the writer (fsync is too slow). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "zerotrain.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int memfd = -1;
static char path[64];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    zt_safetensors *f = NULL;
    size_t total = 0;

    if (memfd < 0) {
        memfd = memfd_create("fuzz.safetensors", MFD_CLOEXEC);
        if (memfd < 0)
            abort();
        snprintf(path, sizeof path, "/proc/self/fd/%d", memfd);
    }
    if (ftruncate(memfd, 0) < 0 || pwrite(memfd, data, size, 0) != (ssize_t)size)
        abort();

    int rc = zt_safetensors_open(path, &f);
    if (rc < 0) {
        /* a rejection always explains itself and names the file */
        if (f || !strstr(zt_last_error(), path))
            abort();
        return 0;
    }
    if (size < 8)
        abort();
    int n = zt_safetensors_count(f);
    for (int i = 0; i < n; i++) {
        zt_tensor_info t, u;
        if (zt_safetensors_get(f, i, &t) < 0 || zt_safetensors_find(f, t.name, &u) < 0 ||
            memcmp(&t, &u, sizeof t) != 0)
            abort();
        /* invariants: inside the file, sizes consistent, sorted by name */
        if (t.offset > size || t.nbytes > size - t.offset ||
            t.nbytes != t.numel * zt_dtype_size(t.dtype) || t.ndim < 0 ||
            t.ndim > ZT_MAX_DIMS || !t.data)
            abort();
        if (i > 0) {
            zt_tensor_info prev;
            zt_safetensors_get(f, i - 1, &prev);
            if (strcmp(prev.name, t.name) >= 0)
                abort();
        }
        total += t.nbytes;
        if (t.dtype == ZT_F32 || t.dtype == ZT_F16 || t.dtype == ZT_BF16) {
            float *dst = malloc(t.numel * sizeof *dst + 1);
            if (!dst)
                abort();
            if (zt_tensor_to_f32(&t, dst, t.numel) != 0)
                abort();
            if (zt_tensor_to_f32(&t, dst, t.numel + 1) != ZT_E_SHAPE)
                abort();
            free(dst);
        } else if (zt_tensor_to_f32(&t, NULL, t.numel) != ZT_E_UNSUPPORTED) {
            abort();
        }
    }
    /* the data section is covered exactly */
    uint64_t hlen;
    memcpy(&hlen, data, 8);
    if (total != size - 8 - hlen)
        abort();
    (void)zt_safetensors_metadata(f, "format");
    zt_safetensors_close(f);
    return 0;
}
