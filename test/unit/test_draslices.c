/* SPDX-License-Identifier: Apache-2.0 */
/* test/unit/test_draslices.c - the DRA pool's wanted slices and their write plan. */
#include <CUnit/CUnit.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/map.h"
#include "controllers/devices/pcidevice.h"
#include "controllers/dra/draslices.h"
#include "controllers/health/health.h"

#define NODE     "titan"
#define NODE_UID "node-uid-1"

static struct pcidevice_spec *dev(const char *address, const char *class_id, int numa)
{
    struct pcidevice_spec *s = calloc(1, sizeof(*s));
    (void)snprintf(s->address, sizeof(s->address), "%s", address);
    (void)snprintf(s->name, sizeof(s->name), NODE "-%s", address);
    (void)snprintf(s->vendor_id, sizeof(s->vendor_id), "8086");
    (void)snprintf(s->device_id, sizeof(s->device_id), "1521");
    (void)snprintf(s->class_id, sizeof(s->class_id), "%s", class_id);
    (void)snprintf(s->iommu_group, sizeof(s->iommu_group), "13");
    (void)snprintf(s->driver, sizeof(s->driver), "igb");
    (void)snprintf(s->pcie_root, sizeof(s->pcie_root), "pci0000:00");
    (void)snprintf(s->description, sizeof(s->description), "Ethernet controller: I350");
    s->numa_node = numa;
    return s;
}

static void put(struct map *m, struct pcidevice_spec *s)
{
    CU_ASSERT_EQUAL(map_put(m, s->name, s), 0);
}

/* The cached slices: what the API server would hold after a plan's writes. */
struct cache {
    cJSON *slices[16];
    size_t n;
    int rv;
};

static cJSON *find(struct cache *c, const char *name, size_t *ret_i)
{
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(cJSON_GetObjectItemCaseSensitive(
                           cJSON_GetObjectItemCaseSensitive(c->slices[i], "metadata"), "name")
                           ->valuestring,
                   name) == 0) {
            *ret_i = i;
            return c->slices[i];
        }
    return NULL;
}

static void set_rv(cJSON *o, struct cache *c)
{
    char rv[16];
    (void)snprintf(rv, sizeof(rv), "%d", ++c->rv);
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(o, "metadata");
    cJSON_DeleteItemFromObjectCaseSensitive(meta, "resourceVersion");
    cJSON_AddStringToObject(meta, "resourceVersion", rv);
}

/* RFC 7386 on `target` (changed in place). */
static void merge(cJSON *target, const cJSON *patch)
{
    const cJSON *p;
    cJSON_ArrayForEach(p, patch)
    {
        cJSON *t = cJSON_GetObjectItemCaseSensitive(target, p->string);
        if (cJSON_IsNull(p))
            cJSON_DeleteItemFromObjectCaseSensitive(target, p->string);
        else if (cJSON_IsObject(p) && cJSON_IsObject(t))
            merge(t, p);
        else if (t)
            cJSON_ReplaceItemInObjectCaseSensitive(target, p->string, cJSON_Duplicate(p, true));
        else
            cJSON_AddItemToObject(target, p->string, cJSON_Duplicate(p, true));
    }
}

/* Applies a plan's writes to the cache as the API server would. */
static void apply(struct cache *c, const struct draslices_plan *p)
{
    for (size_t k = 0; k < p->n; k++) {
        const struct draslices_write *w = &p->writes[k];
        size_t i = 0;
        cJSON *have = find(c, w->name, &i);
        if (w->verb == DRASLICES_CREATE) {
            CU_ASSERT_PTR_NULL(have);
            cJSON *o = cJSON_Duplicate(w->body, true);
            cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(o, "metadata"), "uid",
                                    w->name);
            set_rv(o, c);
            c->slices[c->n++] = o;
        } else if (w->verb == DRASLICES_PATCH) {
            CU_ASSERT_PTR_NOT_NULL_FATAL(have);
            merge(have, w->body);
            set_rv(have, c);
        } else {
            CU_ASSERT_PTR_NOT_NULL_FATAL(have);
            cJSON_Delete(have);
            c->slices[i] = c->slices[--c->n];
        }
    }
}

