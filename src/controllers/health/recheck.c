/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/health/recheck.c - the administrator's recheck of an unhealthy device (see
 * recheck.h).
 */
#include "controllers/health/recheck.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/json.h"
#include "base/log.h"
#include "base/map.h"
#include "controllers/health/health.h"
#include "controllers/objects/kinds.h"
#include "controllers/runtime/manager.h"
#include "controllers/runtime/part.h"
#include "kube/client.h"
#include "kube/events.h"
#include "node/pcireset.h"
#include "node/sysfs.h"

struct recheck {
    const char *node;
    struct kube_http *http;
    struct health *health;
    struct kube_recorder *events;
    int sysfs_fd;
    struct map *pending; /* names whose annotation's removal is in flight (the value: 1) */
};

/* One removal in flight. */
struct removal {
    struct recheck *rc;
    char name[256];
};

bool recheck_judge(const struct recheck_facts *f, const struct health_state *was, char *buf,
                   size_t size)
{
    char stays[64] = "";
    if (!was->healthy)
        (void)snprintf(stays, sizeof(stays), " (%s stays)", was->reason);
    if (f->live_error == -ENOENT) {
        (void)snprintf(buf, size,
                       "device %s is not on the bus%s: put it back (or rescan the bus: echo 1 > "
                       "/sys/bus/pci/rescan), then annotate again",
                       f->address, stays);
        return false;
    }
    if (f->live_error < 0) {
        (void)snprintf(buf, size, "config space of %s cannot be read: %s%s", f->address,
                       strerror(-f->live_error), stays);
        return false;
    }
    if (f->live_vendor == 0xffff && f->live_device == 0xffff) {
        (void)snprintf(buf, size,
                       "device %s still does not answer: config space reads all ones%s; a host "
                       "reboot or a power cycle of the card may be needed",
                       f->address, stays);
        return false;
    }
    if (f->probe_error == 0 &&
        (f->live_vendor != f->probe_vendor || f->live_device != f->probe_device)) {
        (void)snprintf(buf, size,
                       "device %s answers as %04x:%04x, not as %04x:%04x the kernel found%s: "
                       "remove and rescan it (echo 1 > /sys/bus/pci/devices/%s/remove; echo 1 > "
                       "/sys/bus/pci/rescan) or reboot the host",
                       f->address, f->live_vendor, f->live_device, f->probe_vendor, f->probe_device,
                       stays, f->address);
        return false;
    }
    if (was->healthy)
        (void)snprintf(buf, size, "device %s answers as %04x:%04x: nothing was known against it",
                       f->address, f->live_vendor, f->live_device);
    else
        (void)snprintf(buf, size, "device %s answers as %04x:%04x: healthy again (was %s: %s)",
                       f->address, f->live_vendor, f->live_device, was->reason, was->message);
    return true;
}

static void removed(const struct kube_err *err, const cJSON *obj, void *userdata)
{
    struct removal *rm = userdata;
    (void)err; /* a failed removal: the next event of the object asks again */
    (void)obj;
    map_remove(rm->rc->pending, rm->name);
    free(rm);
}

static void on_pcidevice(void *self, const struct watch_event *ev)
{
    struct recheck *rc = self;
    if (!ev->obj || ev->type == WATCH_DELETE)
        return;
    const cJSON *ann = json_field(json_field(ev->obj, "metadata"), "annotations");
    const char *name = kube_meta_str(ev->obj, "name");
    const char *address = json_str(json_field(ev->obj, "status"), "address");
    if (!json_field(ann, HEALTH_RECHECK_ANNOTATION) || !name || !address || !address[0] ||
        map_contains(rc->pending, name))
        return;
    struct health_state was;
    (void)health_get(rc->health, address, &was);
    struct recheck_facts f = {.address = address};
    f.live_error = node_pcireset_live_ids(rc->sysfs_fd, address, &f.live_vendor, &f.live_device);
    f.probe_error =
            node_pcireset_probe_ids(rc->sysfs_fd, address, &f.probe_vendor, &f.probe_device);
    char msg[1400];
    bool ok = recheck_judge(&f, &was, msg, sizeof(msg));
    if (ok)
        health_clear(rc->health, address);
    log_info(ok ? "Device rechecked: healthy" : "Device rechecked: still unhealthy",
             KV_STR("device", address), KV_STR("pcidevice", name), KV_STR("message", msg));
    struct kube_event_ref ref = {.api_version = "devices.harvesterhci.io/v1beta1",
                                 .kind = "PCIDevice",
                                 .name = name,
                                 .uid = kube_meta_str(ev->obj, "uid")};
    const char *reason = ok ? "HealthRechecked" : "HealthRecheckFailed";
    (void)kube_recorder_emit(rc->events, &ref, !ok, reason, "Recheck", msg);
    char patch[200];
    (void)snprintf(patch, sizeof(patch), "{\"metadata\":{\"annotations\":{\"%s\":null}}}",
                   HEALTH_RECHECK_ANNOTATION);
    struct removal *rm = calloc(1, sizeof(*rm));
    if (!rm || map_put(rc->pending, name, (void *)1) < 0) {
        free(rm);
        return;
    }
    rm->rc = rc;
    (void)snprintf(rm->name, sizeof(rm->name), "%s", name);
    if (kube_client_patch(rc->http, &kube_res_pcidevices, NULL, name, KUBE_PATCH_MERGE, patch,
                          false, removed, rm) < 0) {
        map_remove(rc->pending, name);
        free(rm);
    }
}

static const struct watch watches[] = {
        {.kind = &kind_pcidevices, .map = on_pcidevice},
        {0},
};

static void *make(const struct part_env *env)
{
    struct recheck *rc = calloc(1, sizeof(*rc));
    if (!rc)
        return NULL;
    rc->node = env->node_name;
    rc->http = env->http;
    rc->health = manager_part(env->mgr, &health_part);
    rc->sysfs_fd = node_sysfs_open_root(env->sysfs_root);
    rc->pending = map_new(NULL);
    char instance[300];
    (void)snprintf(instance, sizeof(instance), "hostdevd-agent-%s", env->node_name);
    struct kube_recorder_config cfg = {.controller = "hostdevd.io/agent", .instance = instance};
    rc->events = kube_recorder_new(env->loop, env->http, &cfg);
    if (!rc->health || !rc->events || !rc->pending || rc->sysfs_fd < 0) {
        log_error("Cannot make the health recheck", KV_STR("sysfs", env->sysfs_root));
        if (rc->sysfs_fd >= 0)
            close(rc->sysfs_fd);
        rc->events = kube_recorder_free(rc->events);
        map_free(rc->pending);
        free(rc);
        return NULL;
    }
    return rc;
}

static int in_flight(void *self)
{
    struct recheck *rc = self;
    return (int)map_size(rc->pending) + (int)kube_recorder_in_flight(rc->events);
}

static void stop(void *self)
{
    struct recheck *rc = self;
    kube_recorder_flush(rc->events);
}

static void part_free(void *self)
{
    struct recheck *rc = self;
    if (!rc)
        return;
    rc->events = kube_recorder_free(rc->events);
    map_free(rc->pending);
    close(rc->sysfs_fd);
    free(rc);
}

const struct part_ops recheck_part = {.name = "healthrecheck",
                                      .make = make,
                                      .watches = watches,
                                      .stop = stop,
                                      .in_flight = in_flight,
                                      .free = part_free};
