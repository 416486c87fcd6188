/* SPDX-License-Identifier: Apache-2.0 */
/* VGPUDevice facts: the spec as read (and each wrong one), what the status says exists, the
 * names of objects, labels and resources, and the type lookup. */
#include <CUnit/CUnit.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/json.h"
#include "controllers/objects/mdevobj.h"

#define UUID "83b8f4f2-509f-382f-3c1e-e6bfe0fa1001"

static cJSON *parse(const char *json)
{
    cJSON *o = cJSON_Parse(json);
    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    return o;
}

static void test_spec(void)
{
    _cleanup_(cJSON_Deletep) cJSON *o = parse(
            "{\"metadata\":{\"generation\":3},\"spec\":{\"nodeName\":\"titan\",\"address\":"
            "\"mtty\","
            "\"parentGPUDeviceAddress\":\"mtty\",\"vGPUTypeName\":\"mtty-2\",\"enabled\":true,"
            "\"uuid\":\"" UUID "\"}}");
    struct mdevobj_spec s;
    struct err why = {{0}};
    CU_ASSERT_EQUAL_FATAL(mdevobj_spec(o, &s, &why), 0);
    CU_ASSERT_STRING_EQUAL(s.node, "titan");
    CU_ASSERT_STRING_EQUAL(s.parent, "mtty");
    CU_ASSERT_STRING_EQUAL(s.type, "mtty-2");
    CU_ASSERT_STRING_EQUAL(s.uuid, UUID);
    CU_ASSERT_TRUE(s.enabled);
    CU_ASSERT_EQUAL(s.generation, 3);

    /* a free slot: no type, no uuid, enabled absent; harvester's address alone names the parent */
    _cleanup_(cJSON_Deletep) cJSON *slot =
            parse("{\"spec\":{\"nodeName\":\"titan\",\"address\":\"0000:00:02.0\"}}");
    CU_ASSERT_EQUAL_FATAL(mdevobj_spec(slot, &s, &why), 0);
    CU_ASSERT_STRING_EQUAL(s.parent, "0000:00:02.0");
    CU_ASSERT_STRING_EQUAL(s.type, "");
    CU_ASSERT_STRING_EQUAL(s.uuid, "");
    CU_ASSERT_FALSE(s.enabled);
}

