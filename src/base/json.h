/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/json.h - the one strict JSON parse of outside input (API responses, Status bodies, watch
 * lines, kubeconfigs written as JSON) into a cJSON tree.
 *
 * Strict means: exactly one JSON value, with nothing but JSON whitespace (space, tab, CR, LF)
 * around it; trailing text, a second value and an empty input are errors. Nesting is capped by
 * cJSON at CJSON_NESTING_LIMIT (1000 unless the library was built otherwise); deeper input is
 * invalid JSON. There is no size cap here: every caller caps its buffer first (the watch
 * framer's line cap, KUBE_HTTP_BODY_MAX, the kubeconfig file cap). Keys are kept as they come
 * (duplicates too; cJSON lookups return the first).
 *
 * Also the accessors every reader of a parsed object uses (json_field, json_str, json_same):
 * case-sensitive, and NULL-safe so that a path of lookups needs no check between steps.
 * Pure: no I/O, no logging.
 *
 * And json_intern_keys, which makes a tree kept for long (an informer's cache) share one copy
 * of each member name with every other such tree.
 *
 * And the scope-bound cleanup of a tree (base/cleanup.h's style): `_cleanup_json_ cJSON *o = ...;`
 * deletes `o` when it leaves scope; TAKE_PTR(o) hands it on. It lives here, not in
 * base/cleanup.h, so that neither header includes cJSON nor repeats its prototype.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "base/cleanup.h"
#include "base/err.h"

struct cJSON;

/*
 * Parses `len` bytes of `s` (no NUL needed; NULL with `len` 0 is the empty input). On success
 * writes the tree to `*ret` (the caller frees it with cJSON_Delete) and returns 0. Returns
 * -EBADMSG for anything else, with `ret_err` (may be NULL) saying what and where, as
 * "line 2: invalid JSON" or "line 1: unexpected text after the JSON document". cJSON does not
 * tell a failed allocation from bad input, so that is -EBADMSG too.
 */
int json_parse_strict(const char *s, size_t len, struct cJSON **ret, struct err *ret_err);

/* The member `name` of `o` (case-sensitive), or NULL when `o` is NULL or not an object or has
 * no such member. */
const struct cJSON *json_field(const struct cJSON *o, const char *name);

/* The string value of member `name` of `o`, or NULL when there is none or it is not a string. */
const char *json_str(const struct cJSON *o, const char *name);

/* Whether `a` and `b` are both set and equal (NULL equals nothing, not even NULL). */
bool json_same(const char *a, const char *b);

/*
 * Makes the member names of the tree `o` shared, never-freed copies (flagged
 * cJSON_StringIsConst, which cJSON_Delete, cJSON_Duplicate and cJSON_AddItemToObject honour):
 * a cached PCIDevice has about fifty members, each name its own allocation otherwise, and the
 * names are a small vocabulary. Names longer than 64 bytes, and new names once 4096 are held,
 * stay the tree's own. Thread-safe. Without memory for a new name, that name stays the tree's.
 */
void json_intern_keys(struct cJSON *o);

/* cJSON_Delete(*p) (nothing for NULL); the cleanup function behind _cleanup_json_. */
void cJSON_Deletep(struct cJSON **p);

#define _cleanup_json_ _cleanup_(cJSON_Deletep)
