/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubelet/dpapi.h - the kubelet device-plugin API v1beta1 messages (kubelet/deviceplugin.proto), in
 * plain C structs: what a plugin encodes (registration, options, device lists, allocations,
 * preferred allocations) and decodes (the requests kubelet sends). protobuf-c does the wire
 * format in kubelet/dpapi.c.
 *
 * Decoders never trust their input: a message that protobuf-c cannot unpack, or that holds more
 * than DPAPI_MAX_IDS device IDs in a container or DPAPI_MAX_CONTAINERS containers, or an ID
 * longer than DPAPI_MAX_ID, is -EINVAL with a sentence in ret_err; unknown fields are skipped
 * (a newer kubelet may add some). No logging, no global state.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"

#define DPAPI_VERSION        "v1beta1"
#define DPAPI_MAX_IDS        1024 /* device IDs in one container request */
#define DPAPI_MAX_CONTAINERS 64   /* containers in one request */
#define DPAPI_MAX_ID         256  /* bytes of one device ID */

/* gRPC method paths. */
#define DPAPI_REGISTER       "/v1beta1.Registration/Register"
#define DPAPI_OPTIONS        "/v1beta1.DevicePlugin/GetDevicePluginOptions"
#define DPAPI_LIST_AND_WATCH "/v1beta1.DevicePlugin/ListAndWatch"
#define DPAPI_PREFERRED      "/v1beta1.DevicePlugin/GetPreferredAllocation"
#define DPAPI_ALLOCATE       "/v1beta1.DevicePlugin/Allocate"
#define DPAPI_PRE_START      "/v1beta1.DevicePlugin/PreStartContainer"

struct dpapi_options {
    bool pre_start_required;
    bool get_preferred_allocation_available;
};

/* RegisterRequest: `endpoint` is the socket's file name relative to the device-plugin dir. */
int dpapi_encode_register(const char *endpoint, const char *resource_name,
                          const struct dpapi_options *opts, struct buf *out);
int dpapi_encode_options(const struct dpapi_options *opts, struct buf *out);

struct dpapi_device {
    const char *id;
    bool healthy;
    int numa_node; /* < 0: no topology */
};

int dpapi_encode_list(const struct dpapi_device *devs, size_t n, struct buf *out);

/* A list of device IDs of one container (decoded; owned by the request). */
struct dpapi_ids {
    char **ids;
    size_t n;
};

/* AllocateRequest / PreStartContainerRequest (one container) / PreferredAllocationRequest. */
struct dpapi_request {
    struct dpapi_ids *containers; /* Allocate: each container's devices_ids */
    size_t n_containers;
    /* Preferred: per container, must_include (in `containers` as available) and the size */
    struct dpapi_ids *must_include;
    int *sizes;
};

int dpapi_decode_allocate(const uint8_t *msg, size_t len, struct dpapi_request *ret,
                          struct err *ret_err);
int dpapi_decode_pre_start(const uint8_t *msg, size_t len, struct dpapi_request *ret,
                           struct err *ret_err);
int dpapi_decode_preferred(const uint8_t *msg, size_t len, struct dpapi_request *ret,
                           struct err *ret_err);
void dpapi_request_done(struct dpapi_request *r);

struct dpapi_kv {
    const char *key, *value;
};

struct dpapi_devspec {
    const char *container_path, *host_path, *permissions;
};

/* One container's answer to Allocate. */
struct dpapi_container_response {
    const struct dpapi_kv *envs;
    size_t n_envs;
    const struct dpapi_devspec *devices;
    size_t n_devices;
};

int dpapi_encode_allocate(const struct dpapi_container_response *c, size_t n, struct buf *out);
/* PreferredAllocationResponse: per container, the chosen IDs. */
int dpapi_encode_preferred(const struct dpapi_ids *c, size_t n, struct buf *out);
/* Empty and PreStartContainerResponse: zero bytes. */

/* Decoders of what the plugin sends, for tests and test peers. */
int dpapi_decode_list(const uint8_t *msg, size_t len, struct dpapi_device **ret, size_t *ret_n,
                      struct err *ret_err);
void dpapi_devices_free(struct dpapi_device *d, size_t n);
