/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/fuzz/fuzz_uevent.c - uevents through the agent's real receive path on arbitrary bytes:
 * a netlink message sent to the monitor that node_udev_new() opens, parsed by libudev
 * (udev_monitor_receive_device: header, properties, the subsystem filter) and read by
 * node_udev_receive() into struct node_uevent.
 *
 * The process moves to a network namespace of its own first (uevent netlink sockets are per
 * namespace), so nothing is sent to the host's udev listeners. A process cannot send as the
 * kernel (libudev drops kernel-group messages from a process), so the monitor uses the udev
 * source, whose messages are the properties behind a libudev header; the properties are parsed
 * by the same libudev code as a kernel uevent's.
 *
 * Input: one byte, then the message. With bit 0 of the byte clear, the message is the
 * properties ("ACTION=add\0SUBSYSTEM=usb\0...") and the header is made here as udevd makes it
 * (with the subsystem and devtype hashes the socket filter checks); with it set, the message is
 * sent as it is. Checks each event received: fields NUL-terminated, of the subsystems asked
 * for, action and subsystem equal to (or cut from) the properties sent.
 */
#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <linux/netlink.h>

#include "node/udev.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define UDEV_GROUP 2
#define MAX_MSG    8192

/* udevd's header (systemd's sd-device/device-monitor.c, struct monitor_netlink_header). */
struct header {
    char prefix[8];
    uint32_t magic;
    uint32_t header_size;
    uint32_t properties_off;
    uint32_t properties_len;
    uint32_t filter_subsystem_hash;
    uint32_t filter_devtype_hash;
    uint32_t filter_tag_bloom_hi;
    uint32_t filter_tag_bloom_lo;
};

static struct node_udev *mon;
static int sender = -1;

/* MurmurHash2 with seed 0: systemd's string_hash32(), which the socket filter compares. */
static uint32_t murmur2(const char *s, size_t len)
{
    const uint32_t m = 0x5bd1e995;
    uint32_t h = (uint32_t)len;
    const unsigned char *p = (const unsigned char *)s;
    for (; len >= 4; p += 4, len -= 4) {
        uint32_t k =
                (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        k *= m;
        k ^= k >> 24;
        k *= m;
        h = h * m ^ k;
    }
    switch (len) {
    case 3:
        h ^= (uint32_t)p[2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)p[1] << 8;
        /* fall through */
    case 1:
        h ^= p[0];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    return h ^ (h >> 15);
}

/* The value of property `key` in the NUL-separated `props` (the last one, as libudev takes a
 * repeated property), or NULL. */
static const char *prop(const char *props, size_t len, const char *key, size_t *ret_len)
{
    size_t klen = strlen(key);
    const char *found = NULL;
    for (size_t i = 0; i < len;) {
        size_t n = strnlen(props + i, len - i);
        if (n > klen && memcmp(props + i, key, klen) == 0 && props[i + klen] == '=') {
            *ret_len = n - klen - 1;
            found = props + i + klen + 1;
        }
        i += n + 1;
    }
    return found;
}

static uint32_t hash_of(const char *props, size_t len, const char *key)
{
    size_t n;
    const char *v = prop(props, len, key, &n);
    return v ? htonl(murmur2(v, n)) : 0;
}

static int setup(void)
{
    static const char *const subsystems[] = {"pci", "usb", NULL};
    if (mon)
        return 0;
    if (unshare(CLONE_NEWNET) < 0 && unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0)
        return -errno;
    int r = node_udev_new(NODE_UDEV_UDEV, subsystems, &mon);
    if (r < 0)
        return r;
    sender = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_KOBJECT_UEVENT);
    return sender < 0 ? -errno : 0;
}

static void send_msg(const uint8_t *msg, size_t len, bool raw)
{
    static uint8_t buf[sizeof(struct header) + MAX_MSG];
    struct sockaddr_nl to = {.nl_family = AF_NETLINK, .nl_groups = UDEV_GROUP};
    size_t n = len;
    if (!raw) {
        struct header h = {.prefix = "libudev",
                           .magic = htonl(0xfeedcafe),
                           .header_size = sizeof(h),
                           .properties_off = sizeof(h),
                           .properties_len = (uint32_t)len};
        h.filter_subsystem_hash = hash_of((const char *)msg, len, "SUBSYSTEM");
        h.filter_devtype_hash = hash_of((const char *)msg, len, "DEVTYPE");
        memcpy(buf, &h, sizeof(h));
        memcpy(buf + sizeof(h), msg, len);
        n = sizeof(h) + len;
        msg = buf;
    }
    (void)sendto(sender, msg, n, 0, (struct sockaddr *)&to, sizeof(to));
}

/* `field` is `value` (of `n` bytes), or as much of it as fits in `size`. */
static bool same_or_cut(const char *field, size_t size, const char *value, size_t n)
{
    size_t len = strlen(field);
    return len == (n < size - 1 ? n : size - 1) && memcmp(field, value, len) == 0;
}

static void check(const struct node_uevent *ev, const uint8_t *msg, size_t len, bool raw)
{
    if (!memchr(ev->action, 0, sizeof(ev->action)) ||
        !memchr(ev->subsystem, 0, sizeof(ev->subsystem)) ||
        !memchr(ev->sysname, 0, sizeof(ev->sysname)) ||
        !memchr(ev->driver, 0, sizeof(ev->driver)) ||
        !memchr(ev->mdev_state, 0, sizeof(ev->mdev_state)))
        abort();
    if (strcmp(ev->subsystem, "pci") != 0 && strcmp(ev->subsystem, "usb") != 0)
        abort(); /* the monitor asked for these only */
    size_t n;
    const char *v;
    if (raw)
        return;
    v = prop((const char *)msg, len, "ACTION", &n);
    if (!v || !same_or_cut(ev->action, sizeof(ev->action), v, n))
        abort();
    v = prop((const char *)msg, len, "SUBSYSTEM", &n);
    if (!v || !same_or_cut(ev->subsystem, sizeof(ev->subsystem), v, n))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > MAX_MSG + 1)
        return 0;
    int r = setup();
    if (r < 0) {
        fprintf(stderr, "fuzz_uevent: no netlink monitor in a namespace of its own: %s\n",
                strerror(-r));
        abort(); /* a target that tests nothing must not pass */
    }
    bool raw = data[0] & 1;
    send_msg(data + 1, size - 1, raw);
    struct node_uevent ev;
    int got = 0;
    while ((r = node_udev_receive(mon, &ev)) == 1) {
        check(&ev, data + 1, size - 1, raw);
        got++;
    }
    if (r < 0 || got > 1)
        abort(); /* one message sent: at most one event */
    return 0;
}
