/* SPDX-License-Identifier: Apache-2.0 */
/* test/unit/test_permitted.c - permittedHostDevices as a set with an owner. */
#include <CUnit/CUnit.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "controllers/kubevirt/permitted.h"

#define OWNED "\"hostdevd.io/owned-host-devices\""

static const struct permitted_entry nic = {"intel.com/82574L", PERMITTED_PCI, "8086", "10d3", ""};
static const struct permitted_entry gpu = {"nvidia.com/TU104GL", PERMITTED_PCI, "10de", "1eb8", ""};
static const struct permitted_entry stick = {"kubevirt.io/titan-0951-1666-2-1-4", PERMITTED_USB,
                                             "0951", "1666", ""};

static cJSON *cr(const char *annotation, const char *phd)
{
    char text[4096];
    (void)snprintf(text, sizeof(text),
                   "{\"metadata\":{\"name\":\"kubevirt\",\"resourceVersion\":\"7\"%s%s%s},"
                   "\"spec\":{\"configuration\":{\"developerConfiguration\":{\"featureGates\":"
                   "[\"HostDevices\"]}%s%s}}}",
                   annotation ? ",\"annotations\":{" OWNED ":\"" : "", annotation ? annotation : "",
                   annotation ? "\"}" : "", phd ? ",\"permittedHostDevices\":" : "",
                   phd ? phd : "");
    cJSON *o = cJSON_Parse(text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    return o;
}

/* The patch applied as a merge patch would (what the API server stores), for a second plan. */
static void apply(cJSON *obj, const char *patch)
{
    cJSON *p = cJSON_Parse(patch);
    cJSON *merged = cJSON_Duplicate(obj, true);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    /* cJSON has no merge-patch: good enough for the fields this writes */
    cJSON *ann = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, "metadata"),
                                                  "annotations");
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(merged, "metadata");
    if (ann) {
        cJSON_DeleteItemFromObjectCaseSensitive(meta, "annotations");
        cJSON_AddItemToObject(meta, "annotations", cJSON_Duplicate(ann, true));
    }
    cJSON *phd = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, "spec"),
                                             "configuration"),
            "permittedHostDevices");
    cJSON *conf = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(merged, "spec"),
                                                   "configuration");
    cJSON *cur = cJSON_GetObjectItemCaseSensitive(conf, "permittedHostDevices");
    if (phd && !cJSON_IsObject(cur)) {
        cJSON_DeleteItemFromObjectCaseSensitive(conf, "permittedHostDevices");
        cur = cJSON_AddObjectToObject(conf, "permittedHostDevices");
    }
    const cJSON *list;
    cJSON_ArrayForEach(list, phd)
    {
        cJSON_DeleteItemFromObjectCaseSensitive(cur, list->string);
        cJSON_AddItemToObject(cur, list->string, cJSON_Duplicate(list, true));
    }
    cJSON_ReplaceItemInObjectCaseSensitive(obj, "metadata", cJSON_Duplicate(meta, true));
    cJSON_ReplaceItemInObjectCaseSensitive(
            obj, "spec", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(merged, "spec"), true));
    cJSON_Delete(merged);
    cJSON_Delete(p);
}

/* strstr that a NULL patch cannot crash. */
static const char *find(const char *patch, const char *what)
{
    return patch ? strstr(patch, what) : NULL;
}

/* The CR's ownership record ("" when absent), copied into out. */
static const char *record(const cJSON *o, char *out, size_t size)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "metadata"),
                                             "annotations"),
            "hostdevd.io/owned-host-devices"));
    (void)snprintf(out, size, "%s", s ? s : "");
    return out;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The names sorted and comma-separated, as the record lists them (a static buffer). */
static const char *sorted(const char **names, size_t n)
{
    static char out[1024];
    size_t len = 0;
    qsort(names, n, sizeof(*names), cmp_str);
    out[0] = '\0';
    for (size_t i = 0; i < n && len < sizeof(out); i++)
        len += (size_t)snprintf(out + len, sizeof(out) - len, "%s%s", i ? "," : "", names[i]);
    return out;
}

static struct permitted_want want_of(const struct permitted_entry *const *e, size_t n)
{
    struct permitted_want w = {0};
    for (size_t i = 0; i < n; i++)
        CU_ASSERT_EQUAL(permitted_want_add(&w, e[i]), 0);
    return w;
}

