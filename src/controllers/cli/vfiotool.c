/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/cli/vfiotool.c - `hostdevd vfio` (see vfiotool.h).
 */
#include "controllers/cli/vfiotool.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "node/kmod.h"
#include "node/sysfs.h"
#include "node/vfio.h"

static void usage(FILE *f)
{
    fputs("Usage: hostdevd vfio show|bind|restore ADDRESS [--driver ORIGINAL] [--sysfs-root DIR]\n"
          "  show     the device's driver, driver_override and IOMMU group\n"
          "  bind     driver_override=vfio-pci, unbind, drivers_probe, verify (loads vfio-pci)\n"
          "  restore  clear driver_override, unbind vfio-pci, drivers_probe, verify; with\n"
          "           --driver, bind that driver if probing did not\n",
          f);
}

static void print_step(const char *goal, const char *step, void *arg)
{
    (void)goal;
    (void)arg;
    printf(" %s", step);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int show(const struct node_vfio_dev *d)
{
    if (!d->present) {
        printf("%s: no such PCI device\n", d->address);
        return 1;
    }
    printf("%s driver=%s driver_override=%s iommu_group=%d\n", d->address,
           d->driver[0] ? d->driver : "(none)", d->override[0] ? d->override : "(none)",
           d->iommu_group);
    return 0;
}

static int run(int fd, const char *verb, const char *address, const char *original)
{
    static const char *const mods[] = {"vfio-pci", "vfio_iommu_type1", NULL};
    struct node_vfio_dev d;
    struct err err = {""};
    int r = node_vfio_observe(fd, address, &d);
    if (r < 0) {
        log_error("Cannot read the device", KV_STR("device", address), KV_ERRNO(r));
        return 1;
    }
    if (strcmp(verb, "show") == 0)
        return show(&d);
    enum node_vfio_goal goal = strcmp(verb, "bind") == 0 ? NODE_VFIO_BIND : NODE_VFIO_RESTORE;
    if (goal == NODE_VFIO_BIND && (r = node_kmod_load(mods, &err)) < 0) {
        log_error("Cannot load vfio-pci", KV_STR("why", err.msg), KV_ERRNO(r));
        return 1;
    }
    printf("%s %s: steps", verb, address);
    double t0 = now();
    r = node_vfio_converge(fd, address, goal, original, print_step, NULL, &d, &err);
    double ms = (now() - t0) * 1000;
    printf(" (%.1f ms)\n", ms);
    if (r < 0) {
        log_error("Failed", KV_STR("why", err.msg), KV_ERRNO(r));
        return 1;
    }
    return show(&d);
}

int vfiotool_run(int argc, char **argv)
{
    static const struct option opts[] = {
            {"driver", required_argument, NULL, 'd'},
            {"sysfs-root", required_argument, NULL, 's'},
            {"help", no_argument, NULL, 'h'},
            {NULL, 0, NULL, 0},
    };
    const char *original = "", *root = "/sys";
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'd')
            original = optarg;
        else if (c == 's')
            root = optarg;
        else {
            usage(c == 'h' ? stdout : stderr);
            return c == 'h' ? 0 : 2;
        }
    }
    if (argc - optind != 2 ||
        (strcmp(argv[optind], "show") != 0 && strcmp(argv[optind], "bind") != 0 &&
         strcmp(argv[optind], "restore") != 0)) {
        usage(stderr);
        return 2;
    }
    int fd = node_sysfs_open_root(root);
    if (fd < 0) {
        log_error("Cannot open the sysfs root", KV_STR("root", root), KV_ERRNO(fd));
        return 1;
    }
    int rc = run(fd, argv[optind], argv[optind + 1], original);
    close(fd);
    return rc;
}
