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

static CU_TestInfo tests[] = {
        {"a close wakes the keys armed on the node, once", test_close_wakes_once},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo closewatch_suites[] = {
        {"closewatch", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
