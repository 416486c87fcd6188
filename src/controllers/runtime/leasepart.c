/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/runtime/leasepart.c - a Lease as a process part (see leasepart.h).
 */
#include "controllers/runtime/leasepart.h"

#include <errno.h>
#include <stdlib.h>

#include "base/buf.h"
#include "controllers/runtime/part.h"
#include "controllers/runtime/process.h"
#include "kube/leader.h"

struct leasepart {
    struct kube_leader *leader;
    bool releasing; /* the Lease is being given up (SIGTERM) */
};

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

static int part_start(void *userdata)
{
    const struct leasepart *p = userdata;
    return kube_leader_start(p->leader);
}

static void on_released(void *userdata)
{
    struct leasepart *p = userdata;
    p->releasing = false;
}

static void part_stop(void *userdata)
{
    struct leasepart *p = userdata;
    p->releasing = true;
    kube_leader_release(p->leader, on_released, p);
}

static int part_in_flight(void *userdata)
{
    const struct leasepart *p = userdata;
    return p->releasing ? 1 : 0;
}

static void part_free(void *userdata)
{
    struct leasepart *p = userdata;
    p->leader = kube_leader_free(p->leader);
    free(p);
}

const struct part_ops leasepart_leader = {.name = "leader",
                                          .start = part_start,
                                          .ready = part_ready,
                                          .stop = part_stop,
                                          .in_flight = part_in_flight,
                                          .free = part_free};
const struct part_ops leasepart_heartbeat = {.name = "heartbeat",
                                             .start = part_start,
                                             .stop = part_stop,
                                             .in_flight = part_in_flight,
                                             .free = part_free};

int leasepart_add(struct process *proc, const struct part_ops *ops,
                  const struct kube_leader_config *lc, struct kube_leader **ret)
{
    struct leasepart *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->leader = kube_leader_new(process_loop(proc), process_http(proc), lc);
    if (!p->leader) {
        free(p);
        return -EINVAL;
    }
    struct kube_leader *leader = p->leader;
    int r = process_add(proc, ops, p); /* frees the part on failure */
    *ret = r == 0 ? leader : NULL;
    return r;
}
