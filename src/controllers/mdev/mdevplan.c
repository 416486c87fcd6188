/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/mdev/mdevplan.c - the next step for one VGPUDevice (see mdevplan.h).
 */
#include "controllers/mdev/mdevplan.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "controllers/objects/claimstatus.h"
#include "controllers/objects/mdevobj.h"

const char *const mdevplan_managed[] = {
        "uuid",           "vGPUStatus", "configureVGPUTypeName",
        "availableTypes", "mdevTypes",  "resourceName",
        "iommuGroup",     "conditions", "observedGeneration",
};
const unsigned mdevplan_n_managed = sizeof(mdevplan_managed) / sizeof(mdevplan_managed[0]);

const struct node_mdev_parent *mdevplan_parent(const struct node_mdev_scan *scan, const char *name)
{
    for (size_t i = 0; scan && name && i < scan->n_parents; i++)
        if (strcmp(scan->parents[i].name, name) == 0)
            return &scan->parents[i];
    return NULL;
}

const struct node_mdev_instance *mdevplan_instance(const struct node_mdev_scan *scan,
                                                   const char *uuid)
{
    for (size_t i = 0; scan && uuid && uuid[0] && i < scan->n_instances; i++)
        if (strcmp(scan->instances[i].uuid, uuid) == 0)
            return &scan->instances[i];
    return NULL;
}

bool mdevplan_has_capacity(const struct node_mdev_parent *p)
{
    for (size_t i = 0; p && i < p->n_types; i++)
        if (p->types[i].available > 0)
            return true;
    return false;
}

size_t mdevplan_parent_users(const struct node_mdev_instance *v, size_t n, const char *parent,
                             const char *(*name_of)(const char *uuid, void *arg), void *arg,
                             char *buf, size_t size)
{
    static const char more[] = ", ...";
    size_t count = 0, len = 0;
    bool cut = false;
    if (size)
        buf[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (strcmp(v[i].parent, parent) != 0)
            continue;
        const char *name = name_of ? name_of(v[i].uuid, arg) : NULL;
        char one[400];
        int w = snprintf(one, sizeof(one), "%sinstance %s%s%s%s", count ? ", " : "", v[i].uuid,
                         name ? " (VGPUDevice " : "", name ? name : "", name ? ")" : "");
        count++;
        if (cut || w < 0 || (size_t)w >= sizeof(one) || len + (size_t)w + sizeof(more) > size) {
            cut = true;
            continue;
        }
        memcpy(buf + len, one, (size_t)w + 1);
        len += (size_t)w;
    }
    const char *tail = len ? more : more + 2; /* "..." alone when not even one fits */
    if (cut && len + strlen(tail) < size)
        memcpy(buf + len, tail, strlen(tail) + 1);
    return count;
}

static bool deleted(const cJSON *obj)
{
    return json_field(json_field(obj, "metadata"), "deletionTimestamp") != NULL;
}

bool mdevplan_is_slot(const cJSON *obj)
{
    return !cJSON_IsTrue(json_field(json_field(obj, "spec"), "enabled")) && !deleted(obj) &&
           !mdevobj_status_uuid(obj);
}

bool mdevplan_slot_before(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    return la != lb ? la < lb : strcmp(a, b) < 0;
}

static void say(struct mdevplan *p, enum mdevplan_step step, bool ready, const char *reason)
{
    p->step = step;
    p->ready = ready;
    p->reason = reason;
}

/* The parent's types, for a message: "mtty-1 (Single port serial, 24 left), ...". */
static void list_types(const struct node_mdev_parent *par, char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < par->n_types && n < size; i++) {
        int w = snprintf(buf + n, size - n, "%s%s%s%s%s, %d left)", i ? ", " : "", par->types[i].id,
                         " (", par->types[i].name[0] ? par->types[i].name : "",
                         par->types[i].name[0] ? "" : "no name", par->types[i].available);
        n += w > 0 ? (size_t)w : 0;
    }
}

/* Whether memory `m` says `reason` for this round: shown (`ret_shown`) and not yet due again. */
static bool remembered(const struct mdevplan_facts *f, const char *reason, double retry,
                       bool *ret_shown, double *ret_wait)
{
    const struct mdevplan_memory *m = f->memory;
    if (!m || !m->reason || strcmp(m->reason, reason) != 0 || f->now >= m->at + retry)
        return false;
    const cJSON *ready = claimstatus_ready(f->obj);
    *ret_shown = json_same(json_str(ready, "reason"), reason) &&
                 json_same(json_str(ready, "message"), m->message);
    *ret_wait = m->at + retry - f->now;
    return true;
}

