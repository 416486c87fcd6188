/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/timefmt.h - Kubernetes time formats: MicroTime "2026-11-21T14:19:19.051804Z" and
 * Time "2026-11-21T14:19:19Z" (RFC 3339, UTC). No I/O.
 */
#pragma once

#include <stddef.h>

/* Formats the current wall-clock time as a MicroTime into `out`; `size` >= 28. */
void timefmt_micro_now(char *out, size_t size);

/* Formats the current wall-clock time as a Time (seconds) into `out`; `size` >= 21. */
void timefmt_now(char *out, size_t size);
