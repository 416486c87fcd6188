/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/dra/draprep.c - a ResourceClaim's preparation, planned (see draprep.h).
 */
#include "controllers/dra/draprep.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/json.h"
#include "controllers/dra/draslices.h"
#include "controllers/health/health.h"
#include "node/vfio.h"

static bool all_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
            return false;
    return true;
}

bool draprep_is_mdev(const char *address)
{
    static const char form[] = "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx";
    if (!address || strlen(address) != sizeof(form) - 1)
        return false;
    for (size_t i = 0; form[i]; i++) {
        char c = address[i];
        bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
        if (form[i] == '-' ? c != '-' : !hex)
            return false;
    }
    return true;
}

int draprep_address(const char *device, char *buf, size_t size)
{
    /* mdev-<uuid>: the UUID */
    if (device && strncmp(device, "mdev-", 5) == 0) {
        if (!draprep_is_mdev(device + 5))
            return -EINVAL;
        int n = snprintf(buf, size, "%s", device + 5);
        return n > 0 && (size_t)n < size ? 0 : -EINVAL;
    }
    /* pci-DDDD-BB-DD-F, the domain 4 to 8 hex digits */
    if (!device || strncmp(device, "pci-", 4) != 0)
        return -EINVAL;
    const char *d = device + 4, *b = strchr(d, '-');
    size_t dom = b ? (size_t)(b - d) : 0;
    if (dom < 4 || dom > 8 || !all_hex(d, dom) || strlen(b) != 8 || b[3] != '-' || b[6] != '-' ||
        !all_hex(b + 1, 2) || !all_hex(b + 4, 2) || b[7] < '0' || b[7] > '7')
        return -EINVAL;
    int n = snprintf(buf, size, "%.*s:%.2s:%.2s.%c", (int)dom, d, b + 1, b + 4, b[7]);
    return n > 0 && (size_t)n < size ? 0 : -EINVAL;
}

void draprep_claim_done(struct draprep_claim *c)
{
    free(c->devices);
    c->devices = NULL;
    c->n = 0;
}

static int copy_name(char *dst, size_t size, const char *src, const char *what, struct err *ret_err)
{
    if (!src || !src[0])
        return err_set(ret_err, -EINVAL, "the claim has no %s", what);
    if (strlen(src) >= size)
        return err_set(ret_err, -EINVAL, "the claim's %s is too long", what);
    memcpy(dst, src, strlen(src) + 1);
    return 0;
}

static int add_result(struct draprep_claim *c, const cJSON *res, struct err *ret_err)
{
    const char *req = json_str(res, "request"), *dev = json_str(res, "device");
    if (c->n >= DRAPREP_MAX_DEVICES)
        return err_set(ret_err, -EINVAL, "more than %d devices of this driver in one claim",
                       DRAPREP_MAX_DEVICES);
    struct draprep_device *d = &c->devices[c->n];
    if (!req || !req[0] || strlen(req) >= sizeof(d->request) || strchr(req, '.'))
        return err_set(ret_err, -EINVAL, "an allocation result has no valid request name");
    if (!dev || strlen(dev) >= sizeof(d->name) ||
        draprep_address(dev, d->address, sizeof(d->address)) < 0)
        return err_set(ret_err, -EINVAL,
                       "device \"%s\" of the allocation is not one of this driver's "
                       "(pci-<domain>-<bus>-<slot>-<function>)",
                       dev ? dev : "");
    memcpy(d->request, req, strlen(req) + 1);
    memcpy(d->name, dev, strlen(dev) + 1);
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->devices[i].address, d->address) == 0)
            return err_set(ret_err, -EINVAL, "device %s is allocated twice in the claim", dev);
    c->n++;
    return 0;
}

