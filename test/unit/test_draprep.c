/* SPDX-License-Identifier: Apache-2.0 */
/* test/unit/test_draprep.c - a ResourceClaim's preparation planned (controllers/dra/draprep.h) and
 * the DRA plugin's messages (kubelet/draapi.h). */
#include <CUnit/CUnit.h>
#include <cjson/cJSON.h>
#include <ev.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "controllers/dra/draprep.h"
#include "controllers/health/health.h"
#include "controllers/runtime/part.h"
#include "kubelet/draapi.h"

#define UID "0b7f9c1e-5b1a-4c6e-9d2a-3f4e5a6b7c8d"

static cJSON *claim(const char *uid, const char *results, const char *pod_claim)
{
    char text[4096];
    (void)snprintf(text, sizeof(text),
                   "{\"metadata\": {\"namespace\": \"vms\", \"name\": \"vm1-nic-x7k2\", \"uid\": "
                   "\"%s\"%s%s%s},"
                   " \"status\": {\"allocation\": {\"devices\": {\"results\": %s}}}}",
                   uid,
                   pod_claim ? ", \"annotations\": {\"resource.kubernetes.io/pod-claim-name\": \""
                             : "",
                   pod_claim ? pod_claim : "", pod_claim ? "\"}" : "", results);
    cJSON *c = cJSON_Parse(text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    return c;
}

#define OURS(req, dev)                                                                             \
    "{\"request\": \"" req                                                                         \
    "\", \"driver\": \"vfio-pci.hostdevd.io\", \"pool\": \"titan\", \"device\": \"" dev "\"}"

static void test_address(void)
{
    char a[20];
    CU_ASSERT_EQUAL(draprep_address("pci-0000-65-00-0", a, sizeof(a)), 0);
    CU_ASSERT_STRING_EQUAL(a, "0000:65:00.0");
    CU_ASSERT_EQUAL(draprep_address("pci-10000-0a-1f-7", a, sizeof(a)), 0);
    CU_ASSERT_STRING_EQUAL(a, "10000:0a:1f.7");
    const char *bad[] = {"",
                         "pci-",
                         "pci-0000-65-00",
                         "pci-0000-65-00-8",
                         "pci-0000-65-00-0-",
                         "pci-000-65-00-0",
                         "pci-0000-6G-00-0",
                         "pci-0000-65-00-0x",
                         "gpu-0000-65-00-0",
                         "pci-0000-AB-00-0",
                         "pci-000000000-65-00-0"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CU_ASSERT_EQUAL(draprep_address(bad[i], a, sizeof(a)), -EINVAL);
    CU_ASSERT_EQUAL(draprep_address("pci-0000-65-00-0", a, 12), -EINVAL); /* does not fit */
    char u[40];
    CU_ASSERT_EQUAL(draprep_address("mdev-0c7ac1d4-6e2a-4f3b-9b1e-1d2c3e4f5a61", u, sizeof(u)), 0);
    CU_ASSERT_STRING_EQUAL(u, "0c7ac1d4-6e2a-4f3b-9b1e-1d2c3e4f5a61");
    CU_ASSERT_TRUE(draprep_is_mdev(u));
    CU_ASSERT_FALSE(draprep_is_mdev("0000:65:00.0"));
    CU_ASSERT_EQUAL(draprep_address("mdev-0C7AC1D4-6e2a-4f3b-9b1e-1d2c3e4f5a61", u, sizeof(u)),
                    -EINVAL);
    CU_ASSERT_EQUAL(draprep_address("mdev-0c7ac1d4-6e2a-4f3b-9b1e-1d2c3e4f5a6", u, sizeof(u)),
                    -EINVAL);
    CU_ASSERT_EQUAL(draprep_address("mdev-0c7ac1d4x6e2a-4f3b-9b1e-1d2c3e4f5a61", u, sizeof(u)),
                    -EINVAL);
}

static void test_parse(void)
{
    struct draprep_claim c;
    struct err e = {""};
    cJSON *j = claim(
            UID,
            "[" OURS("nic",
                     "pci-0000-65-00-0") ","
                                         "{\"request\": \"gpu\", \"driver\": \"gpu.example.com\", "
                                         "\"pool\": \"titan\", \"device\": \"gpu-0\"},"
                                         "{\"request\": \"nic\", \"driver\": "
                                         "\"vfio-pci.hostdevd.io\", \"pool\": \"other\", "
                                         "\"device\": \"pci-0000-66-00-0\"}," OURS(
                                                 "nic2/intel", "pci-0000-65-00-1") "]",
            "nic");
    CU_ASSERT_EQUAL_FATAL(draprep_parse(j, UID, "vfio-pci.hostdevd.io", "titan", &c, &e), 0);
    CU_ASSERT_EQUAL(c.n, 2); /* another driver's and another pool's left out */
    CU_ASSERT_STRING_EQUAL(c.devices[0].address, "0000:65:00.0");
    CU_ASSERT_STRING_EQUAL(c.devices[1].request, "nic2/intel");
    CU_ASSERT_STRING_EQUAL(c.pod_claim, "nic");
    CU_ASSERT_STRING_EQUAL(c.namespace_, "vms");
    draprep_claim_done(&c);
    /* another uid: the claim was made again */
    CU_ASSERT_EQUAL(draprep_parse(j, "other-uid", "vfio-pci.hostdevd.io", "titan", &c, &e),
                    -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "deleted and made again"));
    cJSON_Delete(j);
    /* not allocated */
    j = cJSON_Parse("{\"metadata\": {\"namespace\": \"vms\", \"name\": \"c\", \"uid\": \"" UID
                    "\"}}");
    CU_ASSERT_EQUAL(draprep_parse(j, UID, "vfio-pci.hostdevd.io", "titan", &c, &e), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "is not allocated"));
    cJSON_Delete(j);
    /* a device name that is not ours, and one allocated twice */
    j = claim(UID, "[" OURS("nic", "eth0") "]", NULL);
    CU_ASSERT_EQUAL(draprep_parse(j, UID, "vfio-pci.hostdevd.io", "titan", &c, &e), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "\"eth0\""));
    cJSON_Delete(j);
    j = claim(UID, "[" OURS("a", "pci-0000-65-00-0") "," OURS("b", "pci-0000-65-00-0") "]", NULL);
    CU_ASSERT_EQUAL(draprep_parse(j, UID, "vfio-pci.hostdevd.io", "titan", &c, &e), -EINVAL);
    cJSON_Delete(j);
    /* none of ours: nothing to do */
    j = claim(UID, "[]", NULL);
    CU_ASSERT_EQUAL(draprep_parse(j, UID, "vfio-pci.hostdevd.io", "titan", &c, &e), 0);
    CU_ASSERT_EQUAL(c.n, 0);
    draprep_claim_done(&c);
    cJSON_Delete(j);
    /* garbage of every kind is an error, never a crash */
    static const char odd_results[] =
            "{\"metadata\": {\"namespace\": \"a\", \"name\": \"b\", \"uid\": \"" UID "\"},"
            " \"status\": {\"allocation\": {\"devices\": {\"results\": [5, null, {\"driver\": "
            "1}]}}}}";
    const char *odd[] = {"null", "[]", "{\"metadata\": 5}", "{\"metadata\": {\"name\": 1}}",
                         odd_results};
    for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
        j = cJSON_Parse(odd[i]);
        int r = draprep_parse(j, UID, "vfio-pci.hostdevd.io", "titan", &c, &e);
        CU_ASSERT(r == -EINVAL || (r == 0 && c.n == 0));
        draprep_claim_done(&c);
        cJSON_Delete(j);
    }
}

