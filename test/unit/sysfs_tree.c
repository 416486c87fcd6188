/* SPDX-License-Identifier: Apache-2.0 */
/* test/unit/sysfs_tree.c - fake sysfs trees for tests. See sysfs_tree.h. */
#include "sysfs_tree.h"

#include "node/sysfs.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define MK_SCRIPT FIXTURES "/../../hack/mk-sysfs-fixture.sh"

static int new_dir(struct sysfs_tree *t)
{
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp)
        tmp = "/tmp";
    int n = snprintf(t->dir, sizeof(t->dir), "%s/hostdevd-sysfs-XXXXXX", tmp);
    if (n < 0 || (size_t)n >= sizeof(t->dir) || !mkdtemp(t->dir)) {
        t->dir[0] = '\0';
        return -1;
    }
    snprintf(t->root, sizeof(t->root), "%s/sys", t->dir);
    return 0;
}

static int run_script(const struct sysfs_tree *t, const char *description)
{
    char bash[] = "bash", script[] = MK_SCRIPT;
    char *argv[] = {bash, script, (char *)description, (char *)t->root, NULL};
    pid_t pid;
    if (posix_spawnp(&pid, "bash", NULL, NULL, argv, environ) != 0)
        return -1;
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

int sysfs_tree_make(struct sysfs_tree *t, const char *description)
{
    if (new_dir(t) < 0)
        return -1;
    if (run_script(t, description) < 0) {
        sysfs_tree_remove(t);
        return -1;
    }
    return 0;
}

int sysfs_tree_make_text(struct sysfs_tree *t, const char *text)
{
    if (new_dir(t) < 0)
        return -1;
    char path[320];
    snprintf(path, sizeof(path), "%s/description.txt", t->dir);
    FILE *f = fopen(path, "we");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0 || run_script(t, path) < 0) {
        sysfs_tree_remove(t);
        return -1;
    }
    return 0;
}

int sysfs_tree_put(const struct sysfs_tree *t, const char *path, const char *text, size_t len)
{
    char full[1024];
    snprintf(full, sizeof(full), "%s/%s", t->root, path);
    int fd = open(full, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    ssize_t n = write(fd, text, len);
    int r = n < 0 ? -errno : (size_t)n == len ? 0 : -EIO;
    close(fd);
    return r;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

int sysfs_tree_unlink(const struct sysfs_tree *t, const char *path)
{
    char full[1024];
    struct stat st;
    snprintf(full, sizeof(full), "%s/%s", t->root, path);
    if (lstat(full, &st) < 0)
        return -errno;
    if (!S_ISDIR(st.st_mode))
        return unlink(full) < 0 ? -errno : 0;
    return nftw(full, remove_entry, 16, FTW_DEPTH | FTW_PHYS) < 0 ? -errno : 0;
}

int sysfs_tree_link(const struct sysfs_tree *t, const char *path, const char *target)
{
    char full[1024];
    int r = sysfs_tree_unlink(t, path);
    if (r < 0 && r != -ENOENT)
        return r;
    snprintf(full, sizeof(full), "%s/%s", t->root, path);
    return symlink(target, full) < 0 ? -errno : 0;
}

void sysfs_tree_remove(struct sysfs_tree *t)
{
    if (t->dir[0])
        nftw(t->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    t->dir[0] = '\0';
    t->root[0] = '\0';
}

void sysfs_tree_close(struct sysfs_tree *t, int *root)
{
    if (*root >= 0)
        close(*root);
    *root = -1;
    sysfs_tree_remove(t);
}

/* --- write faults (-Wl,--wrap=node_sysfs_write) ------------------------------------------- */

struct write_fault {
    char path[256];
    int errnum; /* 0: a free slot */
};

static struct write_fault faults[SYSFS_TREE_FAULTS];

int sysfs_tree_fail_write(const char *path, int errnum)
{
    struct write_fault *slot = NULL;
    for (size_t i = 0; i < SYSFS_TREE_FAULTS; i++) {
        if (!path || (faults[i].errnum && strcmp(faults[i].path, path) == 0))
            faults[i].errnum = 0;
        if (!faults[i].errnum && !slot)
            slot = &faults[i];
    }
    if (!path || !errnum)
        return 0;
    if (!slot)
        return -ENOSPC;
    (void)snprintf(slot->path, sizeof(slot->path), "%s", path);
    slot->errnum = errnum;
    return 0;
}

int __real_node_sysfs_write(int root_fd, const char *path, const char *value);
int __wrap_node_sysfs_write(int root_fd, const char *path, const char *value);

int __wrap_node_sysfs_write(int root_fd, const char *path, const char *value)
{
    for (size_t i = 0; path && i < SYSFS_TREE_FAULTS; i++)
        if (faults[i].errnum && strcmp(faults[i].path, path) == 0)
            return -faults[i].errnum;
    return __real_node_sysfs_write(root_fd, path, value);
}

int sysfs_tree_open_root(const struct sysfs_tree *t, int *root)
{
    *root = node_sysfs_open_root(t->root);
    return *root < 0 ? -1 : 0;
}
