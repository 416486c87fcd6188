/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/dra/draslices.h - the agent's DRA ResourceSlices (resource.k8s.io/v1): what this
 * node's pool should hold and the fewest writes that get it there (pure: no I/O, no logging,
 * unit-tested), and the reconciler that carries them out on the runner
 * (controllers/runtime/runner.h).
 *
 * Driver DRASLICES_DRIVER, one pool per node named like the node, slices `<node>-vfio-pci-<i>`
 * (spec.nodeName = node, DRASLICES_MAX_DEVICES devices each, ownerReference to the Node). A
 * device is a PCI function of the last scan with no passthrough blocker that no PCIDeviceClaim
 * holds and that is no parent of mediated device instances: a claimed device (or a parent with
 * instances) leaves the pool and comes back when its claim (its last instance) is gone. Device name
 * `pci-<address with ':' and '.' as '-'>`; attributes (docs/dra.md):
 *   resource.kubernetes.io/pciBusID   string  "0000:65:00.0"
 *   resource.kubernetes.io/pcieRoot   string  "pci0000:64" (left out when unknown)
 *   resource.kubernetes.io/numaNode   int     (left out when sysfs says -1)
 *   vendorID, deviceID                string  4 hex digits, as the PCIDevice's vendorId/deviceId
 *   classID                           string  4 hex digits (class and subclass, "0200"), as
 *                                             the PCIDevice's classId
 *   iommuGroup                        int     (left out when the device has none)
 *   driver                            string  the kernel driver now, "" when none
 *   description                       string  the PCIDevice's, cut to 64 bytes (the API limit)
 * After them, the mediated device instances of this node that exist (a VGPUDevice whose
 * objects/mdevobj.h mdevobj_offered() says so, with an IOMMU group), in UUID order: device
 * `mdev-<uuid>`, attributes
 *   dra.kubevirt.io/mdevUUID, mdevUUID string  the UUID (the second is the key KubeVirt v1.9.0's
 *                                             virt-launcher reads from the metadata file)
 *   mdevType, mdevTypeName            string  the type id ("mtty-2") and its name (cut to 64)
 *   mdevParent                        string  the parent ("mtty", "0000:00:02.0")
 *   iommuGroup                        int     the instance's own group
 *   vendorID, deviceID, classID, driver, serialNumber, physicalSlot, description: "" (so a
 *                                             selector on them meets no missing attribute)
 *
 * An unhealthy device (controllers/health/health.h: a PCI function, or an instance of an
 * unhealthy PCI parent) stays in the pool with a taint (resource.k8s.io/v1
 * spec.devices[].taints[], KEP-5055): {key DRASLICES_TAINT_KEY, value its health reason
 * ("ResetFailed"), effect the agent's --unhealthy-taint-effect (DRASLICES_TAINT_EFFECT,
 * NoSchedule, by default; NoExecute where the administrator asks: kube-controller-manager's
 * device-taint-eviction-controller then deletes the pods whose claims have the device and do
 * not tolerate it), timeAdded when it was found (kept as the cached slice has it for the same
 * key, value and effect)}: the scheduler allocates it to no claim that does not tolerate the
 * taint. Only the driver writes its slices: taints an administrator adds go in a
 * DeviceTaintRule, which the scheduler and the eviction controller add to the slice's on their
 * side (the agent neither reads nor writes those). When any device
 * of the pool is tainted, the pool is cut in slices of DRASLICES_MAX_TAINTED (the API's limit for
 * a slice with taints) instead of DRASLICES_MAX_DEVICES. A health_changed queues the pool.
 *
 * spec.pool.generation: the generation of the cached slices while the pool's content (devices,
 * attributes, slice count) is unchanged; the highest cached generation + 1 when it changes,
 * on every slice of the pool (consumers ignore slices of an older generation).
 *
 * The reconciler has one key, the pool (the node's name): a generation is a fact of the whole
 * pool and a device may move from one slice to the next, so the slices are planned together.
 * Its informer caches this node's slices of our driver (field selectors spec.nodeName and
 * spec.driver); an event of any of them queues the pool. It reads the PCI scan
 * (controllers/devices/pcidevice.h), the PCIDeviceClaim and VGPUDevice caches, and starts once
 * they are all there.
 */
#pragma once

#include "controllers/runtime/part.h"

#include <stdbool.h>
#include <stddef.h>

