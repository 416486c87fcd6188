/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/agent.h - `hostdevd agent`: the per-node process. Today it keeps one PCIDevice
 * object per PCI function of its node (bridges excepted) in step with sysfs, writing only what
 * changed; serves /healthz, /readyz and /metrics. Runs one libev loop until SIGTERM/SIGINT.
 * Logs (it is a "logging layer").
 */
#pragma once

struct agent_config {
    const char *node_name;     /* required (--node-name or NODE_NAME) */
    const char *kubeconfig;    /* NULL: $KUBECONFIG, then in-cluster */
    const char *sysfs_root;    /* default "/sys" */
    const char *dev_root;      /* default "/dev" (/dev/vfio/<group>) */
    const char *proc_root;     /* default "/proc" (mounts, swaps, routes) */
    const char *kubelet_dir;   /* default "/var/lib/kubelet"; device plugins in <it>/device-plugins,
                                  the DRA plugin in <it>/plugins and <it>/plugins_registry */
    const char *cdi_dir;       /* CDI specs of prepared DRA claims, default "/var/run/cdi" */
    const char *pci_ids;       /* NULL: libpci's default pci.ids */
    const char *usb_ids;       /* NULL: /usr/share/misc/usb.ids */
    const char *listen;        /* health and metrics endpoint, default "0.0.0.0:9808" */
    double resync;             /* seconds between full rescans; default 300 */
    const char *uevent_source; /* "kernel" (default), "udev" or "none": what triggers rescans */
    const char *lease_namespace; /* of the heartbeat Lease, default hostdevd-node-lease */
    double heartbeat;            /* its duration, seconds (renewed every third); default 180 */
    const char *taint_effect;    /* an unhealthy device's taint in its ResourceSlice:
                                    "NoSchedule" (default) or "NoExecute" (evicts its pods) */
};

/* Runs the agent until SIGTERM or SIGINT. Returns the process exit code. */
int agent_run(const struct agent_config *cfg);
