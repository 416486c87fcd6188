/* SPDX-License-Identifier: Apache-2.0 */
/* test/unit/test_devplugin.c - device plugin answers: env names, sockets, Allocate, preference. */
#include <CUnit/CUnit.h>
#include <string.h>

#include "controllers/deviceplugin/devplugin.h"

static const struct devplugin_dev devs[] = {
        {.id = "0000:3b:00.0",
         .kind = DEVPLUGIN_PCI,
         .address = "0000:3b:00.0",
         .iommu_group = 40,
         .vfio_cdev = "vfio0",
         .numa_node = 0},
        {.id = "0000:3b:00.1",
         .kind = DEVPLUGIN_PCI,
         .address = "0000:3b:00.1",
         .iommu_group = 40,
         .vfio_cdev = "",
         .numa_node = 0},
        {.id = "0000:af:00.0",
         .kind = DEVPLUGIN_PCI,
         .address = "0000:af:00.0",
         .iommu_group = 61,
         .vfio_cdev = "",
         .numa_node = 1},
        {.id = "0000:af:00.1",
         .kind = DEVPLUGIN_PCI,
         .address = "0000:af:00.1",
         .iommu_group = 62,
         .vfio_cdev = "",
         .numa_node = 1},
        {.id = "titan-0951-1666-2-1-4",
         .kind = DEVPLUGIN_USB,
         .busnum = 2,
         .devnum = 4,
         .dev_path = "/dev/bus/usb/002/004",
         .numa_node = -1},
};
#define N_DEVS (sizeof(devs) / sizeof(devs[0]))

static void test_env_name(void)
{
    char b[128];
    CU_ASSERT_EQUAL(devplugin_env_name("PCI_RESOURCE", "nvidia.com/TU104GL_Tesla_T4", b, sizeof(b)),
                    0);
    CU_ASSERT_STRING_EQUAL(b, "PCI_RESOURCE_NVIDIA_COM_TU104GL_TESLA_T4");
    CU_ASSERT_EQUAL(devplugin_env_name("USB_RESOURCE", "kubevirt.io/node1.lab-0951-1666-2-1-4", b,
                                       sizeof(b)),
                    0);
    CU_ASSERT_STRING_EQUAL(b, "USB_RESOURCE_KUBEVIRT_IO_NODE1_LAB-0951-1666-2-1-4"); /* '-' stays */
    CU_ASSERT_EQUAL(devplugin_env_name("PCI_RESOURCE", "a.b/c", b, 10), -ENAMETOOLONG);
}

static void test_socket_name(void)
{
    char b[256], dir[120];
    struct err e = {""};
    CU_ASSERT_EQUAL(devplugin_socket_name("/var/lib/kubelet/device-plugins", "intel.com/82574L", b,
                                          sizeof(b), &e),
                    0);
    CU_ASSERT_STRING_EQUAL(b, "hostdevd-intel.com_82574L.sock");
    /* a long path: the name is cut short with a hash, and the whole path fits */
    const char *longdir = "/tmp/hostdevd-plugins.rQkLUv/kubelet/varlib/kubelet/device-plugins";
    const char *res = "intel.com/82574L_GIGABIT_NETWORK_CONNECTION";
    CU_ASSERT_EQUAL(devplugin_socket_name(longdir, res, b, sizeof(b), &e), 0);
    CU_ASSERT_EQUAL(strlen(longdir) + 1 + strlen(b), 107);
    CU_ASSERT_EQUAL(strncmp(b, "hostdevd-intel.com_82574L", 25), 0);
    char other[256];
    CU_ASSERT_EQUAL(devplugin_socket_name(longdir, "intel.com/82574L_GIGABIT_NETWORK_CONNECTION_2",
                                          other, sizeof(other), &e),
                    0);
    CU_ASSERT_STRING_NOT_EQUAL(b, other); /* same prefix, other hash */
    memset(dir, 'd', sizeof(dir) - 1);
    dir[0] = '/';
    dir[sizeof(dir) - 1] = '\0';
    CU_ASSERT_EQUAL(devplugin_socket_name(dir, res, b, sizeof(b), &e), -ENAMETOOLONG);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "--kubelet-dir"));
}

static void test_allocate_pci(void)
{
    const char *ids[] = {"0000:3b:00.0", "0000:3b:00.1"};
    struct devplugin_alloc a;
    struct err e = {""};
    CU_ASSERT_EQUAL_FATAL(devplugin_allocate("intel.com/X710", devs, N_DEVS, ids, 2, &a, &e), 0);
    CU_ASSERT_STRING_EQUAL(a.env_key, "PCI_RESOURCE_INTEL_COM_X710");
    CU_ASSERT_STRING_EQUAL(buf_str(&a.env_value), "0000:3b:00.0,0000:3b:00.1");
    CU_ASSERT_EQUAL_FATAL(a.n_paths, 3); /* vfio, the shared group once, the cdev */
    CU_ASSERT_STRING_EQUAL(a.paths[0], "/dev/vfio/vfio");
    CU_ASSERT_STRING_EQUAL(a.paths[1], "/dev/vfio/40");
    CU_ASSERT_STRING_EQUAL(a.paths[2], "/dev/vfio/devices/vfio0");
    devplugin_alloc_done(&a);
}

