/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/devices/usbdevice.c - the USBDevice reconciler: desired objects and minimal write
 * plans (pure), and the reconciler on the runner. See usbdevice.h.
 */
#include "controllers/devices/usbdevice.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/json.h"
#include "base/log.h"
#include "base/map.h"
#include "base/metrics.h"
#include "base/names.h"
#include "controllers/devices/devobjs.h"
#include "controllers/devices/devwrite.h"
#include "controllers/devices/nodeuid.h"
#include "controllers/objects/kinds.h"
#include "controllers/objects/usbobj.h"
#include "controllers/runtime/manager.h"
#include "controllers/runtime/part.h"
#include "controllers/runtime/runner.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "kube/names.h"
#include "node/usb.h"
#include "node/usbname.h"

/* The status fields this agent writes; any other field is someone else's. */
static const char *const managed[] = {
        "vendorID",    "productID",  "nodeName",  "portPath", "resourceName", "devicePath",
        "description", "pciAddress", "classType", "serial",   "busNum",       "devNum",
        "speed",       "enabled",    "status",    "message",
};
#define N_MANAGED (sizeof(managed) / sizeof(managed[0]))

/* --- pure ------------------------------------------------------------------------------------- */

static void add_str(cJSON *o, const char *key, const char *value)
{
    if (value[0])
        cJSON_AddStringToObject(o, key, value);
}

int usbdevice_spec_from(const char *node, const struct node_usb_dev *d,
                        const struct node_usbids *ids, struct usbdevice_spec *ret)
{
    struct usbdevice_spec *s = ret;
    *s = (struct usbdevice_spec){.busnum = d->busnum, .devnum = d->devnum};
    int r = kube_names_usbdevice(node, d->vendor_id, d->product_id, d->port_path, s->name,
                                 sizeof(s->name));
    if (r < 0)
        return r;
    (void)snprintf(s->resource_name, sizeof(s->resource_name), "kubevirt.io/%s", s->name);
    bool named = names_is_extended_resource_name(s->resource_name);
    if (!named) /* a name part over 63 characters (a long node name): published without one */
        s->resource_name[0] = '\0';
    (void)snprintf(s->node, sizeof(s->node), "%s", node);
    (void)snprintf(s->port_path, sizeof(s->port_path), "%s", d->port_path);
    (void)snprintf(s->vendor_id, sizeof(s->vendor_id), "%s", d->vendor_id);
    (void)snprintf(s->product_id, sizeof(s->product_id), "%s", d->product_id);
    (void)snprintf(s->dev_path, sizeof(s->dev_path), "%s", d->dev_path);
    (void)snprintf(s->pci_address, sizeof(s->pci_address), "%s", d->pci_address);
    (void)snprintf(s->serial, sizeof(s->serial), "%s", d->serial);
    (void)snprintf(s->speed, sizeof(s->speed), "%s", d->speed);
    char cls[64];
    (void)snprintf(s->class_type, sizeof(s->class_type), "%s",
                   node_usb_class_name(d->class_code, cls, sizeof(cls)));
    (void)node_usbids_describe(ids, d->vendor_id, d->product_id, d->product, s->description,
                               sizeof(s->description));
    return named ? 0 : 1;
}

cJSON *usbdevice_status(const struct usbdevice_spec *s)
{
    cJSON *st = cJSON_CreateObject();
    if (!st)
        return NULL;
    add_str(st, "vendorID", s->vendor_id);
    add_str(st, "productID", s->product_id);
    add_str(st, "nodeName", s->node);
    add_str(st, "portPath", s->port_path);
    add_str(st, "resourceName", s->resource_name);
    add_str(st, "devicePath", s->dev_path);
    add_str(st, "description", s->description);
    add_str(st, "pciAddress", s->pci_address);
    add_str(st, "classType", s->class_type);
    add_str(st, "serial", s->serial);
    cJSON_AddNumberToObject(st, "busNum", s->busnum);
    cJSON_AddNumberToObject(st, "devNum", s->devnum);
    add_str(st, "speed", s->speed);
    return st;
}

cJSON *usbdevice_new_object(const struct usbdevice_spec *s, const char *node_uid)
{
    return devwrite_new_object("USBDevice", s->name, s->node, node_uid);
}

