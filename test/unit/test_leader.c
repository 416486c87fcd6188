/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_leader.c - leader election (kube/leader.c) at its edges, against a fake Lease
 * API served on loopback in this process (plain HTTP/1.1 on the same libev loop: GET, POST and
 * conditional PUT of one Lease, with failures and unanswered requests on demand) and a fake
 * clock that moves one retry period per request, so the deadlines are exact whatever the
 * machine's load:
 *  - one failed renewal right after a good one does not end leadership;
 *  - renewals failing for the renew deadline end it at once: no later than the deadline plus
 *    one retry period, so before the Lease can expire for the other candidates (two leaders);
 *  - a leader freed or released with a request in flight that is never answered is gone at
 *    once, many times over (LeakSanitizer in the unit run; the controller's exit in
 *    test/integration/test_controller.sh leaked this way).
 * The exchanges with a real API server are in test/integration/test_kube.sh.
 */
#include <CUnit/CUnit.h>
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <ev.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "kube/config.h"
#include "kube/http.h"
#include "kube/leader.h"

/* Times in fake seconds that add up exactly in binary. */
#define RETRY    (1.0 / 64)
#define DEADLINE (8 * RETRY)
#define DURATION (16 * RETRY)
#define EPS      1e-9
#define LEASE    "/apis/coordination.k8s.io/v1/namespaces/ns/leases/lease"

struct conn {
    int fd;
    ev_io w;
    char in[16384];
    size_t len;
    bool held;
    struct fake *f;
    struct conn *next;
};

/* The fake API server and clock. */
struct fake {
    struct ev_loop *loop;
    int lfd;
    int port;
    ev_io accept_w;
    struct conn *conns;
    cJSON *lease; /* the stored Lease, or NULL */
    int rv;
    double now;       /* the fake clock */
    int fail;         /* answer 500 to the next `fail` requests; -1: to all */
    double jump;      /* the clock jumps this far at the next failed request (a stalled process) */
    int hold;         /* leave the next `hold` requests unanswered */
    int requests;     /* received */
    int gets;         /* GETs received */
    int held;         /* left unanswered */
    int renewed;      /* successful PUTs */
    double last_good; /* fake time of the last successful PUT */
    /* what the leader reported */
    int started, stopped, released;
    double started_at, stopped_at;
};

static struct fake F;

static double fake_now(void *userdata)
{
    return ((struct fake *)userdata)->now;
}

static const struct clock fake_clock = {.now = fake_now, .userdata = &F};

static void conn_close(struct conn *c)
{
    struct conn **p = &c->f->conns;
    while (*p != c)
        p = &(*p)->next;
    *p = c->next;
    ev_io_stop(c->f->loop, &c->w);
    close(c->fd);
    free(c);
}

static void reply(struct conn *c, int code, const char *body)
{
    char head[256];
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     code, strlen(body));
    CU_ASSERT(write(c->fd, head, (size_t)n) == n);
    CU_ASSERT(write(c->fd, body, strlen(body)) == (ssize_t)strlen(body));
}

static void reply_status(struct conn *c, int code, const char *reason)
{
    char body[256];
    (void)snprintf(body, sizeof(body),
                   "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                   "\"reason\":\"%s\",\"code\":%d}",
                   reason, code);
    reply(c, code, body);
}

static void reply_lease(struct conn *c, int code)
{
    char *s = cJSON_PrintUnformatted(F.lease);
    reply(c, code, s);
    free(s);
}

/* Stores `body` as the Lease with the next resourceVersion. */
static void store(cJSON *body)
{
    char rv[16];
    (void)snprintf(rv, sizeof(rv), "%d", ++F.rv);
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(body, "metadata");
    cJSON_DeleteItemFromObjectCaseSensitive(meta, "resourceVersion");
    cJSON_AddStringToObject(meta, "resourceVersion", rv);
    cJSON_Delete(F.lease);
    F.lease = body;
}

static const char *rv_of(const cJSON *o)
{
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(o, "metadata"), "resourceVersion"));
}

