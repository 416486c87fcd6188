/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/integration/kubetool.c - drives src/kube against a real API server for the
 * integration tests (test_kube.sh). Built with the sanitizers as build/asan/kubetool.
 *
 *   kubetool crud KUBECONFIG NAME
 *       create/get/merge-patch/status-patch/stale update/delete with preconditions of the
 *       PCIDevice NAME; prints "ok <step>" per step, exits 1 at the first unexpected result.
 *   kubetool get KUBECONFIG NAME
 *       one GET of the PCIDevice NAME; prints "ok get" and exits 0, or prints the error as
 *       "FAIL get: http=... reason=... message=..." on stderr and exits 1.
 *   kubetool informer KUBECONFIG DIR [LABEL_SELECTOR [FIELD_SELECTOR]]  (LIST page size from
 *       $KUBETOOL_PAGE_SIZE, default 500; each WATCH's timeoutSeconds from
 *       $KUBETOOL_WATCH_TIMEOUT, default random in [300, 600); only apiVersion, kind and
 *       metadata kept with $KUBETOOL_METADATA_ONLY=1)
 *       runs a PCIDevice informer; appends "ADD|UPDATE|DELETE <key> <rv> keys=<the object's
 *       top-level keys, comma-separated>" to DIR/events,
 *       writes DIR/store ("<key> <rv>" sorted lines, then a "# stats ..." line) on SIGUSR1 and
 *       at exit (SIGTERM), DIR/synced once synced, and DIR/timing with the microseconds
 *       between an object's creationTimestamp-carrying annotation and the handler.
 *   kubetool events KUBECONFIG NAME
 *       records the same Warning about PCIDevice NAME five times and a Normal one once, with
 *       a 0.5 s flush interval, then waits for the writes and prints the recorder's counters.
 *   kubetool leader KUBECONFIG NAMESPACE LEASE IDENTITY STATEFILE
 *       campaigns for LEASE; writes "leader" or "follower" to STATEFILE on each transition;
 *       on SIGTERM releases the Lease and exits 0.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <ev.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/log.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/events.h"
#include "kube/http.h"
#include "kube/informer.h"
#include "kube/leader.h"
#include "kube/status.h"

struct ctx {
    struct ev_loop *loop;
    struct kube_http *http;
    const char *name;
    char *uid;
    char *rv;
    int step;
    int failed;
    /* informer */
    struct kube_informer *inf;
    const char *dir;
    FILE *events;
    bool synced_written;
};

/* --- crud ------------------------------------------------------------------------------------ */

static void crud_next(struct ctx *c);

static void fail(struct ctx *c, const char *what, const struct kube_err *err)
{
    fprintf(stderr, "FAIL %s: http=%d reason=%s message=%s\n", what, err ? err->http : 0,
            err ? err->reason : "", err ? err->message : "");
    c->failed = 1;
    ev_break(c->loop, EVBREAK_ALL);
}

static void keep_meta(struct ctx *c, const cJSON *obj)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
    const cJSON *uid = cJSON_GetObjectItemCaseSensitive(meta, "uid");
    const cJSON *rv = cJSON_GetObjectItemCaseSensitive(meta, "resourceVersion");
    if (cJSON_IsString(uid)) {
        free(c->uid);
        c->uid = strdup(uid->valuestring);
    }
    if (cJSON_IsString(rv)) {
        free(c->rv);
        c->rv = strdup(rv->valuestring);
    }
}

