/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node/udev.h - kernel device events (uevents) through a libudev monitor.
 *
 * The agent treats uevents as hints: any add, remove, bind, unbind or change of a watched
 * subsystem makes it rescan sysfs (debounced, in the controller), so nothing here has to be
 * complete or ordered. The monitor listens to the kernel's netlink group by default, which
 * works without udevd (a minimal host, the qemu test node, a container without /run/udev);
 * the "udev" source gets the events after udevd has processed them instead.
 *
 * The monitor's socket is non-blocking: the caller watches node_udev_fd() on its loop and
 * calls node_udev_receive() until it returns 0. When the kernel dropped events because the
 * socket's buffer was full, receive returns -ENOBUFS once: the caller must assume it missed
 * something and rescan everything.
 *
 * node_udev_list_usb() enumerates the USB devices of the real /sys with libudev's enumerator, so
 * that a test on a real kernel can compare node/usb's scan with it.
 *
 * This is the only file that includes <libudev.h>. The monitor does not block; the enumeration
 * reads sysfs. Does not log.
 */
#pragma once

#include <stddef.h>

struct node_udev;

enum node_udev_source {
    NODE_UDEV_KERNEL, /* raw kernel uevents (netlink group 1) */
    NODE_UDEV_UDEV,   /* events re-broadcast by udevd (group 2); none when udevd is absent */
};

struct node_uevent {
    char action[16];     /* "add", "remove", "bind", "unbind", "change", ... */
    char subsystem[32];  /* "pci", "usb", ... */
    char sysname[64];    /* "0000:00:1f.6", "2-1.4", ... ("" when the kernel sent none) */
    char driver[64];     /* DRIVER= of the event, "" when none */
    char mdev_state[16]; /* MDEV_STATE= ("registered", "unregistered": the kernel's change event
                            on a device that became or stopped being an mdev parent, whatever
                            its subsystem), "" when none */
};

/* Opens a monitor for the NULL-terminated list of `subsystems` (e.g. {"pci", "usb", NULL}), or
 * for every subsystem when `subsystems` is NULL (an mdev parent can be of any). Returns 0 and sets
 * `*ret`, or -errno (-EPERM without CAP_NET_ADMIN for the udev source, -EPROTONOSUPPORT where
 * netlink uevents do not exist). */
int node_udev_new(enum node_udev_source source, const char *const *subsystems,
                  struct node_udev **ret);

/* The file descriptor to watch for readability. */
int node_udev_fd(const struct node_udev *u);

/* Receives one event into `*ret`. Returns 1 with an event, 0 when none is pending, -ENOBUFS
 * when events were lost (rescan), or -EBADF, -ENOTSOCK, -EFAULT when the socket is broken.
 * Events of other subsystems never come out (the kernel source cannot filter in the socket;
 * libudev filters after parsing), and neither do messages libudev cannot parse: they are
 * skipped, whatever error its parser gave (a malformed message must not end the stream). */
int node_udev_receive(struct node_udev *u, struct node_uevent *ret);

/* Closes the monitor. Accepts NULL; returns NULL. */
struct node_udev *node_udev_free(struct node_udev *u);

/* Parses a source name ("kernel", "udev"); -EINVAL for anything else. */
int node_udev_source_from_string(const char *s, enum node_udev_source *ret);

/* The sysnames of the USB devices of /sys ("1-2", "3-1.4"; subsystem "usb" with DEVTYPE
 * usb_device, root hubs "usbN" left out), sorted with strcmp, as libudev's enumerator finds them
 * (it reads every uevent file; no udevd needed). On success `*ret_names` is a NULL-terminated
 * array of `*ret_count` strings, freed with node_sysfs_names_free() (node/sysfs.h). Returns 0 or
 * -errno. */
int node_udev_list_usb(char ***ret_names, size_t *ret_count);
