/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/main.c - the hostdevd command: parses the subcommand and runs it.
 *
 * `agent` runs the node agent (controllers/agent.c); `name` prints the object name hostdevd
 * gives a device, so a user can write the matching claim; `vfio` binds or restores one device
 * by hand (controllers/cli/vfiotool.c); `usb list` prints the USB devices the agent sees
 * (controllers/cli/usbtool.c); `inventory` prints what the agent would publish for this node
 * (controllers/cli/invtool.c); `controller` runs the cluster role (controllers/controller.c). Logs
 * errors once, here.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "base/names.h"
#include "controllers/agent.h"
#include "controllers/agentargs.h"
#include "controllers/cli/invtool.h"
#include "controllers/cli/uninstalltool.h"
#include "controllers/cli/usbtool.h"
#include "controllers/cli/vfiotool.h"
#include "controllers/controller.h"
#include "controllers/controllerargs.h"
#include "kube/names.h"

#ifndef HOSTDEVD_VERSION
#define HOSTDEVD_VERSION "0.0.0-dev"
#endif
#ifndef HOSTDEVD_COMMIT
#define HOSTDEVD_COMMIT "unknown"
#endif

static void usage(FILE *f)
{
    fputs("Usage: hostdevd COMMAND [ARGS]\n"
          "\n"
          "Commands:\n"
          "  agent [OPTIONS]                       run the node agent (agent --help)\n"
          "  controller [OPTIONS]                  run the cluster controller (controller --help)\n"
          "  version                               print the version\n"
          "  name pci NODE ADDRESS                 PCIDevice/PCIDeviceClaim name of a device\n"
          "  name usb NODE VENDOR PRODUCT PORTPATH USBDevice/USBDeviceClaim name of a device\n"
          "  vfio show|bind|restore ADDRESS        a device's vfio-pci binding by hand (vfio "
          "--help)\n"
          "  inventory [--sysfs-root DIR] [-o table|json|yaml]\n"
          "                                        what the agent would publish for this node\n"
          "                                        (inventory --help)\n"
          "  usb list [--sysfs-root DIR] [--usb-ids PATH] [--udev]\n"
          "                                        the USB devices, one per line (usb --help)\n"
          "  uninstall-check [--kubeconfig FILE]   whether hostdevd can be removed: no claim left\n"
          "                                        (the chart's pre-delete hook)\n"
          "  help                                  this text\n",
          f);
}

/* Says which argument of `hostdevd name` is wrong and what it should look like; returns 2. */
static int bad_arg(const char *what, const char *value, const char *want)
{
    (void)fprintf(stderr, "hostdevd name: %s \"%s\" is not %s\n", what, value, want);
    return 2;
}

static int print_name(int r, const char *name)
{
    if (r < 0) {
        (void)fprintf(stderr, "hostdevd name: cannot make the name: %s\n", strerror(-r));
        return 1;
    }
    puts(name);
    return 0;
}

/* The full address of `in`: lower case, and lspci's short form "00:1f.6" (printed when every
 * device is in domain 0000) with that domain. */
static void full_address(const char *in, char *out, size_t size)
{
    char low[32];
    size_t n = 0;
    for (; n < sizeof(low) - 1 && in[n]; n++)
        low[n] = (char)((in[n] >= 'A' && in[n] <= 'Z') ? in[n] - 'A' + 'a' : in[n]);
    low[n] = 0;
    char with_domain[40];
    (void)snprintf(with_domain, sizeof(with_domain), "0000:%s", low);
    (void)snprintf(out, size, "%s",
                   !kube_names_is_pci_address(low) && kube_names_is_pci_address(with_domain)
                           ? with_domain
                           : low);
}

static int cmd_name(int argc, char **argv)
{
    char name[KUBE_NAME_MAX + 1];
    const char *node = argc >= 3 ? argv[2] : "";
    if (argc >= 3 && !names_is_dns_subdomain(node))
        return bad_arg("node", node, "a node name (a DNS subdomain: lower case, digits, '-', '.')");
    if (argc == 4 && strcmp(argv[1], "pci") == 0) {
        char address[40];
        full_address(argv[3], address, sizeof(address));
        if (!kube_names_is_pci_address(address))
            return bad_arg("address", argv[3],
                           "a PCI address (0000:00:1f.6, or lspci's short form 00:1f.6)");
        return print_name(kube_names_pcidevice(node, address, name, sizeof(name)), name);
    }
    if (argc == 6 && strcmp(argv[1], "usb") == 0) {
        if (!kube_names_is_hex4(argv[3]))
            return bad_arg("vendor", argv[3], "4 lower-case hex digits (lsusb's 0627)");
        if (!kube_names_is_hex4(argv[4]))
            return bad_arg("product", argv[4], "4 lower-case hex digits (lsusb's 0001)");
        if (!kube_names_is_usb_port_path(argv[5]))
            return bad_arg("port path", argv[5],
                           "a USB port path (2-1.4, as in /sys/bus/usb/devices)");
        return print_name(kube_names_usbdevice(node, argv[3], argv[4], argv[5], name, sizeof(name)),
                          name);
    }
    usage(stderr);
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        puts("hostdevd " HOSTDEVD_VERSION " (" HOSTDEVD_COMMIT ")");
        return 0;
    }
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "name") == 0)
        return cmd_name(argc - 1, argv + 1);
    if (strcmp(cmd, "vfio") == 0)
        return vfiotool_run(argc - 1, argv + 1);
    if (strcmp(cmd, "inventory") == 0)
        return invtool_run(argc - 1, argv + 1);
    if (strcmp(cmd, "usb") == 0)
        return usbtool_run(argc - 1, argv + 1);
    if (strcmp(cmd, "uninstall-check") == 0)
        return uninstalltool_run(argc - 1, argv + 1);
    if (strcmp(cmd, "controller") == 0) {
        struct controller_config cfg;
        int r = controllerargs_parse(argc - 1, argv + 1, &cfg);
        if (r != 0)
            return r > 0 ? 0 : 2;
        return controller_run(&cfg);
    }
    if (strcmp(cmd, "agent") == 0) {
        struct agent_config cfg;
        int r = agentargs_parse(argc - 1, argv + 1, &cfg);
        if (r != 0)
            return r > 0 ? 0 : 2;
        return agent_run(&cfg);
    }
    log_error("Unknown command", KV_STR("command", cmd));
    usage(stderr);
    return 2;
}
