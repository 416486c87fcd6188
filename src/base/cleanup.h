/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/cleanup.h - scope-bound cleanup helpers (systemd style).
 *
 * `_cleanup_free_ char *s = ...;` frees `s` when it leaves scope; TAKE_PTR() hands ownership
 * on and leaves NULL behind. Header only; no I/O. A cJSON tree has `_cleanup_json_`
 * (base/json.h), a struct buf `_cleanup_buf_` (base/buf.h); `_cleanup_(f)` takes any function
 * of a pointer to the variable (`_cleanup_(dpapi_request_done) struct dpapi_request req = {0}`).
 *
 * Where: clang's static analyzer (make lint's clang-tidy) does not run cleanup functions, so
 * memory it sees allocated in the same file (malloc, calloc, strdup, or a static function
 * returning them) and held only by a cleanup variable is reported as leaked. Cleanups are for
 * what another file's API allocates (cJSON trees and their printed text, bufs, decoded
 * messages); a local malloc'd array stays freed by hand.
 */
#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))

static inline void freep(void *p)
{
    free(*(void **)p);
}

static inline void closep(const int *fd)
{
    if (*fd >= 0)
        close(*fd);
}

static inline void fclosep(FILE **f)
{
    if (*f)
        fclose(*f);
}

#define _cleanup_free_   _cleanup_(freep)
#define _cleanup_close_  _cleanup_(closep)
#define _cleanup_fclose_ _cleanup_(fclosep)

/* Returns the pointer and sets the variable to NULL, so its cleanup does nothing. */
#define TAKE_PTR(p)                                                                                \
    ({                                                                                             \
        __typeof__(p) _ptr_ = (p);                                                                 \
        (p) = NULL;                                                                                \
        _ptr_;                                                                                     \
    })

/* Returns the fd and sets the variable to -1. */
#define TAKE_FD(fd)                                                                                \
    ({                                                                                             \
        int _fd_ = (fd);                                                                           \
        (fd) = -1;                                                                                 \
        _fd_;                                                                                      \
    })

#define ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))
