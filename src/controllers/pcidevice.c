/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/pcidevice.c - desired PCIDevice objects and minimal write plans. See
 * pcidevice.h. Pure: no I/O, no logging.
 */
#include "controllers/pcidevice.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/client.h"
#include "kube/names.h"

#define DRIVER_ANNOTATION KUBE_PCIDEVICE_DRIVER_ANNOTATION

/* The status fields this agent writes; any other field is someone else's. */
static const char *const managed[] = {
        "address",           "vendorId", "deviceId",     "subsystemVendorId",
        "subsystemDeviceId", "classId",  "revision",     "iommuGroup",
        "numaNode",          "nodeName", "resourceName", "description",
        "kernelDriverInUse", "sriov",
};

static void add_str(cJSON *o, const char *key, const char *value)
{
    if (value[0])
        cJSON_AddStringToObject(o, key, value);
}

static cJSON *sriov_json(const struct pcidevice_spec *s)
{
    if (!s->physfn[0] && s->sriov_totalvfs < 0)
        return NULL;
    cJSON *o = cJSON_CreateObject();
    add_str(o, "physicalFunction", s->physfn);
    if (s->sriov_totalvfs >= 0) {
        cJSON_AddNumberToObject(o, "totalVFs", s->sriov_totalvfs);
        cJSON_AddNumberToObject(o, "numVFs", s->sriov_numvfs >= 0 ? s->sriov_numvfs : 0);
    }
    return o;
}

cJSON *pcidevice_status(const struct pcidevice_spec *s)
{
    cJSON *st = cJSON_CreateObject();
    if (!st)
        return NULL;
    add_str(st, "address", s->address);
    add_str(st, "vendorId", s->vendor_id);
    add_str(st, "deviceId", s->device_id);
    add_str(st, "subsystemVendorId", s->subsystem_vendor_id);
    add_str(st, "subsystemDeviceId", s->subsystem_device_id);
    add_str(st, "classId", s->class_id);
    add_str(st, "revision", s->revision);
    cJSON_AddStringToObject(st, "iommuGroup", s->iommu_group); /* "" when none, as harvester */
    if (s->numa_node >= 0)
        cJSON_AddNumberToObject(st, "numaNode", s->numa_node);
    add_str(st, "nodeName", s->node);
    add_str(st, "resourceName", s->resource_name);
    add_str(st, "description", s->description);
    add_str(st, "kernelDriverInUse", s->driver);
    cJSON *sriov = sriov_json(s);
    if (sriov)
        cJSON_AddItemToObject(st, "sriov", sriov);
    return st;
}

static cJSON *owner_ref(const char *node, const char *node_uid)
{
    cJSON *ref = cJSON_CreateObject();
    cJSON_AddStringToObject(ref, "apiVersion", "v1");
    cJSON_AddStringToObject(ref, "kind", "Node");
    cJSON_AddStringToObject(ref, "name", node);
    cJSON_AddStringToObject(ref, "uid", node_uid);
    return ref;
}

cJSON *pcidevice_new_object(const struct pcidevice_spec *s, const char *node_uid)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "apiVersion", "devices.harvesterhci.io/v1beta1");
    cJSON_AddStringToObject(o, "kind", "PCIDevice");
    cJSON *meta = cJSON_AddObjectToObject(o, "metadata");
    cJSON_AddStringToObject(meta, "name", s->name);
    cJSON *labels = cJSON_AddObjectToObject(meta, "labels");
    cJSON_AddStringToObject(labels, "nodename", s->node);
    cJSON *ann = cJSON_AddObjectToObject(meta, "annotations");
    cJSON_AddStringToObject(ann, DRIVER_ANNOTATION, s->driver);
    if (node_uid) {
        cJSON *refs = cJSON_AddArrayToObject(meta, "ownerReferences");
        cJSON_AddItemToArray(refs, owner_ref(s->node, node_uid));
    }
    cJSON_AddObjectToObject(o, "spec");
    return o;
}

static const cJSON *get(const cJSON *o, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(o, key);
}

