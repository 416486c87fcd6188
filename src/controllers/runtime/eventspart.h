/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/runtime/eventspart.h - one Event recorder (kube/events.h) shared by a role's parts,
 * as a part: reporting controller "hostdevd.io/<role>", instance the role's identity; on SIGTERM
 * it sends what it holds and the process waits for it. Does not log.
 */
#pragma once

struct kube_recorder;
struct manager;
struct part_ops;

/* The controller's recorder (hostdevd.io/controller, instance: part_options.identity). */
extern const struct part_ops eventspart_controller;
/* The recorder of the process's eventspart, or NULL when the role has none. */
struct kube_recorder *eventspart_recorder(const struct manager *m);
