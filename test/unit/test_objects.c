/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_objects.c - the facts of our custom resources (controllers/objects/pciobj.c,
 * usbobj.c) that the tests of the reconcilers reading them do not reach on their own: the
 * resource a bound PCIDeviceClaim offers, bound, the driver at first sight, a USBDevice enabled
 * behind a controller, orphaned.
 */
#include <CUnit/CUnit.h>
#include <cjson/cJSON.h>
#include <string.h>

#include "controllers/objects/pciobj.h"
#include "controllers/objects/usbobj.h"

static void test_pci_resource(void)
{
    cJSON *dev = cJSON_Parse("{\"status\":{\"resourceName\":\"intel.com/82574L\"},"
                             "\"metadata\":{\"annotations\":{\"harvesterhci.io/pcideviceDriver\":"
                             "\"e1000e\"}}}");
    cJSON *pooled = cJSON_Parse("{\"spec\":{}}");
    cJSON *own = cJSON_Parse("{\"spec\":{\"disableResourcePooling\":true}}");
    cJSON *bare = cJSON_Parse("{\"status\":{}}");
    char buf[128];
    CU_ASSERT(pciobj_resource(pooled, dev, "n-000002000", buf, sizeof(buf)));
    CU_ASSERT_STRING_EQUAL(buf, "intel.com/82574L");
    CU_ASSERT(pciobj_resource(own, dev, "n-000002000", buf, sizeof(buf)));
    CU_ASSERT_STRING_EQUAL(buf, "intel.com/n-000002000");
    CU_ASSERT(!pciobj_resource(pooled, bare, "n-000002000", buf, sizeof(buf)));
    CU_ASSERT(!pciobj_resource(pooled, NULL, "n-000002000", buf, sizeof(buf)));
    const char *first = pciobj_first_driver(dev);
    CU_ASSERT(first && strcmp(first, "e1000e") == 0);
    CU_ASSERT_PTR_NULL(pciobj_first_driver(bare));
    cJSON_Delete(dev);
    cJSON_Delete(pooled);
    cJSON_Delete(own);
    cJSON_Delete(bare);
}

static void test_pci_bound(void)
{
    cJSON *bound = cJSON_Parse("{\"metadata\":{},\"status\":{\"passthroughEnabled\":true,"
                               "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}");
    cJSON *going = cJSON_Parse("{\"metadata\":{\"deletionTimestamp\":\"2026-11-25T10:00:00Z\"},"
                               "\"status\":{\"passthroughEnabled\":true,"
                               "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}");
    cJSON *notyet = cJSON_Parse("{\"metadata\":{},\"status\":{\"passthroughEnabled\":false,"
                                "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}");
    CU_ASSERT(pciobj_bound(bound));
    CU_ASSERT(!pciobj_bound(going));
    CU_ASSERT(!pciobj_bound(notyet));
    CU_ASSERT(!pciobj_bound(NULL));
    cJSON_Delete(bound);
    cJSON_Delete(going);
    cJSON_Delete(notyet);
}

static void test_usb_device(void)
{
    cJSON *on = cJSON_Parse("{\"status\":{\"enabled\":true,\"pciAddress\":\"0000:00:14.0\"}}");
    cJSON *off = cJSON_Parse("{\"status\":{\"enabled\":false,\"pciAddress\":\"0000:00:14.0\"}}");
    cJSON *gone = cJSON_Parse("{\"status\":{\"enabled\":true,\"status\":\"orphaned\"}}");
    CU_ASSERT(usbobj_enabled_behind(on, "0000:00:14.0"));
    CU_ASSERT(!usbobj_enabled_behind(on, "0000:00:1d.0"));
    CU_ASSERT(!usbobj_enabled_behind(off, "0000:00:14.0"));
    CU_ASSERT(!usbobj_enabled_behind(gone, "0000:00:14.0"));
    CU_ASSERT(usbobj_device_orphaned(gone));
    CU_ASSERT(!usbobj_device_orphaned(on));
    CU_ASSERT(!usbobj_device_enabled(NULL));
    cJSON_Delete(on);
    cJSON_Delete(off);
    cJSON_Delete(gone);
}

static CU_TestInfo tests[] = {
        {"pci: resource and driver at first sight", test_pci_resource},
        {"pci: bound", test_pci_bound},
        {"usb: enabled behind a controller, orphaned", test_usb_device},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo objects_suites[] = {
        {"objects", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