/* Serializes {"<top>": inner} and frees inner; NULL when inner is empty or on OOM. */
static char *wrap(const char *top, cJSON *inner)
{
    if (!inner || !inner->child) {
        cJSON_Delete(inner);
        return NULL;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, top, inner);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

/* The status fields of `want` that `have` lacks or differs in, and null for managed fields
 * `have` has and `want` does not. */
static cJSON *status_diff(const cJSON *want, const cJSON *have)
{
    cJSON *patch = cJSON_CreateObject();
    const cJSON *item;
    cJSON_ArrayForEach(item, want)
    {
        const cJSON *cur = get(have, item->string);
        if (!cur || !cJSON_Compare(item, cur, true))
            cJSON_AddItemToObject(patch, item->string, cJSON_Duplicate(item, true));
    }
    for (size_t i = 0; i < sizeof(managed) / sizeof(managed[0]); i++)
        if (get(have, managed[i]) && !get(want, managed[i]))
            cJSON_AddNullToObject(patch, managed[i]);
    return patch;
}

static bool has_owner(const cJSON *refs, const char *node, const char *node_uid)
{
    const cJSON *ref;
    cJSON_ArrayForEach(ref, refs)
    {
        const char *kind = cJSON_GetStringValue(get(ref, "kind"));
        const char *name = cJSON_GetStringValue(get(ref, "name"));
        const char *uid = cJSON_GetStringValue(get(ref, "uid"));
        if (kind && name && uid && strcmp(kind, "Node") == 0 && strcmp(name, node) == 0 &&
            strcmp(uid, node_uid) == 0)
            return true;
    }
    return false;
}

/* Other owners are kept; a Node reference with a stale uid is replaced. */
static cJSON *owners_with_node(const cJSON *refs, const char *node, const char *node_uid)
{
    cJSON *list = cJSON_CreateArray();
    const cJSON *ref;
    cJSON_ArrayForEach(ref, refs)
    {
        const char *kind = cJSON_GetStringValue(get(ref, "kind"));
        if (!kind || strcmp(kind, "Node") != 0)
            cJSON_AddItemToArray(list, cJSON_Duplicate(ref, true));
    }
    cJSON_AddItemToArray(list, owner_ref(node, node_uid));
    return list;
}

static cJSON *meta_diff(const struct pcidevice_spec *want, const cJSON *meta, const char *node_uid)
{
    cJSON *patch = cJSON_CreateObject();
    const char *label = cJSON_GetStringValue(get(get(meta, "labels"), "nodename"));
    if (!label || strcmp(label, want->node) != 0) {
        cJSON *labels = cJSON_AddObjectToObject(patch, "labels");
        cJSON_AddStringToObject(labels, "nodename", want->node);
    }
    const cJSON *refs = get(meta, "ownerReferences");
    if (node_uid && !has_owner(refs, want->node, node_uid))
        cJSON_AddItemToObject(patch, "ownerReferences",
                              owners_with_node(refs, want->node, node_uid));
    return patch;
}

int pcidevice_plan(const struct pcidevice_spec *want, const cJSON *have, const char *node_uid,
                   struct pcidevice_plan *ret)
{
    *ret = (struct pcidevice_plan){0};
    const cJSON *meta = get(have, "metadata");
    const char *uid = kube_meta_str(have, "uid");
    if (uid)
        (void)snprintf(ret->uid, sizeof(ret->uid), "%s", uid);
    if (!want) {
        ret->delete = have != NULL;
        return 0;
    }
    cJSON *status = pcidevice_status(want);
    if (!status)
        return -ENOMEM;
    ret->create = have == NULL;
    if (have)
        ret->meta_patch = wrap("metadata", meta_diff(want, meta, node_uid));
    ret->status_patch = wrap("status", status_diff(status, get(have, "status")));
    cJSON_Delete(status);
    return 0;
}

bool pcidevice_plan_empty(const struct pcidevice_plan *p)
{
    return !p->create && !p->delete &&!p->meta_patch && !p->status_patch;
}

void pcidevice_plan_done(struct pcidevice_plan *p)
{
    free(p->meta_patch);
    free(p->status_patch);
    *p = (struct pcidevice_plan){0};
}
