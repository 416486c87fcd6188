/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/cli/invtool.c - `hostdevd inventory` (see invtool.h): an inventory (its first scan,
 * run without starting the loop), then the objects printed.
 */
#include "controllers/cli/invtool.h"

#include <cjson/cJSON.h>
#include <ev.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/json.h"
#include "base/log.h"
#include "base/map.h"
#include "controllers/devices/devobjs.h"
#include "controllers/devices/inventory.h"
#include "controllers/devices/pcidevice.h"
#include "controllers/devices/usbdevice.h"
#include "controllers/runtime/manager.h"
#include "controllers/runtime/part.h"

struct scans {
    struct map *pci, *usb;
};

/* The scans' results, taken from the inventory's topics (runtime/manager.h). */
static void on_pci(void *self, const struct watch_event *ev)
{
    struct scans *s = self;
    struct devobjs_scan *scan = ev->data;
    map_free(s->pci);
    s->pci = TAKE_PTR(scan->want);
}

static void on_usb(void *self, const struct watch_event *ev)
{
    struct scans *s = self;
    struct devobjs_scan *scan = ev->data;
    map_free(s->usb);
    s->usb = TAKE_PTR(scan->want);
}

static const struct watch watches[] = {
        {.topic = &pcidevices_scanned, .map = on_pci},
        {.topic = &usbdevices_scanned, .map = on_usb},
        {0},
};
static const struct part_ops printer = {.name = "printer", .watches = watches};

static void usage(FILE *f)
{
    fputs("Usage: hostdevd inventory [--sysfs-root DIR] [--proc-root DIR] [--pci-ids PATH]\n"
          "                          [--usb-ids PATH] [--node-name NAME] [-o table|json|yaml]\n"
          "  what the agent would publish for this node: PCIDevices and USBDevices with their\n"
          "  status (blockers included), from one scan; nothing is written to the API\n",
          f);
}

/* The objects, sorted by name (the maps' order is their insertion order: the scan's). */
static int by_name(const void *a, const void *b)
{
    const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
    return strcmp(x->string ? x->string : "", y->string ? y->string : "");
}

/* Takes `o` and `status`. */
static cJSON *object(cJSON *o, cJSON *status, const char *name)
{
    _cleanup_json_ cJSON *own_o = o, *own_status = status;
    if (!o || !status || !cJSON_AddItemToObject(o, "status", status))
        return NULL;
    TAKE_PTR(own_status);     /* o's now */
    o->string = strdup(name); /* (the sort key; cJSON_Delete frees it) */
    return TAKE_PTR(own_o);
}

static cJSON *list_of(const struct scans *s)
{
    size_t n = map_size(s->pci) + (s->usb ? map_size(s->usb) : 0), k = 0, pos = 0;
    cJSON **v = calloc(n ? n : 1, sizeof(cJSON *));
    const char *key;
    void *val;
    cJSON *list = cJSON_CreateObject(), *items = NULL;
    if (!v || !list || !cJSON_AddStringToObject(list, "apiVersion", "v1") ||
        !cJSON_AddStringToObject(list, "kind", "List") ||
        !(items = cJSON_AddArrayToObject(list, "items")))
        goto oom;
    while (map_next(s->pci, &pos, &key, &val))
        if (!(v[k++] = object(pcidevice_new_object(val, NULL, NULL), pcidevice_status(val), key)))
            goto oom;
    pos = 0;
    while (s->usb && map_next(s->usb, &pos, &key, &val))
        if (!(v[k++] = object(usbdevice_new_object(val, NULL), usbdevice_status(val), key)))
            goto oom;
    qsort(v, k, sizeof(cJSON *), by_name);
    for (size_t i = 0; i < k; i++) {
        free(v[i]->string);
        v[i]->string = NULL;
        cJSON_AddItemToArray(items, v[i]);
    }
    free(v);
    return list;
oom:
    for (size_t i = 0; v && i < k; i++)
        cJSON_Delete(v[i]);
    free(v);
    cJSON_Delete(list);
    return NULL;
}

