/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/objects/mdevobj.c - facts about VGPUDevice objects (see mdevobj.h).
 */
#include "controllers/objects/mdevobj.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/json.h"
#include "base/names.h"
#include "kube/names.h"

/* A string field, "" when absent or not a string. */
static const char *str_or_empty(const cJSON *o, const char *name)
{
    const char *s = json_str(o, name);
    return s ? s : "";
}

int mdevobj_spec(const cJSON *obj, struct mdevobj_spec *ret, struct err *why)
{
    const cJSON *spec = json_field(obj, "spec");
    const cJSON *gen = json_field(json_field(obj, "metadata"), "generation");
    struct mdevobj_spec s = {
            .node = str_or_empty(spec, "nodeName"),
            .parent = str_or_empty(spec, "parentGPUDeviceAddress"),
            .type = str_or_empty(spec, "vGPUTypeName"),
            .uuid = str_or_empty(spec, "uuid"),
            .enabled = cJSON_IsTrue(json_field(spec, "enabled")),
            .generation = cJSON_IsNumber(gen) ? (long long)gen->valuedouble : 0,
    };
    if (!s.parent[0])
        s.parent = str_or_empty(spec, "address");
    if (!s.node[0] || !s.parent[0])
        return err_set(why, -EINVAL,
                       "spec.nodeName or spec.parentGPUDeviceAddress is empty: the agent writes "
                       "them; delete this object and use the slot the agent publishes");
    if (s.enabled && !s.type[0])
        return err_set(why, -EINVAL,
                       "spec.enabled is true but spec.vGPUTypeName is empty: write one of the type "
                       "ids in status.availableTypes");
    if (s.uuid[0] && !node_mdev_uuid_valid(s.uuid))
        return err_set(
                why, -EINVAL,
                "spec.uuid \"%.40s\" is not a UUID as the kernel names mdevs: write 8-4-4-4-12 "
                "lower-case hex digits, or leave spec.uuid out for a random one",
                s.uuid);
    *ret = s;
    return 0;
}

const char *mdevobj_status_uuid(const cJSON *obj)
{
    const char *u = json_str(json_field(obj, "status"), "uuid");
    return u && node_mdev_uuid_valid(u) ? u : NULL;
}

bool mdevobj_configured(const cJSON *obj)
{
    const char *s = json_str(json_field(obj, "status"), "vGPUStatus");
    return s && strcmp(s, MDEVOBJ_CONFIGURED) == 0;
}

bool mdevobj_offered(const cJSON *obj, const char **ret_uuid, const char **ret_resource)
{
    const char *uuid = mdevobj_status_uuid(obj);
    const char *res = json_str(json_field(obj, "status"), "resourceName");
    if (!mdevobj_configured(obj) || !uuid || !res || !names_is_extended_resource_name(res))
        return false;
    if (ret_uuid)
        *ret_uuid = uuid;
    if (ret_resource)
        *ret_resource = res;
    return true;
}

const char *mdevobj_pci_parent_in_use(const cJSON *obj)
{
    const cJSON *spec = json_field(obj, "spec");
    const char *p = json_str(spec, "parentGPUDeviceAddress");
    if (!p || !p[0])
        p = json_str(spec, "address");
    return mdevobj_status_uuid(obj) && p && kube_names_is_pci_address(p) ? p : NULL;
}

int mdevobj_iommu_group(const cJSON *obj)
{
    const char *g = json_str(json_field(obj, "status"), "iommuGroup");
    if (!g || !g[0] || strlen(g) > 9 || strspn(g, "0123456789") != strlen(g))
        return -1;
    int n = 0;
    for (const char *c = g; *c; c++)
        n = n * 10 + (*c - '0');
    return n;
}

