/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/dra/draslices.c - the agent's DRA ResourceSlices: the wanted pool and its write plan
 * (pure: no I/O, no logging), and the reconciler on the runner that carries it out. See
 * draslices.h.
 */
#include "controllers/dra/draslices.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/buf.h"
#include "base/json.h"
#include "base/log.h"
#include "base/map.h"
#include "base/metrics.h"
#include "base/names.h"
#include "controllers/devices/devobjs.h"
#include "controllers/devices/devwrite.h"
#include "controllers/devices/nodeuid.h"
#include "controllers/devices/pcidevice.h"
#include "controllers/health/health.h"
#include "controllers/objects/kinds.h"
#include "controllers/objects/mdevobj.h"
#include "controllers/runtime/manager.h"
#include "controllers/runtime/part.h"
#include "controllers/runtime/runner.h"
#include "kube/client.h"
#include "kube/informer.h"

static void draslices_free(void *userdata);

#define STD_PREFIX "resource.kubernetes.io/"

int draslices_device_name(const char *address, char *buf, size_t size)
{
    int n = snprintf(buf, size, "pci-%s", address);
    if (n < 0 || (size_t)n >= size)
        return -EINVAL;
    for (char *c = buf; *c; c++)
        if (*c == ':' || *c == '.')
            *c = '-';
    return names_is_dns_label(buf) ? 0 : -EINVAL;
}

/* `s` cut to the API's limit of a string attribute, never inside a UTF-8 sequence. */
static void cut(char out[DRASLICES_STRING_MAX + 1], const char *s)
{
    size_t n = strlen(s);
    if (n > DRASLICES_STRING_MAX) {
        n = DRASLICES_STRING_MAX;
        while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
            n--; /* s[n], the first byte left out, continues a character: leave that out too */
    }
    memcpy(out, s, n);
    out[n] = '\0';
}

static bool attr_str(cJSON *attrs, const char *name, const char *value)
{
    cJSON *a = cJSON_AddObjectToObject(attrs, name);
    return cJSON_AddStringToObject(a, "string", value) != NULL;
}

static bool attr_int(cJSON *attrs, const char *name, long long value)
{
    cJSON *a = cJSON_AddObjectToObject(attrs, name);
    return cJSON_AddNumberToObject(a, "int", (double)value) != NULL;
}

cJSON *draslices_device(const struct pcidevice_spec *s)
{
    char name[64], desc[DRASLICES_STRING_MAX + 1];
    if (draslices_device_name(s->address, name, sizeof(name)) < 0)
        return NULL;
    cJSON *d = cJSON_CreateObject();
    bool ok = cJSON_AddStringToObject(d, "name", name) != NULL;
    cJSON *attrs = cJSON_AddObjectToObject(d, "attributes");
    ok = ok && attrs;
    ok = attr_str(attrs, STD_PREFIX "pciBusID", s->address) && ok;
    if (s->pcie_root[0])
        ok = attr_str(attrs, STD_PREFIX "pcieRoot", s->pcie_root) && ok;
    if (s->numa_node >= 0)
        ok = attr_int(attrs, STD_PREFIX "numaNode", s->numa_node) && ok;
    ok = attr_str(attrs, "vendorID", s->vendor_id) && ok;
    ok = attr_str(attrs, "deviceID", s->device_id) && ok;
    ok = attr_str(attrs, "classID", s->class_id) && ok;
    if (s->iommu_group[0])
        ok = attr_int(attrs, "iommuGroup", strtoll(s->iommu_group, NULL, 10)) && ok;
    ok = attr_str(attrs, "driver", s->driver) && ok;
    /* "" when unknown, as driver: a selector on them never meets a missing attribute */
    ok = attr_str(attrs, "serialNumber", s->serial) && ok;
    ok = attr_str(attrs, "physicalSlot", s->slot) && ok;
    if (s->physfn[0]) /* an SR-IOV VF: "a VF of this PF" is a selector on these */
        ok = attr_str(attrs, "sriovPhysicalFunction", s->physfn) && ok;
    if (s->physfn[0] && s->sriov_vf_index >= 0)
        ok = attr_int(attrs, "sriovVFIndex", s->sriov_vf_index) && ok;
    cut(desc, s->description);
    ok = attr_str(attrs, "description", desc) && ok;
    if (!ok) {
        cJSON_Delete(d);
        return NULL;
    }
    return d;
}

