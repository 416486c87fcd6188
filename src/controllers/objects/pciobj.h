/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/objects/pciobj.h - facts about our PCI custom resources (PCIDeviceClaim,
 * PCIDevice) that more than one reconciler reads, each in one place: the claim's finalizer and
 * address, the original driver a claim recorded, whether a claim is bound, the PCIDevice's driver
 * at first sight, and the resource a bound claim offers its device under. Pure: no I/O, no logging;
 * unit-tested.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct cJSON;

/* The PCIDeviceClaim's finalizer: its agent restores the original driver before it goes. */
#define PCIOBJ_FINALIZER "devices.harvesterhci.io/restore-driver"
/* The Ready=False reason of a deleted claim whose device a VM still holds. */
#define PCIOBJ_REASON_IN_USE "DeviceInUse"
/* The Ready=False reason of a bound claim whose device is gone from the bus (the node's health
 * store says Removed): passthroughEnabled stays true, as what used the device may still hold it. */
#define PCIOBJ_REASON_REMOVED "DeviceRemoved"

/* The PCI address a PCIDeviceClaim claims (spec.address), or NULL. */
const char *pciobj_address(const struct cJSON *claim);

/* Whether status.kernelDriverToUnbind is present (even ""): the original driver is recorded
 * (then in `*ret_driver`, borrowed from `claim`, when `ret_driver` is not NULL). */
bool pciobj_driver_recorded(const struct cJSON *claim, const char **ret_driver);

/* Whether a PCIDeviceClaim's device is bound for a VM: passthroughEnabled and Ready=True (bound
 * and verified by its agent), or Ready=False reason DeviceRemoved (the device is gone while the
 * claim holds it: a VM may still have it; the device plugin offers it Unhealthy and KubeVirt's
 * permittedHostDevices keeps its entry); once deleted, until its agent lets go: Ready=True with our
 * finalizer still on it (the agent has not answered the deletion yet: the device is still on
 * vfio-pci, and a VM may hold it) or Ready=False reason DeviceInUse (a VM holds it: it stays on
 * vfio-pci until the VM lets go). The agent's release restores the driver and removes the
 * finalizer in one step, so the device goes when that is done. What the device plugins offer
 * and KubeVirt permits: a running VM's device is not withdrawn from under it, not even for the
 * moment between the deletion and the agent's DeviceInUse. */
bool pciobj_bound(const struct cJSON *claim);

/* The PCIDevice's driver at first sight (its annotation), or NULL when it has none. */
const char *pciobj_first_driver(const struct cJSON *dev);

/* The resource a bound PCIDeviceClaim `claim` (named `name`) offers its device under: its
 * PCIDevice `dev`'s status.resourceName, or "<vendor domain>/<PCIDevice name>" when the claim
 * says spec.disableResourcePooling. Returns false when the device has no resource name. */
bool pciobj_resource(const struct cJSON *claim, const struct cJSON *dev, const char *name,
                     char *buf, size_t size);
