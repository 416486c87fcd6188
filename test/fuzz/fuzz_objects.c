/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/fuzz/fuzz_objects.c - device objects and the KubeVirt CR as the API server could send
 * them, through the pure write plans (controllers/devices/pcidevice.c, usbdevice.c, devwrite.c) and
 * permittedHostDevices (controllers/kubevirt/kubevirt.c's entries, permitted.c's plan), on
 * arbitrary bytes.
 *
 * Input: parts separated by the byte 0x1e: a PCIDevice, a USBDevice, a PCIDeviceClaim, a
 * USBDeviceClaim and a KubeVirt CR (JSON, parsed as the informer does), then fact bytes. What
 * the agent wants to publish is made from the objects' own status fields and the fact bytes.
 * Checks: every patch is JSON; once a plan's patches are applied (JSON merge patches, as the API
 * server does) the same plan writes nothing: no device write for ever on an idle node, no
 * KubeVirt CR write for ever in an idle cluster; an orphaned device stays orphaned.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controllers/devices/pcidevice.h"
#include "controllers/devices/usbdevice.h"
#include "controllers/kubevirt/kubevirt.h"
#include "controllers/kubevirt/permitted.h"
#include "controllers/objects/usbobj.h"
#include "fuzzjson.h"
#include "kube/client.h"
#include "node/blockers.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NODE_UID "5b0f3f0e-7d2a-4c1e-9a51-0c2b8f6d1e11"

static uint8_t fact(const struct fuzz_parts *p, size_t i)
{
    return i < p->n[5] ? p->p[5][i] : 0;
}

/* status.<name> of `o` copied into `buf` (size bytes), "" when absent. */
static void copy_status(const cJSON *o, const char *name, char *buf, size_t size)
{
    const char *s = cJSON_GetStringValue(
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "status"), name));
    (void)snprintf(buf, size, "%s", s ? s : "");
}

#define COPY(o, name, field) copy_status(o, name, field, sizeof(field))

static void pci_want(const struct fuzz_parts *p, const cJSON *have, struct pcidevice_spec *s,
                     struct node_blocker *blockers)
{
    *s = (struct pcidevice_spec){.numa_node = (int)fact(p, 0) - 2,
                                 .sriov_totalvfs = (int)fact(p, 1) - 2,
                                 .sriov_numvfs = (int)fact(p, 2) - 2};
    const char *name = kube_meta_str(have, "name");
    (void)snprintf(s->name, sizeof(s->name), "%s", name ? name : "titan-000001000");
    (void)snprintf(s->node, sizeof(s->node), "%s", fact(p, 3) & 1 ? "rhea" : "titan");
    COPY(have, "address", s->address);
    COPY(have, "vendorId", s->vendor_id);
    COPY(have, "deviceId", s->device_id);
    COPY(have, "classId", s->class_id);
    COPY(have, "iommuGroup", s->iommu_group);
    COPY(have, "resourceName", s->resource_name);
    COPY(have, "description", s->description);
    COPY(have, "kernelDriverInUse", s->driver);
    (void)snprintf(s->revision, sizeof(s->revision), "%s", fact(p, 3) & 2 ? "a1" : "");
    (void)snprintf(s->physfn, sizeof(s->physfn), "%s", fact(p, 3) & 4 ? "0000:3b:00.0" : "");
    s->n_blockers = fact(p, 4) % 3;
    for (int i = 0; i < s->n_blockers; i++) {
        blockers[i] = (struct node_blocker){0};
        (void)snprintf(blockers[i].reason, sizeof(blockers[i].reason), "%s",
                       i ? "HostNetwork" : "IOMMUGroupShared");
        COPY(have, "description", blockers[i].message);
    }
    s->blockers = blockers;
}

static void pci_device(const struct fuzz_parts *p, const cJSON *have)
{
    struct node_blocker blockers[2];
    struct pcidevice_spec want;
    struct pcidevice_plan plan, again;
    pci_want(p, have, &want, blockers);
    if (pcidevice_plan(NULL, have, NODE_UID, &plan) < 0 || !plan.delete)
        abort();
    pcidevice_plan_done(&plan);
    if (pcidevice_plan(&want, have, NODE_UID, &plan) < 0)
        return;
    cJSON *written = cJSON_Duplicate(have, 1);
    if (plan.meta_patch) {
        cJSON *w = fuzz_apply(written, plan.meta_patch);
        cJSON_Delete(written);
        written = w;
    }
    if (plan.status_patch) {
        cJSON *w = fuzz_apply(written, plan.status_patch);
        cJSON_Delete(written);
        written = w;
    }
    if (pcidevice_plan(&want, written, NODE_UID, &again) < 0 || !pcidevice_plan_empty(&again))
        abort(); /* the writes do not make the device say what was wanted */
    pcidevice_plan_done(&again);
    pcidevice_plan_done(&plan);
    cJSON_Delete(written);
}