static struct draprep_claim two_devices(const char *pod_claim)
{
    struct draprep_claim c = {.namespace_ = "vms", .name = "vm1-nic-x7k2", .uid = UID};
    (void)snprintf(c.pod_claim, sizeof(c.pod_claim), "%s", pod_claim);
    c.devices = calloc(2, sizeof(*c.devices));
    c.n = 2;
    (void)snprintf(c.devices[0].request, sizeof(c.devices[0].request), "nic/intel");
    (void)snprintf(c.devices[0].name, sizeof(c.devices[0].name), "pci-0000-65-00-0");
    (void)snprintf(c.devices[0].address, sizeof(c.devices[0].address), "0000:65:00.0");
    (void)snprintf(c.devices[1].request, sizeof(c.devices[1].request), "nic/intel");
    (void)snprintf(c.devices[1].name, sizeof(c.devices[1].name), "pci-0000-65-00-1");
    (void)snprintf(c.devices[1].address, sizeof(c.devices[1].address), "0000:65:00.1");
    return c;
}

static const char *str_at(const cJSON *o, const char *path)
{
    char p[256], *save = NULL;
    (void)snprintf(p, sizeof(p), "%s", path);
    for (char *t = strtok_r(p, ".", &save); t && o; t = strtok_r(NULL, ".", &save))
        o = cJSON_IsArray(o) ? cJSON_GetArrayItem(o, (int)strtol(t, NULL, 10))
                             : cJSON_GetObjectItemCaseSensitive(o, t);
    return cJSON_GetStringValue(o);
}

