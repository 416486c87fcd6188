/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_closewatch.c - a device node's close wakes the keys armed on it, once: real
 * inotify on files in a temporary directory, on a real event loop.
 */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "controllers/runtime/closewatch.h"

static char dir[] = "/tmp/closewatch.XXXXXX";
static char calls[256];

static void on_closed(const char *key, void *userdata)
{
    (void)userdata;
    size_t n = strlen(calls);
    (void)snprintf(calls + n, sizeof(calls) - n, "%s ", key);
}

/* Opens and closes `path` (as a VMM's exit closes its device node). */
static void open_close(const char *path, int flags)
{
    int fd = open(path, flags | O_CLOEXEC);
    CU_ASSERT_FATAL(fd >= 0);
    close(fd);
}

/* Runs the loop until nothing is pending (events are queued by the time close() returns). */
static void drain(struct ev_loop *loop)
{
    for (int i = 0; i < 3; i++)
        (void)ev_run(loop, EVRUN_NOWAIT);
}

static void test_close_wakes_once(void)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct closewatch *w = closewatch_new(loop, on_closed, NULL);
    char a[64], b[64];
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    (void)snprintf(a, sizeof(a), "%s/3", dir);
    (void)snprintf(b, sizeof(b), "%s/004", dir);
    open_close(a, O_WRONLY | O_CREAT);
    open_close(b, O_WRONLY | O_CREAT);
    calls[0] = 0;
    CU_ASSERT_EQUAL(closewatch_arm(w, a, "node1-000000040"), 0);
    CU_ASSERT_EQUAL(closewatch_arm(w, a, "node1-000000041"), 0); /* two claims, one group */
    CU_ASSERT_EQUAL(closewatch_arm(w, a, "node1-000000041"), 0); /* armed twice: called once */
    CU_ASSERT_EQUAL(closewatch_arm(w, b, "node1-0627-0001-1-1"), 0);
    CU_ASSERT_EQUAL(closewatch_armed(w), 3);
    drain(loop);
    CU_ASSERT_STRING_EQUAL(calls, ""); /* arming is no close */
    open_close(a, O_RDWR);             /* a VMM's group: read-write */
    drain(loop);
    CU_ASSERT(strstr(calls, "node1-000000040 ") && strstr(calls, "node1-000000041 "));
    CU_ASSERT_PTR_NULL(strstr(calls, "0627"));
    CU_ASSERT_EQUAL(closewatch_armed(w), 1);
    /* the close is remembered for the keys it woke, not for the others */
    double ago = closewatch_closed_ago(w, "node1-000000040");
    CU_ASSERT(ago >= 0 && ago < CLOSEWATCH_SETTLE);
    CU_ASSERT(closewatch_closed_ago(w, "node1-0627-0001-1-1") < 0);
    CU_ASSERT(closewatch_closed_ago(w, "never-armed") < 0);
    calls[0] = 0;
    open_close(a, O_RDONLY); /* one shot: the next close wakes nobody */
    drain(loop);
    CU_ASSERT_STRING_EQUAL(calls, "");
    CU_ASSERT_EQUAL(unlink(b), 0); /* the node removed (a USB device unplugged) */
    drain(loop);
    CU_ASSERT_STRING_EQUAL(calls, "node1-0627-0001-1-1 ");
    CU_ASSERT_EQUAL(closewatch_armed(w), 0);
    CU_ASSERT_EQUAL(closewatch_arm(w, b, "gone"), -ENOENT);
    CU_ASSERT_EQUAL(closewatch_arm(w, a, "again"), 0); /* left armed: freed with the watch */
    CU_ASSERT_PTR_NULL(closewatch_free(w));
    CU_ASSERT_PTR_NULL(closewatch_free(NULL));
    (void)unlink(a);
    (void)rmdir(dir);
    ev_loop_destroy(loop);
}

/* Busy with no holder right after a close is the kernel still releasing the device: looked at
 * again, nothing written; with a holder, or long after the close (or with none seen), it is
 * reported. */
static void test_settling(void)
{
    CU_ASSERT_TRUE(closewatch_settling(0.0, false));
    CU_ASSERT_TRUE(closewatch_settling(0.03, false));
    CU_ASSERT_TRUE(closewatch_settling(CLOSEWATCH_SETTLE - 0.01, false));
    CU_ASSERT_FALSE(closewatch_settling(0.03, true)); /* someone holds it: news */
    CU_ASSERT_FALSE(
            closewatch_settling(CLOSEWATCH_SETTLE, false)); /* a kernel that never lets go */
    CU_ASSERT_FALSE(closewatch_settling(-1, false));        /* no close seen */
    /* looked at again quickly at first, then less often, never more than a second apart */
    CU_ASSERT_DOUBLE_EQUAL(closewatch_settle_delay(0.0), 0.05, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(closewatch_settle_delay(0.5), 0.25, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(closewatch_settle_delay(CLOSEWATCH_SETTLE - 1), 1.0, 1e-9);
}

/* The time since a key's close is the loop's (forgotten once CLOSEWATCH_SETTLE old). */
static void test_closed_ago_expires(void)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct closewatch *w = closewatch_new(loop, on_closed, NULL);
    char d[] = "/tmp/closewatch.XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(d));
    char a[64];
    (void)snprintf(a, sizeof(a), "%s/3", d);
    open_close(a, O_RDWR | O_CREAT);
    CU_ASSERT_EQUAL(closewatch_arm(w, a, "k"), 0);
    open_close(a, O_RDWR);
    drain(loop);
    CU_ASSERT(closewatch_closed_ago(w, "k") >= 0);
    ev_sleep(0.2);
    ev_now_update(loop);
    double ago = closewatch_closed_ago(w, "k");
    CU_ASSERT(ago >= 0.2 && ago < CLOSEWATCH_SETTLE); /* the loop's time since the close */
    CU_ASSERT(closewatch_closed_ago(NULL, "k") < 0);
    closewatch_free(w);
    (void)unlink(a);
    (void)rmdir(d);
    ev_loop_destroy(loop);
}

static CU_TestInfo tests[] = {
        {"busy with no holder right after a close is not news", test_settling},
        {"the time since a key's close", test_closed_ago_expires},
        {"a close wakes the keys armed on the node, once", test_close_wakes_once},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo closewatch_suites[] = {
        {"closewatch", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