static void usb_want(const struct fuzz_parts *p, const cJSON *have, struct usbdevice_spec *s)
{
    *s = (struct usbdevice_spec){.busnum = fact(p, 5), .devnum = fact(p, 6)};
    const char *name = kube_meta_str(have, "name");
    (void)snprintf(s->name, sizeof(s->name), "%s", name ? name : "titan-0951-1666-2-1-4");
    (void)snprintf(s->node, sizeof(s->node), "%s", fact(p, 3) & 1 ? "rhea" : "titan");
    COPY(have, "portPath", s->port_path);
    COPY(have, "vendorID", s->vendor_id);
    COPY(have, "productID", s->product_id);
    COPY(have, "devicePath", s->dev_path);
    COPY(have, "pciAddress", s->pci_address);
    COPY(have, "resourceName", s->resource_name);
    COPY(have, "description", s->description);
    COPY(have, "classType", s->class_type);
    COPY(have, "serial", s->serial);
    (void)snprintf(s->speed, sizeof(s->speed), "%s", fact(p, 3) & 8 ? "480" : "");
}

/* Plans, applies the plan's patches, plans again: nothing more to write. */
static void usb_converges(const struct usbdevice_spec *want, const cJSON *have, const cJSON *claim,
                          const struct usbdevice_gone *gone)
{
    struct usbdevice_plan plan, again;
    if (usbdevice_plan(want, have, claim, gone, "titan", NODE_UID, &plan) < 0)
        return;
    cJSON *written = cJSON_Duplicate(have, 1);
    char *patches[] = {plan.meta_patch, plan.status_patch};
    for (size_t i = 0; i < 2; i++) {
        if (!patches[i])
            continue;
        cJSON *w = fuzz_apply(written, patches[i]);
        cJSON_Delete(written);
        written = w;
    }
    if (usbdevice_plan(want, written, claim, gone, "titan", NODE_UID, &again) < 0 ||
        again.meta_patch || again.status_patch || again.create != plan.create ||
        again.delete != plan.delete)
        abort(); /* the writes do not make the device say what was wanted */
    if (!want && plan.orphan && !usbobj_device_orphaned(written))
        abort();
    usbdevice_plan_done(&again);
    usbdevice_plan_done(&plan);
    cJSON_Delete(written);
}

static void usb_device(const struct fuzz_parts *p, const cJSON *have, const cJSON *claim)
{
    struct usbdevice_spec want;
    struct usbdevice_gone gone = {.controller_passed_through = fact(p, 3) & 16};
    usb_want(p, have, &want);
    usb_converges(&want, have, claim, NULL);
    usb_converges(NULL, have, claim, &gone);
}

static void permitted(const struct fuzz_parts *p, cJSON *const *o)
{
    struct permitted_want w = {0};
    struct permitted_entry e;
    const char *key = kube_meta_str(o[2], "name");
    if (kvpermit_pci_entry(o[2], o[0], key ? key : "", &e))
        (void)permitted_want_add(&w, &e);
    if (kvpermit_usb_entry(o[3], o[1], &e))
        (void)permitted_want_add(&w, &e);
    if (fact(p, 7) & 1) {
        e = (struct permitted_entry){.resource = "intel.com/82574L_GIGABIT_NETWORK_CONNECTION",
                                     .vendor = "8086",
                                     .product = "10d3"};
        (void)permitted_want_add(&w, &e);
    }
    (void)permitted_gate_enabled(o[4]);
    struct permitted_result res, again;
    if (permitted_plan(o[4], &w, &res) == 0 && res.patch) {
        cJSON *written = fuzz_apply(o[4], res.patch);
        if (permitted_plan(written, &w, &again) < 0 || again.patch)
            abort(); /* the write does not make the CR say what was wanted */
        cJSON_Delete(written);
        free(res.patch);
    }
    permitted_want_done(&w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_parts p;
    cJSON *o[5];
    if (size > (1 << 20))
        return 0;
    fuzz_split(data, size, &p);
    for (size_t i = 0; i < 5; i++)
        o[i] = fuzz_object(&p, i);
    if (o[0])
        pci_device(&p, o[0]);
    if (o[1])
        usb_device(&p, o[1], o[3]);
    if (o[4])
        permitted(&p, o);
    for (size_t i = 0; i < 5; i++)
        cJSON_Delete(o[i]);
    return 0;
}
