/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/objects/claimstatus.h - what the claim reconcilers (PCIDeviceClaim, USBDeviceClaim)
 * share, pure: their Ready condition (metav1.Condition, with observedGeneration and a
 * lastTransitionTime that changes only with the status) and the JSON patch that adds or removes
 * their finalizer with a test, so a concurrent change of the list fails instead of being
 * clobbered.
 */
#pragma once

#include <stdbool.h>

struct cJSON;

/* The claim's Ready condition, or NULL. */
const struct cJSON *claimstatus_ready(const struct cJSON *claim);

/* Whether the claim's Ready condition says exactly this, for the claim's current generation. */
bool claimstatus_ready_is(const struct cJSON *claim, bool ready, const char *reason,
                          const char *message);

/* A new Ready condition saying this; its lastTransitionTime is the old one when the status does
 * not change, else `now` (RFC 3339). NULL on OOM. */
struct cJSON *claimstatus_ready_condition(const struct cJSON *claim, bool ready, const char *reason,
                                          const char *message, const char *now);

/* Index of `finalizer` in the claim's metadata.finalizers, or -1. */
int claimstatus_finalizer_index(const struct cJSON *claim, const char *finalizer);

/* A JSON patch adding (add) or removing (!add) `finalizer`, or NULL when there is nothing to
 * do (or on OOM). */
char *claimstatus_finalizer_patch(const struct cJSON *claim, const char *finalizer, bool add);
