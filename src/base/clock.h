/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/clock.h - an injectable monotonic clock in seconds.
 *
 * Code that waits or backs off takes a `const struct clock *`; NULL means the real
 * CLOCK_MONOTONIC. Tests pass a fake whose `now` returns a value they advance. Header only.
 */
#pragma once

#include <time.h>

struct clock {
    double (*now)(void *userdata);
    void *userdata;
};

static inline double clock_monotonic(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Seconds from the clock `c`, or from CLOCK_MONOTONIC when `c` is NULL. */
static inline double clock_now(const struct clock *c)
{
    return c ? c->now(c->userdata) : clock_monotonic();
}
