/* test_memory.c - aligned, zero-filled allocation on both paths (mappings of their own from
 * ZT_MEM_MMAP_MIN on, given back on free; posix_memalign below), per-category accounting
 * (current and peak), and the report's heap and RSS fields. This binary runs on jemalloc
 * process-wide (as the command does), so the heap source must be found; a pure dlopen into a
 * process without jemalloc ("none") is checked from Python (tests/python/). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "zerotrain.h"
#include "../memory/mem.h"

static void test_alignment_and_zero(void **state)
{
    (void)state;
    for (size_t align = 64; align <= 4096; align *= 4) {
        unsigned char *p = zt_mem_alloc(10000, align, ZT_MEM_OTHER);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % align, 0);
        for (int i = 0; i < 10000; i++)
            assert_int_equal(p[i], 0);
        zt_mem_free(p, 10000, ZT_MEM_OTHER);
    }
    assert_null(zt_mem_alloc(0, 64, ZT_MEM_OTHER));
    assert_true(strlen(zt_last_error()) > 0);
    assert_null(zt_mem_alloc(100, 48, ZT_MEM_OTHER));
    assert_non_null(strstr(zt_last_error(), "power of two"));
}

/* sizes either side of the mapping threshold, alignments up to 2 MiB (larger than a page) */
static void test_both_paths(void **state)
{
    static const size_t sizes[] = {1, 4095, ((size_t)256 << 10) - 1, (size_t)256 << 10,
                                   ((size_t)256 << 10) + 1, (size_t)5 << 20};
    static const size_t aligns[] = {16, 64, 4096, 65536, (size_t)2 << 20};
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    (void)state;
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        for (size_t k = 0; k < sizeof aligns / sizeof *aligns; k++) {
            size_t n = sizes[i];
            unsigned char *p = zt_mem_alloc(n, aligns[k], ZT_MEM_IO);
            assert_non_null(p);
            assert_int_equal((uintptr_t)p % aligns[k], 0);
            for (size_t j = 0; j < n; j += 61)
                assert_int_equal(p[j], 0);
            assert_int_equal(p[n - 1], 0);
            memset(p, 0xa5, n); /* the whole size is ours */
            zt_mem_free(p, n, ZT_MEM_IO);
            if (n >= ZT_MEM_MMAP_MIN) { /* unmapped on free: given back to the system */
                errno = 0;
                assert_int_equal(msync(p, pg, MS_ASYNC), -1);
                assert_int_equal(errno, ENOMEM);
            }
        }
}

static void test_accounting(void **state)
{
    zt_mem_report r0, r1, r2;
    (void)state;
    zt_memory_report(&r0);
    void *a = zt_mem_alloc(1 << 20, 4096, ZT_MEM_PARAMS);
    void *b = zt_mem_alloc(3 << 20, 64, ZT_MEM_OPTIMIZER);
    assert_non_null(a);
    assert_non_null(b);
    memset(b, 1, 3 << 20);
    zt_memory_report(&r1);
    assert_int_equal(r1.current[ZT_MEM_PARAMS] - r0.current[ZT_MEM_PARAMS], 1 << 20);
    assert_int_equal(r1.current[ZT_MEM_OPTIMIZER] - r0.current[ZT_MEM_OPTIMIZER], 3 << 20);
    assert_int_equal(r1.current[ZT_MEM_GRADS], r0.current[ZT_MEM_GRADS]);
    assert_true(r1.peak[ZT_MEM_OPTIMIZER] >= r1.current[ZT_MEM_OPTIMIZER]);
    assert_int_equal(r1.total_current - r0.total_current, 4 << 20);
    assert_true(r1.peak_rss >= (size_t)(3 << 20));
    zt_mem_free(b, 3 << 20, ZT_MEM_OPTIMIZER);
    zt_memory_report(&r2);
    assert_int_equal(r2.current[ZT_MEM_OPTIMIZER], r0.current[ZT_MEM_OPTIMIZER]);
    /* the peak remembers what was freed */
    assert_true(r2.peak[ZT_MEM_OPTIMIZER] >= r0.current[ZT_MEM_OPTIMIZER] + (3 << 20));
    zt_mem_free(a, 1 << 20, ZT_MEM_PARAMS);
    zt_memory_report(&r2);
    assert_int_equal(r2.total_current, r0.total_current);
    assert_string_equal(zt_memory_category_name(ZT_MEM_ACTIVATIONS), "activations");
}

/* The heap's statistics come from the process's jemalloc (linked into this binary, found at
 * run time): they are live, they see a plain malloc, and the library's own mapped buffers
 * are not in them. */
static void test_heap_stats(void **state)
{
    zt_mem_report r0, r1, r2;
    size_t n = (size_t)8 << 20;
    (void)state;
#if defined(__SANITIZE_ADDRESS__)
    /* (AddressSanitizer's malloc is the process's: jemalloc, though linked, is not the heap) */
    assert_string_equal(zt_memory_heap_source(), "none");
    return;
#endif
    assert_string_equal(zt_memory_heap_source(), "jemalloc");
    zt_memory_report(&r0);
    assert_true(r0.jemalloc_allocated > 0);
    assert_true(r0.jemalloc_resident > 0);
    char *m = malloc(n);
    assert_non_null(m);
    memset(m, 1, n);
    zt_memory_report(&r1);
    assert_true(r1.jemalloc_allocated >= r0.jemalloc_allocated + n);
    void *big = zt_mem_alloc(n, 4096, ZT_MEM_OTHER);
    assert_non_null(big);
    zt_memory_report(&r2);
    assert_true(r2.jemalloc_allocated < r1.jemalloc_allocated + n / 2);
    assert_int_equal(r2.total_current - r1.total_current, n);
    zt_mem_free(big, n, ZT_MEM_OTHER);
    free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_alignment_and_zero),
                                       cmocka_unit_test(test_both_paths),
                                       cmocka_unit_test(test_accounting),
                                       cmocka_unit_test(test_heap_stats)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
