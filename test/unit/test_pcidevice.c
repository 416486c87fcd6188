/* SPDX-License-Identifier: Apache-2.0 */
/* test/unit/test_pcidevice.c - desired PCIDevices and minimal write plans. */
#include <CUnit/CUnit.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "base/json.h"
#include "controllers/devices/pcidevice.h"

static struct pcidevice_spec nic(void)
{
    struct pcidevice_spec s = {
            .name = "titan-0000001f6",
            .node = "titan",
            .address = "0000:00:1f.6",
            .vendor_id = "8086",
            .device_id = "0d4c",
            .subsystem_vendor_id = "1028",
            .subsystem_device_id = "0962",
            .class_id = "0200",
            .revision = "00",
            .iommu_group = "11",
            .numa_node = 0,
            .resource_name = "intel.com/ETHERNET_CONNECTION_11_I219LM",
            .description =
                    "Ethernet controller: Intel Corporation Ethernet Connection (11) I219-LM",
            .driver = "e1000e",
            .sriov_totalvfs = -1,
            .sriov_numvfs = -1,
            .sriov_vf_index = -1,
            .aer = {-1, -1, -1},
    };
    return s;
}

/* The object as the API server would return it after create + status patch. */
static cJSON *stored(const struct pcidevice_spec *s, const char *node_uid)
{
    cJSON *o = pcidevice_new_object(s, node_uid, NULL);
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(o, "metadata");
    cJSON_AddStringToObject(meta, "uid", "dev-uid-1");
    cJSON_AddStringToObject(meta, "resourceVersion", "42");
    cJSON_AddItemToObject(o, "status", pcidevice_status(s));
    return o;
}

static cJSON *status_of(cJSON *o)
{
    return cJSON_GetObjectItemCaseSensitive(o, "status");
}

static void test_create_when_missing(void)
{
    struct pcidevice_spec s = nic();
    struct pcidevice_plan p;
    CU_ASSERT_EQUAL(pcidevice_plan(&s, NULL, "node-uid", &p), 0);
    CU_ASSERT_TRUE(p.create);
    CU_ASSERT_FALSE(p.delete);
    CU_ASSERT_PTR_NULL(p.meta_patch);
    CU_ASSERT_PTR_NOT_NULL(p.status_patch);
    cJSON *patch = p.status_patch ? cJSON_Parse(p.status_patch) : NULL;
    cJSON *st = status_of(patch);
    CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(st, "address")),
                           "0000:00:1f.6");
    CU_ASSERT_EQUAL(cJSON_GetArraySize(st), 13);
    cJSON_Delete(patch);
    pcidevice_plan_done(&p);

    cJSON *o = pcidevice_new_object(&s, "node-uid", NULL);
    char *text = cJSON_PrintUnformatted(o);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"labels\":{\"nodename\":\"titan\"}"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"harvesterhci.io/pcideviceDriver\":\"e1000e\""));
    CU_ASSERT_PTR_NOT_NULL(
            strstr(text, "\"kind\":\"Node\",\"name\":\"titan\",\"uid\":\"node-uid\""));
    cJSON_free(text);
    cJSON_Delete(o);
    /* made again while claimed (the device on vfio-pci): the claim's record of its driver */
    o = pcidevice_new_object(&s, "node-uid", "ixgbe");
    text = cJSON_PrintUnformatted(o);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"harvesterhci.io/pcideviceDriver\":\"ixgbe\""));
    cJSON_free(text);
    cJSON_Delete(o);
}

static void test_nothing_when_equal(void)
{
    struct pcidevice_spec s = nic();
    cJSON *have = stored(&s, "node-uid");
    /* Field order and foreign fields do not matter. */
    cJSON_AddStringToObject(status_of(have), "somebodyElses", "x");
    struct pcidevice_plan p;
    CU_ASSERT_EQUAL(pcidevice_plan(&s, have, "node-uid", &p), 0);
    CU_ASSERT_TRUE(pcidevice_plan_empty(&p));
    pcidevice_plan_done(&p);
    cJSON_Delete(have);
}

