/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube/status.c - API errors: metav1.Status bodies, bare HTTP statuses and transport failures
 * into `struct kube_err`, and the predicates that classify them (client-go's api/errors).
 * See status.h. Pure: no I/O, no logging.
 */
#include "kube/status.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/json.h"

/* The reasons client-go knows (apimachinery's knownReasons). For any other reason, "" included,
 * the predicates fall back to the code. */
static const char *const known_reasons[] = {
        "Unauthorized",
        "Forbidden",
        "NotFound",
        "AlreadyExists",
        "Conflict",
        "Gone",
        "Invalid",
        "ServerTimeout",
        "StorageReadError",
        "Timeout",
        "TooManyRequests",
        "BadRequest",
        "MethodNotAllowed",
        "NotAcceptable",
        "RequestEntityTooLarge",
        "UnsupportedMediaType",
        "InternalError",
        "Expired",
        "ServiceUnavailable",
};

/* What a response without a Status means (client-go's NewGenericServerResponse). */
static const struct {
    int http;
    const char *reason;
    const char *message;
} generic[] = {
        {400, "BadRequest", "the server rejected our request for an unknown reason"},
        {401, "Unauthorized", "the server has asked for the client to provide credentials"},
        {403, "Forbidden", "the server does not allow access to the requested resource"},
        {404, "NotFound", "the server could not find the requested resource"},
        {405, "MethodNotAllowed",
         "the server does not allow this method on the requested resource"},
        {406, "NotAcceptable",
         "the server was unable to respond with a content type that the client supports"},
        {409, "Conflict", "the server reported a conflict"},
        {410, "Gone", "the server reported that the requested resource is gone"},
        {415, "UnsupportedMediaType",
         "the server does not support the content type of the request"},
        {422, "Invalid", "the server rejected our request due to an error in our request"},
        {429, "TooManyRequests",
         "the server has received too many requests and has asked us to try again later"},
        {503, "ServiceUnavailable", "the server is currently unable to handle the request"},
        {504, "Timeout",
         "the server was unable to return a response in the time allotted, but may still be "
         "processing the request"},
};

void kube_err_init(struct kube_err *e)
{
    *e = (struct kube_err){.retry_after = -1};
}

/* Copies at most `n` bytes of `src`, up to a NUL, into `dst` of `size` bytes. When it must cut,
 * it cuts before a UTF-8 sequence rather than inside it. */
static void copy_text(char *dst, size_t size, const char *src, size_t n)
{
    size_t len = strnlen(src, n);
    if (len >= size) {
        len = size - 1;
        for (int i = 0; i < 3 && len > 0 && ((unsigned char)src[len] & 0xc0) == 0x80; i++)
            len--;
    }
    memcpy(dst, src, len);
    dst[len] = '\0';
}

static void copy_string(char *dst, size_t size, const cJSON *item)
{
    const char *s = cJSON_GetStringValue(item);
    if (s)
        copy_text(dst, size, s, SIZE_MAX);
}

/* The member `name` of `obj`, or NULL when `obj` is not an object. */
static const cJSON *field(const cJSON *obj, const char *name)
{
    return cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, name) : NULL;
}

/* The value of `item` when it is a whole number in [min, max], else `def`. valueint saturates,
 * so the range is checked on valuedouble (NaN fails the comparison). */
static int whole_number(const cJSON *item, int min, int max, int def)
{
    if (!cJSON_IsNumber(item))
        return def;
    double v = item->valuedouble;
    if (!(v >= min && v <= max) || v != (double)(int)v)
        return def;
    return (int)v;
}

static bool is_status(const cJSON *obj)
{
    const char *kind = cJSON_GetStringValue(field(obj, "kind"));
    if (!kind || strcmp(kind, "Status") != 0)
        return false;
    const cJSON *api_version = field(obj, "apiVersion");
    if (!api_version)
        return true;
    const char *v = cJSON_GetStringValue(api_version);
    return v && (strcmp(v, "v1") == 0 || strcmp(v, "meta.k8s.io/v1") == 0);
}

static void fill_from_status(const cJSON *status, int http, struct kube_err *ret)
{
    kube_err_init(ret);
    ret->http = http;
    ret->code = whole_number(field(status, "code"), 100, 999, http);
    copy_string(ret->reason, sizeof(ret->reason), field(status, "reason"));
    copy_string(ret->message, sizeof(ret->message), field(status, "message"));
    const cJSON *details = field(status, "details");
    ret->retry_after = whole_number(field(details, "retryAfterSeconds"), 1, INT_MAX, -1);
}

