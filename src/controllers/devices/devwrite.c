/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/devices/devwrite.c - device objects' write plans and write chain (see devwrite.h).
 */
#include "controllers/devices/devwrite.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/json.h"
#include "base/log.h"
#include "base/metrics.h"
#include "controllers/runtime/runner.h"
#include "kube/client.h"
#include "kube/status.h"

/* --- pure ------------------------------------------------------------------------------------- */

cJSON *devwrite_owner_ref(const char *node, const char *node_uid)
{
    _cleanup_json_ cJSON *ref = cJSON_CreateObject();
    if (ref && cJSON_AddStringToObject(ref, "apiVersion", "v1") &&
        cJSON_AddStringToObject(ref, "kind", "Node") &&
        cJSON_AddStringToObject(ref, "name", node) && cJSON_AddStringToObject(ref, "uid", node_uid))
        return TAKE_PTR(ref);
    return NULL;
}

cJSON *devwrite_new_object(const char *kind, const char *name, const char *node,
                           const char *node_uid)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "apiVersion", "devices.harvesterhci.io/v1beta1");
    cJSON_AddStringToObject(o, "kind", kind);
    cJSON *meta = cJSON_AddObjectToObject(o, "metadata");
    cJSON_AddStringToObject(meta, "name", name);
    cJSON *labels = cJSON_AddObjectToObject(meta, "labels");
    cJSON_AddStringToObject(labels, "nodename", node);
    if (node_uid) {
        cJSON *refs = cJSON_AddArrayToObject(meta, "ownerReferences");
        cJSON_AddItemToArray(refs, devwrite_owner_ref(node, node_uid));
    }
    cJSON_AddObjectToObject(o, "spec");
    return o;
}

char *devwrite_wrap(const char *top, cJSON *inner)
{
    _cleanup_json_ cJSON *own = inner;
    if (!inner || !inner->child)
        return NULL;
    _cleanup_json_ cJSON *o = cJSON_CreateObject();
    if (cJSON_AddItemToObject(o, top, inner))
        TAKE_PTR(own); /* o's now */
    return cJSON_PrintUnformatted(o);
}

/* The merge patch value that turns `have` into `want`: `want` itself, unless both are objects
 * (a merge patch merges objects): then what differs, and null for each key `want` lacks. */
static cJSON *value_patch(const cJSON *want, const cJSON *have);

/* Adds to `patch` each key of `want` whose value differs in `have`, as its merge patch. */
static void add_changed(cJSON *patch, const cJSON *want, const cJSON *have)
{
    const cJSON *item;
    cJSON_ArrayForEach(item, want)
    {
        const cJSON *cur = json_field(have, item->string);
        if (!cur || !cJSON_Compare(item, cur, true))
            cJSON_AddItemToObject(patch, item->string, value_patch(item, cur));
    }
}

static cJSON *value_patch(const cJSON *want, const cJSON *have)
{
    if (!cJSON_IsObject(want) || !cJSON_IsObject(have))
        return cJSON_Duplicate(want, true);
    cJSON *patch = cJSON_CreateObject();
    add_changed(patch, want, have);
    const cJSON *item;
    cJSON_ArrayForEach(item, have)
    {
        if (!json_field(want, item->string) && !json_field(patch, item->string))
            cJSON_AddNullToObject(patch, item->string);
    }
    return patch;
}

cJSON *devwrite_status_diff(const cJSON *want, const cJSON *have, const char *const *managed,
                            size_t n)
{
    cJSON *patch = cJSON_CreateObject();
    add_changed(patch, want, have);
    for (size_t i = 0; i < n; i++)
        if (json_field(have, managed[i]) && !json_field(want, managed[i]))
            cJSON_AddNullToObject(patch, managed[i]);
    return patch;
}

static bool has_owner(const cJSON *refs, const char *node, const char *node_uid)
{
    const cJSON *ref;
    cJSON_ArrayForEach(ref, refs)
    {
        const char *kind = json_str(ref, "kind");
        const char *name = json_str(ref, "name");
        const char *uid = json_str(ref, "uid");
        if (kind && name && uid && strcmp(kind, "Node") == 0 && strcmp(name, node) == 0 &&
            strcmp(uid, node_uid) == 0)
            return true;
    }
    return false;
}

static cJSON *owners_with_node(const cJSON *refs, const char *node, const char *node_uid)
{
    cJSON *list = cJSON_CreateArray();
    const cJSON *ref;
    cJSON_ArrayForEach(ref, refs)
    {
        const char *kind = json_str(ref, "kind");
        if (!kind || strcmp(kind, "Node") != 0)
            cJSON_AddItemToArray(list, cJSON_Duplicate(ref, true));
    }
    cJSON_AddItemToArray(list, devwrite_owner_ref(node, node_uid));
    return list;
}

bool devwrite_foreign(const cJSON *obj, const char *node)
{
    const char *label = cJSON_GetStringValue(
            json_field(json_field(json_field(obj, "metadata"), "labels"), "nodename"));
    return label && strcmp(label, node) != 0;
}

void devwrite_note_foreign(const char *kind, const char *key, const cJSON *obj, const char *node)
{
    if (!devwrite_foreign(obj, node))
        return;
    log_warning("Object of another node in this node's watch; left alone", KV_STR("kind", kind),
                KV_STR("name", key),
                KV_STR("nodename",
                       json_str(json_field(json_field(obj, "metadata"), "labels"), "nodename")));
}

