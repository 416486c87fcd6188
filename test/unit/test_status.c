/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_status.c - API errors: Status bodies as the kube-apiserver sends them
 * (test/fixtures/status), proxy pages, empty and odd bodies, transport failures, the predicates
 * and kube_err_to_errno.
 */
#include <CUnit/CUnit.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "kube/status.h"

#ifndef FIXTURES
#define FIXTURES "test/fixtures"
#endif

/* Appends `n` copies of `s`. */
static int add_repeated(struct buf *b, const char *s, int n)
{
    int r = 0;
    for (int i = 0; r == 0 && i < n; i++)
        r = buf_adds(b, s);
    return r;
}

/* Decodes test/fixtures/status/<name>; returns the decoder's result, or -ENOENT. */
static int decode_fixture(const char *name, int http, int retry_after_header, struct kube_err *ret)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/status/%s", FIXTURES, name);
    FILE *f = fopen(path, "re");
    CU_ASSERT_PTR_NOT_NULL(f);
    if (!f) {
        kube_err_init(ret);
        return -ENOENT;
    }
    char body[8192];
    size_t len = fread(body, 1, sizeof(body), f);
    fclose(f);
    return kube_status_decode(http, body, len, retry_after_header, ret);
}

/* A bit per predicate, so a test states exactly which ones hold. */
enum {
    NOT_FOUND = 1 << 0,
    ALREADY_EXISTS = 1 << 1,
    CONFLICT = 1 << 2,
    GONE = 1 << 3,
    TOO_MANY = 1 << 4,
    UNAUTHORIZED = 1 << 5,
    FORBIDDEN = 1 << 6,
    INVALID = 1 << 7,
    BAD_REQUEST = 1 << 8,
    RETRYABLE = 1 << 9,
};

static unsigned predicates(const struct kube_err *e)
{
    return (kube_err_is_not_found(e) ? NOT_FOUND : 0) |
           (kube_err_is_already_exists(e) ? ALREADY_EXISTS : 0) |
           (kube_err_is_conflict(e) ? CONFLICT : 0) | (kube_err_is_gone(e) ? GONE : 0) |
           (kube_err_is_too_many_requests(e) ? TOO_MANY : 0) |
           (kube_err_is_unauthorized(e) ? UNAUTHORIZED : 0) |
           (kube_err_is_forbidden(e) ? FORBIDDEN : 0) | (kube_err_is_invalid(e) ? INVALID : 0) |
           (kube_err_is_bad_request(e) ? BAD_REQUEST : 0) |
           (kube_err_is_retryable(e) ? RETRYABLE : 0);
}

static bool starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static void test_not_found(void)
{
    struct kube_err e;
    CU_ASSERT_EQUAL(decode_fixture("404-notfound.json", 404, -1, &e), 0);
    CU_ASSERT_EQUAL(e.http, 404);
    CU_ASSERT_EQUAL(e.code, 404);
    CU_ASSERT_STRING_EQUAL(e.reason, "NotFound");
    CU_ASSERT_STRING_EQUAL(e.message,
                           "pcidevices.devices.harvesterhci.io \"titan-0000001f7\" not found");
    CU_ASSERT_EQUAL(e.retry_after, -1);
    CU_ASSERT_EQUAL(e.transport, 0);
    CU_ASSERT_EQUAL(predicates(&e), NOT_FOUND);
    CU_ASSERT_EQUAL(kube_err_to_errno(&e), -ENOENT);
}

static void test_conflict_stale_resource_version(void)
{
    struct kube_err e;
    CU_ASSERT_EQUAL(decode_fixture("409-conflict.json", 409, -1, &e), 0);
    CU_ASSERT_STRING_EQUAL(e.reason, "Conflict");
    CU_ASSERT_TRUE(starts_with(e.message, "Operation cannot be fulfilled on pcidevices"));
    CU_ASSERT_EQUAL(predicates(&e), CONFLICT);
    CU_ASSERT_EQUAL(kube_err_to_errno(&e), -ESTALE);
}

