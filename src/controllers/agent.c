/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/agent.c - `hostdevd agent`, the per-node role: a list of parts on the process
 * skeleton (controllers/runtime/process.h), made and started in the order of setup()'s table,
 * the inventory last (its first scan goes to reconcilers already watching). The parts read each
 * other's caches; the callbacks below queue the keys that depend on a change. docs/agent.md
 * says what each part does.
 */
#include "controllers/agent.h"

#include <cjson/cJSON.h>
#include <stdio.h>

#include "base/log.h"
#include "controllers/claims/pcibind.h"
#include "controllers/claims/pciclaim.h"
#include "controllers/claims/usbclaim.h"
#include "controllers/deviceplugin/plugins.h"
#include "controllers/devices/devobjs.h"
#include "controllers/devices/devwrite.h"
#include "controllers/devices/inventory.h"
#include "controllers/devices/nodeuid.h"
#include "controllers/devices/pcidevice.h"
#include "controllers/devices/usbdevice.h"
#include "controllers/dra/draplugin.h"
#include "controllers/dra/draslices.h"
#include "controllers/objects/caches.h"
#include "controllers/runtime/leasepart.h"
#include "controllers/runtime/process.h"
#include "controllers/runtime/runner.h"
#include "controllers/sriov/sriovnet.h"
#include "kube/leader.h"

struct agent {
    const struct agent_config *cfg;
    struct process *proc;
    struct nodeuid *node;
    struct inventory *inv;
    struct devobjs *devices;
    struct pciclaim *claims;
    struct usbdevices *usb_devices;
    struct usbclaim *usb_claims;
    struct sriovnet *sriov;
    struct plugins *plugins;
    struct draslices *slices;
    struct draplugin *dra;
    struct kube_leader *heartbeat;
    struct pcibind_env *bind;
    struct part_env env; /* what every part is made with */
    char plugin_dir[4096];
};

/* --- how the parts depend on each other -------------------------------------------------------
 * Each reconciler reads the others' caches; when one cache changes, the keys that read it are
 * queued again here. */

/* A PCI scan: the PCIDevices to reconcile, and every claim again (a driver may have changed
 * under one: a reboot, someone's unbind; a USB controller may have gone to vfio-pci). */
static void on_scan(struct map *want, const struct map *unreadable, void *userdata)
{
    struct agent *a = userdata;
    pcidevices_keep_unreadable(a->devices, want, unreadable);
    sriovnet_sync(a->sriov, want);
    devobjs_set_want(a->devices, want);
    draslices_sync(a->slices);
    pciclaim_enqueue_all(a->claims);
    usbclaim_enqueue_all(a->usb_claims);
}

/* A PCIDevice changed: a device plugin's health may have (its driver). */
static void on_pci_device(const char *key, void *userdata)
{
    struct agent *a = userdata;
    (void)key;
    plugins_sync(a->plugins);
}

static void on_usb_scan(struct map *want, const struct map *unreadable, void *userdata)
{
    struct agent *a = userdata;
    usbdevices_keep_unreadable(a->usb_devices, want, unreadable);
    devobjs_set_want(usbdevices_objs(a->usb_devices), want);
    usbclaim_enqueue_all(a->usb_claims);
}

static void on_node_uid(void *userdata)
{
    struct agent *a = userdata;
    const char *uid = nodeuid_get(a->node);
    cJSON *owner = uid ? devwrite_owner_ref(a->cfg->node_name, uid) : NULL;
    if (owner)
        (void)kube_leader_set_owner(a->heartbeat, owner); /* goes with the Node (next renewal) */
    cJSON_Delete(owner);
    devobjs_enqueue_all(a->devices);
    devobjs_enqueue_all(usbdevices_objs(a->usb_devices));
    draslices_sync(a->slices);
}

/* A USBDevice changed: its claim (same name), and PCI claims of USB controllers. */
static void on_usb_device(const char *key, void *userdata)
{
    struct agent *a = userdata;
    usbclaim_enqueue(a->usb_claims, key);
    pciclaim_enqueue_all(a->claims);
    plugins_sync(a->plugins);
}

/* A USBDeviceClaim changed: its device's enabled and orphan state. */
static void on_usb_claim(const char *key, void *userdata)
{
    struct agent *a = userdata;
    usbdevices_enqueue(a->usb_devices, key);
    plugins_sync(a->plugins);
}

