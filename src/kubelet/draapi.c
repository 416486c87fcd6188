/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubelet/draapi.c - kubelet's DRA plugin and DRA resource health API messages (draapi.h)
 * through protobuf-c and the generated kubelet/draapi.pb-c.h and kubelet/drahealth.pb-c.h.
 */
#include "kubelet/draapi.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "kubelet/draapi.pb-c.h"
#include "kubelet/drahealth.pb-c.h"
#include "kubelet/pbmsg.h"

/* An array of `n` elements of `size` (at least one, so calloc never returns NULL for 0). */
static void *array(size_t n, size_t size)
{
    return calloc(n ? n : 1, size);
}

/* The generated names are long: the package is k8s.io.kubelet.pkg.apis.dra.v1. */
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim Claim;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Device Device;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest PrepareRequest;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesRequest UnprepareRequest;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse PrepareResponse;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse__ClaimsEntry
        PrepareEntry;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourceResponse PrepareOne;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse UnprepareResponse;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse__ClaimsEntry
        UnprepareEntry;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourceResponse UnprepareOne;
#define DESC(name) (&k8s__io__kubelet__pkg__apis__dra__v1__##name##__descriptor)

/* The devices of one answer, pointing into `a` (freed by the caller). */
static int fill_devices(const struct draapi_answer *a, PrepareOne *one, Device **devs,
                        Device ***devp)
{
    *devs = array(a->n_devices, sizeof(**devs));
    *devp = ptr_array(a->n_devices);
    if (!*devs || !*devp)
        return -ENOMEM;
    for (size_t i = 0; i < a->n_devices; i++) {
        Device *d = &(*devs)[i];
        protobuf_c_message_init(DESC(device), d);
        d->n_request_names = a->devices[i].n_requests;
        d->request_names = (char **)a->devices[i].requests;
        d->pool_name = (char *)a->devices[i].pool;
        d->device_name = (char *)a->devices[i].name;
        d->n_cdi_device_ids = a->devices[i].n_cdi_ids;
        d->cdi_device_ids = (char **)a->devices[i].cdi_ids;
        (*devp)[i] = d;
    }
    one->n_devices = a->n_devices;
    one->devices = *devp;
    return 0;
}

/* Both responses map a claim's uid to its answer (`one`: n messages of `size` bytes) with the same
 * layout: entries {key, value} and the message {n_claims, claims} (checked here), so one function
 * packs either, given its descriptors. */
_Static_assert(sizeof(PrepareEntry) == sizeof(UnprepareEntry) &&
                       offsetof(PrepareEntry, key) == offsetof(UnprepareEntry, key) &&
                       offsetof(PrepareEntry, value) == offsetof(UnprepareEntry, value),
               "the claims map entries differ");
_Static_assert(sizeof(PrepareResponse) == sizeof(UnprepareResponse) &&
                       offsetof(PrepareResponse, n_claims) ==
                               offsetof(UnprepareResponse, n_claims) &&
                       offsetof(PrepareResponse, claims) == offsetof(UnprepareResponse, claims),
               "the claims responses differ");

static int pack_claims(const ProtobufCMessageDescriptor *d, const ProtobufCMessageDescriptor *entry,
                       const struct draapi_answer *a, void *one, size_t size, size_t n,
                       struct buf *out)
{
    PrepareEntry *e = array(n, sizeof(*e));
    PrepareEntry **ep = ptr_array(n);
    int r = e && ep ? 0 : -ENOMEM;
    for (size_t i = 0; r == 0 && i < n; i++) {
        protobuf_c_message_init(entry, &e[i]);
        e[i].key = (char *)a[i].uid;
        e[i].value = (PrepareOne *)((char *)one + i * size);
        ep[i] = &e[i];
    }
    PrepareResponse m;
    protobuf_c_message_init(d, &m);
    m.n_claims = n;
    m.claims = ep;
    if (r == 0)
        r = pack(&m.base, out);
    free(e);
    free(ep);
    return r;
}