static void test_cdi(void)
{
    struct draprep_claim c = two_devices("");
    int groups[] = {44, 45};
    cJSON *spec = draprep_cdi_spec(
            &c, groups, "/dev", "/var/lib/kubelet/plugins/x/dra-device-metadata/vms_vm1-nic-x7k2");
    CU_ASSERT_PTR_NOT_NULL_FATAL(spec);
    CU_ASSERT_STRING_EQUAL(str_at(spec, "kind"), "vfio-pci.hostdevd.io/vfio");
    cJSON *devs = cJSON_GetObjectItemCaseSensitive(spec, "devices");
    CU_ASSERT_EQUAL(cJSON_GetArraySize(devs), 3); /* two devices, one metadata mount */
    CU_ASSERT_STRING_EQUAL(str_at(devs, "0.name"), UID "-pci-0000-65-00-0");
    CU_ASSERT_STRING_EQUAL(str_at(devs, "0.containerEdits.deviceNodes.0.path"), "/dev/vfio/vfio");
    CU_ASSERT_STRING_EQUAL(str_at(devs, "0.containerEdits.deviceNodes.1.path"), "/dev/vfio/44");
    CU_ASSERT_PTR_NULL(str_at(devs, "0.containerEdits.deviceNodes.1.hostPath"));
    CU_ASSERT_STRING_EQUAL(str_at(devs, "1.name"), UID "_nic");
    CU_ASSERT_STRING_EQUAL(
            str_at(devs, "1.containerEdits.mounts.0.hostPath"),
            "/var/lib/kubelet/plugins/x/dra-device-metadata/vms_vm1-nic-x7k2/nic/metadata.json");
    CU_ASSERT_STRING_EQUAL(str_at(devs, "1.containerEdits.mounts.0.containerPath"),
                           "/var/run/kubernetes.io/dra-device-attributes/resourceclaims/"
                           "vm1-nic-x7k2/nic/vfio-pci.hostdevd.io-metadata.json");
    CU_ASSERT_STRING_EQUAL(str_at(devs, "1.containerEdits.mounts.0.options.0"), "ro");
    CU_ASSERT_STRING_EQUAL(str_at(devs, "2.containerEdits.deviceNodes.1.path"), "/dev/vfio/45");
    cJSON_Delete(spec);
    /* another /dev: the host path says where the node really is */
    spec = draprep_cdi_spec(&c, groups, "/tmp/dev", "/m");
    CU_ASSERT_STRING_EQUAL(str_at(spec, "devices.0.containerEdits.deviceNodes.1.hostPath"),
                           "/tmp/dev/vfio/44");
    cJSON_Delete(spec);
    char d[512], m[512];
    draprep_cdi_ids(&c, 1, d, m, sizeof(d));
    CU_ASSERT_STRING_EQUAL(d, "vfio-pci.hostdevd.io/vfio=" UID "-pci-0000-65-00-1");
    CU_ASSERT_STRING_EQUAL(m, "vfio-pci.hostdevd.io/vfio=" UID "_nic");
    draprep_claim_done(&c);
    /* from a template: the pod's claim name in the container path */
    c = two_devices("nic-claim");
    CU_ASSERT_EQUAL(draprep_container_path(&c, "nic", d, sizeof(d)), 0);
    CU_ASSERT_STRING_EQUAL(d, "/var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/"
                              "nic-claim/nic/vfio-pci.hostdevd.io-metadata.json");
    draprep_claim_done(&c);
}

