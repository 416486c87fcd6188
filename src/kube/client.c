/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube/client.c - API verbs over kube/http. See client.h. Does not log.
 */
#include "kube/client.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/json.h"
#include "kube/http.h"

#define PATH_MAX_LEN ((size_t)8 * 1024)

const struct kube_resource kube_res_pcidevices = {"devices.harvesterhci.io", "v1beta1",
                                                  "pcidevices", false};
const struct kube_resource kube_res_pcideviceclaims = {"devices.harvesterhci.io", "v1beta1",
                                                       "pcideviceclaims", false};
const struct kube_resource kube_res_usbdevices = {"devices.harvesterhci.io", "v1beta1",
                                                  "usbdevices", false};
const struct kube_resource kube_res_usbdeviceclaims = {"devices.harvesterhci.io", "v1beta1",
                                                       "usbdeviceclaims", false};
const struct kube_resource kube_res_sriovnetworkdevices = {"devices.harvesterhci.io", "v1beta1",
                                                           "sriovnetworkdevices", false};
const struct kube_resource kube_res_vgpudevices = {"devices.harvesterhci.io", "v1beta1",
                                                   "vgpudevices", false};
const struct kube_resource kube_res_nodes = {"", "v1", "nodes", false};
const struct kube_resource kube_res_kubevirts = {"kubevirt.io", "v1", "kubevirts", true};
const struct kube_resource kube_res_crds = {"apiextensions.k8s.io", "v1",
                                            "customresourcedefinitions", false};
const struct kube_resource kube_res_leases = {"coordination.k8s.io", "v1", "leases", true};
const struct kube_resource kube_res_events = {"events.k8s.io", "v1", "events", true};
const struct kube_resource kube_res_resourceslices = {"resource.k8s.io", "v1", "resourceslices",
                                                      false};
const struct kube_resource kube_res_resourceclaims = {"resource.k8s.io", "v1", "resourceclaims",
                                                      true};

struct call {
    kube_client_cb cb;
    void *userdata;
};

static bool is_segment(const char *s)
{
    return s && s[0] && !strchr(s, '/') && !strchr(s, '?') && !strchr(s, '%') &&
           strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

int kube_client_path(const struct kube_resource *r, const char *ns, const char *name,
                     const char *subresource, struct buf *out)
{
    /* a namespaced collection without a namespace is the all-namespaces one (LIST, WATCH) */
    if ((!r->namespaced && ns) || (r->namespaced && !ns && name) || (ns && !is_segment(ns)) ||
        (name && !is_segment(name)))
        return -EINVAL;
    int e = r->group[0] ? buf_printf(out, "/apis/%s/%s", r->group, r->version)
                        : buf_printf(out, "/api/%s", r->version);
    if (e == 0 && ns)
        e = buf_printf(out, "/namespaces/%s", ns);
    if (e == 0)
        e = buf_printf(out, "/%s", r->plural);
    if (e == 0 && name)
        e = buf_printf(out, "/%s", name);
    if (e == 0 && name && subresource)
        e = buf_printf(out, "/%s", subresource);
    return e;
}

static bool unreserved(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.' || c == '~';
}

int kube_client_query(struct buf *out, const char *key, const char *value)
{
    int e = buf_printf(out, "%c%s=", strchr(buf_str(out), '?') ? '&' : '?', key);
    for (const unsigned char *p = (const unsigned char *)value; e == 0 && *p; p++)
        e = unreserved(*p) ? buf_add(out, p, 1) : buf_printf(out, "%%%02X", *p);
    return e;
}

static void on_done(const struct kube_resp *resp, void *userdata)
{
    _cleanup_free_ struct call *c = userdata;
    struct kube_err err;
    if (resp->http == 0) {
        kube_err_transport(resp->err ? resp->err : -EIO, resp->error, &err);
        c->cb(&err, NULL, c->userdata);
        return;
    }
    if (resp->http >= 300 || resp->err < 0) {
        kube_status_decode(resp->http, resp->body, resp->body_len, resp->retry_after, &err);
        if (resp->http < 300)
            kube_err_transport(resp->err, resp->error, &err);
        c->cb(&err, NULL, c->userdata);
        return;
    }
    _cleanup_json_ cJSON *obj = NULL;
    if (resp->body_len > 0) {
        struct err why;
        if (json_parse_strict(resp->body, resp->body_len, &obj, &why) < 0) {
            char msg[sizeof(why.msg) + 32];
            (void)snprintf(msg, sizeof(msg), "response is not JSON: %s", why.msg);
            kube_err_transport(-EBADMSG, msg, &err);
            err.http = resp->http;
            c->cb(&err, NULL, c->userdata);
            return;
        }
    }
    c->cb(NULL, obj, c->userdata);
}

static int start(struct kube_http *h, const char *method, const struct buf *path, const char *body,
                 const char *content_type, kube_client_cb cb, void *userdata, struct kube_req **ret)
{
    struct call *c = malloc(sizeof(*c));
    if (!c)
        return -ENOMEM;
    *c = (struct call){.cb = cb, .userdata = userdata};
    struct kube_http_req req = {
            .method = method,
            .path = buf_str(path),
            .body = body,
            .body_len = body ? strlen(body) : 0,
            .content_type = content_type,
            .on_done = on_done,
            .userdata = c,
            .on_drop = free,
    };
    int e = kube_http_start(h, &req, ret);
    if (e < 0)
        free(c);
    return e;
}

/* Builds the path of `r`/`ns`/`name`[/subresource] followed by `query`, and starts. */
static int verb(struct kube_http *h, const char *method, const struct kube_resource *r,
                const char *ns, const char *name, const char *sub, const char *query,
                const char *body, const char *content_type, kube_client_cb cb, void *userdata)
{
    _cleanup_buf_ struct buf path;
    buf_init(&path, PATH_MAX_LEN);
    int e = kube_client_path(r, ns, name, sub, &path);
    if (e == 0 && query)
        e = buf_adds(&path, query);
    if (e == 0)
        e = start(h, method, &path, body, content_type, cb, userdata, NULL);
    return e;
}

int kube_client_send(struct kube_http *h, const char *method, const struct kube_resource *r,
                     const char *ns, const char *name, const struct cJSON *body, kube_client_cb cb,
                     void *userdata, struct kube_req **ret)
{
    _cleanup_buf_ struct buf path;
    buf_init(&path, PATH_MAX_LEN);
    _cleanup_free_ char *text = body ? cJSON_PrintUnformatted(body) : NULL;
    int e = body && !text ? -ENOMEM : kube_client_path(r, ns, name, NULL, &path);
    if (e == 0)
        e = start(h, method, &path, text, NULL, cb, userdata, ret);
    return e;
}

int kube_client_get(struct kube_http *h, const struct kube_resource *r, const char *ns,
                    const char *name, kube_client_cb cb, void *userdata)
{
    if (!name)
        return -EINVAL;
    return verb(h, "GET", r, ns, name, NULL, NULL, NULL, NULL, cb, userdata);
}

int kube_client_list(struct kube_http *h, const struct kube_resource *r, const char *ns,
                     const char *query, kube_client_cb cb, void *userdata)
{
    return verb(h, "GET", r, ns, NULL, NULL, query, NULL, NULL, cb, userdata);
}

int kube_client_create(struct kube_http *h, const struct kube_resource *r, const char *ns,
                       const struct cJSON *obj, kube_client_cb cb, void *userdata)
{
    _cleanup_free_ char *body = cJSON_PrintUnformatted(obj);
    if (!body)
        return -ENOMEM;
    return verb(h, "POST", r, ns, NULL, NULL, NULL, body, NULL, cb, userdata);
}

const char *kube_meta_str(const struct cJSON *obj, const char *field)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(meta, field));
}

