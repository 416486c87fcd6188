/* SPDX-License-Identifier: Apache-2.0 */
/* test/unit/test_usbdevice.c - desired USBDevices, identity by port, orphans, write plans. */
#include <CUnit/CUnit.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "controllers/devices/usbdevice.h"
#include "controllers/objects/usbobj.h"
#include "kube/names.h"
#include "node/usb.h"

/* The text, or "(null)": strcmp on a NULL patch would crash the runner. */
static const char *or_null(const char *s)
{
    return s ? s : "(null)";
}

static struct node_usb_dev dongle(void)
{
    struct node_usb_dev d = {.port_path = "2-1.4",
                             .vendor_id = "0951",
                             .product_id = "1666",
                             .busnum = 2,
                             .devnum = 4,
                             .dev_path = "/dev/bus/usb/002/004",
                             .pci_address = "0000:00:14.0",
                             .speed = "480",
                             .class_code = "08",
                             .product = "DataTraveler 3.0",
                             .serial = "60A44C4138"};
    return d;
}

static struct usbdevice_spec spec(void)
{
    struct node_usb_dev d = dongle();
    struct usbdevice_spec s;
    CU_ASSERT_EQUAL_FATAL(usbdevice_spec_from("titan", &d, NULL, &s), 0);
    return s;
}

static cJSON *stored(const struct usbdevice_spec *s, bool enabled)
{
    cJSON *o = usbdevice_new_object(s, "node-uid");
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(o, "metadata");
    cJSON_AddStringToObject(meta, "uid", "dev-uid-1");
    cJSON *st = usbdevice_status(s);
    cJSON_AddBoolToObject(st, "enabled", enabled);
    cJSON_AddItemToObject(o, "status", st);
    return o;
}

/* A claim of `name` as its agent leaves it: finalizer and Ready (reason). */
static cJSON *claim(const char *name, const char *ready, const char *reason, bool deleting)
{
    char text[1024];
    (void)snprintf(text, sizeof(text),
                   "{\"metadata\":{\"name\":\"%s\",\"generation\":1,\"finalizers\":[\"%s\"]%s},"
                   "\"spec\":{\"userName\":\"alice\"},\"status\":{\"conditions\":[{\"type\":"
                   "\"Ready\",\"status\":\"%s\",\"reason\":\"%s\",\"message\":\"m\","
                   "\"observedGeneration\":1,\"lastTransitionTime\":\"2026-11-23T00:00:00Z\"}]}}",
                   name, USBOBJ_FINALIZER,
                   deleting ? ",\"deletionTimestamp\":\"2026-11-23T01:00:00Z\"" : "", ready,
                   reason);
    return cJSON_Parse(text);
}

static const cJSON *patched(const char *patch, cJSON **keep, const char *field)
{
    *keep = patch ? cJSON_Parse(patch) : NULL;
    return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(*keep, "status"),
                                            field);
}

static void test_identity_and_fields(void)
{
    struct usbdevice_spec s = spec();
    CU_ASSERT_STRING_EQUAL(s.name, "titan-0951-1666-2-1-4");
    CU_ASSERT_STRING_EQUAL(s.resource_name, "kubevirt.io/titan-0951-1666-2-1-4");
    CU_ASSERT_STRING_EQUAL(s.class_type, "Mass Storage");
    CU_ASSERT_STRING_EQUAL(s.description, "Unknown 0951:1666 [DataTraveler 3.0]");
    struct node_usb_dev twin = dongle();
    (void)snprintf(twin.port_path, sizeof(twin.port_path), "2-1.3");
    struct usbdevice_spec t;
    CU_ASSERT_EQUAL(usbdevice_spec_from("titan", &twin, NULL, &t), 0);
    CU_ASSERT_STRING_EQUAL(t.name, "titan-0951-1666-2-1-3"); /* identical dongle, other port */
    struct node_usb_dev bad = dongle();
    (void)snprintf(bad.port_path, sizeof(bad.port_path), "usb2");
    CU_ASSERT_EQUAL(usbdevice_spec_from("titan", &bad, NULL, &t), -EINVAL);
    /* a long node name: published, without a resource name kubelet would refuse */
    CU_ASSERT_EQUAL(usbdevice_spec_from("a-node-name-that-is-rather-long-for-a-usb-resource-name",
                                        &twin, NULL, &t),
                    1);
    CU_ASSERT_STRING_EQUAL(t.resource_name, "");
    cJSON *st = usbdevice_status(&t);
    CU_ASSERT_PTR_NULL(cJSON_GetObjectItemCaseSensitive(st, "resourceName"));
    cJSON_Delete(st);
}

