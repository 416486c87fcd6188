/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/controllerargs.c - `hostdevd controller`'s options (see controllerargs.h).
 */
#include "controllers/controllerargs.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "controllers/runtime/leasepart.h"

static void usage(FILE *f)
{
    fputs("Usage: hostdevd controller [OPTIONS]\n"
          "  --kubeconfig PATH       kubeconfig (default $KUBECONFIG, else in-cluster)\n"
          "  --listen ADDR:PORT      health and metrics endpoint (default 0.0.0.0:9809)\n"
          "  --namespace NS          namespace of the leader Lease (default $POD_NAMESPACE,\n"
          "                          else hostdevd-system)\n"
          "  --id NAME               this replica in the election (default $POD_NAME, else the\n"
          "                          host name)\n"
          "  --kubevirt NS/NAME      the KubeVirt CR (default: the only one in the cluster)\n"
          "  --lease-duration SECS   leader lease (default 15)\n"
          "  --lease-namespace NS    namespace of the agents' heartbeat Leases (default\n"
          "                          hostdevd-node-lease)\n"
          "  -v N                    log verbosity (default 0)\n",
          f);
}

static int option(int c, const char *arg, struct controller_config *cfg)
{
    char *end;
    switch (c) {
    case 'k':
        cfg->kubeconfig = arg;
        return 0;
    case 'l':
        cfg->listen = arg;
        return 0;
    case 'n':
        cfg->namespace = arg;
        return 0;
    case 'i':
        cfg->identity = arg;
        return 0;
    case 'K':
        cfg->kubevirt = arg;
        return strchr(arg, '/') ? 0 : -EINVAL;
    case 'd':
        cfg->lease_duration = strtod(arg, &end);
        return *end || cfg->lease_duration < 3 || cfg->lease_duration > 600 ? -EINVAL : 0;
    case 'L':
        cfg->lease_namespace = arg;
        return 0;
    case 'v':
        log_set_verbosity((int)strtol(arg, &end, 10));
        return *end ? -EINVAL : 0;
    case 'h':
        usage(stdout);
        return 1;
    default:
        usage(stderr);
        return -EINVAL;
    }
}

int controllerargs_parse(int argc, char **argv, struct controller_config *ret)
{
    static const struct option opts[] = {
            {"kubeconfig", required_argument, NULL, 'k'},
            {"listen", required_argument, NULL, 'l'},
            {"namespace", required_argument, NULL, 'n'},
            {"id", required_argument, NULL, 'i'},
            {"kubevirt", required_argument, NULL, 'K'},
            {"lease-duration", required_argument, NULL, 'd'},
            {"lease-namespace", required_argument, NULL, 'L'},
            {"help", no_argument, NULL, 'h'},
            {NULL, 0, NULL, 0},
    };
    const char *ns = getenv("POD_NAMESPACE");
    *ret = (struct controller_config){.listen = "0.0.0.0:9809",
                                      .namespace = ns && ns[0] ? ns : "hostdevd-system",
                                      .identity = getenv("POD_NAME"),
                                      .lease_namespace = LEASEPART_HEARTBEAT_NAMESPACE,
                                      .lease_duration = 15};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "v:h", opts, NULL)) != -1) {
        int r = option(c, optarg, ret);
        if (r != 0) {
            if (r < 0 && c != '?')
                log_error("Invalid controller option", KV_STR("value", optarg ? optarg : ""));
            return r;
        }
    }
    return optind < argc ? -EINVAL : 0;
}
