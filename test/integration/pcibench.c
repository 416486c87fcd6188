/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/integration/pcibench.c - times PCI discovery for make bench (release build):
 *   pcibench SYSFS_ROOT RUNS
 * prints the median, minimum and maximum of node_pci_scan() over RUNS scans, after the
 * one-time loading of pci.ids, and how many functions each scan found.
 *   pcibench --inventory SYSFS_ROOT PROC_ROOT FULL UPDATES [ADDRESS...]
 * runs the agent's inventory (controllers/devices/pciinv: the scan, every PCIDevice's spec and
 * blockers, host use read from PROC_ROOT): one full scan, then FULL more full scans, then UPDATES
 * updates for a change of the functions ADDRESS... (what a burst of their uevents makes), and
 * prints the median wall time and the mean CPU time (user + system, getrusage) of each kind (with
 * the copy of the specs the inventory hands on after each), run alternately, and what an update
 * read and described. Run under strace -c with (1, 0), (2, 0) and (1, 1), the
 * differences are the system calls of one full scan and of one update.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "base/err.h"
#include "base/map.h"
#include "controllers/devices/pciinv.h"
#include "node/pci.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double cpu(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec / 1e6 +
           (double)u.ru_stime.tv_sec + (double)u.ru_stime.tv_usec / 1e6;
}

/* What one kind of run took. */
struct series {
    const char *what;
    double *times, cpu;
    int runs;
    struct pciinv_work work;
};

/* One full scan (addresses NULL) or update into `s` (its i-th run). Returns 0 or -1. */
static int run_one(struct pciinv *inv, struct series *s, int i, const char *const *addresses,
                   size_t n)
{
    struct err err = {{0}};
    double c0 = cpu(), t = now();
    int r = addresses ? pciinv_update(inv, addresses, n, &err) : pciinv_scan(inv, &err);
    map_free(pciinv_want(inv)); /* the copy the inventory hands on after each */
    map_free(pciinv_unreadable(inv));
    s->times[i] = now() - t;
    s->cpu += cpu() - c0;
    pciinv_last_work(inv, &s->work);
    if (r < 0 || (addresses && r != 1)) {
        fprintf(stderr, "%s failed (%d): %s\n", s->what, r, err.msg);
        return -1;
    }
    return 0;
}

/* Prints "<what>: median X ms wall, CPU Y ms (mean) ...". */
static void print_series(struct series *s)
{
    if (s->runs == 0)
        return;
    qsort(s->times, (size_t)s->runs, sizeof(double), cmp);
    printf("%s: median %.3f ms wall, CPU %.3f ms (mean, %d runs); read %zu functions, described "
           "%zu\n",
           s->what, s->times[s->runs / 2] * 1e3, s->cpu / s->runs * 1e3, s->runs, s->work.read,
           s->work.described);
}

static int inventory_bench(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr,
                "usage: pcibench --inventory SYSFS_ROOT PROC_ROOT FULL UPDATES [ADDRESS...]\n");
        return 2;
    }
    int full = (int)strtol(argv[4], NULL, 10), updates = (int)strtol(argv[5], NULL, 10);
    struct pciinv_config c = {.node_name = "bench", .sysfs_root = argv[2], .proc_root = argv[3]};
    struct pciinv *inv = NULL;
    struct err err = {{0}};
    if (full < 0 || updates < 0 || full > 10000 || updates > 100000 || pciinv_new(&c, &inv) < 0)
        return 1;
    int r = pciinv_scan(inv, &err);
    if (r < 0)
        fprintf(stderr, "scan failed: %s\n", err.msg);
    /* alternately, so that both kinds see the same load */
    struct series f = {.what = "full scan", .runs = full, .times = calloc((size_t)full + 1, 8)};
    struct series u = {.what = "update", .runs = updates, .times = calloc((size_t)updates + 1, 8)};
    if (!f.times || !u.times)
        r = -1;
    const char *const *addresses = (const char *const *)argv + 6;
    for (int i = 0; r == 0 && (i < full || i < updates); i++) {
        if (i < full)
            r = run_one(inv, &f, i, NULL, 0);
        if (r == 0 && i < updates)
            r = run_one(inv, &u, i, addresses, (size_t)(argc - 6));
    }
    if (r == 0) {
        print_series(&f);
        print_series(&u);
    }
    free(f.times);
    free(u.times);
    pciinv_free(inv);
    return r < 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--inventory") == 0)
        return inventory_bench(argc, argv);
    if (argc != 3) {
        fprintf(stderr, "usage: pcibench SYSFS_ROOT RUNS\n");
        return 2;
    }
    int runs = (int)strtol(argv[2], NULL, 10);
    struct node_pci *p = NULL;
    double t = now();
    if (runs < 1 || runs > 10000 || node_pci_new(argv[1], NULL, &p) < 0)
        return 1;
    double load = now() - t;
    double *times = calloc((size_t)runs, sizeof(double));
    size_t count = 0;
    for (int i = 0; times && i < runs; i++) {
        struct node_pci_scan_result found = {0};
        struct err err = {{0}};
        t = now();
        if (node_pci_scan(p, &found, &err) < 0) {
            fprintf(stderr, "scan failed: %s\n", err.msg);
            free(times);
            node_pci_free(p);
            return 1;
        }
        times[i] = now() - t;
        count = found.n_devs;
        node_pci_scan_result_done(&found);
    }
    if (!times) {
        node_pci_free(p);
        return 1;
    }
    qsort(times, (size_t)runs, sizeof(double), cmp);
    printf("node_pci_scan of %zu functions: median %.1f ms (min %.1f, max %.1f, %d runs); "
           "pci.ids loaded once in %.1f ms\n",
           count, times[runs / 2] * 1e3, times[0] * 1e3, times[runs - 1] * 1e3, runs, load * 1e3);
    free(times);
    node_pci_free(p);
    return 0;
}
