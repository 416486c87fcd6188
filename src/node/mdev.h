/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node/mdev.h - mediated devices (mdev) at the sysfs level: their parents, the types each parent
 * offers with its capacity, the instances that exist; creating and removing an instance.
 *
 * What is read (the kernel's ABI, Documentation/ABI/testing/sysfs-bus-vfio-mdev):
 *   class/mdev_bus/<parent>            a link to each parent device: a PCI function
 *                                      (0000:00:02.0) or a virtual device (mtty)
 *   <parent>/mdev_supported_types/<type>/  name and description (optional), available_instances,
 *                                      device_api, devices/ (links to its instances)
 *   bus/mdev/devices/<uuid>            a link to each instance, with mdev_type (a link to its
 *                                      type's directory: the type is its name, the parent the
 *                                      directory above mdev_supported_types) and iommu_group
 * What is written: a UUID to <parent>/mdev_supported_types/<type>/create, "1" to
 * bus/mdev/devices/<uuid>/remove. Nothing else.
 *
 * Links are followed inside the sysfs root (node/sysfs.h) and their targets resolved as paths
 * below it, so a fake tree (hack/mk-sysfs-fixture.sh, `mdev_type` and `mdev` lines) plays the
 * kernel. Instances do not survive a reboot: the caller keeps the UUIDs it wants and creates
 * them again (node_mdev_create() of an instance that is there already is a success).
 *
 * Blocking: a scan reads a few files per type and instance (quick). create and remove run the
 * vendor driver's code inside the write; remove of an instance a VMM holds open blocks in the
 * kernel until the VMM lets go, so check its IOMMU group first (node_vfio_group_busy) and run
 * both off the event loop. No logging.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "node/sysfs.h"

#define NODE_MDEV_UUID_SIZE 37 /* 36 characters and the NUL */
#define NODE_MDEV_NAME_SIZE 64 /* a parent's device name or a type id, and the NUL */

struct node_mdev_type {
    char id[NODE_MDEV_NAME_SIZE]; /* the directory's name: "mtty-2", "i915-GVTg_V5_4" */
    char name[128];               /* the `name` file ("Dual port serial"), "" when absent */
    char description[256];        /* the `description` file, "" when absent; cut to fit */
    char device_api[32];          /* "vfio-pci", "vfio-ccw", ... */
    int available;                /* available_instances: how many more can be created */
};

struct node_mdev_parent {
    char name[NODE_MDEV_NAME_SIZE]; /* its name in class/mdev_bus: "0000:00:02.0", "mtty" */
    bool pci;                       /* a PCI function (then `name` is its address) */
    struct node_mdev_type *types;   /* sorted by id; NULL when none */
    size_t n_types;
};

struct node_mdev_instance {
    char uuid[NODE_MDEV_UUID_SIZE];
    char type[NODE_MDEV_NAME_SIZE];   /* its type's id */
    char parent[NODE_MDEV_NAME_SIZE]; /* its parent's name */
    int iommu_group;                  /* -1 when it has none (or its link leads nowhere) */
};

struct node_mdev_scan {
    struct node_mdev_parent *parents; /* sorted by name */
    size_t n_parents;
    struct node_mdev_instance *instances; /* sorted by UUID */
    size_t n_instances;
    struct node_sysfs_skip *skipped; /* parents ("mtty"), types ("mtty/mtty-2") and instances
                                        (their UUID) left out, each with why */
    size_t n_skipped;
};

/*
 * Reads every parent with its types, and every instance. A parent, type or instance whose
 * files cannot be read (a dangling link, garbage in available_instances, a missing device_api)
 * is left out and listed in `skipped` with the reason. No class/mdev_bus or bus/mdev/devices
 * (the mdev module not loaded) is an empty result. Returns 0 and fills `*ret` (free it with
 * node_mdev_scan_done()), or -errno (-ENOMEM, or a directory that cannot be listed) with
 * `ret_err` (may be NULL) saying which.
 */
int node_mdev_scan(int root_fd, struct node_mdev_scan *ret, struct err *ret_err);

/* Frees what a scan holds and zeroes it. Takes NULL. */
void node_mdev_scan_done(struct node_mdev_scan *s);

/*
 * Reads instance `uuid`. Returns 1 with `*ret` set, 0 when there is no such instance, -EINVAL
 * for a malformed UUID, or -errno when it is there but cannot be read (its mdev_type link
 * dangles, ...), with `ret_err` (may be NULL) saying why.
 */
int node_mdev_find(int root_fd, const char *uuid, struct node_mdev_instance *ret,
                   struct err *ret_err);

/*
 * Creates instance `uuid` of type `type` on parent `parent` by writing the UUID to the type's
 * create file. Returns 0 when it was written, 1 when that instance exists already with that
 * type on that parent (nothing written: re-creation after a reboot or a restart is safe), or
 * -errno with `ret_err` (may be NULL) saying what is wrong and what to do: -EINVAL (malformed
 * UUID or name), -ENODEV (no such mdev parent), -ENOENT (the parent has no such type; the
 * message lists its types), -ENOSPC (available_instances is 0), -EEXIST (an instance with that
 * UUID exists with another type or parent), -EIO (that instance exists but cannot be read, or
 * the type's available_instances cannot), or the kernel's answer to the write.
 */
int node_mdev_create(int root_fd, const char *parent, const char *type, const char *uuid,
                     struct err *ret_err);

/*
 * Removes instance `uuid` by writing "1" to its remove file. Returns 0 when written, 1 when
 * there is no such instance (already removed: nothing to do), or -errno with `ret_err` (may be
 * NULL): -EINVAL (malformed UUID), or the kernel's answer to the write.
 */
int node_mdev_remove(int root_fd, const char *uuid, struct err *ret_err);

/* Writes a new random (RFC 4122 version 4) UUID, lowercase, into `buf`, from getrandom(2).
 * Returns 0 or -errno. */
int node_mdev_uuid_new(char buf[NODE_MDEV_UUID_SIZE]);

/* Whether `s` is a UUID as the kernel names mdevs: 8-4-4-4-12 lowercase hex digits. Upper case
 * is refused: the kernel would take it but name the device in lower case. */
bool node_mdev_uuid_valid(const char *s);