static void test_spec_wrong(void)
{
    static const struct {
        const char *spec, *says;
    } bad[] = {
            {"{\"address\":\"mtty\"}", "spec.nodeName or spec.parentGPUDeviceAddress is empty"},
            {"{\"nodeName\":\"n\"}", "spec.nodeName or spec.parentGPUDeviceAddress is empty"},
            {"{\"nodeName\":\"n\",\"address\":\"mtty\",\"enabled\":true}",
             "spec.vGPUTypeName is empty: write one of the type ids"},
            {"{\"nodeName\":\"n\",\"address\":\"mtty\",\"uuid\":\"83B8F4F2-509F-382F-3C1E-"
             "E6BFE0FA1001\"}",
             "is not a UUID as the kernel names mdevs"},
            {"{\"nodeName\":\"n\",\"address\":\"mtty\",\"uuid\":\"nope\"}", "leave spec.uuid out"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char json[512];
        (void)snprintf(json, sizeof(json), "{\"spec\":%s}", bad[i].spec);
        _cleanup_(cJSON_Deletep) cJSON *o = parse(json);
        struct mdevobj_spec s;
        struct err why = {{0}};
        CU_ASSERT_EQUAL(mdevobj_spec(o, &s, &why), -EINVAL);
        if (!strstr(why.msg, bad[i].says))
            CU_FAIL_FATAL(bad[i].spec);
    }
}

static void test_status(void)
{
    _cleanup_(cJSON_Deletep) cJSON *on =
            parse("{\"status\":{\"uuid\":\"" UUID "\",\"vGPUStatus\":\"vGPUConfigured\","
                  "\"resourceName\":\"devices.harvesterhci.io/mtty-2\",\"iommuGroup\":\"14\"}}");
    const char *uuid = NULL, *res = NULL;
    CU_ASSERT_STRING_EQUAL(mdevobj_status_uuid(on), UUID);
    CU_ASSERT_TRUE(mdevobj_configured(on));
    CU_ASSERT_TRUE(mdevobj_offered(on, &uuid, &res));
    CU_ASSERT_STRING_EQUAL(uuid, UUID);
    CU_ASSERT_STRING_EQUAL(res, "devices.harvesterhci.io/mtty-2");
    CU_ASSERT_EQUAL(mdevobj_iommu_group(on), 14);

    /* status.uuid written, instance not made yet (or removed): not offered */
    _cleanup_(cJSON_Deletep) cJSON *pending = parse(
            "{\"status\":{\"uuid\":\"" UUID "\",\"vGPUStatus\":\"\",\"resourceName\":\"x.io/y\"}}");
    CU_ASSERT_STRING_EQUAL(mdevobj_status_uuid(pending), UUID);
    CU_ASSERT_FALSE(mdevobj_configured(pending));
    CU_ASSERT_FALSE(mdevobj_offered(pending, NULL, NULL));
    CU_ASSERT_EQUAL(mdevobj_iommu_group(pending), -1);

    /* garbage is none of it */
    _cleanup_(cJSON_Deletep) cJSON *bad = parse(
            "{\"status\":{\"uuid\":\"xyz\",\"vGPUStatus\":\"vGPUConfigured\",\"iommuGroup\":\"1a\","
            "\"resourceName\":\"devices.harvesterhci.io/mtty-2\"}}");
    CU_ASSERT_PTR_NULL(mdevobj_status_uuid(bad));
    CU_ASSERT_FALSE(mdevobj_offered(bad, NULL, NULL));
    CU_ASSERT_EQUAL(mdevobj_iommu_group(bad), -1);
    _cleanup_(cJSON_Deletep) cJSON *none = parse("{}");
    CU_ASSERT_PTR_NULL(mdevobj_status_uuid(none));
    CU_ASSERT_FALSE(mdevobj_configured(none));
}

/* The PCI parent an object keeps busy: status.uuid set (made, being made, not removed yet) and
 * a PCI parent; a virtual parent, a free slot or garbage is none. */
static void test_pci_parent_in_use(void)
{
    static const struct {
        const char *json, *want;
    } rows[] = {
            {"{\"spec\":{\"parentGPUDeviceAddress\":\"0000:00:02.0\"},\"status\":{\"uuid\":\"" UUID
             "\",\"vGPUStatus\":\"vGPUConfigured\"}}",
             "0000:00:02.0"},
            /* being created (or removed): status.uuid alone */
            {"{\"spec\":{\"address\":\"0000:00:02.0\",\"enabled\":false},\"status\":{\"uuid\":"
             "\"" UUID "\"}}",
             "0000:00:02.0"},
            {"{\"spec\":{\"parentGPUDeviceAddress\":\"\",\"address\":\"0000:00:02.0\"},"
             "\"status\":{\"uuid\":\"" UUID "\"}}",
             "0000:00:02.0"},
            {"{\"spec\":{\"parentGPUDeviceAddress\":\"mtty\"},\"status\":{\"uuid\":\"" UUID "\"}}",
             NULL},
            {"{\"spec\":{\"parentGPUDeviceAddress\":\"0000:00:02.0\"},\"status\":{}}", NULL},
            {"{\"spec\":{\"parentGPUDeviceAddress\":\"0000:00:02.0\"},\"status\":{\"uuid\":\"x\"}}",
             NULL},
            {"{}", NULL},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        _cleanup_(cJSON_Deletep) cJSON *o = parse(rows[i].json);
        const char *got = mdevobj_pci_parent_in_use(o);
        if (rows[i].want) {
            CU_ASSERT_STRING_EQUAL(got ? got : "(null)", rows[i].want);
        } else {
            CU_ASSERT_PTR_NULL(got);
        }
    }
}

static void test_resource_name(void)
{
    static const struct {
        const char *type, *want;
    } ok[] = {
            {"mtty-2", "devices.harvesterhci.io/mtty-2"},
            {"i915-GVTg_V5_4", "devices.harvesterhci.io/i915-gvtg-v5-4"},
            {"nvidia-256", "devices.harvesterhci.io/nvidia-256"},
            {"_x.y_", "devices.harvesterhci.io/x.y"},
            {"mdpy-fb", "devices.harvesterhci.io/mdpy-fb"},
    };
    char buf[128];
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        CU_ASSERT_EQUAL(mdevobj_resource_name(ok[i].type, buf, sizeof(buf)), 0);
        CU_ASSERT_STRING_EQUAL(buf, ok[i].want);
    }
    CU_ASSERT_EQUAL(mdevobj_resource_name("___", buf, sizeof(buf)), -EINVAL);
    CU_ASSERT_EQUAL(mdevobj_resource_name("", buf, sizeof(buf)), -EINVAL);
    CU_ASSERT_EQUAL(mdevobj_resource_name("mtty-2", buf, 20), -ENAMETOOLONG);
}

