/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/kubevirt/permitted.h - KubeVirt's spec.configuration.permittedHostDevices as a set
 * with an owner (pure: no I/O, no logging, unit-tested). The controller computes the entries the
 * Ready claims and the configured mdev instances need (one per resource name) and this decides the
 * one write that makes the KubeVirt CR say exactly that, touching nothing else:
 *
 *   - entries hostdevd owns are those whose resourceName is listed in the CR's annotation
 *     PERMITTED_OWNED_ANNOTATION (a sorted, comma-separated list: the record), and those it takes
 *     back below; every other entry is foreign: kept as it is, where it is;
 *   - an owned entry no claim needs is removed; one a claim needs is kept in its place (rewritten
 *     if someone changed it); a needed entry that is missing is appended; a duplicate of an owned
 *     entry (a second writer's) is dropped;
 *   - the record restored: a needed resource name the annotation does not list (it was removed or
 *     edited from outside) whose entries, in all three lists, are all exactly what hostdevd writes
 *     for it is taken back ("adopted"): those entries are owned again and the annotation lists the
 *     name again, in the same write. Exactly means the JSON of entry_json(): in its own list
 *     (pciHostDevices for PCI, usb for USB, mediatedDevices for mdev), for PCI
 *     {pciVendorSelector: "<vendor>:<device>" as the PCIDevice reports them, resourceName,
 *     externalResourceProvider: true}, for USB {resourceName, selectors: [{vendor, product}],
 *     externalResourceProvider: true}, for mdev {mdevNameSelector, resourceName,
 *     externalResourceProvider: true}, no other field. Such an entry cannot be told from one
 *     hostdevd wrote; made by someone else for a name a Ready claim needs, it is taken all the
 *     same (the policies then check it, and it goes when no claim needs the name), which is the
 *     safe side;
 *   - a needed resource name the record does not list and any other entry lists (another
 *     selector, the same in upper case, more selectors, externalResourceProvider false or
 *     missing, in another list, an extra field) is left to that entry and every entry of that
 *     name, exactly-ours ones included (reported as a conflict: hostdevd does not take over or
 *     duplicate it). An unlisted entry of a name no Ready claim needs stays foreign whatever its
 *     shape (nothing says what ours would be). Names the record lists are hostdevd's, needed or
 *     not, whatever their entries look like (rewritten or removed);
 *   - a missing or null permittedHostDevices, pciHostDevices, usb or mediatedDevices is an empty
 *     one; every other field is never touched.
 *
 * The write is a JSON merge patch carrying metadata.resourceVersion, so the API server applies it
 * only to the version it was computed from (409 Conflict otherwise: recompute and retry); NULL
 * when the CR already says exactly this (nothing to write).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct cJSON;

#define PERMITTED_OWNED_ANNOTATION "hostdevd.io/owned-host-devices"

/* The list an entry goes in. */
enum permitted_kind {
    PERMITTED_PCI,  /* pciHostDevices: {pciVendorSelector "<vendor>:<product>", ...} */
    PERMITTED_USB,  /* usb: {selectors [{vendor, product}], ...} */
    PERMITTED_MDEV, /* mediatedDevices: {mdevNameSelector, ...} */
};

/* One entry hostdevd needs. */
struct permitted_entry {
    char resource[320]; /* "intel.com/82574L_GIGABIT_NETWORK_CONNECTION" */
    enum permitted_kind kind;
    char vendor[5], product[5]; /* PCI, USB */
    char selector[256];         /* mdev: the mdevNameSelector (permitted_mdev_selector) */
};

/* The entries the Ready claims need, one per resource name. */
struct permitted_want {
    struct permitted_entry *entries;
    size_t n;
};

/* Adds `e` unless its resource name is there already. Returns 0 or -ENOMEM. */
int permitted_want_add(struct permitted_want *w, const struct permitted_entry *e);

/* KubeVirt's mdevNameSelector of an mdev type (virt-handler's getMdevTypeName and
 * removeSelectorSpaces): the type's `name` file with every ' ' as '_', surrounding white space
 * trimmed; the type id when the type has no name (NULL or only white space). "Dual port serial"
 * -> "Dual_port_serial", "GRID T4-1Q" -> "GRID_T4-1Q". Returns 0, -EINVAL when both are empty,
 * -ENAMETOOLONG when it does not fit `size`. */
int permitted_mdev_selector(const char *name, const char *id, char *buf, size_t size);
void permitted_want_done(struct permitted_want *w);

struct permitted_result {
    char *patch;              /* the merge patch to write, or NULL: already exact */
    size_t added;             /* entries appended */
    size_t removed;           /* owned entries dropped (no claim needs them, or duplicates) */
    size_t rewritten;         /* owned entries changed back */
    char conflicts[1024];     /* needed resource names a foreign entry lists, comma-separated */
    size_t adopted;           /* needed names taken back into the record (see above) */
    char adopted_names[1024]; /* those names, comma-separated */
};

/* Decides the write for the KubeVirt CR `kubevirt` (as cached). Returns 0 (ret filled; free
 * ret->patch) or -ENOMEM / -EINVAL (no metadata.resourceVersion). */
int permitted_plan(const struct cJSON *kubevirt, const struct permitted_want *w,
                   struct permitted_result *ret);

/* Whether the CR enables the HostDevices feature gate
 * (spec.configuration.developerConfiguration.featureGates). */
bool permitted_gate_enabled(const struct cJSON *kubevirt);
