/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_objects.c - the facts of our custom resources (controllers/objects/pciobj.c,
 * usbobj.c) that the tests of the reconcilers reading them do not reach on their own: the
 * resource a bound PCIDeviceClaim offers, bound, the driver at first sight, a USBDevice enabled
 * behind a controller, orphaned.
 */
#include <CUnit/CUnit.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "controllers/objects/pciobj.h"
#include "controllers/objects/usbobj.h"

/* The objects a test parsed, freed after it (the suite's teardown). */
static cJSON *parsed[32];
static size_t n_parsed;

static cJSON *parse(const char *text)
{
    cJSON *o = cJSON_Parse(text);
    if (o && n_parsed < sizeof(parsed) / sizeof(parsed[0]))
        parsed[n_parsed++] = o;
    return o;
}

static void free_parsed(void)
{
    while (n_parsed > 0)
        cJSON_Delete(parsed[--n_parsed]);
}

static void test_pci_resource(void)
{
    cJSON *dev = parse("{\"status\":{\"resourceName\":\"intel.com/82574L\"}}");
    cJSON *pooled = parse("{\"spec\":{}}");
    cJSON *own = parse("{\"spec\":{\"disableResourcePooling\":true}}");
    cJSON *bare = parse("{\"status\":{}}");
    char buf[128];
    CU_ASSERT(pciobj_resource(pooled, dev, "n-000002000", buf, sizeof(buf)));
    CU_ASSERT_STRING_EQUAL(buf, "intel.com/82574L");
    CU_ASSERT(pciobj_resource(own, dev, "n-000002000", buf, sizeof(buf)));
    CU_ASSERT_STRING_EQUAL(buf, "intel.com/n-000002000");
    CU_ASSERT(!pciobj_resource(pooled, bare, "n-000002000", buf, sizeof(buf)));
    CU_ASSERT(!pciobj_resource(pooled, NULL, "n-000002000", buf, sizeof(buf)));
}

static void test_pci_first_driver(void)
{
    const cJSON *dev = parse("{\"metadata\":{\"annotations\":{\"harvesterhci.io/pcideviceDriver\":"
                             "\"e1000e\"}}}");
    const char *first = pciobj_first_driver(dev);
    CU_ASSERT(first && strcmp(first, "e1000e") == 0);
    CU_ASSERT_PTR_NULL(pciobj_first_driver(parse("{\"metadata\":{\"annotations\":{}}}")));
    CU_ASSERT_PTR_NULL(pciobj_first_driver(NULL));
}

static void test_pci_bound(void)
{
    cJSON *bound = parse("{\"metadata\":{},\"status\":{\"passthroughEnabled\":true,"
                         "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}");
    cJSON *going = parse("{\"metadata\":{\"deletionTimestamp\":\"2026-11-25T10:00:00Z\"},"
                         "\"status\":{\"passthroughEnabled\":true,"
                         "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}");
    cJSON *notyet = parse("{\"metadata\":{},\"status\":{\"passthroughEnabled\":false,"
                          "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}");
    CU_ASSERT(pciobj_bound(bound));
    CU_ASSERT(!pciobj_bound(going)); /* no finalizer of ours: released (another one keeps it) */
    /* deleted, our finalizer on it, Ready=True: its agent has not answered yet (a VM may hold
     * it: DeviceInUse comes next, or the restore, which removes the finalizer): still bound, so
     * a held device is never withdrawn for that moment */
    cJSON *deleted = parse("{\"metadata\":{\"deletionTimestamp\":\"2026-11-25T10:00:00Z\","
                           "\"finalizers\":[\"example.com/other\","
                           "\"devices.harvesterhci.io/restore-driver\"]},"
                           "\"status\":{\"passthroughEnabled\":true,"
                           "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}");
    CU_ASSERT(pciobj_bound(deleted));
    cJSON *failed = parse("{\"metadata\":{\"deletionTimestamp\":\"2026-11-25T10:00:00Z\","
                          "\"finalizers\":[\"devices.harvesterhci.io/restore-driver\"]},"
                          "\"status\":{\"passthroughEnabled\":false,\"conditions\":[{\"type\":"
                          "\"Ready\",\"status\":\"False\",\"reason\":\"RestoreFailed\"}]}}");
    CU_ASSERT(!pciobj_bound(failed)); /* the agent answered: not restored, not offered */
    /* deleted while a VM holds it: still bound (offered, permitted) until the VM lets go */
    cJSON *held = parse("{\"metadata\":{\"deletionTimestamp\":\"2026-11-25T10:00:00Z\"},"
                        "\"status\":{\"passthroughEnabled\":true,\"conditions\":[{\"type\":"
                        "\"Ready\",\"status\":\"False\",\"reason\":\"DeviceInUse\"}]}}");
    CU_ASSERT(pciobj_bound(held));
    cJSON_DeleteItemFromObject(cJSON_GetObjectItemCaseSensitive(held, "metadata"),
                               "deletionTimestamp");
    CU_ASSERT(!pciobj_bound(held)); /* alive: DeviceInUse is no reason to be bound */
    cJSON *restoring = parse("{\"metadata\":{\"deletionTimestamp\":\"2026-11-25T10:00:00Z\"},"
                             "\"status\":{\"passthroughEnabled\":false,\"conditions\":[{\"type\":"
                             "\"Ready\",\"status\":\"False\",\"reason\":\"DeviceInUse\"}]}}");
    CU_ASSERT(!pciobj_bound(restoring));
    CU_ASSERT(!pciobj_bound(notyet));
    CU_ASSERT(!pciobj_bound(NULL));
    /* alive, its device gone while bound: still bound (offered Unhealthy, permitted); once
     * deleted it goes as any release does; not passthroughEnabled: not bound */
    cJSON *removed = parse("{\"metadata\":{},\"status\":{\"passthroughEnabled\":true,"
                           "\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\","
                           "\"reason\":\"DeviceRemoved\"}]}}");
    CU_ASSERT(pciobj_bound(removed));
    cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(removed, "metadata"),
                            "deletionTimestamp", "2026-11-25T10:00:00Z");
    CU_ASSERT(!pciobj_bound(removed));
    cJSON_DeleteItemFromObject(cJSON_GetObjectItemCaseSensitive(removed, "metadata"),
                               "deletionTimestamp");
    cJSON_ReplaceItemInObject(cJSON_GetObjectItemCaseSensitive(removed, "status"),
                              "passthroughEnabled", cJSON_CreateFalse());
    CU_ASSERT(!pciobj_bound(removed));
}