static void serve(struct conn *c, const char *method, const char *path, const char *body)
{
    F.requests++;
    F.gets += strcmp(method, "GET") == 0;
    F.now += RETRY;
    if (F.hold > 0) {
        F.hold--;
        F.held++;
        c->held = true;
        return;
    }
    if (F.fail != 0) {
        F.fail -= F.fail > 0;
        F.now += F.jump;
        F.jump = 0;
        reply_status(c, 500, "InternalError");
    } else if (strcmp(method, "GET") == 0) {
        if (F.lease)
            reply_lease(c, 200);
        else
            reply_status(c, 404, "NotFound");
    } else if (strcmp(method, "POST") == 0 && !F.lease) {
        store(cJSON_Parse(body));
        reply_lease(c, 201);
    } else if (strcmp(method, "PUT") == 0 && strcmp(path, LEASE) == 0 && F.lease) {
        cJSON *o = cJSON_Parse(body);
        if (!o || !rv_of(o) || strcmp(rv_of(o), rv_of(F.lease)) != 0) {
            cJSON_Delete(o);
            reply_status(c, 409, "Conflict");
            return;
        }
        store(o);
        F.renewed++;
        F.last_good = F.now;
        reply_lease(c, 200);
    } else {
        reply_status(c, 409, "AlreadyExists");
    }
}

/* Serves the request in `c` once it is whole; returns true when it was. */
static bool try_serve(struct conn *c)
{
    c->in[c->len] = '\0';
    char *end = strstr(c->in, "\r\n\r\n");
    if (!end)
        return false;
    size_t body_len = 0;
    for (char *h = strstr(c->in, "\r\n"); h && h < end; h = strstr(h + 2, "\r\n"))
        if (strncasecmp(h + 2, "content-length:", 15) == 0)
            body_len = strtoul(h + 17, NULL, 10);
    if ((size_t)(c->in + c->len - (end + 4)) < body_len)
        return false;
    char method[8] = "", path[256] = "";
    CU_ASSERT_EQUAL(sscanf(c->in, "%7s %255s", method, path), 2);
    serve(c, method, path, end + 4);
    return true;
}

static void on_conn(struct ev_loop *loop, ev_io *w, int revents)
{
    struct conn *c = w->data;
    (void)loop;
    (void)revents;
    ssize_t n = read(c->fd, c->in + c->len, sizeof(c->in) - 1 - c->len);
    if (n <= 0) { /* the client went (a cancelled request's connection among them) */
        conn_close(c);
        return;
    }
    c->len += (size_t)n;
    if (!c->held && try_serve(c) && !c->held)
        conn_close(c);
}

static void on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)revents;
    int fd = accept4(w->fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    struct conn *c = calloc(1, sizeof(*c));
    if (!c) {
        close(fd);
        return;
    }
    *c = (struct conn){.fd = fd, .f = &F, .next = F.conns};
    F.conns = c;
    ev_io_init(&c->w, on_conn, fd, EV_READ);
    c->w.data = c;
    ev_io_start(loop, &c->w);
}

static void fake_start(void)
{
    F = (struct fake){.loop = ev_loop_new(EVFLAG_AUTO), .now = 1000};
    F.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    CU_ASSERT_EQUAL_FATAL(bind(F.lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    CU_ASSERT_EQUAL_FATAL(listen(F.lfd, 64), 0);
    CU_ASSERT_EQUAL_FATAL(getsockname(F.lfd, (struct sockaddr *)&a, &len), 0);
    F.port = ntohs(a.sin_port);
    ev_io_init(&F.accept_w, on_accept, F.lfd, EV_READ);
    ev_io_start(F.loop, &F.accept_w);
}

static void fake_stop(void)
{
    for (struct conn *c = F.conns, *next; c; c = next) {
        next = c->next;
        ev_io_stop(F.loop, &c->w);
        close(c->fd);
        free(c);
    }
    F.conns = NULL;
    ev_io_stop(F.loop, &F.accept_w);
    close(F.lfd);
    cJSON_Delete(F.lease);
    ev_loop_destroy(F.loop);
}

static void on_started(void *userdata)
{
    (void)userdata;
    F.started++;
    F.started_at = F.now;
}

static void on_stopped(void *userdata)
{
    (void)userdata;
    F.stopped++;
    F.stopped_at = F.now;
}

static void on_released(void *userdata)
{
    (void)userdata;
    F.released++;
}

struct client {
    struct kube_config cfg;
    struct kube_http *http;
    struct kube_leader *leader;
};

static void client_new(struct client *c)
{
    char url[64];
    (void)snprintf(url, sizeof(url), "http://127.0.0.1:%d", F.port);
    c->cfg = (struct kube_config){.server = strdup(url)};
    c->http = kube_http_new(F.loop, &c->cfg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c->http);
    struct kube_leader_config lc = {.namespace = "ns",
                                    .name = "lease",
                                    .identity = "me",
                                    .lease_duration = DURATION,
                                    .renew_deadline = DEADLINE,
                                    .retry_period = RETRY,
                                    .on_started_leading = on_started,
                                    .on_stopped_leading = on_stopped,
                                    .clock = &fake_clock};
    c->leader = kube_leader_new(F.loop, c->http, &lc);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c->leader);
    CU_ASSERT_EQUAL(kube_leader_start(c->leader), 0);
}

static void client_free(struct client *c)
{
    c->leader = kube_leader_free(c->leader);
    c->http = kube_http_free(c->http);
    kube_config_done(&c->cfg);
}

static void on_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)w;
    (void)revents;
}