static void test_already_exists(void)
{
    struct kube_err e;
    CU_ASSERT_EQUAL(decode_fixture("409-alreadyexists.json", 409, -1, &e), 0);
    CU_ASSERT_STRING_EQUAL(e.reason, "AlreadyExists");
    /* The reason is known, so the 409 does not also make it a conflict. */
    CU_ASSERT_EQUAL(predicates(&e), ALREADY_EXISTS);
    CU_ASSERT_EQUAL(kube_err_to_errno(&e), -EEXIST);
}

static void test_expired(void)
{
    struct kube_err e;
    CU_ASSERT_EQUAL(decode_fixture("410-expired.json", 410, -1, &e), 0);
    CU_ASSERT_EQUAL(e.code, 410);
    CU_ASSERT_STRING_EQUAL(e.reason, "Expired");
    CU_ASSERT_TRUE(starts_with(e.message, "The provided continue parameter is too old"));
    CU_ASSERT_EQUAL(predicates(&e), GONE);
    CU_ASSERT_EQUAL(kube_err_to_errno(&e), -EIO);
}

static void test_too_many_requests(void)
{
    struct kube_err e;
    CU_ASSERT_EQUAL(decode_fixture("429-toomanyrequests.json", 429, -1, &e), 0);
    CU_ASSERT_STRING_EQUAL(e.reason, "TooManyRequests");
    CU_ASSERT_STRING_EQUAL(e.message, "Too many requests, please try again later.");
    CU_ASSERT_EQUAL(e.retry_after, 1);
    CU_ASSERT_EQUAL(predicates(&e), TOO_MANY | RETRYABLE);
    CU_ASSERT_EQUAL(kube_err_to_errno(&e), -EAGAIN);
    /* details.retryAfterSeconds wins over the header. */
    CU_ASSERT_EQUAL(decode_fixture("429-toomanyrequests.json", 429, 7, &e), 0);
    CU_ASSERT_EQUAL(e.retry_after, 1);
}

/* A 429 from a proxy in front of the API server: an HTML page and the Retry-After header. */
static void test_too_many_requests_header_only(void)
{
    struct kube_err e;
    CU_ASSERT_EQUAL(decode_fixture("429-haproxy.html", 429, 5, &e), 0);
    CU_ASSERT_EQUAL(e.code, 429);
    CU_ASSERT_STRING_EQUAL(e.reason, "TooManyRequests");
    CU_ASSERT_TRUE(starts_with(e.message, "<html><body><h1>429 Too Many Requests</h1>"));
    CU_ASSERT_EQUAL(e.retry_after, 5);
    CU_ASSERT_EQUAL(predicates(&e), TOO_MANY | RETRYABLE);
    /* Retry-After: 0 means now; no header is -1. */
    CU_ASSERT_EQUAL(kube_status_decode(429, NULL, 0, 0, &e), 0);
    CU_ASSERT_EQUAL(e.retry_after, 0);
    CU_ASSERT_EQUAL(kube_status_decode(429, NULL, 0, -1, &e), 0);
    CU_ASSERT_EQUAL(e.retry_after, -1);
}

static void test_invalid_with_causes(void)
{
    struct kube_err e;
    CU_ASSERT_EQUAL(decode_fixture("422-invalid.json", 422, -1, &e), 0);
    CU_ASSERT_EQUAL(e.code, 422);
    CU_ASSERT_STRING_EQUAL(e.reason, "Invalid");
    CU_ASSERT_TRUE(starts_with(e.message, "PCIDeviceClaim.devices.harvesterhci.io \"my-nic\" is "
                                          "invalid: [spec.address: Invalid value:"));
    CU_ASSERT_EQUAL(predicates(&e), INVALID);
    CU_ASSERT_EQUAL(kube_err_to_errno(&e), -EINVAL);
}

static void test_forbidden_and_unauthorized(void)
{
    struct kube_err e;
    CU_ASSERT_EQUAL(decode_fixture("403-forbidden.json", 403, -1, &e), 0);
    CU_ASSERT_STRING_EQUAL(e.reason, "Forbidden");
    CU_ASSERT_TRUE(starts_with(e.message, "pcidevices.devices.harvesterhci.io is forbidden: "
                                          "User \"alice\" cannot list"));
    CU_ASSERT_EQUAL(predicates(&e), FORBIDDEN);
    CU_ASSERT_EQUAL(kube_err_to_errno(&e), -EACCES);
    CU_ASSERT_EQUAL(decode_fixture("401-unauthorized.json", 401, -1, &e), 0);
    CU_ASSERT_STRING_EQUAL(e.message, "Unauthorized");
    CU_ASSERT_EQUAL(predicates(&e), UNAUTHORIZED);
    CU_ASSERT_EQUAL(kube_err_to_errno(&e), -EACCES);
}