int draprep_parse(const cJSON *claim, const char *uid, const char *driver, const char *pool,
                  struct draprep_claim *ret, struct err *ret_err)
{
    const cJSON *meta = json_field(claim, "metadata");
    *ret = (struct draprep_claim){0};
    int r = copy_name(ret->namespace_, sizeof(ret->namespace_), json_str(meta, "namespace"),
                      "namespace", ret_err);
    if (r == 0)
        r = copy_name(ret->name, sizeof(ret->name), json_str(meta, "name"), "name", ret_err);
    if (r == 0)
        r = copy_name(ret->uid, sizeof(ret->uid), json_str(meta, "uid"), "uid", ret_err);
    if (r < 0)
        return r;
    if (strcmp(ret->uid, uid) != 0)
        return err_set(ret_err, -EINVAL,
                       "ResourceClaim %s/%s has uid %s, not %s: it was deleted and made again",
                       ret->namespace_, ret->name, ret->uid, uid);
    const char *pc = json_str(json_field(meta, "annotations"), DRAPREP_POD_CLAIM_ANN);
    if (pc && strlen(pc) < sizeof(ret->pod_claim) && !strchr(pc, '/'))
        memcpy(ret->pod_claim, pc, strlen(pc) + 1);
    const cJSON *results =
            json_field(json_field(json_field(json_field(claim, "status"), "allocation"), "devices"),
                       "results");
    if (!cJSON_IsArray(results))
        return err_set(ret_err, -EINVAL, "ResourceClaim %s/%s is not allocated", ret->namespace_,
                       ret->name);
    if (!(ret->devices = calloc(DRAPREP_MAX_DEVICES, sizeof(*ret->devices))))
        return err_set(ret_err, -ENOMEM, "out of memory");
    const cJSON *res;
    cJSON_ArrayForEach(res, results)
    {
        const char *d = json_str(res, "driver"), *p = json_str(res, "pool");
        if (!d || strcmp(d, driver) != 0 || !p || strcmp(p, pool) != 0)
            continue;
        if ((r = add_result(ret, res, ret_err)) < 0) {
            draprep_claim_done(ret);
            return r;
        }
    }
    return 0;
}

void draprep_base_request(const char *request, char *buf, size_t size)
{
    const char *slash = strchr(request, '/');
    size_t n = slash ? (size_t)(slash - request) : strlen(request);
    (void)snprintf(buf, size, "%.*s", (int)n, request);
}

/* --- CDI and metadata --------------------------------------------------------------------------
 */

void draprep_cdi_ids(const struct draprep_claim *c, size_t i, char *device_id, char *metadata_id,
                     size_t size)
{
    char base[DRAPREP_NAME_SIZE];
    draprep_base_request(c->devices[i].request, base, sizeof(base));
    (void)snprintf(device_id, size, "%s=%s-%s", DRAPREP_CDI_KIND, c->uid, c->devices[i].name);
    (void)snprintf(metadata_id, size, "%s=%s_%s", DRAPREP_CDI_KIND, c->uid, base);
}

int draprep_container_path(const struct draprep_claim *c, const char *base_request, char *buf,
                           size_t size)
{
    int n = c->pod_claim[0]
                    ? snprintf(buf, size, "%s/resourceclaimtemplates/%s/%s/%s-metadata.json",
                               DRAPREP_METADATA_ROOT, c->pod_claim, base_request, DRASLICES_DRIVER)
                    : snprintf(buf, size, "%s/resourceclaims/%s/%s/%s-metadata.json",
                               DRAPREP_METADATA_ROOT, c->name, base_request, DRASLICES_DRIVER);
    return n > 0 && (size_t)n < size ? 0 : -E2BIG;
}

static cJSON *device_node(const char *path, const char *dev_root)
{
    _cleanup_json_ cJSON *n = cJSON_CreateObject();
    if (!n || !cJSON_AddStringToObject(n, "path", path))
        return NULL;
    if (strcmp(dev_root, "/dev") != 0) {
        char host[4096];
        (void)snprintf(host, sizeof(host), "%s%s", dev_root, path + 4);
        if (!cJSON_AddStringToObject(n, "hostPath", host))
            return NULL;
    }
    return TAKE_PTR(n);
}