/* Runs the loop until `*count` reaches `want` or `seconds` of real time pass. */
static bool run_for(const int *count, int want, double seconds)
{
    ev_timer tick;
    ev_timer_init(&tick, on_tick, 0.01, 0.01);
    ev_timer_start(F.loop, &tick);
    double end = ev_time() + seconds;
    while (*count < want && ev_time() < end)
        ev_run(F.loop, EVRUN_ONCE);
    ev_timer_stop(F.loop, &tick);
    return *count >= want;
}

/* Runs the loop until `*count` reaches `want` (or 10 s of real time pass: a failure). */
static bool run_until(const int *count, int want)
{
    return run_for(count, want, 10);
}

/* A leader that has renewed twice. */
static void leading(struct client *c)
{
    fake_start();
    client_new(c);
    CU_ASSERT_FATAL(run_until(&F.renewed, 2));
    CU_ASSERT_EQUAL(F.started, 1);
    CU_ASSERT(kube_leader_is_leader(c->leader));
}

static void test_one_failed_round_keeps_leading(void)
{
    struct client c;
    leading(&c);
    /* the next renewal fails, and so does the GET it falls back to: one failed round */
    F.fail = 2;
    int before = F.renewed;
    CU_ASSERT(run_until(&F.renewed, before + 3));
    CU_ASSERT_EQUAL(F.fail, 0);
    CU_ASSERT_EQUAL(F.stopped, 0);
    CU_ASSERT_EQUAL(F.started, 1);
    CU_ASSERT(kube_leader_is_leader(c.leader));
    client_free(&c);
    fake_stop();
}

static void test_failing_for_the_deadline_steps_down(void)
{
    struct client c;
    leading(&c);
    F.fail = -1;
    CU_ASSERT_FATAL(run_until(&F.stopped, 1));
    double unrenewed = F.stopped_at - F.last_good;
    CU_ASSERT(unrenewed >= DEADLINE - EPS);
    CU_ASSERT(unrenewed <= DEADLINE + RETRY + EPS);
    CU_ASSERT(unrenewed < DURATION); /* before anyone else may take the Lease */
    CU_ASSERT(!kube_leader_is_leader(c.leader));
    /* it keeps trying, as a follower: no second stop */
    int seen = F.requests;
    CU_ASSERT(run_until(&F.requests, seen + 3));
    CU_ASSERT_EQUAL(F.stopped, 1);
    /* and leads again once the server answers */
    F.fail = 0;
    CU_ASSERT(run_until(&F.started, 2));
    client_free(&c);
    fake_stop();
}

/* Renewals failing until one period before the deadline, then the server answers again: the
 * leader renews (by a GET and a PUT) and never stops leading. */
static void test_renewed_just_before_the_deadline(void)
{
    struct client c;
    leading(&c);
    /* the optimistic PUT, its fallback GET, then one GET per round, up to deadline - 1 period */
    F.fail = (int)(DEADLINE / RETRY) - 1;
    int renewed = F.renewed;
    CU_ASSERT(run_until(&F.renewed, renewed + 2));
    CU_ASSERT_EQUAL(F.fail, 0);
    CU_ASSERT_EQUAL(F.stopped, 0);
    CU_ASSERT_EQUAL(F.started, 1);
    client_free(&c);
    fake_stop();
}

