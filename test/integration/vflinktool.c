/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/integration/vflinktool.c - node/vflink against a real kernel: a dummy interface here, an
 * igb PF's VFs in the qemu node. Built with the sanitizers as build/asan/vflinktool and without
 * as build/release/vflinktool (for a guest without the sanitizers' runtime).
 *
 *   vflinktool list IFACE
 *       one line per VF, as `ip link show` reports them, in key=value words:
 *       "vf=0 mac=02:00:00:00:00:01 vlan=10 qos=3 spoofchk=on trust=off link_state=auto"
 *       (spoofchk, trust: "unknown" when the driver does not report them; link_state
 *       auto|enable|disable|unknown); nothing for an interface without VFs.
 *   vflinktool set IFACE INDEX [mac=M] [vlan=V] [qos=Q] [spoofchk=on|off] [trust=on|off]
 *                  [driver=NAME]
 *       node_vflink_set() of those settings (driver= only words the messages).
 *
 * Failures print "vflinktool: <the message> (ERRNO_NAME)" on stderr and exit 1; usage errors
 * exit 2.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/vflink.h"

#define MAX_VFS 1024

static const char *onoff(int v)
{
    return v < 0 ? "unknown" : v ? "on" : "off";
}

static const char *link_state(int v)
{
    static const char *const names[] = {"auto", "enable", "disable"};
    return v >= 0 && v <= 2 ? names[v] : "unknown";
}

static int fail(int r, const struct err *err)
{
    fprintf(stderr, "vflinktool: %s (%s)\n", err->msg, strerrorname_np(-r) ?: "?");
    return 1;
}

static int list(const char *ifname)
{
    static struct node_vflink vfs[MAX_VFS];
    size_t n = 0;
    struct err err = {""};
    int r = node_vflink_list(ifname, vfs, MAX_VFS, &n, &err);
    if (r < 0)
        return fail(r, &err);
    for (size_t i = 0; i < n; i++) {
        char mac[NODE_VFLINK_MAC_STR];
        node_vflink_mac_format(vfs[i].mac, mac);
        printf("vf=%d mac=%s vlan=%d qos=%d spoofchk=%s trust=%s link_state=%s\n", vfs[i].index,
               mac, vfs[i].vlan, vfs[i].qos, onoff(vfs[i].spoofchk), onoff(vfs[i].trust),
               link_state(vfs[i].link_state));
    }
    return 0;
}

/* A decimal argument, or -2 when it is not one. */
static int number(const char *s)
{
    char *end;
    long v = strtol(s, &end, 10);
    return *s && !*end && v >= 0 && v < 1000000 ? (int)v : -2;
}

/* One key=value argument into `w`; 0, or -1 when it is not one. */
static int parse_arg(const char *a, struct node_vflink_want *w, const char **driver)
{
    const char *v = strchr(a, '=');
    if (!v)
        return -1;
    size_t k = (size_t)(v++ - a);
    struct err err = {""};
    int flag = strcmp(v, "on") == 0 ? 1 : strcmp(v, "off") == 0 ? 0 : -2;
    if (k == 3 && strncmp(a, "mac", k) == 0) {
        if (node_vflink_mac_parse(v, w->mac, &err) < 0) {
            fprintf(stderr, "vflinktool: %s\n", err.msg);
            return -1;
        }
        w->has_mac = true;
        return 0;
    }
    int *field = k == 4 && strncmp(a, "vlan", k) == 0       ? &w->vlan
                 : k == 3 && strncmp(a, "qos", k) == 0      ? &w->qos
                 : k == 8 && strncmp(a, "spoofchk", k) == 0 ? &w->spoofchk
                 : k == 5 && strncmp(a, "trust", k) == 0    ? &w->trust
                                                            : NULL;
    if (k == 6 && strncmp(a, "driver", k) == 0) {
        *driver = v;
        return 0;
    }
    if (!field)
        return -1;
    *field = field == &w->vlan || field == &w->qos ? number(v) : flag;
    return *field == -2 ? -1 : 0;
}

static int set(int argc, char **argv)
{
    struct node_vflink_want w = {
            .index = number(argv[3]), .vlan = -1, .qos = -1, .spoofchk = -1, .trust = -1};
    const char *driver = NULL;
    if (w.index < 0) {
        fprintf(stderr, "vflinktool: bad VF index %s\n", argv[3]);
        return 2;
    }
    for (int i = 4; i < argc; i++) {
        if (parse_arg(argv[i], &w, &driver) < 0) {
            fprintf(stderr, "vflinktool: bad setting %s\n", argv[i]);
            return 2;
        }
    }
    struct err err = {""};
    int r = node_vflink_set(argv[2], driver, &w, &err);
    return r < 0 ? fail(r, &err) : 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "list") == 0)
        return list(argv[2]);
    if (argc >= 4 && strcmp(argv[1], "set") == 0)
        return set(argc, argv);
    fprintf(stderr, "usage: vflinktool list IFACE\n"
                    "       vflinktool set IFACE INDEX [mac=M] [vlan=V] [qos=Q] "
                    "[spoofchk=on|off] [trust=on|off] [driver=NAME]\n");
    return 2;
}