/* Takes `edits`. */
static cJSON *cdi_device(const char *name, cJSON *edits)
{
    _cleanup_json_ cJSON *d = cJSON_CreateObject(), *e = edits;
    if (!d || !e || !cJSON_AddStringToObject(d, "name", name) ||
        !cJSON_AddItemToObject(d, "containerEdits", e))
        return NULL;
    TAKE_PTR(e); /* d's now */
    return TAKE_PTR(d);
}

static cJSON *vfio_edits(int group, const char *dev_root)
{
    char path[64];
    _cleanup_json_ cJSON *e = cJSON_CreateObject();
    cJSON *nodes = cJSON_AddArrayToObject(e, "deviceNodes");
    (void)snprintf(path, sizeof(path), "/dev/vfio/%d", group);
    if (!nodes || !cJSON_AddItemToArray(nodes, device_node("/dev/vfio/vfio", dev_root)) ||
        !cJSON_AddItemToArray(nodes, device_node(path, dev_root)))
        return NULL;
    return TAKE_PTR(e);
}

static cJSON *mount_edits(const struct draprep_claim *c, const char *base, const char *metadata_dir)
{
    char host[4096], ctr[1024];
    _cleanup_json_ cJSON *e = cJSON_CreateObject(), *m = cJSON_CreateObject(),
                         *opts = cJSON_CreateStringArray((const char *[]){"ro", "bind"}, 2);
    cJSON *mounts = cJSON_AddArrayToObject(e, "mounts");
    (void)snprintf(host, sizeof(host), "%s/%s/metadata.json", metadata_dir, base);
    if (!mounts || !m || !opts || draprep_container_path(c, base, ctr, sizeof(ctr)) < 0 ||
        !cJSON_AddStringToObject(m, "hostPath", host) ||
        !cJSON_AddStringToObject(m, "containerPath", ctr) ||
        !cJSON_AddItemToObject(m, "options", opts))
        return NULL;
    TAKE_PTR(opts); /* m's now */
    if (!cJSON_AddItemToArray(mounts, m))
        return NULL;
    TAKE_PTR(m); /* e's now */
    return TAKE_PTR(e);
}

/* Whether request `base` appears before device i (its metadata device is there already). */
static bool seen_before(const struct draprep_claim *c, size_t i, const char *base)
{
    char b[DRAPREP_NAME_SIZE];
    for (size_t j = 0; j < i; j++) {
        draprep_base_request(c->devices[j].request, b, sizeof(b));
        if (strcmp(b, base) == 0)
            return true;
    }
    return false;
}

cJSON *draprep_cdi_spec(const struct draprep_claim *c, const int *groups, const char *dev_root,
                        const char *metadata_dir)
{
    _cleanup_json_ cJSON *spec = cJSON_CreateObject();
    cJSON *devs = NULL;
    if (!spec || !cJSON_AddStringToObject(spec, "cdiVersion", "0.6.0") ||
        !cJSON_AddStringToObject(spec, "kind", DRAPREP_CDI_KIND) ||
        !(devs = cJSON_AddArrayToObject(spec, "devices")))
        return NULL;
    for (size_t i = 0; i < c->n; i++) {
        char name[DRAPREP_NAME_SIZE + 96], base[DRAPREP_NAME_SIZE];
        (void)snprintf(name, sizeof(name), "%s-%s", c->uid, c->devices[i].name);
        if (!cJSON_AddItemToArray(devs, cdi_device(name, vfio_edits(groups[i], dev_root))))
            return NULL;
        draprep_base_request(c->devices[i].request, base, sizeof(base));
        if (seen_before(c, i, base))
            continue;
        (void)snprintf(name, sizeof(name), "%s_%s", c->uid, base);
        if (!cJSON_AddItemToArray(devs, cdi_device(name, mount_edits(c, base, metadata_dir))))
            return NULL;
    }
    return TAKE_PTR(spec);
}