static void test_metadata(void)
{
    struct draprep_claim c = two_devices("nic-claim");
    cJSON *attrs = cJSON_Parse("{\"resource.kubernetes.io/pciBusID\": {\"string\": "
                               "\"0000:65:00.0\"}, \"numaNode\": {\"int\": 1}}");
    const cJSON *a[] = {attrs, NULL};
    cJSON *m = draprep_metadata(&c, "nic", "vfio-pci.hostdevd.io", "titan", a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_STRING_EQUAL(str_at(m, "apiVersion"), "metadata.resource.k8s.io/v1alpha1");
    CU_ASSERT_STRING_EQUAL(str_at(m, "kind"), "DeviceMetadata");
    CU_ASSERT_STRING_EQUAL(str_at(m, "metadata.uid"), UID);
    CU_ASSERT_STRING_EQUAL(str_at(m, "podClaimName"), "nic-claim");
    CU_ASSERT_STRING_EQUAL(str_at(m, "requests.0.name"), "nic/intel");
    CU_ASSERT_STRING_EQUAL(str_at(m, "requests.0.devices.0.driver"), "vfio-pci.hostdevd.io");
    CU_ASSERT_STRING_EQUAL(str_at(m, "requests.0.devices.0.pool"), "titan");
    const cJSON *d1 = cJSON_GetArrayItem(
            cJSON_GetObjectItemCaseSensitive(
                    cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(m, "requests"), 0),
                    "devices"),
            1);
    const cJSON *bus = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(d1, "attributes"), "resource.kubernetes.io/pciBusID");
    CU_ASSERT_STRING_EQUAL(str_at(bus, "string"),
                           "0000:65:00.1"); /* no attributes: pciBusID alone */
    const cJSON *d0 = cJSON_GetArrayItem(
            cJSON_GetObjectItemCaseSensitive(
                    cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(m, "requests"), 0),
                    "devices"),
            0);
    CU_ASSERT_EQUAL(cJSON_GetObjectItemCaseSensitive(
                            cJSON_GetObjectItemCaseSensitive(
                                    cJSON_GetObjectItemCaseSensitive(d0, "attributes"), "numaNode"),
                            "int")
                            ->valueint,
                    1);
    cJSON_Delete(m);
    cJSON_Delete(attrs);
    draprep_claim_done(&c);
}

static void test_original(void)
{
    CU_ASSERT_STRING_EQUAL(draprep_original("e1000e", ""), "e1000e");
    CU_ASSERT_STRING_EQUAL(draprep_original("e1000e", "vfio-pci"), "e1000e");
    CU_ASSERT_STRING_EQUAL(draprep_original("", "e1000e"), "");
    /* on vfio-pci already: the driver at first sight, if another */
    CU_ASSERT_STRING_EQUAL(draprep_original("vfio-pci", "e1000e"), "e1000e");
    CU_ASSERT_STRING_EQUAL(draprep_original("vfio-pci", "vfio-pci"), "vfio-pci");
    CU_ASSERT_STRING_EQUAL(draprep_original("vfio-pci", ""), "vfio-pci");
}

static void test_busy_error(void)
{
    char buf[256];
    draprep_busy_error("0000:00:04.0", 3, "qemu-system-x86 (pid 412)", "e1000e", buf, sizeof(buf));
    CU_ASSERT_STRING_EQUAL(buf, "device 0000:00:04.0: qemu-system-x86 (pid 412) holds /dev/vfio/3 "
                                "(its IOMMU group); it gets its driver e1000e back once released");
    /* the holder not found (another mount namespace, no permission): still the group */
    draprep_busy_error("0000:00:04.0", 3, "", "", buf, sizeof(buf));
    CU_ASSERT_STRING_EQUAL(buf, "device 0000:00:04.0: a process holds /dev/vfio/3 (its IOMMU "
                                "group); it gets its driver (none) back once released");
    draprep_busy_error("0000:00:04.0", 3, NULL, "e1000e", buf, sizeof(buf));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, ": a process holds /dev/vfio/3 "));
    draprep_busy_error("0000:00:04.0", 3, "qemu-system-x86 (pid 412)", "e1000e", buf, 16);
    CU_ASSERT_STRING_EQUAL(buf, "device 0000:00:"); /* cut, terminated */
}

/* Prepare refuses a PCI function the health store has something against, with its sentence; an
 * error already there stays; an mdev or a healthy device is no refusal. */
