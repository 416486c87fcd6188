/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/objects/usbobj.c - facts about USBDeviceClaims and USBDevices (see usbobj.h).
 * Pure: no I/O, no logging.
 */
#include "controllers/objects/usbobj.h"

#include <cjson/cJSON.h>

#include "base/json.h"
#include "controllers/objects/claimstatus.h"
#include "kube/client.h"

bool usbobj_claim_holds(const cJSON *claim)
{
    if (!claim || claimstatus_finalizer_index(claim, USBOBJ_FINALIZER) < 0)
        return false;
    const cJSON *c = claimstatus_ready(claim);
    return json_same(json_str(c, "status"), "True") ||
           (json_same(json_str(c, "status"), "False") &&
            (json_same(json_str(c, "reason"), USBOBJ_REASON_UNPLUGGED) ||
             json_same(json_str(c, "reason"), USBOBJ_REASON_IN_USE)));
}

bool usbobj_device_orphaned(const cJSON *dev)
{
    return json_same(json_str(json_field(dev, "status"), "status"), USBOBJ_ORPHANED);
}

bool usbobj_device_enabled(const cJSON *dev)
{
    return cJSON_IsTrue(json_field(json_field(dev, "status"), "enabled"));
}

bool usbobj_enabled_behind(const cJSON *dev, const char *pci_address)
{
    return usbobj_device_enabled(dev) &&
           json_same(json_str(json_field(dev, "status"), "pciAddress"), pci_address);
}
