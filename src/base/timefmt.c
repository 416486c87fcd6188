/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/timefmt.c - Kubernetes time formats. See timefmt.h.
 */
#include "base/timefmt.h"

#include <stdbool.h>
#include <stdio.h>
#include <sys/time.h>
#include <time.h>

static void format(char *out, size_t size, bool micro)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    char date[32];
    (void)strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm);
    if (micro)
        (void)snprintf(out, size, "%s.%06ldZ", date, (long)tv.tv_usec);
    else
        (void)snprintf(out, size, "%sZ", date);
}

void timefmt_micro_now(char *out, size_t size)
{
    format(out, size, true);
}

void timefmt_now(char *out, size_t size)
{
    format(out, size, false);
}
