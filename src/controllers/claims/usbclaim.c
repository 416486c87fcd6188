/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/claims/usbclaim.c - the agent's USBDeviceClaim reconciler (see usbclaim.h): pure
 * decisions, then the reconciler on the runner. One reconcile is at most one write: the
 * finalizer, the status, or the finalizer's removal.
 */
#include "controllers/claims/usbclaim.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/json.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/timefmt.h"
#include "controllers/devices/devobjs.h"
#include "controllers/devices/pcidevice.h"
#include "controllers/devices/usbdevice.h"
#include "controllers/objects/claimstatus.h"
#include "controllers/objects/kinds.h"
#include "controllers/objects/usbobj.h"
#include "controllers/runtime/closewatch.h"
#include "controllers/runtime/manager.h"
#include "controllers/runtime/part.h"
#include "controllers/runtime/runner.h"
#include "kube/client.h"
#include "kube/events.h"
#include "kube/informer.h"
#include "kube/names.h"
#include "node/holder.h"
#include "node/sysfs.h"
#include "node/usb.h"

static void usbclaim_free(void *userdata);

/* --- pure ------------------------------------------------------------------------------------- */

#define REASON_ENABLED   "Enabled"
#define REASON_RELEASING "Releasing"

enum usbclaim_step usbclaim_next_step(const cJSON *claim, const char *key, const cJSON *device,
                                      const char *node)
{
    char owner[KUBE_NAME_MAX + 1];
    if (!claim || kube_names_usbdevice_node(key, owner, sizeof(owner)) < 0 ||
        strcmp(owner, node) != 0)
        return USBCLAIM_NOTHING; /* another node's (or a name no node has) */
    bool finalizer = claimstatus_finalizer_index(claim, USBOBJ_FINALIZER) >= 0;
    bool described = device && json_str(json_field(device, "status"), "devicePath");
    if (!kube_meta_str(claim, "deletionTimestamp") && device && !described)
        return USBCLAIM_NOTHING; /* just created: its status write brings the claim back */
    if (!kube_meta_str(claim, "deletionTimestamp"))
        return finalizer ? USBCLAIM_CHECK : USBCLAIM_ADD_FINALIZER;
    if (!finalizer)
        return USBCLAIM_NOTHING; /* not ours */
    if (usbobj_claim_holds(claim))
        return USBCLAIM_LET_GO; /* a VM may still have the device: look before letting go */
    if (usbobj_device_enabled(device))
        return USBCLAIM_NOTHING; /* the device reconciler disables it first */
    return USBCLAIM_RELEASE;
}

