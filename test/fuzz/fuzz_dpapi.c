/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/fuzz/fuzz_dpapi.c - the device-plugin API decoders (kubelet/dpapi.c) on arbitrary bytes:
 * what a peer on a plugin socket can send. The first byte picks the decoder (Allocate, PreStart,
 * PreferredAllocation, ListAndWatch); the rest is the message. Checks what a decoder accepts:
 * counts within the caps, every ID non-empty, NUL-terminated and at most DPAPI_MAX_ID bytes; and
 * that an accepted Allocate's IDs encode back into a PreferredAllocationResponse.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kubelet/dpapi.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_ids(const struct dpapi_ids *ids)
{
    if (ids->n > DPAPI_MAX_IDS)
        abort();
    for (size_t i = 0; i < ids->n; i++) {
        size_t len = strlen(ids->ids[i]);
        if (len == 0 || len > DPAPI_MAX_ID)
            abort();
    }
}

static void check_request(const struct dpapi_request *r)
{
    struct buf b;
    if (r->n_containers > DPAPI_MAX_CONTAINERS)
        abort();
    for (size_t i = 0; i < r->n_containers; i++) {
        check_ids(&r->containers[i]);
        if (r->must_include)
            check_ids(&r->must_include[i]);
    }
    buf_init(&b, 1u << 24);
    if (dpapi_encode_preferred(r->containers, r->n_containers, &b) < 0)
        abort();
    buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct dpapi_request r;
    struct err e = {""};
    if (size == 0)
        return 0;
    const uint8_t *msg = data + 1;
    size_t len = size - 1;
    if (data[0] == 3) {
        struct dpapi_device *d;
        size_t n;
        if (dpapi_decode_list(msg, len, &d, &n, &e) == 0)
            dpapi_devices_free(d, n);
        return 0;
    }
    int rc = data[0] == 0   ? dpapi_decode_allocate(msg, len, &r, &e)
             : data[0] == 1 ? dpapi_decode_pre_start(msg, len, &r, &e)
                            : dpapi_decode_preferred(msg, len, &r, &e);
    if (rc == 0) {
        check_request(&r);
        dpapi_request_done(&r);
    } else if (e.msg[0] == '\0') {
        abort(); /* a refusal always says why */
    }
    return 0;
}
