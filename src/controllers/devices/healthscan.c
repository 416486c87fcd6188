/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/devices/healthscan.c - the health each PCI scan shows (see healthscan.h).
 */
#include "controllers/devices/healthscan.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/log.h"
#include "base/map.h"
#include "base/metrics.h"
#include "controllers/binding/ledger.h"
#include "controllers/health/health.h"
#include "controllers/objects/kinds.h"
#include "controllers/runtime/manager.h"
#include "kube/events.h"
#include "kube/names.h"
#include "node/pciaer.h"

/* --- pure ------------------------------------------------------------------------------------- */

static bool same(const char *a, const char *b)
{
    return a[0] && strcmp(a, b) == 0;
}

unsigned healthscan_present(struct healthscan_seen *seen, bool known,
                            const struct pcidevice_spec *s, bool removed, long long *ret_before)
{
    unsigned out = 0;
    bool same_ids =
            known && same(seen->vendor_id, s->vendor_id) && same(seen->device_id, s->device_id);
    long long fatal = s->aer[NODE_PCIAER_FATAL];
    if (removed && same(seen->removed_vendor, s->vendor_id) &&
        same(seen->removed_device, s->device_id))
        out |= HEALTHSCAN_BACK;
    *ret_before = seen->fatal;
    /* a new baseline: never seen, back after a removal (its counters start again), other ids,
     * no counters before, or counters that went down (the kernel's are new) */
    if (!known || seen->gone || !same_ids || seen->fatal < 0 || fatal < seen->fatal) {
        seen->fatal = fatal;
    } else if (fatal > seen->fatal) {
        out |= HEALTHSCAN_AER_FATAL;
        seen->fatal = fatal; /* only a new error reports again */
    }
    (void)snprintf(seen->vendor_id, sizeof(seen->vendor_id), "%s", s->vendor_id);
    (void)snprintf(seen->device_id, sizeof(seen->device_id), "%s", s->device_id);
    seen->gone = false;
    if (!removed || (out & HEALTHSCAN_BACK))
        seen->removed_vendor[0] = seen->removed_device[0] = '\0';
    return out;
}

/* --- the part ----------------------------------------------------------------------------------
 */

/* One device's entry: what was seen, and the scan it was last in. */
struct entry {
    struct healthscan_seen s;
    unsigned long scan;
};

struct healthscan {
    const char *node;
    struct health *health;
    struct ledger *ledger;
    struct map *seen;   /* address -> struct entry */
    unsigned long scan; /* the number of the last scan */
    bool scanning;      /* in on_scan: on_health leaves the entries alone */
    struct metrics_family *aer;
    struct kube_recorder *events; /* DeviceRemoved, DeviceReturned, AERFatal on the PCIDevice */
};

/* An Event on the PCIDevice of the device at `address` (by name: a kept object's uid is not at
 * hand, and the name says which device it is). */
static void say(const struct healthscan *hs, const char *address, bool warning, const char *reason,
                const char *message)
{
    char name[KUBE_NAME_MAX + 1];
    if (!hs->events || kube_names_pcidevice(hs->node, address, name, sizeof(name)) < 0)
        return;
    struct kube_event_ref ref = {
            .api_version = "devices.harvesterhci.io/v1beta1", .kind = "PCIDevice", .name = name};
    (void)kube_recorder_emit(hs->events, &ref, warning, reason, "Scan", message);
}

static bool is_removed(const struct healthscan *hs, const char *address)
{
    struct health_state st;
    return !health_get(hs->health, address, &st) && strcmp(st.reason, HEALTH_REMOVED) == 0;
}

/* Who holds `address` by a path that takes it to a VM ("PCIDeviceClaim <name>", "ResourceClaim
 * <namespace>/<name>"), in `buf`; false when none does. */
static bool held(const struct healthscan *hs, const char *address, char *buf, size_t size)
{
    char who[256];
    const char *kind = NULL;
    if (!hs->ledger)
        return false;
    if (ledger_held(hs->ledger, address, LEDGER_PCI_CLAIM, NULL, who, sizeof(who)))
        kind = "PCIDeviceClaim";
    else if (ledger_held(hs->ledger, address, LEDGER_DRA, NULL, who, sizeof(who)))
        kind = "ResourceClaim";
    if (kind)
        (void)snprintf(buf, size, "%s %s", kind, who);
    return kind != NULL;
}