static void test_add_to_null_and_missing(void)
{
    /* two claims share the NIC name, two the stick's */
    const struct permitted_entry *e[] = {&nic, &stick, &nic, &stick};
    struct permitted_want w = want_of(e, 4);
    CU_ASSERT_EQUAL(w.n, 2);
    const char *shapes[] = {NULL, "null", "{}", "{\"pciHostDevices\":null,\"usb\":null}"};
    for (size_t i = 0; i < 4; i++) {
        cJSON *o = cr(NULL, shapes[i]);
        struct permitted_result r;
        CU_ASSERT_EQUAL_FATAL(permitted_plan(o, &w, &r), 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(r.patch);
        CU_ASSERT_EQUAL(r.added, 2);
        CU_ASSERT_PTR_NOT_NULL(find(r.patch, "\"resourceVersion\":\"7\""));
        CU_ASSERT_PTR_NOT_NULL(find(r.patch,
                                    "{\"pciVendorSelector\":\"8086:10d3\",\"resourceName\":"
                                    "\"intel.com/82574L\",\"externalResourceProvider\":true}"));
        CU_ASSERT_PTR_NOT_NULL(
                find(r.patch, "\"selectors\":[{\"vendor\":\"0951\",\"product\":\"1666\"}]"));
        CU_ASSERT_PTR_NOT_NULL(
                find(r.patch, OWNED ":\"intel.com/82574L,kubevirt.io/titan-0951-1666-2-1-4\""));
        /* written, the same want writes nothing */
        apply(o, r.patch);
        free(r.patch);
        CU_ASSERT_EQUAL(permitted_plan(o, &w, &r), 0);
        CU_ASSERT_PTR_NULL(r.patch);
        cJSON_Delete(o);
    }
    permitted_want_done(&w);
}

#define FOREIGN_A "{\"pciVendorSelector\":\"15b3:1017\",\"resourceName\":\"mellanox.com/CX5\"}"
#define FOREIGN_B                                                                                  \
    "{\"pciVendorSelector\":\"8086:1572\",\"resourceName\":\"intel.com/"                           \
    "X710\",\"externalResourceProvider\":true}"
#define MINE_GPU                                                                                   \
    "{\"pciVendorSelector\":\"10de:1eb8\",\"resourceName\":\"nvidia.com/"                          \
    "TU104GL\",\"externalResourceProvider\":true}"

static void test_foreign_kept_in_order_owned_removed(void)
{
    /* ours: the GPU (no claim needs it any more) between two foreign entries; a duplicate of it */
    cJSON *o = cr("nvidia.com/TU104GL",
                  "{\"pciHostDevices\":[" FOREIGN_A "," MINE_GPU "," FOREIGN_B "," MINE_GPU
                  "],\"mediatedDevices\":[{\"mdevNameSelector\":\"x\",\"resourceName\":\"m/x\"}]}");
    const struct permitted_entry *e[] = {&nic};
    struct permitted_want w = want_of(e, 1);
    struct permitted_result r;
    CU_ASSERT_EQUAL_FATAL(permitted_plan(o, &w, &r), 0);
    CU_ASSERT_EQUAL(r.removed, 2);
    CU_ASSERT_EQUAL(r.added, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r.patch);
    CU_ASSERT_PTR_NOT_NULL(find(r.patch, "\"pciHostDevices\":[" FOREIGN_A "," FOREIGN_B
                                         ",{\"pciVendorSelector\":\"8086:10d3\""));
    CU_ASSERT_PTR_NULL(find(r.patch, "mediatedDevices")); /* foreign, unchanged: not written */
    CU_ASSERT_PTR_NULL(find(r.patch, "\"usb\""));         /* unchanged: not written */
    CU_ASSERT_PTR_NOT_NULL(find(r.patch, OWNED ":\"intel.com/82574L\""));
    free(r.patch);
    /* nothing needed any more (o as before): our entries go, the annotation too */
    struct permitted_want none = {0};
    CU_ASSERT_EQUAL_FATAL(permitted_plan(o, &none, &r), 0);
    CU_ASSERT_PTR_NOT_NULL(find(r.patch, "\"pciHostDevices\":[" FOREIGN_A "," FOREIGN_B "]"));
    CU_ASSERT_PTR_NOT_NULL(find(r.patch, OWNED ":null"));
    free(r.patch);
    permitted_want_done(&w);
    cJSON_Delete(o);
}

static void test_rewritten_and_conflict(void)
{
    /* our GPU entry edited by someone (externalResourceProvider dropped): rewritten in place;
     * a needed name a foreign entry lists with another selector (ours would be 8086:1583): left
     * to it, reported */
    cJSON *o = cr("nvidia.com/TU104GL",
                  "{\"pciHostDevices\":[{\"pciVendorSelector\":\"10de:1eb8\",\"resourceName\":"
                  "\"nvidia.com/TU104GL\"}," FOREIGN_B "]}");
    struct permitted_entry x710 = {"intel.com/X710", PERMITTED_PCI, "8086", "1583", ""};
    const struct permitted_entry *e[] = {&gpu, &x710};
    struct permitted_want w = want_of(e, 2);
    struct permitted_result r;
    CU_ASSERT_EQUAL_FATAL(permitted_plan(o, &w, &r), 0);
    CU_ASSERT_EQUAL(r.rewritten, 1);
    CU_ASSERT_EQUAL(r.added, 0);
    CU_ASSERT_STRING_EQUAL(r.conflicts, "intel.com/X710");
    CU_ASSERT_PTR_NOT_NULL(find(r.patch, "\"pciHostDevices\":[" MINE_GPU "," FOREIGN_B "]"));
    CU_ASSERT_PTR_NULL(find(r.patch, "hostdevd.io")); /* ownership unchanged: GPU only */
    free(r.patch);
    permitted_want_done(&w);
    cJSON_Delete(o);
}

/* A foreign pciHostDevices entry with the name of a USB device a claim needs: a conflict, left
 * to it; before, the USB entry was added and owned by name, so the next plan took the foreign
 * PCI entry for ours and removed it (found by fuzz_objects). */
static void test_conflict_across_lists(void)
{
    cJSON *o = cr(NULL, "{\"pciHostDevices\":[{\"pciVendorSelector\":\"8086:1572\","
                        "\"resourceName\":\"kubevirt.io/titan-0951-1666-2-1-4\"}]}");
    const struct permitted_entry *e[] = {&stick, &nic};
    struct permitted_want w = want_of(e, 2);
    struct permitted_result r;
    CU_ASSERT_EQUAL_FATAL(permitted_plan(o, &w, &r), 0);
    CU_ASSERT_STRING_EQUAL(r.conflicts, "kubevirt.io/titan-0951-1666-2-1-4");
    CU_ASSERT_EQUAL(r.added, 1); /* the NIC only */
    CU_ASSERT_PTR_NOT_NULL(find(r.patch, OWNED ":\"intel.com/82574L\""));
    CU_ASSERT_PTR_NULL(find(r.patch, "\"usb\""));
    apply(o, r.patch);
    free(r.patch);
    CU_ASSERT_EQUAL(permitted_plan(o, &w, &r), 0);
    CU_ASSERT_PTR_NULL(r.patch); /* the foreign entry stays, nothing more to write */
    permitted_want_done(&w);
    cJSON_Delete(o);
}

/* --- resource names that share a prefix, or differ in case only -------------------------------
 * Ownership is by exact name: a foreign entry whose name is a prefix of ours, or ours a prefix of
 * it, or the same but for case, is foreign (kept, never taken for ours). */

#define PCI_ENTRY(name, sel)                                                                       \
    "{\"pciVendorSelector\":\"" sel "\",\"resourceName\":\"" name                                  \
    "\",\"externalResourceProvider\":true}"
#define USB_ENTRY(name, vendor, product)                                                           \
    "{\"resourceName\":\"" name "\",\"selectors\":[{\"vendor\":\"" vendor                          \
    "\",\"product\":\"" product "\"}],\"externalResourceProvider\":true}"

#define X_NAME     "intel.com/82574L_X"
#define PORT_NAME  "kubevirt.io/titan-0951-1666-2-1"   /* port 2-1 */
#define PORT4_NAME "kubevirt.io/titan-0951-1666-2-1-4" /* port 2-1.4 */

static const struct permitted_entry nic_x = {X_NAME, PERMITTED_PCI, "8086", "10d4", ""};
static const struct permitted_entry port = {PORT_NAME, PERMITTED_USB, "0951", "1666", ""};
static const struct permitted_entry port4 = {PORT4_NAME, PERMITTED_USB, "0951", "1666", ""};

struct name_case {
    const char *what;
    const char *owned; /* the annotation */
    const char *phd;   /* ours (as written) next to a foreign entry of a near name */
    const struct permitted_entry *ours[2];
    const struct permitted_entry *foreign; /* a want of the foreign entry's name */
    const char *left; /* the names the CR keeps when no claim needs ours: "pci:..;usb:.." */
};

/* near names of ours, as foreign entries (or, moving ownership, ours) */
static const struct permitted_entry nic_lower = {"intel.com/82574l", PERMITTED_PCI, "8086", "10d3",
                                                 ""};
static const struct permitted_entry port4_upper = {"kubevirt.io/Titan-0951-1666-2-1-4",
                                                   PERMITTED_USB, "0951", "1666", ""};

static const struct name_case name_cases[] = {
        {"pci: foreign a prefix of ours",
         X_NAME,
         "{\"pciHostDevices\":[" PCI_ENTRY("intel.com/82574L",
                                           "8086:10d3") "," PCI_ENTRY(X_NAME, "8086:10d4") "]}",
         {&nic_x, NULL},
         &nic,
         "pci:intel.com/82574L;usb:"},
        {"pci: ours a prefix of the foreign",
         "intel.com/82574L",
         "{\"pciHostDevices\":[" PCI_ENTRY("intel.com/82574L",
                                           "8086:10d3") "," PCI_ENTRY(X_NAME, "8086:10d4") "]}",
         {&nic, NULL},
         &nic_x,
         "pci:" X_NAME ";usb:"},
        {"pci: the same but for case",
         "intel.com/82574L",
         "{\"pciHostDevices\":[" PCI_ENTRY("intel.com/82574l", "8086:10d3") "," PCI_ENTRY(
                 "intel.com/82574L", "8086:10d3") "]}",
         {&nic, NULL},
         &nic_lower,
         "pci:intel.com/82574l;usb:"},
        {"usb: foreign a prefix of ours",
         PORT4_NAME,
         "{\"usb\":[" USB_ENTRY(PORT_NAME, "0951", "1666") "," USB_ENTRY(PORT4_NAME, "0951",
                                                                         "1666") "]}",
         {&port4, NULL},
         &port,
         "pci:;usb:" PORT_NAME},
        {"usb: ours a prefix of the foreign",
         PORT_NAME,
         "{\"usb\":[" USB_ENTRY(PORT_NAME, "0951", "1666") "," USB_ENTRY(PORT4_NAME, "0951",
                                                                         "1666") "]}",
         {&port, NULL},
         &port4,
         "pci:;usb:" PORT4_NAME},
        {"usb: the same but for case",
         PORT4_NAME,
         "{\"usb\":[" USB_ENTRY("kubevirt.io/Titan-0951-1666-2-1-4", "0951",
                                "1666") "," USB_ENTRY(PORT4_NAME, "0951", "1666") "]}",
         {&port4, NULL},
         &port4_upper,
         "pci:;usb:kubevirt.io/Titan-0951-1666-2-1-4"},
        /* two owned names: each one's near name is foreign, the first listed and the last */
        {"both lists, two owned names",
         X_NAME "," PORT_NAME,
         "{\"pciHostDevices\":[" PCI_ENTRY(X_NAME, "8086:10d4") "," PCI_ENTRY(
                 "intel.com/82574L",
                 "8086:10d3") "],\"usb\":[" USB_ENTRY(PORT4_NAME, "0951",
                                                      "1666") "," USB_ENTRY(PORT_NAME, "0951",
                                                                            "1666") "]}",
         {&nic_x, &port},
         &port4,
         "pci:intel.com/82574L;usb:" PORT4_NAME},
};

/* "pci:<names>;usb:<names>" of the CR's lists, comma-separated. */
static void list_names(const cJSON *o, char *out, size_t size)
{
    const cJSON *phd = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "spec"),
                                             "configuration"),
            "permittedHostDevices");
    static const char *const lists[] = {"pciHostDevices", "usb"};
    struct buf b;
    buf_init(&b, 4096);
    for (size_t l = 0; l < 2; l++) {
        (void)buf_printf(&b, "%s%s:", l ? ";" : "", l ? "usb" : "pci");
        const char *sep = "";
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(phd, lists[l]))
        {
            const char *rn =
                    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "resourceName"));
            (void)buf_printf(&b, "%s%s", sep, rn ? rn : "?");
            sep = ",";
        }
    }
    (void)snprintf(out, size, "%s", buf_str(&b) ? buf_str(&b) : "");
    buf_free(&b);
}

