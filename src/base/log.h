/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/log.h - klog-compatible structured text logging to stderr.
 *
 *   I1121 14:19:19.051804   13312 vfio.c:88] "Bound device to vfio-pci" device="0000:3b:00.1"
 *       iommuGroup=42     (one line)
 *
 * Messages are constant strings; details go in key=value pairs with lowerCamelCase keys:
 *   log_info("Bound device to vfio-pci", KV_STR("device", addr), KV_INT("iommuGroup", group));
 * Library layers (base, kube, node) return errors; controllers and mains log them, once.
 * Writes one line per call with a single write(2); safe from the loop and the worker thread.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct buf;

enum log_severity { LOG_INFO, LOG_WARNING, LOG_ERROR, _LOG_SEVERITY_MAX };

enum log_kv_type { LOG_KV_END, LOG_KV_STR, LOG_KV_INT, LOG_KV_ERRNO };

struct log_kv {
    const char *key;
    enum log_kv_type type;
    const char *s;
    long long i;
};

#define KV_STR(k, v) ((struct log_kv){.key = (k), .type = LOG_KV_STR, .s = (v)})
#define KV_INT(k, v) ((struct log_kv){.key = (k), .type = LOG_KV_INT, .i = (long long)(v)})
/* `err` is a negative errno, logged as err="No such file or directory". */
#define KV_ERRNO(err) ((struct log_kv){.key = "err", .type = LOG_KV_ERRNO, .i = (long long)(err)})

#ifdef __CPPCHECK__ /* cppcheck 2.10 does not know __VA_OPT__ */
#define LOG_KVS(...) ((const struct log_kv[]){__VA_ARGS__})
#else
#define LOG_KVS(...) ((const struct log_kv[]){__VA_ARGS__ __VA_OPT__(, ){.type = LOG_KV_END}})
#endif

#define log_at(sev, v, msg, ...)                                                                   \
    do {                                                                                           \
        if (log_enabled(v))                                                                        \
            log_emit((sev), __FILE__, __LINE__, (msg), LOG_KVS(__VA_ARGS__));                      \
    } while (0)

#define log_info(msg, ...)    log_at(LOG_INFO, 0, msg, __VA_ARGS__)
#define log_warning(msg, ...) log_at(LOG_WARNING, 0, msg, __VA_ARGS__)
#define log_error(msg, ...)   log_at(LOG_ERROR, 0, msg, __VA_ARGS__)
/* Info at verbosity `v` (shown with -v=v or higher), as klog's V(v).Info. */
#define log_v(v, msg, ...) log_at(LOG_INFO, (v), msg, __VA_ARGS__)

/* Sets the verbosity (klog -v). Default 0. */
void log_set_verbosity(int v);
bool log_enabled(int v);

/* Redirects output to `fd` (default 2); for tests. */
void log_set_fd(int fd);

void log_emit(enum log_severity sev, const char *file, int line, const char *msg,
              const struct log_kv *kvs);

/*
 * Formats one line (with the trailing newline) into `out`, as log_emit() writes it.
 * `usec` is microseconds since the epoch. Pure; exposed for tests.
 */
int log_format(struct buf *out, enum log_severity sev, long long usec, int tid, const char *file,
               int line, const char *msg, const struct log_kv *kvs);