static void test_create_then_nothing(void)
{
    struct usbdevice_spec s = spec();
    struct usbdevice_plan p;
    CU_ASSERT_EQUAL(usbdevice_plan(&s, NULL, NULL, NULL, "titan", "node-uid", &p), 0);
    CU_ASSERT_TRUE(p.create);
    cJSON *keep;
    const cJSON *en = patched(p.status_patch, &keep, "enabled");
    CU_ASSERT_TRUE(cJSON_IsFalse(en));
    CU_ASSERT_EQUAL(cJSON_GetObjectItemCaseSensitive(
                            cJSON_GetObjectItemCaseSensitive(keep, "status"), "busNum")
                            ->valueint,
                    2);
    cJSON_Delete(keep);
    usbdevice_plan_done(&p);
    cJSON *have = stored(&s, false);
    CU_ASSERT_EQUAL(usbdevice_plan(&s, have, NULL, NULL, "titan", "node-uid", &p), 0);
    CU_ASSERT_TRUE(usbdevice_plan_empty(&p));
    cJSON_Delete(have);
}

static void test_replug_updates_path_in_place(void)
{
    struct usbdevice_spec s = spec();
    cJSON *have = stored(&s, false);
    s.devnum = 9;
    (void)snprintf(s.dev_path, sizeof(s.dev_path), "/dev/bus/usb/002/009");
    struct usbdevice_plan p;
    CU_ASSERT_EQUAL(usbdevice_plan(&s, have, NULL, NULL, "titan", "node-uid", &p), 0);
    CU_ASSERT_FALSE(p.create);
    CU_ASSERT_FALSE(p.delete);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p.status_patch);
    CU_ASSERT_STRING_EQUAL(or_null(p.status_patch),
                           "{\"status\":{\"devicePath\":\"/dev/bus/usb/002/009\",\"devNum\":9}}");
    usbdevice_plan_done(&p);
    cJSON_Delete(have);
}

static void test_enabled_follows_claim(void)
{
    struct usbdevice_spec s = spec();
    cJSON *have = stored(&s, false);
    cJSON *ready = claim(s.name, "True", "Enabled", false);
    cJSON *refused = claim(s.name, "False", "ControllerPassedThrough", false);
    /* deleted: it holds the device until its agent says it lets go (Releasing) */
    cJSON *in_use = claim(s.name, "False", "DeviceInUse", true);
    cJSON *deleting = claim(s.name, "False", "Releasing", true);
    struct usbdevice_plan p;
    CU_ASSERT_TRUE(usbobj_claim_holds(ready));
    CU_ASSERT_FALSE(usbobj_claim_holds(refused));
    CU_ASSERT_TRUE(usbobj_claim_holds(in_use));
    CU_ASSERT_FALSE(usbobj_claim_holds(deleting));
    CU_ASSERT_EQUAL(usbdevice_plan(&s, have, ready, NULL, "titan", "node-uid", &p), 0);
    CU_ASSERT_STRING_EQUAL(or_null(p.status_patch), "{\"status\":{\"enabled\":true}}");
    usbdevice_plan_done(&p);
    CU_ASSERT_EQUAL(usbdevice_plan(&s, have, refused, NULL, "titan", "node-uid", &p), 0);
    CU_ASSERT_TRUE(usbdevice_plan_empty(&p));
    cJSON_Delete(have);
    have = stored(&s, true);
    CU_ASSERT_EQUAL(usbdevice_plan(&s, have, in_use, NULL, "titan", "node-uid", &p), 0);
    CU_ASSERT_TRUE(usbdevice_plan_empty(&p)); /* stays enabled while a VM has it */
    usbdevice_plan_done(&p);
    CU_ASSERT_EQUAL(usbdevice_plan(&s, have, deleting, NULL, "titan", "node-uid", &p), 0);
    CU_ASSERT_STRING_EQUAL(or_null(p.status_patch), "{\"status\":{\"enabled\":false}}");
    usbdevice_plan_done(&p);
    cJSON_Delete(have);
    cJSON_Delete(ready);
    cJSON_Delete(refused);
    cJSON_Delete(in_use);
    cJSON_Delete(deleting);
}