/* An enabled object whose instance does not exist: why not, or what to do. */
static void enabled_missing(const struct mdevplan_facts *f, const struct mdevobj_spec *s,
                            struct mdevplan *p)
{
    const struct node_mdev_parent *par = mdevplan_parent(f->scan, s->parent);
    const struct node_mdev_type *t = mdevobj_type_find(par, s->type);
    char types[600];
    const struct mdevplan_memory *m = f->memory;
    bool shown;
    if (remembered(f, MDEVPLAN_WRITTEN, MDEVPLAN_WRITTEN_WAIT, &shown, &p->wait)) {
        p->step = MDEVPLAN_WAIT; /* created: the scan does not show it yet */
    } else if (!par) {
        say(p, MDEVPLAN_STATUS, false, MDEVOBJ_PARENT_MISSING);
        (void)snprintf(p->message, sizeof(p->message),
                       "parent %s is not an mdev parent on node %s now (its driver not loaded, or "
                       "the device gone): the instance is created when it is back",
                       s->parent, s->node);
    } else if (!t) {
        list_types(par, types, sizeof(types));
        say(p, MDEVPLAN_STATUS, false, MDEVOBJ_TYPE_UNKNOWN);
        (void)snprintf(p->message, sizeof(p->message),
                       "parent %s has no type \"%s\": write one of its type ids to "
                       "spec.vGPUTypeName: %s",
                       par->name, s->type, types);
    } else if (f->parent_claimed) {
        say(p, MDEVPLAN_STATUS, false, MDEVOBJ_PARENT_CLAIMED);
        (void)snprintf(p->message, sizeof(p->message),
                       "parent %s is passed through whole (%s): delete that claim first, or "
                       "disable this instance",
                       par->name, f->parent_claimed);
    } else if (m && m->reason && strcmp(m->reason, MDEVOBJ_CREATE_FAILED) == 0 &&
               m->generation == s->generation) {
        say(p, MDEVPLAN_STATUS, false, MDEVOBJ_CREATE_FAILED);
        (void)snprintf(p->message, sizeof(p->message), "%s", m->message);
    } else if (t->available <= 0) {
        list_types(par, types, sizeof(types));
        say(p, MDEVPLAN_STATUS, false, MDEVOBJ_NO_CAPACITY);
        (void)snprintf(p->message, sizeof(p->message),
                       "parent %s cannot make another %s now (available_instances 0): disable "
                       "another instance of it, or pick a type with some left: %s",
                       par->name, t->id, types);
    } else if (claimstatus_finalizer_index(f->obj, MDEVOBJ_FINALIZER) < 0) {
        p->step = MDEVPLAN_ADD_FINALIZER;
    } else {
        char want[NODE_MDEV_UUID_SIZE]; /* (a copy: it may be p->uuid itself) */
        (void)snprintf(want, sizeof(want), "%s",
                       s->uuid[0]   ? s->uuid
                       : p->uuid[0] ? p->uuid
                                    : f->new_uuid);
        p->step = strcmp(p->uuid, want) != 0 ? MDEVPLAN_WRITE_UUID : MDEVPLAN_CREATE;
        memcpy(p->uuid, want, sizeof(want));
        (void)snprintf(p->type, sizeof(p->type), "%s", t->id);
        (void)snprintf(p->parent, sizeof(p->parent), "%s", par->name);
    }
}

static void enabled(const struct mdevplan_facts *f, const struct mdevobj_spec *s,
                    struct mdevplan *p)
{
    const char *uuid = s->uuid[0] ? s->uuid : p->uuid;
    const struct node_mdev_instance *in = mdevplan_instance(f->scan, uuid);
    if (!in) {
        enabled_missing(f, s, p);
        return;
    }
    p->instance = in;
    (void)snprintf(p->uuid, sizeof(p->uuid), "%s", in->uuid);
    const struct node_mdev_type *t =
            mdevobj_type_find(mdevplan_parent(f->scan, in->parent), s->type);
    if (strcmp(in->parent, s->parent) != 0 ||
        (strcmp(s->type, in->type) != 0 && (!t || strcmp(t->id, in->type) != 0))) {
        say(p, MDEVPLAN_STATUS, false, MDEVOBJ_INVALID_SPEC);
        (void)snprintf(p->message, sizeof(p->message),
                       "instance %s exists with type %s on parent %s, not as the spec asks (%s on "
                       "%s): set spec.enabled=false to remove it, then enable it again",
                       in->uuid, in->type, in->parent, s->type, s->parent);
    } else if (claimstatus_finalizer_index(f->obj, MDEVOBJ_FINALIZER) < 0) {
        p->step = MDEVPLAN_ADD_FINALIZER;
    } else {
        say(p, MDEVPLAN_STATUS, true, MDEVOBJ_CREATED);
        (void)snprintf(p->message, sizeof(p->message), "instance %s of type %s on parent %s exists",
                       in->uuid, in->type, in->parent);
    }
}

