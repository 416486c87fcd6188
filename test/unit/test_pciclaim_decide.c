/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_pciclaim_decide.c - the claim reconciler's pure decisions: which step a cached
 * claim starts with (another node's, malformed, finalizer, node work), every bind check's
 * reason from the worker's facts, and what a reconcile says and writes for each outcome.
 */
#include <CUnit/CUnit.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "controllers/claims/pciclaim.h"
#include "controllers/health/health.h"
#include "controllers/objects/pciobj.h"

static cJSON *claim(const char *node, const char *address, bool finalizer, bool deleting,
                    const char *status)
{
    char text[2048];
    (void)snprintf(text, sizeof(text),
                   "{\"metadata\":{\"name\":\"n-000002000\",\"generation\":1,\"uid\":\"u1\","
                   "\"resourceVersion\":\"41\"%s%s},\"spec\":{\"address\":\"%s\","
                   "\"nodeName\":\"%s\"}%s%s}",
                   finalizer ? ",\"finalizers\":[\"" PCIOBJ_FINALIZER "\"]" : "",
                   deleting ? ",\"deletionTimestamp\":\"2026-11-23T10:00:00Z\"" : "", address, node,
                   status ? ",\"status\":" : "", status ? status : "");
    cJSON *o = cJSON_Parse(text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    return o;
}

static void test_next_step(void)
{
    cJSON *c = claim("n", "0000:02:00.0", false, false, NULL);
    CU_ASSERT_EQUAL(pciclaim_next_step(c, "n-000002000", "n"), PCICLAIM_ADD_FINALIZER);
    CU_ASSERT_EQUAL(pciclaim_next_step(c, "n-000002000", "other"), PCICLAIM_NOTHING);
    CU_ASSERT_EQUAL(pciclaim_next_step(c, "n-000002000", "a"), PCICLAIM_NOTHING); /* sorts first */
    CU_ASSERT_EQUAL(pciclaim_next_step(NULL, "n-000002000", "n"), PCICLAIM_NOTHING);
    cJSON_Delete(c);
    c = claim("n", "0000:02:00.0", true, false, NULL);
    CU_ASSERT_EQUAL(pciclaim_next_step(c, "n-000002000", "n"), PCICLAIM_NODE_WORK);
    CU_ASSERT_EQUAL(pciclaim_next_step(c, "n-000003000", "n"), PCICLAIM_INVALID); /* misnamed */
    cJSON_Delete(c);
    c = claim("n", "0000:02:00.9", true, false, NULL); /* function 9 does not exist */
    CU_ASSERT_EQUAL(pciclaim_next_step(c, "n-000002009", "n"), PCICLAIM_INVALID);
    cJSON_Delete(c);
    c = claim("n", "0000:02:00.0", true, true, NULL); /* deleting: restore */
    CU_ASSERT_EQUAL(pciclaim_next_step(c, "n-000002000", "n"), PCICLAIM_NODE_WORK);
    cJSON_Delete(c);
    c = claim("n", "0000:02:00.0", false, true, NULL); /* deleting, not ours: leave it */
    CU_ASSERT_EQUAL(pciclaim_next_step(c, "n-000002000", "n"), PCICLAIM_NOTHING);
    cJSON_Delete(c);
    c = claim("n", "bogus", false, true, NULL); /* a malformed claim being deleted */
    CU_ASSERT_EQUAL(pciclaim_next_step(c, "n-000002000", "n"), PCICLAIM_NOTHING);
    cJSON_Delete(c);
    /* the longest node name a device name has room for: 243 + "-" + 9 = 253 bytes (labels of
     * 63 at most, dot-separated) */
    char node[244], key[260];
    memset(node, 'a', sizeof(node) - 1);
    node[63] = node[127] = node[191] = '.';
    node[sizeof(node) - 1] = '\0';
    (void)snprintf(key, sizeof(key), "%s-000002000", node);
    c = claim(node, "0000:02:00.0", true, false, NULL);
    CU_ASSERT_EQUAL(pciclaim_next_step(c, key, node), PCICLAIM_NODE_WORK);
    cJSON_Delete(c);
}

static struct bindplan_facts good(void)
{
    return (struct bindplan_facts){.node = "n",
                                   .address = "0000:02:00.0",
                                   .present = true,
                                   .iommu_group = 7,
                                   .driver = "e1000e",
                                   .host_why = "",
                                   .blockers = "",
                                   .annotation = "e1000e"};
}

static void check(const struct bindplan_facts *f, enum bindplan_outcome_kind kind,
                  const char *reason, const char *in_message)
{
    struct bindplan_outcome o;
    bindplan_check_bind(f, &o);
    CU_ASSERT_EQUAL(o.kind, kind);
    if (reason) {
        CU_ASSERT_PTR_NOT_NULL(o.reason);
        if (o.reason)
            CU_ASSERT_STRING_EQUAL(o.reason, reason);
    }
    if (in_message && !strstr(o.message, in_message)) {
        CU_FAIL("message");
        fprintf(stderr, "\nmessage: %s (wanted %s)\n", o.message, in_message);
    }
}

static void test_check_reasons(void)
{
    struct bindplan_facts f = good();
    f.read_error = -EIO;
    check(&f, BINDPLAN_REFUSED, "SysfsError", "cannot read device 0000:02:00.0");
    f.read_error = -EPERM; /* any error, the smallest too */
    check(&f, BINDPLAN_REFUSED, "SysfsError", "cannot read device 0000:02:00.0");
    f = good();
    f.present = false;
    check(&f, BINDPLAN_REFUSED, "DeviceNotFound", "no PCI device 0000:02:00.0 on node n");
    f = good();
    f.iommu_group = -1;
    check(&f, BINDPLAN_REFUSED, "NoIOMMUGroup", "intel_iommu=on");
    f.iommu_group = 0; /* group 0 is a group */
    check(&f, BINDPLAN_RECORD, NULL, NULL);
    f = good();
    f.platform = "a host bridge (the PCI root complex)";
    check(&f, BINDPLAN_REFUSED, "PlatformDevice", "is a host bridge");
    f = good();
    f.host_critical = 1;
    f.host_why = "it holds the network interface eth0, which has address 10.0.2.15";
    check(&f, BINDPLAN_REFUSED, "HostCritical", "eth0");
    f.host_critical = -EACCES;
    check(&f, BINDPLAN_REFUSED, "HostCritical", "cannot tell");
    check(&f, BINDPLAN_REFUSED, "HostCritical", "(Permission denied)");
    f = good();
    f.group_blockers = 1;
    f.blockers = "0000:02:00.1 (snd_hda_intel; claim n-000002001)";
    check(&f, BINDPLAN_REFUSED, "IOMMUGroupIncomplete", "claim that device too (or bind it to");
    f.group_blockers = 2; /* the plural, in both places */
    f.blockers = "0000:02:00.1 (snd_hda_intel), 0000:02:00.2 (xhci_hcd)";
    check(&f, BINDPLAN_REFUSED, "IOMMUGroupIncomplete",
          "claim those devices too (or bind them to vfio-pci)");
    f.group_blockers = 2;
    f.blockers = "0000:02:00.1 (snd_hda_intel; claim n-000002001)";
    f.unsafe = "0000:00:1f.0 is an ISA/LPC bridge (...), which the host cannot give up";
    /* never tell the user to claim the LPC bridge (nor the others, while it stays) */
    check(&f, BINDPLAN_REFUSED, "IOMMUGroupUnsafe",
          "IOMMU group 7 also holds devices the host needs: 0000:00:1f.0 is an ISA/LPC bridge "
          "(...), which the host cannot give up. The whole group would go to the VM");
    check(&f, BINDPLAN_REFUSED, "IOMMUGroupUnsafe", "cannot be passed through safely");
    struct bindplan_outcome o;
    bindplan_check_bind(&f, &o);
    CU_ASSERT_PTR_NULL(strstr(o.message, "claim that"));
    f = good();
    f.group_blockers = -ENOENT;
    check(&f, BINDPLAN_REFUSED, "SysfsError", "IOMMU group 7");
    f.group_blockers = -EPERM; /* any error, the smallest too */
    check(&f, BINDPLAN_REFUSED, "SysfsError", "IOMMU group 7");
    f = good();
    f.driver = f.annotation = "xhci_hcd"; /* a USB controller's driver sorts after vfio-pci */
    f.usb_enabled = "n-046d-c52b-1-2";
    check(&f, BINDPLAN_REFUSED, "USBDevicesEnabled", "delete their USBDeviceClaims first");
    f.driver = f.annotation = "ehci-pci"; /* ... or before it */
    check(&f, BINDPLAN_REFUSED, "USBDevicesEnabled", "(n-046d-c52b-1-2)");
    f.driver = "vfio-pci"; /* passed through already: its USB devices went with it */
    bindplan_check_bind(&f, &o);
    CU_ASSERT_NOT_EQUAL(o.kind, BINDPLAN_REFUSED);
    /* an SR-IOV PF with VFs: binding it would remove them */
    f = good();
    f.sriov_vfs = 4;
    check(&f, BINDPLAN_REFUSED, "SRIOVEnabled", "with 4 virtual functions, which binding it");
    f.driver = "vfio-pci"; /* on vfio-pci already (by hand): nothing is removed by the claim */
    bindplan_check_bind(&f, &o);
    CU_ASSERT_NOT_EQUAL(o.kind, BINDPLAN_REFUSED);
}

static void test_check_record_then_go(void)
{
    struct bindplan_facts f = good();
    struct bindplan_outcome o;
    bindplan_check_bind(&f, &o); /* first the original driver is recorded */
    CU_ASSERT_EQUAL(o.kind, BINDPLAN_RECORD);
    CU_ASSERT_STRING_EQUAL(o.driver, "e1000e");
    f.recorded = true;
    check(&f, BINDPLAN_GO, NULL, NULL);
    /* already on vfio-pci (a crash, or vfio-pci.ids=): the driver at first sight is the one
     * to restore, and a host-critical check does not apply */
    f = good();
    f.driver = "vfio-pci";
    f.host_critical = 0;
    bindplan_check_bind(&f, &o);
    CU_ASSERT_EQUAL(o.kind, BINDPLAN_RECORD);
    CU_ASSERT_STRING_EQUAL(o.driver, "e1000e");
}

/* On vfio-pci when the agent first saw it (vfio-pci.ids=, a driver_override the admin set):
 * vfio-pci is the original driver, as harvester records the driver it finds and as the DRA
 * path records it (draprep_original), never "" (which a release would read as "no driver"). */
static void test_check_record_vfio_original(void)
{
    static const char *const firsts[] = {"vfio-pci", ""}; /* "": the PCIDevice not seen yet */
    struct bindplan_facts f = good();
    struct bindplan_outcome o;
    f.driver = "vfio-pci";
    for (size_t i = 0; i < sizeof(firsts) / sizeof(firsts[0]); i++) {
        f.annotation = firsts[i];
        bindplan_check_bind(&f, &o);
        CU_ASSERT_EQUAL(o.kind, BINDPLAN_RECORD);
        CU_ASSERT_STRING_EQUAL(o.driver, "vfio-pci");
    }
    /* recorded so, the status says it, for harvester's clients too */
    struct pciclaim_decision d;
    cJSON *c = claim("n", "0000:02:00.0", true, false, NULL);
    pciclaim_decide(c, &o, &d);
    CU_ASSERT(d.write_status && d.proceed);
    CU_ASSERT_STRING_EQUAL(d.status.driver ? d.status.driver : "(null)", "vfio-pci");
    char *patch = pciclaim_status_patch(c, &d.status, "2026-11-23T10:00:01Z");
    CU_ASSERT_PTR_NOT_NULL(patch ? strstr(patch, "\"kernelDriverToUnbind\":\"vfio-pci\"") : NULL);
    free(patch);
    cJSON_Delete(c);
}

static void test_decide_refused(void)
{
    cJSON *c = claim("n", "0000:02:00.0", true, false, NULL);
    struct bindplan_outcome o = {.kind = BINDPLAN_REFUSED, .reason = "NoIOMMUGroup"};
    (void)snprintf(o.message, sizeof(o.message), "no group");
    struct pciclaim_decision d;
    pciclaim_decide(c, &o, &d);
    CU_ASSERT(d.write_status);
    CU_ASSERT(d.warning);
    CU_ASSERT_STRING_EQUAL(d.event_reason, "NoIOMMUGroup");
    CU_ASSERT_STRING_EQUAL(d.result, "refused");
    CU_ASSERT(!d.status.ready && !d.status.passthrough);
    CU_ASSERT(!d.retry && d.requeue_after == 0);
    /* the claim says it already: no write, no Event, no log line */
    cJSON *c2 = claim("n", "0000:02:00.0", true, false,
                      "{\"passthroughEnabled\":false,\"conditions\":[{\"type\":\"Ready\","
                      "\"status\":\"False\",\"reason\":\"NoIOMMUGroup\",\"message\":\"no group\","
                      "\"observedGeneration\":1}]}");
    pciclaim_decide(c2, &o, &d);
    CU_ASSERT(!d.write_status);
    CU_ASSERT_PTR_NULL(d.event_reason);
    CU_ASSERT_PTR_NULL(d.log);
    cJSON_Delete(c);
    cJSON_Delete(c2);
}

static void test_decide_bind_path(void)
{
    cJSON *c = claim("n", "0000:02:00.0", true, false, NULL);
    struct bindplan_outcome o = {.kind = BINDPLAN_RECORD};
    (void)snprintf(o.driver, sizeof(o.driver), "e1000e");
    struct pciclaim_decision d;
    pciclaim_decide(c, &o, &d);
    CU_ASSERT(d.write_status);
    CU_ASSERT_STRING_EQUAL(d.status.driver, "e1000e");
    CU_ASSERT_STRING_EQUAL(d.status.reason, "Binding");
    CU_ASSERT_STRING_EQUAL(d.fault, "record-driver");
    CU_ASSERT(d.proceed); /* the bind follows from the written claim, in the same reconcile */
    o = (struct bindplan_outcome){.kind = BINDPLAN_BOUND, .group = 7};
    pciclaim_decide(c, &o, &d);
    CU_ASSERT(d.write_status && d.status.ready && d.status.passthrough);
    CU_ASSERT(!d.proceed); /* the last write: the watch event brings the claim back */
    CU_ASSERT_STRING_EQUAL(d.status.reason, "Bound");
    CU_ASSERT_PTR_NOT_NULL(strstr(d.status.message, "/dev/vfio/7"));
    CU_ASSERT_STRING_EQUAL(d.event_reason, "Bound");
    CU_ASSERT_STRING_EQUAL(d.result, "bound");
    CU_ASSERT(!d.warning);
    o = (struct bindplan_outcome){.kind = BINDPLAN_FAILED, .reason = "BindFailed"};
    (void)snprintf(o.message, sizeof(o.message), "probe did not bind");
    pciclaim_decide(c, &o, &d);
    CU_ASSERT(d.retry && d.warning);
    CU_ASSERT_STRING_EQUAL(d.event_reason, "BindFailed");
    CU_ASSERT_STRING_EQUAL(d.result, "failed");
    CU_ASSERT(!d.proceed);
    /* the failure's words are the outcome's, said even when the status already says them */
    CU_ASSERT_STRING_EQUAL(d.message, "");
    CU_ASSERT_STRING_EQUAL(d.status.message, "probe did not bind");
    cJSON_Delete(c);
}

static void test_decide_restore_paths(void)
{
    cJSON *c = claim("n", "0000:02:00.0", true, true, "{\"kernelDriverToUnbind\":\"e1000e\"}");
    struct bindplan_outcome o = {.kind = BINDPLAN_BUSY, .group = 7};
    struct pciclaim_decision d;
    pciclaim_decide(c, &o, &d);
    CU_ASSERT(d.write_status);
    CU_ASSERT_STRING_EQUAL(d.status.reason, "DeviceInUse");
    CU_ASSERT(d.status.passthrough); /* still bound */
    CU_ASSERT_DOUBLE_EQUAL(d.requeue_after, PCICLAIM_BUSY_RETRY, 1e-9);
    CU_ASSERT(!d.remove_finalizer);
    CU_ASSERT_PTR_NOT_NULL(strstr(d.status.message, "a VM holds /dev/vfio/7"));
    (void)snprintf(o.message, sizeof(o.message), "qemu-system-x86 (pid 412)"); /* who, if known */
    pciclaim_decide(c, &o, &d);
    CU_ASSERT_PTR_NOT_NULL(strstr(d.status.message, "qemu-system-x86 (pid 412) holds /dev/vfio/7"));
    o = (struct bindplan_outcome){.kind = BINDPLAN_RESTORED};
    (void)snprintf(o.driver, sizeof(o.driver), "e1000e");
    pciclaim_decide(c, &o, &d);
    CU_ASSERT(d.remove_finalizer && !d.write_status);
    CU_ASSERT_STRING_EQUAL(d.event_reason, "Restored");
    CU_ASSERT_STRING_EQUAL(d.log, "Restored device");
    CU_ASSERT_STRING_EQUAL(d.result, "restored");
    CU_ASSERT_PTR_NOT_NULL(strstr(d.message, "restored to driver \"e1000e\""));
    /* a claim that never bound (refused): nothing was changed, and it says so */
    o = (struct bindplan_outcome){.kind = BINDPLAN_RELEASED};
    pciclaim_decide(c, &o, &d);
    CU_ASSERT(d.remove_finalizer);
    CU_ASSERT_STRING_EQUAL(d.event_reason, "Released");
    CU_ASSERT_STRING_EQUAL(d.log, "Released claim");
    CU_ASSERT_STRING_EQUAL(d.result, "released");
    CU_ASSERT_PTR_NULL(strstr(d.message, "restored to driver"));
    CU_ASSERT_PTR_NOT_NULL(strstr(d.message, "nothing was changed"));
    o = (struct bindplan_outcome){.kind = BINDPLAN_FAILED, .reason = "RestoreFailed"};
    pciclaim_decide(c, &o, &d);
    CU_ASSERT(d.retry && !d.remove_finalizer);
    cJSON_Delete(c);
}

/* After the finalizer or the record of the driver, the reconcile goes on from the written
 * claim; after anything else, or when the written claim is not this node's work, it ends. */
static void test_proceeds(void)
{
    cJSON *written =
            claim("n", "0000:02:00.0", true, false, "{\"kernelDriverToUnbind\":\"e1000e\"}");
    cJSON *bare = claim("n", "0000:02:00.0", false, false, NULL);
    cJSON *gone = claim("n", "0000:02:00.0", false, true, NULL);
    cJSON *deleting =
            claim("n", "0000:02:00.0", true, true, "{\"kernelDriverToUnbind\":\"e1000e\"}");
    struct pciclaim_decision d = {.proceed = true};
    CU_ASSERT(pciclaim_proceeds(&d, written, "n-000002000", "n", 0));
    CU_ASSERT(pciclaim_proceeds(&d, written, "n-000002000", "n", 1));
    CU_ASSERT(!pciclaim_proceeds(&d, written, "n-000002000", "n", PCICLAIM_MAX_PROCEED));
    CU_ASSERT(!pciclaim_proceeds(&d, NULL, "n-000002000", "n", 0)); /* deleted by our write */
    CU_ASSERT(!pciclaim_proceeds(&d, written, "n-000002000", "other", 0));
    CU_ASSERT(!pciclaim_proceeds(&d, bare, "n-000002000", "n", 0)); /* finalizer not there */
    CU_ASSERT(!pciclaim_proceeds(&d, gone, "n-000002000", "n", 0));
    /* deleted meanwhile: the restore follows at once (the driver is recorded) */
    CU_ASSERT(pciclaim_proceeds(&d, deleting, "n-000002000", "n", 0));
    d.proceed = false;
    CU_ASSERT(!pciclaim_proceeds(&d, written, "n-000002000", "n", 0));
    /* the record's decision proceeds only when there is something to write */
    struct bindplan_outcome o = {.kind = BINDPLAN_RECORD};
    (void)snprintf(o.driver, sizeof(o.driver), "e1000e");
    pciclaim_decide(bare, &o, &d);
    CU_ASSERT(d.write_status && d.proceed);
    cJSON *same = claim("n", "0000:02:00.0", true, false,
                        "{\"kernelDriverToUnbind\":\"e1000e\",\"passthroughEnabled\":false,"
                        "\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\","
                        "\"observedGeneration\":1,\"reason\":\"Binding\",\"message\":"
                        "\"recorded the original driver \\\"e1000e\\\"; binding to vfio-pci\"}]}");
    pciclaim_decide(same, &o, &d);
    CU_ASSERT(!d.write_status && !d.proceed);
    cJSON_Delete(written);
    cJSON_Delete(bare);
    cJSON_Delete(gone);
    cJSON_Delete(deleting);
    cJSON_Delete(same);
}

/* A new claim's first phase: only for a claim that records no driver and is not deleting; the
 * bind goes on from the written claim that shows both the finalizer and the record. */
/* A new claim of an unhealthy device is refused with the health reason and message and the way
 * back; a bound one (passthroughEnabled) or one being deleted never is; a healthy device never. */
static void test_refuse_unhealthy(void)
{
    struct health_state bad = {.healthy = false, .reason = HEALTH_NOT_RESPONDING, .since = 1};
    (void)snprintf(bad.message, sizeof(bad.message), "config space reads all ones after release");
    struct health_state fine = {.healthy = true, .reason = HEALTH_HEALTHY};
    struct bindplan_outcome o = {.kind = BINDPLAN_GO};
    cJSON *c = claim("n", "0000:02:00.0", true, false, NULL);
    CU_ASSERT_FALSE(pciclaim_refuse_unhealthy(c, &fine, "n-000002000", &o));
    CU_ASSERT_EQUAL(o.kind, BINDPLAN_GO); /* untouched */
    CU_ASSERT_TRUE(pciclaim_refuse_unhealthy(c, &bad, "n-000002000", &o));
    CU_ASSERT_EQUAL(o.kind, BINDPLAN_REFUSED);
    CU_ASSERT_STRING_EQUAL(o.reason, "DeviceUnhealthy");
    CU_ASSERT_STRING_EQUAL(o.message,
                           "device 0000:02:00.0 is unhealthy (NotResponding): config space reads "
                           "all ones after release; it is given to no new user until it is "
                           "checked again: after fixing it (a host reboot, reseating the card), "
                           "run kubectl annotate --overwrite pcidevice n-000002000 "
                           "hostdevd.io/recheck-health=$(date +%s)");
    /* the decision on it: Ready=False DeviceUnhealthy, a Warning, said once */
    struct pciclaim_decision d;
    pciclaim_decide(c, &o, &d);
    CU_ASSERT_TRUE(d.write_status);
    CU_ASSERT_FALSE(d.status.ready);
    CU_ASSERT_FALSE(d.status.passthrough);
    CU_ASSERT_STRING_EQUAL(d.event_reason, "DeviceUnhealthy");
    CU_ASSERT_TRUE(d.warning);
    cJSON_Delete(c);
    /* a refused claim is refused again (not bound yet) */
    c = claim("n", "0000:02:00.0", true, false,
              "{\"passthroughEnabled\":false,\"conditions\":[{\"type\":\"Ready\","
              "\"status\":\"False\",\"reason\":\"DeviceUnhealthy\"}]}");
    CU_ASSERT_TRUE(pciclaim_refuse_unhealthy(c, &bad, "n-000002000", &o));
    cJSON_Delete(c);
    /* bound: kept (the VM keeps its device, the release works) */
    c = claim("n", "0000:02:00.0", true, false, "{\"passthroughEnabled\":true}");
    CU_ASSERT_FALSE(pciclaim_refuse_unhealthy(c, &bad, "n-000002000", &o));
    cJSON_Delete(c);
    c = claim("n", "0000:02:00.0", true, true, NULL); /* being deleted: its release goes on */
    CU_ASSERT_FALSE(pciclaim_refuse_unhealthy(c, &bad, "n-000002000", &o));
    cJSON_Delete(c);
    /* a long message is cut, the way back is not */
    memset(bad.message, 'x', sizeof(bad.message) - 1);
    bad.message[sizeof(bad.message) - 1] = '\0';
    c = claim("n", "0000:02:00.0", true, false, NULL);
    CU_ASSERT_TRUE(pciclaim_refuse_unhealthy(c, &bad, "n-000002000", &o));
    CU_ASSERT_EQUAL(strlen(o.message), sizeof(o.message) - 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(o.message, "xxx; it is given to no new user"));
    CU_ASSERT_PTR_NOT_NULL(strstr(o.message, "recheck-health=$(date +%s)"));
    cJSON_Delete(c);
}

/* A bound claim whose device is gone says DeviceRemoved with the store's message and stays
 * passthroughEnabled (still bound: offered Unhealthy, permitted); a Warning said once. Not for
 * another reason, a claim not bound yet (refused as new) or one being deleted (released). */
static void test_hold_removed(void)
{
    struct health_state gone = {.healthy = false, .reason = HEALTH_REMOVED, .since = 1};
    (void)snprintf(gone.message, sizeof(gone.message), "it is gone from the PCI bus");
    struct health_state fatal = {.healthy = false, .reason = HEALTH_AER_FATAL, .since = 1};
    struct bindplan_outcome o = {.kind = BINDPLAN_GO};
    cJSON *c = claim("n", "0000:02:00.0", true, false,
                     "{\"passthroughEnabled\":true,\"kernelDriverToUnbind\":\"e1000e\","
                     "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\","
                     "\"reason\":\"Bound\"}]}");
    CU_ASSERT_FALSE(pciclaim_hold_removed(c, &fatal, &o));
    CU_ASSERT_EQUAL(o.kind, BINDPLAN_GO); /* untouched */
    CU_ASSERT_FALSE(pciclaim_refuse_unhealthy(c, &gone, "n-000002000", &o));
    CU_ASSERT_TRUE(pciclaim_hold_removed(c, &gone, &o));
    CU_ASSERT_EQUAL(o.kind, BINDPLAN_REFUSED);
    CU_ASSERT_STRING_EQUAL(o.reason, "DeviceRemoved");
    CU_ASSERT_STRING_EQUAL(o.message, "device 0000:02:00.0: it is gone from the PCI bus");
    struct pciclaim_decision d;
    pciclaim_decide(c, &o, &d);
    CU_ASSERT_TRUE(d.write_status);
    CU_ASSERT_TRUE(d.status.passthrough);
    CU_ASSERT_FALSE(d.status.ready);
    CU_ASSERT_STRING_EQUAL(d.event_reason, "DeviceRemoved");
    CU_ASSERT_TRUE(d.warning);
    char *patch = pciclaim_status_patch(c, &d.status, "2026-11-29T00:00:00Z");
    CU_ASSERT_PTR_NOT_NULL(strstr(patch ? patch : "", "\"passthroughEnabled\":true"));
    free(patch);
    cJSON_Delete(c);
    /* said once: a claim that says so already writes nothing */
    c = claim("n", "0000:02:00.0", true, false,
              "{\"passthroughEnabled\":true,\"kernelDriverToUnbind\":\"e1000e\","
              "\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\","
              "\"observedGeneration\":1,\"reason\":\"DeviceRemoved\",\"message\":\"device "
              "0000:02:00.0: it is gone "
              "from the PCI bus\"}]}");
    CU_ASSERT_TRUE(pciclaim_hold_removed(c, &gone, &o));
    pciclaim_decide(c, &o, &d);
    CU_ASSERT_FALSE(d.write_status);
    cJSON_Delete(c);
    c = claim("n", "0000:02:00.0", true, false, NULL); /* not bound: a new claim, refused */
    CU_ASSERT_FALSE(pciclaim_hold_removed(c, &gone, &o));
    cJSON_Delete(c);
    c = claim("n", "0000:02:00.0", true, true, "{\"passthroughEnabled\":true}"); /* deleting */
    CU_ASSERT_FALSE(pciclaim_hold_removed(c, &gone, &o));
    cJSON_Delete(c);
}

/* The bind check found no device under a bound claim (its job raced the removal's scan, or the
 * store has not said Removed yet): DeviceRemoved too, never DeviceNotFound's
 * passthroughEnabled=false; a new claim's DeviceNotFound stays as it is. */
static void test_lost_device(void)
{
    struct bindplan_outcome nf = {.kind = BINDPLAN_REFUSED, .reason = "DeviceNotFound"};
    struct bindplan_outcome o = {.kind = BINDPLAN_GO};
    cJSON *c = claim("n", "0000:02:00.0", true, false, "{\"passthroughEnabled\":true}");
    CU_ASSERT_TRUE(pciclaim_lost_device(c, &nf, &o));
    CU_ASSERT_STRING_EQUAL(o.reason, "DeviceRemoved");
    CU_ASSERT_PTR_NOT_NULL(strstr(o.message, "device 0000:02:00.0: it is gone from the PCI bus"));
    struct pciclaim_decision d;
    pciclaim_decide(c, &o, &d);
    CU_ASSERT_TRUE(d.status.passthrough);
    struct bindplan_outcome nogroup = {.kind = BINDPLAN_REFUSED, .reason = "NoIOMMUGroup"};
    CU_ASSERT_TRUE(pciclaim_lost_device(c, &nogroup, &o));
    struct bindplan_outcome other = {.kind = BINDPLAN_REFUSED, .reason = "HostCritical"};
    CU_ASSERT_FALSE(pciclaim_lost_device(c, &other, &o));
    cJSON_Delete(c);
    c = claim("n", "0000:02:00.0", true, false, NULL); /* a new claim */
    CU_ASSERT_FALSE(pciclaim_lost_device(c, &nf, &o));
    cJSON_Delete(c);
    c = claim("n", "0000:02:00.0", true, true, "{\"passthroughEnabled\":true}"); /* deleting */
    CU_ASSERT_FALSE(pciclaim_lost_device(c, &nf, &o));
    cJSON_Delete(c);
}

static void test_first_phase(void)
{
    cJSON *bare = claim("n", "0000:02:00.0", false, false, NULL);
    cJSON *recorded =
            claim("n", "0000:02:00.0", false, false, "{\"kernelDriverToUnbind\":\"igb\"}");
    cJSON *deleting = claim("n", "0000:02:00.0", false, true, NULL);
    CU_ASSERT(pciclaim_checks_early(bare));
    CU_ASSERT(!pciclaim_checks_early(recorded));
    CU_ASSERT(!pciclaim_checks_early(deleting));
    /* finalizer's response (no record yet), record's response (no finalizer yet), both */
    cJSON *fin = claim("n", "0000:02:00.0", true, false, NULL);
    cJSON *both = claim("n", "0000:02:00.0", true, false, "{\"kernelDriverToUnbind\":\"igb\"}");
    CU_ASSERT_PTR_EQUAL(pciclaim_pick_written(fin, both, "n-000002000", "n"), both);
    CU_ASSERT_PTR_EQUAL(pciclaim_pick_written(both, recorded, "n-000002000", "n"), both);
    CU_ASSERT_PTR_EQUAL(pciclaim_pick_written(recorded, fin, "n-000002000", "n"), fin);
    CU_ASSERT_PTR_EQUAL(pciclaim_pick_written(NULL, fin, "n-000002000", "n"), fin);
    CU_ASSERT_PTR_NULL(pciclaim_pick_written(recorded, NULL, "n-000002000", "n"));
    CU_ASSERT_PTR_NULL(pciclaim_pick_written(NULL, NULL, "n-000002000", "n"));
    CU_ASSERT_PTR_NULL(pciclaim_pick_written(both, fin, "n-000002000", "other"));
    cJSON_Delete(bare);
    cJSON_Delete(recorded);
    cJSON_Delete(deleting);
    cJSON_Delete(fin);
    cJSON_Delete(both);
}

static CU_TestInfo tests[] = {
        {"next step: other node, malformed, finalizer, node work", test_next_step},
        {"bind checks: every refusal reason", test_check_reasons},
        {"bind checks: record the original driver, then go", test_check_record_then_go},
        {"bind checks: on vfio-pci at first sight, vfio-pci is recorded",
         test_check_record_vfio_original},
        {"decide: refusal said once", test_decide_refused},
        {"decide: record, bound, failed", test_decide_bind_path},
        {"decide: busy, restored, released, restore failed", test_decide_restore_paths},
        {"proceed from the written claim: finalizer, record; nothing else", test_proceeds},
        {"first phase: which claims, and the written claim to go on from", test_first_phase},
        {"an unhealthy device: a new claim refused, a bound one kept", test_refuse_unhealthy},
        {"a bound claim's device gone: DeviceRemoved, still passthroughEnabled", test_hold_removed},
        {"a bound claim's device not found: DeviceRemoved too", test_lost_device},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo pciclaim_decide_suites[] = {
        {"pciclaim_decide", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