static void test_allocate_usb_and_unknown(void)
{
    const char *ids[] = {"titan-0951-1666-2-1-4"};
    const char *bad[] = {"0000:00:1f.6"};
    struct devplugin_alloc a;
    struct err e = {""};
    CU_ASSERT_EQUAL_FATAL(
            devplugin_allocate("kubevirt.io/titan-0951-1666-2-1-4", devs, N_DEVS, ids, 1, &a, &e),
            0);
    CU_ASSERT_STRING_EQUAL(a.env_key, "USB_RESOURCE_KUBEVIRT_IO_TITAN-0951-1666-2-1-4");
    CU_ASSERT_STRING_EQUAL(buf_str(&a.env_value), "2:4");
    CU_ASSERT_EQUAL_FATAL(a.n_paths, 1);
    CU_ASSERT_STRING_EQUAL(a.paths[0], "/dev/bus/usb/002/004");
    devplugin_alloc_done(&a);
    CU_ASSERT_EQUAL(devplugin_allocate("intel.com/X710", devs, N_DEVS, bad, 1, &a, &e), -ENOENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "0000:00:1f.6"));
    CU_ASSERT_EQUAL(devplugin_allocate("intel.com/X710", devs, N_DEVS, bad, 0, &a, &e), -EINVAL);
}

/* An mdev: its UUID in MDEV_PCI_RESOURCE_<NAME> ('-' kept, as KubeVirt's ResourceNameToEnvVar),
 * the vfio nodes of its own group. */
static void test_allocate_mdev(void)
{
    const struct devplugin_dev mdevs[] = {
            {.id = "83b8f4f2-509f-382f-3c1e-e6bfe0fa1001",
             .vfio_cdev = "",
             .kind = DEVPLUGIN_MDEV,
             .iommu_group = 14,
             .numa_node = -1},
            {.id = "83b8f4f2-509f-382f-3c1e-e6bfe0fa1002",
             .vfio_cdev = "vfio3",
             .kind = DEVPLUGIN_MDEV,
             .iommu_group = 15,
             .numa_node = -1},
    };
    const char *ids[] = {"83b8f4f2-509f-382f-3c1e-e6bfe0fa1002",
                         "83b8f4f2-509f-382f-3c1e-e6bfe0fa1001"};
    struct devplugin_alloc a;
    struct err e = {""};
    CU_ASSERT_EQUAL_FATAL(
            devplugin_allocate("devices.harvesterhci.io/mtty-2", mdevs, 2, ids, 2, &a, &e), 0);
    CU_ASSERT_STRING_EQUAL(a.env_key, "MDEV_PCI_RESOURCE_DEVICES_HARVESTERHCI_IO_MTTY-2");
    CU_ASSERT_STRING_EQUAL(
            buf_str(&a.env_value),
            "83b8f4f2-509f-382f-3c1e-e6bfe0fa1002,83b8f4f2-509f-382f-3c1e-e6bfe0fa1001");
    CU_ASSERT_EQUAL_FATAL(a.n_paths, 4);
    CU_ASSERT_STRING_EQUAL(a.paths[0], "/dev/vfio/vfio");
    CU_ASSERT_STRING_EQUAL(a.paths[1], "/dev/vfio/15");
    CU_ASSERT_STRING_EQUAL(a.paths[2], "/dev/vfio/devices/vfio3");
    CU_ASSERT_STRING_EQUAL(a.paths[3], "/dev/vfio/14");
    devplugin_alloc_done(&a);
}

static void test_prefer(void)
{
    const char *avail[] = {"0000:3b:00.0", "0000:af:00.0", "0000:3b:00.1", "0000:af:00.1"};
    const char *must[] = {"0000:af:00.1"};
    const char *out[4];
    /* nothing required: the NUMA node with the most devices, the group kept whole */
    CU_ASSERT_EQUAL(devplugin_prefer(devs, N_DEVS, avail, 4, NULL, 0, 2, out), 2);
    CU_ASSERT_STRING_EQUAL(out[0], "0000:3b:00.0");
    CU_ASSERT_STRING_EQUAL(out[1], "0000:3b:00.1");
    /* one required on node 1: the other one of node 1 next */
    CU_ASSERT_EQUAL(devplugin_prefer(devs, N_DEVS, avail, 4, must, 1, 2, out), 2);
    CU_ASSERT_STRING_EQUAL(out[0], "0000:af:00.1");
    CU_ASSERT_STRING_EQUAL(out[1], "0000:af:00.0");
    /* more than one node has: the rest in order */
    CU_ASSERT_EQUAL(devplugin_prefer(devs, N_DEVS, avail, 4, must, 1, 3, out), 3);
    CU_ASSERT_STRING_EQUAL(out[2], "0000:3b:00.0");
    CU_ASSERT_EQUAL(devplugin_prefer(devs, N_DEVS, avail, 4, NULL, 0, 9, out), 4);
}

static CU_TestInfo tests[] = {
        {"env name", test_env_name},
        {"socket name", test_socket_name},
        {"allocate PCI", test_allocate_pci},
        {"allocate USB; unknown IDs", test_allocate_usb_and_unknown},
        {"preferred allocation", test_prefer},
        {"allocate mdev", test_allocate_mdev},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo devplugin_suites[] = {
        {"devplugin", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