static cJSON *meta_device(const struct draprep_device *d, const char *driver, const char *pool,
                          const cJSON *attrs)
{
    _cleanup_json_ cJSON *o = cJSON_CreateObject(),
                         *own = attrs ? cJSON_Duplicate(attrs, true) : cJSON_CreateObject();
    if (!o || !own || !cJSON_AddStringToObject(o, "driver", driver) ||
        !cJSON_AddStringToObject(o, "pool", pool) || !cJSON_AddStringToObject(o, "name", d->name) ||
        !cJSON_AddItemToObject(o, "attributes", own))
        return NULL;
    cJSON *a = TAKE_PTR(own); /* o's now */
    /* what KubeVirt's launcher needs, whatever the slice said: an mdev's UUID under "mdevUUID"
     * (v1.9.0's pkg/dra/metadata MDevUUIDAttribute, read before pciBusID), a PCI function's
     * address under the standard pciBusID */
    const char *key = draprep_is_mdev(d->address) ? "mdevUUID" : "resource.kubernetes.io/pciBusID";
    if (!json_field(a, key)) {
        _cleanup_json_ cJSON *s = cJSON_CreateObject();
        if (!s || !cJSON_AddStringToObject(s, "string", d->address) ||
            !cJSON_AddItemToObject(a, key, s))
            return NULL;
        TAKE_PTR(s); /* a's now */
    }
    return TAKE_PTR(o);
}

cJSON *draprep_metadata(const struct draprep_claim *c, const char *base_request, const char *driver,
                        const char *pool, const cJSON *const *attrs)
{
    _cleanup_json_ cJSON *m = cJSON_CreateObject(), *own = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(m, "metadata"), *reqs, *devs;
    const char *request = NULL;
    if (!meta || !own || !cJSON_AddStringToObject(m, "kind", "DeviceMetadata") ||
        !cJSON_AddStringToObject(m, "apiVersion", DRAPREP_METADATA_API) ||
        !cJSON_AddStringToObject(meta, "name", c->name) ||
        !cJSON_AddStringToObject(meta, "namespace", c->namespace_) ||
        !cJSON_AddStringToObject(meta, "uid", c->uid) ||
        !cJSON_AddNumberToObject(meta, "generation", 1) ||
        (c->pod_claim[0] && !cJSON_AddStringToObject(m, "podClaimName", c->pod_claim)) ||
        !(reqs = cJSON_AddArrayToObject(m, "requests")) || !cJSON_AddItemToArray(reqs, own))
        return NULL;
    cJSON *req = TAKE_PTR(own); /* m's now */
    if (!(devs = cJSON_AddArrayToObject(req, "devices")))
        return NULL;
    for (size_t i = 0; i < c->n; i++) {
        char b[DRAPREP_NAME_SIZE];
        draprep_base_request(c->devices[i].request, b, sizeof(b));
        if (strcmp(b, base_request) != 0)
            continue;
        request = request ? request : c->devices[i].request;
        if (!cJSON_AddItemToArray(
                    devs, meta_device(&c->devices[i], driver, pool, attrs ? attrs[i] : NULL)))
            return NULL;
    }
    if (!cJSON_AddStringToObject(req, "name", request ? request : base_request))
        return NULL;
    return TAKE_PTR(m);
}

const char *draprep_original(const char *current, const char *annotation)
{
    if (strcmp(current, NODE_VFIO_DRIVER) == 0 && annotation && annotation[0])
        return annotation;
    return current;
}

void draprep_busy_error(const char *address, int group, const char *holder, const char *original,
                        char *buf, size_t size)
{
    (void)snprintf(buf, size,
                   "device %s: %s holds /dev/vfio/%d (its IOMMU group); it gets its driver %s "
                   "back once released",
                   address, holder && holder[0] ? holder : "a process", group,
                   original && original[0] ? original : "(none)");
}

/* --- the checkpoint -----------------------------------------------------------------------------
 */

bool draprep_unhealthy(const struct health *h, const char *address, const char *pcidevice,
                       char *buf, size_t size)
{
    struct health_state s;
    if (draprep_is_mdev(address) || health_get(h, address, &s))
        return false;
    if (!buf[0])
        health_refusal(&s, address, pcidevice, buf, size);
    return true;
}

cJSON *draprep_checkpoint_new(void)
{
    _cleanup_json_ cJSON *ck = cJSON_CreateObject();
    if (!ck || !cJSON_AddNumberToObject(ck, "version", 1) || !cJSON_AddObjectToObject(ck, "claims"))
        return NULL;
    return TAKE_PTR(ck);
}