static void cache_free(struct cache *c)
{
    for (size_t i = 0; i < c->n; i++)
        cJSON_Delete(c->slices[i]);
    c->n = 0;
}

/* The mdev instances the next plans see (test_mdev_pool). */
static const struct draslices_mdev *g_mdevs;
static size_t g_n_mdevs;
/* The unhealthy devices the next plans see (test_taints), and their taint's effect. */
static const struct map *g_unhealthy;
static const char *g_effect;

static int plan(struct cache *c, const struct map *devs, const struct map *claimed, const char *uid,
                struct draslices_plan *p)
{
    struct draslices_input in = {.node = NODE,
                                 .node_uid = uid,
                                 .devices = devs,
                                 .claimed = claimed,
                                 .unhealthy = g_unhealthy,
                                 .taint_effect = g_effect,
                                 .mdevs = g_mdevs,
                                 .n_mdevs = g_n_mdevs,
                                 .slices = (const cJSON *const *)c->slices,
                                 .n_slices = c->n};
    return draslices_plan(&in, p);
}

/* Plans, applies and checks the number of writes; returns the generation. */
static long long step(struct cache *c, const struct map *devs, const struct map *claimed,
                      size_t writes)
{
    struct draslices_plan p;
    CU_ASSERT_EQUAL_FATAL(plan(c, devs, claimed, NODE_UID, &p), 0);
    CU_ASSERT_EQUAL(p.n, writes);
    apply(c, &p);
    long long g = p.generation;
    draslices_plan_done(&p);
    return g;
}

static const cJSON *slice_devices(struct cache *c, const char *name)
{
    size_t i;
    cJSON *s = find(c, name, &i);
    return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(s, "spec"), "devices");
}

static const cJSON *attr(const cJSON *device, const char *name)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(device, "attributes"), name);
    const cJSON *v = a ? a->child : NULL;
    return v;
}

static void test_device_name(void)
{
    char buf[64];
    CU_ASSERT_EQUAL(draslices_device_name("0000:65:00.0", buf, sizeof(buf)), 0);
    CU_ASSERT_STRING_EQUAL(buf, "pci-0000-65-00-0");
    CU_ASSERT_EQUAL(draslices_device_name("10000:01:1f.7", buf, sizeof(buf)), 0);
    CU_ASSERT_STRING_EQUAL(buf, "pci-10000-01-1f-7");
    CU_ASSERT_EQUAL(draslices_device_name("0000:65:00.0", buf, 8), -EINVAL);
}