static void test_gone_unclaimed_is_deleted(void)
{
    struct usbdevice_spec s = spec();
    cJSON *have = stored(&s, false);
    cJSON *refused = claim(s.name, "False", "DeviceNotFound", false);
    struct usbdevice_gone gone = {.controller_passed_through = true};
    struct usbdevice_plan p;
    CU_ASSERT_EQUAL(usbdevice_plan(NULL, have, NULL, NULL, "titan", "node-uid", &p), 0);
    CU_ASSERT_TRUE(p.delete);
    CU_ASSERT_STRING_EQUAL(p.uid, "dev-uid-1");
    usbdevice_plan_done(&p);
    /* behind a passed-through controller: deleted too (found again when it comes back) */
    CU_ASSERT_EQUAL(usbdevice_plan(NULL, have, refused, &gone, "titan", "node-uid", &p), 0);
    CU_ASSERT_TRUE(p.delete);
    CU_ASSERT_FALSE(p.orphan);
    usbdevice_plan_done(&p);
    CU_ASSERT_EQUAL(usbdevice_plan(NULL, NULL, NULL, NULL, "titan", "node-uid", &p), 0);
    CU_ASSERT_TRUE(usbdevice_plan_empty(&p));
    cJSON_Delete(have);
    cJSON_Delete(refused);
}

static void test_orphan_and_recovery(void)
{
    struct usbdevice_spec s = spec();
    cJSON *have = stored(&s, true);
    cJSON *ready = claim(s.name, "True", "Enabled", false);
    struct usbdevice_plan p;
    CU_ASSERT_EQUAL(usbdevice_plan(NULL, have, ready, NULL, "titan", "node-uid", &p), 0);
    CU_ASSERT_FALSE(p.delete);
    CU_ASSERT_TRUE(p.orphan);
    cJSON *keep;
    const cJSON *msg = patched(p.status_patch, &keep, "message");
    CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                                   cJSON_GetObjectItemCaseSensitive(keep, "status"), "status")),
                           "orphaned");
    CU_ASSERT_PTR_NOT_NULL(strstr(cJSON_GetStringValue(msg), "unplugged from port 2-1.4"));
    CU_ASSERT_PTR_NOT_NULL(strstr(cJSON_GetStringValue(msg), "plug it back into the same port"));
    /* the orphan as stored: marked, still enabled; the claim waits for it */
    cJSON *st = cJSON_GetObjectItemCaseSensitive(have, "status");
    cJSON_AddStringToObject(st, "status", "orphaned");
    cJSON_AddItemToObject(st, "message", cJSON_Duplicate(msg, true));
    cJSON_Delete(keep);
    usbdevice_plan_done(&p);
    cJSON *waiting = claim(s.name, "False", "DeviceUnplugged", false);
    CU_ASSERT_TRUE(usbobj_claim_holds(waiting));
    CU_ASSERT_EQUAL(usbdevice_plan(NULL, have, waiting, NULL, "titan", "node-uid", &p), 0);
    CU_ASSERT_TRUE(usbdevice_plan_empty(&p)); /* stable: nothing more to write */
    /* back in the same port with new numbers: the same object, unmarked, still enabled */
    s.devnum = 7;
    (void)snprintf(s.dev_path, sizeof(s.dev_path), "/dev/bus/usb/002/007");
    CU_ASSERT_EQUAL(usbdevice_plan(&s, have, waiting, NULL, "titan", "node-uid", &p), 0);
    CU_ASSERT_FALSE(p.create);
    CU_ASSERT_STRING_EQUAL(or_null(p.status_patch),
                           "{\"status\":{\"devicePath\":\"/dev/bus/usb/002/007\",\"devNum\":7,"
                           "\"status\":null,\"message\":null}}");
    usbdevice_plan_done(&p);
    cJSON_Delete(have);
    cJSON_Delete(ready);
    cJSON_Delete(waiting);
}

