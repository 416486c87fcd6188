/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/err.h - the one convention for error details.
 *
 * Functions return `int`: 0 or a count on success, a negative errno on failure. When the
 * caller can use a sentence saying what went wrong (a file, a line, a sysfs path), the function
 * takes `struct err *ret_err` as its last parameter, which may be NULL, and writes it only when
 * it fails (or, for a check whose positive answer needs explaining, such as "host-critical:
 * why", when it returns 1). The message is plain text without a trailing period, fit for a
 * log value or a condition message; it is never parsed. API errors are `struct kube_err`
 * (kube/status.h), classified by predicates, not by this.
 *
 *   struct err err = {0};
 *   int r = kube_config_load_kubeconfig(path, NULL, &cfg, &err);
 *   if (r < 0)
 *       log_error("Cannot load the kubeconfig", KV_STR("why", err.msg), KV_ERRNO(r));
 *
 * No I/O, no logging.
 */
#pragma once

#define ERR_MSG_SIZE 512

struct err {
    char msg[ERR_MSG_SIZE];
};

/* Writes the message (printf format, truncated to fit) into `e` unless it is NULL and returns
 * `r`, so that `return err_set(ret_err, -EINVAL, "line %d: ...", n);` reads as one step. */
int err_set(struct err *e, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