/* The deadline is measured in time, not in failed rounds: a leader whose clock shows the
 * deadline passed (the process stalled, the loop late) steps down at the first failure. */
static void test_deadline_is_time_not_rounds(void)
{
    struct client c;
    leading(&c);
    F.fail = 2;
    F.jump = DEADLINE;
    CU_ASSERT(run_until(&F.stopped, 1));
    CU_ASSERT(F.stopped_at - F.last_good >= DEADLINE - EPS);
    client_free(&c);
    fake_stop();
}

/* A Lease held by `holder`, renewed at `renew_time`, the last the other candidate wrote. */
static void held_by(const char *holder, const char *renew_time)
{
    char body[512];
    (void)snprintf(body, sizeof(body),
                   "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\","
                   "\"metadata\":{\"name\":\"lease\",\"namespace\":\"ns\"},"
                   "\"spec\":{\"holderIdentity\":\"%s\",\"leaseDurationSeconds\":1,"
                   "\"renewTime\":\"%s\"}}",
                   holder, renew_time);
    store(cJSON_Parse(body));
}

/* Fake seconds from the first request of a follower to its taking the Lease of a silent
 * holder that last renewed at `renew_time` (the wall clock's). */
static double takeover_of(const char *holder, const char *renew_time)
{
    struct client c;
    fake_start();
    held_by(holder, renew_time);
    double first = F.now + RETRY; /* the first GET moves the clock one period */
    client_new(&c);
    CU_ASSERT(run_until(&F.started, 1));
    CU_ASSERT_STRING_EQUAL(
            cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                    cJSON_GetObjectItemCaseSensitive(F.lease, "spec"), "holderIdentity")),
            "me");
    client_free(&c);
    fake_stop();
    return F.started_at - first;
}

static double takeover(const char *renew_time)
{
    return takeover_of("other", renew_time);
}

/* The wall clock's time `ago` seconds back, as a MicroTime. */
static const char *wall_ago(double ago, char *buf, size_t size)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double then = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9 - ago;
    time_t sec = (time_t)then;
    struct tm tm;
    gmtime_r(&sec, &tm);
    char date[32];
    (void)strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm);
    (void)snprintf(buf, size, "%s.%06dZ", date, (int)((then - (double)sec) * 1e6));
    return buf;
}

static void test_takes_over_a_silent_holder_after_the_lease(void)
{
    /* a renewTime that cannot be read (or is in the future: a skewed clock) is no credit: the
     * whole lease duration by our own clock, then the write (one more period) */
    CU_ASSERT_DOUBLE_EQUAL(takeover("not a time"), DURATION + RETRY, EPS);
    CU_ASSERT_DOUBLE_EQUAL(takeover("2999-01-01T00:00:00.000000Z"), DURATION + RETRY, EPS);
    /* an old renewTime is credited, by at most duration - deadline: never sooner than the old
     * leader, unable to renew, has stepped down */
    CU_ASSERT_DOUBLE_EQUAL(takeover("2020-01-01T00:00:00.250000Z"),
                           DURATION - (DURATION - DEADLINE) + RETRY, EPS);
    CU_ASSERT_DOUBLE_EQUAL(takeover("2020-01-01T00:00:00Z"), DEADLINE + RETRY, EPS);
    char ago[64]; /* half a second: more than the credit's cap, less than a second */
    CU_ASSERT_DOUBLE_EQUAL(takeover(wall_ago(0.5, ago, sizeof(ago))), DEADLINE + RETRY, EPS);
    /* a time with an offset instead of Z is not a MicroTime: no credit */
    CU_ASSERT_DOUBLE_EQUAL(takeover("2020-01-01T00:00:00.5+00:00"), DURATION + RETRY, EPS);
    /* a holder is a holder whatever its first byte (UTF-8) */
    CU_ASSERT_DOUBLE_EQUAL(takeover_of("\xc3\xbc"
                                       "ber",
                                       "not a time"),
                           DURATION + RETRY, EPS);
}