int draapi_encode_prepared(const struct draapi_answer *a, size_t n, struct buf *out)
{
    PrepareOne *one = array(n, sizeof(*one));
    Device **devs = ptr_array(n);
    Device ***devp = ptr_array(n);
    int r = one && devs && devp ? 0 : -ENOMEM;
    for (size_t i = 0; r == 0 && i < n; i++) {
        protobuf_c_message_init(DESC(node_prepare_resource_response), &one[i]);
        if (a[i].error && a[i].error[0])
            one[i].error = (char *)a[i].error;
        else
            r = fill_devices(&a[i], &one[i], &devs[i], &devp[i]);
    }
    if (r == 0)
        r = pack_claims(DESC(node_prepare_resources_response),
                        DESC(node_prepare_resources_response__claims_entry), a, one, sizeof(*one),
                        n, out);
    for (size_t i = 0; devs && devp && i < n; i++) {
        free(devs[i]);
        free(devp[i]);
    }
    free(one);
    free(devs);
    free(devp);
    return r;
}

int draapi_encode_unprepared(const struct draapi_answer *a, size_t n, struct buf *out)
{
    UnprepareOne *one = array(n, sizeof(*one));
    int r = one ? 0 : -ENOMEM;
    for (size_t i = 0; r == 0 && i < n; i++) {
        protobuf_c_message_init(DESC(node_unprepare_resource_response), &one[i]);
        if (a[i].error)
            one[i].error = (char *)a[i].error;
    }
    if (r == 0)
        r = pack_claims(DESC(node_unprepare_resources_response),
                        DESC(node_unprepare_resources_response__claims_entry), a, one, sizeof(*one),
                        n, out);
    free(one);
    return r;
}

int draapi_encode_claims(const struct draapi_claim *c, size_t n, bool prepare, struct buf *out)
{
    Claim *cl = array(n, sizeof(*cl));
    Claim **cp = ptr_array(n);
    int r = cl && cp ? 0 : -ENOMEM;
    for (size_t i = 0; r == 0 && i < n; i++) {
        protobuf_c_message_init(DESC(claim), &cl[i]);
        cl[i].namespace_ = c[i].namespace_;
        cl[i].uid = c[i].uid;
        cl[i].name = c[i].name;
        cp[i] = &cl[i];
    }
    if (r == 0 && prepare) {
        PrepareRequest m;
        protobuf_c_message_init(DESC(node_prepare_resources_request), &m);
        m.n_claims = n;
        m.claims = cp;
        r = pack(&m.base, out);
    } else if (r == 0) {
        UnprepareRequest m;
        protobuf_c_message_init(DESC(node_unprepare_resources_request), &m);
        m.n_claims = n;
        m.claims = cp;
        r = pack(&m.base, out);
    }
    free(cl);
    free(cp);
    return r;
}

/* (decoding) */

void draapi_claims_done(struct draapi_claims *c)
{
    for (size_t i = 0; c->v && i < c->n; i++) {
        free(c->v[i].namespace_);
        free(c->v[i].uid);
        free(c->v[i].name);
    }
    free(c->v);
    *c = (struct draapi_claims){0};
}