static const char *status_str(const cJSON *obj, const char *field)
{
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(obj, "status");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(st, field);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Each step checks the previous step's outcome, then starts the next request. */
static void on_step(const struct kube_err *err, const cJSON *obj, void *userdata)
{
    struct ctx *c = userdata;
    static const char *const names[] = {
            "create",
            "get",
            "merge patch labels",
            "status patch",
            "get status",
            "stale update (conflict)",
            "delete wrong uid (conflict)",
            "json patch (test+replace)",
            "json patch with a failing test (invalid)",
            "delete",
            "get after delete (not found)",
    };
    int s = c->step;
    if (s < 0 || (size_t)s >= sizeof(names) / sizeof(names[0]))
        return fail(c, "step out of range", NULL);
    bool want_conflict = s == 5 || s == 6;
    bool want_not_found = s == 10;
    bool want_invalid = s == 8;
    if (want_invalid && !(err && (kube_err_is_invalid(err) || kube_err_is_conflict(err))))
        return fail(c, names[s], err);
    if (want_conflict && !(err && kube_err_is_conflict(err)))
        return fail(c, names[s], err);
    if (want_not_found && !(err && kube_err_is_not_found(err)))
        return fail(c, names[s], err);
    if (!want_conflict && !want_not_found && !want_invalid && err)
        return fail(c, names[s], err);
    if (s == 4 &&
        (!status_str(obj, "address") || strcmp(status_str(obj, "address"), "0000:00:1f.6")))
        return fail(c, "status address read back", NULL);
    if (obj)
        keep_meta(c, obj);
    printf("ok %s\n", names[s]);
    c->step++;
    crud_next(c);
}

static cJSON *device_json(const char *name, const char *rv)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "apiVersion", "devices.harvesterhci.io/v1beta1");
    cJSON_AddStringToObject(o, "kind", "PCIDevice");
    cJSON *meta = cJSON_AddObjectToObject(o, "metadata");
    cJSON_AddStringToObject(meta, "name", name);
    if (rv)
        cJSON_AddStringToObject(meta, "resourceVersion", rv);
    return o;
}

static void crud_next(struct ctx *c)
{
    const struct kube_resource *r = &kube_res_pcidevices;
    char status[512];
    (void)snprintf(status, sizeof(status),
                   "{\"status\":{\"address\":\"0000:00:1f.6\",\"vendorId\":\"8086\","
                   "\"deviceId\":\"0d4c\",\"classId\":\"0200\",\"nodeName\":\"%.*s\"}}",
                   (int)(strlen(c->name) - 10), c->name);
    cJSON *o = NULL;
    int e = 0;
    switch (c->step) {
    case 0:
        o = device_json(c->name, NULL);
        e = kube_client_create(c->http, r, NULL, o, on_step, c);
        break;
    case 1:
        e = kube_client_get(c->http, r, NULL, c->name, on_step, c);
        break;
    case 2:
        e = kube_client_patch(c->http, r, NULL, c->name, KUBE_PATCH_MERGE,
                              "{\"metadata\":{\"labels\":{\"step\":\"2\"}}}", false, on_step, c);
        break;
    case 3:
        e = kube_client_patch(c->http, r, NULL, c->name, KUBE_PATCH_MERGE, status, true, on_step,
                              c);
        break;
    case 4:
        e = kube_client_get(c->http, r, NULL, c->name, on_step, c);
        break;
    case 5: /* the object changed since "1": a PUT with that old resourceVersion must conflict */
        o = device_json(c->name, "1");
        e = kube_client_update(c->http, r, NULL, o, false, on_step, c);
        break;
    case 6:
        e = kube_client_delete(c->http, r, NULL, c->name, "00000000-0000-0000-0000-000000000000",
                               NULL, on_step, c);
        break;
    case 7: /* RFC 6902: the test op guards the replace */
        e = kube_client_patch(c->http, r, NULL, c->name, KUBE_PATCH_JSON,
                              "[{\"op\":\"test\",\"path\":\"/metadata/labels/step\","
                              "\"value\":\"2\"},{\"op\":\"replace\",\"path\":"
                              "\"/metadata/labels/step\",\"value\":\"7\"}]",
                              false, on_step, c);
        break;
    case 8: /* the label is 7 now: the test op fails and nothing changes */
        e = kube_client_patch(c->http, r, NULL, c->name, KUBE_PATCH_JSON,
                              "[{\"op\":\"test\",\"path\":\"/metadata/labels/step\","
                              "\"value\":\"2\"},{\"op\":\"remove\",\"path\":"
                              "\"/metadata/labels/step\"}]",
                              false, on_step, c);
        break;
    case 9:
        e = kube_client_delete(c->http, r, NULL, c->name, c->uid, NULL, on_step, c);
        break;
    case 10:
        e = kube_client_get(c->http, r, NULL, c->name, on_step, c);
        break;
    default:
        ev_break(c->loop, EVBREAK_ALL);
    }
    cJSON_Delete(o);
    if (e < 0)
        fail(c, "start request", NULL);
}

static void on_get(const struct kube_err *err, const cJSON *obj, void *userdata)
{
    struct ctx *c = userdata;
    (void)obj;
    if (err)
        return fail(c, "get", err);
    printf("ok get\n");
    ev_break(c->loop, EVBREAK_ALL);
}

