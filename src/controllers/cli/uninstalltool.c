/* SPDX-License-Identifier: Apache-2.0 */
/* controllers/cli/uninstalltool.c - `hostdevd uninstall-check` (see uninstalltool.h). */
#include "controllers/cli/uninstalltool.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <ev.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/json.h"
#include "controllers/objects/claimstatus.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/http.h"
#include "kube/status.h"

#define TERMINATION_LOG "/dev/termination-log"

struct check {
    struct buf out;
    int pending, claims, failed;
};

struct kind {
    struct check *c;
    const char *name;
};

static void describe(struct check *c, const char *kind, const cJSON *claim)
{
    const cJSON *spec = json_field(claim, "spec"), *status = json_field(claim, "status");
    const char *node = json_str(spec, "nodeName");
    const char *device = json_str(spec, "address");
    if (!node)
        node = json_str(status, "nodeName");
    if (!device)
        device = json_str(status, "pciAddress");
    const cJSON *ready = claimstatus_ready(claim);
    const char *state = json_same(json_str(ready, "status"), "True") ? "Ready" : "not Ready";
    const char *reason = json_str(ready, "reason");
    (void)buf_printf(&c->out, "  %s %s (node %s%s%s): %s%s%s%s\n", kind,
                     json_str(json_field(claim, "metadata"), "name"), node ? node : "?",
                     device ? ", " : "", device ? device : "", ready ? state : "no status yet",
                     reason ? " " : "", reason ? reason : "",
                     json_field(json_field(claim, "metadata"), "deletionTimestamp")
                             ? ", being deleted (its agent has not given the device back yet)"
                             : "");
    c->claims++;
}

static void on_list(const struct kube_err *err, const cJSON *obj, void *userdata)
{
    struct kind *k = userdata;
    k->c->pending--;
    if (err) {
        (void)fprintf(stderr, "hostdevd uninstall-check: cannot list %ss: HTTP %d %s\n", k->name,
                      err->http, err->message[0] ? err->message : strerror(-err->transport));
        k->c->failed++;
        return;
    }
    const cJSON *items = json_field(obj, "items");
    for (const cJSON *item = cJSON_IsArray(items) ? items->child : NULL; item; item = item->next)
        describe(k->c, k->name, item);
}

static int load_config(const char *kubeconfig, struct kube_config *cfg)
{
    struct err e = {0};
    int r = kubeconfig ? -ENOENT : kube_config_in_cluster(NULL, cfg, &e);
    if (r == -ENOENT) {
        e = (struct err){0};
        r = kube_config_load_kubeconfig(kubeconfig, NULL, cfg, &e);
    }
    if (r < 0)
        (void)fprintf(stderr, "hostdevd uninstall-check: no API server configuration: %s\n",
                      e.msg[0] ? e.msg : strerror(-r));
    return r;
}

static void report(const struct check *c, FILE *f)
{
    (void)fprintf(
            f,
            "hostdevd uninstall-check: %d claim%s remain%s; removing hostdevd now would leave "
            "their devices bound to vfio-pci (or offered for passthrough) with no agent to "
            "give them back:\n%s"
            "Stop the VMs that use them, delete the claims and wait until they are gone "
            "(each agent gives its devices back):\n"
            "  kubectl delete pcideviceclaims,usbdeviceclaims --all --wait=true\n"
            "then uninstall again. `helm uninstall --no-hooks` removes hostdevd anyway and "
            "leaves the claims and their devices as docs/install.md#uninstall says.\n",
            c->claims, c->claims == 1 ? "" : "s", c->claims == 1 ? "s" : "", c->out.data);
}

int uninstalltool_run(int argc, char **argv)
{
    const char *kubeconfig = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--kubeconfig") == 0 && i + 1 < argc)
            kubeconfig = argv[++i];
        else {
            (void)fprintf(stderr, "usage: hostdevd uninstall-check [--kubeconfig FILE]\n");
            return strcmp(argv[i], "--help") == 0 ? 0 : 2;
        }
    }
    struct kube_config cfg = {0};
    if (load_config(kubeconfig, &cfg) < 0)
        return 2;
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct kube_http *h = loop ? kube_http_new(loop, &cfg) : NULL;
    struct check c = {0};
    buf_init(&c.out, 1 << 20);
    struct kind kinds[] = {{&c, "PCIDeviceClaim"}, {&c, "USBDeviceClaim"}};
    const struct kube_resource *res[] = {&kube_res_pcideviceclaims, &kube_res_usbdeviceclaims};
    for (size_t i = 0; h && i < 2; i++)
        if (kube_client_list(h, res[i], NULL, NULL, on_list, &kinds[i]) == 0)
            c.pending++;
        else
            c.failed++;
    while (h && c.pending > 0)
        ev_run(loop, EVRUN_ONCE);
    int rc = !h || c.failed ? 2 : c.claims ? 1 : 0;
    if (rc == 0)
        puts("hostdevd uninstall-check: no PCIDeviceClaim or USBDeviceClaim: nothing would be left "
             "behind");
    else if (rc == 1) {
        report(&c, stdout);
        FILE *t = fopen(TERMINATION_LOG, "we");
        if (t) {
            report(&c, t);
            (void)fclose(t);
        }
    }
    buf_free(&c.out);
    kube_http_free(h);
    if (loop)
        ev_loop_destroy(loop);
    kube_config_done(&cfg);
    return rc;
}
