/* SPDX-License-Identifier: Apache-2.0 */
/* test/unit/test_usbclaim.c - USBDeviceClaim decisions and the USB/PCI conflict checks. */
#include <CUnit/CUnit.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controllers/binding/bindplan.h"
#include "controllers/claims/usbclaim.h"
#include "controllers/objects/usbobj.h"

#define NAME "titan-0627-0001-1-1"

static cJSON *parse(const char *text)
{
    cJSON *o = cJSON_Parse(text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    return o;
}

/* A claim as a user applies it (harvester-shaped: no spec.nodeName), plus `meta` fields. */
static cJSON *new_claim(const char *meta)
{
    char text[2048];
    (void)snprintf(text, sizeof(text),
                   "{\"metadata\":{\"name\":\"%s\",\"generation\":1,\"uid\":\"u7\","
                   "\"resourceVersion\":\"7\"%s},"
                   "\"spec\":{\"userName\":\"alice\"}}",
                   NAME, meta);
    return parse(text);
}

static cJSON *device(const char *extra)
{
    char text[2048];
    (void)snprintf(text, sizeof(text),
                   "{\"metadata\":{\"name\":\"%s\"},\"status\":{\"nodeName\":\"titan\","
                   "\"pciAddress\":\"0000:00:06.0\",\"devicePath\":\"/dev/bus/usb/001/002\"%s}}",
                   NAME, extra);
    return parse(text);
}

static void test_next_step(void)
{
    cJSON *fresh = new_claim("");
    cJSON *mine = new_claim(",\"finalizers\":[\"devices.harvesterhci.io/release-usb\"]");
    cJSON *gone = new_claim(",\"finalizers\":[\"devices.harvesterhci.io/release-usb\"],"
                            "\"deletionTimestamp\":\"2026-11-23T01:00:00Z\"");
    cJSON *enabled = device(",\"enabled\":true"), *disabled = device(",\"enabled\":false");
    CU_ASSERT_EQUAL(usbclaim_next_step(fresh, NAME, NULL, "titan"), USBCLAIM_ADD_FINALIZER);
    CU_ASSERT_EQUAL(usbclaim_next_step(fresh, NAME, NULL, "other"), USBCLAIM_NOTHING);
    CU_ASSERT_EQUAL(usbclaim_next_step(fresh, "titan-not-usb", NULL, "titan"), USBCLAIM_NOTHING);
    CU_ASSERT_EQUAL(usbclaim_next_step(mine, NAME, NULL, "titan"), USBCLAIM_CHECK);
    cJSON *bare = parse("{\"metadata\":{\"name\":\"" NAME "\"}}"); /* created, no status yet */
    CU_ASSERT_EQUAL(usbclaim_next_step(mine, NAME, bare, "titan"), USBCLAIM_NOTHING);
    CU_ASSERT_EQUAL(usbclaim_next_step(mine, NAME, enabled, "titan"), USBCLAIM_CHECK);
    cJSON_Delete(bare);
    /* deleted while it holds the device (Ready, unplugged or in use): look at the device */
    cJSON *held = new_claim(",\"finalizers\":[\"devices.harvesterhci.io/release-usb\"],"
                            "\"deletionTimestamp\":\"2026-11-23T01:00:00Z\"");
    cJSON *ready = parse("{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\","
                         "\"reason\":\"Enabled\"}]}");
    cJSON_AddItemToObject(held, "status", ready);
    CU_ASSERT_EQUAL(usbclaim_next_step(held, NAME, enabled, "titan"), USBCLAIM_LET_GO);
    CU_ASSERT_EQUAL(usbclaim_next_step(held, NAME, NULL, "titan"), USBCLAIM_LET_GO);
    CU_ASSERT_EQUAL(usbclaim_next_step(held, NAME, enabled, "titan2"), USBCLAIM_NOTHING);
    cJSON *cond = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(ready, "conditions"), 0);
    cJSON_ReplaceItemInObject(cond, "status", cJSON_CreateString("False"));
    cJSON_ReplaceItemInObject(cond, "reason", cJSON_CreateString("DeviceInUse"));
    CU_ASSERT_EQUAL(usbclaim_next_step(held, NAME, enabled, "titan"), USBCLAIM_LET_GO);
    /* once it said Releasing: the device is disabled first, then the finalizer goes */
    cJSON_ReplaceItemInObject(cond, "reason", cJSON_CreateString("Releasing"));
    CU_ASSERT_EQUAL(usbclaim_next_step(held, NAME, enabled, "titan"), USBCLAIM_NOTHING);
    CU_ASSERT_EQUAL(usbclaim_next_step(held, NAME, disabled, "titan"), USBCLAIM_RELEASE);
    cJSON_Delete(held);
    /* deleted before it held anything: the same */
    CU_ASSERT_EQUAL(usbclaim_next_step(gone, NAME, enabled, "titan"), USBCLAIM_NOTHING);
    CU_ASSERT_EQUAL(usbclaim_next_step(gone, NAME, disabled, "titan"), USBCLAIM_RELEASE);
    CU_ASSERT_EQUAL(usbclaim_next_step(gone, NAME, NULL, "titan"), USBCLAIM_RELEASE);
    /* another node's agent never releases it */
    CU_ASSERT_EQUAL(usbclaim_next_step(gone, NAME, NULL, "titan2"), USBCLAIM_NOTHING);
    cJSON_Delete(fresh);
    cJSON_Delete(mine);
    cJSON_Delete(gone);
    cJSON_Delete(enabled);
    cJSON_Delete(disabled);
}

