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
#include <sys/stat.h>
#include <unistd.h>

/* What a descriptor is matched against: the path's text, and the device it names. */
struct wanted {
    const char *path;
    bool by_number; /* the node is a character device: match its number too */
    dev_t rdev;
};

/* Whether descriptor `name` of directory `fds` is on the wanted device: its link's text is the
 * path, or it is the same character device (a process in a chroot or another mount namespace
 * spells the path differently: /launcher/dev/vfio/3). */
static bool is_wanted(int fds, const char *name, const struct wanted *w)
{
    char link[64];
    ssize_t n = readlinkat(fds, name, link, sizeof(link) - 1);
    if (n > 0 && (link[n] = 0, strcmp(link, w->path) == 0))
        return true;
    struct stat st;
    return w->by_number && fstatat(fds, name, &st, 0) == 0 && S_ISCHR(st.st_mode) &&
           st.st_rdev == w->rdev;
}

/* Whether process directory `pid` (a file descriptor of it) has a descriptor on `w`. */
static bool holds(int pid_fd, const struct wanted *w)
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
    while (!found && (e = readdir(fds)))
        found = e->d_name[0] != '.' && is_wanted(dirfd(fds), e->d_name, w);
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

int node_holder_find(const char *proc_root, const char *path, const char *node, char *buf,
                     size_t size)
{
    struct wanted w = {.path = path};
    struct stat st;
    if (node && stat(node, &st) == 0 && S_ISCHR(st.st_mode)) {
        w.by_number = true;
        w.rdev = st.st_rdev;
    }
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
        if (holds(pid_fd, &w)) {
            describe_process(pid_fd, e->d_name, buf, size);
            found = 1;
        }
        close(pid_fd);
    }
    closedir(procs);
    return found;
}