static int run_get(struct ctx *c, const char *name)
{
    if (kube_client_get(c->http, &kube_res_pcidevices, NULL, name, on_get, c) < 0)
        return 1;
    ev_run(c->loop, 0);
    return c->failed;
}

/* --- informer -------------------------------------------------------------------------------- */

static const char *rv_of(const cJSON *obj)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
    const cJSON *rv = cJSON_GetObjectItemCaseSensitive(meta, "resourceVersion");
    return cJSON_IsString(rv) ? rv->valuestring : "?";
}

/* Microseconds since the epoch written by the test into annotation "hostdevd.test/sent-us". */
static void note_latency(struct ctx *c, const cJSON *obj)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
    const cJSON *ann = cJSON_GetObjectItemCaseSensitive(meta, "annotations");
    const cJSON *sent = cJSON_GetObjectItemCaseSensitive(ann, "hostdevd.test/sent-us");
    if (!cJSON_IsString(sent))
        return;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    long long now = (long long)tv.tv_sec * 1000000 + tv.tv_usec;
    char *end;
    long long t = strtoll(sent->valuestring, &end, 10);
    char path[4096];
    (void)snprintf(path, sizeof(path), "%s/timing", c->dir);
    FILE *f = fopen(path, "ae");
    if (f) {
        fprintf(f, "%lld\n", now - t);
        fclose(f);
    }
}

static void log_event(struct ctx *c, const char *what, const char *key, const cJSON *obj)
{
    fprintf(c->events, "%s %s %s keys=", what, key, rv_of(obj));
    for (const cJSON *k = obj ? obj->child : NULL; k; k = k->next)
        fprintf(c->events, "%s%s", k->string, k->next ? "," : "");
    fprintf(c->events, "\n");
    fflush(c->events);
}

static void on_echoed(const struct kube_err *err, const cJSON *obj, void *userdata)
{
    (void)obj;
    (void)userdata;
    if (err)
        log_error("Echo patch failed", KV_INT("http", err->http), KV_STR("reason", err->reason));
}

/* An object annotated hostdevd.test/echo gets label echoed=true from inside the handler, which
 * runs within curl's write callback: requests started there must be deferred, not refused. */
static void echo(struct ctx *c, const char *key, const cJSON *obj)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
    const cJSON *ann = cJSON_GetObjectItemCaseSensitive(meta, "annotations");
    if (!cJSON_GetObjectItemCaseSensitive(ann, "hostdevd.test/echo"))
        return;
    if (kube_client_patch(c->http, &kube_res_pcidevices, NULL, key, KUBE_PATCH_MERGE,
                          "{\"metadata\":{\"labels\":{\"echoed\":\"true\"}}}", false, on_echoed,
                          c) < 0)
        log_error("Cannot start echo patch", KV_STR("key", key));
}

static void on_add(const char *key, const cJSON *obj, void *userdata)
{
    log_event(userdata, "ADD", key, obj);
    note_latency(userdata, obj);
    echo(userdata, key, obj);
}

static void on_update(const char *key, const cJSON *old, const cJSON *obj, void *userdata)
{
    (void)old;
    log_event(userdata, "UPDATE", key, obj);
}

static void on_delete(const char *key, const cJSON *obj, void *userdata)
{
    log_event(userdata, "DELETE", key, obj);
}

static void on_error(const struct kube_err *err, void *userdata)
{
    (void)userdata;
    log_warning("Informer request failed", KV_INT("http", err->http), KV_STR("reason", err->reason),
                KV_STR("message", err->message), KV_ERRNO(err->transport ? err->transport : -EIO));
}

static void on_skip(const char *what, void *userdata)
{
    (void)userdata;
    log_warning("Informer skipped an object", KV_STR("what", what));
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void dump_store(struct ctx *c)
{
    size_t n = kube_informer_size(c->inf), i = 0, pos = 0;
    char **lines = calloc(n ? n : 1, sizeof(*lines));
    const char *key;
    const cJSON *obj;
    if (!lines)
        return;
    while (i < n && kube_informer_next(c->inf, &pos, &key, &obj)) {
        struct buf b;
        buf_init(&b, 1024);
        (void)buf_printf(&b, "%s %s", key, rv_of(obj));
        lines[i++] = buf_take(&b);
    }
    qsort(lines, i, sizeof(*lines), cmp_str);
    char path[4096], tmp[4200];
    (void)snprintf(path, sizeof(path), "%s/store", c->dir);
    (void)snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "we");
    struct kube_informer_stats st;
    kube_informer_get_stats(c->inf, &st);
    for (size_t j = 0; f && j < i; j++)
        fprintf(f, "%s\n", lines[j]);
    if (f) {
        fprintf(f,
                "# stats lists=%lu relists_gone=%lu watches=%lu watch_restarts=%lu "
                "events=%lu bookmarks=%lu errors=%lu skipped=%lu\n",
                st.lists, st.relists_gone, st.watches, st.watch_restarts, st.events, st.bookmarks,
                st.errors, st.skipped);
        fclose(f);
        (void)rename(tmp, path);
    }
    for (size_t j = 0; j < i; j++)
        free(lines[j]);
    free(lines);
}

