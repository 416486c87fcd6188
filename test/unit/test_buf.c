/* SPDX-License-Identifier: Apache-2.0 */
/* test/unit/test_buf.c - the capped buffer: growth, cap, consume, take. */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"

static void test_grows_and_terminates(void)
{
    struct buf b;
    buf_init(&b, 1 << 20);
    CU_ASSERT_STRING_EQUAL(buf_str(&b), "");
    for (int i = 0; i < 1000; i++)
        CU_ASSERT_EQUAL(buf_adds(&b, "abc"), 0);
    CU_ASSERT_EQUAL(b.len, 3000);
    CU_ASSERT_EQUAL(strlen(buf_str(&b)), 3000);
    CU_ASSERT_EQUAL(memcmp(buf_str(&b) + 2997, "abc", 3), 0);
    buf_free(&b);
}

static void test_cap_is_per_input_and_frees(void)
{
    struct buf b;
    buf_init(&b, 8);
    CU_ASSERT_EQUAL(buf_adds(&b, "12345678"), 0);
    CU_ASSERT_EQUAL(buf_adds(&b, "9"), -E2BIG);
    CU_ASSERT_EQUAL(b.len, 0);
    CU_ASSERT_PTR_NULL(b.data);
    /* The buffer stays usable for the next input. */
    CU_ASSERT_EQUAL(buf_printf(&b, "%d-%s", 42, "ok"), 0);
    CU_ASSERT_STRING_EQUAL(buf_str(&b), "42-ok");
    CU_ASSERT_EQUAL(buf_printf(&b, "%s", "too long"), -E2BIG);
    buf_free(&b);
}

static void test_huge_length_does_not_overflow(void)
{
    struct buf b;
    buf_init(&b, 16);
    CU_ASSERT_EQUAL(buf_adds(&b, "x"), 0);
    CU_ASSERT_EQUAL(buf_add(&b, "y", (size_t)-1), -E2BIG);
    buf_free(&b);
}

static void test_consume_and_take(void)
{
    struct buf b;
    buf_init(&b, 64);
    CU_ASSERT_EQUAL(buf_adds(&b, "line1\nline2\n"), 0);
    buf_consume(&b, 6);
    CU_ASSERT_STRING_EQUAL(buf_str(&b), "line2\n");
    buf_consume(&b, 100);
    CU_ASSERT_EQUAL(b.len, 0);
    CU_ASSERT_STRING_EQUAL(buf_str(&b), "");
    CU_ASSERT_EQUAL(buf_adds(&b, "kept"), 0);
    char *s = buf_take(&b);
    CU_ASSERT_STRING_EQUAL(s, "kept");
    CU_ASSERT_PTR_NULL(b.data);
    CU_ASSERT_EQUAL(b.cap, 64);
    free(s);
}

/* _cleanup_buf_ frees the memory when the buffer leaves scope (a leak here fails the ASan run);
 * buf_take first leaves nothing to free. */
static void test_cleanup(void)
{
    char *s;
    {
        _cleanup_buf_ struct buf b;
        buf_init(&b, 64);
        CU_ASSERT_EQUAL(buf_adds(&b, "freed at scope end"), 0);
    }
    {
        _cleanup_buf_ struct buf b;
        buf_init(&b, 64);
        CU_ASSERT_EQUAL(buf_adds(&b, "taken"), 0);
        s = buf_take(&b);
    }
    CU_ASSERT_STRING_EQUAL(s, "taken");
    free(s);
}

static CU_TestInfo tests[] = {
        {"grows and terminates", test_grows_and_terminates},
        {"cap is per input and frees", test_cap_is_per_input_and_frees},
        {"huge length does not overflow", test_huge_length_does_not_overflow},
        {"consume and take", test_consume_and_take},
        {"cleanup at scope end", test_cleanup},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo buf_suites[] = {
        {"buf", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