static struct permitted_want want_ours(const struct name_case *c, bool with_foreign)
{
    struct permitted_want w = {0};
    for (size_t i = 0; i < 2 && c->ours[i]; i++)
        CU_ASSERT_EQUAL(permitted_want_add(&w, c->ours[i]), 0);
    if (with_foreign)
        CU_ASSERT_EQUAL(permitted_want_add(&w, c->foreign), 0);
    return w;
}

/* Nothing else changed: nothing to write, the foreign entry is not ours. */
static void check_left_alone(const struct name_case *c)
{
    cJSON *o = cr(c->owned, c->phd);
    struct permitted_want w = want_ours(c, false);
    struct permitted_result r;
    CU_ASSERT_EQUAL_FATAL(permitted_plan(o, &w, &r), 0);
    if (r.patch)
        fprintf(stderr, "\n  %s: wrote %s\n", c->what, r.patch);
    CU_ASSERT_PTR_NULL(r.patch);
    CU_ASSERT_EQUAL(r.added + r.removed + r.rewritten, 0);
    CU_ASSERT_STRING_EQUAL(r.conflicts, "");
    free(r.patch);
    permitted_want_done(&w);
    cJSON_Delete(o);
}

/* No claim needs ours: ours go, the foreign entry stays, the ownership record is emptied. */
static void check_ours_removed(const struct name_case *c)
{
    cJSON *o = cr(c->owned, c->phd);
    struct permitted_want none = {0};
    struct permitted_result r;
    char names[512];
    CU_ASSERT_EQUAL_FATAL(permitted_plan(o, &none, &r), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r.patch);
    CU_ASSERT_EQUAL(r.removed, c->ours[1] ? 2 : 1);
    CU_ASSERT_PTR_NOT_NULL(find(r.patch, OWNED ":null"));
    apply(o, r.patch);
    list_names(o, names, sizeof(names));
    if (strcmp(names, c->left) != 0)
        fprintf(stderr, "\n  %s: left %s\n", c->what, names);
    CU_ASSERT_STRING_EQUAL(names, c->left);
    free(r.patch);
    cJSON_Delete(o);
}