static void test_usb_device(void)
{
    cJSON *on = parse("{\"status\":{\"enabled\":true,\"pciAddress\":\"0000:00:14.0\"}}");
    cJSON *off = parse("{\"status\":{\"enabled\":false,\"pciAddress\":\"0000:00:14.0\"}}");
    cJSON *gone = parse("{\"status\":{\"enabled\":true,\"status\":\"orphaned\"}}");
    CU_ASSERT(usbobj_enabled_behind(on, "0000:00:14.0"));
    CU_ASSERT(!usbobj_enabled_behind(on, "0000:00:1d.0"));
    CU_ASSERT(!usbobj_enabled_behind(off, "0000:00:14.0"));
    CU_ASSERT(!usbobj_enabled_behind(gone, "0000:00:14.0"));
    CU_ASSERT(usbobj_device_orphaned(gone));
    CU_ASSERT(!usbobj_device_orphaned(on));
    CU_ASSERT(!usbobj_device_enabled(NULL));
}

static void test_pci_claim(void)
{
    const cJSON *claim = parse("{\"spec\":{\"address\":\"0000:02:00.0\"},"
                               "\"status\":{\"kernelDriverToUnbind\":\"e1000e\"}}");
    const cJSON *fresh = parse("{\"spec\":{\"address\":\"0000:02:00.0\"},\"status\":{}}");
    const char *addr = pciobj_address(claim), *driver = "unchanged";
    CU_ASSERT(addr && strcmp(addr, "0000:02:00.0") == 0);
    CU_ASSERT(pciobj_driver_recorded(claim, &driver));
    CU_ASSERT_STRING_EQUAL(driver, "e1000e");
    driver = "unchanged"; /* not written when nothing is recorded */
    CU_ASSERT(!pciobj_driver_recorded(fresh, &driver));
    CU_ASSERT_STRING_EQUAL(driver, "unchanged");
    CU_ASSERT(pciobj_driver_recorded(claim, NULL));
}

/* A USBDeviceClaim with `finalizers` (JSON array) and a Ready condition of `status`/`reason`. */
static const cJSON *usb_claim(const char *finalizers, const char *status, const char *reason)
{
    char text[512];
    (void)snprintf(text, sizeof(text),
                   "{\"metadata\":{\"finalizers\":%s},\"status\":{\"conditions\":"
                   "[{\"type\":\"Ready\",\"status\":\"%s\",\"reason\":\"%s\"}]}}",
                   finalizers, status, reason);
    return parse(text);
}

static void test_usb_claim_holds(void)
{
    const char *ours = "[\"" USBOBJ_FINALIZER "\"]";
    const char *second = "[\"example.com/keep\",\"" USBOBJ_FINALIZER "\"]";
    CU_ASSERT(usbobj_claim_holds(usb_claim(ours, "True", "Enabled")));
    CU_ASSERT(usbobj_claim_holds(usb_claim(second, "True", "Enabled"))); /* not first: still ours */
    CU_ASSERT(!usbobj_claim_holds(usb_claim("[]", "True", "Enabled")));  /* not (yet) ours */
    CU_ASSERT(usbobj_claim_holds(usb_claim(ours, "False", USBOBJ_REASON_UNPLUGGED)));
    CU_ASSERT(!usbobj_claim_holds(usb_claim(ours, "Unknown", USBOBJ_REASON_UNPLUGGED)));
    CU_ASSERT(!usbobj_claim_holds(usb_claim(ours, "False", "DeviceNotFound")));
    CU_ASSERT(!usbobj_claim_holds(NULL));
    /* deleted: it holds the device while a VM may use it, until its agent says Releasing */
    CU_ASSERT(usbobj_claim_holds(
            parse("{\"metadata\":{\"deletionTimestamp\":\"2026-11-27T23:00:00Z\","
                  "\"finalizers\":[\"" USBOBJ_FINALIZER "\"]},\"status\":"
                  "{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}")));
    CU_ASSERT(usbobj_claim_holds(usb_claim(ours, "False", USBOBJ_REASON_IN_USE)));
    CU_ASSERT(!usbobj_claim_holds(usb_claim(ours, "Unknown", USBOBJ_REASON_IN_USE)));
    CU_ASSERT(!usbobj_claim_holds(usb_claim(ours, "False", "Releasing")));
}

static CU_TestInfo tests[] = {
        {"pci: the resource a bound claim offers", test_pci_resource},
        {"pci: the driver at first sight", test_pci_first_driver},
        {"pci: bound", test_pci_bound},
        {"usb: enabled behind a controller, orphaned", test_usb_device},
        {"pci: a claim's address and recorded driver", test_pci_claim},
        {"usb: a claim holds its device", test_usb_claim_holds},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo objects_suites[] = {
        {"objects", NULL, NULL, NULL, free_parsed, tests},
        CU_SUITE_INFO_NULL,
};
