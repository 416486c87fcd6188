/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/pciclaim.h - the agent's PCIDeviceClaim reconciler: binds claimed devices of this
 * node to vfio-pci and restores their original driver when the claim is deleted.
 *
 * Claims are watched with the field selector spec.nodeName=<node>. A reconcile is
 * level-triggered: from the claim (cache) and what sysfs shows (read on the worker thread) it
 * takes the next step towards "bound" (claim alive) or "restored" (claim deleting):
 *
 *   1. the finalizer devices.harvesterhci.io/restore-driver is added (JSON patch with a test);
 *   2. safety: the device exists, has an IOMMU group, is not host-critical (node/hostuse), and
 *      every other member of its group is claimed too or on vfio-pci (bridges excepted); a
 *      refusal is a Ready=False condition whose message says what to do;
 *   3. the original driver is recorded in status.kernelDriverToUnbind before anything changes,
 *      so a crash at any later point knows what to restore;
 *   4. vfio-pci and vfio_iommu_type1 are loaded (libkmod), the device is bound (node/vfio,
 *      on the worker thread) and verified; status passthroughEnabled=true, Ready=True;
 *   5. on delete: if /dev/vfio/<group> is open (a VM holds it), the claim waits with
 *      Ready=False reason DeviceInUse; otherwise the original driver is restored and verified
 *      and the finalizer removed. A device that is gone, or was never touched, does not hold
 *      the deletion.
 *
 * After a reboot or a restart every claim is reconciled again and re-bound from sysfs state.
 * HOSTDEVD_FAULT=<goal>:<step> (bind:set-override, bind:unbind, bind:probe,
 * restore:clear-override, restore:unbind, restore:probe, restore:bind-original,
 * claim:finalizer, claim:record-driver) aborts the process right after that step: crash tests.
 *
 * The planning functions (pciclaim_*_patch) are pure and unit-tested; the rest logs.
 */
#pragma once

#include <stdbool.h>

struct buf;
struct cJSON;
struct ev_loop;
struct kube_http;
struct kube_informer;

#define PCICLAIM_FINALIZER "devices.harvesterhci.io/restore-driver"

/* What a claim's status should say. */
struct pciclaim_status {
    const char *driver;  /* kernelDriverToUnbind to record, or NULL to leave it as it is */
    bool passthrough;    /* passthroughEnabled */
    bool ready;          /* the Ready condition's status */
    const char *reason;  /* its reason (CamelCase) */
    const char *message; /* its message */
};

/* A merge patch for the /status subresource that makes `claim` say `want`, or NULL when it
 * already does (nothing to write). lastTransitionTime stays when Ready's status does not
 * change; `now` is RFC 3339. The caller frees the result. */
char *pciclaim_status_patch(const struct cJSON *claim, const struct pciclaim_status *want,
                            const char *now);

/* A JSON patch adding (add) or removing (!add) our finalizer, with a test so that a concurrent
 * change of the list fails instead of clobbering it; NULL when there is nothing to do. */
char *pciclaim_finalizer_patch(const struct cJSON *claim, bool add);

/* Whether status.kernelDriverToUnbind is present (even ""): the original driver is recorded. */
bool pciclaim_driver_recorded(const struct cJSON *claim, const char **ret_driver);

struct pciclaim_config {
    struct ev_loop *loop;
    struct kube_http *http;
    const char *node_name;
    const char *sysfs_root;        /* "/sys" */
    const char *dev_root;          /* "/dev": /dev/vfio/<group> */
    const char *proc_root;         /* "/proc": mounts, swaps, routes for the host-critical check */
    struct kube_informer *devices; /* this node's PCIDevices (driver-at-first-sight annotation) */
};

struct pciclaim;

struct pciclaim *pciclaim_new(const struct pciclaim_config *cfg);
int pciclaim_start(struct pciclaim *c);
/* Reconciles every claim again (after a rescan: a driver may have changed under us). */
void pciclaim_enqueue_all(struct pciclaim *c);
bool pciclaim_has_synced(const struct pciclaim *c);
/* Work in flight (API writes, worker jobs); the agent waits for 0 before it exits. */
int pciclaim_in_flight(const struct pciclaim *c);
void pciclaim_stop(struct pciclaim *c);
void pciclaim_write_metrics(const struct pciclaim *c, struct buf *out);
struct pciclaim *pciclaim_free(struct pciclaim *c);