static void test_only_changed_fields(void)
{
    struct pcidevice_spec s = nic();
    cJSON *have = stored(&s, "node-uid");
    (void)snprintf(s.driver, sizeof(s.driver), "vfio-pci");
    struct pcidevice_plan p;
    CU_ASSERT_EQUAL(pcidevice_plan(&s, have, "node-uid", &p), 0);
    CU_ASSERT_FALSE(p.create);
    CU_ASSERT_PTR_NULL(p.meta_patch);
    CU_ASSERT_PTR_NOT_NULL(p.status_patch);
    if (p.status_patch)
        CU_ASSERT_STRING_EQUAL(p.status_patch, "{\"status\":{\"kernelDriverInUse\":\"vfio-pci\"}}");
    pcidevice_plan_done(&p);
    cJSON_Delete(have);
}

static void test_removed_fields_become_null(void)
{
    struct pcidevice_spec s = nic();
    cJSON *have = stored(&s, "node-uid");
    s.driver[0] = '\0';
    s.numa_node = -1;
    struct pcidevice_plan p;
    CU_ASSERT_EQUAL(pcidevice_plan(&s, have, "node-uid", &p), 0);
    if (p.status_patch)
        CU_ASSERT_STRING_EQUAL(p.status_patch,
                               "{\"status\":{\"numaNode\":null,\"kernelDriverInUse\":null}}");
    CU_ASSERT_PTR_NOT_NULL(p.status_patch);
    pcidevice_plan_done(&p);
    cJSON_Delete(have);
}

static void test_identity_fields(void)
{
    struct pcidevice_spec s = nic();
    cJSON *st = pcidevice_status(&s);
    CU_ASSERT_PTR_NULL(cJSON_GetObjectItemCaseSensitive(st, "serialNumber")); /* none: absent */
    CU_ASSERT_PTR_NULL(cJSON_GetObjectItemCaseSensitive(st, "serialNumberSource"));
    CU_ASSERT_PTR_NULL(cJSON_GetObjectItemCaseSensitive(st, "physicalSlot"));
    cJSON_Delete(st);
    cJSON *have = stored(&s, "node-uid");
    (void)snprintf(s.serial, sizeof(s.serial), "52:54:00:12:34:56");
    (void)snprintf(s.serial_source, sizeof(s.serial_source), "PermanentMAC");
    (void)snprintf(s.slot, sizeof(s.slot), "9");
    struct pcidevice_plan p;
    CU_ASSERT_EQUAL(pcidevice_plan(&s, have, "node-uid", &p), 0);
    CU_ASSERT_STRING_EQUAL(p.status_patch ? p.status_patch : "",
                           "{\"status\":{\"serialNumber\":\"52:54:00:12:34:56\","
                           "\"serialNumberSource\":\"PermanentMAC\",\"physicalSlot\":\"9\"}}");
    pcidevice_plan_done(&p);
    cJSON_Delete(have);
    /* written once: nothing more to write */
    have = stored(&s, "node-uid");
    CU_ASSERT_EQUAL(pcidevice_plan(&s, have, "node-uid", &p), 0);
    CU_ASSERT_TRUE(pcidevice_plan_empty(&p));
    pcidevice_plan_done(&p);
    cJSON_Delete(have);
}

static void test_label_and_owner_repaired(void)
{
    struct pcidevice_spec s = nic();
    cJSON *have = stored(&s, "old-node-uid");
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(have, "metadata");
    cJSON_DeleteItemFromObjectCaseSensitive(meta, "labels");
    cJSON *refs = cJSON_GetObjectItemCaseSensitive(meta, "ownerReferences");
    cJSON *other = cJSON_CreateObject();
    cJSON_AddStringToObject(other, "kind", "Thing");
    cJSON_AddStringToObject(other, "name", "keep-me");
    cJSON_AddItemToArray(refs, other);
    struct pcidevice_plan p;
    CU_ASSERT_EQUAL(pcidevice_plan(&s, have, "node-uid", &p), 0);
    CU_ASSERT_PTR_NULL(p.status_patch);
    CU_ASSERT_PTR_NOT_NULL(p.meta_patch);
    if (p.meta_patch) {
        CU_ASSERT_PTR_NOT_NULL(strstr(p.meta_patch, "\"labels\":{\"nodename\":\"titan\"}"));
        CU_ASSERT_PTR_NOT_NULL(strstr(p.meta_patch, "keep-me"));
        CU_ASSERT_PTR_NOT_NULL(strstr(p.meta_patch, "\"uid\":\"node-uid\""));
        CU_ASSERT_PTR_NULL(strstr(p.meta_patch, "old-node-uid"));
    }
    pcidevice_plan_done(&p);
    cJSON_Delete(have);
}