/* A claim needs the foreign entry's name too, with another selector: left to it (a conflict of
 * that name only), and nothing is written. */
static void check_foreign_name_wanted(const struct name_case *c)
{
    cJSON *o = cr(c->owned, c->phd);
    struct permitted_entry other = *c->foreign;
    (void)snprintf(other.product, sizeof(other.product), "ffff");
    struct permitted_want w = want_ours(c, false);
    CU_ASSERT_EQUAL(permitted_want_add(&w, &other), 0);
    struct permitted_result r;
    CU_ASSERT_EQUAL(w.n, c->ours[1] ? 3 : 2);
    CU_ASSERT_EQUAL_FATAL(permitted_plan(o, &w, &r), 0);
    CU_ASSERT_STRING_EQUAL(r.conflicts, c->foreign->resource);
    CU_ASSERT_PTR_NULL(r.patch);
    free(r.patch);
    permitted_want_done(&w);
    cJSON_Delete(o);
}

/* A claim needs the foreign entry's name with exactly its selector: the entry is what hostdevd
 * would write, so it is taken into the record (by its exact name, ours untouched), and the next
 * plan writes nothing. */
static void check_foreign_name_adopted(const struct name_case *c)
{
    cJSON *o = cr(c->owned, c->phd);
    struct permitted_want w = want_ours(c, true);
    struct permitted_result r;
    char owned[512];
    CU_ASSERT_EQUAL_FATAL(permitted_plan(o, &w, &r), 0);
    CU_ASSERT_EQUAL(r.adopted, 1);
    CU_ASSERT_STRING_EQUAL(r.adopted_names, c->foreign->resource);
    CU_ASSERT_STRING_EQUAL(r.conflicts, "");
    CU_ASSERT_EQUAL(r.added + r.removed + r.rewritten, 0);
    CU_ASSERT_PTR_NULL(find(r.patch, "\"spec\"")); /* the lists are not written */
    const char *names[3] = {c->ours[0]->resource, c->foreign->resource,
                            c->ours[1] ? c->ours[1]->resource : NULL};
    apply(o, r.patch);
    CU_ASSERT_STRING_EQUAL(record(o, owned, sizeof(owned)), sorted(names, c->ours[1] ? 3 : 2));
    free(r.patch);
    CU_ASSERT_EQUAL(permitted_plan(o, &w, &r), 0);
    CU_ASSERT_PTR_NULL(r.patch);
    CU_ASSERT_EQUAL(r.adopted, 0);
    free(r.patch);
    permitted_want_done(&w);
    cJSON_Delete(o);
}

