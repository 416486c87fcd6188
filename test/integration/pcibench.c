/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/integration/pcibench.c - times PCI discovery for make bench (release build):
 *   pcibench SYSFS_ROOT RUNS
 * prints the median, minimum and maximum of node_pci_scan() over RUNS scans, after the
 * one-time loading of pci.ids, and how many functions each scan found.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

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

int main(int argc, char **argv)
{
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
