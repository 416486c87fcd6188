/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/agent.c - `hostdevd agent`, the per-node role: a list of parts on the process
 * skeleton (controllers/runtime/process.h), made and started in this order, the inventory last
 * (its first scan goes to reconcilers already watching). Each part reads the process's caches
 * and declares the events that queue its work (runtime/manager.h); nothing is wired here.
 * docs/agent.md says what each part does.
 */
#include "controllers/agent.h"

#include "base/log.h"
#include "controllers/runtime/process.h"

/* The parts, one line each (runtime/part.h). */
#define AGENT_PARTS(X)                                                                             \
    X(nodeuid_part)     /* devices/nodeuid: the Node's uid, for owner references */                \
    X(pcibind_env_part) /* binding/pcibind: the node work's sysfs, for claims and DRA */           \
    X(ledger_part)      /* binding/ledger: who holds each device */                                \
    X(health_part)      /* health/health: which device is unhealthy, and why */                    \
    X(pcidevices_part)  /* devices/pcidevice: PCIDevices */                                        \
    X(healthscan_part)  /* devices/healthscan: AER fatal errors, held devices gone */              \
    X(pciclaim_part)    /* claims/pciclaim: PCIDeviceClaims */                                     \
    X(usbdevices_part)  /* devices/usbdevice: USBDevices */                                        \
    X(usbclaim_part)    /* claims/usbclaim: USBDeviceClaims */                                     \
    X(sriovnet_part)    /* sriov/sriovnet: SRIOVNetworkDevices */                                  \
    X(vgpudev_part)     /* mdev/vgpudev: VGPUDevices (mediated devices) */                         \
    X(plugins_part)     /* deviceplugin/plugins: the kubelet device plugins */                     \
    X(draslices_part)   /* dra/draslices: the ResourceSlices */                                    \
    X(draplugin_part)   /* dra/draplugin: the DRA kubelet plugin */                                \
    X(heartbeat_part)   /* devices/heartbeat: the node's Lease */                                  \
    X(recheck_part)     /* health/recheck: the administrator's recheck of an unhealthy device */   \
    X(inventory_part)   /* devices/inventory: last, its first scan goes to parts that watch */

AGENT_PARTS(PART_DECLARE)
static const struct part_ops *const parts[] = {AGENT_PARTS(PART_LIST) NULL};

int agent_run(const struct agent_config *cfg)
{
    struct part_options opt = {.kubelet_dir = cfg->kubelet_dir,
                               .cdi_dir = cfg->cdi_dir,
                               .pci_ids = cfg->pci_ids,
                               .usb_ids = cfg->usb_ids,
                               .uevent_source = cfg->uevent_source,
                               .resync = cfg->resync,
                               .heartbeat = cfg->heartbeat,
                               .taint_effect = cfg->taint_effect,
                               .lease_namespace = cfg->lease_namespace};
    struct process_config pc = {.role = "agent",
                                .kubeconfig = cfg->kubeconfig,
                                .listen = cfg->listen,
                                .node = cfg->node_name};
    struct process *proc = NULL;
    log_info("Starting hostdevd agent", KV_STR("version", HOSTDEVD_VERSION),
             KV_STR("node", cfg->node_name), KV_STR("sysfsRoot", cfg->sysfs_root),
             KV_STR("unhealthyTaintEffect", cfg->taint_effect));
    int r = process_new(&pc, &proc);
    if (r == 0) {
        struct part_env env = process_env(proc);
        env.node_name = cfg->node_name;
        env.sysfs_root = cfg->sysfs_root;
        env.dev_root = cfg->dev_root;
        env.proc_root = cfg->proc_root;
        env.opt = &opt;
        r = process_add_parts(proc, parts, &env);
    }
    int rc = r == 0 ? process_run(proc) : 1;
    process_free(proc);
    return rc;
}
