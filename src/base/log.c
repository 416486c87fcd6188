/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/log.c - klog-compatible structured logging. See log.h.
 * Formatting is pure (log_format); log_emit() adds the clock and one write(2).
 */
#include "base/log.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"

#define LINE_CAP ((size_t)64 * 1024)

static atomic_int verbosity;
static atomic_int log_fd = 2;

void log_set_verbosity(int v)
{
    atomic_store(&verbosity, v);
}

bool log_enabled(int v)
{
    return v <= atomic_load(&verbosity);
}

void log_set_fd(int fd)
{
    atomic_store(&log_fd, fd);
}

/* Appends `s` as a Go-style quoted string, escaping quotes, backslashes and control bytes. */
static int add_quoted(struct buf *out, const char *s)
{
    int r = buf_add(out, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; r == 0 && *p; p++) {
        switch (*p) {
        case '"':
            r = buf_adds(out, "\\\"");
            break;
        case '\\':
            r = buf_adds(out, "\\\\");
            break;
        case '\n':
            r = buf_adds(out, "\\n");
            break;
        case '\t':
            r = buf_adds(out, "\\t");
            break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                r = buf_printf(out, "\\x%02x", *p);
            else
                r = buf_add(out, p, 1);
        }
    }
    return r < 0 ? r : buf_add(out, "\"", 1);
}

static int add_kv(struct buf *out, const struct log_kv *kv)
{
    int r = buf_printf(out, " %s=", kv->key);
    if (r < 0)
        return r;
    switch (kv->type) {
    case LOG_KV_INT:
        return buf_printf(out, "%lld", kv->i);
    case LOG_KV_ERRNO:
        return add_quoted(out, strerror((int)-kv->i));
    default:
        return add_quoted(out, kv->s ? kv->s : "<nil>");
    }
}

static const char *base_name(const char *file)
{
    const char *slash = strrchr(file, '/');
    return slash ? slash + 1 : file;
}

int log_format(struct buf *out, enum log_severity sev, long long usec, int tid, const char *file,
               int line, const char *msg, const struct log_kv *kvs)
{
    static const char letters[_LOG_SEVERITY_MAX] = {'I', 'W', 'E'};
    time_t secs = (time_t)(usec / 1000000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    int r = buf_printf(out, "%c%02d%02d %02d:%02d:%02d.%06lld %7d %s:%d] ", letters[sev],
                       tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, usec % 1000000,
                       tid, base_name(file), line);
    if (r == 0)
        r = add_quoted(out, msg);
    for (const struct log_kv *kv = kvs; r == 0 && kv && kv->type != LOG_KV_END; kv++)
        r = add_kv(out, kv);
    return r < 0 ? r : buf_add(out, "\n", 1);
}

void log_emit(enum log_severity sev, const char *file, int line, const char *msg,
              const struct log_kv *kvs)
{
    int saved = errno;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct buf out;
    buf_init(&out, LINE_CAP);
    long long usec = (long long)tv.tv_sec * 1000000 + tv.tv_usec;
    if (log_format(&out, sev, usec, (int)syscall(SYS_gettid), file, line, msg, kvs) == 0) {
        ssize_t n = write(atomic_load(&log_fd), out.data, out.len);
        (void)n;
    }
    buf_free(&out);
    errno = saved;
}