int draslices_mdev_name(const char *uuid, char *buf, size_t size)
{
    int n = snprintf(buf, size, "mdev-%s", uuid ? uuid : "");
    if (n < 0 || (size_t)n >= size)
        return -EINVAL;
    return names_is_dns_label(buf) && n > 5 ? 0 : -EINVAL;
}

cJSON *draslices_mdev_device(const struct draslices_mdev *m)
{
    char name[64], type_name[DRASLICES_STRING_MAX + 1];
    if (draslices_mdev_name(m->uuid, name, sizeof(name)) < 0 || !m->type || m->iommu_group < 0)
        return NULL;
    cJSON *d = cJSON_CreateObject();
    bool ok = cJSON_AddStringToObject(d, "name", name) != NULL;
    cJSON *attrs = cJSON_AddObjectToObject(d, "attributes");
    ok = ok && attrs;
    ok = attr_str(attrs, DRASLICES_KUBEVIRT_MDEV_UUID, m->uuid) && ok;
    ok = attr_str(attrs, "mdevUUID", m->uuid) && ok; /* the key KubeVirt v1.9.0's launcher reads */
    ok = attr_str(attrs, "mdevType", m->type) && ok;
    cut(type_name, m->type_name ? m->type_name : "");
    ok = attr_str(attrs, "mdevTypeName", type_name) && ok;
    ok = attr_str(attrs, "mdevParent", m->parent ? m->parent : "") && ok;
    ok = attr_int(attrs, "iommuGroup", m->iommu_group) && ok;
    /* the attributes every PCI function has, empty, so a selector on them meets no missing
     * attribute (a CEL error) */
    static const char *const empty[] = {"vendorID",     "deviceID",     "classID",    "driver",
                                        "serialNumber", "physicalSlot", "description"};
    for (size_t i = 0; i < sizeof(empty) / sizeof(empty[0]); i++)
        ok = attr_str(attrs, empty[i], "") && ok;
    if (!ok) {
        cJSON_Delete(d);
        return NULL;
    }
    return d;
}

/* --- the plan --------------------------------------------------------------------------------- */

static int compare_specs(const void *a, const void *b)
{
    const struct pcidevice_spec *const *x = a, *const *y = b;
    return strcmp((*x)->address, (*y)->address);
}

/* Classes never offered to DRA, whatever their blockers say: a class-wide selector ("any
 * device of the driver") must not be able to take the platform's bridges or SMBus controller. */
static bool platform_class(const char *class_id)
{
    static const char *const never[] = {"0600", "0601", "0604", "0c05"};
    for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++)
        if (strncmp(class_id, never[i], 4) == 0)
            return true;
    return false;
}

static const char *effect_of(const struct draslices_input *in)
{
    return in->taint_effect ? in->taint_effect : DRASLICES_TAINT_EFFECT;
}

/* The timeAdded the cached slices give device `name`'s taint of `value` (and the effect of now),
 * or NULL: a taint keeps its time (an agent restarted with the same state writes nothing). */
static const char *cached_taint_time(const struct draslices_input *in, const char *name,
                                     const char *value)
{
    for (size_t i = 0; i < in->n_slices; i++) {
        const cJSON *d, *t;
        cJSON_ArrayForEach(d, json_field(json_field(in->slices[i], "spec"), "devices"))
        {
            if (!json_same(json_str(d, "name"), name))
                continue;
            cJSON_ArrayForEach(t, json_field(d, "taints"))
            {
                if (json_same(json_str(t, "key"), DRASLICES_TAINT_KEY) &&
                    json_same(json_str(t, "value"), value) &&
                    json_same(json_str(t, "effect"), effect_of(in)))
                    return json_str(t, "timeAdded");
            }
        }
    }
    return NULL;
}

/* Taints pool entry `d` when the PCI function at `address` (NULL: none) is unhealthy: key
 * DRASLICES_TAINT_KEY, the health reason as value, the input's effect, timeAdded when the store
 * found it (or the time the cached slice already says). Sets *tainted then. Returns false on
 * OOM. */
