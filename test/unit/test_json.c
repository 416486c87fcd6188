/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_json.c - the strict JSON parse (base/json): what it takes, what it refuses and
 * the message that says where; shared member names (json_intern_keys).
 */
#include <CUnit/CUnit.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/json.h"

static void test_accepts(void)
{
    static const char *const good[] = {
            "{}", " {\"a\":1} \n", "[1,2]", "\"s\"", "1", "null", "{\"a\":1}\r\n", "\t\n{}\t\n",
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        cJSON *root = NULL;
        CU_ASSERT_EQUAL(json_parse_strict(good[i], strlen(good[i]), &root, NULL), 0);
        CU_ASSERT_PTR_NOT_NULL(root);
        cJSON_Delete(root);
    }
    /* The length counts, not a NUL: the bytes after it are not looked at. */
    cJSON *root = NULL;
    CU_ASSERT_EQUAL(json_parse_strict("{\"a\":1}garbage", 7, &root, NULL), 0);
    CU_ASSERT_EQUAL(cJSON_GetObjectItemCaseSensitive(root, "a")->valueint, 1);
    cJSON_Delete(root);
}

static void check_refused(const char *s, size_t len, const char *want)
{
    cJSON *sentinel = (cJSON *)&sentinel, *root = sentinel;
    struct err err = {.msg = "untouched"};
    CU_ASSERT_EQUAL(json_parse_strict(s, len, &root, &err), -EBADMSG);
    CU_ASSERT_PTR_EQUAL(root, sentinel); /* written only on success */
    if (strcmp(err.msg, want) != 0)
        fprintf(stderr, "\n  \"%.*s\": got \"%s\", want \"%s\"\n", (int)len, s ? s : "", err.msg,
                want);
    CU_ASSERT_STRING_EQUAL(err.msg, want);
    CU_ASSERT_EQUAL(json_parse_strict(s, len, &root, NULL), -EBADMSG);
}

static void test_refuses(void)
{
    check_refused("", 0, "line 1: empty JSON document");
    check_refused(NULL, 0, "line 1: empty JSON document");
    check_refused(" \n ", 3, "line 2: invalid JSON"); /* only whitespace */
    check_refused("{} x", 4, "line 1: unexpected text after the JSON document");
    check_refused("{}{}", 4, "line 1: unexpected text after the JSON document");
    check_refused("{\"a\":1}\n\n x", 11, "line 3: unexpected text after the JSON document");
    check_refused("{}\0", 3, "line 1: unexpected text after the JSON document");
    check_refused("{\"a\": 1,\n \"b\": }", 17, "line 2: invalid JSON");
    check_refused("{a: b}", 6, "line 1: invalid JSON");
    check_refused("{\"a\":", 5, "line 1: invalid JSON");
    check_refused("{\"a\":1}", 6, "line 1: invalid JSON"); /* cut by the length */
}

/* Nesting: CJSON_NESTING_LIMIT levels parse, one more does not (and nothing overflows). */
static void test_depth(void)
{
    static char s[2 * (CJSON_NESTING_LIMIT + 1)];
    size_t n = CJSON_NESTING_LIMIT + 1;
    memset(s, '[', n);
    memset(s + n, ']', n);
    cJSON *root = NULL;
    CU_ASSERT_EQUAL(json_parse_strict(s + 1, 2 * n - 2, &root, NULL), 0);
    cJSON_Delete(root);
    root = NULL;
    CU_ASSERT_EQUAL(json_parse_strict(s, 2 * n, &root, NULL), -EBADMSG);
    CU_ASSERT_PTR_NULL(root);
}

/* The accessors: NULL-safe, case-sensitive, strings only where a string is asked for. */
static void test_accessors(void)
{
    cJSON *root = NULL;
    const char *s = "{\"a\":{\"b\":\"x\",\"n\":1},\"A\":2}";
    CU_ASSERT_EQUAL(json_parse_strict(s, strlen(s), &root, NULL), 0);
    CU_ASSERT_STRING_EQUAL(json_str(json_field(root, "a"), "b"), "x");
    CU_ASSERT_PTR_NULL(json_str(json_field(root, "a"), "n"));
    CU_ASSERT_PTR_NULL(json_field(root, "B"));
    CU_ASSERT_PTR_NULL(json_field(json_field(root, "nope"), "b"));
    CU_ASSERT_PTR_NULL(json_field(json_field(json_field(root, "a"), "b"), "c"));
    CU_ASSERT(cJSON_IsNumber(json_field(root, "A")));
    CU_ASSERT(json_same("x", "x"));
    CU_ASSERT(!json_same("x", "y"));
    CU_ASSERT(!json_same(NULL, NULL));
    CU_ASSERT(!json_same("x", NULL));
    cJSON_Delete(root);
}