static void test_server_timeout(void)
{
    struct kube_err e;
    CU_ASSERT_EQUAL(decode_fixture("500-servertimeout.json", 500, -1, &e), 0);
    CU_ASSERT_STRING_EQUAL(e.reason, "ServerTimeout");
    CU_ASSERT_EQUAL(e.retry_after, 2);
    CU_ASSERT_EQUAL(predicates(&e), RETRYABLE);
    CU_ASSERT_EQUAL(kube_err_to_errno(&e), -EAGAIN);
}

static void test_proxy_html(void)
{
    struct kube_err e;
    CU_ASSERT_EQUAL(decode_fixture("502-nginx.html", 502, -1, &e), 0);
    CU_ASSERT_EQUAL(e.http, 502);
    CU_ASSERT_EQUAL(e.code, 502);
    CU_ASSERT_STRING_EQUAL(e.reason, "InternalError");
    CU_ASSERT_TRUE(starts_with(e.message, "<html>\r\n<head><title>502 Bad Gateway</title>"));
    CU_ASSERT_EQUAL(predicates(&e), RETRYABLE);
    CU_ASSERT_EQUAL(kube_err_to_errno(&e), -EAGAIN);
}

static void test_empty_body(void)
{
    static const struct {
        int http;
        const char *reason;
        unsigned predicates;
        int err;
    } cases[] = {
            {400, "BadRequest", BAD_REQUEST, -EINVAL},
            {401, "Unauthorized", UNAUTHORIZED, -EACCES},
            {403, "Forbidden", FORBIDDEN, -EACCES},
            {404, "NotFound", NOT_FOUND, -ENOENT},
            {409, "Conflict", CONFLICT, -ESTALE},
            {410, "Gone", GONE, -EIO},
            {422, "Invalid", INVALID, -EINVAL},
            {429, "TooManyRequests", TOO_MANY | RETRYABLE, -EAGAIN},
            {500, "InternalError", RETRYABLE, -EAGAIN},
            {502, "InternalError", RETRYABLE, -EAGAIN},
            {503, "ServiceUnavailable", RETRYABLE, -EAGAIN},
            {504, "Timeout", RETRYABLE, -EAGAIN},
            {418, "", 0, -EIO},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct kube_err e;
        CU_ASSERT_EQUAL(kube_status_decode(cases[i].http, "", 0, -1, &e), 0);
        CU_ASSERT_EQUAL(e.code, cases[i].http);
        CU_ASSERT_STRING_EQUAL(e.reason, cases[i].reason);
        CU_ASSERT_NOT_EQUAL(e.message[0], '\0');
        CU_ASSERT_EQUAL(predicates(&e), cases[i].predicates);
        CU_ASSERT_EQUAL(kube_err_to_errno(&e), cases[i].err);
    }
    struct kube_err e;
    CU_ASSERT_EQUAL(kube_status_decode(404, NULL, 0, -1, &e), 0);
    CU_ASSERT_STRING_EQUAL(e.message, "the server could not find the requested resource");
    /* A NULL body with a length is still no body. */
    CU_ASSERT_EQUAL(kube_status_decode(503, NULL, 10, -1, &e), 0);
    CU_ASSERT_STRING_EQUAL(e.reason, "ServiceUnavailable");
}

