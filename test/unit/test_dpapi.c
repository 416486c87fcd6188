/* SPDX-License-Identifier: Apache-2.0 */
/* test/unit/test_dpapi.c - device-plugin API messages, checked byte by byte against the
 * v1beta1 wire contract (field numbers and types of kubelet's api.proto). */
#include <CUnit/CUnit.h>
#include <string.h>

#include "kubelet/dpapi.h"

static bool bytes_are(const struct buf *b, const char *want, size_t n)
{
    return b->len == n && memcmp(b->data, want, n) == 0;
}

static void test_options_and_register(void)
{
    struct buf b;
    buf_init(&b, 4096);
    struct dpapi_options none = {0}, both = {true, true};
    CU_ASSERT_EQUAL(dpapi_encode_options(&none, &b), 0);
    CU_ASSERT_EQUAL(b.len, 0); /* proto3 defaults are omitted: an empty message */
    CU_ASSERT_EQUAL(dpapi_encode_options(&both, &b), 0);
    CU_ASSERT_TRUE(bytes_are(&b, "\x08\x01\x10\x01", 4));
    CU_ASSERT_EQUAL(dpapi_encode_register("x.sock", "a/b", &both, &b), 0);
    static const char want[] = "\x0a\x07v1beta1"
                               "\x12\x06x.sock"
                               "\x1a\x03"
                               "a/b"
                               "\x22\x04\x08\x01\x10\x01";
    CU_ASSERT_TRUE(bytes_are(&b, want, sizeof(want) - 1));
    buf_free(&b);
}

static void test_list(void)
{
    struct buf b;
    buf_init(&b, 4096);
    struct dpapi_device devs[] = {{"d1", true, 1}, {"d2", false, -1}};
    CU_ASSERT_EQUAL(dpapi_encode_list(devs, 2, &b), 0);
    /* Device{ID "d1", health "Healthy", topology {nodes [{ID 1}]}}, Device{"d2", "Unhealthy"} */
    static const char want[] = "\x0a\x13"
                               "\x0a\x02"
                               "d1"
                               "\x12\x07"
                               "Healthy"
                               "\x1a\x04\x0a\x02\x08\x01"
                               "\x0a\x0f"
                               "\x0a\x02"
                               "d2"
                               "\x12\x09"
                               "Unhealthy";
    CU_ASSERT_TRUE(bytes_are(&b, want, sizeof(want) - 1));
    struct dpapi_device *back;
    size_t n;
    struct err e = {""};
    CU_ASSERT_EQUAL_FATAL(dpapi_decode_list((const uint8_t *)b.data, b.len, &back, &n, &e), 0);
    CU_ASSERT_EQUAL_FATAL(n, 2);
    CU_ASSERT_STRING_EQUAL(back[1].id, "d2");
    CU_ASSERT_EQUAL(back[0].numa_node, 1);
    CU_ASSERT_EQUAL(back[1].numa_node, -1);
    CU_ASSERT_FALSE(back[1].healthy);
    dpapi_devices_free(back, n);
    CU_ASSERT_EQUAL(dpapi_encode_list(NULL, 0, &b), 0);
    CU_ASSERT_EQUAL(b.len, 0);
    buf_free(&b);
}

static void test_allocate_request(void)
{
    /* AllocateRequest{container_requests [{devices_ids ["0000:00:04.0", "x"]}, {}]}, plus an
     * unknown field 9 (varint) a newer kubelet might send */
    static const char msg[] = "\x0a\x11\x0a\x0c"
                              "0000:00:04.0"
                              "\x0a\x01x"
                              "\x0a\x00"
                              "\x48\x05";
    struct dpapi_request r;
    struct err e = {""};
    CU_ASSERT_EQUAL_FATAL(dpapi_decode_allocate((const uint8_t *)msg, sizeof(msg) - 1, &r, &e), 0);
    CU_ASSERT_EQUAL_FATAL(r.n_containers, 2);
    CU_ASSERT_EQUAL_FATAL(r.containers[0].n, 2);
    CU_ASSERT_STRING_EQUAL(r.containers[0].ids[0], "0000:00:04.0");
    CU_ASSERT_EQUAL(r.containers[1].n, 0);
    dpapi_request_done(&r);
    /* truncated, and an empty ID */
    CU_ASSERT_EQUAL(dpapi_decode_allocate((const uint8_t *)msg, 8, &r, &e), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "AllocateRequest"));
    static const char empty_id[] = "\x0a\x02\x0a\x00";
    CU_ASSERT_EQUAL(dpapi_decode_allocate((const uint8_t *)empty_id, 4, &r, &e), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "empty"));
}

static void test_preferred_and_pre_start(void)
{
    /* PreferredAllocationRequest{[{available ["a","b"], must_include ["b"], size 1}]} */
    static const char msg[] = "\x0a\x0b\x0a\x01"
                              "a"
                              "\x0a\x01"
                              "b"
                              "\x12\x01"
                              "b"
                              "\x18\x01";
    struct dpapi_request r;
    struct err e = {""};
    CU_ASSERT_EQUAL_FATAL(dpapi_decode_preferred((const uint8_t *)msg, sizeof(msg) - 1, &r, &e), 0);
    CU_ASSERT_EQUAL_FATAL(r.n_containers, 1);
    CU_ASSERT_EQUAL(r.containers[0].n, 2);
    CU_ASSERT_STRING_EQUAL(r.must_include[0].ids[0], "b");
    CU_ASSERT_EQUAL(r.sizes[0], 1);
    struct buf b;
    buf_init(&b, 4096);
    CU_ASSERT_EQUAL(dpapi_encode_preferred(r.must_include, 1, &b), 0);
    CU_ASSERT_TRUE(bytes_are(&b,
                             "\x0a\x03\x0a\x01"
                             "b",
                             5));
    dpapi_request_done(&r);
    static const char pre[] = "\x0a\x01z";
    CU_ASSERT_EQUAL_FATAL(dpapi_decode_pre_start((const uint8_t *)pre, 3, &r, &e), 0);
    CU_ASSERT_STRING_EQUAL(r.containers[0].ids[0], "z");
    dpapi_request_done(&r);
    buf_free(&b);
}

static void test_allocate_response(void)
{
    struct dpapi_kv env = {"PCI_RESOURCE_A", "0000:00:04.0"};
    struct dpapi_devspec dev = {"/dev/vfio/3", "/dev/vfio/3", "mrw"};
    struct dpapi_container_response c = {&env, 1, &dev, 1};
    struct buf b;
    buf_init(&b, 4096);
    CU_ASSERT_EQUAL(dpapi_encode_allocate(&c, 1, &b), 0);
    /* ContainerAllocateResponse{envs {key, value} (field 1), devices [DeviceSpec] (field 3)} */
    static const char want[] = "\x0a\x41"
                               "\x0a\x1e\x0a\x0e"
                               "PCI_RESOURCE_A"
                               "\x12\x0c"
                               "0000:00:04.0"
                               "\x1a\x1f\x0a\x0b/dev/vfio/3\x12\x0b/dev/vfio/3\x1a\x03mrw";
    CU_ASSERT_TRUE(bytes_are(&b, want, sizeof(want) - 1));
    buf_free(&b);
}

static CU_TestInfo tests[] = {
        {"options and register", test_options_and_register},
        {"ListAndWatch response", test_list},
        {"Allocate request", test_allocate_request},
        {"preferred allocation and PreStart", test_preferred_and_pre_start},
        {"Allocate response", test_allocate_response},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo dpapi_suites[] = {
        {"dpapi", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
