/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/sysfs_tree.h - fake sysfs trees for tests, made by hack/mk-sysfs-fixture.sh (run
 * with posix_spawn) from a description in test/fixtures/sysfs/ or from text, in a new
 * temporary directory that sysfs_tree_remove() deletes.
 */
#pragma once

#include <stddef.h>

#ifndef FIXTURES
#define FIXTURES "test/fixtures"
#endif

struct sysfs_tree {
    char dir[256];  /* the temporary directory */
    char root[300]; /* <dir>/sys: the tree, which plays /sys */
};

/* Builds the tree described by file `description` (a path). Returns 0 or -1. */
int sysfs_tree_make(struct sysfs_tree *t, const char *description);

/* Builds the tree described by `text` (written to <dir>/description.txt first). */
int sysfs_tree_make_text(struct sysfs_tree *t, const char *text);

/* Writes `text` to <root>/<path>, creating or replacing the file. Returns 0 or -errno. */
int sysfs_tree_put(const struct sysfs_tree *t, const char *path, const char *text, size_t len);

/* Replaces whatever is at <root>/<path> (a file, a link, a directory tree) with a symbolic
 * link to `target`. Returns 0 or -errno. */
int sysfs_tree_link(const struct sysfs_tree *t, const char *path, const char *target);

/* Removes <root>/<path>: a file, a link (not followed) or a directory tree. Returns 0 or
 * -errno (-ENOENT when there is nothing). */
int sysfs_tree_unlink(const struct sysfs_tree *t, const char *path);

/* Deletes the temporary directory and everything below it (links are not followed). */
void sysfs_tree_remove(struct sysfs_tree *t);

/* Opens the tree's root into `*root` (node_sysfs_open_root). Returns 0, or -1 for a suite's
 * init to return. */
int sysfs_tree_open_root(const struct sysfs_tree *t, int *root);

/*
 * Makes node_sysfs_write() of `path` (relative to any sysfs root, as the caller names it:
 * "bus/pci/drivers/e1000e/bind") fail with -`errnum` without writing, as the kernel's sysfs
 * store would; errnum 0 removes that fault, path NULL removes every fault. The unit runner is
 * linked with -Wl,--wrap=node_sysfs_write, so calls from src/ go through the fault table.
 * Returns 0, or -ENOSPC when SYSFS_TREE_FAULTS paths fail already.
 */
#define SYSFS_TREE_FAULTS 8
int sysfs_tree_fail_write(const char *path, int errnum);

/* A suite's teardown: closes `*root` (an fd of the tree's root, or -1; set to -1) and removes
 * the tree. */
void sysfs_tree_close(struct sysfs_tree *t, int *root);
