/* SPDX-License-Identifier: Apache-2.0 */
/* The next step for one VGPUDevice: each row of mdevplan.h's table, and the status it writes. */
#include <CUnit/CUnit.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/json.h"
#include "controllers/mdev/mdevplan.h"
#include "controllers/objects/mdevobj.h"

#define U0  "83b8f4f2-509f-382f-3c1e-e6bfe0fa1001"
#define NEW "0b7c2a1e-5d4f-4c3b-9a8e-7f6d5c4b3a21"
#define FIN "\"finalizers\":[\"devices.harvesterhci.io/mdev\"],"

static struct node_mdev_type types[] = {
        {.id = "mtty-1", .name = "Single port serial", .device_api = "vfio-pci", .available = 2},
        {.id = "mtty-2", .name = "Dual port serial", .device_api = "vfio-pci", .available = 0},
};
static struct node_mdev_parent parents[] = {{.name = "mtty", .types = types, .n_types = 2}};
static struct node_mdev_instance instances[] = {
        {.uuid = U0, .type = "mtty-1", .parent = "mtty", .iommu_group = 14}};
static const struct node_mdev_scan with = {parents, 1, instances, 1, NULL, 0};
static const struct node_mdev_scan without = {parents, 1, NULL, 0, NULL, 0};
static const struct node_mdev_scan empty = {0};

/* An object: metadata extra ("" or `"finalizers":[...],`, `"deletionTimestamp":"x",`), spec
 * extra, status (JSON or ""). */
static cJSON *obj(const char *meta, const char *spec, const char *status)
{
    char json[2048];
    (void)snprintf(json, sizeof(json),
                   "{\"metadata\":{%s\"generation\":2},\"spec\":{\"nodeName\":\"n\","
                   "\"address\":\"mtty\",\"parentGPUDeviceAddress\":\"mtty\"%s}%s%s}",
                   meta, spec, status[0] ? ",\"status\":" : "", status);
    cJSON *o = cJSON_Parse(json);
    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    return o;
}

static struct mdevplan decide(const cJSON *o, const struct node_mdev_scan *scan, bool free_slot,
                              const char *claimed, const struct mdevplan_memory *m)
{
    struct mdevplan_facts f = {.obj = o,
                               .scan = scan,
                               .free_slot = free_slot,
                               .parent_claimed = claimed,
                               .memory = m,
                               .new_uuid = NEW,
                               .now = 100};
    struct mdevplan p;
    mdevplan_decide(&f, &p);
    return p;
}

static void assert_refused(struct mdevplan p, const char *reason, const char *says)
{
    CU_ASSERT_EQUAL(p.step, MDEVPLAN_STATUS);
    CU_ASSERT_FALSE(p.ready);
    CU_ASSERT_STRING_EQUAL(p.reason, reason);
    if (!strstr(p.message, says))
        CU_FAIL(p.message);
}

