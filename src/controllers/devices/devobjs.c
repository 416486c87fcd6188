/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/devices/devobjs.c - the device-object reconcilers' shared core (see devobjs.h).
 */
#include "controllers/devices/devobjs.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/log.h"
#include "base/map.h"
#include "controllers/devices/nodeuid.h"
#include "controllers/runtime/manager.h"

/* Writes of one reconciler in flight at once. */
#define MAX_IN_FLIGHT 4

void *devobjs_new(size_t size, const struct devobjs_config *cfg, const struct devobjs_kind *kind,
                  const struct runner_ops *ops)
{
    struct devobjs *o = calloc(1, size);
    if (!o)
        return NULL;
    o->cfg = *cfg;
    o->kind = kind;
    struct runner_config rc = {
            .name = kind->name,
            .loop = cfg->env.loop,
            .http = cfg->env.http,
            .max_in_flight = MAX_IN_FLIGHT,
            .metrics = cfg->env.metrics,
            .ops = ops,
            .ctx = o,
    };
    o->runner = manager_runner(cfg->env.mgr, kind->cache, &rc);
    if (!o->runner) {
        free(o);
        return NULL;
    }
    devwrite_register(cfg->env.metrics, kind->kind, o->writes);
    return o;
}

void devobjs_free(void *self)
{
    struct devobjs *o = self;
    runner_free(o->runner);
    map_free(o->want);
    free(o);
}

struct devwrite *devobjs_write(const struct devobjs *o, cJSON *object, char *status_patch,
                               char *meta_patch, bool delete, const char *uid)
{
    struct devwrite *w = calloc(1, sizeof(*w));
    if (!w) {
        cJSON_Delete(object);
        free(status_patch);
        free(meta_patch);
        return NULL;
    }
    *w = (struct devwrite){.http = o->cfg.env.http,
                           .res = o->kind->cache->res,
                           .kind = o->kind->kind,
                           .writes = o->writes,
                           .object = object,
                           .status_patch = status_patch,
                           .meta_patch = meta_patch,
                           .delete = delete,
                           .delete_why = o->kind->gone};
    (void)snprintf(w->uid, sizeof(w->uid), "%s", uid ? uid : "");
    return w;
}

void devobjs_take_want(struct devobjs *o, struct map *want)
{
    map_free(o->want);
    o->want = want;
    devobjs_enqueue_all(o);
}

void devobjs_enqueue_all(struct devobjs *o)
{
    const char *key;
    void *v;
    size_t pos = 0;
    while (map_next(o->want, &pos, &key, &v))
        runner_enqueue(o->runner, key);
    runner_enqueue_all(o->runner);
}

const struct map *devobjs_want(const struct devobjs *o)
{
    return o->want;
}

void devobjs_act(struct runner_job *job, void *plan, void *ctx)
{
    (void)ctx;
    devwrite_run(plan, job);
}

void devobjs_plan_free(void *plan)
{
    devwrite_done(plan);
    free(plan);
}

void devobjs_on_event(void *ctx, const char *key, const cJSON *obj, enum runner_event ev)
{
    const struct devobjs *o = ctx;
    if (ev == RUNNER_EVENT_ADD)
        devwrite_note_foreign(o->kind->kind, key, obj, o->cfg.env.node_name);
}

void devobjs_enqueue_all_watch(void *self, const struct watch_event *ev)
{
    (void)ev;
    devobjs_enqueue_all(self);
}

struct devobjs_config devobjs_config_of(const struct part_env *env)
{
    return (struct devobjs_config){.env = *env, .node = manager_part(env->mgr, &nodeuid_part)};
}

void devobjs_on_converged(void *ctx)
{
    const struct devobjs *o = ctx;
    log_info(o->kind->written, KV_INT("devices", map_size(o->want)));
}

bool devobjs_can_start(void *ctx)
{
    const struct devobjs *o = ctx;
    return o->want != NULL && nodeuid_answered(o->cfg.node);
}

int devobjs_start(void *self)
{
    const struct devobjs *o = self;
    return runner_start(o->runner);
}

struct runner *devobjs_runner(const void *self)
{
    const struct devobjs *o = self;
    return o->runner;
}