static void test_attributes(void)
{
    struct pcidevice_spec *s = dev("0000:65:00.0", "0200", -1);
    /* 60 ASCII bytes, then "é" (2 bytes) three times: 66 bytes; the cut keeps 2 whole "é" */
    (void)snprintf(s->description, sizeof(s->description), "%060d\xc3\xa9\xc3\xa9\xc3\xa9", 0);
    s->driver[0] = '\0';
    cJSON *d = draslices_device(s);
    CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, "name")),
                           "pci-0000-65-00-0");
    CU_ASSERT_STRING_EQUAL(attr(d, "resource.kubernetes.io/pciBusID")->valuestring, "0000:65:00.0");
    CU_ASSERT_STRING_EQUAL(attr(d, "resource.kubernetes.io/pcieRoot")->valuestring, "pci0000:00");
    CU_ASSERT_PTR_NULL(attr(d, "resource.kubernetes.io/numaNode")); /* -1: left out */
    CU_ASSERT_STRING_EQUAL(attr(d, "vendorID")->valuestring, "8086");
    CU_ASSERT_STRING_EQUAL(attr(d, "deviceID")->valuestring, "1521");
    CU_ASSERT_STRING_EQUAL(attr(d, "classID")->valuestring, "0200");
    CU_ASSERT_STRING_EQUAL(attr(d, "iommuGroup")->string, "int");
    CU_ASSERT_EQUAL(attr(d, "iommuGroup")->valueint, 13);
    CU_ASSERT_STRING_EQUAL(attr(d, "driver")->valuestring, "");
    /* no serial, no slot: present and "" (a selector on them never meets a missing one) */
    CU_ASSERT_STRING_EQUAL(attr(d, "serialNumber")->valuestring, "");
    CU_ASSERT_STRING_EQUAL(attr(d, "physicalSlot")->valuestring, "");
    const char *desc = attr(d, "description")->valuestring;
    CU_ASSERT_EQUAL(strlen(desc), 64);
    CU_ASSERT_EQUAL(strcmp(desc + 60, "\xc3\xa9\xc3\xa9"), 0);
    cJSON_Delete(d);
    s->numa_node = 1;
    s->pcie_root[0] = '\0';
    d = draslices_device(s);
    CU_ASSERT_EQUAL(attr(d, "resource.kubernetes.io/numaNode")->valueint, 1);
    CU_ASSERT_STRING_EQUAL(attr(d, "resource.kubernetes.io/numaNode")->string, "int");
    CU_ASSERT_PTR_NULL(attr(d, "resource.kubernetes.io/pcieRoot"));
    CU_ASSERT_PTR_NULL(attr(d, "sriovPhysicalFunction")); /* not a VF */
    CU_ASSERT_PTR_NULL(attr(d, "sriovVFIndex"));
    cJSON_Delete(d);
    /* a card's serial and slot */
    (void)snprintf(s->serial, sizeof(s->serial), "00-11-22-33-44-55-66-77");
    (void)snprintf(s->serial_source, sizeof(s->serial_source), "DSN");
    (void)snprintf(s->slot, sizeof(s->slot), "7");
    d = draslices_device(s);
    CU_ASSERT_STRING_EQUAL(attr(d, "serialNumber")->valuestring, "00-11-22-33-44-55-66-77");
    CU_ASSERT_STRING_EQUAL(attr(d, "physicalSlot")->valuestring, "7");
    CU_ASSERT_PTR_NULL(attr(d, "serialNumberSource")); /* the PCIDevice's, not an attribute */
    cJSON_Delete(d);
    /* an SR-IOV VF: its PF and index */
    (void)snprintf(s->physfn, sizeof(s->physfn), "0000:65:00.0");
    s->sriov_vf_index = 3;
    d = draslices_device(s);
    CU_ASSERT_STRING_EQUAL(attr(d, "sriovPhysicalFunction")->valuestring, "0000:65:00.0");
    CU_ASSERT_EQUAL(attr(d, "sriovVFIndex")->valueint, 3);
    CU_ASSERT_STRING_EQUAL(attr(d, "sriovVFIndex")->string, "int");
    cJSON_Delete(d);
    pcidevice_spec_free(s);
}