static bool taint(const struct draslices_input *in, cJSON *d, const char *address, bool *tainted)
{
    const struct health_state *s =
            in->unhealthy && address ? map_get(in->unhealthy, address) : NULL;
    if (!s)
        return true;
    char when[32] = "";
    const char *have = cached_taint_time(in, json_str(d, "name"), s->reason);
    if (have) {
        (void)snprintf(when, sizeof(when), "%s", have);
    } else {
        struct tm tm;
        time_t t = (time_t)s->since;
        if (gmtime_r(&t, &tm))
            (void)strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    }
    cJSON *list = cJSON_AddArrayToObject(d, "taints"), *one = cJSON_CreateObject();
    if (!list || !one || !cJSON_AddItemToArray(list, one)) {
        cJSON_Delete(one);
        return false;
    }
    bool ok = cJSON_AddStringToObject(one, "key", DRASLICES_TAINT_KEY) &&
              cJSON_AddStringToObject(one, "value", s->reason) &&
              cJSON_AddStringToObject(one, "effect", effect_of(in)) &&
              cJSON_AddStringToObject(one, "timeAdded", when);
    *tainted = true;
    return ok;
}

/* Adds entry `d` (taken; NULL: left out) to `list`, tainted when the PCI function at `address`
 * is unhealthy. Returns false on OOM (then `list` is freed). */
static bool add_device(const struct draslices_input *in, cJSON *list, cJSON *d, const char *address,
                       bool *tainted)
{
    if (!d)
        return true;
    if (!taint(in, d, address, tainted) || !cJSON_AddItemToArray(list, d)) {
        cJSON_Delete(d);
        cJSON_Delete(list);
        return false;
    }
    return true;
}

/* The pool's devices in address order: those of the scan no blocker stops and no claim holds,
 * bridges and the SMBus controller left out; the unhealthy ones tainted (*ret_tainted). */
static int wanted_devices(const struct draslices_input *in, cJSON **ret, bool *ret_tainted)
{
    size_t n = map_size(in->devices), k = 0, pos = 0;
    const struct pcidevice_spec **v = calloc(n ? n : 1, sizeof(struct pcidevice_spec *));
    cJSON *list = cJSON_CreateArray();
    void *val;
    while (v && list && map_next(in->devices, &pos, NULL, &val)) {
        const struct pcidevice_spec *s = val;
        if (s->n_blockers == 0 && !platform_class(s->class_id) &&
            !(in->claimed && map_contains(in->claimed, s->address)))
            v[k++] = s;
    }
    if (v)
        qsort(v, k, sizeof(struct pcidevice_spec *), compare_specs);
    *ret_tainted = false;
    for (size_t i = 0; v && list && i < k; i++) {
        cJSON *d = draslices_device(v[i]);
        if (!d)
            cJSON_Delete(list);
        if (!d || !add_device(in, list, d, v[i]->address, ret_tainted))
            list = NULL;
    }
    free(v);
    /* then the mdev instances, in the caller's (UUID) order; one that cannot be told (no group
     * yet) is left out; one of an unhealthy PCI parent is tainted */
    for (size_t i = 0; list && i < in->n_mdevs; i++)
        if (!add_device(in, list, draslices_mdev_device(&in->mdevs[i]), in->mdevs[i].parent,
                        ret_tainted))
            list = NULL;
    if (!list)
        return -ENOMEM;
    *ret = list;
    return 0;
}

static int slice_name(const char *node, size_t i, char *buf, size_t size)
{
    int n = snprintf(buf, size, "%s-vfio-pci-%zu", node, i);
    if (n < 0 || (size_t)n >= size || n > 253)
        return -ENAMETOOLONG;
    return 0;
}

static const cJSON *cached(const struct draslices_input *in, const char *name)
{
    for (size_t i = 0; i < in->n_slices; i++) {
        const char *have = kube_meta_str(in->slices[i], "name");
        if (have && strcmp(have, name) == 0)
            return in->slices[i];
    }
    return NULL;
}

static bool same_devices(const cJSON *have_spec, const cJSON *want)
{
    const cJSON *have = json_field(have_spec, "devices");
    if (!have || cJSON_IsNull(have))
        return cJSON_GetArraySize(want) == 0;
    return cJSON_Compare(have, want, true);
}

static long long pool_number(const cJSON *slice, const char *field)
{
    const cJSON *v = json_field(json_field(json_field(slice, "spec"), "pool"), field);
    return cJSON_IsNumber(v) ? (long long)v->valuedouble : -1;
}

