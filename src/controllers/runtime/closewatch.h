/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/runtime/closewatch.h - wakes a reconciler when a device node it waits on is
 * closed: a claim deleted while a VM holds /dev/vfio/<group> or /dev/bus/usb/BBB/DDD is looked at
 * again the moment the VMM lets go (it exits, or detaches the device), instead of at its next
 * retry.
 *
 * inotify(7) on the node (IN_CLOSE_WRITE, IN_CLOSE_NOWRITE, IN_DELETE_SELF), one shot per arm:
 * the first close of the node by anyone calls on_closed() for each key armed on it, and the
 * watch is gone; a reconciler that still finds the device in use arms it again. The kernel
 * reports the close before the file's release has run, so the reconciler keeps its own retry for
 * the rare look that comes too early. Works through the agent's hostPath /dev (the same inode).
 * On the event loop; does not log.
 */
#pragma once

#include <ev.h>
#include <stdbool.h>

/* A VMM's exit closes its device node before the kernel has released the device: a look in
 * that moment finds it busy with no holder (a killed VMM's USB interfaces stayed on usbfs for
 * seconds in the TCG qemu node). That is not news: for CLOSEWATCH_SETTLE seconds after a
 * close, busy-with-no-holder is looked at again (closewatch_settle_delay: 50 ms at first, half
 * the time since the close later, 1 s at most) and nothing is written; past that, a device still
 * busy with no holder is reported (a kernel that never lets go). */
#define CLOSEWATCH_SETTLE 15.0

struct closewatch;

/* `on_closed(key, userdata)` is called on the loop for each key whose node was closed. */
struct closewatch *closewatch_new(struct ev_loop *loop,
                                  void (*on_closed)(const char *key, void *userdata),
                                  void *userdata);
/* Calls on_closed(key) at the next close of `path` (keys armed on one node, or on two names of
 * it, are all called). Returns 0, or -errno: no inotify, or the node is gone (-ENOENT) -
 * the caller's retry is then all there is. */
int closewatch_arm(struct closewatch *w, const char *path, const char *key);
/* Keys armed and not yet called. */
int closewatch_armed(const struct closewatch *w);
/* Seconds since `key` was last woken by a close, or -1 (never, or CLOSEWATCH_SETTLE ago or
 * more). */
double closewatch_closed_ago(struct closewatch *w, const char *key);
/* Whether a look that found the device busy (`holder_known`: and who holds it) is the kernel
 * still releasing it after the close `closed_ago` seconds ago: look again shortly, write
 * nothing. Pure. */
bool closewatch_settling(double closed_ago, bool holder_known);
/* When to look again while settling, `closed_ago` seconds after the close. Pure. */
double closewatch_settle_delay(double closed_ago);
/* Takes NULL; returns NULL. */
struct closewatch *closewatch_free(struct closewatch *w);