static void test_names(void)
{
    char buf[256];
    CU_ASSERT_EQUAL(mdevobj_parent_label("0000:00:02.0", buf, sizeof(buf)), 0);
    CU_ASSERT_STRING_EQUAL(buf, "000000020");
    CU_ASSERT_EQUAL(mdevobj_parent_label("mtty", buf, sizeof(buf)), 0);
    CU_ASSERT_STRING_EQUAL(buf, "mtty");
    CU_ASSERT_EQUAL(mdevobj_parent_label("My_Parent.1", buf, sizeof(buf)), 0);
    CU_ASSERT_STRING_EQUAL(buf, "my-parent-1");
    CU_ASSERT_EQUAL(mdevobj_parent_label("_x", buf, sizeof(buf)), -EINVAL);
    CU_ASSERT_EQUAL(mdevobj_parent_label("", buf, sizeof(buf)), -EINVAL);

    CU_ASSERT_EQUAL(mdevobj_slot_name("titan", "0000:00:02.0", 0, buf, sizeof(buf)), 0);
    CU_ASSERT_STRING_EQUAL(buf, "titan-000000020-0");
    CU_ASSERT_EQUAL(mdevobj_slot_name("titan", "mtty", 12, buf, sizeof(buf)), 0);
    CU_ASSERT_STRING_EQUAL(buf, "titan-mtty-12");
    CU_ASSERT_EQUAL(mdevobj_slot_name("Titan", "mtty", 0, buf, sizeof(buf)), -EINVAL);
    CU_ASSERT_EQUAL(mdevobj_slot_name("titan", "mtty", 0, buf, 8), -ENAMETOOLONG);

    CU_ASSERT_EQUAL(mdevobj_adopted_name("titan", UUID, buf, sizeof(buf)), 0);
    CU_ASSERT_STRING_EQUAL(buf, "titan-" UUID);
    CU_ASSERT_EQUAL(mdevobj_adopted_name("titan", "83b8f4f2", buf, sizeof(buf)), -EINVAL);
}

static void test_type_find(void)
{
    struct node_mdev_type types[] = {
            {.id = "mtty-1", .name = "Single port serial"},
            {.id = "mtty-2", .name = "Dual port serial"},
            {.id = "odd", .name = "mtty-1"}, /* a name that is another's id: the id wins */
    };
    struct node_mdev_parent p = {.name = "mtty", .types = types, .n_types = 3};
    CU_ASSERT_PTR_EQUAL(mdevobj_type_find(&p, "mtty-2"), &types[1]);
    CU_ASSERT_PTR_EQUAL(mdevobj_type_find(&p, "Dual port serial"), &types[1]);
    CU_ASSERT_PTR_EQUAL(mdevobj_type_find(&p, "mtty-1"), &types[0]);
    CU_ASSERT_PTR_NULL(mdevobj_type_find(&p, "mtty-3"));
    CU_ASSERT_PTR_NULL(mdevobj_type_find(&p, ""));
    CU_ASSERT_PTR_NULL(mdevobj_type_find(NULL, "mtty-1"));
}

static CU_TestInfo tests[] = {
        {"the spec as read", test_spec},
        {"each wrong spec, with what to write", test_spec_wrong},
        {"what the status says exists and is offered", test_status},
        {"the PCI parent an object keeps busy", test_pci_parent_in_use},
        {"the resource an instance is offered under", test_resource_name},
        {"parent labels, slot and adopted object names", test_names},
        {"a type by id, then by name", test_type_find},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo mdevobj_suites[] = {
        {"mdevobj", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
