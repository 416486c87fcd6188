/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/runtime/leasepart.c - a Lease as a process part (see leasepart.h).
 */
#include "controllers/runtime/leasepart.h"

#include <errno.h>
#include <stdlib.h>

#include "base/buf.h"
#include "base/log.h"
#include "base/metrics.h"
#include "controllers/runtime/manager.h"
#include "controllers/runtime/part.h"
#include "kube/leader.h"

#define LEADER_LEASE "hostdevd-controller"

struct leasepart {
    struct kube_leader *leader;
    bool releasing; /* the Lease is being given up (SIGTERM) */
    /* the leader's */
    struct manager *mgr;
    struct metrics_series *leading;
    const char *identity;
};

const struct topic leasepart_leading = {"this replica leads"};

/* Ready while it can serve: leading, or standing by with the Lease readable (it takes over the
 * moment the leader lets go). Not ready while the Lease cannot be read or written: no replica
 * could lead, and /readyz says why. */
static bool part_ready(struct buf *why, void *userdata)
{
    const struct leasepart *p = userdata;
    const char *problem = kube_leader_problem(p->leader);
    if (kube_leader_is_leader(p->leader) || !problem)
        return true;
    (void)buf_printf(why, "lease: %s", problem);
    return false;
}

int leasepart_start(void *self)
{
    const struct leasepart *p = self;
    return kube_leader_start(p->leader);
}

static void on_released(void *userdata)
{
    struct leasepart *p = userdata;
    p->releasing = false;
}

void leasepart_stop(void *self)
{
    struct leasepart *p = self;
    p->releasing = true;
    kube_leader_release(p->leader, on_released, p);
}

int leasepart_in_flight(void *self)
{
    const struct leasepart *p = self;
    return p->releasing ? 1 : 0;
}

void leasepart_free(void *self)
{
    struct leasepart *p = self;
    if (!p)
        return;
    p->leader = kube_leader_free(p->leader);
    free(p);
}

struct kube_leader *leasepart_lease(void *self)
{
    return ((struct leasepart *)self)->leader;
}

void *leasepart_new(const struct part_env *env, const struct kube_leader_config *lc)
{
    struct leasepart *p = calloc(1, sizeof(*p));
    if (p && !(p->leader = kube_leader_new(env->loop, env->http, lc))) {
        free(p);
        return NULL;
    }
    return p;
}

/* --- the controller's leader ------------------------------------------------------------------ */

static void on_started(void *userdata)
{
    struct leasepart *p = userdata;
    metrics_set(p->leading, 1);
    log_info("Leading: keeping KubeVirt's permittedHostDevices and watching for claims no agent "
             "serves",
             KV_STR("identity", p->identity));
    manager_emit(p->mgr, &leasepart_leading, NULL);
}

static void on_stopped(void *userdata)
{
    const struct leasepart *p = userdata;
    metrics_set(p->leading, 0);
    log_warning("No longer leading", KV_STR("identity", p->identity));
}

static void on_problem(const char *problem, void *userdata)
{
    const struct leasepart *p = userdata;
    if (problem)
        log_error("Cannot hold the leader Lease", KV_STR("identity", p->identity),
                  KV_STR("problem", problem));
    else
        log_info("The leader Lease can be read and written again", KV_STR("identity", p->identity));
}

static void *leader_make(const struct part_env *env)
{
    struct leasepart *p = calloc(1, sizeof(*p));
    const struct part_options *o = env->opt;
    if (!p)
        return NULL;
    struct kube_leader_config lc = {.namespace = o->namespace,
                                    .name = LEADER_LEASE,
                                    .identity = o->identity,
                                    .lease_duration = o->lease_duration,
                                    .renew_deadline = o->lease_duration * 2 / 3,
                                    .retry_period = o->lease_duration / 7.5,
                                    .on_started_leading = on_started,
                                    .on_stopped_leading = on_stopped,
                                    .on_problem = on_problem,
                                    .userdata = p};
    p->mgr = env->mgr;
    p->identity = o->identity;
    p->leading = metrics_one(env->metrics, METRICS_GAUGE, "hostdevd_leader",
                             "1 while this replica leads.");
    if (!(p->leader = kube_leader_new(env->loop, env->http, &lc))) {
        free(p);
        return NULL;
    }
    return p;
}

bool leasepart_leads(const struct manager *m)
{
    const struct leasepart *p = manager_part(m, &leasepart_leader);
    return p && p->leader && kube_leader_is_leader(p->leader);
}

const struct part_ops leasepart_leader = {.name = "leader",
                                          .make = leader_make,
                                          .start = leasepart_start,
                                          .ready = part_ready,
                                          .stop = leasepart_stop,
                                          .in_flight = leasepart_in_flight,
                                          .free = leasepart_free};
