/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/controller.h - `hostdevd controller`, the cluster-wide role (1-2 replicas, one
 * leads through a Lease): keeps the KubeVirt CR's permittedHostDevices exact
 * (controllers/kubevirt/kubevirt.h) and tells (or releases) the claims no agent will serve
 * (controllers/claims/nodeclaims.h). The same process skeleton as the agent; /readyz is ready only
 * on the leader ("standby: ..." on the others). Logs.
 */
#pragma once

struct controller_config {
    const char *kubeconfig;      /* NULL: $KUBECONFIG, then in-cluster */
    const char *listen;          /* health and metrics endpoint, default "0.0.0.0:9809" */
    const char *namespace;       /* of the Lease, default $POD_NAMESPACE or hostdevd-system */
    const char *identity;        /* this candidate, default $POD_NAME or the host name */
    const char *kubevirt;        /* "namespace/name" of the KubeVirt CR, NULL: the only one */
    double lease_duration;       /* seconds, default 15 */
    const char *lease_namespace; /* of the agents' heartbeats, default hostdevd-node-lease */
};

/* Runs until SIGTERM or SIGINT. Returns the process exit code. */
int controller_run(const struct controller_config *cfg);
