/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node/pciident.c - a PCI function's serial and slot beyond its address: see pciident.h.
 * Blocking (sysfs reads, one ethtool ioctl per network function); no logging.
 *
 * Decisions:
 * - The permanent MAC address has no sysfs file. net/<if>/address is the current one; it is the
 *   permanent one while addr_assign_type is 0 (NET_ADDR_PERM), which is what a fake tree can
 *   say. On a real node the ethtool ioctl answers even after the address was changed.
 * - The ioctl goes by interface name in the agent's network namespace: it is asked only when
 *   the tree's net/<if>/ifindex is the index the kernel gives that name, so an interface of a
 *   fake tree that happens to share a name with one of the host is never read.
 */
#include "node/pciident.h"

#include <errno.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "node/sysfs.h"
#include "node/vflink.h"

/* The most slots read from bus/pci/slots (a server has tens). */
#define SLOTS_MAX 1024

/* The longest hardware address the kernel holds (its HWADDR_MAX). */
#define HWADDR_MAX 32

struct slot {
    char name[NODE_PCIIDENT_SLOT_SIZE];
    char address[24]; /* "DDDDDDDD:BB:SS" */
};

struct node_pciident_slots {
    struct slot *v;
    size_t n;
};

const char *node_pciident_source_name(enum node_pciident_source s)
{
    switch (s) {
    case NODE_PCIIDENT_DSN:
        return "DSN";
    case NODE_PCIIDENT_MAC:
        return "PermanentMAC";
    case NODE_PCIIDENT_NVME:
        return "NVMeSerial";
    default:
        return "";
    }
}

void node_pciident_format_dsn(uint32_t low, uint32_t high, char buf[24])
{
    (void)snprintf(buf, 24, "%02x-%02x-%02x-%02x-%02x-%02x-%02x-%02x", high >> 24,
                   (high >> 16) & 0xff, (high >> 8) & 0xff, high & 0xff, low >> 24,
                   (low >> 16) & 0xff, (low >> 8) & 0xff, low & 0xff);
}

bool node_pciident_slot_matches(const char *slot_address, const char *address)
{
    const char *dot = strrchr(address, '.');
    size_t n = dot ? (size_t)(dot - address) : 0;
    /* "DDDD:BB:SS" has two colons; "DDDD:BB" (a slot without a device number) has one */
    const char *c1 = strchr(slot_address, ':');
    if (!n || !c1 || !strchr(c1 + 1, ':'))
        return false;
    return strlen(slot_address) == n && strncmp(slot_address, address, n) == 0;
}

/* Whether `s` is a name sysfs could hold for a slot: printable, no '/', fits. */
static bool good_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= NODE_PCIIDENT_SLOT_SIZE)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < 0x21 || s[i] > 0x7e)
            return false;
    return true;
}

int node_pciident_slots_read(int root_fd, struct node_pciident_slots **ret)
{
    char **names = NULL;
    size_t n = 0;
    struct node_pciident_slots *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    if (node_sysfs_list(root_fd, "bus/pci/slots", &names, &n) < 0)
        n = 0; /* no hotplug or slot driver: no slots */
    if (n > SLOTS_MAX)
        n = SLOTS_MAX;
    s->v = n ? calloc(n, sizeof(*s->v)) : NULL;
    if (n && !s->v) {
        node_sysfs_names_free(names);
        free(s);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        char path[128];
        struct slot *t = &s->v[s->n];
        if (!good_name(names[i]))
            continue;
        (void)snprintf(path, sizeof(path), "bus/pci/slots/%s/address", names[i]);
        if (node_sysfs_read(root_fd, path, t->address, sizeof(t->address)) <= 0)
            continue;
        (void)snprintf(t->name, sizeof(t->name), "%s", names[i]);
        s->n++;
    }
    node_sysfs_names_free(names);
    *ret = s;
    return 0;
}

const char *node_pciident_slot_of(const struct node_pciident_slots *s, const char *address)
{
    for (size_t i = 0; s && i < s->n; i++)
        if (node_pciident_slot_matches(s->v[i].address, address))
            return s->v[i].name;
    return NULL;
}

void node_pciident_slots_free(struct node_pciident_slots *s)
{
    if (!s)
        return;
    free(s->v);
    free(s);
}

/* The first entry of the device's directory `dir` ("." for the device's own) whose name starts
 * with `prefix`, into `buf`. Returns 0, -ENOENT, -EFBIG or the errno of the listing. */
static int first_entry(int dev_fd, const char *dir, const char *prefix, char *buf, size_t size)
{
    char **names = NULL;
    size_t n = 0;
    int r = node_sysfs_list(dev_fd, dir, &names, &n);
    if (r < 0)
        return r;
    r = -ENOENT;
    for (size_t i = 0; i < n; i++) {
        if (strncmp(names[i], prefix, strlen(prefix)) != 0)
            continue;
        r = strlen(names[i]) < size ? 0 : -EFBIG;
        if (r == 0)
            memcpy(buf, names[i], strlen(names[i]) + 1);
        break;
    }
    node_sysfs_names_free(names);
    return r;
}

