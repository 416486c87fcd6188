/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/map.h - a hash map from strings to pointers (open addressing or chaining, grows).
 *
 * The map copies keys and owns values when it was given a `free_value` function (it calls it
 * on replace, remove and map_free). No I/O, no logging. Not thread-safe.
 * Mutating the map invalidates iteration positions and borrowed keys.
 *
 * Decisions (map.c):
 * - free_value is never called with a NULL value, and map_put() of the pointer a key already
 *   holds does not free it.
 * - The table grows (doubling, at 70% load) and never shrinks; map_clear() keeps it.
 * - The hash (FNV-1a with a finalizer) is not seeded: keys are trusted names, not input
 *   crafted to collide.
 * - map_next() accepts NULL for `ret_key` or `ret_value`.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct map;

/* A new empty map; `free_value` may be NULL (values are then not owned). NULL on OOM. */
struct map *map_new(void (*free_value)(void *value));

/* Frees the map, its keys and (if owned) its values. Takes NULL. Returns NULL. */
struct map *map_free(struct map *m);

size_t map_size(const struct map *m);

/* The value for `key`, or NULL when absent (borrowed). */
void *map_get(const struct map *m, const char *key);

bool map_contains(const struct map *m, const char *key);

/*
 * Sets `key` to `value`, copying the key. An existing value is replaced (and freed if owned).
 * Returns 0, or -ENOMEM (then the map is unchanged and `value` is still the caller's).
 */
int map_put(struct map *m, const char *key, void *value);

/* Removes `key` and returns its value without freeing it; NULL when absent. */
void *map_take(struct map *m, const char *key);

/* Removes `key`, freeing its value if owned. Returns whether it was there. */
bool map_remove(struct map *m, const char *key);

/* Removes every entry. */
void map_clear(struct map *m);

/*
 * Iterates: start with `*pos = 0`; each call writes the next entry and returns true, or
 * returns false at the end. Order is unspecified. The map must not change meanwhile.
 */
bool map_next(const struct map *m, size_t *pos, const char **ret_key, void **ret_value);
