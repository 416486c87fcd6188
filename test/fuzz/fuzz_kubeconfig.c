/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/fuzz/fuzz_kubeconfig.c - kube_kubeconfig_parse() (and through it yaml_parse()) on
 * arbitrary bytes, with the current context and with "admin". Checks the contract: success
 * leaves no message and a server; failure leaves a message and nothing else.
 */
#include <stdint.h>

#include "base/err.h"
#include "kube/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void parse(const uint8_t *data, size_t size, const char *context)
{
    struct kube_kubeconfig k = {0};
    struct err err = {0};
    int r = kube_kubeconfig_parse((const char *)data, size, context, &k, &err);
    if (r == 0 && (err.msg[0] || !k.server || !k.context))
        __builtin_trap();
    if (r < 0 && (!err.msg[0] || k.server || k.context))
        __builtin_trap();
    if (r == 0)
        kube_kubeconfig_done(&k);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    parse(data, size, NULL);
    parse(data, size, "admin");
    return 0;
}
