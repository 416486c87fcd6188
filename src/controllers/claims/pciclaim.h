/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/claims/pciclaim.h - the agent's PCIDeviceClaim reconciler: binds claimed devices of
 * this node to vfio-pci and restores their original driver when the claim is deleted.
 *
 * Claims are watched with the field selector spec.nodeName=<node>. A reconcile is
 * level-triggered: from the claim (cache) and what sysfs shows (read on the worker thread) it
 * takes the next step towards "bound" (claim alive) or "restored" (claim deleting):
 *
 *   1. the finalizer devices.harvesterhci.io/restore-driver is added (JSON patch with a test);
 *   2. safety: the device exists, has an IOMMU group, is not host-critical (node/hostuse), and
 *      every other member of its group is claimed too or on vfio-pci (bridges excepted); a
 *      refusal is a Ready=False condition whose message says what to do; a device the node's
 *      health store says is unhealthy (controllers/health/health.h) is refused with reason
 *      DeviceUnhealthy, the health reason and message and the administrator's way back, and
 *      reconciled again on each health_changed (a claim already passthroughEnabled, or being
 *      deleted, is never refused for it); a passthroughEnabled claim whose device is gone (the
 *      store says Removed) says Ready=False DeviceRemoved with the store's message, keeps
 *      passthroughEnabled (pciobj_bound) and binds the device again when it comes back;
 *   3. the original driver is recorded in status.kernelDriverToUnbind before anything changes,
 *      so a crash at any later point knows what to restore;
 *   4. vfio-pci and vfio_iommu_type1 are loaded (libkmod), the device is bound (node/vfio,
 *      on the worker thread) and verified; status passthroughEnabled=true, Ready=True;
 *   5. on delete: if /dev/vfio/<group> is open (a VM holds it), the claim waits with
 *      Ready=False reason DeviceInUse; otherwise the original driver is restored and verified
 *      (vfio-pci when the device was on it before the claim: it stays there, its
 *      driver_override untouched) and the finalizer removed. A device that is gone, or was
 *      never touched, does not hold the deletion.
 *
 * A new claim goes through 1-4 in one reconcile: the checks run first (they only observe), then
 * the finalizer and the record of the driver are written at once, and the bind starts once both
 * writes are acknowledged, from the object the server returned rather than after the watch
 * event.
 *
 * After a reboot or a restart every claim is reconciled again and re-bound from sysfs state.
 * HOSTDEVD_FAULT=<goal>:<step> (bind:set-override, bind:unbind, bind:probe, restore:reset,
 * restore:clear-override, restore:unbind, restore:probe, restore:bind-original,
 * restore:set-override (an unbound device going back to vfio-pci),
 * claim:finalizer, claim:record-driver) aborts the process right after that step: crash tests.
 *
 * The planning functions (pciclaim_*_patch) are pure and unit-tested; the rest logs.
 */
#pragma once

#include "controllers/runtime/part.h"

#include <stdbool.h>
#include <stddef.h>

#include "controllers/binding/bindplan.h"

struct buf;
struct cJSON;
struct ev_loop;
struct kube_http;
struct kube_informer;

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

/* --- pure decisions (unit-tested; no I/O, no logging) ---------------------------------------- */

/* What a reconcile of a cached claim starts with. */
enum pciclaim_step {
    PCICLAIM_NOTHING,       /* another node's claim, or a deleted one without our finalizer */
    PCICLAIM_INVALID,       /* refuse: the spec names no PCI address or not the claim's */
    PCICLAIM_ADD_FINALIZER, /* first our finalizer: the informer brings the claim back */
    PCICLAIM_NODE_WORK,     /* check, bind or restore on the worker thread */
};

/* `claim` is the cached object of `key`; `node` this agent's node. */
enum pciclaim_step pciclaim_next_step(const struct cJSON *claim, const char *key, const char *node);

/* What a reconcile does with an outcome: the status to write (or the finalizer to remove), the
 * Event, the log line and how the key goes on. */
struct pciclaim_decision {
    bool write_status;
    struct pciclaim_status status;
    bool remove_finalizer;
    const char *event_reason; /* NULL: no Event */
    bool warning;             /* a Warning Event and log line, else Normal/info */
    const char *log;          /* the log message, NULL: none */
    const char *result;       /* hostdevd_claim_results_total's result label, NULL: none */
    const char *fault;        /* fault point after the write ("record-driver"), or NULL */
    bool proceed;             /* after the write: go on from the object the server returned,
                                 in the same reconcile (the driver is recorded: bind) */
    bool retry;               /* after the write: again after the key's backoff */
    double requeue_after;     /* > 0: again after this long (a VM holds the device) */
    char message[BINDPLAN_MESSAGE_SIZE + 128]; /* what is said, when it is not the outcome's
                                                  own message (then empty) */
};