#define DRASLICES_DRIVER       "vfio-pci.hostdevd.io"
#define DRASLICES_MAX_DEVICES  128 /* per slice: the API's limit */
#define DRASLICES_MAX_TAINTED  64  /* per slice when a device of the pool has taints (the API's) */
#define DRASLICES_TAINT_KEY    "hostdevd.io/unhealthy"
#define DRASLICES_TAINT_EFFECT "NoSchedule"
#define DRASLICES_STRING_MAX   64 /* bytes of a string attribute: the API's limit */

struct cJSON;
struct devobjs;
struct map;
struct pcidevice_spec;

/* "pci-0000-65-00-0" for "0000:65:00.0". Returns 0, or -EINVAL when it is no DNS label. */
int draslices_device_name(const char *address, char *buf, size_t size);

/* The device entry of a slice for `s` ({"name", "attributes"}). NULL on OOM or a bad address. */
struct cJSON *draslices_device(const struct pcidevice_spec *s);

#define DRASLICES_KUBEVIRT_MDEV_UUID "dra.kubevirt.io/mdevUUID"

/* One mediated device instance of the pool (strings borrowed). */
struct draslices_mdev {
    const char *uuid, *type, *type_name, *parent;
    int iommu_group;
};

/* "mdev-<uuid>". Returns 0, or -EINVAL when it is no DNS label (not a lower-case UUID). */
int draslices_mdev_name(const char *uuid, char *buf, size_t size);
/* The instance a VGPUDevice `vgpu` of node `node` says exists (mdevobj_offered, with a type):
 * true with `*ret` filled (strings borrowed from `vgpu`), false otherwise. */
bool draslices_mdev_of(const struct cJSON *vgpu, const char *node, struct draslices_mdev *ret);
/* The device entry of instance `m`. NULL on OOM, a bad UUID, no type or no group. */
struct cJSON *draslices_mdev_device(const struct draslices_mdev *m);

struct draslices_input {
    const char *node;                   /* the pool, and spec.nodeName */
    const char *node_uid;               /* NULL while unknown: no ownerReference */
    const struct map *devices;          /* name -> struct pcidevice_spec: the last scan */
    const struct map *claimed;          /* set of PCI addresses a PCIDeviceClaim holds, or mdev
                                           instances use (their parents) */
    const struct map *unhealthy;        /* PCI address -> const struct health_state *: the
                                           unhealthy devices (health/health.h), or NULL */
    const char *taint_effect;           /* their taint's: "NoSchedule", "NoExecute"; NULL:
                                           DRASLICES_TAINT_EFFECT */
    const struct draslices_mdev *mdevs; /* the instances of this node, in UUID order */
    size_t n_mdevs;
    const struct cJSON *const *slices; /* the cached slices of the pool */
    size_t n_slices;
};

enum draslices_verb { DRASLICES_CREATE, DRASLICES_PATCH, DRASLICES_DELETE };

struct draslices_write {
    enum draslices_verb verb;
    char name[254];
    char uid[64];       /* DELETE: the precondition */
    struct cJSON *body; /* CREATE: the object; PATCH: a merge patch with the resourceVersion */
};

struct draslices_plan {
    struct draslices_write *writes; /* deletes first, then creates and patches by index */
    size_t n;
    long long generation; /* of the pool after the plan */
    size_t devices;       /* in the pool after the plan */
};

/* Plans the writes that make the cached slices the wanted ones. Returns 0 (an empty plan,
 * n == 0, means converged) or -ENOMEM. Free with draslices_plan_done(). */
int draslices_plan(const struct draslices_input *in, struct draslices_plan *ret);
void draslices_plan_done(struct draslices_plan *p);

/* --- the reconciler (logs; runs on the loop) ------------------------------------------------ */

struct buf;
struct ev_loop;
struct kube_http;
struct kube_informer;
struct metrics;
struct nodeuid;
struct draslices;

struct draslices_config {
    struct part_env env;        /* loop, API client, metrics, node and its paths (runtime/part.h) */
    const struct nodeuid *node; /* the Node's uid, for the ownerReference */
    const struct devobjs *devices; /* the last PCI scan */
    struct kube_informer *claims;  /* this node's PCIDeviceClaims */
    struct kube_informer *vgpus;   /* this node's VGPUDevices (the mdev instances) */
    /* the process makes it with its nodeuid and pcidevices parts and its claims' cache */
};

struct draslices *draslices_new(const struct draslices_config *cfg);
/* Queues the pool (a scan, a claim or the Node's uid changed: the part watches them). */
void draslices_sync(struct draslices *s);

/* The part (controllers/runtime/part.h): start, stop, drain and free, as its own; `self` is
 * what draslices_new returned. */
extern const struct part_ops draslices_part;