/* A copy of one field of a claim, checked. */
static int copy_field(const char *what, const char *s, bool required, char **ret,
                      struct err *ret_err)
{
    size_t len = strnlen(s, DRAAPI_MAX_FIELD + 1);
    if (len > DRAAPI_MAX_FIELD)
        return err_set(ret_err, -EINVAL, "a claim's %s is longer than %d bytes", what,
                       DRAAPI_MAX_FIELD);
    if (required && len == 0)
        return err_set(ret_err, -EINVAL, "a claim has an empty %s", what);
    for (size_t i = 0; i < len; i++)
        if (s[i] == '/' || (unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return err_set(ret_err, -EINVAL, "a claim's %s holds a '/' or a control character",
                           what);
    return (*ret = strdup(s)) ? 0 : err_set(ret_err, -ENOMEM, "out of memory");
}

int draapi_decode_claims(const uint8_t *msg, size_t len, bool prepare, struct draapi_claims *ret,
                         struct err *ret_err)
{
    const char *what = prepare ? "NodePrepareResourcesRequest" : "NodeUnprepareResourcesRequest";
    const ProtobufCMessageDescriptor *d =
            prepare ? DESC(node_prepare_resources_request) : DESC(node_unprepare_resources_request);
    *ret = (struct draapi_claims){0};
    ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, len, msg);
    if (!m)
        return unpack_failed(what, ret_err);
    size_t n = prepare ? ((PrepareRequest *)m)->n_claims : ((UnprepareRequest *)m)->n_claims;
    Claim **claims = prepare ? ((PrepareRequest *)m)->claims : ((UnprepareRequest *)m)->claims;
    int r = 0;
    if (n > DRAAPI_MAX_CLAIMS)
        r = err_set(ret_err, -EINVAL, "%zu claims in one %s (at most %d)", n, what,
                    DRAAPI_MAX_CLAIMS);
    else if (!(ret->v = array(n, sizeof(*ret->v))))
        r = err_set(ret_err, -ENOMEM, "out of memory");
    for (size_t i = 0; r == 0 && i < n; i++) {
        ret->n = i + 1;
        r = copy_field("namespace", claims[i]->namespace_, true, &ret->v[i].namespace_, ret_err);
        if (r == 0)
            r = copy_field("uid", claims[i]->uid, true, &ret->v[i].uid, ret_err);
        if (r == 0)
            r = copy_field("name", claims[i]->name, true, &ret->v[i].name, ret_err);
    }
    protobuf_c_message_free_unpacked(m, NULL);
    if (r < 0)
        draapi_claims_done(ret);
    return r;
}

void draapi_results_free(struct draapi_result *r, size_t n)
{
    for (size_t i = 0; r && i < n; i++) {
        for (size_t j = 0; j < r[i].n_devices; j++) {
            struct draapi_result_device *d = &r[i].devices[j];
            for (size_t k = 0; k < d->n_requests; k++)
                free(d->requests[k]);
            for (size_t k = 0; k < d->n_cdi_ids; k++)
                free(d->cdi_ids[k]);
            free(d->requests);
            free(d->cdi_ids);
            free(d->pool);
            free(d->name);
        }
        free(r[i].devices);
        free(r[i].uid);
        free(r[i].error);
    }
    free(r);
}

static char **copy_strings(char **s, size_t n, size_t *ret_n)
{
    char **v = array(n, sizeof(*v));
    for (size_t i = 0; v && i < n; i++) {
        if (!(v[i] = strdup(s[i]))) {
            for (size_t j = 0; j < i; j++)
                free(v[j]);
            free(v);
            return NULL;
        }
    }
    *ret_n = v ? n : 0;
    return v;
}

static int copy_device(const Device *d, struct draapi_result_device *ret)
{
    ret->pool = strdup(d->pool_name);
    ret->name = strdup(d->device_name);
    ret->requests = copy_strings(d->request_names, d->n_request_names, &ret->n_requests);
    ret->cdi_ids = copy_strings(d->cdi_device_ids, d->n_cdi_device_ids, &ret->n_cdi_ids);
    return ret->pool && ret->name && ret->requests && ret->cdi_ids ? 0 : -ENOMEM;
}

static int copy_prepared(const PrepareEntry *e, struct draapi_result *ret)
{
    const PrepareOne *one = e->value;
    if (!(ret->uid = strdup(e->key)))
        return -ENOMEM;
    if (!one)
        return 0;
    if (one->error[0] && !(ret->error = strdup(one->error)))
        return -ENOMEM;
    if (!(ret->devices = array(one->n_devices, sizeof(*ret->devices))))
        return -ENOMEM;
    for (size_t i = 0; i < one->n_devices; i++) {
        ret->n_devices = i + 1;
        if (copy_device(one->devices[i], &ret->devices[i]) < 0)
            return -ENOMEM;
    }
    return 0;
}

int draapi_decode_answers(const uint8_t *msg, size_t len, bool prepare, struct draapi_result **ret,
                          size_t *ret_n, struct err *ret_err)
{
    const ProtobufCMessageDescriptor *d = prepare ? DESC(node_prepare_resources_response)
                                                  : DESC(node_unprepare_resources_response);
    *ret = NULL;
    *ret_n = 0;
    ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, len, msg);
    if (!m)
        return unpack_failed(prepare ? "NodePrepareResourcesResponse"
                                     : "NodeUnprepareResourcesResponse",
                             ret_err);
    size_t n = prepare ? ((PrepareResponse *)m)->n_claims : ((UnprepareResponse *)m)->n_claims;
    struct draapi_result *r = array(n, sizeof(*r));
    int rc = r ? 0 : -ENOMEM;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (prepare) {
            rc = copy_prepared(((PrepareResponse *)m)->claims[i], &r[i]);
        } else {
            const UnprepareEntry *e = ((UnprepareResponse *)m)->claims[i];
            rc = (r[i].uid = strdup(e->key)) ? 0 : -ENOMEM;
            if (rc == 0 && e->value && e->value->error[0] &&
                !(r[i].error = strdup(e->value->error)))
                rc = -ENOMEM;
        }
    }
    protobuf_c_message_free_unpacked(m, NULL);
    if (rc < 0) {
        draapi_results_free(r, n);
        return err_set(ret_err, rc, "out of memory");
    }
    *ret = r;
    *ret_n = n;
    return 0;
}

