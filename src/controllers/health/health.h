/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/health/health.h - the health of this node's PCI devices, written down once: which
 * device is unhealthy, why (a reason from the list below) and what to do (a message), and since
 * when. The parts that find a problem report it here: the claim reconciler and the DRA plugin
 * after a release's reset and verification (a reset that failed, a device that no longer answers
 * or answers with other ids), the inventory's scan (a claimed device gone: Removed; an AER fatal
 * count that grew: AERFatal). The parts that hand devices out ask here and keep off an unhealthy
 * one: the claim reconciler refuses a new claim (DeviceUnhealthy), the device plugins list it
 * Unhealthy, the ResourceSlice taints it NoSchedule, the PCIDevice carries a Healthy=False
 * condition with the reason and message. Every change emits health_changed.
 *
 * Node-local, in memory, on the loop; no logging. It survives a restart through the PCIDevices:
 * at start (and on each PCIDevice event while it knows nothing of that device) an object whose
 * Healthy condition is False with one of the reasons below is taken back as it says; a device
 * the store cleared since the agent started is not taken back (the object still says False
 * until the PCIDevice reconciler has written the clear).
 *
 * The way back is the administrator's, after fixing the device (a host reboot, a firmware
 * update, reseating the card): `kubectl annotate --overwrite pcidevice <name>
 * hostdevd.io/recheck-health=<any new value>` asks the agent to verify the device again now (config
 * space answers with the ids it had, no AER fatal error since); the state is cleared when it
 * passes, and the message says what failed when it does not (health_recheck()).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct manager;
struct part_ops;
struct topic;

/* Why a device is unhealthy (the PCIDevice's Healthy condition's reason). */
#define HEALTH_RESET_FAILED   "ResetFailed"   /* the reset on release failed */
#define HEALTH_NOT_RESPONDING "NotResponding" /* config space reads all ones */
#define HEALTH_ID_CHANGED     "IdChanged"     /* vendor/device ids not those it had */
#define HEALTH_DRIVER_FAILED  "DriverFailed"  /* its original driver did not take it back */
#define HEALTH_REMOVED        "Removed"       /* gone from the bus while claimed */
#define HEALTH_AER_FATAL      "AERFatal"      /* its aer_dev_fatal count grew */
/* The reason of a device found healthy (the condition True). */
#define HEALTH_HEALTHY "Healthy"

/* The annotation an administrator sets to have a device verified again (see above). */
#define HEALTH_RECHECK_ANNOTATION "hostdevd.io/recheck-health"

/* The PCIDevice condition's type. */
#define HEALTH_CONDITION "Healthy"

/* The reason a new user of an unhealthy device is refused with (a PCIDeviceClaim's Ready=False). */
#define HEALTH_REFUSED "DeviceUnhealthy"

struct health;

/* What is known of one device. */
struct health_state {
    bool healthy;       /* true: nothing known against it */
    const char *reason; /* one of the HEALTH_* reasons above; HEALTH_HEALTHY when healthy */
    char message[1024]; /* what was seen and what to do */
    double since;       /* when it was found (ev_now), 0 when healthy */
};

/* The node's health store (manager_part(m, &health_part)); NULL when the role has none. */
extern const struct part_ops health_part;

/* Emitted on every change of a device's state; data: the device's address (const char *). */
extern const struct topic health_changed;

/* Records that the device at `address` is unhealthy for `reason` (a HEALTH_* reason), with
 * `message` (what was seen and what to do). A device already unhealthy keeps its first reason
 * unless `reason` is HEALTH_REMOVED (the device gone says more). Emits health_changed when the
 * state changes. */
void health_report(struct health *h, const char *address, const char *reason, const char *message);

/* Forgets what is known against the device (the administrator's recheck passed). Emits
 * health_changed when it was unhealthy. */
void health_clear(struct health *h, const char *address);

/* Fills `ret` with the state of the device at `address` (healthy when nothing is known). Returns
 * ret->healthy. Takes a NULL `h` (then every device is healthy). */
bool health_get(const struct health *h, const char *address, struct health_state *ret);

/* The addresses of the unhealthy devices, in no order, borrowed until the next change; `*ret_n`
 * of them. */
const char *const *health_unhealthy(const struct health *h, size_t *ret_n);

/* The sentence that refuses the unhealthy device at `address` (state `s`) to a new user (a
 * PCIDeviceClaim, a DRA claim's prepare): the reason and what was seen, then the way back for its
 * PCIDevice `pcidevice`. The state's message is cut so that the way back always fits `size`. */
void health_refusal(const struct health_state *s, const char *address, const char *pcidevice,
                    char *buf, size_t size);
