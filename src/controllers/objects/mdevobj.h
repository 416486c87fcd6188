/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/objects/mdevobj.h - facts about VGPUDevice objects (one mediated device instance
 * of a node, or a free slot where one can be made), pure: what the spec asks, what the status
 * says exists, the names the agent gives objects and labels, the resource an instance is offered
 * under, and the Ready reasons. Read by the agent's mdev reconciler and by the consumers (device
 * plugin, DRA, the controller's permittedHostDevices). No I/O, no logging.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "node/mdev.h"

struct cJSON;

/* The finalizer an enabled object carries: its agent removes the instance before it goes. */
#define MDEVOBJ_FINALIZER "devices.harvesterhci.io/mdev"
/* The label naming the parent (mdevobj_parent_label()); nodename=<node> as every kind. */
#define MDEVOBJ_PARENT_LABEL "devices.harvesterhci.io/mdev-parent"
/* status.vGPUStatus when the instance exists (harvester's value; "" otherwise). */
#define MDEVOBJ_CONFIGURED "vGPUConfigured"
/* The domain of the resource names instances are offered under. */
#define MDEVOBJ_RESOURCE_DOMAIN "devices.harvesterhci.io"

/* Reasons of the Ready condition. */
#define MDEVOBJ_CREATED        "Created"       /* True: the instance exists */
#define MDEVOBJ_AVAILABLE      "Available"     /* True: a free slot */
#define MDEVOBJ_TYPE_UNKNOWN   "TypeUnknown"   /* the parent has no such type */
#define MDEVOBJ_NO_CAPACITY    "NoCapacity"    /* the parent cannot make one more of it */
#define MDEVOBJ_PARENT_MISSING "ParentMissing" /* the parent is not on the node */
#define MDEVOBJ_PARENT_CLAIMED "ParentClaimed" /* a PCIDeviceClaim passes the parent through */
#define MDEVOBJ_IN_USE         "DeviceInUse"   /* a process holds it: removal waits */
#define MDEVOBJ_CREATE_FAILED  "CreateFailed"  /* the kernel refused to create it */
#define MDEVOBJ_REMOVE_FAILED  "RemoveFailed"  /* the kernel refused to remove it */
#define MDEVOBJ_INVALID_SPEC   "InvalidSpec"   /* the spec cannot be acted on */

/* What an object's spec asks. Strings borrowed from the object, "" when absent. */
struct mdevobj_spec {
    const char *node;   /* spec.nodeName */
    const char *parent; /* spec.parentGPUDeviceAddress (else spec.address) */
    const char *type;   /* spec.vGPUTypeName: a type id or a type's name */
    const char *uuid;   /* spec.uuid: the UUID asked for, "" for any */
    bool enabled;       /* spec.enabled */
    long long generation;
};

/*
 * Reads the spec of object `obj`. Returns 0, or -EINVAL with `why` saying what is wrong and what
 * to write instead (the CRD refuses such specs; this is for objects written before it did, or
 * by hand without it): no node or parent, enabled without vGPUTypeName, a spec.uuid that is not
 * a lower-case UUID.
 */
int mdevobj_spec(const struct cJSON *obj, struct mdevobj_spec *ret, struct err *why);

/* status.uuid when it is a valid UUID, else NULL (borrowed from `obj`). */
const char *mdevobj_status_uuid(const struct cJSON *obj);

/* Whether status.vGPUStatus says the instance exists (vGPUConfigured). */
bool mdevobj_configured(const struct cJSON *obj);

/*
 * Whether the object's instance is offered to pods: status.vGPUStatus vGPUConfigured with a valid
 * status.uuid and a status.resourceName. The agent clears vGPUStatus only once the instance is
 * removed, so a disabled or deleted object whose instance a VM still holds (Ready=False
 * DeviceInUse) stays offered until it is gone: a running VM's device is not withdrawn. The
 * UUID and the resource name are then in `*ret_uuid` and `*ret_resource` (borrowed; either may
 * be NULL).
 */
bool mdevobj_offered(const struct cJSON *obj, const char **ret_uuid, const char **ret_resource);

/*
 * The PCI parent object `obj` keeps busy (borrowed), or NULL: its status.uuid is set (the
 * instance exists, is being created, or is not removed yet) and its parent
 * (spec.parentGPUDeviceAddress, else spec.address) is a PCI address. Such a parent serves its
 * instances, so it is not offered whole (DRA's pool leaves it out).
 */
const char *mdevobj_pci_parent_in_use(const struct cJSON *obj);

/* status.iommuGroup as a number, or -1 when absent or malformed. */
int mdevobj_iommu_group(const struct cJSON *obj);

/*
 * The resource an instance of type `type_id` is offered under: "devices.harvesterhci.io/" and
 * the id in lower case with every character outside [a-z0-9.-] made '-', and '-' or '.' at
 * either end dropped: "mtty-2" -> "devices.harvesterhci.io/mtty-2", "i915-GVTg_V5_4" ->
 * "devices.harvesterhci.io/i915-gvtg-v5-4". Returns 0, or -EINVAL when nothing is left or the
 * name part is longer than 63, -ENAMETOOLONG when `size` is too small.
 */
int mdevobj_resource_name(const char *type_id, char *buf, size_t size);

/*
 * A parent's name as it goes into object names and the parent label: a PCI address as
 * PCIDevice names have it (':' and '.' dropped: "0000:00:02.0" -> "000000020"), any other
 * name in lower case with every character outside [a-z0-9] made '-' ("mtty" -> "mtty").
 * Returns 0, -EINVAL when the result is empty, starts or ends with '-', or is longer than 63 (not
 * a label value), -ENAMETOOLONG when `size` is too small.
 */
int mdevobj_parent_label(const char *parent, char *buf, size_t size);

/* The name of slot `k` (0, 1, ...) of `parent` on `node`: "<node>-<parent label>-<k>", e.g.
 * "titan-000000020-0", "titan-mtty-1". Returns 0, -EINVAL (a malformed node or parent) or
 * -ENAMETOOLONG (over 253 characters, or `size`). */
int mdevobj_slot_name(const char *node, const char *parent, unsigned k, char *buf, size_t size);

/* The name of an instance found on `node` that no object names (made by hand, by mdevctl):
 * "<node>-<its UUID>" (the whole UUID: two instances may share any prefix). Returns as
 * mdevobj_slot_name(). */
int mdevobj_adopted_name(const char *node, const char *uuid, char *buf, size_t size);

/* The type of parent `p` that `want` names: the type with that id, else the first with that
 * name. NULL when none. */
const struct node_mdev_type *mdevobj_type_find(const struct node_mdev_parent *p, const char *want);