/* The status of a device gone from the scan that a claim holds: what it was, marked. */
static cJSON *orphan_status(const cJSON *have, const char *name, const char *node,
                            const struct usbdevice_gone *gone)
{
    const cJSON *st = json_field(have, "status");
    const char *port = json_str(st, "portPath");
    const char *pci = json_str(st, "pciAddress");
    char msg[USBOBJ_MESSAGE_SIZE];
    if (gone && gone->controller_passed_through)
        (void)snprintf(msg, sizeof(msg),
                       "the device vanished from port %s of node %s because its USB host "
                       "controller %s was passed through (bound to vfio-pci) while "
                       "USBDeviceClaim %s holds it: give the controller back to the host "
                       "(delete its PCIDeviceClaim) to get the device back, or delete the claim "
                       "to release it",
                       port ? port : "?", node, pci ? pci : "?", name);
    else
        (void)snprintf(msg, sizeof(msg),
                       "the device was unplugged from port %s of node %s while USBDeviceClaim "
                       "%s holds it: plug it back into the same port to use it again (it keeps "
                       "its claim), or delete the claim to release it",
                       port ? port : "?", node, name);
    cJSON *want = cJSON_CreateObject();
    cJSON_AddBoolToObject(want, "enabled", true);
    cJSON_AddStringToObject(want, "status", USBOBJ_ORPHANED);
    cJSON_AddStringToObject(want, "message", msg);
    return want;
}

static int plan_gone(const cJSON *have, const cJSON *claim, const struct usbdevice_gone *gone,
                     const char *node, struct usbdevice_plan *ret)
{
    const char *name = kube_meta_str(have, "name");
    if (!usbobj_claim_holds(claim)) {
        ret->delete = true;
        return 0;
    }
    cJSON *want = orphan_status(have, name ? name : "", node, gone);
    if (!want)
        return -ENOMEM;
    /* only the orphan fields: the others keep what was last seen */
    cJSON *diff = devwrite_status_diff(want, json_field(have, "status"), NULL, 0);
    cJSON_Delete(want);
    ret->status_patch = devwrite_wrap("status", diff);
    ret->orphan = ret->status_patch != NULL;
    return 0;
}

int usbdevice_plan(const struct usbdevice_spec *want, const cJSON *have, const cJSON *claim,
                   const struct usbdevice_gone *gone, const char *node, const char *node_uid,
                   struct usbdevice_plan *ret)
{
    *ret = (struct usbdevice_plan){0};
    const char *uid = kube_meta_str(have, "uid");
    if (uid)
        (void)snprintf(ret->uid, sizeof(ret->uid), "%s", uid);
    if (!want)
        return have ? plan_gone(have, claim, gone, node, ret) : 0;
    cJSON *status = usbdevice_status(want);
    if (!status)
        return -ENOMEM;
    cJSON_AddBoolToObject(status, "enabled", usbobj_claim_holds(claim));
    ret->create = have == NULL;
    if (have)
        ret->meta_patch = devwrite_wrap(
                "metadata", devwrite_meta_diff(json_field(have, "metadata"), want->node, node_uid));
    ret->status_patch = devwrite_wrap(
            "status", devwrite_status_diff(status, json_field(have, "status"), managed, N_MANAGED));
    cJSON_Delete(status);
    return 0;
}

bool usbdevice_plan_empty(const struct usbdevice_plan *p)
{
    return !p->create && !p->delete &&!p->meta_patch && !p->status_patch;
}

void usbdevice_plan_done(struct usbdevice_plan *p)
{
    free(p->meta_patch);
    free(p->status_patch);
    *p = (struct usbdevice_plan){0};
}

/* --- the reconciler ----------------------------------------------------------------------------
 * Not pure: it carries plans out on the runner (controllers/devices/devwrite.c). */

struct usbdevices {
    struct devobjs o; /* first: the runner's ctx */
    struct kube_informer *claims, *pci_devices;
    struct metrics_series *orphans;
};

/* Whether the host controller `address` of this node is on vfio-pci (its PCIDevice says). */
static bool on_vfio(const struct usbdevices *d, const char *address)
{
    char name[KUBE_NAME_MAX + 1];
    if (!address || !d->pci_devices ||
        kube_names_pcidevice(d->o.cfg.env.node_name, address, name, sizeof(name)) < 0)
        return false;
    const cJSON *dev = kube_informer_get(d->pci_devices, name);
    const char *driver = json_str(json_field(dev, "status"), "kernelDriverInUse");
    return driver && strcmp(driver, "vfio-pci") == 0;
}

static struct devwrite *writes_of(struct usbdevices *d, const struct usbdevice_spec *want,
                                  struct usbdevice_plan *plan)
{
    cJSON *object = plan->create ? usbdevice_new_object(want, nodeuid_get(d->o.cfg.node)) : NULL;
    if (plan->create && !object)
        return NULL;
    struct devwrite *w = devobjs_write(&d->o, object, plan->status_patch, plan->meta_patch,
                                       plan->delete, plan->uid);
    plan->status_patch = plan->meta_patch = NULL; /* the write owns them now (or freed them) */
    return w;
}