static void test_pool(void)
{
    struct map *devs = map_new(pcidevice_spec_free), *claimed = map_new(NULL);
    put(devs, dev("0000:65:00.1", "0200", 0));
    put(devs, dev("0000:65:00.0", "0200", 0));
    struct pcidevice_spec *blocked = dev("0000:00:1f.4", "0c05", 0);
    blocked->n_blockers = 1;
    blocked->blockers = calloc(1, sizeof(*blocked->blockers));
    put(devs, blocked);
    struct cache c = {0};
    CU_ASSERT_EQUAL(step(&c, devs, claimed, 1), 1);
    CU_ASSERT_EQUAL(c.n, 1);
    const cJSON *list = slice_devices(&c, NODE "-vfio-pci-0");
    CU_ASSERT_EQUAL(cJSON_GetArraySize(list), 2); /* the blocked one left out, address order */
    CU_ASSERT_STRING_EQUAL(cJSON_GetArrayItem(list, 0)->child->valuestring, "pci-0000-65-00-0");
    cJSON *spec = cJSON_GetObjectItemCaseSensitive(c.slices[0], "spec");
    char *text = cJSON_PrintUnformatted(spec);
    CU_ASSERT_PTR_NOT_NULL(strstr(text,
                                  "\"driver\":\"vfio-pci.hostdevd.io\",\"nodeName\":\"titan\","
                                  "\"pool\":{\"name\":\"titan\",\"generation\":1,"
                                  "\"resourceSliceCount\":1}"));
    cJSON_free(text);
    text = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(c.slices[0], "metadata"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"uid\":\"" NODE_UID "\""));
    cJSON_free(text);
    /* nothing planned when equal */
    CU_ASSERT_EQUAL(step(&c, devs, claimed, 0), 1);
    /* a claimed device leaves the pool: one more generation; back when the claim goes */
    CU_ASSERT_EQUAL(map_put(claimed, "0000:65:00.0", devs), 0);
    CU_ASSERT_EQUAL(step(&c, devs, claimed, 1), 2);
    CU_ASSERT_EQUAL(cJSON_GetArraySize(slice_devices(&c, NODE "-vfio-pci-0")), 1);
    CU_ASSERT_EQUAL(step(&c, devs, claimed, 0), 2);
    map_remove(claimed, "0000:65:00.0");
    CU_ASSERT_EQUAL(step(&c, devs, claimed, 1), 3);
    CU_ASSERT_EQUAL(cJSON_GetArraySize(slice_devices(&c, NODE "-vfio-pci-0")), 2);
    /* an attribute changes (the driver): a new generation */
    struct pcidevice_spec *s = map_get(devs, NODE "-0000:65:00.1");
    (void)snprintf(s->driver, sizeof(s->driver), "vfio-pci");
    CU_ASSERT_EQUAL(step(&c, devs, claimed, 1), 4);
    CU_ASSERT_EQUAL(step(&c, devs, claimed, 0), 4);
    cache_free(&c);
    map_free(devs);
    map_free(claimed);
}

/* The platform's bridges and its SMBus controller are never in the pool, blockers or not: a
 * class-wide selector must not be able to take them. */
static void test_platform_classes(void)
{
    struct map *devs = map_new(pcidevice_spec_free), *claimed = map_new(NULL);
    put(devs, dev("0000:00:00.0", "0600", 0)); /* host bridge */
    put(devs, dev("0000:00:1f.0", "0601", 0)); /* ISA/LPC bridge */
    put(devs, dev("0000:00:1c.0", "0604", 0)); /* PCI bridge */
    put(devs, dev("0000:00:1f.4", "0c05", 0)); /* SMBus */
    put(devs, dev("0000:00:1f.6", "0200", 0));
    struct cache c = {0};
    CU_ASSERT_EQUAL(step(&c, devs, claimed, 1), 1);
    const cJSON *list = slice_devices(&c, NODE "-vfio-pci-0");
    CU_ASSERT_EQUAL(cJSON_GetArraySize(list), 1);
    CU_ASSERT_STRING_EQUAL(cJSON_GetArrayItem(list, 0)->child->valuestring, "pci-0000-00-1f-6");
    cache_free(&c);
    map_free(devs);
    map_free(claimed);
}

/* A missing ownerReference is repaired without a new generation (the devices did not change). */
static void test_owner_only(void)
{
    struct map *devs = map_new(pcidevice_spec_free);
    put(devs, dev("0000:65:00.0", "0200", 0));
    struct cache c = {0};
    struct draslices_plan p;
    CU_ASSERT_EQUAL(plan(&c, devs, NULL, NULL, &p), 0);
    apply(&c, &p);
    CU_ASSERT_PTR_NULL(cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(c.slices[0], "metadata"), "ownerReferences"));
    draslices_plan_done(&p);
    CU_ASSERT_EQUAL(plan(&c, devs, NULL, NODE_UID, &p), 0);
    CU_ASSERT_EQUAL(p.n, 1);
    CU_ASSERT_EQUAL(p.generation, 1);
    CU_ASSERT_EQUAL(p.writes[0].verb, DRASLICES_PATCH);
    char *text = cJSON_PrintUnformatted(p.writes[0].body);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"resourceVersion\":\"1\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"ownerReferences\""));
    cJSON_free(text);
    draslices_plan_done(&p);
    cache_free(&c);
    map_free(devs);
}