static void test_let_go(void)
{
    struct usbclaim_outcome o;
    struct usbclaim_letgo_facts f = {.device_path = "/dev/bus/usb/001/004",
                                     .claimed = 2,
                                     .holder = "qemu-system-x86 (pid 412)",
                                     .pci_address = "0000:00:06.0"};
    usbclaim_let_go(&f, &o);
    CU_ASSERT_FALSE(o.ready);
    CU_ASSERT_STRING_EQUAL(o.reason, "DeviceInUse");
    CU_ASSERT_STRING_EQUAL(o.pci_address, "0000:00:06.0");
    CU_ASSERT_PTR_NOT_NULL(strstr(o.message, "qemu-system-x86 (pid 412) holds /dev/bus/usb/001/004 "
                                             "(2 interfaces claimed through usbfs)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(o.message, "stop the VM or detach the device"));
    f.claimed = 1; /* a holder /proc does not show (another PID namespace): still in use */
    f.holder = NULL;
    usbclaim_let_go(&f, &o);
    CU_ASSERT_STRING_EQUAL(o.reason, "DeviceInUse");
    CU_ASSERT_PTR_NOT_NULL(strstr(o.message, "a program holds /dev/bus/usb/001/004 (1 interface "));
    f.claimed = 0; /* open, not configured yet: the open node is the use */
    f.holder = "qemu-system-x86 (pid 9)";
    usbclaim_let_go(&f, &o);
    CU_ASSERT_STRING_EQUAL(o.reason, "DeviceInUse");
    CU_ASSERT_PTR_NOT_NULL(
            strstr(o.message, "qemu-system-x86 (pid 9) holds /dev/bus/usb/001/004; "));
    f.holder = NULL; /* nothing holds it */
    usbclaim_let_go(&f, &o);
    CU_ASSERT_STRING_EQUAL(o.reason, "Releasing");
    f.claimed = -ENOENT; /* the device is gone */
    f.device_path = f.pci_address = NULL;
    usbclaim_let_go(&f, &o);
    CU_ASSERT_STRING_EQUAL(o.reason, "Releasing");
    CU_ASSERT_STRING_EQUAL(o.pci_address, "");
}

static void test_checks(void)
{
    cJSON *dev = device(""), *orphan = device(",\"status\":\"orphaned\",\"message\":\"unplugged\"");
    struct usbclaim_facts f = {.node = "titan", .device = dev, .dev_root = "/dev"};
    struct usbclaim_outcome o;
    usbclaim_check(&f, NAME, &o);
    CU_ASSERT_TRUE(o.ready);
    CU_ASSERT_STRING_EQUAL(o.reason, "Enabled");
    CU_ASSERT_STRING_EQUAL(o.pci_address, "0000:00:06.0");
    CU_ASSERT_PTR_NOT_NULL(strstr(o.message, "/dev/bus/usb/001/002"));
    f.device = NULL;
    usbclaim_check(&f, NAME, &o);
    CU_ASSERT_FALSE(o.ready);
    CU_ASSERT_STRING_EQUAL(o.reason, "DeviceNotFound");
    f.device = orphan;
    usbclaim_check(&f, NAME, &o);
    CU_ASSERT_STRING_EQUAL(o.reason, "DeviceUnplugged");
    CU_ASSERT_STRING_EQUAL(o.message, "unplugged");
    f.device = dev;
    f.controller_claim = "titan-000000060";
    usbclaim_check(&f, NAME, &o);
    CU_ASSERT_STRING_EQUAL(o.reason, "ControllerPassedThrough");
    CU_ASSERT_PTR_NOT_NULL(strstr(o.message, "PCIDeviceClaim titan-000000060"));
    CU_ASSERT_PTR_NOT_NULL(strstr(o.message, "delete that claim first"));
    f.holds = true; /* first come, first served: a later PCI claim does not take it away */
    usbclaim_check(&f, NAME, &o);
    CU_ASSERT_STRING_EQUAL(o.reason, "Enabled");
    f.holds = false;
    f.controller_claim = NULL;
    f.controller_on_vfio = true;
    usbclaim_check(&f, NAME, &o);
    CU_ASSERT_STRING_EQUAL(o.reason, "ControllerPassedThrough");
    CU_ASSERT_PTR_NOT_NULL(strstr(o.message, "bound to vfio-pci"));
    f.controller_on_vfio = false;
    f.devnode = -ENOENT;
    usbclaim_check(&f, NAME, &o);
    CU_ASSERT_STRING_EQUAL(o.reason, "DeviceNodeMissing");
    f.holds = true; /* an enabled device whose node just went: being unplugged, not refused */
    usbclaim_check(&f, NAME, &o);
    CU_ASSERT_STRING_EQUAL(o.reason, "Enabled");
    cJSON_Delete(dev);
    cJSON_Delete(orphan);
}

static void test_status_patch(void)
{
    cJSON *claim = new_claim(",\"finalizers\":[\"devices.harvesterhci.io/release-usb\"]");
    cJSON *dev = device("");
    struct usbclaim_facts f = {.node = "titan", .device = dev, .dev_root = "/dev"};
    struct usbclaim_outcome o;
    usbclaim_check(&f, NAME, &o);
    char *p = usbclaim_status_patch(claim, "titan", &o, "2026-11-23T02:00:00Z");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    cJSON *patch = cJSON_Parse(p);
    cJSON *st = cJSON_GetObjectItemCaseSensitive(patch, "status");
    CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(st, "nodeName")),
                           "titan");
    CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(st, "pciAddress")),
                           "0000:00:06.0");
    /* applied, the same outcome writes nothing */
    cJSON_AddItemToObject(claim, "status", cJSON_Duplicate(st, true));
    char *again = usbclaim_status_patch(claim, "titan", &o, "2026-11-23T03:00:00Z");
    CU_ASSERT_PTR_NULL(again);
    CU_ASSERT_TRUE(usbobj_claim_holds(claim));
    cJSON_free(p);
    cJSON_Delete(patch);
    cJSON_Delete(claim);
    cJSON_Delete(dev);
}

