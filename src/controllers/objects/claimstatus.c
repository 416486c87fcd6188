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
#include "base/cleanup.h"
#include "base/json.h"
#include "kube/client.h"

static double generation(const cJSON *claim)
{
    const cJSON *g = json_field(json_field(claim, "metadata"), "generation");
    return cJSON_IsNumber(g) ? g->valuedouble : 0;
}

const cJSON *claimstatus_ready(const cJSON *claim)
{
    const cJSON *c;
    cJSON_ArrayForEach(c, json_field(json_field(claim, "status"), "conditions"))
    {
        if (json_same(json_str(c, "type"), "Ready"))
            return c;
    }
    return NULL;
}

bool claimstatus_ready_is(const cJSON *claim, bool ready, const char *reason, const char *message)
{
    const cJSON *c = claimstatus_ready(claim);
    const cJSON *og = json_field(c, "observedGeneration");
    return c && json_same(json_str(c, "status"), ready ? "True" : "False") &&
           json_same(json_str(c, "reason"), reason) && json_same(json_str(c, "message"), message) &&
           cJSON_IsNumber(og) && og->valuedouble == generation(claim);
}

cJSON *claimstatus_ready_condition(const cJSON *claim, bool ready, const char *reason,
                                   const char *message, const char *now)
{
    const cJSON *old = claimstatus_ready(claim);
    const char *since = now;
    if (old && json_same(json_str(old, "status"), ready ? "True" : "False") &&
        json_str(old, "lastTransitionTime"))
        since = json_str(old, "lastTransitionTime");
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
    cJSON_ArrayForEach(f, json_field(json_field(claim, "metadata"), "finalizers"))
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
    _cleanup_json_ cJSON *j = cJSON_CreateString(s);
    return j ? cJSON_PrintUnformatted(j) : NULL;
}

char *claimstatus_finalizer_patch(const cJSON *claim, const char *finalizer, bool add)
{
    int i = claimstatus_finalizer_index(claim, finalizer);
    const cJSON *list = json_field(json_field(claim, "metadata"), "finalizers");
    const char *uid = kube_meta_str(claim, "uid");
    _cleanup_free_ char *quoted = NULL;
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
    return buf_take(&b);
}
