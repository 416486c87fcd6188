/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/kubevirt/kubevirt.h - the controller's KubeVirt reconciler: keeps the KubeVirt CR's
 * spec.configuration.permittedHostDevices exactly what the Ready claims and the configured
 * mediated device instances (VGPUDevices) of the cluster need
 * (controllers/kubevirt/permitted.h decides the write), on the shared runner. The CR is found by
 * watching kubevirts.kubevirt.io in all namespaces (exactly one is expected; zero or several are
 * reported and nothing is written), or named by the configuration. Any change of the claims, their
 * devices or the CR (someone dropping our entries) queues it again. Writes are merge patches with
 * the resourceVersion: a conflict is retried after the runner's backoff from the new version.
 * Without KubeVirt's HostDevices feature gate, a log line and one Warning Event
 * (HostDevicesFeatureGateDisabled) on each Ready claim say that VMs cannot use the device; the
 * gate is never edited. Keys are handed out only while `can_write` says so (the leader). Logs.
 */
#pragma once

#include "controllers/runtime/part.h"

#include <stdbool.h>
#include <stddef.h>

struct buf;
struct cJSON;
struct ev_loop;
struct kube_http;
struct caches;
struct kube_informer;
struct kube_recorder;
struct metrics;
struct kvpermit;
struct permitted_entry;

struct kvpermit_config {
    struct part_env env;  /* loop, API client, metrics, node and its paths (runtime/part.h) */
    const char *kubevirt; /* "namespace/name", or NULL: the only one there is */
    struct kube_recorder *events; /* a Warning on each Ready claim while the gate is off */
};

/* The permittedHostDevices entry a PCIDeviceClaim named `key` needs, from the claim and its
 * PCIDevice `dev` (NULL when there is none): true with `*ret` filled when the claim is bound
 * (Ready, passthroughEnabled, not deleting) and the device has vendorId, deviceId and a
 * resourceName that is a valid extended resource name (anything else, a comma say, would break
 * the comma-separated ownership list and make every plan write); false otherwise. Pure. */
bool kvpermit_pci_entry(const struct cJSON *claim, const struct cJSON *dev, const char *key,
                        struct permitted_entry *ret);
/* The same for a USBDeviceClaim that holds its USBDevice `dev` (vendorID, productID,
 * resourceName). Pure. */
bool kvpermit_usb_entry(const struct cJSON *claim, const struct cJSON *dev,
                        struct permitted_entry *ret);

/* The mediatedDevices entry a VGPUDevice `vgpu` needs: true with `*ret` filled while its instance
 * is offered (controllers/objects/mdevobj.h mdevobj_offered: configured, with a UUID and a
 * status.resourceName that is a valid extended resource name), the selector being KubeVirt's
 * name of its type (status.configureVGPUTypeName's entry in status.mdevTypes: its name with
 * spaces as '_', else the id; permitted_mdev_selector). Pure. */
bool kvpermit_mdev_entry(const struct cJSON *vgpu, struct permitted_entry *ret);

/* Whether the KubeVirt CR `key` ("namespace/name") is the one to manage: the one `configured`
 * names, or with none configured (NULL), the only one of the `count` there are (two or more: none
 * of them, whichever comes first). Pure. */
bool kvpermit_manages(const char *configured, const char *key, size_t count);

/* The entries are computed from the process's caches of our claims, of the devices they name
 * (only those: objects/kinds.h kind_claimed_pcidevices; a PCIDevice is read for its
 * status.vendorId, deviceId and resourceName, a USBDevice for status.vendorID, productID and
 * resourceName) and of VGPUDevices (cluster-wide), and the
 * CR looked at again after each of their events and when this replica starts to lead; keys are
 * handed out only while it leads (runtime/leasepart.h). */
struct kvpermit *kvpermit_new(const struct kvpermit_config *cfg);

/* The part (controllers/runtime/part.h): start, stop, drain and free, as its own; `self` is
 * what kvpermit_new returned. */
extern const struct part_ops kvpermit_part;
