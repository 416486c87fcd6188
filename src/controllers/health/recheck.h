/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/health/recheck.h - the administrator's way back for an unhealthy device: once the
 * device is fixed, `kubectl annotate --overwrite pcidevice <name> hostdevd.io/recheck-health=<any
 * value>` (HEALTH_RECHECK_ANNOTATION). The agent of the device's node then looks at the device
 * again at once: it is on the bus, answers config reads (not all ones) and answers with the ids the
 * kernel read at probe. When it does, what the health store had against it is cleared (the
 * claims, device plugins, slices and the PCIDevice's Healthy condition follow the store) and a
 * Normal Event HealthRechecked on the PCIDevice says what was cleared; when it does not, the
 * state stays and a Warning Event HealthRecheckFailed says what was seen. Either way the agent
 * removes the annotation: it is a request, handled once (an annotation left in place would
 * clear a new problem found after an agent restart). A healthy device's recheck says so.
 *
 * The verdict is pure (recheck_judge, unit-tested); the part reads sysfs on the loop (two small
 * reads of a device's sysfs files; config space answers or times out within the PCIe completion
 * timeout, milliseconds).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct health_state;

/* What the recheck saw of a device. */
struct recheck_facts {
    const char *address;
    int live_error; /* reading config: 0, -ENOENT not on the bus, other -errno */
    uint16_t live_vendor, live_device;
    int probe_error; /* reading vendor/device: 0 or -errno */
    uint16_t probe_vendor, probe_device;
};

/* Whether the device passes (then `buf` says what it answered with) or not (then `buf` says what
 * was seen and what to do). Pure. */
bool recheck_judge(const struct recheck_facts *f, const struct health_state *was, char *buf,
                   size_t size);

extern const struct part_ops recheck_part;