static struct entry *entry_of(struct healthscan *hs, const char *address, bool *ret_known)
{
    struct entry *e = map_get(hs->seen, address);
    *ret_known = e != NULL;
    if (e)
        return e;
    e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    e->s.fatal = -1;
    if (map_put(hs->seen, address, e) < 0) {
        free(e);
        return NULL;
    }
    return e;
}

static void report_fatal(struct healthscan *hs, const struct pcidevice_spec *s, long long before)
{
    char msg[1024];
    (void)snprintf(msg, sizeof(msg),
                   "its AER fatal error count (aer_dev_fatal) went from %lld to %lld since the "
                   "agent first saw it: the device or its link had an uncorrectable error the "
                   "kernel had to recover from. Look at the kernel log (dmesg | grep -i -e aer "
                   "-e %s), fix the cause (reseat or replace the card, update its firmware), then "
                   "run kubectl annotate --overwrite pcidevice %s %s=$(date +%%s)",
                   before, s->aer[NODE_PCIAER_FATAL], s->address, s->name,
                   HEALTH_RECHECK_ANNOTATION);
    log_warning("PCI device reported an AER fatal error; marked unhealthy",
                KV_STR("device", s->address), KV_INT("before", before),
                KV_INT("fatal", s->aer[NODE_PCIAER_FATAL]));
    health_report(hs->health, s->address, HEALTH_AER_FATAL, msg);
    say(hs, s->address, true, "AERFatal", msg);
}

static void count_aer(const struct healthscan *hs, const struct pcidevice_spec *s)
{
    for (int i = 0; i < NODE_PCIAER_SEVERITIES; i++)
        if (s->aer[i] >= 0)
            metrics_set(metrics_series(hs->aer, s->address, node_pciaer_name(i)),
                        (double)s->aer[i]);
}

static void present(struct healthscan *hs, const struct pcidevice_spec *s)
{
    bool known;
    long long before = -1;
    struct entry *e = entry_of(hs, s->address, &known);
    count_aer(hs, s);
    if (!e)
        return;
    e->scan = hs->scan;
    unsigned found = healthscan_present(&e->s, known, s, is_removed(hs, s->address), &before);
    if (found & HEALTHSCAN_BACK) {
        char msg[256];
        log_info("Removed PCI device is back with the same ids; marked healthy",
                 KV_STR("device", s->address), KV_STR("vendorId", s->vendor_id),
                 KV_STR("deviceId", s->device_id));
        (void)snprintf(msg, sizeof(msg),
                       "it is on the PCI bus again with the ids it had (%s:%s): healthy again "
                       "(a claim that holds it binds it again)",
                       s->vendor_id, s->device_id);
        health_clear(hs->health, s->address);
        say(hs, s->address, false, "DeviceReturned", msg);
    }
    if (found & HEALTHSCAN_AER_FATAL)
        report_fatal(hs, s, before);
}

static void report_removed(struct healthscan *hs, const char *address, const struct entry *e,
                           const char *who)
{
    char msg[1024];
    (void)snprintf(msg, sizeof(msg),
                   "it is gone from the PCI bus while %s holds it (removed by hand or by the "
                   "platform, or the kernel removed it after an error): what used it has lost it. "
                   "Put the device back (the agent marks it healthy when it is seen again with "
                   "the ids %s:%s), or release it by deleting the claim",
                   who, e->s.vendor_id, e->s.device_id);
    log_warning("Held PCI device is gone; marked unhealthy", KV_STR("device", address),
                KV_STR("heldBy", who));
    health_report(hs->health, address, HEALTH_REMOVED, msg);
    say(hs, address, true, "DeviceRemoved", msg);
}

/* The devices of the last scan that are not in this one: newly gone ones noted, and reported
 * Removed when held (after the walk: a report runs the watches of health_changed). */
static void gone(struct healthscan *hs)
{
    size_t pos = 0, n = 0;
    const char *address;
    void *v;
    const char **now_gone = calloc(map_size(hs->seen) + 1, sizeof(*now_gone));
    while (now_gone && map_next(hs->seen, &pos, &address, &v)) {
        struct entry *e = v;
        if (e->scan == hs->scan || e->s.gone)
            continue;
        e->s.gone = true;
        (void)snprintf(e->s.removed_vendor, sizeof(e->s.removed_vendor), "%s", e->s.vendor_id);
        (void)snprintf(e->s.removed_device, sizeof(e->s.removed_device), "%s", e->s.device_id);
        now_gone[n++] = address;
    }
    for (size_t i = 0; i < n; i++) {
        char who[320];
        if (held(hs, now_gone[i], who, sizeof(who)))
            report_removed(hs, now_gone[i], map_get(hs->seen, now_gone[i]), who);
    }
    free((void *)now_gone);
}

