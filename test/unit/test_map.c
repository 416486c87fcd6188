/* SPDX-License-Identifier: Apache-2.0 */
/* test/unit/test_map.c - the string map: ownership, removal, growth, iteration, clear. */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/map.h"

#define MANY 100000

static int freed;
static char values[MANY]; /* the value of key i is &values[i] */

static void count_free(void *p)
{
    freed++;
    free(p);
}

static void key_of(char *out, size_t size, int i)
{
    snprintf(out, size, "ns-%d/pcidevice-%d", i % 97, i);
}

static void test_put_get_replace(void)
{
    freed = 0;
    struct map *m = map_new(count_free);
    CU_ASSERT_PTR_NOT_NULL(m);
    if (!m)
        return;
    CU_ASSERT_PTR_NULL(map_get(m, "a"));
    CU_ASSERT_EQUAL(map_put(m, "a", strdup("one")), 0);
    CU_ASSERT_EQUAL(map_put(m, "b", strdup("two")), 0);
    CU_ASSERT_STRING_EQUAL(map_get(m, "a"), "one");
    CU_ASSERT_EQUAL(map_size(m), 2);
    CU_ASSERT_EQUAL(map_put(m, "a", strdup("uno")), 0);
    CU_ASSERT_EQUAL(freed, 1);
    CU_ASSERT_STRING_EQUAL(map_get(m, "a"), "uno");
    CU_ASSERT_EQUAL(map_size(m), 2);
    /* Putting the value a key already holds does not free it. */
    CU_ASSERT_EQUAL(map_put(m, "a", map_get(m, "a")), 0);
    CU_ASSERT_EQUAL(freed, 1);
    CU_ASSERT_STRING_EQUAL(map_get(m, "a"), "uno");
    map_free(m);
    CU_ASSERT_EQUAL(freed, 3);
}

static void test_key_is_copied(void)
{
    struct map *m = map_new(NULL);
    char key[] = "node-1";
    int value = 7;
    CU_ASSERT_EQUAL(map_put(m, key, &value), 0);
    key[0] = 'X';
    CU_ASSERT_PTR_EQUAL(map_get(m, "node-1"), &value);
    CU_ASSERT_FALSE(map_contains(m, key));
    map_free(m);
}

static void test_take_and_remove(void)
{
    freed = 0;
    struct map *m = map_new(count_free);
    char *v = strdup("taken");
    CU_ASSERT_EQUAL(map_put(m, "t", v), 0);
    CU_ASSERT_EQUAL(map_put(m, "r", strdup("removed")), 0);
    CU_ASSERT_PTR_EQUAL(map_take(m, "t"), v);
    CU_ASSERT_EQUAL(freed, 0);
    CU_ASSERT_FALSE(map_contains(m, "t"));
    CU_ASSERT_PTR_NULL(map_take(m, "t"));
    free(v);
    CU_ASSERT_TRUE(map_remove(m, "r"));
    CU_ASSERT_EQUAL(freed, 1);
    CU_ASSERT_FALSE(map_remove(m, "r"));
    CU_ASSERT_EQUAL(map_size(m), 0);
    map_free(m);
}

static void test_null_values_and_empty_key(void)
{
    struct map *m = map_new(count_free);
    freed = 0;
    CU_ASSERT_EQUAL(map_put(m, "", NULL), 0);
    CU_ASSERT_EQUAL(map_put(m, "nil", NULL), 0);
    CU_ASSERT_TRUE(map_contains(m, ""));
    CU_ASSERT_TRUE(map_contains(m, "nil"));
    CU_ASSERT_PTR_NULL(map_get(m, ""));
    CU_ASSERT_EQUAL(map_size(m), 2);
    CU_ASSERT_TRUE(map_remove(m, ""));
    CU_ASSERT_FALSE(map_contains(m, ""));
    CU_ASSERT_TRUE(map_contains(m, "nil"));
    CU_ASSERT_EQUAL(map_put(m, "", strdup("empty")), 0);
    CU_ASSERT_STRING_EQUAL(map_get(m, ""), "empty");
    map_free(m);
    CU_ASSERT_EQUAL(freed, 1); /* NULL values are never passed to free_value */
}

