/* test_offload.c - the I/O queue and the blob store: byte-exact round trips of odd sizes from
 * unaligned buffers on both backends, the ordering of operations on one blob, the fallbacks
 * (O_DIRECT refused, io_uring unavailable, buffer registration refused), the swap file gone
 * from the folder from the start, faults injected into completions (transient ones retried
 * and verified, fatal ones reported with context), and a real ENOSPC on a small tmpfs.
 * ZT_FAULT_OPS sets the number of faulted operations (make test: 20000; make test-long:
 * 100000). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zerotrain.h"
#include "../offload/store.h"

static char dir[256];

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void fill_bytes(unsigned char *p, size_t n, uint64_t seed)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        p[i] = (unsigned char)x;
    }
}

static int count_swap_files(void)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strncmp(e->d_name, "zerotrain-", 10) == 0;
    if (d)
        closedir(d);
    return n;
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/var/tmp/zt-offload-test-XXXXXX"); /* mkdtemp's template */
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return rmdir(dir);
}

static const size_t SIZES[] = {1, 511, 512, 513, 4095, 4096, 4097, 65536 + 3, (1u << 20) + 5,
                               3 * (1u << 16) + 17};
enum { NS = sizeof SIZES / sizeof SIZES[0] };

/* every size, from buffers one byte off alignment, put / get / prefetch, byte-exact */
static void roundtrip(zt_store_opts *o)
{
    zt_store *s;
    assert_int_equal(zt_store_open(&s, o), 0);
    assert_int_equal(count_swap_files(), 0); /* unlinked at once */
    int id[NS];
    unsigned char *src[NS], *dst[NS];
    for (int i = 0; i < NS; i++) {
        id[i] = zt_store_add(s, SIZES[i], ZT_MEM_OPTIMIZER);
        assert_true(id[i] >= 0);
        src[i] = malloc(SIZES[i] + 1);
        dst[i] = malloc(SIZES[i] + 1);
        fill_bytes(src[i] + 1, SIZES[i], (uint64_t)i + 1);
    }
    assert_int_equal(zt_store_reserve(s), 0);
    for (int i = 0; i < NS; i++) /* all writes in flight together */
        assert_int_equal(zt_store_put(s, id[i], src[i] + 1), 0);
    for (int i = NS - 1; i >= 0; i--) { /* reads right behind the writes: ordered per blob */
        memset(dst[i], 0, SIZES[i] + 1);
        assert_int_equal(zt_store_get(s, id[i], dst[i] + 1), 0);
        assert_memory_equal(dst[i] + 1, src[i] + 1, SIZES[i]);
    }
    /* new contents for the even blobs; prefetch all, then get */
    for (int i = 0; i < NS; i += 2) {
        fill_bytes(src[i] + 1, SIZES[i], (uint64_t)i + 100);
        assert_int_equal(zt_store_put(s, id[i], src[i] + 1), 0);
    }
    for (int i = 0; i < NS; i++) {
        memset(dst[i], 0, SIZES[i] + 1);
        assert_int_equal(zt_store_prefetch(s, id[i], dst[i] + 1), 0);
    }
    for (int i = 0; i < NS; i++) {
        assert_int_equal(zt_store_get(s, id[i], dst[i] + 1), 0);
        assert_memory_equal(dst[i] + 1, src[i] + 1, SIZES[i]);
    }
    /* dropped: a get is an error, and says why */
    assert_int_equal(zt_store_drop(s, id[1]), 0);
    assert_true(zt_store_get(s, id[1], dst[1] + 1) < 0);
    assert_non_null(strstr(zt_last_error(), "holds no data"));
    zt_store_stats st;
    zt_store_get_stats(s, &st);
    assert_true(st.written_bytes[ZT_MEM_OPTIMIZER] > 0 && st.read_bytes[ZT_MEM_OPTIMIZER] > 0);
    zt_store_close(s);
    for (int i = 0; i < NS; i++) {
        free(src[i]);
        free(dst[i]);
    }
    assert_int_equal(count_swap_files(), 0);
}

