/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/objects/claimstatus.c - the claims' Ready condition and finalizer patches (see
 * claimstatus.h).
 */
#include "controllers/objects/claimstatus.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "kube/client.h"

static const cJSON *field(const cJSON *o, const char *name)
{
    return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, name) : NULL;
}

static const char *str_field(const cJSON *o, const char *name)
{
    const cJSON *v = field(o, name);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static bool same(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

static double generation(const cJSON *claim)
{
    const cJSON *g = field(field(claim, "metadata"), "generation");
    return cJSON_IsNumber(g) ? g->valuedouble : 0;
}

const cJSON *claimstatus_ready(const cJSON *claim)
{
    const cJSON *c;
    cJSON_ArrayForEach(c, field(field(claim, "status"), "conditions"))
    {
        if (same(str_field(c, "type"), "Ready"))
            return c;
    }
    return NULL;
}

bool claimstatus_ready_is(const cJSON *claim, bool ready, const char *reason, const char *message)
{
    const cJSON *c = claimstatus_ready(claim);
    const cJSON *og = field(c, "observedGeneration");
    return c && same(str_field(c, "status"), ready ? "True" : "False") &&
           same(str_field(c, "reason"), reason) && same(str_field(c, "message"), message) &&
           cJSON_IsNumber(og) && og->valuedouble == generation(claim);
}

cJSON *claimstatus_ready_condition(const cJSON *claim, bool ready, const char *reason,
                                   const char *message, const char *now)
{
    const cJSON *old = claimstatus_ready(claim);
    const char *since = now;
    if (old && same(str_field(old, "status"), ready ? "True" : "False") &&
        str_field(old, "lastTransitionTime"))
        since = str_field(old, "lastTransitionTime");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "type", "Ready");
    cJSON_AddStringToObject(c, "status", ready ? "True" : "False");
    cJSON_AddNumberToObject(c, "observedGeneration", generation(claim));
    cJSON_AddStringToObject(c, "lastTransitionTime", since);
    cJSON_AddStringToObject(c, "reason", reason);
    cJSON_AddStringToObject(c, "message", message);
    return c;
}

int claimstatus_finalizer_index(const cJSON *claim, const char *finalizer)
{
    int i = 0;
    const cJSON *f;
    cJSON_ArrayForEach(f, field(field(claim, "metadata"), "finalizers"))
    {
        if (cJSON_IsString(f) && strcmp(f->valuestring, finalizer) == 0)
            return i;
        i++;
    }
    return -1;
}

/* `s` as a JSON string, quotes and escapes included (malloc'd), or NULL. The API server's
 * values are JSON strings already, but one with a quote or a backslash must stay one. */
static char *quote(const char *s)
{
    cJSON *j = cJSON_CreateString(s);
    char *q = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    return q;
}

char *claimstatus_finalizer_patch(const cJSON *claim, const char *finalizer, bool add)
{
    int i = claimstatus_finalizer_index(claim, finalizer);
    const cJSON *list = field(field(claim, "metadata"), "finalizers");
    const char *uid = kube_meta_str(claim, "uid");
    char *quoted = NULL;
    struct buf b;
    buf_init(&b, 4096);
    if (add && i < 0 && cJSON_GetArraySize(list) > 0)
        (void)buf_printf(&b,
                         "[{\"op\":\"add\",\"path\":\"/metadata/finalizers/-\",\"value\":\"%s\"}]",
                         finalizer);
    else if (add && i < 0 &&
             (quoted = quote(uid ? uid : ""))) /* no list yet: create it, on
                                                * this object, unless one appeared meanwhile (a test
                                                * for null passes only where there is none); a
                                                * status write meanwhile does not fail it */
        (void)buf_printf(&b,
                         "[{\"op\":\"test\",\"path\":\"/metadata/uid\",\"value\":%s},"
                         "{\"op\":\"test\",\"path\":\"/metadata/finalizers\",\"value\":null},"
                         "{\"op\":\"add\",\"path\":\"/metadata/finalizers\",\"value\":[\"%s\"]}]",
                         quoted, finalizer);
    else if (!add && i >= 0)
        (void)buf_printf(&b,
                         "[{\"op\":\"test\",\"path\":\"/metadata/finalizers/%d\",\"value\":\"%s\"},"
                         "{\"op\":\"remove\",\"path\":\"/metadata/finalizers/%d\"}]",
                         i, finalizer, i);
    else
        return NULL;
    free(quoted);
    return buf_take(&b);
}

bool claimstatus_pci_bound(const cJSON *claim)
{
    const cJSON *c = claimstatus_ready(claim);
    return !kube_meta_str(claim, "deletionTimestamp") &&
           cJSON_IsTrue(field(field(claim, "status"), "passthroughEnabled")) &&
           same(str_field(c, "status"), "True");
}