/* A PCIDeviceClaim changed: USB claims behind a controller, the DRA pool (a claimed device
 * leaves it). */
static void on_pci_claim(void *userdata)
{
    struct agent *a = userdata;
    usbclaim_enqueue_all(a->usb_claims);
    sriovnet_enqueue_all(a->sriov);
    draslices_sync(a->slices);
    plugins_sync(a->plugins);
}

/* DRA released devices: claims refused because of them may go on. */
static void on_dra_release(void *userdata)
{
    struct agent *a = userdata;
    pciclaim_enqueue_all(a->claims);
}

static bool dra_holder(const char *address, char *buf, size_t size, void *userdata)
{
    const struct agent *a = userdata;
    return draplugin_holder(a->dra, address, buf, size);
}

/* --- the parts, in the order they start (each declares its hooks: runtime/part.h) ---------- */

static int add_node(struct agent *a)
{
    struct nodeuid_config c = {.env = a->env, .on_uid = on_node_uid, .userdata = a};
    return process_add(a->proc, &nodeuid_part, a->node = nodeuid_new(&c));
}

/* The node work's env, shared by the claim reconciler and the DRA plugin (freed after them). */
static int add_node_work(struct agent *a)
{
    return process_add(a->proc, &pcibind_env_part, a->bind = pcibind_env_new(&a->env));
}

static int add_devices(struct agent *a)
{
    struct devobjs_config c = {
            .env = a->env, .node = a->node, .on_event = on_pci_device, .userdata = a};
    return process_add(a->proc, &pcidevices_part, a->devices = pcidevices_new(&c));
}

static int add_claims(struct agent *a)
{
    struct pciclaim_config c = {.env = a->env,
                                .worker = process_worker(a->proc),
                                .bind = a->bind,
                                .devices = runner_informer(a->devices->runner),
                                .on_event = on_pci_claim,
                                .userdata = a};
    return process_add(a->proc, &pciclaim_part, a->claims = pciclaim_new(&c));
}

static int add_usb_devices(struct agent *a)
{
    struct devobjs_config c = {
            .env = a->env, .node = a->node, .on_event = on_usb_device, .userdata = a};
    return process_add(a->proc, &usbdevices_part, a->usb_devices = usbdevices_new(&c));
}

static int add_usb_claims(struct agent *a)
{
    struct usbclaim_config c = {.env = a->env, .on_event = on_usb_claim, .userdata = a};
    return process_add(a->proc, &usbclaim_part, a->usb_claims = usbclaim_new(&c));
}

/* The SR-IOV PFs changed: their VFs come and go at once (uevents do it too on a real node). */
static void on_sriov_written(void *userdata)
{
    struct agent *a = userdata;
    inventory_scan(a->inv, "SR-IOV change");
}

static int add_sriov(struct agent *a)
{
    struct sriovnet_config c = {.env = a->env,
                                .node = a->node,
                                .worker = process_worker(a->proc),
                                .on_written = on_sriov_written,
                                .userdata = a};
    return process_add(a->proc, &sriovnet_part, a->sriov = sriovnet_new(&c));
}

static int add_plugins(struct agent *a)
{
    (void)snprintf(a->plugin_dir, sizeof(a->plugin_dir), "%s/device-plugins", a->cfg->kubelet_dir);
    struct plugins_config c = {.env = a->env, .dir = a->plugin_dir};
    return process_add(a->proc, &plugins_part, a->plugins = plugins_new(&c));
}

static int add_slices(struct agent *a)
{
    struct draslices_config c = {.env = a->env,
                                 .node = a->node,
                                 .devices = a->devices,
                                 .claims = pciclaim_informer(a->claims)};
    return process_add(a->proc, &draslices_part, a->slices = draslices_new(&c));
}

static int add_dra(struct agent *a)
{
    struct draplugin_config c = {.env = a->env,
                                 .worker = process_worker(a->proc),
                                 .bind = a->bind,
                                 .kubelet_dir = a->cfg->kubelet_dir,
                                 .cdi_dir = a->cfg->cdi_dir,
                                 .devices = a->devices,
                                 .on_release = on_dra_release,
                                 .userdata = a};
    return process_add(a->proc, &draplugin_part, a->dra = draplugin_new(&c));
}

