/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/health/healthrelease.c - a release's findings in an Event and the health store
 * (see healthrelease.h). On the loop; logs an unhealthy device once.
 */
#include "controllers/health/healthrelease.h"

#include <stddef.h>
#include <stdio.h>

#include "base/log.h"
#include "controllers/health/health.h"
#include "kube/events.h"
#include "kube/names.h"

const char *healthrelease_event(const struct bindplan_release *rel, bool restored_said,
                                bool *ret_warning)
{
    *ret_warning = false;
    if (!rel->checked)
        return NULL;
    if (rel->health) {
        *ret_warning = true;
        return rel->health;
    }
    if (rel->reset)
        return HEALTHRELEASE_RESET;
    return restored_said ? NULL : HEALTHRELEASE_RESTORED;
}

void healthrelease_message(const char *node, const char *address,
                           const struct bindplan_release *rel, char *buf, size_t size)
{
    char name[KUBE_NAME_MAX + 1] = "";
    if (!rel->health) {
        (void)snprintf(buf, size, "%s", rel->message);
        return;
    }
    if (kube_names_pcidevice(node, address, name, sizeof(name)) < 0)
        (void)snprintf(name, sizeof(name), "<its PCIDevice>");
    (void)snprintf(buf, size,
                   "%.800s; once fixed: kubectl annotate --overwrite pcidevice %s %s=$(date +%%s)",
                   rel->message, name, HEALTH_RECHECK_ANNOTATION);
}

void healthrelease_say(struct kube_recorder *events, struct health *h,
                       const struct kube_event_ref *ref, const char *node, const char *address,
                       const struct bindplan_release *rel, bool restored_said)
{
    bool warning;
    char msg[BINDPLAN_MESSAGE_SIZE];
    const char *reason = healthrelease_event(rel, restored_said, &warning);
    if (!reason)
        return;
    healthrelease_message(node, address, rel, msg, sizeof(msg));
    if (events)
        (void)kube_recorder_emit(events, ref, warning, reason, warning ? "Release" : reason, msg);
    if (rel->reset)
        log_info("Reset device on release", KV_STR("device", address),
                 KV_STR("method", rel->method), KV_INT("resetMicroseconds", rel->reset_us));
    if (!rel->health)
        return;
    struct health_state now;
    if (health_get(h, address, &now))
        log_warning("Device unhealthy after its release", KV_STR("device", address),
                    KV_STR("kind", ref->kind), KV_STR("name", ref->name),
                    KV_STR("reason", rel->health), KV_STR("message", msg));
    health_report(h, address, rel->health, msg);
}
