/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/runtime/eventspart.c - an Event recorder as a part (see eventspart.h).
 */
#include "controllers/runtime/eventspart.h"

#include "controllers/runtime/manager.h"
#include "controllers/runtime/part.h"
#include "kube/events.h"

static void *make(const struct part_env *env)
{
    struct kube_recorder_config rc = {.controller = "hostdevd.io/controller",
                                      .instance = env->opt->identity};
    return kube_recorder_new(env->loop, env->http, &rc);
}

static void stop(void *self)
{
    kube_recorder_flush(self);
}

static int in_flight(void *self)
{
    return (int)kube_recorder_in_flight(self);
}

static void part_free(void *self)
{
    (void)kube_recorder_free(self);
}

struct kube_recorder *eventspart_recorder(const struct manager *m)
{
    return manager_part(m, &eventspart_controller);
}

const struct part_ops eventspart_controller = {
        .name = "events", .make = make, .stop = stop, .in_flight = in_flight, .free = part_free};