static void test_json_not_a_status(void)
{
    struct kube_err e;
    /* Kong's 404 for a path it does not route. */
    CU_ASSERT_EQUAL(decode_fixture("404-kong.json", 404, -1, &e), -EBADMSG);
    CU_ASSERT_EQUAL(e.code, 404);
    CU_ASSERT_STRING_EQUAL(e.reason, "NotFound");
    CU_ASSERT_TRUE(starts_with(e.message, "{\"message\":\"no Route matched"));
    CU_ASSERT_EQUAL(predicates(&e), NOT_FOUND);
    static const char *const bodies[] = {
            "[1,2,3]",
            "\"NotFound\"",
            "42",
            "{\"kind\":\"PCIDevice\",\"metadata\":{\"name\":\"a\"}}",
            "{\"kind\":\"status\",\"reason\":\"NotFound\",\"code\":404}",
            "{\"Kind\":\"Status\",\"reason\":\"NotFound\",\"code\":404}",
            "{\"kind\":\"Status\",\"apiVersion\":\"example.com/v1\",\"reason\":\"NotFound\"}",
            "{\"kind\":\"Status\",\"apiVersion\":1,\"reason\":\"NotFound\"}",
    };
    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        CU_ASSERT_EQUAL(kube_status_decode(500, bodies[i], strlen(bodies[i]), 3, &e), -EBADMSG);
        CU_ASSERT_EQUAL(e.code, 500);
        CU_ASSERT_STRING_EQUAL(e.reason, "InternalError");
        CU_ASSERT_EQUAL(e.retry_after, 3);
        CU_ASSERT_EQUAL(predicates(&e), RETRYABLE);
    }
    /* Trailing garbage makes it not JSON at all: no -EBADMSG, the text is the message. */
    static const char garbage[] = "{\"kind\":\"Status\",\"reason\":\"NotFound\"} trailing";
    CU_ASSERT_EQUAL(kube_status_decode(404, garbage, strlen(garbage), -1, &e), 0);
    CU_ASSERT_STRING_EQUAL(e.message, garbage);
    /* Whitespace around a Status is fine; apiVersion may be absent or meta.k8s.io/v1. */
    static const char spaced[] = " \r\n{\"kind\":\"Status\",\"reason\":\"Gone\",\"code\":410}\n\n";
    CU_ASSERT_EQUAL(kube_status_decode(410, spaced, strlen(spaced), -1, &e), 0);
    CU_ASSERT_STRING_EQUAL(e.reason, "Gone");
    static const char meta[] = "{\"kind\":\"Status\",\"apiVersion\":\"meta.k8s.io/v1\","
                               "\"reason\":\"Conflict\",\"code\":409}";
    CU_ASSERT_EQUAL(kube_status_decode(409, meta, strlen(meta), -1, &e), 0);
    CU_ASSERT_EQUAL(predicates(&e), CONFLICT);
}

/* The length is honoured: bytes past it are not read. */
static void test_length_honoured(void)
{
    static const char body[] =
            "{\"kind\":\"Status\",\"message\":\"m\",\"reason\":\"NotFound\",\"code\":404}XXXX";
    struct kube_err e;
    CU_ASSERT_EQUAL(kube_status_decode(404, body, strlen(body) - 4, -1, &e), 0);
    CU_ASSERT_STRING_EQUAL(e.message, "m");
    /* A non-JSON body cut by its length, and one with a NUL inside. */
    CU_ASSERT_EQUAL(kube_status_decode(502, "Bad GatewayXXXX", 11, -1, &e), 0);
    CU_ASSERT_STRING_EQUAL(e.message, "Bad Gateway");
    CU_ASSERT_EQUAL(kube_status_decode(502, "Bad\0Gateway", 11, -1, &e), 0);
    CU_ASSERT_STRING_EQUAL(e.message, "Bad");
}