/* Fills `ret` from the HTTP status alone; the body, if any, becomes the message. */
static void fill_from_http(int http, const char *body, size_t len, struct kube_err *ret)
{
    kube_err_init(ret);
    ret->http = http;
    ret->code = http;
    const char *reason = http >= 500 ? "InternalError" : "";
    const char *message = NULL;
    for (size_t i = 0; i < ELEMENTSOF(generic); i++) {
        if (generic[i].http == http) {
            reason = generic[i].reason;
            message = generic[i].message;
        }
    }
    copy_text(ret->reason, sizeof(ret->reason), reason, SIZE_MAX);
    if (len > 0 && body[0] != '\0')
        copy_text(ret->message, sizeof(ret->message), body, len);
    else if (message)
        copy_text(ret->message, sizeof(ret->message), message, SIZE_MAX);
    else if (http >= 500)
        snprintf(ret->message, sizeof(ret->message),
                 "an error on the server (%d) has prevented the request from succeeding", http);
    else
        snprintf(ret->message, sizeof(ret->message),
                 "the server responded with the status code %d but did not return more "
                 "information",
                 http);
}

int kube_status_from_json(const struct cJSON *status, int http, struct kube_err *ret)
{
    if (!is_status(status)) {
        fill_from_http(http, NULL, 0, ret);
        return -EBADMSG;
    }
    fill_from_status(status, http, ret);
    return 0;
}

int kube_status_decode(int http, const char *body, size_t len, int retry_after_header,
                       struct kube_err *ret)
{
    if (!body)
        len = 0;
    _cleanup_json_ cJSON *root = NULL;
    (void)json_parse_strict(body, len, &root, NULL);
    bool status = root && is_status(root);
    if (status)
        fill_from_status(root, http, ret);
    else
        fill_from_http(http, body, len, ret);
    bool json = root != NULL;
    if (ret->retry_after < 0 && retry_after_header >= 0)
        ret->retry_after = retry_after_header;
    return json && !status ? -EBADMSG : 0;
}

void kube_err_transport(int err, const char *message, struct kube_err *ret)
{
    kube_err_init(ret);
    ret->transport = err < 0 ? err : -EIO;
    if (message)
        copy_text(ret->message, sizeof(ret->message), message, SIZE_MAX);
}

static bool reason_is(const struct kube_err *e, const char *reason)
{
    return strcmp(e->reason, reason) == 0;
}

static bool reason_is_known(const struct kube_err *e)
{
    for (size_t i = 0; i < ELEMENTSOF(known_reasons); i++)
        if (reason_is(e, known_reasons[i]))
            return true;
    return false;
}

/* client-go's pattern: the reason decides; the code only when the reason is unknown. */
static bool reason_or_code(const struct kube_err *e, const char *reason, int code)
{
    return reason_is(e, reason) || (e->code == code && !reason_is_known(e));
}

bool kube_err_is_not_found(const struct kube_err *e)
{
    return reason_or_code(e, "NotFound", 404);
}

bool kube_err_is_already_exists(const struct kube_err *e)
{
    return reason_is(e, "AlreadyExists");
}

bool kube_err_is_conflict(const struct kube_err *e)
{
    return reason_or_code(e, "Conflict", 409);
}

bool kube_err_is_gone(const struct kube_err *e)
{
    return reason_or_code(e, "Gone", 410) || reason_is(e, "Expired");
}

bool kube_err_is_too_many_requests(const struct kube_err *e)
{
    return reason_is(e, "TooManyRequests") || e->code == 429;
}

bool kube_err_is_unauthorized(const struct kube_err *e)
{
    return reason_or_code(e, "Unauthorized", 401);
}

bool kube_err_is_forbidden(const struct kube_err *e)
{
    return reason_or_code(e, "Forbidden", 403);
}

bool kube_err_is_invalid(const struct kube_err *e)
{
    return reason_or_code(e, "Invalid", 422);
}

bool kube_err_is_bad_request(const struct kube_err *e)
{
    return reason_or_code(e, "BadRequest", 400);
}

bool kube_err_is_retryable(const struct kube_err *e)
{
    return e->transport < 0 || kube_err_is_too_many_requests(e) ||
           reason_or_code(e, "InternalError", 500) || reason_or_code(e, "Timeout", 504) ||
           reason_or_code(e, "ServiceUnavailable", 503) || reason_is(e, "ServerTimeout") ||
           (e->code == 502 && !reason_is_known(e));
}

int kube_err_to_errno(const struct kube_err *e)
{
    if (kube_err_is_not_found(e))
        return -ENOENT;
    if (kube_err_is_already_exists(e))
        return -EEXIST;
    if (kube_err_is_conflict(e))
        return -ESTALE;
    if (kube_err_is_retryable(e))
        return -EAGAIN;
    if (kube_err_is_unauthorized(e) || kube_err_is_forbidden(e))
        return -EACCES;
    if (kube_err_is_invalid(e) || kube_err_is_bad_request(e))
        return -EINVAL;
    return -EIO;
}
