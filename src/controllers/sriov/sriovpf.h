/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/sriov/sriovpf.h - what a PCI scan found of one SR-IOV network PF (its interface,
 * driver, counts, the host's blockers, its VFs by index with their PCIDevices and the settings
 * the PF's driver reports for each over netlink), which of its VFs are in use, and the status
 * of its SRIOVNetworkDevice that these facts make. Reads netlink (node/vflink.h: one request
 * per PF with VFs); no API calls; no logging.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "node/blockers.h"
#include "node/vflink.h"

struct buf;
struct cJSON;
struct kube_informer;
struct ledger;
struct map;
struct pcidevice_spec;

struct sriovpf_vf {
    int index; /* -1 when it cannot be read (then it is left out of status.vfs) */
    char address[20];
    char pcidevice[254];
    char driver[64];
    bool has_link; /* `link` holds its settings as the PF's driver reports them */
    struct node_vflink link;
};

struct sriovpf {
    char name[254]; /* its SRIOVNetworkDevice */
    char address[20];
    char ifname[16];
    char driver[64];
    int total, current;            /* sriov_totalvfs, sriov_numvfs; -1 when they cannot be read */
    struct node_blocker *blockers; /* the PF's, from its PCIDevice (SRIOVEnabled left out) */
    int n_blockers;
    struct sriovpf_vf *vfs; /* by index */
    size_t n_vfs;
    char links_error[256]; /* why the VF settings could not be read, or "" */
};

/* The status fields the agent writes (the rest of the object's status is someone else's). */
extern const char *const sriovpf_managed[];
extern const size_t sriovpf_n_managed;

/* Whether `d` is an SR-IOV network PF: class 02xx with sriov_totalvfs > 0. */
bool sriovpf_is_network_pf(const struct pcidevice_spec *d);

/* The PF `d` of a scan whose devices are `pci_want` (name -> struct pcidevice_spec), for the
 * object `name`, with its VFs' settings read from netlink. NULL on OOM. */
struct sriovpf *sriovpf_new(const char *name, const struct pcidevice_spec *d,
                            const struct map *pci_want);
/* Takes NULL. */
void sriovpf_free(void *p);

/* Appends the VFs in use to `b`, for people: "0000:00:05.1 (PCIDeviceClaim q-000000051), ...":
 * the device ledger (binding/ledger.h; may be NULL) names its PCIDeviceClaim or the DRA
 * ResourceClaim prepared with it, or it is on vfio-pci. */
void sriovpf_in_use(const struct sriovpf *p, const struct ledger *ledger, struct buf *b);

/* When some SR-IOV fact of the PF cannot be read (its VF count, a VF's index), appends what and
 * what follows from it to `b`, for people, and returns 1; else 0. */
int sriovpf_unreadable(const struct sriovpf *p, struct buf *b);

/* The status `obj` (the cached object, NULL for a new one) should have: the facts, and a Ready
 * condition saying `ready`, `reason` and `message` (its lastTransitionTime kept while `ready`
 * does not change). NULL on OOM. */
struct cJSON *sriovpf_status(const struct sriovpf *p, const struct cJSON *obj, bool ready,
                             const char *reason, const char *message);
