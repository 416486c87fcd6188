/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/objects/pciobj.c - facts about PCIDeviceClaims and PCIDevices (see pciobj.h).
 * Pure: no I/O, no logging.
 */
#include "controllers/objects/pciobj.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "base/json.h"
#include "controllers/objects/claimstatus.h"
#include "kube/client.h"
#include "kube/names.h"

const char *pciobj_address(const cJSON *claim)
{
    return json_str(json_field(claim, "spec"), "address");
}

bool pciobj_driver_recorded(const cJSON *claim, const char **ret_driver)
{
    const char *d = json_str(json_field(claim, "status"), "kernelDriverToUnbind");
    if (d && ret_driver)
        *ret_driver = d;
    return d != NULL;
}

bool pciobj_bound(const cJSON *claim)
{
    const cJSON *c = claimstatus_ready(claim);
    if (!cJSON_IsTrue(json_field(json_field(claim, "status"), "passthroughEnabled")))
        return false;
    if (!kube_meta_str(claim, "deletionTimestamp"))
        return json_same(json_str(c, "status"), "True") ||
               (json_same(json_str(c, "status"), "False") &&
                json_same(json_str(c, "reason"), PCIOBJ_REASON_REMOVED));
    /* deleting: bound until its agent lets go. Still Ready=True with our finalizer: the agent
     * has not looked yet (it answers with DeviceInUse, or restores the device and removes the
     * finalizer in one step); DeviceInUse: a VM holds it. */
    if (json_same(json_str(c, "status"), "True"))
        return claimstatus_finalizer_index(claim, PCIOBJ_FINALIZER) >= 0;
    return json_same(json_str(c, "status"), "False") &&
           json_same(json_str(c, "reason"), PCIOBJ_REASON_IN_USE);
}

const char *pciobj_first_driver(const cJSON *dev)
{
    return json_str(json_field(json_field(dev, "metadata"), "annotations"),
                    KUBE_PCIDEVICE_DRIVER_ANNOTATION);
}

bool pciobj_resource(const cJSON *claim, const cJSON *dev, const char *name, char *buf, size_t size)
{
    const char *rn = json_str(json_field(dev, "status"), "resourceName");
    const char *slash = rn ? strchr(rn, '/') : NULL;
    if (!slash)
        return false;
    if (cJSON_IsTrue(json_field(json_field(claim, "spec"), "disableResourcePooling")))
        (void)snprintf(buf, size, "%.*s/%s", (int)(slash - rn), rn, name);
    else
        (void)snprintf(buf, size, "%s", rn);
    return true;
}