static void test_near_names_foreign(void)
{
    for (size_t i = 0; i < sizeof(name_cases) / sizeof(name_cases[0]); i++) {
        check_left_alone(&name_cases[i]);
        check_ours_removed(&name_cases[i]);
        check_foreign_name_wanted(&name_cases[i]);
        check_foreign_name_adopted(&name_cases[i]);
    }
}

/* Ownership moves from a name to a near one (its prefix, back, another case): ours is removed and
 * the new one added (not taken for the old one), the record names the new one exactly, and the
 * next plan finds it ours and writes nothing. */
static void test_ownership_moves_to_near_name(void)
{
    const struct permitted_entry *const pairs[][2] = {{&nic_x, &nic},     {&nic, &nic_x},
                                                      {&nic, &nic_lower}, {&port4, &port},
                                                      {&port, &port4},    {&port4, &port4_upper}};
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        const struct permitted_entry *from = pairs[i][0], *to = pairs[i][1];
        struct permitted_want w0 = want_of(&from, 1), w1 = want_of(&to, 1);
        cJSON *o = cr(NULL, NULL);
        struct permitted_result r;
        char owned[400];
        CU_ASSERT_EQUAL_FATAL(permitted_plan(o, &w0, &r), 0);
        apply(o, r.patch);
        free(r.patch);
        CU_ASSERT_EQUAL_FATAL(permitted_plan(o, &w1, &r), 0);
        CU_ASSERT_EQUAL(r.removed, 1);
        CU_ASSERT_EQUAL(r.added, 1);
        (void)snprintf(owned, sizeof(owned), OWNED ":\"%s\"", to->resource);
        CU_ASSERT_PTR_NOT_NULL(find(r.patch, owned));
        apply(o, r.patch);
        free(r.patch);
        CU_ASSERT_EQUAL(permitted_plan(o, &w1, &r), 0);
        CU_ASSERT_PTR_NULL(r.patch);
        CU_ASSERT_STRING_EQUAL(r.conflicts, "");
        free(r.patch);
        permitted_want_done(&w0);
        permitted_want_done(&w1);
        cJSON_Delete(o);
    }
}

/* --- the record removed or edited from outside (issue 33) ---------------------------------------
 * The entries are there as hostdevd wrote them; the annotation lost their names. */

#define MINE_NIC   PCI_ENTRY("intel.com/82574L", "8086:10d3")
#define MINE_STICK USB_ENTRY("kubevirt.io/titan-0951-1666-2-1-4", "0951", "1666")

/* Plans, expects only the record rewritten to `want_record` (names `adopted` taken back), applies
 * it, and expects the next plan to write nothing: the restored CR is stable. */
static void expect_restored(cJSON *o, const struct permitted_want *w, const char *adopted,
                            const char *want_record)
{
    struct permitted_result r;
    char got[1024];
    char before[4096], after[4096];
    list_names(o, before, sizeof(before));
    CU_ASSERT_EQUAL_FATAL(permitted_plan(o, w, &r), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r.patch);
    CU_ASSERT_STRING_EQUAL(r.adopted_names, adopted);
    CU_ASSERT_STRING_EQUAL(r.conflicts, "");
    CU_ASSERT_EQUAL(r.added + r.removed + r.rewritten, 0);
    CU_ASSERT_PTR_NULL(find(r.patch, "\"spec\"")); /* nothing else changed */
    CU_ASSERT_PTR_NOT_NULL(find(r.patch, "\"resourceVersion\":\"7\""));
    apply(o, r.patch);
    free(r.patch);
    CU_ASSERT_STRING_EQUAL(record(o, got, sizeof(got)), want_record);
    list_names(o, after, sizeof(after));
    CU_ASSERT_STRING_EQUAL(after, before);
    CU_ASSERT_EQUAL_FATAL(permitted_plan(o, w, &r), 0);
    CU_ASSERT_PTR_NULL(r.patch); /* idempotent */
    CU_ASSERT_EQUAL(r.adopted, 0);
    CU_ASSERT_STRING_EQUAL(r.conflicts, "");
    free(r.patch);
}