static void nvme_opts(zt_store_opts *o)
{
    zt_store_opts_init(o);
    o->device = ZT_STORE_NVME;
    o->dir = dir;
    o->tag = "t";
    o->io.block_size = 1u << 16; /* several pieces per large blob */
    o->io.queue_depth = 4;
}

static zt_store_stats opened_stats(const zt_store_opts *o);

static void test_roundtrip_uring(void **state)
{
    (void)state;
    zt_store_opts o;
    nvme_opts(&o);
    roundtrip(&o);
    /* DeepSpeed's defaults: 1 MiB blocks, depth 8 */
    zt_store_opts_init(&o);
    o.device = ZT_STORE_NVME;
    o.dir = dir;
    roundtrip(&o);
    /* aio.intra_op_parallelism 3 (a ring per I/O thread), single_submit, overlap_events off
     * (pieces in waves), and each alone */
    const int v[4][3] = {{3, 1, 1}, {2, 0, 0}, {1, 1, 0}, {1, 0, 1}};
    for (int k = 0; k < 4; k++) {
        nvme_opts(&o);
        o.io.io_threads = v[k][0];
        o.io.single_submit = v[k][1];
        o.io.no_overlap = v[k][2];
        roundtrip(&o);
        zt_store_stats st = opened_stats(&o);
        assert_int_equal(st.io.backend, v[k][0] > 1 ? ZT_IO_URING_THREADS : ZT_IO_URING);
    }
}

static void test_roundtrip_ram(void **state)
{
    (void)state;
    zt_store_opts o;
    zt_store_opts_init(&o);
    roundtrip(&o);
    /* the RAM pool accounts what it holds and drop gives it back */
    zt_store *s;
    assert_int_equal(zt_store_open(&s, &o), 0);
    int a = zt_store_add(s, 1000, ZT_MEM_PARAMS);
    char buf[1000] = {1};
    assert_int_equal(zt_store_put(s, a, buf), 0);
    zt_store_stats st;
    zt_store_get_stats(s, &st);
    assert_int_equal(st.resident[ZT_MEM_PARAMS], 1000);
    assert_int_equal(zt_store_drop(s, a), 0);
    zt_store_get_stats(s, &st);
    assert_int_equal(st.resident[ZT_MEM_PARAMS], 0);
    zt_store_close(s);
}

/* the stats of a store opened with o (and closed again) */
static zt_store_stats opened_stats(const zt_store_opts *o)
{
    zt_store *s;
    zt_store_stats st;
    assert_int_equal(zt_store_open(&s, o), 0);
    zt_store_get_stats(s, &st);
    zt_store_close(s);
    return st;
}

static void test_fallbacks(void **state)
{
    (void)state;
    zt_store_opts o;
    zt_store_stats st;
    zt_store *s;
    /* a filesystem refusing O_DIRECT: buffered, with the same bytes */
    nvme_opts(&o);
    o.io.fault_open_einval = 1;
    st = opened_stats(&o);
    assert_int_equal(st.io.direct, 0);
    roundtrip(&o);
    /* ... unless O_DIRECT was required */
    o.io.direct = 1;
    assert_true(zt_store_open(&s, &o) < 0);
    assert_non_null(strstr(zt_last_error(), "O_DIRECT"));
    assert_int_equal(count_swap_files(), 0);
    /* io_uring unavailable (seccomp, io_uring_disabled): the thread pool */
    nvme_opts(&o);
    o.io.fault_setup_errno = ENOSYS;
    st = opened_stats(&o);
    assert_int_equal(st.io.backend, ZT_IO_THREADS);
    roundtrip(&o);
    o.io.fault_setup_errno = EPERM;
    roundtrip(&o);
    /* registration refused by RLIMIT_MEMLOCK: unregistered buffers */
    nvme_opts(&o);
    o.io.fault_register_errno = ENOMEM;
    st = opened_stats(&o);
    assert_int_equal(st.io.backend, ZT_IO_URING);
    assert_int_equal(st.io.registered, 0);
    roundtrip(&o);
    /* without the hooks: direct I/O and registered buffers on this folder */
    nvme_opts(&o);
    st = opened_stats(&o);
    assert_int_equal(st.io.backend, ZT_IO_URING);
    assert_int_equal(st.io.registered, 1);
    /* bad settings and folders: one clear message */
    nvme_opts(&o);
    o.io.block_size = 1000;
    assert_true(zt_store_open(&s, &o) < 0);
    assert_non_null(strstr(zt_last_error(), "block_size"));
    nvme_opts(&o);
    o.dir = "/nonexistent/zt";
    assert_true(zt_store_open(&s, &o) < 0);
    assert_non_null(strstr(zt_last_error(), "/nonexistent/zt"));
}