static void test_enable(void)
{
    const char *on1 = ",\"enabled\":true,\"vGPUTypeName\":\"mtty-1\"";
    /* no finalizer: that first; then the UUID to status; then the create */
    _cleanup_(cJSON_Deletep) cJSON *a = obj("", on1, "");
    CU_ASSERT_EQUAL(decide(a, &without, false, NULL, NULL).step, MDEVPLAN_ADD_FINALIZER);
    _cleanup_(cJSON_Deletep) cJSON *b = obj(FIN, on1, "");
    struct mdevplan p = decide(b, &without, false, NULL, NULL);
    CU_ASSERT_EQUAL(p.step, MDEVPLAN_WRITE_UUID);
    CU_ASSERT_STRING_EQUAL(p.uuid, NEW);
    _cleanup_(cJSON_Deletep) cJSON *c = obj(FIN, on1, "{\"uuid\":\"" NEW "\"}");
    p = decide(c, &without, false, NULL, NULL);
    CU_ASSERT_EQUAL(p.step, MDEVPLAN_CREATE);
    CU_ASSERT_STRING_EQUAL(p.uuid, NEW);
    CU_ASSERT_STRING_EQUAL(p.type, "mtty-1");
    CU_ASSERT_STRING_EQUAL(p.parent, "mtty");
    /* spec.uuid wins over status.uuid; a type by its name */
    _cleanup_(cJSON_Deletep) cJSON *d = obj(
            FIN, ",\"enabled\":true,\"vGPUTypeName\":\"Single port serial\",\"uuid\":\"" U0 "\"",
            "{\"uuid\":\"" NEW "\"}");
    p = decide(d, &without, false, NULL, NULL);
    CU_ASSERT_EQUAL(p.step, MDEVPLAN_WRITE_UUID);
    CU_ASSERT_STRING_EQUAL(p.uuid, U0);
    /* it exists: Created (also after a restart: nothing else) */
    _cleanup_(cJSON_Deletep) cJSON *e = obj(FIN, on1, "{\"uuid\":\"" U0 "\"}");
    p = decide(e, &with, false, NULL, NULL);
    CU_ASSERT_EQUAL(p.step, MDEVPLAN_STATUS);
    CU_ASSERT_TRUE(p.ready);
    CU_ASSERT_STRING_EQUAL(p.reason, MDEVOBJ_CREATED);
    CU_ASSERT_PTR_EQUAL(p.instance, &instances[0]);
    /* after a reboot: the same UUID created again */
    p = decide(e, &without, false, NULL, NULL);
    CU_ASSERT_EQUAL(p.step, MDEVPLAN_CREATE);
    CU_ASSERT_STRING_EQUAL(p.uuid, U0);
    /* just written: wait for the scan to show it, not again */
    struct mdevplan_memory w = {
            .generation = 2, .reason = MDEVPLAN_WRITTEN, .message = "", .at = 99};
    CU_ASSERT_EQUAL(decide(c, &without, false, NULL, &w).step, MDEVPLAN_WAIT);
    w.at = 90;
    CU_ASSERT_EQUAL(decide(c, &without, false, NULL, &w).step, MDEVPLAN_CREATE);
}

static void test_refusals(void)
{
    _cleanup_(cJSON_Deletep) cJSON *two =
            obj(FIN, ",\"enabled\":true,\"vGPUTypeName\":\"mtty-2\"", "");
    assert_refused(decide(two, &without, false, NULL, NULL), MDEVOBJ_NO_CAPACITY,
                   "cannot make another mtty-2 now");
    _cleanup_(cJSON_Deletep) cJSON *nine =
            obj(FIN, ",\"enabled\":true,\"vGPUTypeName\":\"mtty-9\"", "");
    assert_refused(decide(nine, &without, false, NULL, NULL), MDEVOBJ_TYPE_UNKNOWN,
                   "no type \"mtty-9\": write one of its type ids to spec.vGPUTypeName: mtty-1 "
                   "(Single port serial, 2 left), mtty-2 (Dual port serial, 0 left)");
    _cleanup_(cJSON_Deletep) cJSON *one =
            obj(FIN, ",\"enabled\":true,\"vGPUTypeName\":\"mtty-1\"", "");
    assert_refused(decide(one, &empty, false, NULL, NULL), MDEVOBJ_PARENT_MISSING,
                   "parent mtty is not an mdev parent on node n now");
    assert_refused(decide(one, &without, false, "PCIDeviceClaim n-000000020", NULL),
                   MDEVOBJ_PARENT_CLAIMED, "passed through whole (PCIDeviceClaim n-000000020)");
    struct mdevplan_memory m = {.generation = 2, .reason = MDEVOBJ_CREATE_FAILED, .message = "EIO"};
    assert_refused(decide(one, &without, false, NULL, &m), MDEVOBJ_CREATE_FAILED, "EIO");
    m.generation = 1; /* a new spec: tried again */
    CU_ASSERT_EQUAL(decide(one, &without, false, NULL, &m).step, MDEVPLAN_WRITE_UUID);
    _cleanup_(cJSON_Deletep) cJSON *bad =
            obj("", ",\"enabled\":true,\"uuid\":\"X\",\"vGPUTypeName\":\"mtty-1\"", "");
    assert_refused(decide(bad, &without, false, NULL, NULL), MDEVOBJ_INVALID_SPEC,
                   "is not a UUID as the kernel names mdevs");
    /* an instance of another type under the object's UUID */
    _cleanup_(cJSON_Deletep) cJSON *other =
            obj(FIN, ",\"enabled\":true,\"vGPUTypeName\":\"mtty-2\"", "{\"uuid\":\"" U0 "\"}");
    assert_refused(decide(other, &with, false, NULL, NULL), MDEVOBJ_INVALID_SPEC,
                   "exists with type mtty-1");
}