/* The generation the pool gets: the cached one while its content is as wanted (every cached
 * slice wanted, all of one generation, with the wanted devices and slice count), else the
 * highest cached + 1. */
static long long generation(const struct draslices_input *in, cJSON *const *chunks, size_t count)
{
    long long max = 0, first = in->n_slices ? pool_number(in->slices[0], "generation") : 0;
    bool same = in->n_slices == count;
    for (size_t i = 0; i < in->n_slices; i++) {
        long long g = pool_number(in->slices[i], "generation");
        if (g > max)
            max = g;
        same = same && g == first &&
               pool_number(in->slices[i], "resourceSliceCount") == (long long)count;
    }
    for (size_t i = 0; same && i < count; i++) {
        char name[300];
        const cJSON *have =
                slice_name(in->node, i, name, sizeof(name)) == 0 ? cached(in, name) : NULL;
        same = have && same_devices(json_field(have, "spec"), chunks[i]);
    }
    return same ? first : max + 1;
}

static cJSON *slice_spec(const struct draslices_input *in, const cJSON *devices, long long gen,
                         size_t count, bool patch)
{
    cJSON *spec = cJSON_CreateObject();
    cJSON_AddStringToObject(spec, "driver", DRASLICES_DRIVER);
    cJSON_AddStringToObject(spec, "nodeName", in->node);
    cJSON *pool = cJSON_AddObjectToObject(spec, "pool");
    cJSON_AddStringToObject(pool, "name", in->node);
    cJSON_AddNumberToObject(pool, "generation", (double)gen);
    cJSON_AddNumberToObject(pool, "resourceSliceCount", (double)count);
    if (cJSON_GetArraySize(devices) > 0)
        cJSON_AddItemToObject(spec, "devices", cJSON_Duplicate(devices, true));
    else if (patch)
        cJSON_AddNullToObject(spec, "devices"); /* a merge patch removes them */
    return spec;
}

static bool spec_differs(const cJSON *have, const cJSON *want)
{
    const cJSON *hs = json_field(have, "spec");
    static const char *const fields[] = {"driver", "nodeName", "pool"};
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        const cJSON *h = json_field(hs, fields[i]);
        if (!h || !cJSON_Compare(h, json_field(want, fields[i]), true))
            return true;
    }
    const cJSON *wd = json_field(want, "devices");
    return !same_devices(hs, cJSON_IsArray(wd) ? wd : NULL);
}

/* The write of slice `i` (CREATE or PATCH), or none (w->body NULL) when it is as wanted. */
static int plan_slice(const struct draslices_input *in, size_t i, const cJSON *devices,
                      long long gen, size_t count, struct draslices_write *w)
{
    *w = (struct draslices_write){0};
    int r = slice_name(in->node, i, w->name, sizeof(w->name));
    if (r < 0)
        return r;
    const cJSON *have = cached(in, w->name);
    cJSON *spec = slice_spec(in, devices, gen, count, have != NULL);
    if (!have) {
        w->verb = DRASLICES_CREATE;
        w->body = devwrite_new_object("ResourceSlice", w->name, in->node, in->node_uid);
        cJSON_ReplaceItemInObjectCaseSensitive(w->body, "apiVersion",
                                               cJSON_CreateString("resource.k8s.io/v1"));
        if (!w->body || !spec) {
            cJSON_Delete(spec);
            cJSON_Delete(w->body);
            w->body = NULL;
            return -ENOMEM;
        }
        cJSON_ReplaceItemInObjectCaseSensitive(w->body, "spec", spec);
        return 0;
    }
    cJSON *meta = devwrite_meta_diff(json_field(have, "metadata"), in->node, in->node_uid);
    if ((!meta || !meta->child) && !spec_differs(have, spec)) {
        cJSON_Delete(meta);
        cJSON_Delete(spec);
        return 0;
    }
    w->verb = DRASLICES_PATCH;
    w->body = cJSON_CreateObject();
    if (!w->body || !meta || !spec) {
        cJSON_Delete(meta);
        cJSON_Delete(spec);
        cJSON_Delete(w->body);
        w->body = NULL;
        return -ENOMEM;
    }
    cJSON_AddStringToObject(meta, "resourceVersion", kube_meta_str(have, "resourceVersion"));
    cJSON_AddItemToObject(w->body, "metadata", meta);
    cJSON_AddItemToObject(w->body, "spec", spec);
    return 0;
}