/* ---- injected faults ---------------------------------------------------------------- */

typedef struct {
    long ops, fatal;
} fault_ctx;

static int fault(void *arg, int is_write, uint64_t off, size_t len, int res)
{
    fault_ctx *f = arg;
    (void)is_write, (void)off;
    f->ops++;
    if (res < 0)
        return res;
    unsigned r = (unsigned)(rnd() % 1000);
    if (r < 40) /* short: any count below what was asked, even 0 */
        return (int)(rnd() % len);
    if (r < 60)
        return -EAGAIN;
    if (r < 80)
        return -EINTR;
    if (r < 90)
        return -EBUSY;
    if (r < 95)
        return -ENOMEM;
    if (r < 98) {
        f->fatal++;
        return -EIO;
    }
    if (r < 100) {
        f->fatal++;
        return -ENOSPC;
    }
    return res;
}

static void faults(int threads_only, int io_threads)
{
    long target = getenv("ZT_FAULT_OPS") ? atol(getenv("ZT_FAULT_OPS")) : 20000;
    zt_store_opts o;
    nvme_opts(&o);
    o.io.block_size = 4096;
    o.io.queue_depth = 8;
    o.io.threads_only = threads_only;
    o.io.io_threads = io_threads;
    o.io.single_submit = io_threads > 1;
    fault_ctx f = {0, 0};
    o.io.fault = fault;
    o.io.fault_arg = &f;
    zt_store *s;
    assert_int_equal(zt_store_open(&s, &o), 0);
    enum { NB = 24 };
    int id[NB];
    size_t sz[NB];
    unsigned char *want[NB], *got[NB];
    int ok[NB];
    for (int i = 0; i < NB; i++) {
        sz[i] = 1 + rnd() % 40000;
        id[i] = zt_store_add(s, sz[i], ZT_MEM_OPTIMIZER);
        want[i] = malloc(sz[i]);
        got[i] = malloc(sz[i]);
        ok[i] = 0;
    }
    long errors = 0, verified = 0, gen = 0;
    while (f.ops < target) {
        int i = (int)(rnd() % NB);
        if (!ok[i] || rnd() % 3 == 0) { /* (re)write it with new contents */
            fill_bytes(want[i], sz[i], (uint64_t)++gen);
            int rc = zt_store_put(s, id[i], want[i]);
            if (rc == 0)
                rc = zt_store_wait(s, id[i]);
            ok[i] = rc == 0;
            if (rc < 0) {
                errors++;
                assert_true(rc == -EIO || rc == -ENOSPC);
                assert_non_null(strstr(zt_last_error(), "offset"));
                assert_non_null(strstr(zt_last_error(), dir));
            }
        } else {
            memset(got[i], 0xee, sz[i]);
            int rc = zt_store_get(s, id[i], got[i]);
            if (rc < 0) {
                errors++;
                assert_true(rc == -EIO || rc == -ENOSPC);
                assert_non_null(strstr(zt_last_error(), "read of"));
            } else {
                assert_memory_equal(got[i], want[i], sz[i]); /* no silent corruption */
                verified++;
            }
        }
    }
    zt_store_stats st;
    zt_store_get_stats(s, &st);
    assert_true(errors > 0 && verified > 0 && st.io.retries > 0 && st.io.short_transfers > 0);
    print_message("%ld faulted operations: %ld verified reads, %ld fatal faults surfaced as "
                  "errors, %llu retries, %llu short transfers\n", f.ops, verified, errors,
                  (unsigned long long)st.io.retries, (unsigned long long)st.io.short_transfers);
    zt_store_close(s);
    for (int i = 0; i < NB; i++) {
        free(want[i]);
        free(got[i]);
    }
}

