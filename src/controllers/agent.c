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
#include "controllers/binding/ledger.h"
#include "controllers/binding/pcibind.h"
#include "controllers/claims/pciclaim.h"
#include "controllers/claims/usbclaim.h"
#include "controllers/deviceplugin/plugins.h"
#include "controllers/devices/heartbeat.h"
#include "controllers/devices/inventory.h"
#include "controllers/devices/nodeuid.h"
#include "controllers/devices/pcidevice.h"
#include "controllers/devices/usbdevice.h"
#include "controllers/dra/draplugin.h"
#include "controllers/dra/draslices.h"
#include "controllers/runtime/process.h"
#include "controllers/sriov/sriovnet.h"

static const struct part_ops *const parts[] = {
        &nodeuid_part,     /* the Node's uid, for owner references */
        &pcibind_env_part, /* the node work's sysfs, shared by claims and DRA */
        &ledger_part,      /* who holds each device: claims and DRA */
        &pcidevices_part,  /* PCIDevices */
        &pciclaim_part,    /* PCIDeviceClaims */
        &usbdevices_part,  /* USBDevices */
        &usbclaim_part,    /* USBDeviceClaims */
        &sriovnet_part,    /* SRIOVNetworkDevices */
        &plugins_part,     /* the kubelet device plugins */
        &draslices_part,   /* the ResourceSlices */
        &draplugin_part,   /* the DRA kubelet plugin */
        &heartbeat_part,   /* the node's Lease */
        &inventory_part,   /* last: its first scan goes to reconcilers already watching */
        NULL,
};

int agent_run(const struct agent_config *cfg)
{
    struct part_options opt = {.kubelet_dir = cfg->kubelet_dir,
                               .cdi_dir = cfg->cdi_dir,
                               .pci_ids = cfg->pci_ids,
                               .usb_ids = cfg->usb_ids,
                               .uevent_source = cfg->uevent_source,
                               .resync = cfg->resync,
                               .heartbeat = cfg->heartbeat,
                               .lease_namespace = cfg->lease_namespace};
    struct process_config pc = {.role = "agent",
                                .kubeconfig = cfg->kubeconfig,
                                .listen = cfg->listen,
                                .node = cfg->node_name};
    struct process *proc = NULL;
    log_info("Starting hostdevd agent", KV_STR("version", HOSTDEVD_VERSION),
             KV_STR("node", cfg->node_name), KV_STR("sysfsRoot", cfg->sysfs_root));
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