/* Copies `s` in lower case with every character outside `keep` (and a-z0-9) made '-'. */
static int sanitize(const char *s, const char *keep, char *out, size_t size)
{
    size_t n = 0;
    for (const char *c = s; *c; c++) {
        const char ch = (char)tolower((unsigned char)*c);
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || strchr(keep, ch);
        if (n + 1 >= size)
            return -ENAMETOOLONG;
        out[n++] = ch;
        if (!ok)
            out[n - 1] = '-';
    }
    out[n] = '\0';
    return 0;
}

int mdevobj_resource_name(const char *type_id, char *buf, size_t size)
{
    char part[NODE_MDEV_NAME_SIZE * 2];
    if (!type_id || sanitize(type_id, ".-", part, sizeof(part)) < 0)
        return -EINVAL;
    const char *start = part + strspn(part, "-.");
    size_t len = strlen(start);
    while (len > 0 && (start[len - 1] == '-' || start[len - 1] == '.'))
        len--;
    if (len == 0 || len > NAMES_QUALIFIED_NAME_MAX)
        return -EINVAL;
    int n = snprintf(buf, size, MDEVOBJ_RESOURCE_DOMAIN "/%.*s", (int)len, start);
    if (n < 0 || (size_t)n >= size)
        return -ENAMETOOLONG;
    return names_is_extended_resource_name(buf) ? 0 : -EINVAL;
}

int mdevobj_parent_label(const char *parent, char *buf, size_t size)
{
    char out[NODE_MDEV_NAME_SIZE * 2];
    if (!parent)
        return -EINVAL;
    if (kube_names_is_pci_address(parent)) {
        size_t n = 0;
        for (const char *c = parent; *c && n + 1 < sizeof(out); c++)
            if (*c != ':' && *c != '.')
                out[n++] = *c;
        out[n] = '\0';
    } else if (sanitize(parent, "", out, sizeof(out)) < 0) {
        return -EINVAL;
    }
    size_t len = strlen(out);
    if (len == 0 || len > NAMES_DNS_LABEL_MAX || out[0] == '-' || out[len - 1] == '-')
        return -EINVAL;
    if (len >= size)
        return -ENAMETOOLONG;
    memcpy(buf, out, len + 1);
    return 0;
}

/* "<node>-<middle>-<tail>" or "<node>-<middle>" (tail NULL), checked as an object name. */
static int object_name(const char *node, const char *middle, const char *tail, char *buf,
                       size_t size)
{
    if (!names_is_dns_subdomain(node))
        return -EINVAL;
    int n = tail ? snprintf(buf, size, "%s-%s-%s", node, middle, tail)
                 : snprintf(buf, size, "%s-%s", node, middle);
    if (n < 0 || (size_t)n >= size || n > KUBE_NAME_MAX)
        return -ENAMETOOLONG;
    return names_is_dns_subdomain(buf) ? 0 : -EINVAL;
}

int mdevobj_slot_name(const char *node, const char *parent, unsigned k, char *buf, size_t size)
{
    char label[NAMES_DNS_LABEL_MAX + 1], index[16];
    int r = mdevobj_parent_label(parent, label, sizeof(label));
    if (r < 0)
        return r;
    (void)snprintf(index, sizeof(index), "%u", k);
    return object_name(node, label, index, buf, size);
}

int mdevobj_adopted_name(const char *node, const char *uuid, char *buf, size_t size)
{
    if (!uuid || !node_mdev_uuid_valid(uuid))
        return -EINVAL;
    return object_name(node, uuid, NULL, buf, size);
}

const struct node_mdev_type *mdevobj_type_find(const struct node_mdev_parent *p, const char *want)
{
    if (!p || !want || !want[0])
        return NULL;
    for (size_t i = 0; i < p->n_types; i++)
        if (strcmp(p->types[i].id, want) == 0)
            return &p->types[i];
    for (size_t i = 0; i < p->n_types; i++)
        if (p->types[i].name[0] && strcmp(p->types[i].name, want) == 0)
            return &p->types[i];
    return NULL;
}
