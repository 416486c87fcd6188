/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node/kmod.h - loads kernel modules with libkmod, as modprobe does: by name or alias through
 * /lib/modules/$(uname -r)/modules.dep, dependencies first. A module that is already loaded or
 * built into the kernel counts as loaded. Never runs modprobe or a shell.
 *
 * This is the only file that includes <libkmod.h>. Blocking (module init can take a while):
 * call it from the worker thread. No logging: errors come back with a message.
 */
#pragma once

#include "base/err.h"

/* Loads every module of the NULL-terminated `names`. Returns 0, or -errno with `ret_err` (may be
 * NULL) saying which module and why (e.g. -ENOENT: "module vfio-pci is not in
 * /lib/modules/6.1.0-28-amd64 (mount /lib/modules from the host, ...)"). */
int node_kmod_load(const char *const *names, struct err *ret_err);