cJSON *devwrite_meta_diff(const cJSON *meta, const char *node, const char *node_uid)
{
    cJSON *patch = cJSON_CreateObject();
    const char *label = json_str(json_field(meta, "labels"), "nodename");
    if (!label || strcmp(label, node) != 0) {
        cJSON *labels = cJSON_AddObjectToObject(patch, "labels");
        cJSON_AddStringToObject(labels, "nodename", node);
    }
    const cJSON *refs = json_field(meta, "ownerReferences");
    if (node_uid && !has_owner(refs, node, node_uid))
        cJSON_AddItemToObject(patch, "ownerReferences", owners_with_node(refs, node, node_uid));
    return patch;
}

/* --- the write chain -------------------------------------------------------------------------- */

void devwrite_register(struct metrics *m, const char *kind,
                       struct metrics_series *ret[DEVWRITE_VERBS])
{
    static const char *const labels[] = {"kind", "verb", NULL};
    static const char *const verbs[] = {"create", "patch", "delete"};
    struct metrics_family *f =
            metrics_family(m, METRICS_COUNTER, "hostdevd_api_writes_total",
                           "Device object writes by kind and verb.", labels, NULL, 0);
    for (int i = 0; i < DEVWRITE_VERBS; i++)
        ret[i] = f ? metrics_series(f, kind, verbs[i]) : NULL;
}

static void write_next(struct devwrite *w);

/* A create answered AlreadyExists: the object is there (our earlier create whose answer was
 * lost, or another writer's) and the cache has not shown it yet. Retrying the create would
 * only conflict again until the watch catches up; the status patch that follows needs no
 * resourceVersion and its answer tells the runner which version to wait for. */
static bool created_already(struct devwrite *w, const struct kube_err *err)
{
    if (w->step != 1 || !kube_err_is_already_exists(err))
        return false;
    log_info("Device object exists already; patching it", KV_STR("kind", w->kind),
             KV_STR("name", runner_job_key(w->job)));
    return true;
}

static void on_write(const struct kube_err *err, const cJSON *obj, void *userdata)
{
    struct devwrite *w = userdata;
    bool deleting = w->step == 4;
    if (err && created_already(w, err)) {
        write_next(w);
        return;
    }
    if (err && !(deleting && kube_err_is_not_found(err))) {
        log_error("Failed to write device object", KV_STR("kind", w->kind),
                  KV_STR("name", runner_job_key(w->job)), KV_INT("http", err->http),
                  KV_STR("reason", err->reason), KV_STR("message", err->message));
        runner_job_done(w->job, RUNNER_RETRY, 0);
        return;
    }
    runner_job_wrote(w->job, deleting ? NULL : obj);
    write_next(w);
}

static int write_patch(struct devwrite *w, const char *p, bool status)
{
    metrics_inc(w->writes[DEVWRITE_PATCH]);
    log_v(2, "Patching device object", KV_STR("kind", w->kind),
          KV_STR("name", runner_job_key(w->job)), KV_STR("patch", p));
    int e = kube_client_patch(w->http, w->res, NULL, runner_job_key(w->job), KUBE_PATCH_MERGE, p,
                              status, on_write, w);
    return e < 0 ? e : 1;
}

/* Starts the write of `step`: 1 when one is in flight, 0 when the step has none, -errno. */
static int write_step(struct devwrite *w, int step)
{
    const char *key = runner_job_key(w->job);
    if (step == 0 && w->object) {
        metrics_inc(w->writes[DEVWRITE_CREATE]);
        log_info("Creating device object", KV_STR("kind", w->kind), KV_STR("name", key));
        int e = kube_client_create(w->http, w->res, NULL, w->object, on_write, w);
        return e < 0 ? e : 1;
    }
    /* status first: a new object is complete as early as possible; then labels and owners */
    if (step == 1 && w->status_patch)
        return write_patch(w, w->status_patch, true);
    if (step == 2 && w->meta_patch)
        return write_patch(w, w->meta_patch, false);
    if (step == 3 && w->delete) {
        metrics_inc(w->writes[DEVWRITE_DELETE]);
        log_info(w->delete_why ? w->delete_why : "Deleting device object", KV_STR("kind", w->kind),
                 KV_STR("name", key));
        int e = kube_client_delete(w->http, w->res, NULL, key, w->uid, NULL, on_write, w);
        return e < 0 ? e : 1;
    }
    return 0;
}

static void write_next(struct devwrite *w)
{
    while (w->step < 4) {
        int e = write_step(w, w->step++);
        if (e > 0)
            return; /* on_write goes on */
        if (e < 0) {
            log_error("Cannot start a request", KV_STR("kind", w->kind),
                      KV_STR("name", runner_job_key(w->job)), KV_ERRNO(e));
            runner_job_done(w->job, RUNNER_RETRY, 0);
            return;
        }
    }
    runner_job_done(w->job, RUNNER_DONE, 0);
}

void devwrite_run(struct devwrite *w, struct runner_job *job)
{
    w->job = job;
    w->step = 0;
    write_next(w);
}

void devwrite_done(struct devwrite *w)
{
    cJSON_Delete(w->object);
    free(w->status_patch);
    free(w->meta_patch);
    w->object = NULL;
    w->status_patch = w->meta_patch = NULL;
}