/* Puts MANY keys; returns how many puts failed. */
static int fill(struct map *m)
{
    int failed = 0;
    char key[64];
    for (int i = 0; i < MANY; i++) {
        key_of(key, sizeof(key), i);
        failed += map_put(m, key, &values[i]) != 0;
    }
    return failed;
}

static void test_many_keys(void)
{
    struct map *m = map_new(NULL);
    CU_ASSERT_EQUAL(fill(m), 0);
    CU_ASSERT_EQUAL(map_size(m), MANY);
    int wrong = 0;
    char key[64];
    for (int i = 0; i < MANY; i++) {
        key_of(key, sizeof(key), i);
        wrong += map_get(m, key) != &values[i];
    }
    CU_ASSERT_EQUAL(wrong, 0);
    /* Remove the even keys; the odd ones must survive the shifting. */
    for (int i = 0; i < MANY; i += 2) {
        key_of(key, sizeof(key), i);
        wrong += !map_remove(m, key);
    }
    for (int i = 0; i < MANY; i++) {
        key_of(key, sizeof(key), i);
        wrong += map_contains(m, key) != (i % 2 == 1);
    }
    CU_ASSERT_EQUAL(wrong, 0);
    CU_ASSERT_EQUAL(map_size(m), MANY / 2);
    CU_ASSERT_PTR_NULL(map_get(m, "absent"));
    map_free(m);
}

static void test_iteration_sees_every_key_once(void)
{
    struct map *m = map_new(NULL);
    CU_ASSERT_EQUAL(fill(m), 0);
    unsigned char *seen = calloc(MANY, 1);
    size_t pos = 0, n = 0;
    const char *key;
    void *value;
    int wrong = 0;
    while (map_next(m, &pos, &key, &value)) {
        size_t i = (size_t)((char *)value - values);
        char expect[64];
        key_of(expect, sizeof(expect), (int)i);
        wrong += i >= MANY || seen[i]++ || strcmp(key, expect) != 0;
        n++;
    }
    CU_ASSERT_EQUAL(n, MANY);
    CU_ASSERT_EQUAL(wrong, 0);
    CU_ASSERT_FALSE(map_next(m, &pos, &key, &value));
    free(seen);
    map_free(m);
}

static void test_iteration_of_empty_map(void)
{
    struct map *m = map_new(NULL);
    size_t pos = 0;
    CU_ASSERT_FALSE(map_next(m, &pos, NULL, NULL));
    CU_ASSERT_EQUAL(map_put(m, "only", NULL), 0);
    const char *key = NULL;
    CU_ASSERT_TRUE(map_next(m, &pos, &key, NULL));
    CU_ASSERT_STRING_EQUAL(key, "only");
    CU_ASSERT_FALSE(map_next(m, &pos, &key, NULL));
    map_free(m);
}

static void test_clear(void)
{
    freed = 0;
    struct map *m = map_new(count_free);
    CU_ASSERT_EQUAL(map_put(m, "a", strdup("1")), 0);
    CU_ASSERT_EQUAL(map_put(m, "b", strdup("2")), 0);
    CU_ASSERT_EQUAL(map_put(m, "c", NULL), 0);
    map_clear(m);
    CU_ASSERT_EQUAL(freed, 2);
    CU_ASSERT_EQUAL(map_size(m), 0);
    CU_ASSERT_FALSE(map_contains(m, "a"));
    size_t pos = 0;
    CU_ASSERT_FALSE(map_next(m, &pos, NULL, NULL));
    CU_ASSERT_EQUAL(map_put(m, "a", strdup("again")), 0);
    CU_ASSERT_STRING_EQUAL(map_get(m, "a"), "again");
    map_free(m);
    CU_ASSERT_EQUAL(freed, 3);
    CU_ASSERT_PTR_NULL(map_free(NULL));
}

static CU_TestInfo tests[] = {
        {"put, get, replace frees the old value", test_put_get_replace},
        {"key is copied", test_key_is_copied},
        {"take and remove", test_take_and_remove},
        {"NULL values and the empty key", test_null_values_and_empty_key},
        {"100000 keys with growth and removal", test_many_keys},
        {"iteration sees every key once", test_iteration_sees_every_key_once},
        {"iteration of an empty map", test_iteration_of_empty_map},
        {"clear", test_clear},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo map_suites[] = {
        {"map", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