/* --- resource health ------------------------------------------------------------------------- */

/* The length of `s` cut to `max` bytes on a UTF-8 character's boundary (kubelet's Go decoder
 * refuses a string that is not UTF-8). */
static size_t utf8_cut(const char *s, size_t max)
{
    size_t n = strnlen(s, max + 1);
    if (n <= max)
        return n;
    n = max;
    while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
        n--;
    return n;
}

/* `m` as it is, or a copy cut to DRAAPI_HEALTH_MESSAGE_MAX with "..." (in `*owned`). */
static char *health_message(const char *m, char **owned)
{
    static const char more[] = "...";
    *owned = NULL;
    if (!m)
        return (char *)"";
    if (strnlen(m, DRAAPI_HEALTH_MESSAGE_MAX + 1) <= DRAAPI_HEALTH_MESSAGE_MAX)
        return (char *)m;
    size_t n = utf8_cut(m, DRAAPI_HEALTH_MESSAGE_MAX - (sizeof(more) - 1));
    if (!(*owned = malloc(n + sizeof(more))))
        return NULL;
    memcpy(*owned, m, n);
    memcpy(*owned + n, more, sizeof(more));
    return *owned;
}

int draapi_encode_health(const struct draapi_device_health *d, size_t n, struct buf *out)
{
    V1__DeviceHealth *h = array(n, sizeof(*h));
    V1__DeviceHealth **hp = ptr_array(n);
    V1__DeviceIdentifier *id = array(n, sizeof(*id));
    char **owned = ptr_array(n);
    int r = h && hp && id && owned ? 0 : -ENOMEM;
    for (size_t i = 0; r == 0 && i < n; i++) {
        v1__device_identifier__init(&id[i]);
        id[i].pool_name = (char *)d[i].pool;
        id[i].device_name = (char *)d[i].name;
        v1__device_health__init(&h[i]);
        h[i].device = &id[i];
        h[i].health = (V1__HealthStatus)d[i].health;
        h[i].last_updated_time = d[i].updated;
        h[i].health_check_timeout_seconds = d[i].timeout;
        if (!(h[i].message = health_message(d[i].message, &owned[i])))
            r = -ENOMEM;
        hp[i] = &h[i];
    }
    if (r == 0) {
        V1__NodeWatchResourcesResponse m;
        v1__node_watch_resources_response__init(&m);
        m.n_devices = n;
        m.devices = hp;
        r = pack(&m.base, out);
    }
    for (size_t i = 0; owned && i < n; i++)
        free(owned[i]);
    free(owned);
    free(h);
    free(hp);
    free(id);
    return r;
}

void draapi_health_free(struct draapi_health_result *r, size_t n)
{
    for (size_t i = 0; r && i < n; i++) {
        free(r[i].pool);
        free(r[i].name);
        free(r[i].message);
    }
    free(r);
}

int draapi_decode_health(const uint8_t *msg, size_t len, struct draapi_health_result **ret,
                         size_t *ret_n, struct err *ret_err)
{
    *ret = NULL;
    *ret_n = 0;
    V1__NodeWatchResourcesResponse *m = v1__node_watch_resources_response__unpack(NULL, len, msg);
    if (!m)
        return unpack_failed("NodeWatchResourcesResponse", ret_err);
    struct draapi_health_result *r = array(m->n_devices, sizeof(*r));
    int rc = r ? 0 : -ENOMEM;
    for (size_t i = 0; rc == 0 && i < m->n_devices; i++) {
        const V1__DeviceHealth *h = m->devices[i];
        const V1__DeviceIdentifier *id = h->device;
        r[i].pool = strdup(id ? id->pool_name : "");
        r[i].name = strdup(id ? id->device_name : "");
        r[i].message = strdup(h->message);
        r[i].health = (enum draapi_health)h->health;
        r[i].updated = h->last_updated_time;
        r[i].timeout = h->health_check_timeout_seconds;
        if (!r[i].pool || !r[i].name || !r[i].message)
            rc = -ENOMEM;
    }
    size_t n = m->n_devices;
    v1__node_watch_resources_response__free_unpacked(m, NULL);
    if (rc < 0) {
        draapi_health_free(r, n);
        return err_set(ret_err, rc, "out of memory");
    }
    *ret = r;
    *ret_n = n;
    return 0;
}