static void test_no_owner_without_node_uid(void)
{
    struct pcidevice_spec s = nic();
    cJSON *have = stored(&s, NULL);
    struct pcidevice_plan p;
    CU_ASSERT_EQUAL(pcidevice_plan(&s, have, NULL, &p), 0);
    CU_ASSERT_TRUE(pcidevice_plan_empty(&p));
    pcidevice_plan_done(&p);
    CU_ASSERT_EQUAL(pcidevice_plan(&s, have, "node-uid", &p), 0);
    CU_ASSERT_PTR_NOT_NULL(p.meta_patch);
    pcidevice_plan_done(&p);
    cJSON_Delete(have);
}

static void test_delete_when_gone(void)
{
    struct pcidevice_spec s = nic();
    cJSON *have = stored(&s, "node-uid");
    struct pcidevice_plan p;
    CU_ASSERT_EQUAL(pcidevice_plan(NULL, have, "node-uid", &p), 0);
    CU_ASSERT_TRUE(p.delete);
    CU_ASSERT_STRING_EQUAL(p.uid, "dev-uid-1");
    pcidevice_plan_done(&p);
    CU_ASSERT_EQUAL(pcidevice_plan(NULL, NULL, "node-uid", &p), 0);
    CU_ASSERT_TRUE(pcidevice_plan_empty(&p));
    pcidevice_plan_done(&p);
    cJSON_Delete(have);
}

static void test_sriov(void)
{
    struct pcidevice_spec pf = nic(), vf = nic();
    pf.sriov_totalvfs = 8;
    pf.sriov_numvfs = 2;
    (void)snprintf(vf.physfn, sizeof(vf.physfn), "0000:3b:00.0");
    cJSON *a = pcidevice_status(&pf), *b = pcidevice_status(&vf);
    char *ta = cJSON_PrintUnformatted(a), *tb = cJSON_PrintUnformatted(b);
    CU_ASSERT_PTR_NOT_NULL(strstr(ta, "\"sriov\":{\"totalVFs\":8,\"numVFs\":2}"));
    CU_ASSERT_PTR_NOT_NULL(strstr(tb, "\"sriov\":{\"physicalFunction\":\"0000:3b:00.0\"}"));
    cJSON_free(ta);
    cJSON_free(tb);
    cJSON_Delete(a);
    cJSON_Delete(b);
    /* a VF's index, and its PF's SRIOVNetworkDevice as harvester's label on the new object */
    vf.sriov_vf_index = 3;
    (void)snprintf(vf.sriov_parent, sizeof(vf.sriov_parent), "node-enp59s0f0");
    b = pcidevice_status(&vf);
    tb = cJSON_PrintUnformatted(b);
    CU_ASSERT_PTR_NOT_NULL(
            strstr(tb, "\"sriov\":{\"physicalFunction\":\"0000:3b:00.0\",\"vfIndex\":3}"));
    cJSON *o = pcidevice_new_object(&vf, NULL, NULL);
    const char *label =
            json_str(json_field(json_field(o, "metadata"), "labels"), PCIDEVICE_PARENT_SRIOV_LABEL);
    CU_ASSERT_STRING_EQUAL(label ? label : "", "node-enp59s0f0");
    cJSON_Delete(o);
    o = pcidevice_new_object(&pf, NULL, NULL);
    CU_ASSERT_PTR_NULL(json_str(json_field(json_field(o, "metadata"), "labels"),
                                PCIDEVICE_PARENT_SRIOV_LABEL));
    cJSON_Delete(o);
    cJSON_free(tb);
    cJSON_Delete(b);
}

/* A merge patch merges objects: a key of sriov the agent no longer writes must be patched to
 * null, or it stays and every plan writes again (found by fuzz_objects). */
