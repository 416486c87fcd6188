/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/cli/vfiotool.c - `hostdevd vfio` (see vfiotool.h). `bind` makes a claim's checks
 * first (controllers/binding/pcibind.c: the same functions, the same messages) and refuses what
 * a claim refuses unless --force.
 */
#include "controllers/cli/vfiotool.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "controllers/binding/pcibind.h"
#include "node/kmod.h"
#include "node/sysfs.h"
#include "node/vfio.h"

static void usage(FILE *f)
{
    fputs("Usage: hostdevd vfio show|bind|restore ADDRESS [--driver ORIGINAL] [--force]\n"
          "                     [--sysfs-root DIR] [--proc-root DIR] [--dev-root DIR]\n"
          "  show     the device's driver, driver_override and IOMMU group\n"
          "  bind     a claim's checks first (an IOMMU group, every member of it free, not a\n"
          "           platform device, not used by the host: mounts, swap, a network with an\n"
          "           address or the default route, no SR-IOV VFs); then "
          "driver_override=vfio-pci,\n"
          "           unbind, drivers_probe, verify (loads vfio-pci). Refused with the claim's\n"
          "           message unless --force (you know better: bound anyway, with a warning)\n"
          "  restore  clear driver_override, unbind vfio-pci, drivers_probe, verify; with\n"
          "           --driver, bind that driver if probing did not; refused while a process\n"
          "           holds /dev/vfio/<group> (a VM)\n",
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

struct opts {
    const char *original, *proc_root, *dev_root;
    bool force;
};

/* The claim's checks for binding `address` (pcibind, check only): 0 when it may be bound, 1
 * (said) when a claim would refuse it, or when --force overrides that (warned) -1. */
static int checks(int fd, const char *address, const struct opts *o)
{
    char node[256] = "this-node";
    (void)gethostname(node, sizeof(node) - 1);
    struct pcibind_env env = {
            .sysfs_fd = fd, .node_name = node, .dev_root = o->dev_root, .proc_root = o->proc_root};
    struct pcibind_job j = {.env = &env, .check_only = true};
    (void)snprintf(j.address, sizeof(j.address), "%s", address);
    pcibind_run(&j.wj);
    if (j.out.kind != BINDPLAN_REFUSED)
        return 0;
    if (o->force) {
        log_warning("Binding with --force what a claim refuses", KV_STR("device", address),
                    KV_STR("reason", j.out.reason), KV_STR("message", j.out.message));
        return -1;
    }
    fprintf(stderr,
            "refused: %s: %s\n(a PCIDeviceClaim would be refused the same; --force binds it "
            "anyway)\n",
            j.out.reason, j.out.message);
    return 1;
}

/* The restore's check, the agent's own: a process (a VM) holds the device's IOMMU group. */
static bool held(int fd, const struct node_vfio_dev *d, const struct opts *o)
{
    struct pcibind_env env = {.sysfs_fd = fd, .dev_root = o->dev_root, .proc_root = o->proc_root};
    char who[256];
    if (!pcibind_group_held(&env, d, who, sizeof(who)))
        return false;
    fprintf(stderr,
            "refused: %s holds /dev/vfio/%d; restore when it lets go (stop the VM or detach the "
            "device)\n",
            who[0] ? who : "a process", d->iommu_group);
    return true;
}

static int run(int fd, const char *verb, const char *address, const struct opts *o)
{
    const char *original = o->original;
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
    if (goal == NODE_VFIO_BIND && checks(fd, address, o) > 0)
        return 1;
    if (goal == NODE_VFIO_RESTORE && held(fd, &d, o))
        return 1;
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
            {"proc-root", required_argument, NULL, 'p'},
            {"dev-root", required_argument, NULL, 'D'},
            {"force", no_argument, NULL, 'f'},
            {"help", no_argument, NULL, 'h'},
            {NULL, 0, NULL, 0},
    };
    struct opts o = {.original = "", .proc_root = "/proc", .dev_root = "/dev"};
    const char *root = "/sys";
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'd')
            o.original = optarg;
        else if (c == 's')
            root = optarg;
        else if (c == 'p')
            o.proc_root = optarg;
        else if (c == 'D')
            o.dev_root = optarg;
        else if (c == 'f')
            o.force = true;
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
    int rc = run(fd, argv[optind], argv[optind + 1], &o);
    close(fd);
    return rc;
}