static void test_disable(void)
{
    _cleanup_(cJSON_Deletep) cJSON *off =
            obj(FIN, ",\"enabled\":false,\"vGPUTypeName\":\"mtty-1\"",
                "{\"uuid\":\"" U0 "\",\"vGPUStatus\":\"vGPUConfigured\"}");
    struct mdevplan p = decide(off, &with, false, NULL, NULL);
    CU_ASSERT_EQUAL(p.step, MDEVPLAN_REMOVE);
    CU_ASSERT_STRING_EQUAL(p.uuid, U0);
    /* held: DeviceInUse shown, then waited on, then checked again */
    struct mdevplan_memory m = {
            .generation = 2, .reason = MDEVOBJ_IN_USE, .message = "held by qemu (pid 7)", .at = 98};
    assert_refused(decide(off, &with, false, NULL, &m), MDEVOBJ_IN_USE, "held by qemu (pid 7)");
    _cleanup_(cJSON_Deletep) cJSON *shown =
            obj(FIN, ",\"enabled\":false",
                "{\"uuid\":\"" U0 "\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\","
                "\"reason\":\"DeviceInUse\",\"message\":\"held by qemu (pid 7)\"}]}");
    p = decide(shown, &with, false, NULL, &m);
    CU_ASSERT_EQUAL(p.step, MDEVPLAN_WAIT);
    CU_ASSERT_DOUBLE_EQUAL(p.wait, 3, 0.01);
    m.at = 90;
    CU_ASSERT_EQUAL(decide(shown, &with, false, NULL, &m).step, MDEVPLAN_REMOVE);
    /* removed: the status cleared, then the finalizer, then (not the free slot) the object */
    p = decide(off, &without, false, NULL, NULL);
    CU_ASSERT_EQUAL(p.step, MDEVPLAN_STATUS);
    CU_ASSERT_STRING_EQUAL(p.uuid, "");
    CU_ASSERT_PTR_NULL(p.instance);
    _cleanup_(cJSON_Deletep) cJSON *cleared = obj(FIN, ",\"enabled\":false", "{\"uuid\":\"\"}");
    CU_ASSERT_EQUAL(decide(cleared, &without, false, NULL, NULL).step, MDEVPLAN_REMOVE_FINALIZER);
    _cleanup_(cJSON_Deletep) cJSON *slot = obj("", ",\"enabled\":false", "{\"uuid\":\"\"}");
    CU_ASSERT_EQUAL(decide(slot, &without, false, NULL, NULL).step, MDEVPLAN_DELETE);
    p = decide(slot, &without, true, NULL, NULL);
    CU_ASSERT_EQUAL(p.step, MDEVPLAN_STATUS);
    CU_ASSERT_STRING_EQUAL(p.reason, MDEVOBJ_AVAILABLE);
    /* deleted while enabled: removed like a disabled one, and the finalizer let go */
    _cleanup_(cJSON_Deletep) cJSON *del =
            obj("\"deletionTimestamp\":\"x\"," FIN, ",\"enabled\":true,\"vGPUTypeName\":\"mtty-1\"",
                "{\"uuid\":\"" U0 "\"}");
    CU_ASSERT_EQUAL(decide(del, &with, false, NULL, NULL).step, MDEVPLAN_REMOVE);
    _cleanup_(cJSON_Deletep) cJSON *del2 = obj("\"deletionTimestamp\":\"x\"," FIN,
                                               ",\"enabled\":true,\"vGPUTypeName\":\"mtty-1\"", "");
    CU_ASSERT_EQUAL(decide(del2, &without, false, NULL, NULL).step, MDEVPLAN_REMOVE_FINALIZER);
}

