/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/dra/draprep.h - what the agent's DRA kubelet plugin (controllers/dra/draplugin.h)
 * makes of a ResourceClaim, pure (no I/O, no logging; unit-tested): the devices of our driver and
 * pool in its allocation, the CDI spec and the device metadata files a prepared claim gets, the
 * original driver to record, and the plugin's checkpoint.
 *
 * Names and paths (docs/dra.md):
 *   CDI spec     <cdi dir>/vfio-pci.hostdevd.io-<claim uid>.json, kind vfio-pci.hostdevd.io/vfio:
 *                device "<uid>-<device>" adds /dev/vfio/vfio and /dev/vfio/<group>; device
 *                "<uid>_<request>" bind-mounts the request's metadata file, read-only
 *   metadata     host: <plugin dir>/dra-device-metadata/<namespace>_<claim>/<request>/metadata.json
 *                container (KEP-5304, what KubeVirt's virt-launcher reads):
 *                /var/run/kubernetes.io/dra-device-attributes/resourceclaims/<claim>/<request>/
 *                vfio-pci.hostdevd.io-metadata.json, or .../resourceclaimtemplates/<pod claim
 *                name>/... for a claim made from a template (annotation
 *                resource.kubernetes.io/pod-claim-name); apiVersion
 *                metadata.resource.k8s.io/v1alpha1, the device's slice attributes (pciBusID...)
 *   checkpoint   <plugin dir>/checkpoint.json: {"version": 1, "claims": {"<uid>": {"namespace",
 *                "name", "podClaim" (when from a template), "prepared": bool, "devices":
 * [{"request", "name", "address", "original", "group"}]}}}; a device's original driver is recorded
 * there before anything is bound, so a crash at any step knows what to restore. A request name with
 * a subrequest ("nic/intel") is recorded whole; its files use the base request name ("nic").
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

struct cJSON;

#define DRAPREP_CDI_KIND      "vfio-pci.hostdevd.io/vfio"
#define DRAPREP_METADATA_ROOT "/var/run/kubernetes.io/dra-device-attributes"
#define DRAPREP_METADATA_API  "metadata.resource.k8s.io/v1alpha1"
#define DRAPREP_POD_CLAIM_ANN "resource.kubernetes.io/pod-claim-name"
#define DRAPREP_MAX_DEVICES   64 /* of our driver in one claim */
#define DRAPREP_NAME_SIZE     254

/* "0000:65:00.0" for "pci-0000-65-00-0" (draslices_device_name() backwards), the UUID for
 * "mdev-<uuid>" (draslices_mdev_name()). Returns 0, or -EINVAL when the name is not one of ours. */
int draprep_address(const char *device, char *buf, size_t size);
/* Whether a device's address is an mdev's UUID (lower case 8-4-4-4-12), not a PCI address. */
bool draprep_is_mdev(const char *address);

struct draprep_device {
    char request[DRAPREP_NAME_SIZE]; /* as allocated: "nic" or "nic/intel" */
    char name[64];                   /* in the pool: "pci-0000-65-00-0" */
    char address[40];                /* a PCI address, or an mdev's UUID */
};

struct draprep_claim {
    char namespace_[DRAPREP_NAME_SIZE], name[DRAPREP_NAME_SIZE], uid[64];
    char pod_claim[DRAPREP_NAME_SIZE]; /* the pod's name for a claim from a template, "" */
    struct draprep_device *devices;
    size_t n;
};

/* The devices of `driver` in pool `pool` that `claim` (a ResourceClaim as read from the API)
 * was allocated. -EINVAL with a sentence: the uid is not `uid` (deleted and made again), the
 * claim is not allocated, a device of ours is not a PCI function or mdev name, more than
 * DRAPREP_MAX_DEVICES. A claim with no device of ours is 0 with n == 0. */
int draprep_parse(const struct cJSON *claim, const char *uid, const char *driver, const char *pool,
                  struct draprep_claim *ret, struct err *ret_err);
void draprep_claim_done(struct draprep_claim *c);

/* "nic" for "nic/intel". */
void draprep_base_request(const char *request, char *buf, size_t size);

/* The CDI spec of a prepared claim: `groups[i]` is devices[i]'s IOMMU group; `dev_root` the
 * host's /dev (a hostPath is added when it is not "/dev"); `metadata_dir` the claim's host
 * directory of metadata files. NULL on OOM. */
struct cJSON *draprep_cdi_spec(const struct draprep_claim *c, const int *groups,
                               const char *dev_root, const char *metadata_dir);
/* The CDI ids of device i: "<kind>=<uid>-<device>" and "<kind>=<uid>_<base request>". */
void draprep_cdi_ids(const struct draprep_claim *c, size_t i, char *device_id, char *metadata_id,
                     size_t size);
/* The in-container path of the metadata file of `base_request`. */
int draprep_container_path(const struct draprep_claim *c, const char *base_request, char *buf,
                           size_t size);

/* The metadata file of one request (base name `base_request`) of a prepared claim: every
 * device of that request with `attrs[i]` (borrowed; the device's slice attributes, or NULL:
 * only pciBusID). NULL on OOM. */
struct cJSON *draprep_metadata(const struct draprep_claim *c, const char *base_request,
                               const char *driver, const char *pool,
                               const struct cJSON *const *attrs);

/* The original driver to record for a device first seen now: the current driver, unless it is
 * vfio-pci and the PCIDevice's driver at first sight (`annotation`) names another: then that
 * one (a checkpoint lost after a bind). "vfio-pci" means the device was on vfio-pci before and
 * stays there when the claim is unprepared. */
const char *draprep_original(const char *current, const char *annotation);

/* Unprepare's error while a process holds the IOMMU group `group` of device `address`: `holder`
 * is node_vfio_group_holder()'s "<comm> (pid N)", or NULL when it cannot be told; `original`
 * the driver the device gets back once released. */
void draprep_busy_error(const char *address, int group, const char *holder, const char *original,
                        char *buf, size_t size);

/* Prepare's refusal of an unhealthy device: true when the health store `h` (controllers/health/
 * health.h; NULL: every device healthy) has something against the PCI function at `address`
 * (PCIDevice `pcidevice`); then, unless `buf` holds an error already, health_refusal()'s sentence
 * (DeviceUnhealthy's message: the reason, what was seen, the way back) goes there. An mdev's
 * UUID is false (its parent's taint keeps the scheduler off it). */
struct health;
bool draprep_unhealthy(const struct health *h, const char *address, const char *pcidevice,
                       char *buf, size_t size);

/* --- the checkpoint ----------------------------------------------------------------------------
 */

/* A new empty checkpoint, or the one in `text` (-EINVAL with a sentence when it is not one). */
int draprep_checkpoint_parse(const char *text, struct cJSON **ret, struct err *ret_err);
struct cJSON *draprep_checkpoint_new(void);
/* The claim `uid`'s entry, or NULL. */
struct cJSON *draprep_checkpoint_claim(const struct cJSON *ck, const char *uid);
/* Records (replaces) the entry of `c` with its devices and originals (`originals[i]`, `groups[i]`;
 * group -1 while unknown). Returns 0 or -ENOMEM. */
int draprep_checkpoint_put(struct cJSON *ck, const struct draprep_claim *c,
                           const char *const *originals, const int *groups, bool prepared);
void draprep_checkpoint_remove(struct cJSON *ck, const char *uid);
/* The recorded original driver of `address` in claim `uid` (NULL: not recorded). */
const char *draprep_checkpoint_original(const struct cJSON *ck, const char *uid,
                                        const char *address);
/* The claim that holds `address` ("namespace/name" into buf), other than `except_uid` (may be
 * NULL). Returns true when one does. */
bool draprep_checkpoint_holder(const struct cJSON *ck, const char *address, const char *except_uid,
                               char *buf, size_t size);
/* Every address the checkpoint holds (malloc'd array of malloc'd strings). */
int draprep_checkpoint_addresses(const struct cJSON *ck, char ***ret, size_t *ret_n);
/* The entry's claim as a draprep_claim (devices from the checkpoint) and their originals
 * (pointers into `entry`). Returns 0 or -EINVAL when the entry is malformed. */
int draprep_checkpoint_entry(const struct cJSON *entry, const char *uid, struct draprep_claim *ret,
                             const char ***ret_originals, int **ret_groups);
