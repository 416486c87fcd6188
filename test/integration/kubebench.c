/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/integration/kubebench.c - figures for src/kube against a real API server (make bench).
 * Built with release flags as build/release/kubebench.
 *
 *   kubebench latency KUBECONFIG N
 *       creates N PCIDevices one after another and measures, for each, the time from sending
 *       the create to the informer's add handler (and the create's own round trip).
 *   kubebench memory KUBECONFIG N
 *       creates N PCIDevices with a realistic status (32 requests in flight), then measures
 *       the informer's LIST+sync time and the resident memory it adds per cached object.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/log.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/http.h"
#include "kube/informer.h"

#define IN_FLIGHT 32

struct bench {
    struct ev_loop *loop;
    struct kube_http *http;
    struct kube_informer *inf;
    int n, next, done, failed, phase;
    double t0, *lat, *rtt;
    int sent; /* index of the create in flight */
    char label[32];
};

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kib = strtol(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return kib;
}

static void name_of(const struct bench *b, int i, char *out, size_t size)
{
    (void)snprintf(out, size, "b%s-%06d-0000001f6", b->label, i);
}

static cJSON *device(const struct bench *b, int i)
{
    char name[64];
    name_of(b, i, name, sizeof(name));
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "apiVersion", "devices.harvesterhci.io/v1beta1");
    cJSON_AddStringToObject(o, "kind", "PCIDevice");
    cJSON *meta = cJSON_AddObjectToObject(o, "metadata");
    cJSON_AddStringToObject(meta, "name", name);
    cJSON *labels = cJSON_AddObjectToObject(meta, "labels");
    cJSON_AddStringToObject(labels, "nodename", name);
    cJSON_AddStringToObject(labels, "bench", b->label);
    cJSON *ann = cJSON_AddObjectToObject(meta, "annotations");
    cJSON_AddStringToObject(ann, "harvesterhci.io/pcideviceDriver", "e1000e");
    return o;
}

static int status_patch(const struct bench *b, int i, char *out, size_t size)
{
    char name[64];
    name_of(b, i, name, sizeof(name));
    int n = snprintf(out, size,
                     "{\"status\":{\"address\":\"0000:00:1f.6\",\"vendorId\":\"8086\","
                     "\"deviceId\":\"0d4c\",\"subsystemVendorId\":\"1028\","
                     "\"subsystemDeviceId\":\"0962\",\"classId\":\"0200\",\"revision\":\"00\","
                     "\"iommuGroup\":\"11\",\"numaNode\":0,\"nodeName\":\"%.*s\","
                     "\"resourceName\":\"intel.com/ETHERNET_CONNECTION_11_I219LM\","
                     "\"description\":\"Ethernet controller: Intel Corporation Ethernet "
                     "Connection (11) I219-LM\",\"kernelDriverInUse\":\"e1000e\"}}",
                     (int)strlen(name) - 10, name);
    return n > 0 && (size_t)n < size ? 0 : -E2BIG;
}

static void populate_next(struct bench *b);

static void on_populated(const struct kube_err *err, const cJSON *obj, void *userdata)
{
    struct bench *b = userdata;
    (void)obj;
    if (err && !kube_err_is_already_exists(err)) {
        b->failed++;
        log_error("Request failed", KV_INT("http", err->http), KV_STR("reason", err->reason));
    }
    b->done++;
    populate_next(b);
}

/* Keeps IN_FLIGHT creates (phase 0) or status patches (phase 1) going. */
static void populate_next(struct bench *b)
{
    while (b->next < b->n && b->next - b->done < IN_FLIGHT) {
        int i = b->next++, e;
        if (b->phase == 0) {
            cJSON *o = device(b, i);
            e = kube_client_create(b->http, &kube_res_pcidevices, NULL, o, on_populated, b);
            cJSON_Delete(o);
        } else {
            char name[64], patch[1024];
            name_of(b, i, name, sizeof(name));
            e = status_patch(b, i, patch, sizeof(patch));
            if (e == 0)
                e = kube_client_patch(b->http, &kube_res_pcidevices, NULL, name, KUBE_PATCH_MERGE,
                                      patch, true, on_populated, b);
        }
        if (e < 0) {
            b->failed++;
            b->done++;
        }
    }
    if (b->done == b->n)
        ev_break(b->loop, EVBREAK_ONE);
}

static int populate(struct bench *b)
{
    for (b->phase = 0; b->phase < 2; b->phase++) {
        b->next = b->done = 0;
        populate_next(b);
        if (b->done < b->n)
            ev_run(b->loop, 0);
    }
    return b->failed ? -EIO : 0;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, c = *(const double *)y;
    return (a > c) - (a < c);
}