static void test_unhealthy(void)
{
    struct part_env env = {.loop = EV_DEFAULT};
    struct health *h = health_part.make(&env);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    char buf[1024] = "";
    CU_ASSERT_FALSE(draprep_unhealthy(NULL, "0000:65:00.0", "n-000065000", buf, sizeof(buf)));
    CU_ASSERT_FALSE(draprep_unhealthy(h, "0000:65:00.0", "n-000065000", buf, sizeof(buf)));
    health_report(h, "0000:65:00.0", HEALTH_ID_CHANGED, "reads 8086:ffff, not 8086:1572");
    CU_ASSERT_TRUE(draprep_unhealthy(h, "0000:65:00.0", "n-000065000", buf, sizeof(buf)));
    CU_ASSERT_STRING_EQUAL(buf,
                           "device 0000:65:00.0 is unhealthy (IdChanged): reads 8086:ffff, not "
                           "8086:1572; it is given to no new user until it is checked again: "
                           "after fixing it (a host reboot, reseating the card), run kubectl "
                           "annotate --overwrite pcidevice n-000065000 "
                           "hostdevd.io/recheck-health=$(date +%s)");
    (void)snprintf(buf, sizeof(buf), "held by PCIDeviceClaim n-000065000");
    CU_ASSERT_TRUE(draprep_unhealthy(h, "0000:65:00.0", "n-000065000", buf, sizeof(buf)));
    CU_ASSERT_STRING_EQUAL(buf, "held by PCIDeviceClaim n-000065000"); /* the first error stays */
    buf[0] = '\0';
    CU_ASSERT_FALSE(
            draprep_unhealthy(h, "0b5e1a3c-6f2d-4e8a-9c1b-2d3e4f5a6b7c", "", buf, sizeof(buf)));
    health_clear(h, "0000:65:00.0");
    CU_ASSERT_FALSE(draprep_unhealthy(h, "0000:65:00.0", "n-000065000", buf, sizeof(buf)));
    CU_ASSERT_STRING_EQUAL(buf, "");
    health_part.free(h);
}

static void test_checkpoint(void)
{
    struct draprep_claim c = two_devices("nic-claim");
    const char *orig[] = {"e1000e", "vfio-pci"};
    int groups[] = {44, 45};
    cJSON *ck = draprep_checkpoint_new();
    CU_ASSERT_EQUAL(draprep_checkpoint_put(ck, &c, orig, NULL, false), 0);
    CU_ASSERT_STRING_EQUAL(draprep_checkpoint_original(ck, UID, "0000:65:00.0"), "e1000e");
    CU_ASSERT_PTR_NULL(draprep_checkpoint_original(ck, UID, "0000:66:00.0"));
    CU_ASSERT_PTR_NULL(draprep_checkpoint_original(ck, "other", "0000:65:00.0"));
    CU_ASSERT_EQUAL(draprep_checkpoint_put(ck, &c, orig, groups, true), 0); /* replaces */
    char who[256];
    CU_ASSERT(draprep_checkpoint_holder(ck, "0000:65:00.1", NULL, who, sizeof(who)));
    CU_ASSERT_STRING_EQUAL(who, "vms/vm1-nic-x7k2");
    CU_ASSERT(!draprep_checkpoint_holder(ck, "0000:65:00.1", UID, who, sizeof(who)));
    char **addrs = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL(draprep_checkpoint_addresses(ck, &addrs, &n), 0);
    CU_ASSERT_EQUAL(n, 2);
    for (size_t i = 0; i < n; i++)
        free(addrs[i]);
    free(addrs);
    /* through text and back */
    char *text = cJSON_PrintUnformatted(ck);
    cJSON *back = NULL;
    struct err e = {""};
    CU_ASSERT_EQUAL_FATAL(draprep_checkpoint_parse(text, &back, &e), 0);
    struct draprep_claim r;
    const char **ro = NULL;
    int *rg = NULL;
    CU_ASSERT_EQUAL(
            draprep_checkpoint_entry(draprep_checkpoint_claim(back, UID), UID, &r, &ro, &rg), 0);
    CU_ASSERT_EQUAL(r.n, 2);
    CU_ASSERT_STRING_EQUAL(r.pod_claim, "nic-claim");
    CU_ASSERT_STRING_EQUAL(ro[1], "vfio-pci");
    CU_ASSERT_EQUAL(rg[0], 44);
    CU_ASSERT_STRING_EQUAL(r.devices[0].request, "nic/intel");
    free(ro);
    free(rg);
    draprep_claim_done(&r);
    draprep_checkpoint_remove(back, UID);
    CU_ASSERT_PTR_NULL(draprep_checkpoint_claim(back, UID));
    cJSON_Delete(back);
    free(text);
    /* what is not a checkpoint is refused, whole */
    static const char wrong_address[] =
            "{\"version\": 1, \"claims\": {\"u\": {\"namespace\": \"a\", \"name\": \"b\", "
            "\"devices\": [{\"request\": \"r\", \"name\": \"pci-0000-65-00-0\", \"address\": "
            "\"0000:65:00.1\", \"original\": \"\", \"group\": 1}]}}}";
    const char *bad[] = {"",
                         "[]",
                         "{\"version\": 2, \"claims\": {}}",
                         "{\"version\": 1}",
                         wrong_address,
                         "{\"version\": 1, \"claims\": {\"u\": {\"devices\": []}}}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        back = NULL;
        CU_ASSERT(draprep_checkpoint_parse(bad[i], &back, &e) < 0);
        CU_ASSERT_PTR_NULL(back);
    }
    cJSON_Delete(ck);
    draprep_claim_done(&c);
}