int draprep_checkpoint_parse(const char *text, cJSON **ret, struct err *ret_err)
{
    _cleanup_json_ cJSON *ck = NULL;
    int r = json_parse_strict(text, strlen(text), &ck, ret_err);
    if (r < 0)
        return r;
    const cJSON *v = json_field(ck, "version"), *claims = json_field(ck, "claims"), *e;
    if (!cJSON_IsNumber(v) || v->valuedouble != 1 || !cJSON_IsObject(claims))
        return err_set(ret_err, -EINVAL, "not a version 1 checkpoint");
    cJSON_ArrayForEach(e, claims)
    {
        struct draprep_claim c;
        const char **orig = NULL;
        int *groups = NULL;
        r = draprep_checkpoint_entry(e, e->string, &c, &orig, &groups);
        free(orig); /* not _cleanup_free_: clang-analyzer does not see cleanups (a false leak) */
        free(groups);
        draprep_claim_done(&c);
        if (r < 0)
            return err_set(ret_err, r, "claim %.64s's entry is malformed", e->string);
    }
    *ret = TAKE_PTR(ck);
    return 0;
}

cJSON *draprep_checkpoint_claim(const cJSON *ck, const char *uid)
{
    return (cJSON *)json_field(json_field(ck, "claims"), uid);
}

int draprep_checkpoint_put(cJSON *ck, const struct draprep_claim *c, const char *const *originals,
                           const int *groups, bool prepared)
{
    cJSON *claims = (cJSON *)json_field(ck, "claims"), *devs = NULL;
    _cleanup_json_ cJSON *e = cJSON_CreateObject();
    if (!claims || !e || !cJSON_AddStringToObject(e, "namespace", c->namespace_) ||
        !cJSON_AddStringToObject(e, "name", c->name) ||
        !cJSON_AddBoolToObject(e, "prepared", prepared) ||
        (c->pod_claim[0] && !cJSON_AddStringToObject(e, "podClaim", c->pod_claim)) ||
        !(devs = cJSON_AddArrayToObject(e, "devices")))
        return -ENOMEM;
    for (size_t i = 0; i < c->n; i++) {
        _cleanup_json_ cJSON *d = cJSON_CreateObject();
        if (!d || !cJSON_AddStringToObject(d, "request", c->devices[i].request) ||
            !cJSON_AddStringToObject(d, "name", c->devices[i].name) ||
            !cJSON_AddStringToObject(d, "address", c->devices[i].address) ||
            !cJSON_AddStringToObject(d, "original", originals[i] ? originals[i] : "") ||
            !cJSON_AddNumberToObject(d, "group", groups ? groups[i] : -1) ||
            !cJSON_AddItemToArray(devs, d))
            return -ENOMEM;
        TAKE_PTR(d); /* e's now */
    }
    cJSON_DeleteItemFromObjectCaseSensitive(claims, c->uid);
    if (!cJSON_AddItemToObject(claims, c->uid, e))
        return -ENOMEM;
    TAKE_PTR(e); /* the checkpoint's now */
    return 0;
}

void draprep_checkpoint_remove(cJSON *ck, const char *uid)
{
    cJSON *claims = (cJSON *)json_field(ck, "claims");
    if (claims)
        cJSON_DeleteItemFromObjectCaseSensitive(claims, uid);
}

const char *draprep_checkpoint_original(const cJSON *ck, const char *uid, const char *address)
{
    const cJSON *d;
    cJSON_ArrayForEach(d, json_field(draprep_checkpoint_claim(ck, uid), "devices"))
    {
        const char *a = json_str(d, "address");
        if (a && strcmp(a, address) == 0)
            return json_str(d, "original");
    }
    return NULL;
}