int kube_client_update(struct kube_http *h, const struct kube_resource *r, const char *ns,
                       const struct cJSON *obj, bool status, kube_client_cb cb, void *userdata)
{
    const char *name = kube_meta_str(obj, "name");
    if (!name)
        return -EINVAL;
    _cleanup_free_ char *body = cJSON_PrintUnformatted(obj);
    if (!body)
        return -ENOMEM;
    return verb(h, "PUT", r, ns, name, status ? "status" : NULL, NULL, body, NULL, cb, userdata);
}

int kube_client_patch(struct kube_http *h, const struct kube_resource *r, const char *ns,
                      const char *name, enum kube_patch_type type, const char *patch, bool status,
                      kube_client_cb cb, void *userdata)
{
    if (!name || !patch)
        return -EINVAL;
    const char *ct = type == KUBE_PATCH_JSON ? "application/json-patch+json"
                                             : "application/merge-patch+json";
    return verb(h, "PATCH", r, ns, name, status ? "status" : NULL, NULL, patch, ct, cb, userdata);
}

static char *delete_options(const char *uid, const char *resource_version)
{
    _cleanup_json_ cJSON *opts = cJSON_CreateObject();
    cJSON *pre = cJSON_AddObjectToObject(opts, "preconditions");
    cJSON_AddStringToObject(opts, "kind", "DeleteOptions");
    cJSON_AddStringToObject(opts, "apiVersion", "v1");
    if (pre && uid)
        cJSON_AddStringToObject(pre, "uid", uid);
    if (pre && resource_version)
        cJSON_AddStringToObject(pre, "resourceVersion", resource_version);
    return pre ? cJSON_PrintUnformatted(opts) : NULL;
}

int kube_client_delete(struct kube_http *h, const struct kube_resource *r, const char *ns,
                       const char *name, const char *uid, const char *resource_version,
                       kube_client_cb cb, void *userdata)
{
    if (!name)
        return -EINVAL;
    _cleanup_free_ char *body = NULL;
    if (uid || resource_version) {
        body = delete_options(uid, resource_version);
        if (!body)
            return -ENOMEM;
    }
    return verb(h, "DELETE", r, ns, name, NULL, NULL, body, NULL, cb, userdata);
}