static void test_sriov_key_dropped(void)
{
    struct pcidevice_spec vf = nic(), pf = nic();
    (void)snprintf(vf.physfn, sizeof(vf.physfn), "0000:3b:00.0");
    pf.sriov_totalvfs = 8;
    pf.sriov_numvfs = 0;
    cJSON *have = stored(&vf, "node-uid");
    struct pcidevice_plan p;
    CU_ASSERT_EQUAL(pcidevice_plan(&pf, have, "node-uid", &p), 0);
    CU_ASSERT_PTR_NOT_NULL(p.status_patch);
    if (p.status_patch)
        CU_ASSERT_STRING_EQUAL(p.status_patch, "{\"status\":{\"sriov\":{\"totalVFs\":8,"
                                               "\"numVFs\":0,\"physicalFunction\":null}}}");
    pcidevice_plan_done(&p);
    cJSON_Delete(have);
}

/* The Healthy condition of a plan's status patch, or NULL. */
static cJSON *patched_healthy(const struct pcidevice_plan *p, cJSON **ret_doc)
{
    *ret_doc = p->status_patch ? cJSON_Parse(p->status_patch) : NULL;
    const cJSON *c;
    cJSON_ArrayForEach(c, json_field(json_field(*ret_doc, "status"), "conditions"))
    {
        if (json_same(json_str(c, "type"), "Healthy"))
            return (cJSON *)c;
    }
    return NULL;
}

/* `have` after the plan's status patch (conditions replaced whole, as a merge patch does). */
static void apply(cJSON *have, const struct pcidevice_plan *p)
{
    cJSON *doc = p->status_patch ? cJSON_Parse(p->status_patch) : NULL;
    cJSON *c = cJSON_DetachItemFromObjectCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(doc, "status"), "conditions");
    if (c)
        cJSON_ReplaceItemInObjectCaseSensitive(status_of(have), "conditions", c);
    if (c && !json_field(status_of(have), "conditions"))
        cJSON_AddItemToObject(status_of(have), "conditions", c);
    cJSON_Delete(doc);
}

static void test_healthy_condition(void)
{
    struct pcidevice_spec s = nic();
    cJSON *have = stored(&s, "node-uid"), *doc = NULL;
    /* someone else's condition stays, in its place */
    cJSON *conds = cJSON_AddArrayToObject(status_of(have), "conditions");
    cJSON *theirs = cJSON_CreateObject();
    cJSON_AddStringToObject(theirs, "type", "Scanned");
    cJSON_AddItemToArray(conds, theirs);
    struct pcidevice_health h = {.healthy = true,
                                 .reason = "Healthy",
                                 .message = "nothing known",
                                 .now = "2026-11-29T10:00:00Z"};
    struct pcidevice_plan p;
    CU_ASSERT_EQUAL(pcidevice_plan_health(&s, have, "node-uid", &h, &p), 0);
    cJSON *c = patched_healthy(&p, &doc);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_STRING_EQUAL(json_str(c, "status"), "True");
    CU_ASSERT_STRING_EQUAL(json_str(c, "lastTransitionTime"), "2026-11-29T10:00:00Z");
    CU_ASSERT_EQUAL(cJSON_GetArraySize(json_field(json_field(doc, "status"), "conditions")), 2);
    CU_ASSERT_STRING_EQUAL(
            json_str(cJSON_GetArrayItem(json_field(json_field(doc, "status"), "conditions"), 0),
                     "type"),
            "Scanned");
    cJSON_Delete(doc);
    apply(have, &p);
    pcidevice_plan_done(&p);
    /* an idle node writes nothing: the same state later is no write */
    h.now = "2026-11-29T11:00:00Z";
    CU_ASSERT_EQUAL(pcidevice_plan_health(&s, have, "node-uid", &h, &p), 0);
    CU_ASSERT_TRUE(pcidevice_plan_empty(&p));
    pcidevice_plan_done(&p);
    /* unhealthy: False with the store's reason and message, a new lastTransitionTime */
    h = (struct pcidevice_health){.reason = "AERFatal", .message = "m1", .now = "T2"};
    CU_ASSERT_EQUAL(pcidevice_plan_health(&s, have, "node-uid", &h, &p), 0);
    c = patched_healthy(&p, &doc);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_STRING_EQUAL(json_str(c, "status"), "False");
    CU_ASSERT_STRING_EQUAL(json_str(c, "reason"), "AERFatal");
    CU_ASSERT_STRING_EQUAL(json_str(c, "message"), "m1");
    CU_ASSERT_STRING_EQUAL(json_str(c, "lastTransitionTime"), "T2");
    cJSON_Delete(doc);
    apply(have, &p);
    pcidevice_plan_done(&p);
    /* another reason while False: the time it became False stays */
    h = (struct pcidevice_health){.reason = "Removed", .message = "m2", .now = "T3"};
    CU_ASSERT_EQUAL(pcidevice_plan_health(&s, have, "node-uid", &h, &p), 0);
    c = patched_healthy(&p, &doc);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_STRING_EQUAL(json_str(c, "lastTransitionTime"), "T2");
    cJSON_Delete(doc);
    pcidevice_plan_done(&p);
    /* without the health input the conditions are left alone (pcidevice_plan) */
    CU_ASSERT_EQUAL(pcidevice_plan(&s, have, "node-uid", &p), 0);
    CU_ASSERT_TRUE(pcidevice_plan_empty(&p));
    pcidevice_plan_done(&p);
    cJSON_Delete(have);
}