bool draprep_checkpoint_holder(const cJSON *ck, const char *address, const char *except_uid,
                               char *buf, size_t size)
{
    const cJSON *e, *d;
    cJSON_ArrayForEach(e, json_field(ck, "claims"))
    {
        if (except_uid && strcmp(e->string, except_uid) == 0)
            continue;
        cJSON_ArrayForEach(d, json_field(e, "devices"))
        {
            const char *a = json_str(d, "address");
            if (a && strcmp(a, address) == 0) {
                (void)snprintf(buf, size, "%s/%s", json_str(e, "namespace"), json_str(e, "name"));
                return true;
            }
        }
    }
    return false;
}

int draprep_checkpoint_addresses(const cJSON *ck, char ***ret, size_t *ret_n)
{
    const cJSON *e, *d;
    size_t n = 0, cap = 0;
    char **v = NULL;
    cJSON_ArrayForEach(e, json_field(ck, "claims")){
            cJSON_ArrayForEach(d, json_field(e, "devices")){const char *a = json_str(d, "address");
    if (!a)
        continue;
    if (n == cap) {
        char **nv = realloc(v, (cap = cap ? 2 * cap : 8) * sizeof(*v));
        if (!nv)
            goto oom;
        v = nv;
    }
    if (!(v[n] = strdup(a)))
        goto oom;
    n++;
}
}
*ret = v;
*ret_n = n;
return 0;
oom : for (size_t i = 0; i < n; i++) free(v[i]);
free(v);
return -ENOMEM;
}

static int entry_device(const cJSON *d, struct draprep_device *ret, const char **orig, int *group)
{
    const char *req = json_str(d, "request"), *name = json_str(d, "name"),
               *a = json_str(d, "address");
    const cJSON *g = json_field(d, "group");
    char addr[sizeof(ret->address)];
    *orig = json_str(d, "original");
    if (!req || !name || !a || !*orig || !cJSON_IsNumber(g) ||
        strlen(req) >= sizeof(ret->request) || strlen(name) >= sizeof(ret->name) ||
        draprep_address(name, addr, sizeof(addr)) < 0 || strcmp(addr, a) != 0)
        return -EINVAL;
    memcpy(ret->request, req, strlen(req) + 1);
    memcpy(ret->name, name, strlen(name) + 1);
    memcpy(ret->address, addr, strlen(addr) + 1);
    *group = g->valueint;
    return 0;
}

int draprep_checkpoint_entry(const cJSON *entry, const char *uid, struct draprep_claim *ret,
                             const char ***ret_originals, int **ret_groups)
{
    const cJSON *devs = json_field(entry, "devices"), *d;
    const char *ns = json_str(entry, "namespace"), *name = json_str(entry, "name");
    *ret = (struct draprep_claim){0};
    *ret_originals = NULL;
    *ret_groups = NULL;
    int n = cJSON_GetArraySize(devs);
    if (!ns || !name || !uid || !cJSON_IsArray(devs) || n > DRAPREP_MAX_DEVICES ||
        strlen(ns) >= sizeof(ret->namespace_) || strlen(name) >= sizeof(ret->name) ||
        strlen(uid) >= sizeof(ret->uid))
        return -EINVAL;
    memcpy(ret->namespace_, ns, strlen(ns) + 1);
    memcpy(ret->name, name, strlen(name) + 1);
    memcpy(ret->uid, uid, strlen(uid) + 1);
    const char *pc = json_str(entry, "podClaim");
    if (pc && strlen(pc) < sizeof(ret->pod_claim) && !strchr(pc, '/'))
        memcpy(ret->pod_claim, pc, strlen(pc) + 1);
    ret->devices = calloc(n ? (size_t)n : 1, sizeof(*ret->devices));
    *ret_originals = calloc(n ? (size_t)n : 1, sizeof(**ret_originals));
    *ret_groups = calloc(n ? (size_t)n : 1, sizeof(**ret_groups));
    if (!ret->devices || !*ret_originals || !*ret_groups)
        return -ENOMEM;
    cJSON_ArrayForEach(d, devs)
    {
        if (entry_device(d, &ret->devices[ret->n], &(*ret_originals)[ret->n],
                         &(*ret_groups)[ret->n]) < 0)
            return -EINVAL;
        ret->n++;
    }
    return 0;
}
