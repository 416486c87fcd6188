/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/map.c - string-keyed hash map. See map.h. No I/O, no logging.
 *
 * Open addressing with linear probing over a power-of-two table kept at most 70% full;
 * removal shifts the following entries back, so there are no tombstones. Each slot caches
 * the key's hash, so probing compares strings only on a hash match, and growing does not
 * hash again.
 */
#include "base/map.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MIN_SLOTS 16

struct entry {
    char *key; /* NULL: empty slot */
    void *value;
    uint64_t hash;
};

struct map {
    struct entry *slots;
    size_t cap; /* 0 or a power of two */
    size_t size;
    void (*free_value)(void *value);
};

/* FNV-1a, then splitmix64's finalizer so that every bit of the result depends on the key. */
static uint64_t hash_key(const char *key)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 0x100000001b3ULL;
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
    return h ^ (h >> 31);
}

/* The slot holding `key`, or the empty slot where it would go. Needs a table. */
static size_t probe(const struct map *m, const char *key, uint64_t hash)
{
    size_t mask = m->cap - 1;
    for (size_t i = (size_t)hash & mask;; i = (i + 1) & mask) {
        const struct entry *e = &m->slots[i];
        if (!e->key || (e->hash == hash && strcmp(e->key, key) == 0))
            return i;
    }
}

static struct entry *lookup(const struct map *m, const char *key)
{
    if (m->size == 0)
        return NULL;
    struct entry *e = &m->slots[probe(m, key, hash_key(key))];
    return e->key ? e : NULL;
}

static void free_value(const struct map *m, void *value)
{
    if (m->free_value && value)
        m->free_value(value);
}

/* Doubles the table (or makes the first one), moving every entry. */
static int grow(struct map *m)
{
    size_t cap = m->cap ? m->cap * 2 : MIN_SLOTS;
    if (cap > SIZE_MAX / sizeof(struct entry))
        return -ENOMEM;
    struct entry *slots = calloc(cap, sizeof(*slots));
    if (!slots)
        return -ENOMEM;
    struct map bigger = {.slots = slots, .cap = cap};
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].key)
            slots[probe(&bigger, m->slots[i].key, m->slots[i].hash)] = m->slots[i];
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return 0;
}

/* Empties slot `i` and shifts back the entries of its probe run that may move closer. */
static void delete_at(struct map *m, size_t i)
{
    size_t mask = m->cap - 1;
    for (size_t j = (i + 1) & mask; m->slots[j].key; j = (j + 1) & mask) {
        size_t home = (size_t)m->slots[j].hash & mask;
        /* The entry at j may move to i unless its home slot lies in (i, j]. */
        if (((j - home) & mask) >= ((j - i) & mask)) {
            m->slots[i] = m->slots[j];
            i = j;
        }
    }
    m->slots[i] = (struct entry){0};
    m->size--;
}

struct map *map_new(void (*free_value_fn)(void *value))
{
    struct map *m = calloc(1, sizeof(*m));
    if (m)
        m->free_value = free_value_fn;
    return m;
}

struct map *map_free(struct map *m)
{
    if (!m)
        return NULL;
    map_clear(m);
    free(m->slots);
    free(m);
    return NULL;
}

size_t map_size(const struct map *m)
{
    return m->size;
}

void *map_get(const struct map *m, const char *key)
{
    const struct entry *e = lookup(m, key);
    return e ? e->value : NULL;
}

bool map_contains(const struct map *m, const char *key)
{
    return lookup(m, key) != NULL;
}

int map_put(struct map *m, const char *key, void *value)
{
    struct entry *e = lookup(m, key);
    if (e) {
        void *old = e->value;
        e->value = value;
        if (old != value)
            free_value(m, old);
        return 0;
    }
    if ((m->size + 1) * 10 > m->cap * 7 && grow(m) < 0)
        return -ENOMEM;
    char *copy = strdup(key);
    if (!copy)
        return -ENOMEM;
    uint64_t hash = hash_key(key);
    m->slots[probe(m, key, hash)] = (struct entry){.key = copy, .value = value, .hash = hash};
    m->size++;
    return 0;
}

void *map_take(struct map *m, const char *key)
{
    struct entry *e = lookup(m, key);
    if (!e)
        return NULL;
    void *value = e->value;
    free(e->key);
    delete_at(m, (size_t)(e - m->slots));
    return value;
}

bool map_remove(struct map *m, const char *key)
{
    struct entry *e = lookup(m, key);
    if (!e)
        return false;
    void *value = e->value;
    free(e->key);
    delete_at(m, (size_t)(e - m->slots));
    free_value(m, value);
    return true;
}

void map_clear(struct map *m)
{
    for (size_t i = 0; i < m->cap; i++) {
        struct entry *e = &m->slots[i];
        if (!e->key)
            continue;
        free(e->key);
        void *value = e->value;
        *e = (struct entry){0};
        free_value(m, value);
    }
    m->size = 0;
}

bool map_next(const struct map *m, size_t *pos, const char **ret_key, void **ret_value)
{
    for (size_t i = *pos; i < m->cap; i++) {
        if (!m->slots[i].key)
            continue;
        *pos = i + 1;
        if (ret_key)
            *ret_key = m->slots[i].key;
        if (ret_value)
            *ret_value = m->slots[i].value;
        return true;
    }
    *pos = m->cap;
    return false;
}