static void test_messages(void)
{
    struct buf b;
    struct err e = {""};
    buf_init(&b, 1 << 20);
    struct draapi_claim in[] = {{(char *)"vms", (char *)UID, (char *)"vm1-nic"},
                                {(char *)"default", (char *)"u2", (char *)"c2"}};
    CU_ASSERT_EQUAL(draapi_encode_claims(in, 2, true, &b), 0);
    struct draapi_claims out;
    CU_ASSERT_EQUAL_FATAL(draapi_decode_claims((const uint8_t *)b.data, b.len, true, &out, &e), 0);
    CU_ASSERT_EQUAL(out.n, 2);
    CU_ASSERT_STRING_EQUAL(out.v[0].uid, UID);
    CU_ASSERT_STRING_EQUAL(out.v[1].namespace_, "default");
    draapi_claims_done(&out);
    /* bad claims refused with a sentence */
    struct draapi_claim bad[] = {{(char *)"vms", (char *)"", (char *)"n"},
                                 {(char *)"a/b", (char *)"u", (char *)"n"},
                                 {(char *)"vms", (char *)"u", (char *)"n\n"}};
    for (size_t i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL(draapi_encode_claims(&bad[i], 1, false, &b), 0);
        CU_ASSERT_EQUAL(draapi_decode_claims((const uint8_t *)b.data, b.len, false, &out, &e),
                        -EINVAL);
        CU_ASSERT(e.msg[0] != '\0');
    }
    CU_ASSERT_EQUAL(draapi_decode_claims((const uint8_t *)"\xff\xff\xff", 3, true, &out, &e),
                    -EINVAL);
    /* answers, both ways */
    const char *reqs[] = {"nic"}, *ids[] = {"k=a", "k=b"};
    struct draapi_device dev = {reqs, 1, "titan", "pci-0000-65-00-0", ids, 2};
    struct draapi_answer ans[] = {{UID, &dev, 1, NULL},
                                  {"u2", NULL, 0, "device 0000:65:00.1: gone"}};
    CU_ASSERT_EQUAL(draapi_encode_prepared(ans, 2, &b), 0);
    struct draapi_result *res = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL_FATAL(draapi_decode_answers((const uint8_t *)b.data, b.len, true, &res, &n, &e),
                          0);
    CU_ASSERT_EQUAL_FATAL(n, 2);
    CU_ASSERT_STRING_EQUAL(res[0].uid, UID);
    CU_ASSERT_EQUAL_FATAL(res[0].n_devices, 1);
    CU_ASSERT_STRING_EQUAL(res[0].devices[0].cdi_ids[1], "k=b");
    CU_ASSERT_STRING_EQUAL(res[0].devices[0].pool, "titan");
    CU_ASSERT_STRING_EQUAL(res[1].error, "device 0000:65:00.1: gone");
    draapi_results_free(res, n);
    CU_ASSERT_EQUAL(draapi_encode_unprepared(ans, 2, &b), 0);
    CU_ASSERT_EQUAL_FATAL(
            draapi_decode_answers((const uint8_t *)b.data, b.len, false, &res, &n, &e), 0);
    CU_ASSERT_PTR_NULL(res[0].error);
    CU_ASSERT_STRING_EQUAL(res[1].error, "device 0000:65:00.1: gone");
    draapi_results_free(res, n);
    /* registration */
    char type[64], name[64], ep[256];
    bool v1 = false, ok = false;
    CU_ASSERT_EQUAL(draapi_encode_info("vfio-pci.hostdevd.io", "/p/dra.sock", &b), 0);
    CU_ASSERT_EQUAL(
            draapi_decode_info((const uint8_t *)b.data, b.len, type, name, ep, sizeof(ep), &v1, &e),
            0);
    CU_ASSERT_STRING_EQUAL(type, "DRAPlugin");
    CU_ASSERT_STRING_EQUAL(name, "vfio-pci.hostdevd.io");
    CU_ASSERT_STRING_EQUAL(ep, "/p/dra.sock");
    CU_ASSERT(v1);
    bool health = false;
    CU_ASSERT_EQUAL(draapi_info_health((const uint8_t *)b.data, b.len, &health, &e), 0);
    CU_ASSERT(health); /* kubelet opens the health stream only when the versions list it */
    /* RegistrationStatus{plugin_registered: false, error: "no"}: 08 00 12 02 'n' 'o' */
    char why[8];
    CU_ASSERT_EQUAL(regapi_decode_status((const uint8_t *)"\x08\x00\x12\x02no", 6, &ok, why,
                                         sizeof(why), &e),
                    0);
    CU_ASSERT(!ok);
    CU_ASSERT_STRING_EQUAL(why, "no");
    CU_ASSERT_EQUAL(regapi_decode_status((const uint8_t *)"\x08\x01", 2, &ok, why, sizeof(why), &e),
                    0);
    CU_ASSERT(ok);
    CU_ASSERT_EQUAL(
            regapi_decode_status((const uint8_t *)"\x12\x09no", 4, &ok, why, sizeof(why), &e),
            -EINVAL);
    buf_free(&b);
}