static void test_huge_message_truncated(void)
{
    struct buf b;
    buf_init(&b, 1 << 20);
    CU_ASSERT_EQUAL(buf_adds(&b, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"message\":\""), 0);
    CU_ASSERT_EQUAL(add_repeated(&b, "x", 5000), 0);
    CU_ASSERT_EQUAL(buf_adds(&b, "\",\"reason\":\"Invalid\",\"code\":422}"), 0);
    struct kube_err e;
    CU_ASSERT_EQUAL(kube_status_decode(422, b.data, b.len, -1, &e), 0);
    CU_ASSERT_EQUAL(strlen(e.message), KUBE_ERR_MESSAGE_MAX - 1);
    CU_ASSERT_STRING_EQUAL(e.reason, "Invalid");
    CU_ASSERT_EQUAL(e.code, 422);
    buf_free(&b);

    /* "é" is two bytes; 1022 + 2 does not fit in 1023, so the cut comes before it. */
    buf_init(&b, 1 << 20);
    CU_ASSERT_EQUAL(buf_adds(&b, "{\"kind\":\"Status\",\"message\":\""), 0);
    CU_ASSERT_EQUAL(add_repeated(&b, "x", 1022), 0);
    CU_ASSERT_EQUAL(buf_adds(&b, "\xc3\xa9\xc3\xa9\",\"code\":500}"), 0);
    CU_ASSERT_EQUAL(kube_status_decode(500, b.data, b.len, -1, &e), 0);
    CU_ASSERT_EQUAL(strlen(e.message), 1022);
    CU_ASSERT_EQUAL(e.message[1021], 'x');
    buf_free(&b);

    /* A huge non-JSON body, and a reason too long to be a known one. */
    char page[4000];
    memset(page, 'p', sizeof(page));
    CU_ASSERT_EQUAL(kube_status_decode(502, page, sizeof(page), -1, &e), 0);
    CU_ASSERT_EQUAL(strlen(e.message), KUBE_ERR_MESSAGE_MAX - 1);
    buf_init(&b, 1 << 20);
    CU_ASSERT_EQUAL(buf_adds(&b, "{\"kind\":\"Status\",\"reason\":\"NotFound"), 0);
    CU_ASSERT_EQUAL(add_repeated(&b, "X", 100), 0);
    CU_ASSERT_EQUAL(buf_adds(&b, "\",\"code\":409}"), 0);
    CU_ASSERT_EQUAL(kube_status_decode(409, b.data, b.len, -1, &e), 0);
    CU_ASSERT_EQUAL(strlen(e.reason), KUBE_ERR_REASON_MAX - 1);
    CU_ASSERT_EQUAL(predicates(&e), CONFLICT);
    buf_free(&b);
}

static void test_code_missing_or_odd(void)
{
    struct kube_err e;
    static const char missing[] =
            "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
            "\"status\":\"Failure\",\"message\":\"m\",\"reason\":\"NotFound\"}";
    CU_ASSERT_EQUAL(kube_status_decode(404, missing, strlen(missing), -1, &e), 0);
    CU_ASSERT_EQUAL(e.code, 404);
    CU_ASSERT_EQUAL(predicates(&e), NOT_FOUND);
    static const char *const odd[] = {
            "{\"kind\":\"Status\",\"code\":\"404\"}", "{\"kind\":\"Status\",\"code\":404.5}",
            "{\"kind\":\"Status\",\"code\":4e9}",     "{\"kind\":\"Status\",\"code\":-404}",
            "{\"kind\":\"Status\",\"code\":0}",       "{\"kind\":\"Status\",\"code\":1e400}",
            "{\"kind\":\"Status\",\"code\":null}",
    };
    for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
        CU_ASSERT_EQUAL(kube_status_decode(503, odd[i], strlen(odd[i]), -1, &e), 0);
        CU_ASSERT_EQUAL(e.code, 503);
        CU_ASSERT_STRING_EQUAL(e.reason, "");
        CU_ASSERT_EQUAL(predicates(&e), RETRYABLE);
    }
    /* Wrongly typed reason and message count as absent. */
    static const char typed[] = "{\"kind\":\"Status\",\"reason\":404,\"message\":[],\"code\":404}";
    CU_ASSERT_EQUAL(kube_status_decode(404, typed, strlen(typed), -1, &e), 0);
    CU_ASSERT_STRING_EQUAL(e.reason, "");
    CU_ASSERT_STRING_EQUAL(e.message, "");
    CU_ASSERT_EQUAL(predicates(&e), NOT_FOUND);
}