/* Two trees share their member names, the trees read, compare, copy, change and free as before
 * (ASan: no double free, no leak); a name over 64 bytes stays the tree's own. */
static void test_intern_keys(void)
{
    char longname[80];
    memset(longname, 'k', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    char doc[256];
    (void)snprintf(
            doc, sizeof(doc),
            "{\"metadata\":{\"name\":\"a\",\"labels\":{\"%s\":\"v\"}},\"items\":[{\"x\":1}]}",
            longname);
    cJSON *a = NULL, *b = NULL;
    CU_ASSERT_EQUAL_FATAL(json_parse_strict(doc, strlen(doc), &a, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(json_parse_strict(doc, strlen(doc), &b, NULL), 0);
    json_intern_keys(a);
    json_intern_keys(b);
    json_intern_keys(a); /* again: nothing changes */
    json_intern_keys(NULL);
    const cJSON *ma = json_field(a, "metadata"), *mb = json_field(b, "metadata");
    CU_ASSERT_PTR_EQUAL(ma->string, mb->string);
    CU_ASSERT(ma->type & cJSON_StringIsConst);
    CU_ASSERT_PTR_EQUAL(json_field(ma, "name")->string, json_field(mb, "name")->string);
    CU_ASSERT_PTR_EQUAL(json_field(cJSON_GetArrayItem(json_field(a, "items"), 0), "x")->string,
                        json_field(cJSON_GetArrayItem(json_field(b, "items"), 0), "x")->string);
    const cJSON *la = json_field(ma, "labels")->child, *lb = json_field(mb, "labels")->child;
    CU_ASSERT_STRING_EQUAL(la->string, longname);
    CU_ASSERT_PTR_NOT_EQUAL(la->string, lb->string);
    CU_ASSERT_STRING_EQUAL(json_str(ma, "name"), "a");
    CU_ASSERT(cJSON_Compare(a, b, true));
    cJSON *copy = cJSON_Duplicate(a, true);
    CU_ASSERT(cJSON_Compare(a, copy, true));
    cJSON_Delete(a);
    CU_ASSERT_STRING_EQUAL(json_str(json_field(copy, "metadata"), "name"), "a");
    cJSON *meta = cJSON_DetachItemFromObjectCaseSensitive(b, "metadata");
    CU_ASSERT(cJSON_AddItemToObject(b, "renamed", meta));
    CU_ASSERT_STRING_EQUAL(json_str(json_field(b, "renamed"), "name"), "a");
    CU_ASSERT(cJSON_ReplaceItemInObjectCaseSensitive(meta, "name", cJSON_CreateString("b")));
    CU_ASSERT_STRING_EQUAL(json_str(json_field(b, "renamed"), "name"), "b");
    cJSON_Delete(b);
    cJSON_Delete(copy);
}

static int freed; /* calls of the counting free hook */

static void counting_free(void *p)
{
    freed++;
    free(p);
}

static cJSON *kept_tree(void)
{
    _cleanup_json_ cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", "a");
    return TAKE_PTR(o); /* handed on: not deleted */
}

/* _cleanup_json_ deletes the whole tree when it leaves scope, does nothing for NULL, and
 * nothing after TAKE_PTR (cJSON's hooks count the frees). */
static void test_cleanup(void)
{
    cJSON_Hooks hooks = {.malloc_fn = malloc, .free_fn = counting_free};
    cJSON_InitHooks(&hooks);
    freed = 0;
    {
        _cleanup_json_ cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", "a"); /* the object, the item, its name and value */
        _cleanup_json_ cJSON *none = NULL;
        (void)none;
    }
    CU_ASSERT_EQUAL(freed, 4);
    freed = 0;
    cJSON *kept = kept_tree();
    CU_ASSERT_EQUAL(freed, 0);
    CU_ASSERT_STRING_EQUAL(json_str(kept, "name"), "a");
    cJSON_Delete(kept);
    CU_ASSERT_EQUAL(freed, 4);
    cJSON_InitHooks(NULL);
}

static CU_TestInfo tests[] = {
        {"accepts one value", test_accepts},
        {"refuses the rest, saying where", test_refuses},
        {"nesting limit", test_depth},
        {"accessors", test_accessors},
        {"shared member names", test_intern_keys},
        {"cleanup deletes the tree at scope end", test_cleanup},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo json_suites[] = {
        {"json", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