/* Deletes of the cached slices that are not wanted (index >= count, or a name not ours). */
static int plan_deletes(const struct draslices_input *in, size_t count, struct draslices_plan *p)
{
    for (size_t i = 0; i < in->n_slices; i++) {
        const char *name = kube_meta_str(in->slices[i], "name");
        const char *uid = kube_meta_str(in->slices[i], "uid");
        bool wanted = false;
        for (size_t k = 0; name && !wanted && k < count; k++) {
            char want[300];
            wanted = slice_name(in->node, k, want, sizeof(want)) == 0 && strcmp(want, name) == 0;
        }
        if (!name || wanted)
            continue;
        struct draslices_write *w = &p->writes[p->n++];
        *w = (struct draslices_write){.verb = DRASLICES_DELETE};
        (void)snprintf(w->name, sizeof(w->name), "%s", name);
        (void)snprintf(w->uid, sizeof(w->uid), "%s", uid ? uid : "");
    }
    return 0;
}

/* Splits `devs` (taken) into `count` arrays of at most `per` devices. */
static cJSON **split(cJSON *devs, size_t count, size_t per)
{
    cJSON **chunks = calloc(count, sizeof(cJSON *));
    for (size_t i = 0; chunks && i < count; i++) {
        chunks[i] = cJSON_CreateArray();
        for (size_t k = 0; chunks[i] && k < per && cJSON_GetArraySize(devs) > 0; k++)
            cJSON_AddItemToArray(chunks[i], cJSON_DetachItemFromArray(devs, 0));
    }
    cJSON_Delete(devs);
    return chunks;
}

static void free_chunks(cJSON **chunks, size_t count)
{
    for (size_t i = 0; chunks && i < count; i++)
        cJSON_Delete(chunks[i]);
    free(chunks);
}

int draslices_plan(const struct draslices_input *in, struct draslices_plan *ret)
{
    *ret = (struct draslices_plan){0};
    cJSON *devs = NULL;
    bool tainted = false;
    int r = wanted_devices(in, &devs, &tainted);
    if (r < 0)
        return r;
    /* the API holds fewer devices in a slice when any of its devices has taints: the whole pool
     * is cut so then */
    size_t per = tainted ? DRASLICES_MAX_TAINTED : DRASLICES_MAX_DEVICES;
    size_t n_devs = (size_t)cJSON_GetArraySize(devs);
    size_t count = n_devs ? (n_devs + per - 1) / per : 1;
    cJSON **chunks = split(devs, count, per);
    ret->writes = chunks ? calloc(count + in->n_slices, sizeof(*ret->writes)) : NULL;
    if (!ret->writes) {
        free_chunks(chunks, count);
        return -ENOMEM;
    }
    ret->generation = generation(in, chunks, count);
    ret->devices = n_devs;
    r = plan_deletes(in, count, ret);
    for (size_t i = 0; r == 0 && i < count; i++) {
        r = plan_slice(in, i, chunks[i], ret->generation, count, &ret->writes[ret->n]);
        if (r == 0 && ret->writes[ret->n].body)
            ret->n++;
    }
    free_chunks(chunks, count);
    if (r < 0)
        draslices_plan_done(ret);
    return r;
}

void draslices_plan_done(struct draslices_plan *p)
{
    for (size_t i = 0; p->writes && i < p->n; i++)
        cJSON_Delete(p->writes[i].body);
    free(p->writes);
    *p = (struct draslices_plan){0};
}

/* --- the reconciler ---------------------------------------------------------------------------
 * Not pure: it carries plans out on the runner, one write at a time, each logged. */

struct draslices {
    struct draslices_config cfg;
    const struct health *health;       /* the node's device health (health/health.h), or NULL */
    struct kube_informer *pci_devices; /* this node's PCIDevices: the store's states come back
                                          from them after a restart */
    struct runner *runner;
    struct metrics_series *writes[DEVWRITE_VERBS];
};

struct job {
    struct draslices *s;
    struct runner_job *rj;
    struct draslices_plan plan;
    size_t next;
};

static void job_free(void *p)
{
    struct job *j = p;
    draslices_plan_done(&j->plan);
    free(j);
}