static const cJSON *spec_of(const char *field)
{
    return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(F.lease, "spec"),
                                            field);
}

static int count_keys(const cJSON *o, const char *name)
{
    int n = 0;
    const cJSON *k;
    cJSON_ArrayForEach(k, o) n += strcmp(k->string, name) == 0;
    return n;
}

/* A leader renews with one conditional PUT of what its last write returned (no GET); each write
 * sets holder, duration and renewTime once; acquireTime and leaseTransitions move only when the
 * Lease changes hands. */
static void test_renewals(void)
{
    struct client c;
    fake_start();
    held_by("other", "not a time");
    client_new(&c);
    CU_ASSERT_FATAL(run_until(&F.started, 1));
    const char *acquired = cJSON_GetStringValue(spec_of("acquireTime"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(acquired);
    char first[64];
    (void)snprintf(first, sizeof(first), "%s", acquired);
    CU_ASSERT_EQUAL(cJSON_GetNumberValue(spec_of("leaseTransitions")), 1);
    CU_ASSERT_EQUAL(cJSON_GetNumberValue(spec_of("leaseDurationSeconds")), (int)DURATION);
    int gets = F.gets, renewed = F.renewed;
    CU_ASSERT(run_until(&F.renewed, renewed + 5));
    CU_ASSERT_EQUAL(F.gets, gets);
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(F.lease, "spec");
    CU_ASSERT_EQUAL(count_keys(spec, "renewTime"), 1);
    CU_ASSERT_EQUAL(count_keys(spec, "holderIdentity"), 1);
    CU_ASSERT_EQUAL(count_keys(spec, "acquireTime"), 1);
    CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(spec_of("holderIdentity")), "me");
    CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(spec_of("acquireTime")), first);
    CU_ASSERT_EQUAL(cJSON_GetNumberValue(spec_of("leaseTransitions")), 1);
    client_free(&c);
    fake_stop();
}

static void test_bad_config_refused(void)
{
    struct kube_leader_config lc = {.namespace = "ns", .name = "lease", .identity = "me"};
    struct kube_leader *l;
    lc.lease_duration = 10, lc.renew_deadline = 10, lc.retry_period = 2;
    CU_ASSERT_PTR_NULL(l = kube_leader_new(EV_DEFAULT, NULL, &lc));
    kube_leader_free(l);
    lc.lease_duration = 15, lc.renew_deadline = 2, lc.retry_period = 2;
    CU_ASSERT_PTR_NULL(l = kube_leader_new(EV_DEFAULT, NULL, &lc));
    kube_leader_free(l);
    lc.identity = "";
    lc.renew_deadline = 10;
    CU_ASSERT_PTR_NULL(l = kube_leader_new(EV_DEFAULT, NULL, &lc));
    kube_leader_free(l);
    lc.identity = "me";
    CU_ASSERT_PTR_NOT_NULL(l = kube_leader_new(EV_DEFAULT, NULL, &lc));
    kube_leader_release(l, NULL, NULL); /* not leading, no callback wanted */
    CU_ASSERT(!kube_leader_is_leader(l));
    kube_leader_free(l);
}

static void test_owner_on_every_write(void)
{
    struct client c;
    fake_start();
    client_new(&c);
    cJSON *owner = cJSON_Parse("{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"name\":\"n\","
                               "\"uid\":\"u1\"}");
    CU_ASSERT_EQUAL(kube_leader_set_owner(c.leader, owner), 0);
    cJSON_Delete(owner);
    cJSON *not_object = cJSON_CreateString("n");
    CU_ASSERT_EQUAL(kube_leader_set_owner(c.leader, not_object), -EINVAL);
    cJSON_Delete(not_object);
    CU_ASSERT(run_until(&F.renewed, 1));
    const cJSON *refs = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(F.lease, "metadata"), "ownerReferences");
    CU_ASSERT_EQUAL(cJSON_GetArraySize(refs), 1);
    CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                                   cJSON_GetArrayItem(refs, 0), "uid")),
                           "u1");
    client_free(&c);
    fake_stop();
}

#define ROUNDS 100