static void add_many(struct map *devs, int from, int to)
{
    for (int i = from; i < to; i++) {
        char address[20];
        (void)snprintf(address, sizeof(address), "0000:%02x:%02x.%d", i / 32, i % 32, 0);
        put(devs, dev(address, "0300", 0));
    }
}

static long long count_of(struct cache *c, const char *name)
{
    size_t i;
    const cJSON *pool = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(find(c, name, &i), "spec"), "pool");
    return (long long)cJSON_GetObjectItemCaseSensitive(pool, "resourceSliceCount")->valuedouble;
}

static void test_split(void)
{
    struct map *devs = map_new(pcidevice_spec_free);
    add_many(devs, 0, 300);
    struct cache c = {0};
    CU_ASSERT_EQUAL(step(&c, devs, NULL, 3), 1);
    CU_ASSERT_EQUAL(c.n, 3);
    CU_ASSERT_EQUAL(cJSON_GetArraySize(slice_devices(&c, NODE "-vfio-pci-0")), 128);
    CU_ASSERT_EQUAL(cJSON_GetArraySize(slice_devices(&c, NODE "-vfio-pci-1")), 128);
    CU_ASSERT_EQUAL(cJSON_GetArraySize(slice_devices(&c, NODE "-vfio-pci-2")), 44);
    CU_ASSERT_EQUAL(count_of(&c, NODE "-vfio-pci-2"), 3);
    CU_ASSERT_EQUAL(step(&c, devs, NULL, 0), 1);
    /* down to 100: two deletes first, then slice 0 with the new generation and count */
    map_clear(devs);
    add_many(devs, 0, 100);
    struct draslices_plan p;
    CU_ASSERT_EQUAL(plan(&c, devs, NULL, NODE_UID, &p), 0);
    CU_ASSERT_EQUAL(p.n, 3);
    CU_ASSERT_EQUAL(p.writes[0].verb, DRASLICES_DELETE);
    CU_ASSERT_EQUAL(p.writes[1].verb, DRASLICES_DELETE);
    CU_ASSERT_STRING_EQUAL(p.writes[1].uid, p.writes[1].name);
    CU_ASSERT_EQUAL(p.writes[2].verb, DRASLICES_PATCH);
    CU_ASSERT_EQUAL(p.generation, 2);
    apply(&c, &p);
    draslices_plan_done(&p);
    CU_ASSERT_EQUAL(c.n, 1);
    CU_ASSERT_EQUAL(count_of(&c, NODE "-vfio-pci-0"), 1);
    CU_ASSERT_EQUAL(cJSON_GetArraySize(slice_devices(&c, NODE "-vfio-pci-0")), 100);
    /* nothing left: one empty slice keeps the pool (and its generation) */
    map_clear(devs);
    CU_ASSERT_EQUAL(step(&c, devs, NULL, 1), 3);
    CU_ASSERT_PTR_NULL(slice_devices(&c, NODE "-vfio-pci-0"));
    CU_ASSERT_EQUAL(step(&c, devs, NULL, 0), 3);
    cache_free(&c);
    map_free(devs);
}

/* The taint device `name` has in the cached slices, as "key=value:effect@timeAdded", or "". */
static const char *taint_of(struct cache *c, const char *name)
{
    static char buf[256];
    buf[0] = '\0';
    for (size_t i = 0; i < c->n; i++) {
        const cJSON *d, *t;
        cJSON_ArrayForEach(
                d, cJSON_GetObjectItemCaseSensitive(
                           cJSON_GetObjectItemCaseSensitive(c->slices[i], "spec"), "devices"))
        {
            if (strcmp(cJSON_GetObjectItemCaseSensitive(d, "name")->valuestring, name) != 0)
                continue;
            cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(d, "taints"))
            {
                (void)snprintf(buf, sizeof(buf), "%s=%s:%s@%s",
                               cJSON_GetObjectItemCaseSensitive(t, "key")->valuestring,
                               cJSON_GetObjectItemCaseSensitive(t, "value")->valuestring,
                               cJSON_GetObjectItemCaseSensitive(t, "effect")->valuestring,
                               cJSON_GetObjectItemCaseSensitive(t, "timeAdded")->valuestring);
            }
        }
    }
    return buf;
}