static void test_record_removed_restored(void)
{
    const struct permitted_entry *e[] = {&nic, &stick};
    struct permitted_want w = want_of(e, 2);
    /* no annotation, or an empty one; foreign entries around ours; a GPU entry exactly as ours
     * would be, but no claim needs it: not listed, so not ours (left) */
    const char *records[] = {NULL, ""};
    for (size_t i = 0; i < 2; i++) {
        cJSON *o = cr(records[i], "{\"pciHostDevices\":[" FOREIGN_A "," MINE_NIC "," MINE_GPU
                                  "," FOREIGN_B "],\"usb\":[" MINE_STICK "]}");
        expect_restored(o, &w, "intel.com/82574L,kubevirt.io/titan-0951-1666-2-1-4",
                        "intel.com/82574L,kubevirt.io/titan-0951-1666-2-1-4");
        cJSON_Delete(o);
    }
    permitted_want_done(&w);
}

static void test_record_edited_restored(void)
{
    const struct permitted_entry *e[] = {&nic, &gpu, &stick};
    struct permitted_want w = want_of(e, 3);
    /* one name dropped from the list: the first, the middle, the last */
    const char *records[] = {"kubevirt.io/titan-0951-1666-2-1-4,nvidia.com/TU104GL",
                             "intel.com/82574L,kubevirt.io/titan-0951-1666-2-1-4",
                             "intel.com/82574L,nvidia.com/TU104GL"};
    const char *dropped[] = {"intel.com/82574L", "nvidia.com/TU104GL",
                             "kubevirt.io/titan-0951-1666-2-1-4"};
    for (size_t i = 0; i < 3; i++) {
        cJSON *o = cr(records[i], "{\"pciHostDevices\":[" MINE_GPU "," FOREIGN_A "," MINE_NIC
                                  "],\"usb\":[" MINE_STICK "]}");
        expect_restored(o, &w, dropped[i],
                        "intel.com/82574L,kubevirt.io/titan-0951-1666-2-1-4,nvidia.com/TU104GL");
        cJSON_Delete(o);
    }
    permitted_want_done(&w);
}

/* Entries named like one a claim needs, that hostdevd would not have written so: someone else's,
 * however the record reads. */
static const char *const not_ours[] = {
        /* another selector */
        "{\"pciHostDevices\":[" PCI_ENTRY("intel.com/82574L", "8086:10d4") "]}",
        /* the same but in upper case */
        "{\"pciHostDevices\":[" PCI_ENTRY("intel.com/82574L", "8086:10D3") "]}",
        /* externalResourceProvider false, or missing (KubeVirt's own device plugin) */
        "{\"pciHostDevices\":[{\"pciVendorSelector\":\"8086:10d3\",\"resourceName\":"
        "\"intel.com/82574L\",\"externalResourceProvider\":false}]}",
        "{\"pciHostDevices\":[{\"pciVendorSelector\":\"8086:10d3\",\"resourceName\":"
        "\"intel.com/82574L\"}]}",
        /* a field more */
        "{\"pciHostDevices\":[{\"pciVendorSelector\":\"8086:10d3\",\"resourceName\":"
        "\"intel.com/82574L\",\"externalResourceProvider\":true,\"x\":1}]}",
        /* in the other list */
        "{\"usb\":[" USB_ENTRY("intel.com/82574L", "8086", "10d3") "]}",
        /* ours exactly, but a second entry of the name that is not */
        "{\"pciHostDevices\":[" MINE_NIC "," PCI_ENTRY("intel.com/82574L", "8086:10d4") "]}",
        "{\"pciHostDevices\":[" MINE_NIC
        "],\"usb\":[" USB_ENTRY("intel.com/82574L", "8086", "10d3") "]}",
};

static void test_foreign_same_name_not_adopted(void)
{
    const struct permitted_entry *e[] = {&nic};
    struct permitted_want w = want_of(e, 1);
    const char *records[] = {NULL, "nvidia.com/TU104GL"}; /* removed; edited (another name) */
    for (size_t i = 0; i < sizeof(not_ours) / sizeof(not_ours[0]); i++) {
        for (size_t k = 0; k < 2; k++) {
            cJSON *o = cr(records[k], not_ours[i]);
            char names[512];
            list_names(o, names, sizeof(names));
            struct permitted_result r;
            CU_ASSERT_EQUAL_FATAL(permitted_plan(o, &w, &r), 0);
            if (r.adopted)
                fprintf(stderr, "\n  adopted from %s\n", not_ours[i]);
            CU_ASSERT_EQUAL(r.adopted, 0);
            CU_ASSERT_STRING_EQUAL(r.conflicts, "intel.com/82574L");
            CU_ASSERT_PTR_NULL(find(r.patch, "intel.com/82574L")); /* not in the record */
            CU_ASSERT_PTR_NULL(find(r.patch, "\"spec\""));         /* its entries left alone */
            if (r.patch)
                apply(o, r.patch);
            free(r.patch);
            char after[512];
            list_names(o, after, sizeof(after));
            CU_ASSERT_STRING_EQUAL(after, names);
            cJSON_Delete(o);
        }
    }
    permitted_want_done(&w);
}

