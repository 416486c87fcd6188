/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/controller.c - `hostdevd controller` (see controller.h): a list of parts on the
 * process skeleton. Four cluster-wide caches (PCIDeviceClaims, PCIDevices, USBDeviceClaims,
 * USBDevices: the process's, runtime/manager.h) ready once synced, the Event recorder, the
 * KubeVirt reconciler and the reconciler of claims no agent serves (controllers/claims/
 * nodeclaims.c), the claim gauge, and leader election (runtime/leasepart.h): the reconcilers
 * hand out work only while this replica leads and look at everything again when it starts to.
 */
#include "controllers/controller.h"

#include <stdio.h>
#include <unistd.h>

#include "base/log.h"
#include "controllers/claims/claimgauge.h"
#include "controllers/claims/nodeclaims.h"
#include "controllers/kubevirt/kubevirt.h"
#include "controllers/runtime/eventspart.h"
#include "controllers/runtime/leasepart.h"
#include "controllers/runtime/manager.h"
#include "controllers/runtime/process.h"

static const struct part_ops *const parts[] = {
        &manager_caches_part,   /* ready once the caches have synced */
        &eventspart_controller, /* the Event recorder */
        &kvpermit_part,         /* KubeVirt's permittedHostDevices */
        &nodeclaims_part,       /* claims no agent serves */
        &claimgauge_part,       /* hostdevd_claims for alerts */
        &leasepart_leader,      /* leader election */
        NULL,
};

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
