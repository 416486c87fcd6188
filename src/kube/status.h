/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube/status.h - API errors: a metav1.Status (or a bare HTTP status, or a transport failure)
 * decoded into `struct kube_err`, classified by predicates on code and reason, never by
 * matching message text (client-go's apimachinery/pkg/api/errors semantics).
 *
 * Pure: no I/O, no logging. Fuzzed by test/fuzz/fuzz_status.c.
 *
 * Decisions (where client-go leaves room):
 * - A body is a Status when it is a JSON object (read by json_parse_strict(): whitespace around
 *   it allowed, nothing else) with "kind": "Status" and "apiVersion" absent, "v1" or
 *   "meta.k8s.io/v1" (client-go's FromObject).
 *   Its fields count only when well typed: code a whole number in 100..999 (else `http` is used,
 *   as when it is missing), reason and message strings, details.retryAfterSeconds a whole number
 *   in 1..INT32_MAX. "status" ("Failure") is not checked.
 * - retry_after: details.retryAfterSeconds when given, else the header when >= 0, else -1.
 * - Without a Status the reason comes from `http` (see kube_status_decode(); 409 gives
 *   "Conflict": the verb is not known here, client-go gives "AlreadyExists" for a POST), and the
 *   message is the start of the body (up to a NUL), or a generic text when the body is empty.
 * - reason and message are truncated to fit, never inside a UTF-8 sequence.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct cJSON;

#define KUBE_ERR_REASON_MAX  64
#define KUBE_ERR_MESSAGE_MAX 1024

struct kube_err {
    int http;                           /* HTTP status of the response; 0 = no response */
    int code;                           /* Status.code, or `http` when the body has none */
    char reason[KUBE_ERR_REASON_MAX];   /* Status.reason ("NotFound", "Conflict", ...) */
    char message[KUBE_ERR_MESSAGE_MAX]; /* Status.message, truncated; for people only */
    int retry_after;                    /* seconds (details.retryAfterSeconds or the
                                           Retry-After header); -1 when not given */
    int transport;                      /* negative errno of a transport failure; 0 */
};

/* An empty error: no response, no reason, retry_after -1. */
void kube_err_init(struct kube_err *e);

/*
 * Fills `ret` from a response: `http` is the HTTP status, `body`/`len` the response body
 * (may be NULL/0 or not JSON: then code = http and the reason is derived from the HTTP status
 * as client-go does, e.g. 404 -> NotFound, 409 -> Conflict, 410 -> Gone, 429 ->
 * TooManyRequests, 500 -> InternalError, 503 -> ServiceUnavailable). `retry_after_header` is
 * the Retry-After header's value in seconds, or -1. Always fills `ret`; returns 0, or
 * -EBADMSG when the body was JSON but not a Status (ret is still filled from `http`).
 */
int kube_status_decode(int http, const char *body, size_t len, int retry_after_header,
                       struct kube_err *ret);

/* As kube_status_decode() for an already parsed Status object (a watch ERROR event). */
int kube_status_from_json(const struct cJSON *status, int http, struct kube_err *ret);

/* Fills `ret` for a failure with no response (`err` is a negative errno; anything else is taken
 * as -EIO, so `transport` is always negative here). `message` may be NULL. */
void kube_err_transport(int err, const char *message, struct kube_err *ret);

/*
 * The predicates look at the reason first and fall back to the code only when the reason is not
 * one client-go knows ("" included), so {reason NotFound, code 500} is not found and not
 * retryable. As in client-go, AlreadyExists is by reason only and 429 counts whatever the reason.
 */
bool kube_err_is_not_found(const struct kube_err *e);         /* 404 / NotFound */
bool kube_err_is_already_exists(const struct kube_err *e);    /* 409 AlreadyExists */
bool kube_err_is_conflict(const struct kube_err *e);          /* 409 Conflict (stale RV, uid) */
bool kube_err_is_gone(const struct kube_err *e);              /* 410 / Gone / Expired: relist */
bool kube_err_is_too_many_requests(const struct kube_err *e); /* 429 / TooManyRequests */
bool kube_err_is_unauthorized(const struct kube_err *e);      /* 401 */
bool kube_err_is_forbidden(const struct kube_err *e);         /* 403 */
bool kube_err_is_invalid(const struct kube_err *e);           /* 422 / Invalid */
bool kube_err_is_bad_request(const struct kube_err *e);       /* 400 / BadRequest */
/* Worth retrying later: transport failures, 429, 500, 502, 503, 504, timeouts. By reason:
 * TooManyRequests, InternalError, ServiceUnavailable, Timeout, ServerTimeout. */
bool kube_err_is_retryable(const struct kube_err *e);

/* A negative errno for callers that return int: -ENOENT, -EEXIST, -ESTALE (conflict),
 * -EAGAIN (retryable), -EACCES (401/403), -EINVAL (400/422), -EIO otherwise, first match in
 * that order. Never 0: 410 Gone and an empty error give -EIO (test kube_err_is_gone() to relist).
 */
int kube_err_to_errno(const struct kube_err *e);