/* An mdev's metadata carries its UUID under "mdevUUID", the key KubeVirt v1.9.0 reads (no
 * pciBusID), even without the slice's attributes. */
static void test_metadata_mdev(void)
{
    struct draprep_device devs[] = {{"gpu", "mdev-0c7ac1d4-6e2a-4f3b-9b1e-1d2c3e4f5a61",
                                     "0c7ac1d4-6e2a-4f3b-9b1e-1d2c3e4f5a61"}};
    struct draprep_claim c = {"vms", "vm1-gpu", UID, "", devs, 1};
    cJSON *m = draprep_metadata(&c, "gpu", "vfio-pci.hostdevd.io", "titan", NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_STRING_EQUAL(str_at(m, "requests.0.devices.0.name"),
                           "mdev-0c7ac1d4-6e2a-4f3b-9b1e-1d2c3e4f5a61");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetArrayItem(
                    cJSON_GetObjectItemCaseSensitive(
                            cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(m, "requests"), 0),
                            "devices"),
                    0),
            "attributes");
    CU_ASSERT_STRING_EQUAL(str_at(cJSON_GetObjectItemCaseSensitive(a, "mdevUUID"), "string"),
                           "0c7ac1d4-6e2a-4f3b-9b1e-1d2c3e4f5a61");
    CU_ASSERT_PTR_NULL(cJSON_GetObjectItemCaseSensitive(a, "resource.kubernetes.io/pciBusID"));
    cJSON_Delete(m);
}

/* A prepared mdev's checkpoint entry reads back (its UUID as the address): the unprepare and a
 * restarted plugin's load take it (a 20-byte address buffer once made it "malformed"). */
static void test_checkpoint_mdev(void)
{
    struct draprep_device devs[] = {{"gpu", "mdev-0c7ac1d4-6e2a-4f3b-9b1e-1d2c3e4f5a61",
                                     "0c7ac1d4-6e2a-4f3b-9b1e-1d2c3e4f5a61"}};
    struct draprep_claim c = {"vms", "vm1-gpu", UID, "", devs, 1};
    const char *orig[] = {"vfio-pci"};
    int groups[] = {200};
    cJSON *ck = draprep_checkpoint_new();
    CU_ASSERT_EQUAL_FATAL(draprep_checkpoint_put(ck, &c, orig, groups, true), 0);
    char *text = cJSON_PrintUnformatted(ck);
    cJSON *back = NULL;
    struct err e = {""};
    CU_ASSERT_EQUAL_FATAL(draprep_checkpoint_parse(text, &back, &e), 0);
    struct draprep_claim r = {0};
    const char **ro = NULL;
    int *rg = NULL;
    CU_ASSERT_EQUAL_FATAL(
            draprep_checkpoint_entry(draprep_checkpoint_claim(back, UID), UID, &r, &ro, &rg), 0);
    CU_ASSERT_STRING_EQUAL(r.devices[0].address, "0c7ac1d4-6e2a-4f3b-9b1e-1d2c3e4f5a61");
    CU_ASSERT_STRING_EQUAL(ro[0], "vfio-pci");
    CU_ASSERT_EQUAL(rg[0], 200);
    draprep_claim_done(&r);
    free(ro);
    free(rg);
    cJSON_free(text);
    cJSON_Delete(back);
    cJSON_Delete(ck);
}

