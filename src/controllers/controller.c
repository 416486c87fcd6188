/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/controller.c - `hostdevd controller` (see controller.h): a list of parts on the
 * process skeleton. Four cluster-wide caches (PCIDeviceClaims, USBDeviceClaims, and of the
 * PCIDevices and USBDevices only those a claim names: objects/kinds.h kind_claimed_*, so that
 * memory follows the claims, not the cluster's devices; the process's, runtime/manager.h) ready
 * once synced, the Event recorder, the
 * KubeVirt reconciler and the reconciler of claims no agent serves (controllers/claims/
 * nodeclaims.c), the claim gauge, and leader election (runtime/leasepart.h): the reconcilers
 * hand out work only while this replica leads and look at everything again when it starts to.
 */
#include "controllers/controller.h"

#include <stdio.h>
#include <unistd.h>

#include "base/log.h"
#include "controllers/runtime/process.h"

/* The parts, one line each (runtime/part.h). */
#define CONTROLLER_PARTS(X)                                                                        \
    X(manager_caches_part)   /* runtime/manager: ready once the caches have synced */              \
    X(eventspart_controller) /* runtime/eventspart: the Event recorder */                          \
    X(kvpermit_part)         /* kubevirt/kubevirt: KubeVirt's permittedHostDevices */              \
    X(nodeclaims_part)       /* claims/nodeclaims: claims no agent serves */                       \
    X(claimgauge_part)       /* claims/claimgauge: hostdevd_claims for alerts */                   \
    X(leasepart_leader)      /* runtime/leasepart: leader election */

CONTROLLER_PARTS(PART_DECLARE)
static const struct part_ops *const parts[] = {CONTROLLER_PARTS(PART_LIST) NULL};

int controller_run(const struct controller_config *cfg)
{
    char identity[256] = "";
    if (cfg->identity)
        (void)snprintf(identity, sizeof(identity), "%s", cfg->identity);
    else if (gethostname(identity, sizeof(identity) - 1) < 0)
        (void)snprintf(identity, sizeof(identity), "hostdevd-controller-%d", (int)getpid());
    struct part_options opt = {.namespace = cfg->namespace,
                               .lease_namespace = cfg->lease_namespace,
                               .kubevirt = cfg->kubevirt,
                               .identity = identity,
                               .lease_duration = cfg->lease_duration};
    struct process_config pc = {
            .role = "controller", .kubeconfig = cfg->kubeconfig, .listen = cfg->listen};
    struct process *proc = NULL;
    log_info("Starting hostdevd controller", KV_STR("version", HOSTDEVD_VERSION),
             KV_STR("identity", identity), KV_STR("leaseNamespace", cfg->namespace));
    int r = process_new(&pc, &proc);
    if (r == 0) {
        struct part_env env = process_env(proc);
        env.opt = &opt;
        r = process_add_parts(proc, parts, &env);
    }
    int rc = r == 0 ? process_run(proc) : 1;
    process_free(proc);
    return rc;
}