static int plan_key(void *ctx, const char *key, const cJSON *obj, void **ret_plan)
{
    struct usbdevices *d = ctx;
    *ret_plan = NULL;
    if (obj && devwrite_foreign(obj, d->o.cfg.env.node_name))
        return 0;
    const struct usbdevice_spec *want = map_get(d->o.want, key);
    const cJSON *claim = kube_informer_get(d->claims, key);
    struct usbdevice_gone gone = {
            .controller_passed_through =
                    !want && on_vfio(d, cJSON_GetStringValue(json_field(json_field(obj, "status"),
                                                                        "pciAddress")))};
    struct usbdevice_plan plan;
    *ret_plan = NULL;
    int r = usbdevice_plan(want, obj, claim, &gone, d->o.cfg.env.node_name,
                           nodeuid_get(d->o.cfg.node), &plan);
    if (r == 0 && !usbdevice_plan_empty(&plan)) {
        if (plan.orphan) {
            metrics_inc(d->orphans);
            log_warning("Claimed USB device is gone; marking it orphaned", KV_STR("usbdevice", key),
                        KV_INT("controllerPassedThrough", gone.controller_passed_through));
        }
        *ret_plan = writes_of(d, want, &plan);
        r = *ret_plan ? 0 : -ENOMEM;
    }
    usbdevice_plan_done(&plan);
    return r;
}

static bool can_start(void *ctx)
{
    const struct usbdevices *d = ctx;
    return d->o.want && d->claims && kube_informer_has_synced(d->claims) &&
           (!d->pci_devices || kube_informer_has_synced(d->pci_devices)) && devobjs_can_start(ctx);
}

static const struct devobjs_kind kind = {.name = "usbdevice",
                                         .kind = "USBDevice",
                                         .cache = &kind_usbdevices,
                                         .written = "USB inventory written",
                                         .gone = "Deleting USBDevice of a device that is gone"};

static const struct runner_ops ops = {
        .plan = plan_key,
        .act = devobjs_act,
        .plan_free = devobjs_plan_free,
        .on_event = devobjs_on_event,
        .can_start = can_start,
        .on_converged = devobjs_on_converged,
        .kind = "USBDevice",
        .waiting = "no USB scan has succeeded",
        .unconverged = "the first USB inventory is not written yet",
};

/* --- the reconciler's life -------------------------------------------------------------------- */

struct usbdevices *usbdevices_new(const struct devobjs_config *cfg)
{
    struct usbdevices *d = devobjs_new(sizeof(*d), cfg, &kind, &ops);
    if (d)
        d->orphans = metrics_one(cfg->env.metrics, METRICS_COUNTER, "hostdevd_usb_orphans_total",
                                 "Claimed USB devices found gone (marked orphaned).");
    return d;
}

void usbdevices_keep_unreadable(const struct usbdevices *d, struct map *want,
                                const struct map *unreadable)
{
    const char *name;
    void *v;
    size_t pos = 0;
    while (d->o.want && unreadable && map_next(d->o.want, &pos, &name, &v)) {
        const struct usbdevice_spec *old = v;
        if (!map_contains(unreadable, old->port_path) || map_contains(want, name))
            continue;
        struct usbdevice_spec *copy = malloc(sizeof(*copy));
        if (copy)
            *copy = *old;
        if (copy && map_put(want, name, copy) < 0)
            free(copy);
    }
}

void usbdevices_enqueue(struct usbdevices *d, const char *key)
{
    if (d)
        runner_enqueue(d->o.runner, key);
}

struct map *usbdevices_new_want(void)
{
    return map_new(free);
}

struct devobjs *usbdevices_objs(struct usbdevices *d)
{
    return &d->o;
}

const struct topic usbdevices_scanned = {"a USB scan"};

static void on_scan(void *self, const struct watch_event *ev)
{
    struct usbdevices *d = self;
    struct devobjs_scan *scan = ev->data;
    usbdevices_keep_unreadable(d, scan->want, scan->unreadable);
    devobjs_take_want(&d->o, TAKE_PTR(scan->want));
}

/* A USBDeviceClaim changed: its device's enabled and orphan state. */
static void on_claim(void *self, const struct watch_event *ev)
{
    usbdevices_enqueue(self, ev->key);
}

/* Reads the USBDeviceClaims (enabled, orphans) and this node's PCIDevices (a controller on
 * vfio-pci); keys are handed out once both have synced and a scan has succeeded. */
static void *make(const struct part_env *env)
{
    struct devobjs_config c = devobjs_config_of(env);
    struct usbdevices *d = usbdevices_new(&c);
    if (d) {
        d->claims = manager_cache(env->mgr, &kind_usbdeviceclaims);
        d->pci_devices = manager_cache(env->mgr, &kind_pcidevices);
    }
    return d;
}

static const struct watch watches[] = {
        {.topic = &usbdevices_scanned, .map = on_scan},
        {.topic = &nodeuid_known, .map = devobjs_enqueue_all_watch},
        {.kind = &kind_usbdeviceclaims, .map = on_claim},
        {0},
};

const struct part_ops usbdevices_part = {.name = "usbdevices",
                                         .make = make,
                                         .watches = watches,
                                         .runner = devobjs_runner,
                                         .start = devobjs_start,
                                         .free = devobjs_free};