static void set(struct usbclaim_outcome *o, const char *reason, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static void set(struct usbclaim_outcome *o, const char *reason, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    // NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized): clang-analyzer 14 false positive
    (void)vsnprintf(o->message, sizeof(o->message), fmt, ap);
    va_end(ap);
    o->ready = false;
    o->reason = reason;
}

/* The controller checks: a device behind a passed-through controller goes with it. */
static bool check_controller(const struct usbclaim_facts *f, const char *pci,
                             struct usbclaim_outcome *o)
{
    if (f->controller_claim && !f->holds) /* a later PCI claim does not take it away */
        set(o, "ControllerPassedThrough",
            "the device's USB host controller %s is claimed for PCI passthrough by "
            "PCIDeviceClaim %s, and a device behind a passed-through controller goes with it: "
            "delete that claim first, or plug the device into a port of another controller",
            pci, f->controller_claim);
    else if (f->controller_on_vfio)
        set(o, "ControllerPassedThrough",
            "the device's USB host controller %s is bound to vfio-pci (passed through), so the "
            "host cannot use the device: give the controller back to its host driver first, or "
            "plug the device into a port of another controller",
            pci);
    else
        return true;
    return false;
}

void usbclaim_check(const struct usbclaim_facts *f, const char *name, struct usbclaim_outcome *ret)
{
    const cJSON *st = json_field(f->device, "status");
    const char *pci = json_str(st, "pciAddress"), *path = json_str(st, "devicePath");
    *ret = (struct usbclaim_outcome){0};
    (void)snprintf(ret->pci_address, sizeof(ret->pci_address), "%s", pci ? pci : "");
    if (!f->device)
        set(ret, "DeviceNotFound",
            "there is no USBDevice %s on node %s: plug the device into the port its name says, "
            "or pick one from `kubectl get usbdevices -l nodename=%s`",
            name, f->node, f->node);
    else if (usbobj_device_orphaned(f->device)) /* its message, unless it has none */
        set(ret, USBOBJ_REASON_UNPLUGGED, "%s",
            json_str(st, "message") && json_str(st, "message")[0] ? json_str(st, "message")
                                                                  : "the device was unplugged");
    else if (!check_controller(f, pci ? pci : "", ret))
        return;
    else if (f->devnode < 0 && !f->holds) /* held: an unplug the next scan will show */
        set(ret, "DeviceNodeMissing",
            "device node %s does not exist under the agent's %s (%s): the agent needs the "
            "host's /dev (a hostPath volume)",
            path ? path : "?", f->dev_root, strerror(-f->devnode));
    else {
        ret->ready = true;
        ret->reason = REASON_ENABLED;
        (void)snprintf(ret->message, sizeof(ret->message),
                       "enabled for passthrough: VMs get %s as kubevirt.io/%s", path ? path : "?",
                       name);
    }
}

void usbclaim_let_go(const struct usbclaim_letgo_facts *f, struct usbclaim_outcome *ret)
{
    *ret = (struct usbclaim_outcome){0};
    (void)snprintf(ret->pci_address, sizeof(ret->pci_address), "%s",
                   f->pci_address ? f->pci_address : "");
    char claimed[64] = "";
    if (f->claimed > 0)
        (void)snprintf(claimed, sizeof(claimed), " (%d interface%s claimed through usbfs)",
                       f->claimed, f->claimed == 1 ? "" : "s");
    if (f->holder || f->claimed > 0)
        set(ret, USBOBJ_REASON_IN_USE,
            "%s holds %s%s; the device stays enabled for passthrough until it lets go, then the "
            "claim is released (stop the VM or detach the device)",
            f->holder ? f->holder : "a program", f->device_path ? f->device_path : "the device",
            claimed);
    else
        set(ret, REASON_RELEASING,
            "the claim is deleted and nothing uses the device: it is no longer enabled for "
            "passthrough");
}

char *usbclaim_status_patch(const cJSON *claim, const char *node, const struct usbclaim_outcome *o,
                            const char *now)
{
    const cJSON *st = json_field(claim, "status");
    const char *pci = json_str(st, "pciAddress");
    bool pci_ok = o->pci_address[0] ? json_same(pci, o->pci_address) : pci == NULL;
    if (json_same(json_str(st, "nodeName"), node) && pci_ok &&
        claimstatus_ready_is(claim, o->ready, o->reason, o->message))
        return NULL;
    cJSON *patch = cJSON_CreateObject();
    cJSON *s = cJSON_AddObjectToObject(patch, "status");
    cJSON_AddStringToObject(s, "nodeName", node);
    if (o->pci_address[0])
        cJSON_AddStringToObject(s, "pciAddress", o->pci_address);
    else if (pci)
        cJSON_AddNullToObject(s, "pciAddress");
    cJSON *list = cJSON_AddArrayToObject(s, "conditions");
    cJSON_AddItemToArray(list,
                         claimstatus_ready_condition(claim, o->ready, o->reason, o->message, now));
    char *out = cJSON_PrintUnformatted(patch);
    cJSON_Delete(patch);
    return out;
}

char *usbclaim_finalizer_patch(const cJSON *claim, bool add)
{
    return claimstatus_finalizer_patch(claim, USBOBJ_FINALIZER, add);
}

/* --- the reconciler --------------------------------------------------------------------------- */

#define MAX_IN_FLIGHT 4

enum { R_ENABLED, R_REFUSED, R_UNPLUGGED, R_RELEASED, R_BUSY, N_RESULTS };

struct usbclaim {
    struct {
        struct part_env env;
    } cfg;
    struct runner *runner;
    struct kube_recorder *events;
    struct kube_informer *devices, *pci_claims, *pci_devices;
    const struct runner *devices_runner; /* the USBDevices' (written once: converged) */
    int sysfs_fd;                        /* the interfaces' drivers (node_usb_interfaces_bound) */
    struct closewatch *closes;           /* device nodes of deleted claims a VM holds */
    struct metrics_series *results[N_RESULTS];
};

struct ujob {
    struct usbclaim *c;
    struct runner_job *job;
    enum usbclaim_step step;
    cJSON *claim; /* a copy of the cached claim */
    struct usbclaim_outcome out;
    double requeue_after; /* > 0: look again then (a deleted claim's device in use) */
};

static void ujob_free(void *p)
{
    struct ujob *j = p;
    cJSON_Delete(j->claim);
    free(j);
}

static int plan_claim(void *ctx, const char *key, const cJSON *obj, void **ret_plan)
{
    struct usbclaim *c = ctx;
    const cJSON *device = kube_informer_get(c->devices, key);
    enum usbclaim_step step = usbclaim_next_step(obj, key, device, c->cfg.env.node_name);
    *ret_plan = NULL;
    if (step == USBCLAIM_NOTHING)
        return 0;
    struct ujob *j = calloc(1, sizeof(*j));
    if (!j || !(j->claim = cJSON_Duplicate(obj, true))) {
        free(j);
        return -ENOMEM;
    }
    j->c = c;
    j->step = step;
    *ret_plan = j;
    return 0;
}

static const char *key_of(const struct ujob *j)
{
    return runner_job_key(j->job);
}

/* Ends the job: done, or again after requeue_after. */
static void done(struct ujob *j)
{
    if (j->requeue_after > 0)
        runner_job_done(j->job, RUNNER_REQUEUE_AFTER, j->requeue_after);
    else
        runner_job_done(j->job, RUNNER_DONE, 0);
}

static void on_written(const struct kube_err *err, const cJSON *obj, void *userdata)
{
    struct ujob *j = userdata;
    if (err && !(j->step == USBCLAIM_RELEASE && kube_err_is_not_found(err))) {
        log_error("Failed to write USBDeviceClaim", KV_STR("claim", key_of(j)),
                  KV_INT("http", err->http), KV_STR("reason", err->reason),
                  KV_STR("message", err->message));
        runner_job_done(j->job, RUNNER_RETRY, 0);
        return;
    }
    runner_job_wrote(j->job, err ? NULL : obj);
    done(j);
}

/* Starts `patch` (JSON patch on the object, or merge patch on /status), or ends the job. */
static void patch_claim(struct ujob *j, char *patch, bool status)
{
    if (!patch) {
        done(j);
        return;
    }
    log_v(2, "Patching USBDeviceClaim", KV_STR("claim", key_of(j)), KV_STR("patch", patch));
    int r = kube_client_patch(j->c->cfg.env.http, &kube_res_usbdeviceclaims, NULL, key_of(j),
                              status ? KUBE_PATCH_MERGE : KUBE_PATCH_JSON, patch, status,
                              on_written, j);
    free(patch);
    if (r < 0) {
        log_error("Cannot start a request", KV_STR("claim", key_of(j)), KV_ERRNO(r));
        runner_job_done(j->job, RUNNER_RETRY, 0);
    }
}

static void emit(struct ujob *j, bool warning, const char *reason, const char *note)
{
    struct kube_event_ref ref = {.api_version = "devices.harvesterhci.io/v1beta1",
                                 .kind = "USBDeviceClaim",
                                 .name = key_of(j),
                                 .uid = kube_meta_str(j->claim, "uid")};
    (void)kube_recorder_emit(j->c->events, &ref, warning, reason, warning ? "Reconcile" : reason,
                             note);
}

static bool controller_on_vfio(const struct usbclaim *c, const char *name)
{
    const cJSON *dev = c->pci_devices ? kube_informer_get(c->pci_devices, name) : NULL;
    return json_same(json_str(json_field(dev, "status"), "kernelDriverInUse"), "vfio-pci");
}

/* The agent's name of device node `path` ("/dev/bus/usb/001/002" under its dev root); false
 * when `path` is not below /dev. */
static bool agent_path(const struct usbclaim *c, const char *path, char *buf, size_t size)
{
    if (!path || strncmp(path, "/dev/", 5) != 0)
        return false;
    (void)snprintf(buf, size, "%s%s", c->cfg.env.dev_root, path + strlen("/dev"));
    return true;
}

static int stat_devnode(const struct usbclaim *c, const char *path)
{
    char full[512];
    struct stat st;
    if (!agent_path(c, path, full, sizeof(full)))
        return -ENOENT;
    return stat(full, &st) == 0 ? 0 : -errno;
}

static void say(struct ujob *j)
{
    const struct usbclaim_outcome *o = &j->out;
    int result = o->ready                                          ? R_ENABLED
                 : strcmp(o->reason, USBOBJ_REASON_UNPLUGGED) == 0 ? R_UNPLUGGED
                                                                   : R_REFUSED;
    metrics_inc(j->c->results[result]);
    if (o->ready)
        log_info("Enabled USB device for passthrough", KV_STR("claim", key_of(j)),
                 KV_STR("message", o->message));
    else
        log_warning(result == R_UNPLUGGED ? "Claimed USB device unplugged"
                                          : "Refused USBDeviceClaim",
                    KV_STR("claim", key_of(j)), KV_STR("reason", o->reason),
                    KV_STR("message", o->message));
    emit(j, !o->ready, o->reason, o->message);
}

static void check(struct ujob *j)
{
    struct usbclaim *c = j->c;
    char pci_name[KUBE_NAME_MAX + 1] = "";
    const cJSON *device = kube_informer_get(c->devices, key_of(j));
    const char *pci = json_str(json_field(device, "status"), "pciAddress");
    bool named =
            pci && kube_names_pcidevice(c->cfg.env.node_name, pci, pci_name, sizeof(pci_name)) == 0;
    const cJSON *pc = named && c->pci_claims ? kube_informer_get(c->pci_claims, pci_name) : NULL;
    struct usbclaim_facts f = {
            .node = c->cfg.env.node_name,
            .device = device,
            .controller_claim = pc && !kube_meta_str(pc, "deletionTimestamp") ? pci_name : NULL,
            .controller_on_vfio = named && controller_on_vfio(c, pci_name),
            .holds = usbobj_claim_holds(j->claim),
            .dev_root = c->cfg.env.dev_root};
    f.devnode = device ? stat_devnode(c, json_str(json_field(device, "status"), "devicePath")) : 0;
    usbclaim_check(&f, key_of(j), &j->out);
    char now[40];
    timefmt_now(now, sizeof(now));
    char *patch = usbclaim_status_patch(j->claim, c->cfg.env.node_name, &j->out, now);
    if (patch && !claimstatus_ready_is(j->claim, j->out.ready, j->out.reason, j->out.message))
        say(j); /* once per change of the condition */
    patch_claim(j, patch, true);
}

/* Busy with no program holding the node: the kernel still releasing it after a close, or a VMM
 * whose exit has begun (its /proc/<pid>/fd unreadable, its files not yet closed) while the
 * claim says DeviceInUse already (as a PCI claim's): the same wait, not news. Then nothing is
 * written, the node watched, the key looked at again; returns true (the job is done). */
static bool same_wait(struct ujob *j, const char *device_path)
{
    struct usbclaim *c = j->c;
    double ago = closewatch_closed_ago(c->closes, key_of(j));
    bool waiting = json_same(json_str(claimstatus_ready(j->claim), "reason"), USBOBJ_REASON_IN_USE);
    if (!closewatch_settling(ago, false) && !waiting)
        return false;
    log_v(2, "USB device busy with no holder (being released); looking again",
          KV_STR("claim", key_of(j)));
    char full[512];
    if (agent_path(c, device_path, full, sizeof(full)))
        (void)closewatch_arm(c->closes, full, key_of(j));
    j->requeue_after = ago >= 0 ? closewatch_settle_delay(ago) : USBCLAIM_BUSY_RETRY;
    done(j);
    return true;
}

/* A deleted claim that holds its device: does a program still use it? */
static void let_go(struct ujob *j)
{
    struct usbclaim *c = j->c;
    const cJSON *st = json_field(kube_informer_get(c->devices, key_of(j)), "status");
    const char *port = json_str(st, "portPath");
    char who[128] = "";
    struct usbclaim_letgo_facts f = {.device_path = json_str(st, "devicePath"),
                                     .claimed = -ENOENT,
                                     .pci_address = json_str(st, "pciAddress")};
    if (port && c->sysfs_fd >= 0)
        f.claimed = node_usb_interfaces_bound(c->sysfs_fd, port, "usbfs");
    /* the node open is the use (a VMM that has not configured the device yet claims no
     * interface); usbfs also tells a user in another PID namespace that /proc does not show */
    char node[4096];
    if (f.claimed != -ENOENT && f.device_path &&
        node_holder_find(c->cfg.env.proc_root, f.device_path,
                         agent_path(c, f.device_path, node, sizeof(node)) ? node : NULL, who,
                         sizeof(who)) > 0)
        f.holder = who;
    usbclaim_let_go(&f, &j->out);
    bool busy = f.holder || f.claimed > 0;
    /* let go: a VMM killed before it reattached the host's drivers left the interfaces with
     * none (a clean quit reattaches them); they are probed again, as the reattach would */
    int probed = !busy && port && c->sysfs_fd >= 0 ? node_usb_probe_unbound(c->sysfs_fd, port) : 0;
    if (probed > 0)
        log_info("Gave the USB device's interfaces back to their drivers",
                 KV_STR("claim", key_of(j)), KV_INT("interfaces", probed));
    if (busy && !f.holder && same_wait(j, f.device_path))
        return;
    j->requeue_after = busy ? USBCLAIM_BUSY_RETRY : 0;
    char full[512];
    /* looked at again the moment the VMM closes the node */
    if (busy && agent_path(c, f.device_path, full, sizeof(full))) {
        int r = closewatch_arm(c->closes, full, key_of(j));
        if (r < 0)
            log_v(2, "Cannot watch the device node for its close", KV_STR("path", full),
                  KV_ERRNO(r));
    }
    char now[40];
    timefmt_now(now, sizeof(now));
    char *patch = usbclaim_status_patch(j->claim, c->cfg.env.node_name, &j->out, now);
    if (patch && busy && !claimstatus_ready_is(j->claim, false, j->out.reason, j->out.message)) {
        metrics_inc(c->results[R_BUSY]); /* once per change: the holder or its interfaces */
        log_warning("Deleted USBDeviceClaim waits: its device is in use",
                    KV_STR("claim", key_of(j)), KV_STR("message", j->out.message));
        emit(j, true, j->out.reason, j->out.message);
    }
    patch_claim(j, patch, true);
}

static void on_node_closed(const char *key, void *userdata)
{
    struct usbclaim *c = userdata;
    log_v(2, "USB device node closed", KV_STR("claim", key));
    runner_enqueue(c->runner, key);
}

static void act(struct runner_job *job, void *plan, void *ctx)
{
    struct ujob *j = plan;
    (void)ctx;
    j->job = job;
    switch (j->step) {
    case USBCLAIM_ADD_FINALIZER:
        patch_claim(j, usbclaim_finalizer_patch(j->claim, true), false);
        break;
    case USBCLAIM_LET_GO:
        let_go(j);
        break;
    case USBCLAIM_RELEASE:
        metrics_inc(j->c->results[R_RELEASED]);
        log_info("Released USB device", KV_STR("claim", key_of(j)));
        emit(j, false, "Released", "the device is no longer enabled for passthrough");
        patch_claim(j, usbclaim_finalizer_patch(j->claim, false), false);
        break;
    default:
        check(j);
        break;
    }
}

static bool can_start(void *ctx)
{
    const struct usbclaim *c = ctx;
    return c->devices && kube_informer_has_synced(c->devices) &&
           (!c->pci_claims || kube_informer_has_synced(c->pci_claims)) &&
           (!c->pci_devices || kube_informer_has_synced(c->pci_devices)) &&
           (!c->devices_runner || runner_converged(c->devices_runner));
}

static const struct runner_ops ops = {
        .plan = plan_claim,
        .act = act,
        .plan_free = ujob_free,
        .can_start = can_start,
        .kind = "USBDeviceClaim",
};

/* --- the reconciler's life -------------------------------------------------------------------- */

struct usbclaim *usbclaim_new(const struct part_env *env)
{
    static const char *const results[] = {"enabled",  "refused", "unplugged",
                                          "released", "busy",    NULL};
    struct usbclaim *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->cfg.env = *env;
    c->sysfs_fd = -1;
    char instance[300];
    (void)snprintf(instance, sizeof(instance), "hostdevd-agent-%s", env->node_name);
    struct kube_recorder_config ec = {.controller = "hostdevd.io/agent", .instance = instance};
    c->events = kube_recorder_new(env->loop, env->http, &ec);
    struct runner_config rc = {
            .name = "usbdeviceclaim",
            .loop = env->loop,
            .http = env->http,
            .max_in_flight = MAX_IN_FLIGHT,
            .metrics = env->metrics,
            .ops = &ops,
            .ctx = c,
    };
    c->runner = manager_runner(env->mgr, &kind_usbdeviceclaims, &rc);
    c->devices = manager_cache(env->mgr, &kind_usbdevices);
    c->pci_claims = manager_cache(env->mgr, &kind_pcideviceclaims);
    c->pci_devices = manager_cache(env->mgr, &kind_pcidevices);
    const struct devobjs *usb = manager_part(env->mgr, &usbdevices_part);
    c->devices_runner = usb ? devobjs_runner(usb) : NULL;
    c->closes = closewatch_new(env->loop, on_node_closed, c);
    if (!c->events || !c->runner || !c->closes) {
        usbclaim_free(c);
        return NULL;
    }
    metrics_enum(env->metrics, METRICS_COUNTER, "hostdevd_usb_claim_results_total",
                 "USBDeviceClaim status changes and releases by result.", "result", results,
                 c->results);
    return c;
}

static int usbclaim_start(void *self)
{
    struct usbclaim *c = self;
    c->sysfs_fd = node_sysfs_open_root(c->cfg.env.sysfs_root ? c->cfg.env.sysfs_root : "/sys");
    if (c->sysfs_fd < 0) /* the checks before a release cannot tell a device in use */
        log_warning("Cannot open the sysfs root", KV_STR("root", c->cfg.env.sysfs_root),
                    KV_ERRNO(c->sysfs_fd));
    return runner_start(c->runner);
}

/* A USBDevice changed: its claim (the same name). */
static void on_device(void *self, const struct watch_event *ev)
{
    const struct usbclaim *c = self;
    runner_enqueue(c->runner, ev->key);
}

/* A scan, a PCIDeviceClaim's change (USB claims behind a controller): every claim again. */
static void enqueue_all(void *self, const struct watch_event *ev)
{
    const struct usbclaim *c = self;
    (void)ev;
    runner_enqueue_all(c->runner);
}

static void *make(const struct part_env *env)
{
    return usbclaim_new(env);
}

static const struct watch watches[] = {
        {.kind = &kind_usbdevices, .map = on_device},
        {.kind = &kind_pcideviceclaims, .map = enqueue_all},
        {.topic = &pcidevices_scanned, .map = enqueue_all},
        {.topic = &usbdevices_scanned, .map = enqueue_all},
        {0},
};

static void usbclaim_stop(void *userdata)
{
    struct usbclaim *c = userdata;
    runner_stop(c->runner);
    kube_recorder_flush(c->events);
}

static int usbclaim_in_flight(void *userdata)
{
    const struct usbclaim *c = userdata;
    return runner_in_flight(c->runner) + (int)kube_recorder_in_flight(c->events);
}

static void usbclaim_free(void *userdata)
{
    struct usbclaim *c = userdata;
    if (!c)
        return;
    c->closes = closewatch_free(c->closes);
    c->runner = runner_free(c->runner);
    c->events = kube_recorder_free(c->events);
    if (c->sysfs_fd >= 0)
        close(c->sysfs_fd);
    free(c);
}

static struct runner *part_runner(const void *self)
{
    return ((const struct usbclaim *)self)->runner;
}

const struct part_ops usbclaim_part = {.name = "usbdeviceclaims",
                                       .make = make,
                                       .watches = watches,
                                       .runner = part_runner,
                                       .start = usbclaim_start,
                                       .stop = usbclaim_stop,
                                       .in_flight = usbclaim_in_flight,
                                       .free = usbclaim_free};
