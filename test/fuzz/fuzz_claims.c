/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/fuzz/fuzz_claims.c - claim objects as the API server could send them, through the pure
 * decisions of the reconcilers (controllers/claims/pciclaim.c, usbclaim.c, nodeclaims.c,
 * claimstatus.c), on arbitrary bytes.
 *
 * Input: parts separated by the byte 0x1e: a PCIDeviceClaim, a USBDeviceClaim and its
 * USBDevice (JSON, parsed as the informer does), then fact bytes standing for what the node
 * says (the sysfs checks, the bind's outcome, the Node and the agent's heartbeat). Checks:
 * every patch is JSON; a decision to write makes a status patch, and once that patch is applied
 * (a JSON merge patch, as the API server does) the same decision writes nothing (the agent and
 * the controller go quiet instead of writing for ever); a claim in NODE_WORK names its device;
 * every refusal has a reason and a message.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controllers/claims/nodeclaims.h"
#include "controllers/claims/pciclaim.h"
#include "controllers/claims/usbclaim.h"
#include "controllers/objects/claimstatus.h"
#include "controllers/objects/pciobj.h"
#include "controllers/objects/usbobj.h"
#include "fuzzjson.h"
#include "kube/client.h"
#include "kube/names.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NOW "2026-11-25T22:00:00Z"

static const char *str_at(const cJSON *o, const char *a, const char *b)
{
    return cJSON_GetStringValue(
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, a), b));
}

/* The fact bytes, zero past their end. */
static uint8_t fact(const struct fuzz_parts *p, size_t i)
{
    return i < p->n[3] ? p->p[3][i] : 0;
}

static void pci_facts(const struct fuzz_parts *p, const cJSON *claim, const char *node,
                      struct bindplan_facts *f)
{
    static const char *const drivers[] = {"", "e1000e", "vfio-pci", "xhci_hcd"};
    const char *addr = str_at(claim, "spec", "address");
    uint8_t b = fact(p, 0);
    *f = (struct bindplan_facts){
            .node = node,
            .address = addr ? addr : "0000:00:04.0",
            .read_error = b & 1 ? -EIO : 0,
            .present = b & 2,
            .iommu_group = fact(p, 1) < 200 ? fact(p, 1) : -1,
            .driver = drivers[fact(p, 2) & 3],
            .platform = b & 4 ? "an ISA bridge" : NULL,
            .host_critical = (int)(fact(p, 2) >> 2) % 3 - 1,
            .host_why = "it holds network interface eth0, which has address 10.0.2.15",
            .group_blockers = (int)(fact(p, 3) % 4) - 1,
            .blockers = "0000:00:1f.0 (lpc_ich)",
            .unsafe =
                    b & 8 ? "0000:00:1f.0 is an ISA/LPC bridge, which the host cannot give up" : "",
            .usb_enabled = b & 16 ? "titan-0627-0001-1-1" : "",
            .recorded = pciobj_driver_recorded(claim, NULL),
            .annotation = drivers[(fact(p, 2) >> 4) & 3],
    };
}

/* What the worker could report instead of the checks' outcome (bound, failed, busy, ...). */
static void worker_outcome(const struct fuzz_parts *p, struct bindplan_outcome *o)
{
    static const char *const reasons[] = {"BindFailed", "RestoreFailed", "ModuleNotLoaded"};
    uint8_t b = fact(p, 4);
    if (!(b & 0x80))
        return;
    o->kind = (enum bindplan_outcome_kind)(b % (BINDPLAN_RELEASED + 1));
    o->group = fact(p, 1);
    o->reason = reasons[fact(p, 5) % 3];
    size_t n = p->n[3] > 6 ? p->n[3] - 6 : 0;
    (void)snprintf(o->message, sizeof(o->message), "%.*s", (int)n, (const char *)p->p[3] + 6);
    (void)snprintf(o->driver, sizeof(o->driver), "%.*s", (int)(n < 63 ? n : 63),
                   (const char *)p->p[3] + 6);
}

static void check_pci_decision(const cJSON *claim, const char *key, const char *node,
                               const struct pciclaim_decision *d)
{
    char *patch = d->write_status ? pciclaim_status_patch(claim, &d->status, NOW) : NULL;
    if (d->write_status && !patch)
        abort(); /* a write without a patch */
    if (!patch)
        return;
    cJSON *written = fuzz_apply(claim, patch);
    char *again = pciclaim_status_patch(written, &d->status, NOW);
    if (again)
        abort(); /* the write does not make the claim say what was wanted */
    (void)pciclaim_proceeds(d, written, key, node, 0);
    const cJSON *w = pciclaim_pick_written(claim, written, key, node);
    if (w && w != claim && w != written)
        abort();
    cJSON_Delete(written);
    free(patch);
}

