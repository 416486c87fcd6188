/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/devices/nodeuid.c - this node's Node uid (see nodeuid.h).
 */
#include "controllers/devices/nodeuid.h"

#include <cjson/cJSON.h>
#include <ev.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "controllers/runtime/manager.h"
#include "controllers/runtime/part.h"
#include "kube/client.h"
#include "kube/status.h"

#define NODE_RETRY     10.0 /* first retry of a missing Node; doubles up to NODE_RETRY_MAX */
#define NODE_RETRY_MAX 300.0

const struct topic nodeuid_known = {"the Node's uid is known"};

struct nodeuid {
    struct {
        struct part_env env;
    } cfg;
    char *uid;
    bool answered; /* the first GET has answered */
    double retry_in;
    ev_timer retry;
};

static void get_node(struct nodeuid *n);

static void retry_later(struct nodeuid *n)
{
    n->retry_in = n->retry_in > 0 ? n->retry_in * 2 : NODE_RETRY;
    if (n->retry_in > NODE_RETRY_MAX)
        n->retry_in = NODE_RETRY_MAX;
    ev_timer_set(&n->retry, n->retry_in, 0.);
    ev_timer_start(n->cfg.env.loop, &n->retry);
}

static void on_node(const struct kube_err *err, const cJSON *obj, void *userdata)
{
    struct nodeuid *n = userdata;
    const char *uid = kube_meta_str(obj, "uid");
    if (err || !uid) {
        log_warning("Cannot read this node's Node object; device objects get no ownerReference "
                    "yet",
                    KV_STR("node", n->cfg.env.node_name), KV_INT("http", err ? err->http : 0),
                    KV_STR("reason", err ? err->reason : ""));
        retry_later(n);
        if (!n->answered) {
            n->answered = true;
            manager_emit(n->cfg.env.mgr, &nodeuid_known, NULL);
        }
        return;
    }
    n->answered = true;
    free(n->uid);
    n->uid = strdup(uid);
    manager_emit(n->cfg.env.mgr, &nodeuid_known, NULL);
}

static void get_node(struct nodeuid *n)
{
    if (kube_client_get(n->cfg.env.http, &kube_res_nodes, NULL, n->cfg.env.node_name, on_node, n) <
        0)
        retry_later(n);
}

static void on_retry(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    get_node(w->data);
}

struct nodeuid *nodeuid_new(const struct part_env *env)
{
    struct nodeuid *n = calloc(1, sizeof(*n));
    if (!n)
        return NULL;
    n->cfg.env = *env;
    ev_timer_init(&n->retry, on_retry, NODE_RETRY, 0.);
    n->retry.data = n;
    return n;
}

static int nodeuid_start(void *self)
{
    get_node(self);
    return 0;
}

const char *nodeuid_get(const struct nodeuid *n)
{
    return n ? n->uid : NULL;
}

bool nodeuid_answered(const struct nodeuid *n)
{
    return !n || n->answered;
}

static void nodeuid_stop(void *self)
{
    struct nodeuid *n = self;
    ev_timer_stop(n->cfg.env.loop, &n->retry);
}

static void nodeuid_free(void *self)
{
    struct nodeuid *n = self;
    nodeuid_stop(n);
    free(n->uid);
    free(n);
}

static void *nodeuid_make(const struct part_env *env)
{
    return nodeuid_new(env);
}

const struct part_ops nodeuid_part = {.name = "node",
                                      .make = nodeuid_make,
                                      .start = nodeuid_start,
                                      .stop = nodeuid_stop,
                                      .free = nodeuid_free};