/* The PCI addresses another path has: this node's PCIDeviceClaims hold them (a claim being
 * deleted still does), or they are the parents of this node's mediated device instances (the
 * VGPUDevices that say so: mdevobj_pci_parent_in_use). */
static struct map *claimed(const struct draslices *s)
{
    struct map *m = map_new(NULL);
    size_t pos = 0;
    const char *key;
    const cJSON *claim, *vgpu;
    while (m && kube_informer_next(s->cfg.claims, &pos, &key, &claim)) {
        const cJSON *spec = json_field(claim, "spec");
        const char *address = json_str(spec, "address");
        const char *node = json_str(spec, "nodeName");
        if (address && node && strcmp(node, s->cfg.env.node_name) == 0 &&
            map_put(m, address, (void *)s) < 0)
            m = map_free(m);
    }
    pos = 0;
    while (m && kube_informer_next(s->cfg.vgpus, &pos, &key, &vgpu)) {
        const char *parent = mdevobj_pci_parent_in_use(vgpu);
        if (parent &&
            json_same(json_str(json_field(vgpu, "spec"), "nodeName"), s->cfg.env.node_name) &&
            map_put(m, parent, (void *)s) < 0)
            m = map_free(m);
    }
    return m;
}

static int compare_mdevs(const void *a, const void *b)
{
    return strcmp(((const struct draslices_mdev *)a)->uuid,
                  ((const struct draslices_mdev *)b)->uuid);
}

/* The type name of type `id` in a VGPUDevice's status.mdevTypes, or NULL. */
static const char *name_of_type(const cJSON *st, const char *id)
{
    const cJSON *t;
    cJSON_ArrayForEach(t, json_field(st, "mdevTypes"))
    {
        if (json_same(json_str(t, "id"), id))
            return json_str(t, "name");
    }
    return NULL;
}

bool draslices_mdev_of(const cJSON *vgpu, const char *node, struct draslices_mdev *ret)
{
    const cJSON *spec = json_field(vgpu, "spec"), *st = json_field(vgpu, "status");
    const char *uuid = NULL, *parent = json_str(spec, "parentGPUDeviceAddress");
    const char *type = json_str(st, "configureVGPUTypeName");
    if (!json_same(json_str(spec, "nodeName"), node) || !mdevobj_offered(vgpu, &uuid, NULL) ||
        !type)
        return false;
    *ret = (struct draslices_mdev){.uuid = uuid,
                                   .type = type,
                                   .type_name = name_of_type(st, type),
                                   .parent = parent ? parent : json_str(spec, "address"),
                                   .iommu_group = mdevobj_iommu_group(vgpu)};
    return true;
}

/* The instances this node's VGPUDevices say exist, in UUID order (strings borrowed from the
 * cache). NULL on OOM. */
static struct draslices_mdev *instances(const struct draslices *s, size_t *ret_n)
{
    size_t n = 0, pos = 0;
    const char *key;
    const cJSON *o;
    struct draslices_mdev *v = calloc(kube_informer_size(s->cfg.vgpus) + 1, sizeof(*v));
    while (v && kube_informer_next(s->cfg.vgpus, &pos, &key, &o))
        if (draslices_mdev_of(o, s->cfg.env.node_name, &v[n]))
            n++;
    if (v)
        qsort(v, n, sizeof(*v), compare_mdevs);
    *ret_n = n;
    return v;
}

/* The node's unhealthy devices: address -> struct health_state (copies). NULL on OOM. */
static struct map *unhealthy(const struct draslices *s)
{
    size_t n = 0;
    const char *const *v = health_unhealthy(s->health, &n);
    struct map *m = map_new(free);
    for (size_t i = 0; m && i < n; i++) {
        struct health_state *st = malloc(sizeof(*st));
        if (!st || health_get(s->health, v[i], st) || map_put(m, v[i], st) < 0)
            free(st);
    }
    return m;
}

static const cJSON **cached_slices(const struct draslices *s, size_t *ret_n)
{
    struct kube_informer *inf = runner_informer(s->runner);
    const cJSON **v = calloc(kube_informer_size(inf) + 1, sizeof(cJSON *));
    size_t pos = 0, n = 0;
    const char *key;
    const cJSON *obj;
    while (v && kube_informer_next(inf, &pos, &key, &obj))
        v[n++] = obj;
    *ret_n = n;
    return v;
}

