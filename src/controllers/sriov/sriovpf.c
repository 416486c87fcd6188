/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/sriov/sriovpf.c - what a scan found of one SR-IOV PF, and the status it makes (see
 * sriovpf.h).
 */
#include "controllers/sriov/sriovpf.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/json.h"
#include "base/map.h"
#include "base/timefmt.h"
#include "controllers/binding/ledger.h"
#include "controllers/devices/pcidevice.h"
#include "controllers/objects/claimstatus.h"
#include "controllers/objects/sriovobj.h"
#include "kube/informer.h"

const char *const sriovpf_managed[] = {
        "vfAddresses",        "vfPCIDevices", "status", "interfaceName", "driver",
        "totalVFs",           "numVFs",       "vfs",    "conditions",    "passthroughBlockers",
        "observedGeneration",
};
const size_t sriovpf_n_managed = sizeof(sriovpf_managed) / sizeof(sriovpf_managed[0]);

void sriovpf_free(void *v)
{
    struct sriovpf *p = v;
    if (p) {
        free(p->blockers);
        free(p->vfs);
    }
    free(p);
}

bool sriovpf_is_network_pf(const struct pcidevice_spec *d)
{
    return d->sriov_totalvfs > 0 && strncmp(d->class_id, "02", 2) == 0;
}

static void read_links(struct sriovpf *p)
{
    size_t n = 0, max = SRIOVOBJ_VFS_MAX;
    struct err err = {{0}};
    if (!p->ifname[0] || p->n_vfs == 0 || !p->vfs)
        return;
    struct node_vflink *links = calloc(max, sizeof(*links));
    int r = links ? node_vflink_list(p->ifname, links, max, &n, &err)
                  : err_set(&err, -ENOMEM, "out of memory");
    if (r < 0) {
        free(links);
        (void)snprintf(p->links_error, sizeof(p->links_error), "%.250s", err.msg);
        return;
    }
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < p->n_vfs; k++)
            if (p->vfs[k].index == links[i].index) {
                p->vfs[k].link = links[i];
                p->vfs[k].has_link = true;
            }
    free(links);
}

static int compare_vfs(const void *a, const void *b)
{
    const struct sriovpf_vf *x = a, *y = b;
    if ((x->index < 0) != (y->index < 0)) /* those whose index cannot be read last */
        return x->index < 0 ? 1 : -1;
    return x->index != y->index ? x->index - y->index : strcmp(x->address, y->address);
}

struct sriovpf *sriovpf_new(const char *name, const struct pcidevice_spec *d,
                            const struct map *pci_want)
{
    struct sriovpf *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    (void)snprintf(p->name, sizeof(p->name), "%s", name);
    (void)snprintf(p->address, sizeof(p->address), "%s", d->address);
    (void)snprintf(p->ifname, sizeof(p->ifname), "%s", d->netdev);
    (void)snprintf(p->driver, sizeof(p->driver), "%s", d->driver);
    p->total = d->sriov_totalvfs;
    p->current = d->sriov_numvfs; /* (-1: cannot be read) */
    if (d->n_blockers > 0 && (p->blockers = calloc((size_t)d->n_blockers, sizeof(*p->blockers)))) {
        for (int i = 0; i < d->n_blockers; i++)
            if (strcmp(d->blockers[i].reason, "SRIOVEnabled") != 0)
                p->blockers[p->n_blockers++] = d->blockers[i];
    }
    size_t pos = 0, n = 0;
    const char *key;
    void *v;
    while (map_next(pci_want, &pos, &key, &v))
        n += strcmp(((const struct pcidevice_spec *)v)->physfn, d->address) == 0;
    p->vfs = n ? calloc(n, sizeof(*p->vfs)) : NULL;
    for (pos = 0; p->vfs && map_next(pci_want, &pos, &key, &v);) {
        const struct pcidevice_spec *vf = v;
        if (strcmp(vf->physfn, d->address) != 0 || p->n_vfs == n)
            continue;
        struct sriovpf_vf *out = &p->vfs[p->n_vfs++];
        out->index = vf->sriov_vf_index;
        (void)snprintf(out->address, sizeof(out->address), "%s", vf->address);
        (void)snprintf(out->pcidevice, sizeof(out->pcidevice), "%s", vf->name);
        (void)snprintf(out->driver, sizeof(out->driver), "%s", vf->driver);
    }
    if (p->vfs && p->n_vfs > 1)
        qsort(p->vfs, p->n_vfs, sizeof(*p->vfs), compare_vfs);
    read_links(p);
    return p;
}

void sriovpf_in_use(const struct sriovpf *p, const struct ledger *ledger, struct buf *b)
{
    for (size_t i = 0; i < p->n_vfs; i++) {
        const struct sriovpf_vf *vf = &p->vfs[i];
        const char *sep = buf_str(b) && buf_str(b)[0] ? ", " : "";
        char who[600];
        if (ledger_held(ledger, vf->address, LEDGER_PCI_CLAIM, NULL, who, sizeof(who)))
            (void)buf_printf(b, "%s%s (PCIDeviceClaim %s)", sep, vf->address, who);
        else if (ledger_held(ledger, vf->address, LEDGER_DRA, NULL, who, sizeof(who)))
            (void)buf_printf(b, "%s%s (ResourceClaim %s)", sep, vf->address, who);
        else if (strcmp(vf->driver, "vfio-pci") == 0)
            (void)buf_printf(b, "%s%s (on vfio-pci: a DRA claim or a VM has it)", sep, vf->address);
    }
}