/* Whether a reconcile goes on from `written`, the object its write of `key` returned, instead
 * of ending and waiting for the watch event: only when the decision prepared the bind
 * (finalizer added, driver recorded), at most PCICLAIM_MAX_PROCEED times (`proceeded` so far),
 * and when the written claim still calls for node work on `node`. */
#define PCICLAIM_MAX_PROCEED 2
bool pciclaim_proceeds(const struct pciclaim_decision *d, const struct cJSON *written,
                       const char *key, const char *node, int proceeded);
/* A new claim's first phase: the checks run on the worker first (they only observe: pcibind's
 * check_only), then its finalizer and the record of the original driver (or a refusal) are
 * written at once, in one round trip; the bind waits for both. Whether `claim` (cached, without
 * our finalizer) goes that way: it records no driver yet and is not being deleted (the caller
 * also leaves out devices DRA holds). */
bool pciclaim_checks_early(const struct cJSON *claim);
/* A new claim of an unhealthy device is refused: true, with `ret` a BINDPLAN_REFUSED outcome
 * (reason HEALTH_REFUSED, DeviceUnhealthy; controllers/health/health.h health_refusal()'s
 * message: what is known against the device and the way back for PCIDevice `key`), when `s`
 * (the health store's word on the claim's device) is unhealthy and `claim` is not being
 * deleted and not passthroughEnabled (a claim that has its device keeps it, and its release
 * works). False otherwise (ret untouched). */
struct health_state;
bool pciclaim_refuse_unhealthy(const struct cJSON *claim, const struct health_state *s,
                               const char *key, struct bindplan_outcome *ret);
/* A bound claim whose device is gone from the bus: true, with `ret` a BINDPLAN_REFUSED outcome
 * of reason PCIOBJ_REASON_REMOVED (DeviceRemoved; pciclaim_decide keeps passthroughEnabled, so
 * the device stays offered, Unhealthy, and permitted: a VM may still hold it) and the store's
 * message (what happened, what to do), when `s` says Removed and `claim` is passthroughEnabled
 * and not being deleted (its release goes on: a gone device does not hold it). False otherwise
 * (ret untouched). */
bool pciclaim_hold_removed(const struct cJSON *claim, const struct health_state *s,
                           struct bindplan_outcome *ret);
/* A bound claim whose device the bind check did not find (REFUSED DeviceNotFound, or
 * NoIOMMUGroup: a removal takes the device out of its group before it leaves the bus): true, with
 * `ret` the DeviceRemoved outcome of pciclaim_hold_removed and a message of its own (the caller
 * takes the store's when the store says Removed already: the removal's scan and the claim's job
 * race), when `claim` is passthroughEnabled and not being deleted. False otherwise. */
bool pciclaim_lost_device(const struct cJSON *claim, const struct bindplan_outcome *o,
                          struct bindplan_outcome *ret);
/* Of the objects the phase's two writes returned (either may be NULL), the one to go on from:
 * one that calls for node work on `node` and records the driver (the later write shows both),
 * else one that calls for node work, else NULL. */
const struct cJSON *pciclaim_pick_written(const struct cJSON *a, const struct cJSON *b,
                                          const char *key, const char *node);
#define PCICLAIM_BUSY_RETRY 5.0 /* seconds between checks of a group a VM holds */

/* Decides for `claim` (the cached object) and the worker's outcome `o` (BINDPLAN_REFUSED for
 * an invalid claim). An Event and log line come only when the status changes. */
void pciclaim_decide(const struct cJSON *claim, const struct bindplan_outcome *o,
                     struct pciclaim_decision *ret);

/* --- the reconciler (logs) -------------------------------------------------------------------- */

struct metrics;

struct pciclaim;

/* The reconciler of this node's PCIDeviceClaims, made from what the process shares
 * (runtime/manager.h): the claims' cache and this node's PCIDevices (driver-at-first-sight
 * annotation) and USBDevices (the USB-controller check; keys wait for its sync), the node
 * work's env (binding/pcibind.h) and the worker, the device ledger (binding/ledger.h: each
 * claim is recorded there as long as it exists; a claim on a device a DRA ResourceClaim is
 * prepared with is refused with reason AllocatedByDRA). NULL on failure. */
struct pciclaim *pciclaim_new(const struct part_env *env);

/* The part (controllers/runtime/part.h): start, stop, drain and free, as its own; `self` is
 * what pciclaim_new returned. Every claim is reconciled again after a PCI scan (a driver may
 * have changed under us), a USBDevice's change (a controller's devices) and a DRA release. */
extern const struct part_ops pciclaim_part;
