/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/claims/claimgauge.h - the cluster's claims counted for alerts: a metrics collector
 * over the controller's claim caches that sets hostdevd_claims{kind, ready, reason} before each
 * render (kind "pci" or "usb"; ready "true" or "false"; reason the Ready condition's, "Pending"
 * when a claim has none yet). The number of series is bounded: past CLAIMGAUGE_MAX_SERIES
 * distinct (kind, ready, reason), further reasons count as "Other". A series whose claims are
 * gone reads 0. Every replica reports what its caches hold; alerts take the max.
 */
#pragma once

struct metrics;
struct kube_informer;
struct claimgauge;

#define CLAIMGAUGE_MAX_SERIES 48

/* Registers the family and the collector; the informers are borrowed (NULL: none of that kind).
 * NULL on OOM. */
struct claimgauge *claimgauge_new(struct metrics *m, const struct kube_informer *pci,
                                  const struct kube_informer *usb);
/* Removes the collector. Takes NULL; returns NULL. */
struct claimgauge *claimgauge_free(struct claimgauge *g);
/* The collector itself (tests call it directly). */
void claimgauge_collect(void *userdata);

/* The part (runtime/part.h): the gauge over the process's claim caches. */
struct part_ops;
extern const struct part_ops claimgauge_part;
