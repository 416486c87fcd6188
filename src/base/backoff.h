/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/backoff.h - exponential backoff with jitter and a reset after a healthy period
 * (client-go's reflector: 800 ms doubling to 30 s, +up to 100% jitter, reset after 2 min).
 *
 * Pure: the caller passes the time and a random number, so tests are deterministic.
 *
 * Decisions (backoff.c), as in apimachinery's backoff manager:
 * - The reset compares with the previous failure (`last`), not with the first of a series,
 *   and only a gap strictly longer than reset_after resets.
 * - `initial` is capped at `max` too; the jitter never counts towards the cap, so a delay
 *   can reach max * (1 + jitter).
 * - `rand01` outside [0, 1] (or NaN) is clamped into [0, 1].
 */
#pragma once

struct backoff {
    double initial;     /* first delay, seconds */
    double max;         /* cap, seconds (before jitter) */
    double factor;      /* growth per failure, e.g. 2 */
    double jitter;      /* 0..1: the delay is multiplied by 1 + jitter * rand01 */
    double reset_after; /* a failure this long after the previous one starts over */
    /* state */
    double current; /* last delay before jitter; 0 = none yet */
    double last;    /* time of the last failure */
};

/* Initializes with the given parameters and no failures yet. */
void backoff_init(struct backoff *b, double initial, double max, double factor, double jitter,
                  double reset_after);

/*
 * Records a failure at time `now` and returns the delay to wait before retrying, in seconds.
 * `rand01` is a random number in [0, 1). The first failure (or the first after more than
 * reset_after seconds since the previous one) gives `initial`; each next one multiplies by
 * `factor` up to `max`; jitter is applied on top.
 */
double backoff_next(struct backoff *b, double now, double rand01);

/* Forgets the failures (after a success). */
void backoff_reset(struct backoff *b);