static void test_gate_and_errors(void)
{
    cJSON *o = cr(NULL, NULL);
    CU_ASSERT_TRUE(permitted_gate_enabled(o));
    cJSON *bare = cJSON_Parse("{\"metadata\":{\"name\":\"kubevirt\"},\"spec\":{}}");
    CU_ASSERT_FALSE(permitted_gate_enabled(bare));
    cJSON *other = cJSON_Parse("{\"spec\":{\"configuration\":{\"developerConfiguration\":"
                               "{\"featureGates\":[7,\"Snapshot\",\"HostDevicesX\"]}}}}");
    CU_ASSERT_FALSE(permitted_gate_enabled(other)); /* other gates are not HostDevices */
    cJSON_Delete(other);
    struct permitted_want none = {0};
    struct permitted_result r;
    CU_ASSERT_EQUAL(permitted_plan(bare, &none, &r), -EINVAL); /* no resourceVersion */
    cJSON_Delete(bare);
    cJSON_Delete(o);
}

/* KubeVirt's mdevNameSelector of a type: virt-handler's getMdevTypeName (the name file, spaces as
 * '_', trimmed; the id when there is no name file). */
static void test_mdev_selector(void)
{
    char b[32];
    CU_ASSERT_EQUAL(permitted_mdev_selector("Dual port serial", "mtty-2", b, sizeof(b)), 0);
    CU_ASSERT_STRING_EQUAL(b, "Dual_port_serial");
    CU_ASSERT_EQUAL(permitted_mdev_selector(" GRID T4-1Q\n", "nvidia-222", b, sizeof(b)), 0);
    CU_ASSERT_STRING_EQUAL(b, "GRID_T4-1Q");
    CU_ASSERT_EQUAL(permitted_mdev_selector(NULL, "i915-GVTg_V5_4", b, sizeof(b)), 0);
    CU_ASSERT_STRING_EQUAL(b, "i915-GVTg_V5_4");
    CU_ASSERT_EQUAL(permitted_mdev_selector(" \n", "mtty-1", b, sizeof(b)), 0);
    CU_ASSERT_STRING_EQUAL(b, "mtty-1");
    CU_ASSERT_EQUAL(permitted_mdev_selector("", "", b, sizeof(b)), -EINVAL);
    CU_ASSERT_EQUAL(permitted_mdev_selector(NULL, NULL, b, sizeof(b)), -EINVAL);
    CU_ASSERT_EQUAL(permitted_mdev_selector("Dual port serial", "x", b, 16), -ENAMETOOLONG);
}

static const struct permitted_entry serial2 = {.resource = "devices.harvesterhci.io/mtty-2",
                                               .kind = PERMITTED_MDEV,
                                               .selector = "Dual_port_serial"};
#define MINE_SERIAL2                                                                               \
    "{\"mdevNameSelector\":\"Dual_port_serial\",\"resourceName\":\"devices.harvesterhci.io/"       \
    "mtty-2\",\"externalResourceProvider\":true}"
#define FOREIGN_GRID "{\"mdevNameSelector\":\"GRID_T4-1Q\",\"resourceName\":\"nvidia.com/T4-1Q\"}"

/* mediatedDevices is kept like the other two lists: added after foreign entries, removed when
 * no instance needs it, rewritten when edited, foreign ones kept in place. */
static void test_mdev_list(void)
{
    cJSON *o = cr(NULL, "{\"mediatedDevices\":[" FOREIGN_GRID "]}");
    const struct permitted_entry *e[] = {&serial2, &nic};
    struct permitted_want w = want_of(e, 2);
    struct permitted_result r;
    CU_ASSERT_EQUAL_FATAL(permitted_plan(o, &w, &r), 0);
    CU_ASSERT_EQUAL(r.added, 2);
    CU_ASSERT_PTR_NOT_NULL(
            find(r.patch, "\"mediatedDevices\":[" FOREIGN_GRID "," MINE_SERIAL2 "]"));
    CU_ASSERT_PTR_NOT_NULL(
            find(r.patch, OWNED ":\"devices.harvesterhci.io/mtty-2,intel.com/82574L\""));
    CU_ASSERT_PTR_NULL(find(r.patch, "\"usb\""));
    apply(o, r.patch);
    free(r.patch);
    CU_ASSERT_EQUAL(permitted_plan(o, &w, &r), 0);
    CU_ASSERT_PTR_NULL(r.patch); /* exact */
    /* someone edits our entry: rewritten in place */
    cJSON *ours = cJSON_GetArrayItem(
            cJSON_GetObjectItemCaseSensitive(
                    cJSON_GetObjectItemCaseSensitive(
                            cJSON_GetObjectItemCaseSensitive(
                                    cJSON_GetObjectItemCaseSensitive(o, "spec"), "configuration"),
                            "permittedHostDevices"),
                    "mediatedDevices"),
            1);
    cJSON_ReplaceItemInObjectCaseSensitive(ours, "externalResourceProvider", cJSON_CreateFalse());
    CU_ASSERT_EQUAL_FATAL(permitted_plan(o, &w, &r), 0);
    CU_ASSERT_EQUAL(r.rewritten, 1);
    CU_ASSERT_PTR_NOT_NULL(
            find(r.patch, "\"mediatedDevices\":[" FOREIGN_GRID "," MINE_SERIAL2 "]"));
    apply(o, r.patch);
    free(r.patch);
    /* the instance gone: our entry goes, the foreign one stays */
    const struct permitted_entry *left[] = {&nic};
    struct permitted_want w2 = want_of(left, 1);
    CU_ASSERT_EQUAL_FATAL(permitted_plan(o, &w2, &r), 0);
    CU_ASSERT_EQUAL(r.removed, 1);
    CU_ASSERT_PTR_NOT_NULL(find(r.patch, "\"mediatedDevices\":[" FOREIGN_GRID "]"));
    CU_ASSERT_PTR_NOT_NULL(find(r.patch, OWNED ":\"intel.com/82574L\""));
    CU_ASSERT_PTR_NULL(find(r.patch, "pciHostDevices")); /* unchanged */
    free(r.patch);
    permitted_want_done(&w2);
    permitted_want_done(&w);
    cJSON_Delete(o);
}

