/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/fuzz/fuzztmp.h - where a fuzz target that must hand its input over as a file writes it:
 * /dev/shm when there is one (tmpfs: a disk file system's create and truncate make such a
 * target several times slower), /tmp otherwise.
 */
#pragma once

#include <sys/stat.h>
#include <unistd.h>

static inline const char *fuzz_tmpdir(void)
{
    struct stat st;
    return stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0
                   ? "/dev/shm"
                   : "/tmp";
}