static void test_freed_campaigning_with_a_request_in_flight(void)
{
    fake_start();
    for (int i = 0; i < ROUNDS; i++) {
        struct client c;
        F.hold = 1;
        int held = F.held;
        client_new(&c);
        CU_ASSERT_FATAL(run_until(&F.held, held + 1)); /* its first GET, never answered */
        client_free(&c);
    }
    CU_ASSERT_EQUAL(F.started, 0);
    fake_stop();
}

/* One request at a time: started again while its GET goes unanswered, it sends nothing more. */
static void test_one_request_at_a_time(void)
{
    struct client c;
    fake_start();
    F.hold = 1;
    client_new(&c);
    CU_ASSERT(run_until(&F.held, 1));
    CU_ASSERT_EQUAL(kube_leader_start(c.leader), 0);
    int zero = 0;
    (void)run_for(&zero, 1, 0.1);
    struct kube_http_stats st;
    kube_http_get_stats(c.http, &st);
    CU_ASSERT_EQUAL(st.requests, 1);
    CU_ASSERT_EQUAL(st.in_flight, 1);
    CU_ASSERT_EQUAL(F.requests, 1);
    client_free(&c);
    fake_stop();
}

static void test_freed_leading_with_a_renewal_in_flight(void)
{
    struct client c;
    leading(&c);
    client_free(&c);
    for (int i = 0; i < ROUNDS; i++) {
        int renewed = F.renewed;
        client_new(&c);
        CU_ASSERT_FATAL(run_until(&F.renewed, renewed + 1));
        F.hold = 1;
        int held = F.held;
        CU_ASSERT_FATAL(run_until(&F.held, held + 1)); /* the renewal, never answered */
        client_free(&c);
    }
    CU_ASSERT_EQUAL(F.stopped, 0);
    fake_stop();
}

static const char *holder(void)
{
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(F.lease, "spec"), "holderIdentity"));
}

static void test_released_with_a_renewal_in_flight(void)
{
    struct client c;
    leading(&c);
    client_free(&c);
    for (int i = 0; i < ROUNDS; i++) {
        int renewed = F.renewed, released = F.released, stopped = F.stopped;
        client_new(&c);
        CU_ASSERT_FATAL(run_until(&F.renewed, renewed + 1));
        F.hold = 1;
        int held = F.held;
        CU_ASSERT_FATAL(run_until(&F.held, held + 1));
        /* SIGTERM: the renewal is given up and the Lease released all the same */
        kube_leader_release(c.leader, on_released, NULL);
        CU_ASSERT_FATAL(run_until(&F.released, released + 1));
        CU_ASSERT_STRING_EQUAL(holder(), "");
        CU_ASSERT(!kube_leader_is_leader(c.leader));
        CU_ASSERT_EQUAL(F.stopped, stopped + 1); /* told: hostdevd_leader 0 before the exit */
        client_free(&c);
    }
    fake_stop();
}

static CU_TestInfo tests[] = {
        {"one failed renewal after a good one keeps leadership",
         test_one_failed_round_keeps_leading},
        {"renewals failing for the renew deadline end leadership, within one retry period",
         test_failing_for_the_deadline_steps_down},
        {"renewed one period before the deadline: still leading",
         test_renewed_just_before_the_deadline},
        {"the deadline is time, not failed rounds (a stalled process steps down)",
         test_deadline_is_time_not_rounds},
        {"a silent holder's Lease is taken after the lease duration, its renewTime credited",
         test_takes_over_a_silent_holder_after_the_lease},
        {"the owner set goes on every write", test_owner_on_every_write},
        {"renewals: one conditional PUT each, no GET; acquireTime kept", test_renewals},
        {"a bad configuration is refused; release without a callback", test_bad_config_refused},
        {"one request at a time (started again while a GET goes unanswered)",
         test_one_request_at_a_time},
        {"freed while campaigning, a GET unanswered: nothing left (x100)",
         test_freed_campaigning_with_a_request_in_flight},
        {"freed while leading, a renewal unanswered: nothing left (x100)",
         test_freed_leading_with_a_renewal_in_flight},
        {"released with a renewal unanswered: the Lease is released (x100)",
         test_released_with_a_renewal_in_flight},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo leader_suites[] = {
        {"leader", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
