/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/devices/pcidevice.h - the PCIDevice reconciler: what a node's PCIDevice objects
 * should be, the smallest set of writes that gets them there (pure: no I/O, no logging,
 * unit-tested), and the reconciler that carries those plans out on the runner
 * (controllers/runtime/runner.h): one write at a time (create, status, metadata, delete), logging
 * each.
 *
 * Keys are the objects of this node (label nodename=<node>) and the devices of the last
 * scan; nothing is reconciled before the first scan succeeded (an empty inventory would
 * delete every object). The Node's uid, for the ownerReference, comes from
 * controllers/devices/nodeuid.h (no ownerReference while it is unknown; every key is looked at
 * again once it is).
 *
 * The agent owns: label nodename, the ownerReference to its Node, the driver-at-first-sight
 * annotation (set on create only), the status fields listed in pcidevice.c's `managed` table
 * (the AER error totals, `aerErrors`, among them) and the `Healthy` condition, written from the
 * node's health store (controllers/health/health.h): True (reason Healthy) while nothing is
 * known against the device, else False with the store's reason and message; its
 * lastTransitionTime changes only with its status. Other conditions, other labels and fields of
 * later versions are left alone. A device that is gone is deleted with a uid precondition, so a
 * re-created object of the same name is never deleted by mistake; but one the store says was
 * Removed while a PCIDeviceClaim or a DRA claim holds it (binding/ledger.h) is kept, with its
 * Healthy=False condition, until that holding ends (the claim's owner sees what happened).
 * Keys are queued again on health_changed (the device's) and ledger_changed (the Removed ones).
 */
#pragma once

#include "controllers/runtime/part.h"

#include <stdbool.h>

#include "node/blockers.h"

struct cJSON;

/* The desired state of one PCIDevice, as discovery computed it. */
struct pcidevice_spec {
    char name[254]; /* "<node>-<address without ':' and '.'>" */
    char node[254];
    char address[20];
    char vendor_id[5], device_id[5];
    char subsystem_vendor_id[5], subsystem_device_id[5]; /* "" when unknown */
    char class_id[5];
    char revision[3];
    char iommu_group[12]; /* "" when none (as harvester writes it) */
    int numa_node;        /* -1: field absent */
    char pcie_root[24];   /* "pci0000:00", "" when unknown; not in the PCIDevice (DRA only) */
    char resource_name[320];
    char description[512];
    char driver[64];    /* "" when unbound: kernelDriverInUse absent */
    char physfn[20];    /* SR-IOV VF: the PF's address, else "" */
    int sriov_totalvfs; /* SR-IOV PF: >= 0, else -1 */
    int sriov_numvfs;
    int sriov_vf_index;     /* SR-IOV VF: its index on the PF, else -1 */
    char netdev[16];        /* SR-IOV PF: its network interface, else "" */
    char sriov_parent[254]; /* SR-IOV VF: its PF's SRIOVNetworkDevice, else "" */
    /* What identifies it when its address changes (node/pciident.h); "" when unknown */
    char serial[65];        /* the DSN, else its permanent MAC address or NVMe serial */
    char serial_source[16]; /* "DSN", "PermanentMAC", "NVMeSerial"; "" with no serial */
    char slot[65];          /* its physical slot's name */
    /* status.passthroughBlockers: why it cannot be passed through now (none: it can);
     * malloc'd (most devices have none), freed with pcidevice_spec_free() */
    struct node_blocker *blockers;
    int n_blockers;
    /* status.aerErrors: its AER error totals by severity (node/pciaer.h order: fatal, nonfatal,
     * correctable), each -1 when it has none (the object then lacks that field) */
    long long aer[3];
};

/* What the Healthy condition says (from the health store) and when it is written. */
struct pcidevice_health {
    bool healthy;
    const char *reason;  /* "Healthy", or one of the store's reasons */
    const char *message; /* what was seen and what to do */
    const char *now;     /* RFC 3339: the lastTransitionTime of a new status */
    /* the device is gone but is to be kept (Removed while held): its Healthy condition is
     * written, the object is not deleted */
    bool keep_gone;
};

/* The status.aerErrors object of `s`, or NULL when it has no AER counters (or on OOM). */
struct cJSON *pcidevice_aer_json(const struct pcidevice_spec *s);

/* `have_status`'s conditions (in their order) with the Healthy condition that `h` says in place
 * of the one it has (appended when it has none): its lastTransitionTime is the old one when the
 * status does not change, else h->now. NULL on OOM. */
struct cJSON *pcidevice_conditions(const struct cJSON *have_status,
                                   const struct pcidevice_health *h);

struct pcidevice_plan {
    bool create;        /* POST new_object, then PATCH status_patch on /status */
    bool delete;        /* DELETE with the uid precondition */
    char uid[64];       /* of the existing object ("" when none) */
    char *meta_patch;   /* merge patch of metadata (labels, ownerReferences) or NULL */
    char *status_patch; /* merge patch on /status with only what differs, or NULL */
};

/* Frees a spec from a scan (its blockers too). Takes NULL. */
void pcidevice_spec_free(void *spec);

/* The status object `s` should have (the managed fields only). NULL on OOM. */
struct cJSON *pcidevice_status(const struct pcidevice_spec *s);

/* The label harvester puts on a VF's PCIDevice: the name of its PF's SRIOVNetworkDevice. */
#define PCIDEVICE_PARENT_SRIOV_LABEL "harvesterhci.io/parent-sriov-network-device"

/* The object to create for `s` (metadata only: status goes through /status). A VF's object
 * carries PCIDEVICE_PARENT_SRIOV_LABEL. `node_uid` may
 * `node_uid` may be NULL when the Node's uid is not known yet (no ownerReference then). The
 * annotation of the driver at first sight is `first_driver` when not NULL (the original driver a
 * claim of the device recorded: an object deleted while its device is on vfio-pci comes back saying
 * e1000e, not vfio-pci), else the driver the scan saw. NULL on OOM. */
struct cJSON *pcidevice_new_object(const struct pcidevice_spec *s, const char *node_uid,
                                   const char *first_driver);

/*
 * Plans the writes that make `have` (the cached object, NULL when there is none) match `want`
 * (NULL when the device is gone). Returns 0 (ret filled; an empty plan means nothing to write)
 * or -ENOMEM. Free the plan with pcidevice_plan_done().
 */
int pcidevice_plan(const struct pcidevice_spec *want, const struct cJSON *have,
                   const char *node_uid, struct pcidevice_plan *ret);
/* pcidevice_plan() with the Healthy condition `health` says (NULL: conditions left alone, as
 * pcidevice_plan()); a gone device with health->keep_gone is not deleted, its condition written. */
int pcidevice_plan_health(const struct pcidevice_spec *want, const struct cJSON *have,
                          const char *node_uid, const struct pcidevice_health *health,
                          struct pcidevice_plan *ret);

/* Whether the plan writes anything. */
bool pcidevice_plan_empty(const struct pcidevice_plan *p);

void pcidevice_plan_done(struct pcidevice_plan *p);

/* --- the reconciler (logs; runs on the loop) ------------------------------------------------ */

struct devobjs;
struct devobjs_config;
struct map;

/* The PCIDevice reconciler: the device-object core (devices/devobjs.h: set_want, enqueue_all,
 * want, runner) with the PCIDevice plan. NULL on OOM. */
struct devobjs *pcidevices_new(const struct devobjs_config *cfg);
/* An empty map for devobjs_take_want(): name -> struct pcidevice_spec (malloc'd). */
struct map *pcidevices_new_want(void);
/* Copies into `want` the current spec of each device of `unreadable` (PCI addresses skipped by
 * the scan: present, but their identity could not be read) that `want` lacks, so that a device
 * whose sysfs is unreadable for a while keeps its object instead of losing it. */
void pcidevices_keep_unreadable(const struct devobjs *d, struct map *want,
                                const struct map *unreadable);

/* The part (controllers/runtime/part.h); `self` is what pcidevices_new returned. It watches
 * pcidevices_scanned (the inventory emits it with a struct devobjs_scan whose `want` it takes)
 * and emits pcidevices_wanted with its new want (const struct map *: name -> struct
 * pcidevice_spec, borrowed for the call) for what reads a scan's PCI functions (SR-IOV PFs). */
extern const struct part_ops pcidevices_part;
struct topic;
extern const struct topic pcidevices_scanned;
extern const struct topic pcidevices_wanted;