/* A foreign mediatedDevices entry of a name an instance needs (KubeVirt's own, not external): a
 * conflict, left to it; the record lost: restored when the entry is exactly ours. */
static void test_mdev_conflict_and_restore(void)
{
    cJSON *o = cr(NULL, "{\"mediatedDevices\":[{\"mdevNameSelector\":\"Dual_port_serial\","
                        "\"resourceName\":\"devices.harvesterhci.io/mtty-2\"}]}");
    const struct permitted_entry *e[] = {&serial2};
    struct permitted_want w = want_of(e, 1);
    struct permitted_result r;
    CU_ASSERT_EQUAL_FATAL(permitted_plan(o, &w, &r), 0);
    CU_ASSERT_STRING_EQUAL(r.conflicts, "devices.harvesterhci.io/mtty-2");
    CU_ASSERT_PTR_NULL(r.patch); /* nothing of ours to write */
    cJSON_Delete(o);
    o = cr(NULL, "{\"mediatedDevices\":[" MINE_SERIAL2 "]}");
    CU_ASSERT_EQUAL_FATAL(permitted_plan(o, &w, &r), 0);
    CU_ASSERT_EQUAL(r.adopted, 1);
    CU_ASSERT_EQUAL(r.added, 0);
    CU_ASSERT_PTR_NOT_NULL(find(r.patch, OWNED ":\"devices.harvesterhci.io/mtty-2\""));
    CU_ASSERT_PTR_NULL(find(r.patch, "permittedHostDevices"));
    free(r.patch);
    permitted_want_done(&w);
    cJSON_Delete(o);
}

/* Two types offered under one resource name (two card models whose type ids sanitize alike): the
 * smallest selector, in whatever order the caches list them. */
static void test_mdev_one_selector(void)
{
    struct permitted_entry a = serial2, b = serial2;
    (void)snprintf(a.selector, sizeof(a.selector), "%s", "B_type");
    (void)snprintf(b.selector, sizeof(b.selector), "%s", "A_type");
    const struct permitted_entry *ab[] = {&a, &b}, *ba[] = {&b, &a};
    struct permitted_want w1 = want_of(ab, 2), w2 = want_of(ba, 2);
    CU_ASSERT_EQUAL(w1.n, 1);
    CU_ASSERT_EQUAL(w2.n, 1);
    CU_ASSERT_STRING_EQUAL(w1.entries[0].selector, "A_type");
    CU_ASSERT_STRING_EQUAL(w2.entries[0].selector, "A_type");
    permitted_want_done(&w1);
    permitted_want_done(&w2);
}

static CU_TestInfo tests[] = {
        {"added to a null or missing list, once", test_add_to_null_and_missing},
        {"foreign kept in order, owned removed", test_foreign_kept_in_order_owned_removed},
        {"rewritten in place; foreign names not taken", test_rewritten_and_conflict},
        {"a foreign name in the other list is a conflict", test_conflict_across_lists},
        {"near names (prefix, case) are foreign", test_near_names_foreign},
        {"ownership moves to a near name exactly", test_ownership_moves_to_near_name},
        {"the record removed: restored, nothing else changed", test_record_removed_restored},
        {"a name dropped from the record: restored", test_record_edited_restored},
        {"a same-named entry hostdevd did not write: a conflict, not adopted",
         test_foreign_same_name_not_adopted},
        {"feature gate; errors", test_gate_and_errors},
        {"mdevNameSelector as KubeVirt reads a type's name", test_mdev_selector},
        {"mediatedDevices kept exact like the other lists", test_mdev_list},
        {"mediatedDevices: a foreign entry is a conflict; the record restored",
         test_mdev_conflict_and_restore},
        {"one selector per mdev resource name, in any order", test_mdev_one_selector},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo permitted_suites[] = {
        {"permitted", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