static void disabled(const struct mdevplan_facts *f, struct mdevplan *p)
{
    const struct node_mdev_instance *in = mdevplan_instance(f->scan, p->uuid);
    bool has_fin = claimstatus_finalizer_index(f->obj, MDEVOBJ_FINALIZER) >= 0, shown = false;
    p->instance = in;
    if (in && (remembered(f, MDEVOBJ_IN_USE, MDEVPLAN_IN_USE_RETRY, &shown, &p->wait) ||
               remembered(f, MDEVOBJ_REMOVE_FAILED, MDEVPLAN_REMOVE_RETRY, &shown, &p->wait))) {
        say(p, shown ? MDEVPLAN_WAIT : MDEVPLAN_STATUS, false, f->memory->reason);
        (void)snprintf(p->message, sizeof(p->message), "%s", f->memory->message);
    } else if (in && remembered(f, MDEVPLAN_WRITTEN, MDEVPLAN_WRITTEN_WAIT, &shown, &p->wait)) {
        p->step = MDEVPLAN_WAIT; /* removed: the scan does not show it yet */
    } else if (in) {
        p->step = MDEVPLAN_REMOVE;
    } else if (p->uuid[0] || mdevobj_configured(f->obj)) {
        p->uuid[0] = '\0';
        say(p, MDEVPLAN_STATUS, true, MDEVOBJ_AVAILABLE);
        (void)snprintf(p->message, sizeof(p->message), "the instance is removed");
    } else if (has_fin) {
        p->step = MDEVPLAN_REMOVE_FINALIZER;
    } else if (!deleted(f->obj) && !f->free_slot) {
        p->step = MDEVPLAN_DELETE;
    } else if (!deleted(f->obj)) {
        say(p, MDEVPLAN_STATUS, true, MDEVOBJ_AVAILABLE);
        (void)snprintf(p->message, sizeof(p->message),
                       "a free slot: set spec.vGPUTypeName to one of status.availableTypes and "
                       "spec.enabled=true to create an instance");
    }
}

void mdevplan_decide(const struct mdevplan_facts *f, struct mdevplan *ret)
{
    struct mdevplan p = {.step = MDEVPLAN_NONE};
    const char *have = mdevobj_status_uuid(f->obj);
    (void)snprintf(p.uuid, sizeof(p.uuid), "%s", have ? have : "");
    struct mdevobj_spec s;
    struct err why = {{0}};
    int r = mdevobj_spec(f->obj, &s, &why);
    if (r == 0 && s.enabled && !deleted(f->obj))
        enabled(f, &s, &p);
    else if (r == 0 || deleted(f->obj))
        disabled(f, &p);
    else {
        p.instance = mdevplan_instance(f->scan, p.uuid);
        say(&p, MDEVPLAN_STATUS, false, MDEVOBJ_INVALID_SPEC);
        (void)snprintf(p.message, sizeof(p.message), "%s", why.msg);
    }
    *ret = p;
}

static cJSON *types_json(const struct node_mdev_parent *par, cJSON **ret_available)
{
    cJSON *list = cJSON_CreateArray(), *avail = cJSON_CreateObject();
    for (size_t i = 0; par && list && avail && i < par->n_types; i++) {
        const struct node_mdev_type *t = &par->types[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(list, o);
        cJSON_AddStringToObject(o, "id", t->id);
        if (t->name[0])
            cJSON_AddStringToObject(o, "name", t->name);
        if (t->description[0])
            cJSON_AddStringToObject(o, "description", t->description);
        if (t->device_api[0])
            cJSON_AddStringToObject(o, "deviceAPI", t->device_api);
        cJSON_AddNumberToObject(o, "available", t->available);
        if (t->available > 0 && !json_field(avail, t->name[0] ? t->name : t->id))
            cJSON_AddStringToObject(avail, t->name[0] ? t->name : t->id, t->id);
    }
    *ret_available = avail;
    return list;
}

cJSON *mdevplan_status(const struct mdevplan *p, const cJSON *obj,
                       const struct node_mdev_scan *scan, const char *now)
{
    struct mdevobj_spec s = {0};
    struct err why = {{0}};
    (void)mdevobj_spec(obj, &s, &why);
    const char *parent = p->instance ? p->instance->parent : s.parent;
    cJSON *st = cJSON_CreateObject(), *avail = NULL;
    if (!st)
        return NULL;
    cJSON_AddStringToObject(st, "uuid", p->uuid);
    cJSON_AddStringToObject(st, "vGPUStatus", p->instance ? MDEVOBJ_CONFIGURED : "");
    cJSON *types = types_json(mdevplan_parent(scan, parent), &avail);
    cJSON_AddItemToObject(st, "mdevTypes", types);
    cJSON_AddItemToObject(st, "availableTypes", avail);
    if (p->instance) {
        char res[256];
        cJSON_AddStringToObject(st, "configureVGPUTypeName", p->instance->type);
        if (mdevobj_resource_name(p->instance->type, res, sizeof(res)) == 0)
            cJSON_AddStringToObject(st, "resourceName", res);
        if (p->instance->iommu_group >= 0) {
            (void)snprintf(res, sizeof(res), "%d", p->instance->iommu_group);
            cJSON_AddStringToObject(st, "iommuGroup", res);
        }
    }
    cJSON *conds = cJSON_AddArrayToObject(st, "conditions");
    cJSON_AddItemToArray(conds,
                         claimstatus_ready_condition(obj, p->ready, p->reason, p->message, now));
    const cJSON *gen = json_field(json_field(obj, "metadata"), "generation");
    cJSON_AddNumberToObject(st, "observedGeneration", cJSON_IsNumber(gen) ? gen->valuedouble : 0);
    return st;
}
