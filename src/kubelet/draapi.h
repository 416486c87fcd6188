/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubelet/draapi.h - the kubelet DRA plugin API v1 (kubelet/draapi.proto), in plain C structs:
 * what a DRA driver decodes (the claims kubelet asks it to prepare or unprepare) and encodes (the
 * per-claim answers); the DRA resource health API v1 (kubelet/drahealth.proto, KEP-4680): the
 * list of the driver's devices and their health it streams to kubelet; and, over
 * kubelet/regapi.h (plugin registration), a DRA driver's PluginInfo and registration status.
 * protobuf-c does the wire format in kubelet/draapi.c.
 *
 * Decoders never trust their input: a message protobuf-c cannot unpack, more than
 * DRAAPI_MAX_CLAIMS claims, a claim whose uid is empty or whose namespace, uid or name is longer
 * than DRAAPI_MAX_FIELD bytes or holds a '/' or a control character, is -EINVAL with a
 * sentence in ret_err; unknown fields are skipped (a newer kubelet may add some). No logging,
 * no global state.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"
#include "kubelet/regapi.h"

#define DRAAPI_PLUGIN_TYPE "DRAPlugin"
#define DRAAPI_SERVICE     "v1.DRAPlugin" /* the supported_versions entry kubelet picks */
/* Listed in supported_versions too: kubelet 1.36+ then opens DRAAPI_WATCH_HEALTH on the DRA
 * socket (it never probes a service a plugin does not list). */
#define DRAAPI_HEALTH_SERVICE "v1.DRAResourceHealth"
#define DRAAPI_MAX_CLAIMS     256
#define DRAAPI_MAX_FIELD      253

/* gRPC method paths. */
#define DRAAPI_PREPARE   "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources"
#define DRAAPI_UNPREPARE "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources"
/* A server stream (package `v1`, not the DRA service's). */
#define DRAAPI_WATCH_HEALTH "/v1.DRAResourceHealth/NodeWatchResources"
#define DRAAPI_GET_INFO     REGAPI_GET_INFO
#define DRAAPI_NOTIFY       REGAPI_NOTIFY

/* A claim kubelet names (all three fields NUL-terminated copies). */
struct draapi_claim {
    char *namespace_, *uid, *name;
};

struct draapi_claims {
    struct draapi_claim *v;
    size_t n;
};

/* NodePrepareResourcesRequest and NodeUnprepareResourcesRequest (the same shape). */
int draapi_decode_claims(const uint8_t *msg, size_t len, bool prepare, struct draapi_claims *ret,
                         struct err *ret_err);
void draapi_claims_done(struct draapi_claims *c);

/* One prepared device of a claim. */
struct draapi_device {
    const char *const *requests; /* the claim's request names it was allocated for */
    size_t n_requests;
    const char *pool, *name;
    const char *const *cdi_ids;
    size_t n_cdi_ids;
};

/* One claim's answer: its devices, or `error` (non-NULL, non-empty) when it failed. */
struct draapi_answer {
    const char *uid;
    const struct draapi_device *devices;
    size_t n_devices;
    const char *error;
};

/* NodePrepareResourcesResponse (devices and errors) and NodeUnprepareResourcesResponse (errors
 * only), keyed by claim uid. */
int draapi_encode_prepared(const struct draapi_answer *a, size_t n, struct buf *out);
int draapi_encode_unprepared(const struct draapi_answer *a, size_t n, struct buf *out);

/* Resource health (kubelet/drahealth.proto). */

/* Bytes of a message kubelet keeps (it cuts longer ones). */
#define DRAAPI_HEALTH_MESSAGE_MAX 1024

enum draapi_health {
    DRAAPI_HEALTH_UNKNOWN = 0,
    DRAAPI_HEALTH_HEALTHY = 1,
    DRAAPI_HEALTH_UNHEALTHY = 2,
};

/* One device of the driver, as its ResourceSlice names it. */
struct draapi_device_health {
    const char *pool, *name;
    enum draapi_health health;
    int64_t updated;     /* Unix seconds (kubelet stamps its own time on receipt) */
    int64_t timeout;     /* seconds kubelet waits for the next report; <= 0: its default, 30 */
    const char *message; /* NULL or "": none; longer than DRAAPI_HEALTH_MESSAGE_MAX bytes: cut
                          * there, on a UTF-8 character's boundary, ending in "..." */
};

/* NodeWatchResourcesResponse: the complete list (kubelet takes a device left out as Unknown once
 * its last report is older than its timeout). */
int draapi_encode_health(const struct draapi_device_health *d, size_t n, struct buf *out);

/* Registration (kubelet/regapi.h), a DRA driver's messages. */

/* PluginInfo{type DRAPlugin, name, endpoint, supported_versions [v1.DRAPlugin,
 * v1.DRAResourceHealth]}. */
static inline int draapi_encode_info(const char *name, const char *endpoint, struct buf *out)
{
    static const char *const versions[] = {DRAAPI_SERVICE, DRAAPI_HEALTH_SERVICE};
    return regapi_encode_info(DRAAPI_PLUGIN_TYPE, name, endpoint, versions, 2, out);
}

/* RegistrationStatus and its answer are regapi's as they are (regapi_decode_status,
 * regapi_encode_status_response). */

/* --- the other side, for tests and tools ---------------------------------------------------- */

int draapi_encode_claims(const struct draapi_claim *c, size_t n, bool prepare, struct buf *out);

/* A decoded answer of one claim (strings owned). */
struct draapi_result {
    char *uid, *error;
    size_t n_devices;
    struct draapi_result_device {
        char *pool, *name;
        char **requests, **cdi_ids;
        size_t n_requests, n_cdi_ids;
    } * devices;
};

/* NodePrepareResourcesResponse / NodeUnprepareResourcesResponse. */
int draapi_decode_answers(const uint8_t *msg, size_t len, bool prepare, struct draapi_result **ret,
                          size_t *ret_n, struct err *ret_err);
void draapi_results_free(struct draapi_result *r, size_t n);
/* PluginInfo: type, name and endpoint copied (cut to `size`), and whether the versions hold
 * DRAAPI_SERVICE. */
static inline int draapi_decode_info(const uint8_t *msg, size_t len, char *type, char *name,
                                     char *endpoint, size_t size, bool *v1, struct err *ret_err)
{
    return regapi_decode_info(msg, len, type, name, endpoint, size, DRAAPI_SERVICE, v1, ret_err);
}
/* PluginInfo: whether the versions hold DRAAPI_HEALTH_SERVICE. */
static inline int draapi_info_health(const uint8_t *msg, size_t len, bool *health,
                                     struct err *ret_err)
{
    char s[256];
    return regapi_decode_info(msg, len, s, s, s, sizeof(s), DRAAPI_HEALTH_SERVICE, health, ret_err);
}

/* A decoded DeviceHealth (strings owned). */
struct draapi_health_result {
    char *pool, *name, *message;
    enum draapi_health health; /* as sent (a value kubelet does not know is Unknown to it) */
    int64_t updated, timeout;
};

/* NodeWatchResourcesResponse. */
int draapi_decode_health(const uint8_t *msg, size_t len, struct draapi_health_result **ret,
                         size_t *ret_n, struct err *ret_err);
void draapi_health_free(struct draapi_health_result *r, size_t n);