int node_pciident_nvme_serial(int dev_fd, char *buf, size_t size)
{
    char ctrl[64], path[96];
    buf[0] = '\0';
    int r = first_entry(dev_fd, "nvme", "nvme", ctrl, sizeof(ctrl));
    if (r < 0)
        return r;
    (void)snprintf(path, sizeof(path), "nvme/%s/serial", ctrl);
    r = node_sysfs_read(dev_fd, path, buf, size);
    if (r < 0)
        return r;
    size_t n = (size_t)r;
    while (n > 0 && buf[n - 1] == ' ') /* the controller pads its 20 bytes with spaces */
        buf[--n] = '\0';
    for (size_t i = 0; i < n; i++)
        if (buf[i] < 0x20 || buf[i] > 0x7e) {
            buf[0] = '\0';
            return -EINVAL;
        }
    return n ? 0 : -ENOENT;
}

/* "aa:bb:cc:dd:ee:ff" from 6 bytes; -ENOENT for all zeros (no address). */
static int format_mac(const unsigned char *m, char *buf, size_t size)
{
    if (!(m[0] | m[1] | m[2] | m[3] | m[4] | m[5]))
        return -ENOENT;
    if (size < NODE_VFLINK_MAC_STR)
        return -EFBIG;
    node_vflink_mac_format(m, buf);
    return 0;
}

/* ETHTOOL_GPERMADDR of interface `ifname`, asked only when the kernel's index of that name is
 * `ifindex`. Returns 0 or -errno. */
static int ioctl_perm_mac(const char *ifname, long long ifindex, char *buf, size_t size)
{
    struct {
        struct ethtool_perm_addr h;
        unsigned char data[HWADDR_MAX];
    } req = {.h = {.cmd = ETHTOOL_GPERMADDR, .size = HWADDR_MAX}};
    struct ifreq ifr = {0};
    if (strlen(ifname) >= sizeof(ifr.ifr_name))
        return -EINVAL;
    memcpy(ifr.ifr_name, ifname, strlen(ifname) + 1);
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int r = ioctl(fd, SIOCGIFINDEX, &ifr) < 0 ? -errno : 0;
    if (r == 0 && ifr.ifr_ifindex != ifindex)
        r = -ENODEV; /* another interface of that name: not this tree's */
    ifr.ifr_data = (char *)&req;
    if (r == 0 && ioctl(fd, SIOCETHTOOL, &ifr) < 0)
        r = -errno;
    close(fd);
    if (r == 0 && req.h.size != 6)
        r = -ENOENT; /* not Ethernet */
    return r < 0 ? r : format_mac(req.data, buf, size);
}

/* The function's first network interface into `ifname` and the directory it is in into `dir`:
 * net/, or virtio<N>/net/ for a virtio function (its interface hangs off its virtio device).
 * Returns 0, -ENOENT or -errno. */
static int interface_of(int dev_fd, bool virtio_fn, char dir[64], char ifname[IFNAMSIZ])
{
    char virtio[32];
    (void)snprintf(dir, 64, "net");
    int r = first_entry(dev_fd, dir, "", ifname, IFNAMSIZ);
    if (r != -ENOENT || !virtio_fn ||
        first_entry(dev_fd, ".", "virtio", virtio, sizeof(virtio)) < 0)
        return r;
    (void)snprintf(dir, 64, "%s/net", virtio);
    return first_entry(dev_fd, dir, "", ifname, IFNAMSIZ);
}

int node_pciident_perm_mac(int dev_fd, bool virtio, char *buf, size_t size)
{
    char dir[64], ifname[IFNAMSIZ], path[128], text[64];
    long long v;
    unsigned char m[6];
    buf[0] = '\0';
    int r = interface_of(dev_fd, virtio, dir, ifname);
    if (r < 0)
        return r;
    (void)snprintf(path, sizeof(path), "%s/%s/ifindex", dir, ifname);
    if (node_sysfs_read_int(dev_fd, path, 10, &v) == 0 && v > 0 &&
        ioctl_perm_mac(ifname, v, buf, size) == 0)
        return 0;
    (void)snprintf(path, sizeof(path), "%s/%s/addr_assign_type", dir, ifname);
    r = node_sysfs_read_int(dev_fd, path, 10, &v);
    if (r < 0 || v != 0) /* NET_ADDR_PERM; random, stolen or set addresses are not the card's */
        return r == 0 || r == -ENOENT ? -ENOENT : r;
    (void)snprintf(path, sizeof(path), "%s/%s/address", dir, ifname);
    r = node_sysfs_read(dev_fd, path, text, sizeof(text));
    if (r >= 0)
        r = node_vflink_mac_parse(text, m, NULL); /* (a zero or multicast one is no identity) */
    return r < 0 ? r : format_mac(m, buf, size);
}
