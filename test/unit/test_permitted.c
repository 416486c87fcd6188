/* SPDX-License-Identifier: Apache-2.0 */
/* test/unit/test_permitted.c - permittedHostDevices as a set with an owner. */
#include <CUnit/CUnit.h>
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "controllers/permitted.h"

#define OWNED "\"hostdevd.io/owned-host-devices\""

static const struct permitted_entry nic = {"intel.com/82574L", false, "8086", "10d3"};
static const struct permitted_entry gpu = {"nvidia.com/TU104GL", false, "10de", "1eb8"};
static const struct permitted_entry stick = {"kubevirt.io/titan-0951-1666-2-1-4", true, "0951",
                                             "1666"};

static cJSON *cr(const char *annotation, const char *phd)
{
    char text[4096];
    (void)snprintf(text, sizeof(text),
                   "{\"metadata\":{\"name\":\"kubevirt\",\"resourceVersion\":\"7\"%s%s%s},"
                   "\"spec\":{\"configuration\":{\"developerConfiguration\":{\"featureGates\":"
                   "[\"HostDevices\"]}%s%s}}}",
                   annotation ? ",\"annotations\":{" OWNED ":\"" : "", annotation ? annotation : "",
                   annotation ? "\"}" : "", phd ? ",\"permittedHostDevices\":" : "",
                   phd ? phd : "");
    cJSON *o = cJSON_Parse(text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    return o;
}

/* The patch applied as a merge patch would (what the API server stores), for a second plan. */
static void apply(cJSON *obj, const char *patch)
{
    cJSON *p = cJSON_Parse(patch);
    cJSON *merged = cJSON_Duplicate(obj, true);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    /* cJSON has no merge-patch: good enough for the fields this writes */
    cJSON *ann = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, "metadata"),
                                                  "annotations");
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(merged, "metadata");
    if (ann) {
        cJSON_DeleteItemFromObjectCaseSensitive(meta, "annotations");
        cJSON_AddItemToObject(meta, "annotations", cJSON_Duplicate(ann, true));
    }
    cJSON *phd = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, "spec"),
                                             "configuration"),
            "permittedHostDevices");
    cJSON *conf = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(merged, "spec"),
                                                   "configuration");
    cJSON *cur = cJSON_GetObjectItemCaseSensitive(conf, "permittedHostDevices");
    if (phd && !cJSON_IsObject(cur)) {
        cJSON_DeleteItemFromObjectCaseSensitive(conf, "permittedHostDevices");
        cur = cJSON_AddObjectToObject(conf, "permittedHostDevices");
    }
    const cJSON *list;
    cJSON_ArrayForEach(list, phd)
    {
        cJSON_DeleteItemFromObjectCaseSensitive(cur, list->string);
        cJSON_AddItemToObject(cur, list->string, cJSON_Duplicate(list, true));
    }
    cJSON_ReplaceItemInObjectCaseSensitive(obj, "metadata", cJSON_Duplicate(meta, true));
    cJSON_ReplaceItemInObjectCaseSensitive(
            obj, "spec", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(merged, "spec"), true));
    cJSON_Delete(merged);
    cJSON_Delete(p);
}

/* strstr that a NULL patch cannot crash. */
static const char *find(const char *patch, const char *what)
{
    return patch ? strstr(patch, what) : NULL;
}

static struct permitted_want want_of(const struct permitted_entry *const *e, size_t n)
{
    struct permitted_want w = {0};
    for (size_t i = 0; i < n; i++)
        CU_ASSERT_EQUAL(permitted_want_add(&w, e[i]), 0);
    return w;
}