/* NodeWatchResourcesResponse: the wire bytes kubelet's Go decoder expects (field numbers of
 * k8s.io/kubelet pkg/apis/dra-health/v1/api.proto, written out by hand), the round trip, and a
 * message cut to kubelet's 1024 bytes on a UTF-8 boundary. */
static void test_health_messages(void)
{
    struct buf b;
    struct err e = {""};
    buf_init(&b, 1 << 20);
    struct draapi_device_health one = {"n", "d", DRAAPI_HEALTH_UNHEALTHY, 0, 0, "m"};
    CU_ASSERT_EQUAL_FATAL(draapi_encode_health(&one, 1, &b), 0);
    /* devices[0] = {device {pool_name "n", device_name "d"}, health UNHEALTHY, message "m"} */
    static const uint8_t want[] = {0x0a, 0x0d, 0x0a, 0x06, 0x0a, 0x01, 'n', 0x12,
                                   0x01, 'd',  0x10, 0x02, 0x2a, 0x01, 'm'};
    CU_ASSERT_EQUAL_FATAL(b.len, sizeof(want));
    CU_ASSERT(memcmp(b.data, want, sizeof(want)) == 0);
    /* a long message: 1020 'x', then a 3-byte character across the cut */
    char longm[2048];
    memset(longm, 'x', sizeof(longm));
    memcpy(longm + 1020, "\xe2\x82\xac", 3);
    longm[sizeof(longm) - 1] = 0;
    struct draapi_device_health two[] = {
            {"titan", "pci-0000-65-00-0", DRAAPI_HEALTH_HEALTHY, 1700000000, 0, NULL},
            {"titan", "pci-0000-65-00-1", DRAAPI_HEALTH_UNHEALTHY, 1700000001, 60, longm}};
    CU_ASSERT_EQUAL_FATAL(draapi_encode_health(two, 2, &b), 0);
    struct draapi_health_result *r = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL_FATAL(draapi_decode_health((const uint8_t *)b.data, b.len, &r, &n, &e), 0);
    CU_ASSERT_EQUAL_FATAL(n, 2);
    CU_ASSERT_STRING_EQUAL(r[0].pool, "titan");
    CU_ASSERT_STRING_EQUAL(r[0].name, "pci-0000-65-00-0");
    CU_ASSERT_EQUAL(r[0].health, DRAAPI_HEALTH_HEALTHY);
    CU_ASSERT_STRING_EQUAL(r[0].message, "");
    CU_ASSERT_EQUAL(r[0].updated, 1700000000);
    CU_ASSERT_EQUAL(r[1].health, DRAAPI_HEALTH_UNHEALTHY);
    CU_ASSERT_EQUAL(r[1].timeout, 60);
    size_t len = strlen(r[1].message);
    CU_ASSERT(len <= DRAAPI_HEALTH_MESSAGE_MAX);
    CU_ASSERT_EQUAL(len, 1020 + 3); /* the character that did not fit is left out whole */
    CU_ASSERT_STRING_EQUAL(r[1].message + 1020, "...");
    draapi_health_free(r, n);
    /* an empty list; garbage */
    CU_ASSERT_EQUAL(draapi_encode_health(NULL, 0, &b), 0);
    CU_ASSERT_EQUAL(draapi_decode_health((const uint8_t *)b.data, b.len, &r, &n, &e), 0);
    CU_ASSERT_EQUAL(n, 0);
    draapi_health_free(r, n);
    CU_ASSERT_EQUAL(draapi_decode_health((const uint8_t *)"\x0a\x05\x0a", 3, &r, &n, &e), -EINVAL);
    buf_free(&b);
}

static CU_TestInfo tests[] = {
        {"metadata of an mdev", test_metadata_mdev},
        {"checkpoint of an mdev", test_checkpoint_mdev},
        {"device name to address", test_address},
        {"allocation: our driver and pool only, bad claims refused", test_parse},
        {"CDI spec and ids", test_cdi},
        {"metadata file (v1alpha1)", test_metadata},
        {"original driver", test_original},
        {"unprepare's error while the group is held", test_busy_error},
        {"checkpoint", test_checkpoint},
        {"prepare refuses an unhealthy device", test_unhealthy},
        {"DRA and registration messages", test_messages},
        {"DRA resource health messages", test_health_messages},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo draprep_suites[] = {
        {"draprep", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