static int plan_key(void *ctx, const char *key, const cJSON *obj, void **ret_plan)
{
    struct draslices *s = ctx;
    (void)obj;
    *ret_plan = NULL;
    if (strcmp(key, s->cfg.env.node_name) != 0)
        return 0; /* a slice's own key: its event queued the pool */
    struct draslices_input in = {.node = s->cfg.env.node_name,
                                 .node_uid = nodeuid_get(s->cfg.node),
                                 .devices = devobjs_want(s->cfg.devices),
                                 .claimed = claimed(s),
                                 .unhealthy = unhealthy(s),
                                 .taint_effect =
                                         s->cfg.env.opt ? s->cfg.env.opt->taint_effect : NULL};
    const cJSON **slices = cached_slices(s, &in.n_slices);
    struct draslices_mdev *mdevs = instances(s, &in.n_mdevs);
    in.slices = slices;
    in.mdevs = mdevs;
    struct job *j = calloc(1, sizeof(*j));
    int r = j && slices && mdevs && in.claimed && in.unhealthy ? draslices_plan(&in, &j->plan)
                                                               : -ENOMEM;
    free(slices);
    free(mdevs);
    map_free((struct map *)in.claimed);
    map_free((struct map *)in.unhealthy);
    if (r < 0 || j->plan.n == 0) {
        if (j)
            job_free(j);
        return r;
    }
    j->s = s;
    *ret_plan = j;
    return 0;
}

static void write_next(struct job *j);

static void on_write(const struct kube_err *err, const cJSON *obj, void *userdata)
{
    struct job *j = userdata;
    const struct draslices_write *w = &j->plan.writes[j->next - 1];
    bool deleting = w->verb == DRASLICES_DELETE;
    if (err && !(deleting && kube_err_is_not_found(err))) {
        bool stale = kube_err_is_conflict(err);
        if (stale)
            log_info("ResourceSlice changed meanwhile; planning again", KV_STR("name", w->name));
        else
            log_error("Failed to write ResourceSlice", KV_STR("name", w->name),
                      KV_INT("http", err->http), KV_STR("reason", err->reason),
                      KV_STR("message", err->message));
        runner_job_done(j->rj, stale ? RUNNER_STALE : RUNNER_RETRY, 0);
        return;
    }
    runner_job_wrote(j->rj, deleting ? NULL : obj);
    write_next(j);
}

static int write_one(struct job *j, const struct draslices_write *w)
{
    struct kube_http *h = j->s->cfg.env.http;
    const struct kube_resource *res = &kube_res_resourceslices;
    if (w->verb == DRASLICES_DELETE) {
        metrics_inc(j->s->writes[DEVWRITE_DELETE]);
        log_info("Deleting ResourceSlice", KV_STR("name", w->name));
        return kube_client_delete(h, res, NULL, w->name, w->uid[0] ? w->uid : NULL, NULL, on_write,
                                  j);
    }
    bool create = w->verb == DRASLICES_CREATE;
    metrics_inc(j->s->writes[create ? DEVWRITE_CREATE : DEVWRITE_PATCH]);
    log_info(create ? "Creating ResourceSlice" : "Updating ResourceSlice", KV_STR("name", w->name),
             KV_INT("generation", j->plan.generation), KV_INT("poolDevices", j->plan.devices));
    if (create)
        return kube_client_create(h, res, NULL, w->body, on_write, j);
    char *patch = cJSON_PrintUnformatted(w->body);
    int e = patch ? kube_client_patch(h, res, NULL, w->name, KUBE_PATCH_MERGE, patch, false,
                                      on_write, j)
                  : -ENOMEM;
    cJSON_free(patch);
    return e;
}

static void write_next(struct job *j)
{
    if (j->next >= j->plan.n) {
        runner_job_done(j->rj, RUNNER_DONE, 0);
        return;
    }
    const struct draslices_write *w = &j->plan.writes[j->next++];
    int e = write_one(j, w);
    if (e < 0) {
        log_error("Cannot start a request", KV_STR("kind", "ResourceSlice"),
                  KV_STR("name", w->name), KV_ERRNO(e));
        runner_job_done(j->rj, RUNNER_RETRY, 0);
    }
}

static void act(struct runner_job *job, void *plan, void *ctx)
{
    struct job *j = plan;
    (void)ctx;
    j->rj = job;
    write_next(j);
}