static void test_add_to_null_and_missing(void)
{
    const struct permitted_entry *e[] = {&nic, &stick, &nic}; /* two claims share the NIC name */
    struct permitted_want w = want_of(e, 3);
    CU_ASSERT_EQUAL(w.n, 2);
    const char *shapes[] = {NULL, "null", "{}", "{\"pciHostDevices\":null,\"usb\":null}"};
    for (size_t i = 0; i < 4; i++) {
        cJSON *o = cr(NULL, shapes[i]);
        struct permitted_result r;
        CU_ASSERT_EQUAL_FATAL(permitted_plan(o, &w, &r), 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(r.patch);
        CU_ASSERT_EQUAL(r.added, 2);
        CU_ASSERT_PTR_NOT_NULL(find(r.patch, "\"resourceVersion\":\"7\""));
        CU_ASSERT_PTR_NOT_NULL(find(r.patch,
                                    "{\"pciVendorSelector\":\"8086:10d3\",\"resourceName\":"
                                    "\"intel.com/82574L\",\"externalResourceProvider\":true}"));
        CU_ASSERT_PTR_NOT_NULL(
                find(r.patch, "\"selectors\":[{\"vendor\":\"0951\",\"product\":\"1666\"}]"));
        CU_ASSERT_PTR_NOT_NULL(
                find(r.patch, OWNED ":\"intel.com/82574L,kubevirt.io/titan-0951-1666-2-1-4\""));
        /* written, the same want writes nothing */
        apply(o, r.patch);
        free(r.patch);
        CU_ASSERT_EQUAL(permitted_plan(o, &w, &r), 0);
        CU_ASSERT_PTR_NULL(r.patch);
        cJSON_Delete(o);
    }
    permitted_want_done(&w);
}

#define FOREIGN_A "{\"pciVendorSelector\":\"15b3:1017\",\"resourceName\":\"mellanox.com/CX5\"}"
#define FOREIGN_B                                                                                  \
    "{\"pciVendorSelector\":\"8086:1572\",\"resourceName\":\"intel.com/"                           \
    "X710\",\"externalResourceProvider\":true}"
#define MINE_GPU                                                                                   \
    "{\"pciVendorSelector\":\"10de:1eb8\",\"resourceName\":\"nvidia.com/"                          \
    "TU104GL\",\"externalResourceProvider\":true}"

static void test_foreign_kept_in_order_owned_removed(void)
{
    /* ours: the GPU (no claim needs it any more) between two foreign entries; a duplicate of it */
    cJSON *o = cr("nvidia.com/TU104GL",
                  "{\"pciHostDevices\":[" FOREIGN_A "," MINE_GPU "," FOREIGN_B "," MINE_GPU
                  "],\"mediatedDevices\":[{\"mdevNameSelector\":\"x\",\"resourceName\":\"m/x\"}]}");
    const struct permitted_entry *e[] = {&nic};
    struct permitted_want w = want_of(e, 1);
    struct permitted_result r;
    CU_ASSERT_EQUAL_FATAL(permitted_plan(o, &w, &r), 0);
    CU_ASSERT_EQUAL(r.removed, 2);
    CU_ASSERT_EQUAL(r.added, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r.patch);
    CU_ASSERT_PTR_NOT_NULL(find(r.patch, "\"pciHostDevices\":[" FOREIGN_A "," FOREIGN_B
                                         ",{\"pciVendorSelector\":\"8086:10d3\""));
    CU_ASSERT_PTR_NULL(find(r.patch, "mediatedDevices")); /* never touched */
    CU_ASSERT_PTR_NULL(find(r.patch, "\"usb\""));         /* unchanged: not written */
    CU_ASSERT_PTR_NOT_NULL(find(r.patch, OWNED ":\"intel.com/82574L\""));
    free(r.patch);
    /* nothing needed any more (o as before): our entries go, the annotation too */
    struct permitted_want none = {0};
    CU_ASSERT_EQUAL_FATAL(permitted_plan(o, &none, &r), 0);
    CU_ASSERT_PTR_NOT_NULL(find(r.patch, "\"pciHostDevices\":[" FOREIGN_A "," FOREIGN_B "]"));
    CU_ASSERT_PTR_NOT_NULL(find(r.patch, OWNED ":null"));
    free(r.patch);
    permitted_want_done(&w);
    cJSON_Delete(o);
}

static void test_rewritten_and_conflict(void)
{
    /* our GPU entry edited by someone (externalResourceProvider dropped): rewritten in place;
     * a needed name a foreign entry lists: left to it, reported */
    cJSON *o = cr("nvidia.com/TU104GL",
                  "{\"pciHostDevices\":[{\"pciVendorSelector\":\"10de:1eb8\",\"resourceName\":"
                  "\"nvidia.com/TU104GL\"}," FOREIGN_B "]}");
    struct permitted_entry x710 = {"intel.com/X710", false, "8086", "1572"};
    const struct permitted_entry *e[] = {&gpu, &x710};
    struct permitted_want w = want_of(e, 2);
    struct permitted_result r;
    CU_ASSERT_EQUAL_FATAL(permitted_plan(o, &w, &r), 0);
    CU_ASSERT_EQUAL(r.rewritten, 1);
    CU_ASSERT_EQUAL(r.added, 0);
    CU_ASSERT_STRING_EQUAL(r.conflicts, "intel.com/X710");
    CU_ASSERT_PTR_NOT_NULL(find(r.patch, "\"pciHostDevices\":[" MINE_GPU "," FOREIGN_B "]"));
    CU_ASSERT_PTR_NULL(find(r.patch, "hostdevd.io")); /* ownership unchanged: GPU only */
    free(r.patch);
    permitted_want_done(&w);
    cJSON_Delete(o);
}

/* A foreign pciHostDevices entry with the name of a USB device a claim needs: a conflict, left
 * to it; before, the USB entry was added and owned by name, so the next plan took the foreign
 * PCI entry for ours and removed it (found by fuzz_objects). */
static void test_conflict_across_lists(void)
{
    cJSON *o = cr(NULL, "{\"pciHostDevices\":[{\"pciVendorSelector\":\"8086:1572\","
                        "\"resourceName\":\"kubevirt.io/titan-0951-1666-2-1-4\"}]}");
    const struct permitted_entry *e[] = {&stick, &nic};
    struct permitted_want w = want_of(e, 2);
    struct permitted_result r;
    CU_ASSERT_EQUAL_FATAL(permitted_plan(o, &w, &r), 0);
    CU_ASSERT_STRING_EQUAL(r.conflicts, "kubevirt.io/titan-0951-1666-2-1-4");
    CU_ASSERT_EQUAL(r.added, 1); /* the NIC only */
    CU_ASSERT_PTR_NOT_NULL(find(r.patch, OWNED ":\"intel.com/82574L\""));
    CU_ASSERT_PTR_NULL(find(r.patch, "\"usb\""));
    apply(o, r.patch);
    free(r.patch);
    CU_ASSERT_EQUAL(permitted_plan(o, &w, &r), 0);
    CU_ASSERT_PTR_NULL(r.patch); /* the foreign entry stays, nothing more to write */
    permitted_want_done(&w);
    cJSON_Delete(o);
}

static void test_gate_and_errors(void)
{
    cJSON *o = cr(NULL, NULL);
    CU_ASSERT_TRUE(permitted_gate_enabled(o));
    cJSON *bare = cJSON_Parse("{\"metadata\":{\"name\":\"kubevirt\"},\"spec\":{}}");
    CU_ASSERT_FALSE(permitted_gate_enabled(bare));
    struct permitted_want none = {0};
    struct permitted_result r;
    CU_ASSERT_EQUAL(permitted_plan(bare, &none, &r), -EINVAL); /* no resourceVersion */
    cJSON_Delete(bare);
    cJSON_Delete(o);
}

static CU_TestInfo tests[] = {
        {"added to a null or missing list, once", test_add_to_null_and_missing},
        {"foreign kept in order, owned removed", test_foreign_kept_in_order_owned_removed},
        {"rewritten in place; foreign names not taken", test_rewritten_and_conflict},
        {"a foreign name in the other list is a conflict", test_conflict_across_lists},
        {"feature gate; errors", test_gate_and_errors},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo permitted_suites[] = {
        {"permitted", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