static void pci_claim(const struct fuzz_parts *p, const cJSON *claim)
{
    const char *key = kube_meta_str(claim, "name");
    const char *n = str_at(claim, "spec", "nodeName");
    const char *node = n && strlen(n) < 64 ? n : "titan";
    key = key ? key : "";
    enum pciclaim_step step = pciclaim_next_step(claim, key, node);
    char want[KUBE_NAME_MAX + 1];
    if (step == PCICLAIM_NODE_WORK &&
        (kube_names_pcidevice(node, str_at(claim, "spec", "address"), want, sizeof(want)) < 0 ||
         strcmp(want, key) != 0 || claimstatus_finalizer_index(claim, PCIOBJ_FINALIZER) < 0))
        abort();
    fuzz_check_json_patch(pciclaim_finalizer_patch(claim, true));
    fuzz_check_json_patch(pciclaim_finalizer_patch(claim, false));
    (void)pciclaim_checks_early(claim);
    (void)pciobj_bound(claim);

    struct bindplan_facts f;
    struct bindplan_outcome o;
    struct pciclaim_decision d;
    pci_facts(p, claim, node, &f);
    bindplan_check_bind(&f, &o);
    if (o.kind == BINDPLAN_REFUSED && (!o.reason || !o.message[0]))
        abort();
    worker_outcome(p, &o);
    pciclaim_decide(claim, &o, &d);
    check_pci_decision(claim, key, node, &d);
}

/* The controller's view of the same claim: its Node and its agent's heartbeat. */
static void node_claim(const struct fuzz_parts *p, const cJSON *claim)
{
    uint8_t b = fact(p, 5);
    struct nodeclaims_node n = {
            .name = "titan",
            .exists = b & 1,
            .agent = (enum nodeclaims_agent)((b >> 1) % 4),
            .lease = "hostdevd-node-lease/titan",
            .renewed = b & 16 ? "2026-11-25T21:59:00.000000Z" : NULL,
    };
    struct nodeclaims_decision d;
    nodeclaims_decide(claim, PCIOBJ_FINALIZER, &n, &d);
    if (d.action != NODECLAIMS_CONDITION)
        return;
    char *patch = nodeclaims_status_patch(claim, &d, NOW);
    if (!patch) {
        if (kube_meta_str(claim, "resourceVersion"))
            abort();
        return;
    }
    cJSON *written = fuzz_apply(claim, patch);
    struct nodeclaims_decision again;
    nodeclaims_decide(written, PCIOBJ_FINALIZER, &n, &again);
    if (again.action == NODECLAIMS_CONDITION)
        abort(); /* the condition written does not say what was decided */
    cJSON_Delete(written);
    free(patch);
}

static void usb_claim(const struct fuzz_parts *p, const cJSON *claim, const cJSON *dev)
{
    const char *key = kube_meta_str(claim, "name");
    char node[KUBE_NAME_MAX + 1];
    key = key ? key : "";
    if (kube_names_usbdevice_node(key, node, sizeof(node)) < 0)
        (void)snprintf(node, sizeof(node), "titan");
    (void)usbclaim_next_step(claim, key, dev, node);
    (void)usbobj_device_orphaned(dev);
    (void)usbobj_device_enabled(dev);
    fuzz_check_json_patch(usbclaim_finalizer_patch(claim, true));
    fuzz_check_json_patch(usbclaim_finalizer_patch(claim, false));
    uint8_t b = fact(p, 6);
    struct usbclaim_facts f = {
            .node = node,
            .device = dev,
            .holds = usbobj_claim_holds(claim),
            .controller_claim = b & 1 ? "titan-000000140" : NULL,
            .controller_on_vfio = b & 2,
            .devnode = b & 4 ? -ENOENT : 0,
            .dev_root = "/dev",
    };
    struct usbclaim_outcome o;
    usbclaim_check(&f, key, &o);
    if (!o.reason || !o.message[0])
        abort();
    char *patch = usbclaim_status_patch(claim, node, &o, NOW);
    if (!patch)
        return;
    cJSON *written = fuzz_apply(claim, patch);
    char *again = usbclaim_status_patch(written, node, &o, NOW);
    if (again)
        abort(); /* the write does not make the claim say what was wanted */
    cJSON_Delete(written);
    free(patch);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_parts p;
    if (size > (1 << 20))
        return 0;
    fuzz_split(data, size, &p);
    cJSON *pc = fuzz_object(&p, 0), *uc = fuzz_object(&p, 1), *ud = fuzz_object(&p, 2);
    if (pc) {
        pci_claim(&p, pc);
        node_claim(&p, pc);
    }
    if (uc) {
        usb_claim(&p, uc, ud);
        node_claim(&p, uc);
    }
    cJSON_Delete(pc);
    cJSON_Delete(uc);
    cJSON_Delete(ud);
    return 0;
}
