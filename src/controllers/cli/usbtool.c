/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/cli/usbtool.c - `hostdevd usb list` (see usbtool.h).
 *
 * One line per device, tab-separated: port path, vendor:product, device node, the host
 * controller's PCI address, the class name, the serial, the description ("-" for an empty PCI
 * address, class or serial). Control characters in the strings become spaces, so a line is
 * always seven fields. Skipped entries and per-device problems are logged as warnings; the exit
 * code stays 0 for them.
 */
#include "controllers/cli/usbtool.h"

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "node/sysfs.h"
#include "node/udev.h"
#include "node/usb.h"
#include "node/usbname.h"

static void usage(FILE *f)
{
    fputs("Usage: hostdevd usb list [--sysfs-root DIR] [--usb-ids PATH] [--udev]\n"
          "  list     the USB devices, one per line, tab-separated: port path, vendor:product,\n"
          "           device node, host controller PCI address, class, serial, description\n"
          "  --udev   libudev's list of USB devices of /sys instead (sysnames, one per line)\n",
          f);
}

/* `s`, or "-" when empty, with control characters as spaces, then `end`. */
static void print_field(const char *s, char end)
{
    if (!s[0])
        s = "-";
    for (; *s; s++)
        putchar((unsigned char)*s < 0x20 || *s == 0x7f ? ' ' : *s);
    putchar(end);
}

static void print_dev(const struct node_usb_dev *d, const struct node_usbids *ids)
{
    char ids_text[16], desc[512], cls[32];
    (void)snprintf(ids_text, sizeof(ids_text), "%s:%s", d->vendor_id, d->product_id);
    node_usbids_describe(ids, d->vendor_id, d->product_id, d->product, desc, sizeof(desc));
    print_field(d->port_path, '\t');
    print_field(ids_text, '\t');
    print_field(d->dev_path, '\t');
    print_field(d->pci_address, '\t');
    print_field(node_usb_class_name(d->class_code, cls, sizeof(cls)), '\t');
    print_field(d->serial, '\t');
    print_field(desc, '\n');
}

static int list_udev(void)
{
    char **names = NULL;
    size_t n = 0;
    int r = node_udev_list_usb(&names, &n);
    if (r < 0) {
        log_error("Cannot enumerate USB devices with libudev", KV_ERRNO(r));
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        puts(names[i]);
    node_sysfs_names_free(names);
    return 0;
}

static void warn_scan(const struct node_usb_scan_result *res)
{
    for (size_t i = 0; i < res->n_skipped; i++)
        log_warning("Skipped a USB entry", KV_STR("entry", res->skipped[i].entry),
                    KV_STR("why", res->skipped[i].why));
    for (size_t i = 0; i < res->n_devs; i++)
        if (res->devs[i].problem[0])
            log_warning("USB device partly unreadable", KV_STR("device", res->devs[i].port_path),
                        KV_STR("why", res->devs[i].problem));
}

/* A missing file given by name is an error; the default one only a warning. */
static int load_ids(const char *path, struct node_usbids **ret)
{
    struct err err = {""};
    int r = node_usbids_load(path, ret, &err);
    if (r < 0 && path) {
        log_error("Cannot load usb.ids", KV_STR("why", err.msg), KV_ERRNO(r));
        return 1;
    }
    if (r < 0) {
        log_warning("No usb.ids: descriptions are numbers", KV_STR("why", err.msg));
        *ret = NULL;
    }
    return 0;
}

static int list(const char *root, const char *ids_path)
{
    struct node_usbids *ids = NULL;
    if (load_ids(ids_path, &ids) != 0)
        return 1;
    struct node_usb_scan_result res = {0};
    struct err err = {""};
    int r, fd = node_sysfs_open_root(root);
    if (fd < 0) {
        log_error("Cannot open the sysfs root", KV_STR("root", root), KV_ERRNO(fd));
        node_usbids_free(ids);
        return 1;
    }
    r = node_usb_scan(fd, &res, &err);
    close(fd);
    if (r < 0) {
        log_error("Cannot scan USB devices", KV_STR("why", err.msg), KV_ERRNO(r));
        node_usbids_free(ids);
        return 1;
    }
    warn_scan(&res);
    for (size_t i = 0; i < res.n_devs; i++)
        print_dev(&res.devs[i], ids);
    node_usb_scan_result_done(&res);
    node_usbids_free(ids);
    return fflush(stdout) == 0 ? 0 : 1;
}

int usbtool_run(int argc, char **argv)
{
    static const struct option opts[] = {
            {"sysfs-root", required_argument, NULL, 's'},
            {"usb-ids", required_argument, NULL, 'i'},
            {"udev", no_argument, NULL, 'u'},
            {"help", no_argument, NULL, 'h'},
            {NULL, 0, NULL, 0},
    };
    const char *root = "/sys", *ids_path = NULL;
    bool udev = false;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 's')
            root = optarg;
        else if (c == 'i')
            ids_path = optarg;
        else if (c == 'u')
            udev = true;
        else {
            usage(c == 'h' ? stdout : stderr);
            return c == 'h' ? 0 : 2;
        }
    }
    if (argc - optind != 1 || strcmp(argv[optind], "list") != 0) {
        usage(stderr);
        return 2;
    }
    return udev ? list_udev() : list(root, ids_path);
}
