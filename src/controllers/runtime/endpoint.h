/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/runtime/endpoint.h - the process's HTTP endpoint for kubelet probes and Prometheus:
 * GET /healthz, /readyz and /metrics over HTTP/1.x, on the libev loop. One request per
 * connection; requests are capped (8 KiB, 5 s) and connections limited, so a slow or hostile
 * client cannot hold the agent. The owner supplies the answers through callbacks.
 */
#pragma once

#include <stdbool.h>

struct buf;
struct ev_loop;
struct endpoint;

struct endpoint_handlers {
    /* Ready: return true, or false and write why into `why` (a short line). */
    bool (*ready)(struct buf *why, void *userdata);
    /* Appends the Prometheus text exposition to `out`. */
    void (*metrics)(struct buf *out, void *userdata);
    void *userdata;
};

/*
 * Listens on `address` ("0.0.0.0:9808", "127.0.0.1:0", ":9808"). Writes the bound port to
 * `ret_port` (may be NULL). Returns 0 and the endpoint in `*ret`, or a negative errno.
 */
int endpoint_new(struct ev_loop *loop, const char *address,
                 const struct endpoint_handlers *handlers, int *ret_port, struct endpoint **ret);

/* Closes the listener and every connection. Takes NULL; returns NULL. */
struct endpoint *endpoint_free(struct endpoint *e);