static cJSON *vfs_json(const struct sriovpf *p)
{
    cJSON *list = cJSON_CreateArray();
    for (size_t i = 0; list && i < p->n_vfs; i++) {
        const struct sriovpf_vf *vf = &p->vfs[i];
        if (vf->index < 0) /* (the list is keyed by index: sriovpf_unreadable() says why) */
            continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(list, o);
        cJSON_AddNumberToObject(o, "index", vf->index);
        cJSON_AddStringToObject(o, "address", vf->address);
        cJSON_AddStringToObject(o, "pciDevice", vf->pcidevice);
        if (!vf->has_link)
            continue;
        char mac[NODE_VFLINK_MAC_STR];
        node_vflink_mac_format(vf->link.mac, mac);
        cJSON_AddStringToObject(o, "mac", mac);
        cJSON_AddNumberToObject(o, "vlan", vf->link.vlan);
        cJSON_AddNumberToObject(o, "qos", vf->link.qos);
        if (vf->link.spoofchk >= 0)
            cJSON_AddBoolToObject(o, "spoofCheck", vf->link.spoofchk);
        if (vf->link.trust >= 0)
            cJSON_AddBoolToObject(o, "trust", vf->link.trust);
    }
    return list;
}

int sriovpf_unreadable(const struct sriovpf *p, struct buf *b)
{
    if (p->current < 0) {
        (void)buf_printf(b,
                         "cannot read the VF count of %s (its sriov_numvfs is malformed, out of "
                         "range or above sriov_totalvfs; see its PCIDevice's "
                         "passthroughBlockers): the VF count is not changed while it cannot be "
                         "read",
                         p->address);
        return 1;
    }
    const char *sep = "";
    for (size_t i = 0; i < p->n_vfs; i++) {
        if (p->vfs[i].index >= 0)
            continue;
        if (!sep[0])
            (void)buf_printf(b, "cannot read the index of VF ");
        (void)buf_printf(b, "%s%s", sep, p->vfs[i].address);
        sep = ", ";
    }
    if (!sep[0])
        return 0;
    (void)buf_printf(b,
                     " of %s (no virtfnN link of the PF leads to it; see its PCIDevice's "
                     "passthroughBlockers): left out of status.vfs",
                     p->address);
    return 1;
}

static cJSON *blockers_json(const struct sriovpf *p)
{
    cJSON *list = cJSON_CreateArray();
    for (int i = 0; list && i < p->n_blockers; i++) {
        cJSON *b = cJSON_CreateObject();
        cJSON_AddStringToObject(b, "reason", p->blockers[i].reason);
        cJSON_AddStringToObject(b, "message", p->blockers[i].message);
        cJSON_AddItemToArray(list, b);
    }
    return list;
}

cJSON *sriovpf_status(const struct sriovpf *p, const cJSON *obj, bool ready, const char *reason,
                      const char *message)
{
    cJSON *st = cJSON_CreateObject(), *addrs = cJSON_AddArrayToObject(st, "vfAddresses"),
          *names = cJSON_AddArrayToObject(st, "vfPCIDevices");
    for (size_t i = 0; i < p->n_vfs; i++) {
        cJSON_AddItemToArray(addrs, cJSON_CreateString(p->vfs[i].address));
        cJSON_AddItemToArray(names, cJSON_CreateString(p->vfs[i].pcidevice));
    }
    bool enabled = p->current > 0 || (p->current < 0 && p->n_vfs > 0);
    cJSON_AddStringToObject(st, "status", enabled ? SRIOVOBJ_ENABLED : SRIOVOBJ_DISABLED);
    if (p->ifname[0])
        cJSON_AddStringToObject(st, "interfaceName", p->ifname);
    if (p->driver[0])
        cJSON_AddStringToObject(st, "driver", p->driver);
    if (p->total >= 0)
        cJSON_AddNumberToObject(st, "totalVFs", p->total);
    if (p->current >= 0)
        cJSON_AddNumberToObject(st, "numVFs", p->current);
    cJSON_AddItemToObject(st, "vfs", vfs_json(p));
    if (p->n_blockers > 0)
        cJSON_AddItemToObject(st, "passthroughBlockers", blockers_json(p));
    char now[40];
    timefmt_now(now, sizeof(now));
    cJSON *conds = cJSON_AddArrayToObject(st, "conditions");
    cJSON_AddItemToArray(conds, claimstatus_ready_condition(obj, ready, reason, message, now));
    const cJSON *gen = json_field(json_field(obj, "metadata"), "generation");
    cJSON_AddNumberToObject(st, "observedGeneration", cJSON_IsNumber(gen) ? gen->valuedouble : 0);
    return st;
}
