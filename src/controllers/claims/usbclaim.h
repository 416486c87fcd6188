/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/claims/usbclaim.h - the agent's USBDeviceClaim reconciler: enables a claimed USB
 * device of this node for passthrough and releases it when the claim is deleted.
 *
 * Which claims: a USBDeviceClaim names no node (harvester's has no spec.nodeName); it is named
 * like its USBDevice, "<node>-<vid>-<pid>-<port path>", so its name says its node. Every agent
 * watches all USBDeviceClaims (one per claimed USB device in the cluster: few) and acts only on
 * those whose name says its node (kube_names_usbdevice_node(), the rule the admission policy
 * hostdevd-agent-claims applies to the agent's writes). docs/api.md explains the choice.
 *
 * A reconcile is level-triggered, from the caches (the claim, the USBDevice of the same name,
 * this node's PCIDeviceClaims and PCIDevices) and one stat() of the device node:
 *   1. the finalizer devices.harvesterhci.io/release-usb is added;
 *   2. the checks: a USBDevice of that name exists on this node and is plugged in (not
 *      orphaned), its host controller is not claimed for PCI passthrough nor on vfio-pci (the
 *      device would go with the controller; first come, first served: a claim that holds its
 *      device keeps it, and the PCIDeviceClaim is refused instead), and its device node exists
 *      in the agent's /dev;
 *      a refusal is Ready=False with a reason and a message that says what to do;
 *   3. Ready=True (reason Enabled), status.nodeName and status.pciAddress copied from the
 *      device; the USBDevice reconciler then sets the device's enabled=true;
 *   4. a device unplugged while claimed stays claimed: Ready=False reason DeviceUnplugged until
 *      it is back in its port;
 *   5. on delete: while a program has the device node open (a VM's VMM: QEMU's usb-host
 *      opens it, detaches the kernel's drivers and claims the interfaces through usbfs once
 *      the guest configures the device; either sign counts), the claim keeps the device:
 *      Ready=False reason DeviceInUse naming the program (node/holder.h), the device
 *      stays enabled, offered by the device plugin and permitted in KubeVirt's CR, and the
 *      agent looks again every USBCLAIM_BUSY_RETRY seconds (no API write while nothing
 *      changes), as a PCIDeviceClaim waits for /dev/vfio/<group>. Once nothing uses it, the
 *      claim says Releasing; the USBDevice reconciler sets enabled=false; once the device says
 *      so (or is gone) the finalizer is removed. Only this node's agent removes it.
 *
 * The decisions (usbobj_claim_holds, usbclaim_next_step, usbclaim_check, usbclaim_let_go,
 * usbclaim_status_patch) are pure and unit-tested; the reconciler logs.
 */
#pragma once

#include "controllers/runtime/part.h"

#include <stdbool.h>

#include "controllers/objects/usbobj.h"

struct buf;
struct cJSON;
struct ev_loop;
struct kube_http;
struct kube_informer;
struct metrics;

enum usbclaim_step {
    USBCLAIM_NOTHING,       /* another node's claim, a deleted one without our finalizer, or a
                               deleted one whose device is still enabled (wait for the device) */
    USBCLAIM_ADD_FINALIZER, /* first our finalizer: the informer brings the claim back */
    USBCLAIM_CHECK,         /* check and write the status */
    USBCLAIM_LET_GO,        /* deleted while it holds the device: in use (wait) or Releasing */
    USBCLAIM_RELEASE,       /* deleted and the device is no longer enabled: remove the finalizer */
};

#define USBCLAIM_BUSY_RETRY 5.0 /* seconds between looks at a device a VM has, once deleted */

/* `claim` is the cached object of `key`, `device` the cached USBDevice of the same name (or
 * NULL), `node` this agent's node. */
enum usbclaim_step usbclaim_next_step(const struct cJSON *claim, const char *key,
                                      const struct cJSON *device, const char *node);

/* What the agent knows about a claim's device, for the checks. */
struct usbclaim_facts {
    const char *node;
    const struct cJSON *device;   /* the cached USBDevice, NULL when there is none */
    bool holds;                   /* the claim holds the device already (usbobj_claim_holds) */
    const char *controller_claim; /* a live PCIDeviceClaim of the device's controller, or NULL */
    bool controller_on_vfio;      /* the controller's PCIDevice is on vfio-pci */
    int devnode;                  /* 0: the device node exists; -errno: it does not */
    const char *dev_root;         /* where the agent looked ("/dev"), for the message */
};

struct usbclaim_outcome {
    bool ready;
    const char *reason;
    char message[USBOBJ_MESSAGE_SIZE];
    char pci_address[20]; /* copied from the device, "" when unknown */
};

/* The checks in order (device known, plugged in, controller not passed through, device node
 * present); Ready with reason Enabled when all pass. */
void usbclaim_check(const struct usbclaim_facts *f, const char *name, struct usbclaim_outcome *ret);

/* What the agent knows about a deleted claim's device. */
struct usbclaim_letgo_facts {
    const char *device_path; /* "/dev/bus/usb/001/004", NULL when the device is unknown */
    int claimed;             /* interfaces bound to usbfs (node_usb_interfaces_bound), or -errno
                                (the device is gone: nothing can use it) */
    const char *holder;      /* who has the node open, "qemu-system-x86 (pid 412)", or NULL */
    const char *pci_address; /* the device's host controller, NULL when unknown */
};

/* A deleted claim: Ready=False reason DeviceInUse while a program holds the device node or
 * claims an interface (the message names the holder and says what lets it go), Releasing once
 * nothing does. */
void usbclaim_let_go(const struct usbclaim_letgo_facts *f, struct usbclaim_outcome *ret);

/* A merge patch for /status that makes `claim` say `o` (nodeName, pciAddress, the Ready
 * condition), or NULL when it already does. lastTransitionTime stays when Ready's status does
 * not change; `now` is RFC 3339. The caller frees the result. */
char *usbclaim_status_patch(const struct cJSON *claim, const char *node,
                            const struct usbclaim_outcome *o, const char *now);

/* A JSON patch adding (add) or removing (!add) our finalizer (with a test), or NULL when there
 * is nothing to do. */
char *usbclaim_finalizer_patch(const struct cJSON *claim, bool add);

/* --- the reconciler (logs) -------------------------------------------------------------------- */

struct runner;
struct usbclaim;

/* The reconciler of USBDeviceClaims (every one of the cluster: named after a device) for this
 * node's devices. The checks read the process's caches (runtime/manager.h): this node's
 * USBDevices, PCIDeviceClaims and PCIDevices. Keys are handed out once all have synced and the
 * USBDevice reconciler (the process's usbdevices part) has converged once: its objects written
 * (a restart must not judge claims by a stale inventory). NULL on failure. */
struct usbclaim *usbclaim_new(const struct part_env *env);

/* The part (controllers/runtime/part.h): start, stop, drain and free, as its own; `self` is
 * what usbclaim_new returned. */
extern const struct part_ops usbclaim_part;
