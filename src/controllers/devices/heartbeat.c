/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/devices/heartbeat.c - the agent's heartbeat Lease (see heartbeat.h).
 */
#include "controllers/devices/heartbeat.h"

#include <cjson/cJSON.h>
#include <stdlib.h>

#include "controllers/devices/devwrite.h"
#include "controllers/devices/nodeuid.h"
#include "controllers/runtime/leasepart.h"
#include "controllers/runtime/manager.h"
#include "controllers/runtime/part.h"
#include "kube/leader.h"

struct heartbeat {
    void *lease; /* the Lease part (runtime/leasepart.h) */
    const struct nodeuid *node;
    const char *node_name;
};

static void *make(const struct part_env *env)
{
    const struct part_options *o = env->opt;
    struct kube_leader_config lc = {.namespace = o->lease_namespace,
                                    .name = env->node_name,
                                    .identity = env->node_name,
                                    .lease_duration = o->heartbeat,
                                    .renew_deadline = o->heartbeat * 5 / 6,
                                    .retry_period = o->heartbeat / 3};
    struct heartbeat *h = calloc(1, sizeof(*h));
    if (h && !(h->lease = leasepart_new(env, &lc))) {
        free(h);
        return NULL;
    }
    if (h) {
        h->node = manager_part(env->mgr, &nodeuid_part);
        h->node_name = env->node_name;
    }
    return h;
}

/* The Node's uid is known: the Lease goes with the Node (from the next renewal). */
static void on_node_uid(void *self, const struct watch_event *ev)
{
    const struct heartbeat *h = self;
    const char *uid = nodeuid_get(h->node);
    cJSON *owner = uid ? devwrite_owner_ref(h->node_name, uid) : NULL;
    (void)ev;
    if (owner)
        (void)kube_leader_set_owner(leasepart_lease(h->lease), owner);
    cJSON_Delete(owner);
}

static int start(void *self)
{
    return leasepart_start(((struct heartbeat *)self)->lease);
}

static void stop(void *self)
{
    leasepart_stop(((struct heartbeat *)self)->lease);
}

static int in_flight(void *self)
{
    return leasepart_in_flight(((struct heartbeat *)self)->lease);
}

static void heartbeat_free(void *self)
{
    struct heartbeat *h = self;
    leasepart_free(h->lease);
    free(h);
}

static const struct watch watches[] = {
        {.topic = &nodeuid_known, .map = on_node_uid},
        {0},
};

const struct part_ops heartbeat_part = {.name = "heartbeat",
                                        .make = make,
                                        .watches = watches,
                                        .start = start,
                                        .stop = stop,
                                        .in_flight = in_flight,
                                        .free = heartbeat_free};