static void on_usr1(struct ev_loop *loop, ev_signal *w, int revents)
{
    (void)loop;
    (void)revents;
    dump_store(w->data);
}

static void on_term(struct ev_loop *loop, ev_signal *w, int revents)
{
    (void)w;
    (void)revents;
    ev_break(loop, EVBREAK_ALL);
}

static void on_check(struct ev_loop *loop, ev_prepare *w, int revents)
{
    struct ctx *c = w->data;
    (void)loop;
    (void)revents;
    if (!c->synced_written && kube_informer_has_synced(c->inf)) {
        char path[4096];
        (void)snprintf(path, sizeof(path), "%s/synced", c->dir);
        FILE *f = fopen(path, "we");
        if (f)
            fclose(f);
        c->synced_written = true;
    }
}

static int env_int(const char *name)
{
    const char *s = getenv(name);
    return s ? (int)strtol(s, NULL, 10) : 0;
}

static int run_informer(struct ctx *c, const char *label_selector, const char *field_selector)
{
    char path[4096];
    (void)snprintf(path, sizeof(path), "%s/events", c->dir);
    c->events = fopen(path, "ae");
    if (!c->events)
        return 1;
    struct kube_informer_config cfg = {
            .resource = &kube_res_pcidevices,
            .label_selector = label_selector && label_selector[0] ? label_selector : NULL,
            .field_selector = field_selector,
            .page_size = env_int("KUBETOOL_PAGE_SIZE"),
            .watch_timeout = env_int("KUBETOOL_WATCH_TIMEOUT"),
            .metadata_only = env_int("KUBETOOL_METADATA_ONLY") == 1,
            .handlers = {.on_add = on_add,
                         .on_update = on_update,
                         .on_delete = on_delete,
                         .on_error = on_error,
                         .on_skip = on_skip},
            .userdata = c,
    };
    c->inf = kube_informer_new(c->loop, c->http, &cfg);
    ev_signal usr1, term, intr;
    ev_prepare check;
    ev_signal_init(&usr1, on_usr1, SIGUSR1);
    usr1.data = c;
    ev_signal_init(&term, on_term, SIGTERM);
    ev_signal_init(&intr, on_term, SIGINT);
    ev_prepare_init(&check, on_check);
    check.data = c;
    ev_signal_start(c->loop, &usr1);
    ev_signal_start(c->loop, &term);
    ev_signal_start(c->loop, &intr);
    ev_prepare_start(c->loop, &check);
    if (!c->inf || kube_informer_start(c->inf) < 0)
        return 1;
    ev_run(c->loop, 0);
    dump_store(c);
    ev_signal_stop(c->loop, &usr1);
    ev_signal_stop(c->loop, &term);
    ev_signal_stop(c->loop, &intr);
    ev_prepare_stop(c->loop, &check);
    c->inf = kube_informer_free(c->inf);
    fclose(c->events);
    return 0;
}

/* --- leader election ------------------------------------------------------------------------ */

static const char *state_file;

static void write_state(const char *state)
{
    char tmp[4200];
    (void)snprintf(tmp, sizeof(tmp), "%s.tmp", state_file);
    FILE *f = fopen(tmp, "we");
    if (!f)
        return;
    fprintf(f, "%s\n", state);
    fclose(f);
    (void)rename(tmp, state_file);
}

static void on_started(void *userdata)
{
    (void)userdata;
    write_state("leader");
}

static void on_stopped(void *userdata)
{
    (void)userdata;
    write_state("follower");
}

static void on_released(void *userdata)
{
    ev_break(userdata, EVBREAK_ALL);
}