static void print_dist(const char *what, double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    printf("%s: median %.2f ms, p90 %.2f ms, max %.2f ms (n=%d)\n", what, v[n / 2] * 1e3,
           v[(n * 9) / 10] * 1e3, v[n - 1] * 1e3, n);
}

static void latency_next(struct bench *b);

static void on_created(const struct kube_err *err, const cJSON *obj, void *userdata)
{
    struct bench *b = userdata;
    (void)obj;
    if (err)
        b->failed++;
    b->rtt[b->sent] = ev_time() - b->t0;
}

static void on_add(const char *key, const cJSON *obj, void *userdata)
{
    struct bench *b = userdata;
    char want[64];
    (void)obj;
    if (b->next >= b->n)
        return;
    name_of(b, b->next, want, sizeof(want));
    if (strcmp(key, want) != 0)
        return;
    b->lat[b->next] = ev_time() - b->t0;
    b->next++;
    latency_next(b);
}

static void latency_next(struct bench *b)
{
    if (b->next >= b->n || b->failed) {
        ev_break(b->loop, EVBREAK_ALL);
        return;
    }
    cJSON *o = device(b, b->next);
    b->t0 = ev_time();
    b->sent = b->next;
    if (kube_client_create(b->http, &kube_res_pcidevices, NULL, o, on_created, b) < 0)
        b->failed++;
    cJSON_Delete(o);
}

static void on_sync_check(struct ev_loop *loop, ev_prepare *w, int revents)
{
    struct bench *b = w->data;
    (void)revents;
    if (kube_informer_has_synced(b->inf))
        ev_break(loop, EVBREAK_ONE);
}

static int start_informer(struct bench *b, bool with_add)
{
    char sel[64];
    (void)snprintf(sel, sizeof(sel), "bench=%s", b->label);
    struct kube_informer_config cfg = {
            .resource = &kube_res_pcidevices,
            .label_selector = sel,
            .handlers = {.on_add = with_add ? on_add : NULL},
            .userdata = b,
    };
    b->inf = kube_informer_new(b->loop, b->http, &cfg);
    if (!b->inf || kube_informer_start(b->inf) < 0)
        return -ENOMEM;
    ev_prepare check;
    ev_prepare_init(&check, on_sync_check);
    check.data = b;
    ev_prepare_start(b->loop, &check);
    ev_run(b->loop, 0);
    ev_prepare_stop(b->loop, &check);
    return 0;
}

static int run_latency(struct bench *b)
{
    b->lat = calloc((size_t)b->n, sizeof(double));
    b->rtt = calloc((size_t)b->n, sizeof(double));
    if (!b->lat || !b->rtt || start_informer(b, true) < 0)
        return 1;
    latency_next(b);
    ev_run(b->loop, 0);
    if (b->failed || b->next < b->n)
        return 1;
    print_dist("informer latency, create sent -> add handler", b->lat, b->n);
    print_dist("create round trip                          ", b->rtt, b->n);
    return 0;
}

static int run_memory(struct bench *b)
{
    double t = ev_time();
    if (populate(b) < 0)
        return 1;
    printf("populated %d PCIDevices with status in %.1f s\n", b->n, ev_time() - t);
    long before = rss_kib();
    t = ev_time();
    if (start_informer(b, false) < 0)
        return 1;
    double synced = ev_time() - t;
    long after = rss_kib();
    size_t cached = kube_informer_size(b->inf);
    printf("informer LIST+sync of %zu objects: %.2f s\n", cached, synced);
    printf("informer resident memory: %ld KiB before, %ld KiB after: %.0f bytes per object\n",
           before, after, cached ? (double)(after - before) * 1024.0 / (double)cached : 0.0);
    return cached == (size_t)b->n ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: kubebench latency|memory KUBECONFIG N\n");
        return 2;
    }
    struct kube_config cfg = {0};
    struct err err = {0};
    if (kube_config_load_kubeconfig(argv[2], NULL, &cfg, &err) < 0) {
        log_error("Cannot load kubeconfig", KV_STR("why", err.msg));
        return 2;
    }
    struct bench b = {.loop = EV_DEFAULT, .n = (int)strtol(argv[3], NULL, 10)};
    (void)snprintf(b.label, sizeof(b.label), "%s", argv[1]);
    b.http = kube_http_new(b.loop, &cfg);
    int rc = 2;
    if (b.http && b.n > 0 && strcmp(argv[1], "latency") == 0)
        rc = run_latency(&b);
    else if (b.http && b.n > 0 && strcmp(argv[1], "memory") == 0)
        rc = run_memory(&b);
    b.inf = kube_informer_free(b.inf);
    b.http = kube_http_free(b.http);
    free(b.lat);
    free(b.rtt);
    kube_config_done(&cfg);
    return rc;
}