static void test_finalizer_patch(void)
{
    cJSON *fresh = new_claim("");
    cJSON *mine = new_claim(",\"finalizers\":[\"x/y\",\"devices.harvesterhci.io/release-usb\"]");
    char *add = usbclaim_finalizer_patch(fresh, true);
    char *remove = usbclaim_finalizer_patch(mine, false);
    CU_ASSERT_PTR_NOT_NULL(strstr(add, "\"path\":\"/metadata/uid\",\"value\":\"u7\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(add, "\"path\":\"/metadata/finalizers\",\"value\":null"));
    CU_ASSERT_PTR_NOT_NULL(strstr(add, "release-usb"));
    CU_ASSERT_PTR_NOT_NULL(strstr(remove, "/metadata/finalizers/1"));
    CU_ASSERT_PTR_NULL(usbclaim_finalizer_patch(mine, true));
    CU_ASSERT_PTR_NULL(usbclaim_finalizer_patch(fresh, false));
    free(add);
    free(remove);
    cJSON_Delete(fresh);
    cJSON_Delete(mine);
}

/* The PCI side of the conflict: a controller with enabled USB devices behind it. */
static void test_pci_claim_on_usb_controller(void)
{
    struct bindplan_facts f = {.node = "titan",
                               .address = "0000:00:06.0",
                               .present = true,
                               .iommu_group = 5,
                               .driver = "xhci_hcd",
                               .host_why = "",
                               .blockers = "",
                               .usb_enabled = "titan-0627-0001-1-1, titan-0627-0001-1-2",
                               .annotation = "xhci_hcd"};
    struct bindplan_outcome o;
    bindplan_check_bind(&f, &o);
    CU_ASSERT_EQUAL(o.kind, BINDPLAN_REFUSED);
    CU_ASSERT_STRING_EQUAL(o.reason, "USBDevicesEnabled");
    CU_ASSERT_PTR_NOT_NULL(strstr(o.message, "titan-0627-0001-1-1, titan-0627-0001-1-2"));
    CU_ASSERT_PTR_NOT_NULL(strstr(o.message, "delete their USBDeviceClaims first"));
    f.usb_enabled = "";
    bindplan_check_bind(&f, &o);
    CU_ASSERT_EQUAL(o.kind, BINDPLAN_RECORD);
}

static CU_TestInfo tests[] = {
        {"next step", test_next_step},
        {"a deleted claim lets go once nothing uses the device", test_let_go},
        {"checks", test_checks},
        {"status patch", test_status_patch},
        {"finalizer patch", test_finalizer_patch},
        {"PCI claim on a USB controller", test_pci_claim_on_usb_controller},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo usbclaim_suites[] = {
        {"usbclaim", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