static void test_retry_after_seconds(void)
{
    static const struct {
        const char *details;
        int header;
        int want;
    } cases[] = {
            {"{\"retryAfterSeconds\":30}", -1, 30},
            {"{\"retryAfterSeconds\":0}", -1, -1},
            {"{\"retryAfterSeconds\":0}", 4, 4},
            {"{\"retryAfterSeconds\":-5}", -1, -1},
            {"{\"retryAfterSeconds\":1.5}", 2, 2},
            {"{\"retryAfterSeconds\":\"5\"}", -1, -1},
            {"{\"retryAfterSeconds\":3000000000}", 9, 9},
            {"{\"retryAfterSeconds\":2147483647}", -1, 2147483647},
            {"[{\"retryAfterSeconds\":5}]", -1, -1},
            {"\"retryAfterSeconds\"", -5, -1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char body[256];
        snprintf(body, sizeof(body),
                 "{\"kind\":\"Status\",\"reason\":\"TooManyRequests\",\"details\":%s,\"code\":429}",
                 cases[i].details);
        struct kube_err e;
        CU_ASSERT_EQUAL(kube_status_decode(429, body, strlen(body), cases[i].header, &e), 0);
        CU_ASSERT_EQUAL(e.retry_after, cases[i].want);
    }
}

/* client-go: the reason decides, the code only when the reason is unknown. */
static void test_reason_before_code(void)
{
    static const struct {
        const char *reason;
        int code;
        unsigned predicates;
    } cases[] = {
            {"NotFound", 500, NOT_FOUND},
            {"SomethingNew", 404, NOT_FOUND},
            {"", 409, CONFLICT},
            {"AlreadyExists", 409, ALREADY_EXISTS},
            {"Conflict", 404, CONFLICT},
            {"Gone", 200, GONE},
            {"Expired", 200, GONE},
            {"SomethingNew", 410, GONE},
            {"BadRequest", 410, BAD_REQUEST},
            {"Forbidden", 401, FORBIDDEN},
            {"", 401, UNAUTHORIZED},
            {"", 422, INVALID},
            {"", 400, BAD_REQUEST},
            {"TooManyRequests", 200, TOO_MANY | RETRYABLE},
            {"Forbidden", 429, FORBIDDEN | TOO_MANY | RETRYABLE},
            {"StorageReadError", 500, 0},
            {"", 500, RETRYABLE},
            {"ServiceUnavailable", 200, RETRYABLE},
            {"Timeout", 200, RETRYABLE},
            {"ServerTimeout", 200, RETRYABLE},
            {"", 502, RETRYABLE},
            {"InternalError", 502, RETRYABLE},
            {"MethodNotAllowed", 502, 0},
            {"notfound", 200, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char body[256];
        snprintf(body, sizeof(body), "{\"kind\":\"Status\",\"reason\":\"%s\",\"code\":%d}",
                 cases[i].reason, cases[i].code);
        struct kube_err e;
        CU_ASSERT_EQUAL(kube_status_decode(200, body, strlen(body), -1, &e), 0);
        if (predicates(&e) != cases[i].predicates)
            fprintf(stderr, "\n  reason \"%s\" code %d: predicates %#x\n", cases[i].reason,
                    cases[i].code, predicates(&e));
        CU_ASSERT_EQUAL(predicates(&e), cases[i].predicates);
    }
}

/* A watch ERROR event's object, already parsed. */
static void test_from_json(void)
{
    static const char text[] = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
                               "\"status\":\"Failure\",\"message\":\"too old resource version: "
                               "1201 (1500)\",\"reason\":\"Expired\",\"code\":410}";
    cJSON *obj = cJSON_Parse(text);
    CU_ASSERT_PTR_NOT_NULL(obj);
    struct kube_err e;
    CU_ASSERT_EQUAL(kube_status_from_json(obj, 200, &e), 0);
    CU_ASSERT_EQUAL(e.http, 200);
    CU_ASSERT_EQUAL(e.code, 410);
    CU_ASSERT_STRING_EQUAL(e.reason, "Expired");
    CU_ASSERT_STRING_EQUAL(e.message, "too old resource version: 1201 (1500)");
    CU_ASSERT_TRUE(kube_err_is_gone(&e));
    cJSON_Delete(obj);
    obj = cJSON_Parse("{\"kind\":\"PCIDevice\"}");
    CU_ASSERT_EQUAL(kube_status_from_json(obj, 200, &e), -EBADMSG);
    CU_ASSERT_EQUAL(e.code, 200);
    CU_ASSERT_STRING_EQUAL(e.reason, "");
    CU_ASSERT_EQUAL(predicates(&e), 0);
    cJSON_Delete(obj);
    CU_ASSERT_EQUAL(kube_status_from_json(NULL, 500, &e), -EBADMSG);
    CU_ASSERT_STRING_EQUAL(e.reason, "InternalError");
}

static void test_transport(void)
{
    struct kube_err e;
    kube_err_transport(-ECONNREFUSED, "Failed to connect to 127.0.0.1 port 6443", &e);
    CU_ASSERT_EQUAL(e.http, 0);
    CU_ASSERT_EQUAL(e.code, 0);
    CU_ASSERT_EQUAL(e.transport, -ECONNREFUSED);
    CU_ASSERT_STRING_EQUAL(e.reason, "");
    CU_ASSERT_STRING_EQUAL(e.message, "Failed to connect to 127.0.0.1 port 6443");
    CU_ASSERT_EQUAL(e.retry_after, -1);
    CU_ASSERT_EQUAL(predicates(&e), RETRYABLE);
    CU_ASSERT_EQUAL(kube_err_to_errno(&e), -EAGAIN);
    kube_err_transport(-ETIMEDOUT, NULL, &e);
    CU_ASSERT_EQUAL(e.transport, -ETIMEDOUT);
    CU_ASSERT_STRING_EQUAL(e.message, "");
    kube_err_transport(0, "odd", &e);
    CU_ASSERT_EQUAL(e.transport, -EIO);
    kube_err_transport(EPIPE, "odd", &e);
    CU_ASSERT_EQUAL(e.transport, -EIO);
    char long_message[3000];
    memset(long_message, 'm', sizeof(long_message) - 1);
    long_message[sizeof(long_message) - 1] = '\0';
    kube_err_transport(-ECONNRESET, long_message, &e);
    CU_ASSERT_EQUAL(strlen(e.message), KUBE_ERR_MESSAGE_MAX - 1);
}

static void test_init_and_errno(void)
{
    struct kube_err e;
    memset(&e, 0x5a, sizeof(e));
    kube_err_init(&e);
    CU_ASSERT_EQUAL(e.http, 0);
    CU_ASSERT_EQUAL(e.code, 0);
    CU_ASSERT_STRING_EQUAL(e.reason, "");
    CU_ASSERT_STRING_EQUAL(e.message, "");
    CU_ASSERT_EQUAL(e.retry_after, -1);
    CU_ASSERT_EQUAL(e.transport, 0);
    CU_ASSERT_EQUAL(predicates(&e), 0);
    CU_ASSERT_EQUAL(kube_err_to_errno(&e), -EIO);
    /* The order: not found before retryable, conflict before retryable. */
    static const struct {
        const char *reason;
        int code;
        int err;
    } cases[] = {
            {"NotFound", 404, -ENOENT},
            {"AlreadyExists", 409, -EEXIST},
            {"Conflict", 409, -ESTALE},
            {"", 409, -ESTALE},
            {"TooManyRequests", 429, -EAGAIN},
            {"Forbidden", 429, -EAGAIN},
            {"Unauthorized", 401, -EACCES},
            {"Forbidden", 403, -EACCES},
            {"Invalid", 422, -EINVAL},
            {"BadRequest", 400, -EINVAL},
            {"Expired", 410, -EIO},
            {"MethodNotAllowed", 405, -EIO},
            {"", 200, -EIO},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        kube_err_init(&e);
        e.http = cases[i].code;
        e.code = cases[i].code;
        snprintf(e.reason, sizeof(e.reason), "%s", cases[i].reason);
        CU_ASSERT_EQUAL(kube_err_to_errno(&e), cases[i].err);
    }
}

static CU_TestInfo tests[] = {
        {"404 not found", test_not_found},
        {"409 conflict (stale resourceVersion)", test_conflict_stale_resource_version},
        {"409 already exists", test_already_exists},
        {"410 expired", test_expired},
        {"429 with retryAfterSeconds", test_too_many_requests},
        {"429 with only the header", test_too_many_requests_header_only},
        {"422 invalid with causes", test_invalid_with_causes},
        {"403 forbidden and 401 unauthorized", test_forbidden_and_unauthorized},
        {"500 server timeout", test_server_timeout},
        {"502 html from a proxy", test_proxy_html},
        {"empty body", test_empty_body},
        {"json that is not a status", test_json_not_a_status},
        {"length honoured", test_length_honoured},
        {"huge message truncated", test_huge_message_truncated},
        {"code missing or odd", test_code_missing_or_odd},
        {"retryAfterSeconds", test_retry_after_seconds},
        {"reason before code", test_reason_before_code},
        {"from parsed json", test_from_json},
        {"transport errors", test_transport},
        {"init and errno", test_init_and_errno},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo status_suites[] = {
        {"status", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
