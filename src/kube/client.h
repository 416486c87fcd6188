/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube/client.h - the API verbs on top of kube/http: get, list, create, update, JSON merge
 * patch, JSON patch, status-subresource writes, delete with preconditions. Asynchronous: each
 * verb starts a request and calls back once with the decoded object or a classified error
 * (an optimistic-concurrency failure is a conflict: kube_err_is_conflict()).
 * Also builds resource paths and query strings. Does not log.
 */
#pragma once

#include <stdbool.h>

#include "kube/status.h"

struct buf;
struct cJSON;
struct kube_http;
struct kube_req;

/* An API resource: group "" is the core group (/api/v1). */
struct kube_resource {
    const char *group;
    const char *version;
    const char *plural;
    bool namespaced;
};

extern const struct kube_resource kube_res_pcidevices;
extern const struct kube_resource kube_res_pcideviceclaims;
extern const struct kube_resource kube_res_usbdevices;
extern const struct kube_resource kube_res_usbdeviceclaims;
extern const struct kube_resource kube_res_sriovnetworkdevices;
extern const struct kube_resource kube_res_vgpudevices;
extern const struct kube_resource kube_res_nodes;
extern const struct kube_resource kube_res_kubevirts;
extern const struct kube_resource
        kube_res_crds; /* apiextensions.k8s.io/v1 customresourcedefinitions */
extern const struct kube_resource kube_res_leases;
extern const struct kube_resource kube_res_events;
extern const struct kube_resource kube_res_resourceslices;
extern const struct kube_resource kube_res_resourceclaims;

/* Success: `err` is NULL and `obj` the response object (borrowed for the call; NULL when the
 * response had no body). Failure: `err` says what happened and `obj` is NULL. */
typedef void (*kube_client_cb)(const struct kube_err *err, const struct cJSON *obj, void *userdata);

enum kube_patch_type { KUBE_PATCH_MERGE, KUBE_PATCH_JSON };

/*
 * Appends "/apis/<group>/<version>[/namespaces/<ns>]/<plural>[/<name>[/<subresource>]]" to
 * `out` (names are validated as path segments: no '/', no "." or ".."; a namespaced resource with
 * no namespace and no name is the all-namespaces collection, for LIST and WATCH). Returns 0,
 * -EINVAL or -E2BIG.
 */
int kube_client_path(const struct kube_resource *r, const char *ns, const char *name,
                     const char *subresource, struct buf *out);

/* Appends "?key=value" or "&key=value", percent-encoding the value. Returns 0 or -E2BIG. */
int kube_client_query(struct buf *out, const char *key, const char *value);

/* metadata.<field> of an object when it is a string ("name", "uid", "resourceVersion", ...),
 * else NULL. Borrowed from `obj`. */
const char *kube_meta_str(const struct cJSON *obj, const char *field);

/* Every verb returns 0 when the request started (the callback will run once) or a negative
 * errno (it will not). `ns` is NULL for cluster-scoped resources. */
int kube_client_get(struct kube_http *h, const struct kube_resource *r, const char *ns,
                    const char *name, kube_client_cb cb, void *userdata);

/* `query` is appended to the collection path as is ("?labelSelector=...&limit=500") or NULL. */
int kube_client_list(struct kube_http *h, const struct kube_resource *r, const char *ns,
                     const char *query, kube_client_cb cb, void *userdata);

int kube_client_create(struct kube_http *h, const struct kube_resource *r, const char *ns,
                       const struct cJSON *obj, kube_client_cb cb, void *userdata);

/* PUT of the whole object (or of its status when `status`); metadata.resourceVersion in `obj`
 * makes it conditional. */
int kube_client_update(struct kube_http *h, const struct kube_resource *r, const char *ns,
                       const struct cJSON *obj, bool status, kube_client_cb cb, void *userdata);

int kube_client_patch(struct kube_http *h, const struct kube_resource *r, const char *ns,
                      const char *name, enum kube_patch_type type, const char *patch, bool status,
                      kube_client_cb cb, void *userdata);

/* Deletes, only if the object still has `uid` and/or `resource_version` when those are not
 * NULL (preconditions; a mismatch is a conflict). */
int kube_client_delete(struct kube_http *h, const struct kube_resource *r, const char *ns,
                       const char *name, const char *uid, const char *resource_version,
                       kube_client_cb cb, void *userdata);

/*
 * A verb for an owner that may go while its request is in flight: `method` ("GET", "POST",
 * "PUT") on `r`/`ns`/`name` (NULL: the collection) with `body` (NULL: none), as the verbs above,
 * and writes the request to `ret` so that the owner can kube_http_cancel() it (then `cb` never
 * runs and nothing of the request is left). `*ret` is valid until `cb` runs.
 */
int kube_client_send(struct kube_http *h, const char *method, const struct kube_resource *r,
                     const char *ns, const char *name, const struct cJSON *body, kube_client_cb cb,
                     void *userdata, struct kube_req **ret);