static int add_heartbeat(struct agent *a)
{
    struct kube_leader_config lc = {.namespace = a->cfg->lease_namespace,
                                    .name = a->cfg->node_name,
                                    .identity = a->cfg->node_name,
                                    .lease_duration = a->cfg->heartbeat,
                                    .renew_deadline = a->cfg->heartbeat * 5 / 6,
                                    .retry_period = a->cfg->heartbeat / 3};
    return leasepart_add(a->proc, &leasepart_heartbeat, &lc, &a->heartbeat);
}

/* Last: its first scan goes to reconcilers whose informers have started. */
static int add_inventory(struct agent *a)
{
    struct inventory_config c = {.env = a->env,
                                 .pci_ids = a->cfg->pci_ids,
                                 .usb_ids = a->cfg->usb_ids,
                                 .resync = a->cfg->resync,
                                 .uevent_source = a->cfg->uevent_source,
                                 .on_scan = on_scan,
                                 .on_usb_scan = on_usb_scan,
                                 .userdata = a};
    int r = inventory_new(&c, &a->inv);
    return r < 0 ? r : process_add(a->proc, &inventory_part, a->inv);
}

/* Hands every reconciler the caches it reads (before any starts). */
static int share_caches(struct agent *a)
{
    struct kube_informer *pci_devs = runner_informer(a->devices->runner);
    a->devices->claims = pciclaim_informer(a->claims);
    struct kube_informer *usb_devs = runner_informer(usbdevices_objs(a->usb_devices)->runner);
    pciclaim_set_usb_devices(a->claims, usb_devs);
    usbdevices_set_caches(a->usb_devices, usbclaim_informer(a->usb_claims), pci_devs);
    usbclaim_set_caches(a->usb_claims, usb_devs, pciclaim_informer(a->claims), pci_devs,
                        usbdevices_objs(a->usb_devices)->runner);
    struct caches node = {pciclaim_informer(a->claims), pci_devs, usbclaim_informer(a->usb_claims),
                          usb_devs};
    plugins_set_caches(a->plugins, &node);
    draplugin_set_caches(a->dra, pciclaim_informer(a->claims), pci_devs);
    pciclaim_set_dra_holder(a->claims, dra_holder, a);
    sriovnet_set_claims(a->sriov, pciclaim_informer(a->claims));
    return 0;
}

/* Sets up every part; a failure is logged here once (the parts log their own details). */
static int setup(struct agent *a)
{
    static const struct {
        const char *what;
        int (*add)(struct agent *a);
    } steps[] = {
            {"the Node lookup", add_node},
            {"the node work", add_node_work},
            {"the PCIDevice reconciler", add_devices},
            {"the PCIDeviceClaim reconciler", add_claims},
            {"the USBDevice reconciler", add_usb_devices},
            {"the USBDeviceClaim reconciler", add_usb_claims},
            {"the SRIOVNetworkDevice reconciler", add_sriov},
            {"the device plugins", add_plugins},
            {"the ResourceSlices", add_slices},
            {"the DRA kubelet plugin", add_dra},
            {"the heartbeat", add_heartbeat},
            {"the inventory", add_inventory},
            {"the caches", share_caches},
    };
    struct process_config pc = {
            .role = "agent", .kubeconfig = a->cfg->kubeconfig, .listen = a->cfg->listen};
    int r = process_new(&pc, &a->proc);
    if (r == 0) {
        a->env = process_env(a->proc);
        a->env.node_name = a->cfg->node_name;
        a->env.sysfs_root = a->cfg->sysfs_root;
        a->env.dev_root = a->cfg->dev_root;
        a->env.proc_root = a->cfg->proc_root;
    }
    for (size_t i = 0; r == 0 && i < sizeof(steps) / sizeof(steps[0]); i++)
        if ((r = steps[i].add(a)) < 0)
            log_error("Cannot set up the agent", KV_STR("part", steps[i].what), KV_ERRNO(r));
    return r;
}

int agent_run(const struct agent_config *cfg)
{
    struct agent a = {.cfg = cfg};
    log_info("Starting hostdevd agent", KV_STR("version", HOSTDEVD_VERSION),
             KV_STR("node", cfg->node_name), KV_STR("sysfsRoot", cfg->sysfs_root));
    int rc = setup(&a) == 0 ? process_run(a.proc) : 1;
    process_free(a.proc);
    return rc;
}
