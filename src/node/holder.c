/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node/holder.c - which process holds a device node: see holder.h.
 */
#include "node/holder.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Whether process directory `pid` (a file descriptor of it) has a descriptor on `target`. */
static bool holds(int pid_fd, const char *target)
{
    int fd = openat(pid_fd, "fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *fds = fd >= 0 ? fdopendir(fd) : NULL;
    if (!fds) {
        if (fd >= 0)
            close(fd);
        return false;
    }
    const struct dirent *e;
    bool found = false;
    char link[64];
    while (!found && (e = readdir(fds))) {
        ssize_t n = readlinkat(dirfd(fds), e->d_name, link, sizeof(link) - 1);
        found = n > 0 && (link[n] = 0, strcmp(link, target) == 0);
    }
    closedir(fds);
    return found;
}

/* "<comm> (pid N)" of process directory `pid_fd`. */
static void describe_process(int pid_fd, const char *pid, char *buf, size_t size)
{
    char comm[64] = "";
    int fd = openat(pid_fd, "comm", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, comm, sizeof(comm) - 1) : -1;
    if (fd >= 0)
        close(fd);
    comm[n > 0 ? n : 0] = 0;
    comm[strcspn(comm, "\n")] = 0;
    (void)snprintf(buf, size, "%s (pid %s)", comm[0] ? comm : "?", pid);
}

int node_holder_find(const char *proc_root, const char *path, char *buf, size_t size)
{
    DIR *procs = opendir(proc_root);
    if (!procs)
        return -errno;
    const struct dirent *e;
    int found = 0;
    while (!found && (e = readdir(procs))) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        int pid_fd = openat(dirfd(procs), e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (pid_fd < 0)
            continue;
        if (holds(pid_fd, path)) {
            describe_process(pid_fd, e->d_name, buf, size);
            found = 1;
        }
        close(pid_fd);
    }
    closedir(procs);
    return found;
}