/* A scan's PCIDevices (name -> struct pcidevice_spec, borrowed). */
static void on_scan(void *self, const struct watch_event *ev)
{
    struct healthscan *hs = self;
    const struct map *want = ev->data;
    const char *key;
    void *v;
    size_t pos = 0;
    hs->scan++;
    hs->scanning = true;
    while (map_next(want, &pos, &key, &v))
        present(hs, v);
    gone(hs);
    hs->scanning = false;
}

/* A PCIDevice event after the store took a Removed back from it (a restart; the store's watch
 * runs first): the ids the object shows are those the device had when it went; a device present
 * in the last scan with those ids is back. (From the event: during the informer's first LIST the
 * object is not in its cache yet.) */
static void on_pcidevice(void *self, const struct watch_event *ev)
{
    struct healthscan *hs = self;
    const cJSON *st = json_field(ev->obj, "status");
    const char *address = json_str(st, "address");
    const char *vendor = json_str(st, "vendorId"), *device = json_str(st, "deviceId");
    bool known;
    if (hs->scanning || ev->type == WATCH_DELETE || !address || !vendor || !device ||
        !is_removed(hs, address))
        return;
    struct entry *e = entry_of(hs, address, &known);
    if (!e || e->s.removed_vendor[0])
        return;
    if (!known)
        e->s.gone = true; /* (not seen yet: the next scan says) */
    (void)snprintf(e->s.removed_vendor, sizeof(e->s.removed_vendor), "%s", vendor);
    (void)snprintf(e->s.removed_device, sizeof(e->s.removed_device), "%s", device);
    if (!e->s.gone && same(e->s.removed_vendor, e->s.vendor_id) &&
        same(e->s.removed_device, e->s.device_id)) {
        log_info("Removed PCI device is present with the same ids; marked healthy",
                 KV_STR("device", address), KV_STR("vendorId", e->s.vendor_id),
                 KV_STR("deviceId", e->s.device_id));
        e->s.removed_vendor[0] = e->s.removed_device[0] = '\0';
        health_clear(hs->health, address);
    }
}

static void *make(const struct part_env *env)
{
    static const char *const labels[] = {"device", "severity", NULL};
    struct healthscan *hs = calloc(1, sizeof(*hs));
    if (!hs || !(hs->seen = map_new(free))) {
        free(hs);
        return NULL;
    }
    hs->node = env->node_name;
    char instance[300];
    (void)snprintf(instance, sizeof(instance), "hostdevd-agent-%s", env->node_name);
    struct kube_recorder_config cfg = {.controller = "hostdevd.io/agent", .instance = instance};
    hs->events = env->http ? kube_recorder_new(env->loop, env->http, &cfg) : NULL;
    hs->health = manager_part(env->mgr, &health_part);
    hs->ledger = manager_part(env->mgr, &ledger_part);
    hs->aer = metrics_family(env->metrics, METRICS_COUNTER, "hostdevd_pci_aer_errors_total",
                             "AER errors the kernel counted for a PCI function since it "
                             "appeared (its aer_dev_* TOTAL_ERR_* lines), by severity.",
                             labels, NULL, 0);
    return hs;
}

static int in_flight(void *self)
{
    const struct healthscan *hs = self;
    return hs->events ? (int)kube_recorder_in_flight(hs->events) : 0;
}

static void stop(void *self)
{
    struct healthscan *hs = self;
    if (hs->events)
        kube_recorder_flush(hs->events);
}

static void part_free(void *self)
{
    struct healthscan *hs = self;
    if (!hs)
        return;
    hs->events = kube_recorder_free(hs->events);
    map_free(hs->seen);
    free(hs);
}

static const struct watch watches[] = {
        {.topic = &pcidevices_wanted, .map = on_scan},
        {.kind = &kind_pcidevices, .map = on_pcidevice},
        {0},
};

const struct part_ops healthscan_part = {.name = "healthscan",
                                         .make = make,
                                         .watches = watches,
                                         .stop = stop,
                                         .in_flight = in_flight,
                                         .free = part_free};
