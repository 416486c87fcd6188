/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/fuzz/replay.c - a plain main() that feeds files to a fuzz target's
 * LLVMFuzzerTestOneInput, so make test replays every corpus (and every crash once found)
 * without libFuzzer. Arguments are files or directories (read one level deep).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define REPLAY_MAX_INPUT ((size_t)4 * 1024 * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    uint8_t *data = malloc(REPLAY_MAX_INPUT);
    if (!data) {
        close(fd);
        return -ENOMEM;
    }
    size_t n = 0;
    ssize_t r;
    while (n < REPLAY_MAX_INPUT && (r = read(fd, data + n, REPLAY_MAX_INPUT - n)) > 0)
        n += (size_t)r;
    close(fd);
    /* An exact-size copy, so ASan sees reads past the end of the input. */
    uint8_t *exact = malloc(n ? n : 1);
    if (exact) {
        memcpy(exact, data, n);
        LLVMFuzzerTestOneInput(exact, n);
    }
    free(exact);
    free(data);
    return exact ? 0 : -ENOMEM;
}

static int replay(const char *path, int *count)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return -errno;
    if (!S_ISDIR(st.st_mode)) {
        (*count)++;
        return replay_file(path);
    }
    DIR *d = opendir(path);
    if (!d)
        return -errno;
    int rc = 0;
    const struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char sub[4096];
        if (snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name) >= (int)sizeof(sub))
            continue;
        (*count)++;
        rc = replay_file(sub);
    }
    closedir(d);
    return rc;
}

int main(int argc, char **argv)
{
    int count = 0;
    for (int i = 1; i < argc; i++) {
        int r = replay(argv[i], &count);
        if (r < 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(-r));
            return 1;
        }
    }
    printf("replayed %d inputs\n", count);
    return count > 0 ? 0 : 1;
}