static size_t tainted_devices(struct cache *c)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n; i++) {
        const cJSON *d;
        cJSON_ArrayForEach(
                d, cJSON_GetObjectItemCaseSensitive(
                           cJSON_GetObjectItemCaseSensitive(c->slices[i], "spec"), "devices")) n +=
                cJSON_GetObjectItemCaseSensitive(d, "taints") != NULL;
    }
    return n;
}

/* An unhealthy device stays in the pool with a NoSchedule taint; the pool is then cut in slices
 * of 64 (the API's limit with taints); the taint's time stays as the slice has it (a restarted
 * agent writes nothing); cleared, the taint goes and the pool is cut in 128s again. */
static void test_taints(void)
{
    struct map *devs = map_new(pcidevice_spec_free), *bad = map_new(NULL);
    add_many(devs, 0, 100);
    struct cache c = {0};
    CU_ASSERT_EQUAL(step(&c, devs, NULL, 1), 1);
    CU_ASSERT_EQUAL(c.n, 1);
    struct health_state s = {.healthy = false, .reason = HEALTH_RESET_FAILED, .since = 1795910400};
    CU_ASSERT_EQUAL(map_put(bad, "0000:00:05.0", &s), 0);
    g_unhealthy = bad;
    /* 100 devices with a taint: two slices of 64 and 36, a new generation */
    CU_ASSERT_EQUAL(step(&c, devs, NULL, 2), 2);
    CU_ASSERT_EQUAL(c.n, 2);
    CU_ASSERT_EQUAL(cJSON_GetArraySize(slice_devices(&c, NODE "-vfio-pci-0")), 64);
    CU_ASSERT_EQUAL(cJSON_GetArraySize(slice_devices(&c, NODE "-vfio-pci-1")), 36);
    CU_ASSERT_EQUAL(count_of(&c, NODE "-vfio-pci-1"), 2);
    CU_ASSERT_STRING_EQUAL(taint_of(&c, "pci-0000-00-05-0"),
                           "hostdevd.io/unhealthy=ResetFailed:NoSchedule@2026-11-29T00:00:00Z");
    CU_ASSERT_EQUAL(tainted_devices(&c), 1);
    CU_ASSERT_EQUAL(step(&c, devs, NULL, 0), 2); /* converged */
    /* the store taken back after a restart finds it later: the slice's time stays, no write */
    s.since += 3600;
    CU_ASSERT_EQUAL(step(&c, devs, NULL, 0), 2);
    CU_ASSERT_STRING_EQUAL(taint_of(&c, "pci-0000-00-05-0"),
                           "hostdevd.io/unhealthy=ResetFailed:NoSchedule@2026-11-29T00:00:00Z");
    /* a device gone (Removed says more): the new reason, at its own time */
    s.reason = HEALTH_REMOVED;
    CU_ASSERT_EQUAL(step(&c, devs, NULL, 2), 3);
    CU_ASSERT_STRING_EQUAL(taint_of(&c, "pci-0000-00-05-0"),
                           "hostdevd.io/unhealthy=Removed:NoSchedule@2026-11-29T01:00:00Z");
    /* cleared: no taint, one slice of 100 again */
    g_unhealthy = NULL;
    CU_ASSERT_EQUAL(step(&c, devs, NULL, 2), 4); /* a delete, a patch */
    CU_ASSERT_EQUAL(c.n, 1);
    CU_ASSERT_EQUAL(cJSON_GetArraySize(slice_devices(&c, NODE "-vfio-pci-0")), 100);
    CU_ASSERT_EQUAL(tainted_devices(&c), 0);
    CU_ASSERT_EQUAL(step(&c, devs, NULL, 0), 4);
    cache_free(&c);
    map_free(devs);
    map_free(bad);
}