static void test_removed_kept(void)
{
    struct pcidevice_spec s = nic();
    cJSON *have = stored(&s, "node-uid"), *doc = NULL;
    struct pcidevice_health h = {
            .reason = "Removed", .message = "gone", .now = "T1", .keep_gone = true};
    struct pcidevice_plan p;
    CU_ASSERT_EQUAL(pcidevice_plan_health(NULL, have, "node-uid", &h, &p), 0);
    CU_ASSERT_FALSE(p.delete);
    CU_ASSERT_PTR_NULL(p.meta_patch);
    cJSON *c = patched_healthy(&p, &doc);
    CU_ASSERT_PTR_NOT_NULL(c);
    CU_ASSERT_STRING_EQUAL(json_str(c, "reason"), "Removed");
    /* only the condition: the rest of the status is what the device had */
    CU_ASSERT_EQUAL(cJSON_GetArraySize(json_field(doc, "status")), 1);
    cJSON_Delete(doc);
    pcidevice_plan_done(&p);
    h.keep_gone = false; /* no longer held: deleted */
    CU_ASSERT_EQUAL(pcidevice_plan_health(NULL, have, "node-uid", &h, &p), 0);
    CU_ASSERT_TRUE(p.delete);
    pcidevice_plan_done(&p);
    cJSON_Delete(have);
}

static void test_aer_errors(void)
{
    struct pcidevice_spec s = nic();
    s.aer[0] = -1, s.aer[1] = -1, s.aer[2] = -1;
    cJSON *st = pcidevice_status(&s);
    CU_ASSERT_PTR_NULL(json_field(st, "aerErrors"));
    cJSON *have = cJSON_CreateObject();
    cJSON_AddItemToObject(have, "status", st);
    s.aer[0] = 1, s.aer[1] = 0, s.aer[2] = 70;
    st = pcidevice_status(&s);
    char *text = cJSON_PrintUnformatted(json_field(st, "aerErrors"));
    CU_ASSERT_STRING_EQUAL(text, "{\"fatal\":1,\"nonFatal\":0,\"correctable\":70}");
    cJSON_free(text);
    cJSON_Delete(st);
    cJSON_Delete(have);
}

static CU_TestInfo tests[] = {
        {"Healthy condition: written from the store, kept when unchanged", test_healthy_condition},
        {"a Removed device still held is kept, its condition written", test_removed_kept},
        {"aerErrors: the totals, absent without counters", test_aer_errors},
        {"create when missing", test_create_when_missing},
        {"nothing when equal", test_nothing_when_equal},
        {"only changed fields", test_only_changed_fields},
        {"removed fields become null", test_removed_fields_become_null},
        {"identity fields: absent when unknown, written once", test_identity_fields},
        {"label and owner repaired", test_label_and_owner_repaired},
        {"no owner without node uid", test_no_owner_without_node_uid},
        {"delete when gone", test_delete_when_gone},
        {"sriov", test_sriov},
        {"sriov key dropped", test_sriov_key_dropped},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo pcidevice_suites[] = {
        {"pcidevice", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