static void on_event(void *ctx, const char *key, const cJSON *obj, enum runner_event ev)
{
    struct draslices *s = ctx;
    (void)key;
    (void)obj;
    (void)ev;
    runner_enqueue(s->runner, s->cfg.env.node_name);
}

/* Not before a scan (an empty one would empty the pool), the claims are known (a claimed
 * device would join the pool for a moment) and the PCIDevices listed (the health store takes
 * the unhealthy devices' states back from them: an unhealthy device would lose its taint for a
 * moment, and get a new timeAdded). */
static bool can_start(void *ctx)
{
    const struct draslices *s = ctx;
    return devobjs_want(s->cfg.devices) && s->cfg.claims &&
           (!s->pci_devices || kube_informer_has_synced(s->pci_devices)) &&
           kube_informer_has_synced(s->cfg.claims) && s->cfg.vgpus &&
           kube_informer_has_synced(s->cfg.vgpus) && nodeuid_answered(s->cfg.node);
}

static const struct runner_ops ops = {
        .plan = plan_key,
        .act = act,
        .plan_free = job_free,
        .on_event = on_event,
        .can_start = can_start,
        .kind = "ResourceSlice",
        .unconverged = "the ResourceSlices are not written yet",
};

/* --- the reconciler's life ------------------------------------------------------------------ */

/* This node's ResourceSlices of our driver. */
static const struct cache_kind kind_slices = {.name = "resourceslices",
                                              .res = &kube_res_resourceslices,
                                              .node_field = "spec.nodeName",
                                              .field = "spec.driver=" DRASLICES_DRIVER};

struct draslices *draslices_new(const struct draslices_config *cfg)
{
    struct draslices *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->cfg = *cfg;
    s->health = manager_part(cfg->env.mgr, &health_part);
    s->pci_devices = manager_cache(cfg->env.mgr, &kind_pcidevices);
    struct runner_config rc = {
            .name = "resourceslice",
            .loop = cfg->env.loop,
            .http = cfg->env.http,
            .max_in_flight = 1,
            .metrics = cfg->env.metrics,
            .ops = &ops,
            .ctx = s,
    };
    s->runner = manager_runner(cfg->env.mgr, &kind_slices, &rc);
    if (!s->runner) {
        draslices_free(s);
        return NULL;
    }
    devwrite_register(cfg->env.metrics, "ResourceSlice", s->writes);
    return s;
}

static int draslices_start(void *self)
{
    struct draslices *s = self;
    int r = runner_start(s->runner);
    if (r == 0)
        draslices_sync(s);
    return r;
}

void draslices_sync(struct draslices *s)
{
    if (s && s->runner)
        runner_enqueue(s->runner, s->cfg.env.node_name);
}

static void draslices_free(void *userdata)
{
    struct draslices *s = userdata;
    if (!s)
        return;
    s->runner = runner_free(s->runner);
    free(s);
}

static struct runner *part_runner(const void *self)
{
    return ((const struct draslices *)self)->runner;
}

static void on_change(void *self, const struct watch_event *ev)
{
    (void)ev;
    draslices_sync(self);
}

static void *make(const struct part_env *env)
{
    struct draslices_config c = {.env = *env,
                                 .node = manager_part(env->mgr, &nodeuid_part),
                                 .devices = manager_part(env->mgr, &pcidevices_part),
                                 .claims = manager_cache(env->mgr, &kind_pcideviceclaims),
                                 .vgpus = manager_cache(env->mgr, &kind_vgpudevices)};
    return draslices_new(&c);
}

/* A scan (a device came or went), a claim (a claimed device leaves the pool), a VGPUDevice (an
 * instance made or removed), the Node's uid (the slices' owner). */
static const struct watch watches[] = {
        {.topic = &pcidevices_scanned, .map = on_change},
        {.kind = &kind_pcideviceclaims, .map = on_change},
        {.kind = &kind_vgpudevices, .map = on_change},
        {.topic = &nodeuid_known, .map = on_change},
        {.topic = &health_changed, .map = on_change}, /* a device's taint */
        {0},
};

const struct part_ops draslices_part = {.name = "resourceslices",
                                        .make = make,
                                        .watches = watches,
                                        .runner = part_runner,
                                        .start = draslices_start,
                                        .free = draslices_free};