/* The administrator's NoExecute (--unhealthy-taint-effect): the taint has that effect and the
 * time the device was found unhealthy; the same again writes nothing; back to NoSchedule, the
 * effect changes again. A healthy device gets no taint whatever the effect. */
static void test_taint_effect(void)
{
    struct map *devs = map_new(pcidevice_spec_free), *bad = map_new(NULL);
    add_many(devs, 0, 3);
    struct cache c = {0};
    struct health_state s = {.healthy = false, .reason = HEALTH_AER_FATAL, .since = 1795910400};
    CU_ASSERT_EQUAL(map_put(bad, "0000:00:01.0", &s), 0);
    g_unhealthy = bad;
    g_effect = "NoExecute";
    step(&c, devs, NULL, 1);
    CU_ASSERT_STRING_EQUAL(taint_of(&c, "pci-0000-00-01-0"),
                           "hostdevd.io/unhealthy=AERFatal:NoExecute@2026-11-29T00:00:00Z");
    CU_ASSERT_STRING_EQUAL(taint_of(&c, "pci-0000-00-02-0"), "");
    CU_ASSERT_EQUAL(tainted_devices(&c), 1);
    step(&c, devs, NULL, 0); /* converged */
    g_effect = NULL;         /* the default again */
    step(&c, devs, NULL, 1);
    CU_ASSERT_STRING_EQUAL(taint_of(&c, "pci-0000-00-01-0"),
                           "hostdevd.io/unhealthy=AERFatal:NoSchedule@2026-11-29T00:00:00Z");
    step(&c, devs, NULL, 0);
    g_unhealthy = NULL;
    cache_free(&c);
    map_free(devs);
    map_free(bad);
}

/* Slices of mixed generations (a write lost half way) are brought to one new generation. */
static void test_mixed_generations(void)
{
    struct map *devs = map_new(pcidevice_spec_free);
    add_many(devs, 0, 200);
    struct cache c = {0};
    CU_ASSERT_EQUAL(step(&c, devs, NULL, 2), 1);
    cJSON *pool = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(c.slices[1], "spec"), "pool");
    cJSON_SetNumberValue(cJSON_GetObjectItemCaseSensitive(pool, "generation"), 5);
    CU_ASSERT_EQUAL(step(&c, devs, NULL, 2), 6);
    CU_ASSERT_EQUAL(step(&c, devs, NULL, 0), 6);
    cache_free(&c);
    map_free(devs);
}

#define M1 "0c7ac1d4-6e2a-4f3b-9b1e-1d2c3e4f5a61"

/* An mdev instance's entry: the UUID where KubeVirt reads it, its type, parent and group, and the
 * PCI functions' string attributes present and empty. */
