/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node/kmod.c - loads kernel modules with libkmod (see kmod.h). Blocking; no logging.
 */
#include "node/kmod.h"

#include <errno.h>
#include <libkmod.h>
#include <string.h>
#include <sys/utsname.h>

static int load_one(struct kmod_ctx *ctx, const char *name, struct err *ret_err)
{
    struct kmod_list *list = NULL, *l;
    int r = kmod_module_new_from_lookup(ctx, name, &list);
    if (r < 0 || !list) {
        struct utsname u;
        (void)uname(&u);
        return err_set(ret_err, r < 0 ? r : -ENOENT,
                       "module %s is not in /lib/modules/%s (mount /lib/modules "
                       "from the host, or build it into the kernel)",
                       name, u.release);
    }
    kmod_list_foreach(l, list)
    {
        struct kmod_module *m = kmod_module_get_module(l);
        r = kmod_module_probe_insert_module(m, 0, NULL, NULL, NULL, NULL);
        if (r < 0)
            (void)err_set(ret_err, r, "cannot load module %s (%s): %s", name,
                          kmod_module_get_name(m), strerror(-r));
        kmod_module_unref(m);
        if (r < 0)
            break;
    }
    kmod_module_unref_list(list);
    return r < 0 ? r : 0;
}

int node_kmod_load(const char *const *names, struct err *ret_err)
{
    struct kmod_ctx *ctx = kmod_new(NULL, NULL);
    if (!ctx)
        return err_set(ret_err, -ENOMEM, "cannot initialise libkmod");
    int r = 0;
    for (const char *const *n = names; *n && r == 0; n++)
        r = load_one(ctx, *n, ret_err);
    kmod_unref(ctx);
    return r;
}
