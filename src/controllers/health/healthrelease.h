/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/health/healthrelease.h - what a release's reset and verification found
 * (bindplan_release, filled by controllers/binding/pcibind on the worker), said on the loop by
 * the parts that release devices (the PCIDeviceClaim reconciler, the DRA plugin's unprepare):
 * an Event on the claim and, for an unhealthy device, a log line and health_report(). The
 * claim goes either way: the health store keeps new claims off the device, not the old claim.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "controllers/binding/bindplan.h"

struct health;
struct kube_event_ref;
struct kube_recorder;

/* The Normal Event of a device reset and found healthy. */
#define HEALTHRELEASE_RESET "DeviceReset"
/* The Normal Event of a device found healthy but not reset (no method, ...). */
#define HEALTHRELEASE_RESTORED "Restored"

/* The Event a release's findings call for: the health reason (Warning) for an unhealthy device,
 * HEALTHRELEASE_RESET for a reset one, HEALTHRELEASE_RESTORED for one not reset unless
 * `restored_said` (the caller's own Restored Event carries rel->summary already); NULL for
 * none (not checked). Pure. */
const char *healthrelease_event(const struct bindplan_release *rel, bool restored_said,
                                bool *ret_warning);

/* The message of the findings on the device at `address` of node `node`: the release's, and
 * for an unhealthy device the way back once it is fixed (the recheck annotation on its
 * PCIDevice, health.h). Pure. */
void healthrelease_message(const char *node, const char *address,
                           const struct bindplan_release *rel, char *buf, size_t size);

/* Says the findings of the release of the device at `address` of node `node`: the Event on
 * `ref` (as healthrelease_event() says), and for an unhealthy device a log line (once: not while
 * the store says so already) and health_report(). `events` and `h` may be NULL. */
void healthrelease_say(struct kube_recorder *events, struct health *h,
                       const struct kube_event_ref *ref, const char *node, const char *address,
                       const struct bindplan_release *rel, bool restored_said);
