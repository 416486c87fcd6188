/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node/pciaer.h - a PCI function's AER error counters: the kernel's aer_dev_fatal,
 * aer_dev_nonfatal and aer_dev_correctable files (drivers/pci/pcie/aer.c), one line "<name>
 * <count>" per error bit and a last line TOTAL_ERR_FATAL, TOTAL_ERR_NONFATAL or TOTAL_ERR_COR
 * with the sum. Only the totals are taken: the bits' names change between kernels, so they are
 * data, not a schema (a line of any other form is skipped). The files exist only for a function
 * with the AER capability on a kernel with CONFIG_PCIEAER; they count since the function
 * appeared (boot or hotplug), and only while the OS owns AER (not the firmware).
 *
 * The parser is pure and fuzzed (test/fuzz/fuzz_pciaer.c); the reader is blocking (three sysfs
 * reads below a device's directory, node/sysfs). No logging.
 */
#pragma once

#include <stddef.h>

enum node_pciaer_severity {
    NODE_PCIAER_FATAL,
    NODE_PCIAER_NONFATAL,
    NODE_PCIAER_CORRECTABLE,
    NODE_PCIAER_SEVERITIES
};

/* A function's totals by severity; -1 where its file is absent or unreadable. */
struct node_pciaer {
    long long total[NODE_PCIAER_SEVERITIES];
};

/* The file of a severity: "aer_dev_fatal", "aer_dev_nonfatal", "aer_dev_correctable". */
const char *node_pciaer_file(enum node_pciaer_severity s);
/* Its name in metrics and messages: "fatal", "nonfatal", "correctable". */
const char *node_pciaer_name(enum node_pciaer_severity s);

/* The total of one file's `len` bytes at `text` (need not be NUL-terminated): the count of its
 * first line whose name starts with "TOTAL_ERR_". Returns 0 with `*ret` set, -EINVAL when there
 * is no such line or its count is not a decimal number, -ERANGE when the count does not fit in a
 * long long. */
int node_pciaer_parse(const char *text, size_t len, long long *ret);

/* Reads the three files below the device directory `dev_fd` into `ret` (each -1 when absent or
 * unreadable). Returns how many could be read (0: the function has no AER counters). */
int node_pciaer_read(int dev_fd, struct node_pciaer *ret);