static void test_mdev_attributes(void)
{
    struct draslices_mdev m = {M1, "mtty-2", "Dual port serial", "mtty", 20};
    cJSON *d = draslices_mdev_device(&m);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, "name")),
                           "mdev-" M1);
    CU_ASSERT_STRING_EQUAL(attr(d, "dra.kubevirt.io/mdevUUID")->valuestring, M1);
    CU_ASSERT_STRING_EQUAL(attr(d, "mdevUUID")->valuestring, M1);
    CU_ASSERT_STRING_EQUAL(attr(d, "mdevType")->valuestring, "mtty-2");
    CU_ASSERT_STRING_EQUAL(attr(d, "mdevTypeName")->valuestring, "Dual port serial");
    CU_ASSERT_STRING_EQUAL(attr(d, "mdevParent")->valuestring, "mtty");
    CU_ASSERT_EQUAL(attr(d, "iommuGroup")->valueint, 20);
    CU_ASSERT_STRING_EQUAL(attr(d, "classID")->valuestring, "");
    CU_ASSERT_STRING_EQUAL(attr(d, "vendorID")->valuestring, "");
    CU_ASSERT_STRING_EQUAL(attr(d, "driver")->valuestring, "");
    CU_ASSERT_PTR_NULL(attr(d, "resource.kubernetes.io/pciBusID")); /* not a PCI function */
    cJSON_Delete(d);
    m.iommu_group = -1; /* no group known: left out */
    CU_ASSERT_PTR_NULL(draslices_mdev_device(&m));
    m.iommu_group = 20;
    m.uuid = "0C7AC1D4-6E2A-4F3B-9B1E-1D2C3E4F5A61"; /* not a DNS label */
    CU_ASSERT_PTR_NULL(draslices_mdev_device(&m));
    /* from a VGPUDevice: its node's, configured */
    cJSON *o = cJSON_Parse(
            "{\"spec\": {\"nodeName\": \"titan\", \"parentGPUDeviceAddress\": \"mtty\"},"
            " \"status\": {\"uuid\": \"" M1 "\", \"vGPUStatus\": \"vGPUConfigured\","
            " \"configureVGPUTypeName\": \"mtty-2\", \"iommuGroup\": \"20\","
            " \"resourceName\": \"devices.harvesterhci.io/mtty-2\","
            " \"mdevTypes\": [{\"id\": \"mtty-1\", \"name\": \"Single port serial\"},"
            " {\"id\": \"mtty-2\", \"name\": \"Dual port serial\"}]}}");
    CU_ASSERT_TRUE_FATAL(draslices_mdev_of(o, "titan", &m));
    CU_ASSERT_STRING_EQUAL(m.uuid, M1);
    CU_ASSERT_STRING_EQUAL(m.type_name, "Dual port serial");
    CU_ASSERT_EQUAL(m.iommu_group, 20);
    CU_ASSERT_FALSE(draslices_mdev_of(o, "other", &m)); /* another node's */
    cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "status"),
                                           "vGPUStatus", cJSON_CreateString(""));
    CU_ASSERT_FALSE(draslices_mdev_of(o, "titan", &m)); /* removed */
    cJSON_Delete(o);
}

/* Instances join the pool after the PCI functions; one removed leaves it (a new generation). */
static void test_mdev_pool(void)
{
    struct map *devs = map_new(pcidevice_spec_free), *claimed = map_new(NULL);
    put(devs, dev("0000:65:00.0", "0200", 0));
    struct draslices_mdev m[] = {{M1, "mtty-2", "Dual port serial", "mtty", 20}};
    struct cache c = {0};
    g_mdevs = m;
    g_n_mdevs = 1;
    CU_ASSERT_EQUAL(step(&c, devs, claimed, 1), 1);
    const cJSON *list = slice_devices(&c, NODE "-vfio-pci-0");
    CU_ASSERT_EQUAL_FATAL(cJSON_GetArraySize(list), 2);
    CU_ASSERT_STRING_EQUAL(cJSON_GetArrayItem(list, 0)->child->valuestring, "pci-0000-65-00-0");
    CU_ASSERT_STRING_EQUAL(cJSON_GetArrayItem(list, 1)->child->valuestring, "mdev-" M1);
    CU_ASSERT_EQUAL(step(&c, devs, claimed, 0), 1);
    g_n_mdevs = 0;
    CU_ASSERT_EQUAL(step(&c, devs, claimed, 1), 2);
    CU_ASSERT_EQUAL(cJSON_GetArraySize(slice_devices(&c, NODE "-vfio-pci-0")), 1);
    g_mdevs = NULL;
    cache_free(&c);
    map_free(devs);
    map_free(claimed);
}

static CU_TestInfo tests[] = {
        {"mdev instance attributes", test_mdev_attributes},
        {"mdev instances in the pool", test_mdev_pool},
        {"device name", test_device_name},
        {"attributes", test_attributes},
        {"pool: blockers, claims, generation", test_pool},
        {"bridges and SMBus never in the pool", test_platform_classes},
        {"owner repaired without a new generation", test_owner_only},
        {"more than 128 devices split", test_split},
        {"an unhealthy device tainted; slices of 64 then", test_taints},
        {"the taint's effect: NoExecute where the administrator asks", test_taint_effect},
        {"mixed generations", test_mixed_generations},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo draslices_suites[] = {
        {"draslices", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
