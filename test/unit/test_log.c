/* SPDX-License-Identifier: Apache-2.0 */
/* test/unit/test_log.c - klog line format, quoting, verbosity. */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/log.h"

/* 2026-11-21 14:19:19.051804 UTC */
#define WHEN 1795270759051804LL

static void test_klog_line(void)
{
    struct buf b;
    buf_init(&b, 4096);
    int r = log_format(&b, LOG_INFO, WHEN, 13312, "src/node/vfio.c", 88, "Bound device to vfio-pci",
                       LOG_KVS(KV_STR("device", "0000:3b:00.1"), KV_INT("iommuGroup", 42)));
    CU_ASSERT_EQUAL(r, 0);
    CU_ASSERT_STRING_EQUAL(buf_str(&b), "I1121 14:19:19.051804   13312 vfio.c:88] \"Bound device "
                                        "to vfio-pci\" device=\"0000:3b:00.1\" iommuGroup=42\n");
    buf_free(&b);
}

static void test_quoting_and_errno(void)
{
    struct buf b;
    buf_init(&b, 4096);
    int r = log_format(
            &b, LOG_ERROR, WHEN, 1, "x.c", 1, "m",
            LOG_KVS(KV_STR("v", "a \"q\"\n\\\x01"), KV_STR("nil", NULL), KV_ERRNO(-ENOENT)));
    CU_ASSERT_EQUAL(r, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&b), " v=\"a \\\"q\\\"\\n\\\\\\x01\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&b), " nil=\"<nil>\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&b), " err=\"No such file or directory\"\n"));
    CU_ASSERT_EQUAL(buf_str(&b)[0], 'E');
    buf_free(&b);
}

static void test_no_kvs(void)
{
    struct buf b;
    buf_init(&b, 4096);
    CU_ASSERT_EQUAL(log_format(&b, LOG_WARNING, WHEN, 7, "y.c", 3, "plain", LOG_KVS()), 0);
    CU_ASSERT_STRING_EQUAL(buf_str(&b), "W1121 14:19:19.051804       7 y.c:3] \"plain\"\n");
    buf_free(&b);
}

static void test_verbosity_gates_output(void)
{
    int fds[2];
    int r = pipe2(fds, O_CLOEXEC);
    CU_ASSERT_EQUAL(r, 0);
    if (r < 0)
        return;
    log_set_fd(fds[1]);
    log_v(2, "hidden", KV_INT("n", 1));
    log_set_verbosity(2);
    log_v(2, "shown", KV_INT("n", 2));
    log_set_verbosity(0);
    log_set_fd(2);
    close(fds[1]);
    char out[512] = {0};
    ssize_t n = read(fds[0], out, sizeof(out) - 1);
    close(fds[0]);
    CU_ASSERT(n > 0);
    CU_ASSERT_PTR_NULL(strstr(out, "hidden"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"shown\" n=2\n"));
}

static CU_TestInfo tests[] = {
        {"klog line", test_klog_line},
        {"quoting and errno", test_quoting_and_errno},
        {"no key-value pairs", test_no_kvs},
        {"verbosity gates output", test_verbosity_gates_output},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo log_suites[] = {
        {"log", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
