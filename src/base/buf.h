/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/buf.h - a growable byte buffer with a mandatory cap (in the style of curl's dynbuf).
 *
 * Every buffer filled from outside input has a cap; growing past it fails with -E2BIG for that
 * input only and leaves the buffer empty. The contents are always NUL-terminated, so text can
 * be read with buf_str(). No I/O, no logging.
 */
#pragma once

#include <stdarg.h>
#include <stddef.h>

#include "base/cleanup.h"

struct buf {
    char *data;
    size_t len;
    size_t alloc;
    size_t cap; /* the most bytes of content it may hold */
};

/* Initializes an empty buffer that will never hold more than `cap` bytes. Allocates nothing. */
void buf_init(struct buf *b, size_t cap);

/* Frees the memory and leaves an empty buffer with the same cap. */
void buf_free(struct buf *b);

/* `_cleanup_buf_ struct buf b;` frees b's memory when it leaves scope (base/cleanup.h's style);
 * b must be initialized (buf_init, or zeroed) before the first way out. */
#define _cleanup_buf_ _cleanup_(buf_free)

/* Empties the buffer and keeps its memory. */
void buf_reset(struct buf *b);

/* Appends `n` bytes. Returns 0, -E2BIG past the cap (the buffer is then freed) or -ENOMEM. */
int buf_add(struct buf *b, const void *data, size_t n);

/* Appends a NUL-terminated string; as buf_add(). */
int buf_adds(struct buf *b, const char *s);

/* Appends printf-formatted text; as buf_add(). */
int buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int buf_vprintf(struct buf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/* Removes the first `n` bytes (all of them if n >= len), moving the rest to the front. */
void buf_consume(struct buf *b, size_t n);

/* The contents as a NUL-terminated string ("" when empty); borrowed. */
const char *buf_str(const struct buf *b);

/* Hands the contents over to the caller (NULL when empty) and leaves the buffer empty. */
char *buf_take(struct buf *b);