static void on_term_leader(struct ev_loop *loop, ev_signal *w, int revents)
{
    (void)revents;
    ev_signal_stop(loop, w);
    kube_leader_release(w->data, on_released, loop);
}

static int run_leader(struct ctx *c, char **argv)
{
    struct kube_leader_config cfg = {
            .namespace = argv[3],
            .name = argv[4],
            .identity = argv[5],
            .on_started_leading = on_started,
            .on_stopped_leading = on_stopped,
    };
    state_file = argv[6];
    write_state("follower");
    struct kube_leader *l = kube_leader_new(c->loop, c->http, &cfg);
    if (!l)
        return 2;
    ev_signal term;
    ev_signal_init(&term, on_term_leader, SIGTERM);
    term.data = l;
    ev_signal_start(c->loop, &term);
    (void)kube_leader_start(l);
    ev_run(c->loop, 0);
    ev_signal_stop(c->loop, &term);
    write_state("released");
    kube_leader_free(l);
    return 0;
}

/* --- events --------------------------------------------------------------------------------- */

static void on_events_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)revents;
    struct kube_recorder *r = w->data;
    kube_recorder_flush(r); /* a count still unwritten is written now, and waited for */
    if (kube_recorder_in_flight(r) == 0) {
        ev_break(loop, EVBREAK_ALL);
        return;
    }
    ev_timer_again(loop, w);
}

static int run_events(struct ctx *c, const char *name)
{
    struct kube_recorder_config cfg = {
            .controller = "hostdevd.io/kubetool",
            .instance = "kubetool-test",
            .flush_interval = 0.5,
    };
    struct kube_recorder *r = kube_recorder_new(c->loop, c->http, &cfg);
    struct kube_event_ref ref = {
            .api_version = "devices.harvesterhci.io/v1beta1", .kind = "PCIDevice", .name = name};
    int e = r ? 0 : -ENOMEM;
    for (int i = 0; e == 0 && i < 5; i++)
        e = kube_recorder_emit(r, &ref, true, "BindFailed", "Bind",
                               "vfio-pci did not take the device");
    if (e == 0)
        e = kube_recorder_emit(r, &ref, false, "Bound", "Bind", "bound to vfio-pci");
    ev_timer t;
    ev_timer_init(&t, on_events_timer, 2.0, 0.5);
    t.data = r;
    ev_timer_start(c->loop, &t);
    if (e == 0)
        ev_run(c->loop, 0);
    ev_timer_stop(c->loop, &t);
    struct kube_recorder_stats st = {0};
    if (r)
        kube_recorder_get_stats(r, &st);
    printf("emitted=%lu created=%lu series=%lu failed=%lu\n", st.emitted, st.created, st.series,
           st.failed);
    kube_recorder_free(r);
    return e < 0 || st.failed ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: kubetool crud KUBECONFIG NAME | informer KUBECONFIG DIR [SEL]\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    struct kube_config cfg = {0};
    struct err err = {0};
    int e = kube_config_load_kubeconfig(argv[2], NULL, &cfg, &err);
    if (e < 0) {
        log_error("Cannot load kubeconfig", KV_STR("path", argv[2]), KV_STR("why", err.msg));
        return 2;
    }
    struct ctx c = {.loop = EV_DEFAULT};
    c.http = kube_http_new(c.loop, &cfg);
    int rc = 2;
    if (c.http && strcmp(argv[1], "crud") == 0) {
        c.name = argv[3];
        crud_next(&c);
        ev_run(c.loop, 0);
        rc = c.failed;
        struct kube_http_stats st;
        kube_http_get_stats(c.http, &st);
        printf("responses %lu, over HTTP/2 %lu\n", st.requests - st.failed, st.http2);
    } else if (c.http && strcmp(argv[1], "get") == 0) {
        rc = run_get(&c, argv[3]);
    } else if (c.http && strcmp(argv[1], "events") == 0) {
        rc = run_events(&c, argv[3]);
    } else if (c.http && strcmp(argv[1], "leader") == 0 && argc == 7) {
        rc = run_leader(&c, argv);
    } else if (c.http && strcmp(argv[1], "informer") == 0) {
        c.dir = argv[3];
        rc = run_informer(&c, argc > 4 ? argv[4] : NULL, argc > 5 ? argv[5] : NULL);
    }
    c.http = kube_http_free(c.http);
    free(c.uid);
    free(c.rv);
    kube_config_done(&cfg);
    ev_loop_destroy(c.loop);
    return rc;
}
