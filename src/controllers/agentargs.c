/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/agentargs.c - `hostdevd agent`'s options (see agentargs.h).
 */
#include "controllers/agentargs.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/names.h"
#include "controllers/runtime/leasepart.h"
#include "node/udev.h"

static void usage(FILE *f)
{
    fputs("Usage: hostdevd agent [OPTIONS]\n"
          "  --node-name NAME     this node (default $NODE_NAME)\n"
          "  --kubeconfig PATH    kubeconfig (default $KUBECONFIG, else in-cluster)\n"
          "  --sysfs-root DIR     sysfs mount (default /sys)\n"
          "  --pci-ids PATH       pci.ids database (default: libpci's)\n"
          "  --usb-ids PATH       usb.ids database (default /usr/share/misc/usb.ids)\n"
          "  --dev-root DIR       device nodes, for /dev/vfio (default /dev)\n"
          "  --kubelet-dir DIR    kubelet's root; device plugins in DIR/device-plugins, the\n"
          "                       DRA plugin in DIR/plugins (default /var/lib/kubelet)\n"
          "  --cdi-dir DIR        CDI specs of prepared DRA claims (default /var/run/cdi)\n"
          "  --proc-root DIR      procfs, for mounts, swap and routes (default /proc)\n"
          "  --listen ADDR:PORT   health and metrics endpoint (default 0.0.0.0:9808)\n"
          "  --resync SECONDS     full rescan period (default 300)\n"
          "  --uevent-source SRC  kernel (default; needs no udevd), udev, or none\n"
          "  --lease-namespace NS namespace of the heartbeat Lease named like the node\n"
          "                       (default hostdevd-node-lease)\n"
          "  --heartbeat SECONDS  its duration; renewed every third (default 180)\n"
          "  --unhealthy-taint-effect EFFECT\n"
          "                       an unhealthy device's taint in its ResourceSlice: NoSchedule\n"
          "                       (default; keeps new claims off it) or NoExecute (also evicts\n"
          "                       the pods whose claims have it; docs/dra.md)\n"
          "  -v N                 log verbosity (default 0)\n",
          f);
}

static int parse_seconds(const char *s, double *ret)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v <= 0 || v > 86400)
        return -EINVAL;
    if (*end == 'm')
        v *= 60, end++;
    else if (*end == 's')
        end++;
    if (*end)
        return -EINVAL;
    *ret = v;
    return 0;
}

/* The options that take a string as it is: where each goes in the configuration. */
static const char **string_option(int c, struct agent_config *cfg)
{
    switch (c) {
    case 'n':
        return &cfg->node_name;
    case 'k':
        return &cfg->kubeconfig;
    case 's':
        return &cfg->sysfs_root;
    case 'p':
        return &cfg->pci_ids;
    case 'U':
        return &cfg->usb_ids;
    case 'D':
        return &cfg->dev_root;
    case 'P':
        return &cfg->proc_root;
    case 'K':
        return &cfg->kubelet_dir;
    case 'C':
        return &cfg->cdi_dir;
    case 'l':
        return &cfg->listen;
    case 'L':
        return &cfg->lease_namespace;
    default:
        return NULL;
    }
}

/* One option that needs checking. Returns 0, 1 (--help printed) or -EINVAL (logged). */
static int checked_option(int c, const char *arg, struct agent_config *cfg)
{
    enum node_udev_source src;
    char *end;
    long v;
    switch (c) {
    case 'r':
        if (parse_seconds(arg, &cfg->resync) == 0)
            return 0;
        log_error("Invalid --resync", KV_STR("value", arg),
                  KV_STR("hint", "seconds (300, 300s) or minutes (5m)"));
        return -EINVAL;
    case 'H':
        if (parse_seconds(arg, &cfg->heartbeat) == 0 && cfg->heartbeat >= 3)
            return 0;
        log_error("Invalid --heartbeat", KV_STR("value", arg),
                  KV_STR("hint", "at least 3 seconds (180, 180s, 3m)"));
        return -EINVAL;
    case 'u':
        cfg->uevent_source = arg;
        if (strcmp(arg, "none") == 0 || node_udev_source_from_string(arg, &src) == 0)
            return 0;
        log_error("Invalid --uevent-source", KV_STR("value", arg),
                  KV_STR("hint", "kernel, udev or none"));
        return -EINVAL;
    case 'T':
        cfg->taint_effect = arg;
        if (strcmp(arg, "NoSchedule") == 0 || strcmp(arg, "NoExecute") == 0)
            return 0;
        log_error("Invalid --unhealthy-taint-effect", KV_STR("value", arg),
                  KV_STR("hint", "NoSchedule or NoExecute"));
        return -EINVAL;
    case 'v':
        v = strtol(arg, &end, 10);
        if (*end || v < 0 || v > 10)
            return -EINVAL;
        log_set_verbosity((int)v);
        return 0;
    case 'h':
        usage(stdout);
        return 1;
    default:
        usage(stderr);
        return -EINVAL;
    }
}

int agentargs_parse(int argc, char **argv, struct agent_config *ret)
{
    static const struct option opts[] = {
            {"node-name", required_argument, NULL, 'n'},
            {"kubeconfig", required_argument, NULL, 'k'},
            {"sysfs-root", required_argument, NULL, 's'},
            {"pci-ids", required_argument, NULL, 'p'},
            {"usb-ids", required_argument, NULL, 'U'},
            {"dev-root", required_argument, NULL, 'D'},
            {"proc-root", required_argument, NULL, 'P'},
            {"kubelet-dir", required_argument, NULL, 'K'},
            {"cdi-dir", required_argument, NULL, 'C'},
            {"listen", required_argument, NULL, 'l'},
            {"resync", required_argument, NULL, 'r'},
            {"uevent-source", required_argument, NULL, 'u'},
            {"lease-namespace", required_argument, NULL, 'L'},
            {"heartbeat", required_argument, NULL, 'H'},
            {"unhealthy-taint-effect", required_argument, NULL, 'T'},
            {"help", no_argument, NULL, 'h'},
            {NULL, 0, NULL, 0},
    };
    *ret = (struct agent_config){.node_name = getenv("NODE_NAME"),
                                 .sysfs_root = "/sys",
                                 .listen = "0.0.0.0:9808",
                                 .dev_root = "/dev",
                                 .proc_root = "/proc",
                                 .kubelet_dir = "/var/lib/kubelet",
                                 .cdi_dir = "/var/run/cdi",
                                 .resync = 300,
                                 .uevent_source = "kernel",
                                 .lease_namespace = LEASEPART_HEARTBEAT_NAMESPACE,
                                 .heartbeat = LEASEPART_HEARTBEAT_SECONDS,
                                 .taint_effect = "NoSchedule"};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "v:h", opts, NULL)) != -1) {
        const char **dst = string_option(c, ret);
        int r = dst ? 0 : checked_option(c, optarg, ret);
        if (dst)
            *dst = optarg;
        else if (r != 0)
            return r;
    }
    if (optind < argc || !ret->node_name || !names_is_dns_subdomain(ret->node_name)) {
        log_error("A valid node name is required",
                  KV_STR("hint", "--node-name or NODE_NAME, a lower-case DNS subdomain"));
        return -EINVAL;
    }
    return 0;
}
