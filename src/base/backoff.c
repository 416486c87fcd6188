/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/backoff.c - exponential backoff with jitter and a reset after a healthy period.
 * See backoff.h. Pure: no clock, no randomness, no I/O, no logging.
 */
#include "base/backoff.h"

/* Not min2(): the build does not link libm. */
static double min2(double a, double b)
{
    return b < a ? b : a;
}

void backoff_init(struct backoff *b, double initial, double max, double factor, double jitter,
                  double reset_after)
{
    *b = (struct backoff){
            .initial = initial,
            .max = max,
            .factor = factor,
            .jitter = jitter,
            .reset_after = reset_after,
    };
}

double backoff_next(struct backoff *b, double now, double rand01)
{
    if (b->current <= 0 || now - b->last > b->reset_after)
        b->current = min2(b->initial, b->max);
    else
        b->current = min2(b->current * b->factor, b->max);
    b->last = now;
    double r = rand01 > 0 ? min2(rand01, 1) : 0; /* also NaN -> 0 */
    return b->current * (1 + b->jitter * r);
}

void backoff_reset(struct backoff *b)
{
    b->current = 0;
    b->last = 0;
}