static void test_orphan_behind_passed_through_controller(void)
{
    struct usbdevice_spec s = spec();
    cJSON *have = stored(&s, true);
    cJSON *ready = claim(s.name, "True", "Enabled", false);
    struct usbdevice_gone gone = {.controller_passed_through = true};
    struct usbdevice_plan p;
    CU_ASSERT_EQUAL(usbdevice_plan(NULL, have, ready, &gone, "titan", "node-uid", &p), 0);
    CU_ASSERT_TRUE(p.orphan);
    CU_ASSERT_PTR_NOT_NULL(
            strstr(or_null(p.status_patch), "controller 0000:00:14.0 was passed through"));
    usbdevice_plan_done(&p);
    cJSON_Delete(have);
    cJSON_Delete(ready);
}

static void test_node_of_name(void)
{
    char node[254];
    CU_ASSERT_EQUAL(kube_names_usbdevice_node("titan-0951-1666-2-1-4", node, sizeof(node)), 0);
    CU_ASSERT_STRING_EQUAL(node, "titan");
    CU_ASSERT_EQUAL(kube_names_usbdevice_node("a-b-0951-1666-2-1", node, sizeof(node)), 0);
    CU_ASSERT_STRING_EQUAL(node, "a-b");
    /* a node named like ids still resolves to the one node that fits */
    CU_ASSERT_EQUAL(kube_names_usbdevice_node("n-0951-1666-0951-1666-3-1", node, sizeof(node)), 0);
    CU_ASSERT_STRING_EQUAL(node, "n-0951-1666");
    CU_ASSERT_EQUAL(kube_names_usbdevice_node("titan-0000001f6", node, sizeof(node)), -EINVAL);
    CU_ASSERT_EQUAL(kube_names_usbdevice_node("-0951-1666-2-1", node, sizeof(node)), -EINVAL);
    CU_ASSERT_EQUAL(kube_names_usbdevice_node("t-0951-1666-2-1-1-1-1-1-1-1-1", node, sizeof(node)),
                    -EINVAL); /* more than 7 tiers */
    CU_ASSERT_EQUAL(kube_names_usbdevice_node("titan-0951-1666-2-1", node, 3), -EINVAL);
}

static CU_TestInfo tests[] = {
        {"identity and fields", test_identity_and_fields},
        {"create, then nothing", test_create_then_nothing},
        {"re-plug updates devicePath in place", test_replug_updates_path_in_place},
        {"enabled follows the claim", test_enabled_follows_claim},
        {"gone and unclaimed: deleted", test_gone_unclaimed_is_deleted},
        {"orphan and recovery", test_orphan_and_recovery},
        {"orphan behind a passed-through controller", test_orphan_behind_passed_through_controller},
        {"node of a USB name", test_node_of_name},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo usbdevice_suites[] = {
        {"usbdevice", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