static void test_faults_uring(void **state) { (void)state; faults(0, 1); }
static void test_faults_threads(void **state) { (void)state; faults(1, 1); }
static void test_faults_uring_threads(void **state) { (void)state; faults(0, 2); }

/* ---- a real ENOSPC ------------------------------------------------------------------ */

static void test_enospc(void **state)
{
    (void)state;
    char small[300];
    snprintf(small, sizeof small, "%s/small", dir);
    assert_int_equal(mkdir(small, 0700), 0);
    if (mount("tmpfs", small, "tmpfs", 0, "size=1m") != 0) {
        rmdir(small);
        skip(); /* needs CAP_SYS_ADMIN (CI runs as root) */
    }
    zt_store_opts o;
    nvme_opts(&o);
    o.dir = small;
    zt_store *s;
    assert_int_equal(zt_store_open(&s, &o), 0);
    /* too small from the start: the reservation says so, naming path and bytes */
    int a = zt_store_add(s, 3u << 20, ZT_MEM_OPTIMIZER);
    assert_true(a >= 0);
    int rc = zt_store_reserve(s);
    assert_int_equal(rc, -ENOSPC);
    assert_non_null(strstr(zt_last_error(), "no space left"));
    assert_non_null(strstr(zt_last_error(), small));
    assert_non_null(strstr(zt_last_error(), "3145728"));
    /* filling up in the middle (no reservation): the write fails the same way */
    unsigned char *buf = calloc(1, 3u << 20);
    rc = zt_store_put(s, a, buf);
    if (rc == 0)
        rc = zt_store_wait(s, a);
    assert_int_equal(rc, -ENOSPC);
    assert_non_null(strstr(zt_last_error(), "no space left"));
    assert_non_null(strstr(zt_last_error(), small));
    zt_store_close(s);
    free(buf);
    /* nothing left behind */
    DIR *d = opendir(small);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    assert_int_equal(n, 0);
    assert_int_equal(umount(small), 0);
    assert_int_equal(rmdir(small), 0);
}

/* ---- the locked-memory limit (run_all.sh: setpriv without CAP_IPC_LOCK, ulimit -l 64) -- */

static char logged[4096];
static void capture(int level, const char *msg, void *user)
{
    (void)level, (void)user;
    strncat(logged, msg, sizeof logged - strlen(logged) - 1);
}

static int has_ipc_lock(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long eff = ~0ull;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "CapEff: %llx", &eff) == 1)
            break;
    if (f)
        fclose(f);
    return (int)((eff >> 14) & 1); /* CAP_IPC_LOCK */
}

static void test_memlock(void **state)
{
    (void)state;
    struct rlimit rl;
    assert_int_equal(getrlimit(RLIMIT_MEMLOCK, &rl), 0);
    assert_true(rl.rlim_cur <= 64 * 1024); /* what the wrapper promised */
    assert_false(has_ipc_lock());
    zt_log_set(capture, NULL, ZT_LOG_WARN);
    zt_store_opts o;
    nvme_opts(&o); /* 4 buffers x 64 KiB: more than the limit */
    zt_store_stats st = opened_stats(&o);
    assert_int_equal(st.io.registered, 0);
    assert_non_null(strstr(logged, "RLIMIT_MEMLOCK"));
    roundtrip(&o);
    zt_log_set(NULL, NULL, ZT_LOG_WARN);
}

int main(void)
{
    if (getenv("ZT_MEMLOCK_TEST")) {
        const struct CMUnitTest only[] = {cmocka_unit_test(test_memlock)};
        return cmocka_run_group_tests(only, setup, teardown);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_uring), cmocka_unit_test(test_roundtrip_ram),
        cmocka_unit_test(test_fallbacks),       cmocka_unit_test(test_faults_uring),
        cmocka_unit_test(test_faults_threads),  cmocka_unit_test(test_faults_uring_threads),
        cmocka_unit_test(test_enospc),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