static void test_status(void)
{
    _cleanup_(cJSON_Deletep) cJSON *o =
            obj(FIN, ",\"enabled\":true,\"vGPUTypeName\":\"mtty-1\"", "{\"uuid\":\"" U0 "\"}");
    struct mdevplan p = decide(o, &with, false, NULL, NULL);
    _cleanup_(cJSON_Deletep) cJSON *st = mdevplan_status(&p, o, &with, "2026-11-29T09:00:00Z");
    _cleanup_free_ char *s = cJSON_PrintUnformatted(st);
    static const char *const want[] = {"\"uuid\":\"" U0 "\"",
                                       "\"vGPUStatus\":\"vGPUConfigured\"",
                                       "\"configureVGPUTypeName\":\"mtty-1\"",
                                       "\"resourceName\":\"devices.harvesterhci.io/mtty-1\"",
                                       "\"iommuGroup\":\"14\"",
                                       "\"availableTypes\":{\"Single port serial\":\"mtty-1\"}",
                                       "{\"id\":\"mtty-2\",\"name\":\"Dual port "
                                       "serial\",\"deviceAPI\":\"vfio-pci\",\"available\":0}",
                                       "\"reason\":\"Created\"",
                                       "\"observedGeneration\":2"};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        if (!strstr(s, want[i]))
            CU_FAIL(want[i]);
    CU_ASSERT_TRUE(mdevplan_slot_before("n-mtty-2", "n-mtty-10"));
    CU_ASSERT_FALSE(mdevplan_slot_before("n-mtty-10", "n-mtty-2"));
}

static const char *names(const char *uuid, void *arg)
{
    (void)arg;
    return strcmp(uuid, U0) == 0 ? "n-000000020-0" : NULL;
}

/* Who uses a PCI parent, for a claim's message: its instances with their objects, cut to fit. */
static void test_parent_users(void)
{
    struct node_mdev_instance v[] = {
            {.uuid = U0, .type = "i915-GVTg_V5_4", .parent = "0000:00:02.0"},
            {.uuid = NEW, .type = "mtty-1", .parent = "mtty"},
            {.uuid = "11111111-2222-4333-8444-555555555555", .parent = "0000:00:02.0"},
    };
    char buf[200];
    CU_ASSERT_EQUAL(mdevplan_parent_users(v, 3, "0000:00:02.0", names, NULL, buf, sizeof(buf)), 2);
    CU_ASSERT_STRING_EQUAL(buf, "instance " U0 " (VGPUDevice n-000000020-0), instance "
                                "11111111-2222-4333-8444-555555555555");
    CU_ASSERT_EQUAL(mdevplan_parent_users(v, 3, "mtty", NULL, NULL, buf, sizeof(buf)), 1);
    CU_ASSERT_STRING_EQUAL(buf, "instance " NEW);
    CU_ASSERT_EQUAL(mdevplan_parent_users(v, 3, "0000:00:03.0", names, NULL, buf, sizeof(buf)), 0);
    CU_ASSERT_STRING_EQUAL(buf, "");
    /* the second does not fit: ", ..." instead; not even the first: "..." */
    CU_ASSERT_EQUAL(mdevplan_parent_users(v, 3, "0000:00:02.0", names, NULL, buf, 80), 2);
    CU_ASSERT_STRING_EQUAL(buf, "instance " U0 " (VGPUDevice n-000000020-0), ...");
    CU_ASSERT_EQUAL(mdevplan_parent_users(v, 3, "0000:00:02.0", names, NULL, buf, 20), 2);
    CU_ASSERT_STRING_EQUAL(buf, "...");
}

static CU_TestInfo tests[] = {
        {"enable: finalizer, UUID to status, create; Created; reboot", test_enable},
        {"each refusal, with what to write", test_refusals},
        {"disable and delete: remove, DeviceInUse, clear, finalizer, extra slots", test_disable},
        {"the status written", test_status},
        {"who uses a PCI parent, for a claim's message", test_parent_users},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo mdevplan_suites[] = {
        {"mdevplan", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