static const char *str_at(const cJSON *o, const char *a, const char *b)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, a);
    const char *s = cJSON_GetStringValue(b ? cJSON_GetObjectItemCaseSensitive(x, b) : x);
    return s && s[0] ? s : "-";
}

#define COLUMNS 8

/* The cells of `o`'s line: kind, name, address or device path, ids, driver, IOMMU group,
 * resource, what blocks its passthrough (`ids` and `blockers` are the caller's buffers). */
static void row_of(const cJSON *o, const char *cell[COLUMNS], char *ids, size_t ids_size,
                   char *blockers, size_t blockers_size)
{
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "status");
    bool pci = strcmp(str_at(o, "kind", NULL), "PCIDevice") == 0;
    (void)snprintf(ids, ids_size, "%s:%s", str_at(st, pci ? "vendorId" : "vendorID", NULL),
                   str_at(st, pci ? "deviceId" : "productID", NULL));
    const cJSON *b;
    size_t len = 0;
    (void)snprintf(blockers, blockers_size, "-");
    cJSON_ArrayForEach(b, cJSON_GetObjectItemCaseSensitive(st, "passthroughBlockers"))
    {
        int w = snprintf(blockers + len, blockers_size - len, "%s%s", len ? "," : "",
                         str_at(b, "reason", NULL));
        len = w > 0 && (size_t)w < blockers_size - len ? len + (size_t)w : len;
    }
    cell[0] = pci ? "pci" : "usb";
    cell[1] = str_at(o, "metadata", "name");
    cell[2] = str_at(st, pci ? "address" : "devicePath", NULL);
    cell[3] = ids;
    cell[4] = str_at(st, "kernelDriverInUse", NULL);
    cell[5] = str_at(st, "iommuGroup", NULL);
    cell[6] = str_at(st, "resourceName", NULL);
    cell[7] = blockers;
}

static void print_row(const char *const cell[COLUMNS], const int width[COLUMNS])
{
    for (int c = 0; c < COLUMNS - 1; c++)
        printf("%-*s  ", width[c], cell[c]);
    printf("%s\n", cell[COLUMNS - 1]);
}

/* One line per device, columns as wide as their widest cell (as kubectl prints tables). */
static void print_table(const cJSON *list)
{
    static const char *const head[COLUMNS] = {"KIND",   "NAME",  "ADDRESS",  "IDS",
                                              "DRIVER", "IOMMU", "RESOURCE", "BLOCKERS"};
    int width[COLUMNS];
    const cJSON *o;
    char ids[16], blockers[256];
    const char *cell[COLUMNS];
    for (int c = 0; c < COLUMNS; c++)
        width[c] = (int)strlen(head[c]);
    cJSON_ArrayForEach(o, cJSON_GetObjectItemCaseSensitive(list, "items"))
    {
        row_of(o, cell, ids, sizeof(ids), blockers, sizeof(blockers));
        for (int c = 0; c < COLUMNS; c++)
            if ((int)strlen(cell[c]) > width[c])
                width[c] = (int)strlen(cell[c]);
    }
    print_row(head, width);
    cJSON_ArrayForEach(o, cJSON_GetObjectItemCaseSensitive(list, "items"))
    {
        row_of(o, cell, ids, sizeof(ids), blockers, sizeof(blockers));
        print_row(cell, width);
    }
}

/* YAML, block style; every scalar a JSON scalar (a JSON string is a YAML double-quoted one). */
static void print_yaml(const cJSON *j, int indent, bool in_seq)
{
    if (cJSON_IsObject(j) || cJSON_IsArray(j)) {
        const cJSON *c;
        bool first = true;
        if (!j->child) {
            printf("%s\n", cJSON_IsObject(j) ? "{}" : "[]");
            return;
        }
        cJSON_ArrayForEach(c, j)
        {
            if (!(in_seq && first))
                printf("%*s", indent, "");
            first = false;
            if (cJSON_IsArray(j))
                printf("- ");
            else
                printf("%s:", c->string);
            bool nested = (cJSON_IsObject(c) || cJSON_IsArray(c)) && c->child;
            if (cJSON_IsArray(j)) {
                if (nested)
                    print_yaml(c, indent + 2, true);
                else
                    print_yaml(c, 0, false);
            } else if (nested) {
                printf("\n");
                print_yaml(c, indent + 2, false);
            } else {
                printf(" ");
                print_yaml(c, 0, false);
            }
        }
        return;
    }
    _cleanup_free_ char *s = cJSON_PrintUnformatted(j);
    printf("%s\n", s ? s : "null");
}

