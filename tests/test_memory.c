/* test_memory.c - aligned allocation and per-category accounting (current and peak), and
 * the report's jemalloc and RSS fields. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

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
    assert_true(r1.jemalloc_allocated >= (size_t)(4 << 20));
    assert_true(r1.jemalloc_resident >= (size_t)(3 << 20));
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

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_alignment_and_zero),
                                       cmocka_unit_test(test_accounting)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
