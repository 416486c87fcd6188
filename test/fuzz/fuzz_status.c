/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/fuzz/fuzz_status.c - kube_status_decode() on arbitrary bodies.
 *
 * Input: one byte, then the body. The byte's low 4 bits pick the HTTP status from a table; bit 4
 * says a Retry-After header is present, with the top 3 bits as its value. Checks that the
 * strings stay terminated inside their arrays and the classification is consistent.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kube/status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const int codes[16] = {0,   200, 400, 401, 403, 404, 405, 409,
                              410, 422, 429, 500, 502, 503, 504, 999};

static void check(const struct kube_err *e)
{
    if (!memchr(e->reason, '\0', sizeof(e->reason)) ||
        !memchr(e->message, '\0', sizeof(e->message)))
        abort();
    if (e->retry_after < -1)
        abort();
    int err = kube_err_to_errno(e);
    if (err >= 0)
        abort();
    if (kube_err_is_not_found(e) != (err == -ENOENT))
        abort();
    if (kube_err_is_already_exists(e) && kube_err_is_conflict(e))
        abort();
    (void)kube_err_is_gone(e);
    (void)kube_err_is_unauthorized(e);
    (void)kube_err_is_forbidden(e);
    (void)kube_err_is_invalid(e);
    (void)kube_err_is_bad_request(e);
    if (kube_err_is_too_many_requests(e) && !kube_err_is_retryable(e))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int http = codes[data[0] & 15];
    int header = (data[0] & 0x10) ? data[0] >> 5 : -1;
    struct kube_err e;
    int r = kube_status_decode(http, (const char *)data + 1, size - 1, header, &e);
    if ((r != 0 && r != -EBADMSG) || e.http != http || e.transport != 0)
        abort();
    if (e.code != http && (e.code < 100 || e.code > 999))
        abort();
    if (header >= 0 && e.retry_after < 0)
        abort();
    check(&e);

    /* The same bytes as a transport failure's message. */
    char *message = malloc(size);
    if (!message)
        return 0;
    memcpy(message, data + 1, size - 1);
    message[size - 1] = '\0';
    kube_err_transport(-(int)(data[0] % 140), message, &e);
    free(message);
    if (e.transport >= 0 || !kube_err_is_retryable(&e))
        abort();
    check(&e);
    return 0;
}