/* The options into `cfg` and `format`. Returns 0, 1 (--help printed) or 2 (usage printed). */
static int parse_args(int argc, char **argv, struct inventory_config *cfg, const char **format)
{
    static const struct option opts[] = {
            {"sysfs-root", required_argument, NULL, 's'},
            {"proc-root", required_argument, NULL, 'P'},
            {"pci-ids", required_argument, NULL, 'p'},
            {"usb-ids", required_argument, NULL, 'U'},
            {"node-name", required_argument, NULL, 'n'},
            {"help", no_argument, NULL, 'h'},
            {NULL, 0, NULL, 0},
    };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        switch (c) {
        case 's':
            cfg->env.sysfs_root = optarg;
            break;
        case 'P':
            cfg->env.proc_root = optarg;
            break;
        case 'p':
            cfg->pci_ids = optarg;
            break;
        case 'U':
            cfg->usb_ids = optarg;
            break;
        case 'n':
            cfg->env.node_name = optarg;
            break;
        case 'o':
            *format = optarg;
            break;
        case 'h':
            usage(stdout);
            return 1;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        (void)fprintf(stderr, "hostdevd inventory: unexpected argument \"%s\"\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (strcmp(*format, "table") && strcmp(*format, "json") && strcmp(*format, "yaml")) {
        (void)fprintf(stderr,
                      "hostdevd inventory: output format \"%s\" is not one of table, json, "
                      "yaml\n",
                      *format);
        usage(stderr);
        return 2;
    }
    return 0;
}

static int print_list(const cJSON *list, const char *format)
{
    if (strcmp(format, "json") == 0) {
        _cleanup_free_ char *text = cJSON_Print(list);
        return text && puts(text) >= 0 ? 0 : 1;
    }
    if (strcmp(format, "yaml") == 0)
        print_yaml(list, 0, false);
    else
        print_table(list);
    return 0;
}

int invtool_run(int argc, char **argv)
{
    struct scans s = {0};
    struct inventory_config cfg = {.env = {.loop = EV_DEFAULT,
                                           .node_name = getenv("NODE_NAME"),
                                           .sysfs_root = "/sys",
                                           .proc_root = "/proc"},
                                   .resync = 86400,
                                   .uevent_source = "none",
                                   .usb = true};
    const char *format = "table";
    char host[256] = "";
    int r = parse_args(argc, argv, &cfg, &format);
    if (r != 0)
        return r == 1 ? 0 : 2;
    if (!cfg.env.node_name) {
        (void)gethostname(host, sizeof(host) - 1);
        cfg.env.node_name = host[0] ? host : "node";
    }
    struct inventory *inv = NULL;
    cfg.env.mgr = manager_new(cfg.env.loop, NULL, NULL);
    if (!cfg.env.mgr || manager_add_watches(cfg.env.mgr, &printer, &s) < 0 ||
        inventory_new(&cfg, &inv) < 0) {
        manager_free(cfg.env.mgr);
        return 1;
    }
    inventory_scan(inv, "inventory command");
    inventory_free(inv);
    manager_free(cfg.env.mgr);
    _cleanup_json_ cJSON *list = s.pci ? list_of(&s) : NULL;
    int rc = list ? print_list(list, format) : 1;
    if (!list)
        log_error("The scan failed: nothing to print", KV_STR("sysfsRoot", cfg.env.sysfs_root));
    map_free(s.pci);
    map_free(s.usb);
    return rc;
}
