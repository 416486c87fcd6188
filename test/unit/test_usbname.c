/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_usbname.c - node/usbname: descriptions from small usb.ids files written here
 * (known and unknown ids, duplicates, sections after the vendors, malformed and truncated lines,
 * no trailing newline), the class table, and the real /usr/share/misc/usb.ids.
 */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "node/usbname.h"

#define REAL_IDS "/usr/share/misc/usb.ids"

static char ids_path[64];

/* Writes `text` (`len` bytes) to a new temporary file and loads it. */
static struct node_usbids *load_text(const char *text, size_t len)
{
    snprintf(ids_path, sizeof(ids_path), "/tmp/hostdevd-usbids-XXXXXX");
    int fd = mkstemp(ids_path);
    if (fd < 0)
        return NULL;
    ssize_t n = write(fd, text, len);
    close(fd);
    struct node_usbids *ids = NULL;
    struct err err = {""};
    if (n != (ssize_t)len || node_usbids_load(ids_path, &ids, &err) < 0)
        ids = NULL;
    unlink(ids_path); /* the mapping stays */
    return ids;
}

static const char small_ids[] = "# comment\n"
                                "\n"
                                "0627  Adomax Technology Co., Ltd\n"
                                "\t0001  QEMU Tablet\n"
                                "\t\t00  an interface line\n"
                                "# a comment inside the block\n"
                                "\t0002  Old Name\n"
                                "\t0002  New Name\n"
                                "\t00  short id\n"
                                "\t0003 one space\n"
                                "0bad Name with one space\n"
                                "zzzz  not hex\n"
                                "1234  Ctrl\tVendor\r\n"
                                "\t5678  Bell\aProduct\n"
                                "46f4  QEMU\n"
                                "abcd  First ABCD\n"
                                "\tffff  Gone with the first\n"
                                "ABCD  Second ABCD\n"
                                "\t0001  Product of the second\n"
                                "C 00  (Defined at Interface level)\n"
                                "9999  After the vendor list\n"
                                "\t0001  After too\n";

static char out[256];

static const char *describe(const struct node_usbids *ids, const char *v, const char *p,
                            const char *s)
{
    size_t n = node_usbids_describe(ids, v, p, s, out, sizeof(out));
    CU_ASSERT_EQUAL(n, strlen(out));
    return out;
}

static void test_small(void)
{
    struct node_usbids *ids = load_text(small_ids, sizeof(small_ids) - 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ids);
    CU_ASSERT_STRING_EQUAL(describe(ids, "0627", "0001", NULL),
                           "QEMU Tablet (Adomax Technology Co., Ltd)");
    CU_ASSERT_STRING_EQUAL(describe(ids, "0627", "0001", "QEMU USB Tablet"),
                           "QEMU Tablet (Adomax Technology Co., Ltd) [QEMU USB Tablet]");
    CU_ASSERT_STRING_EQUAL(describe(ids, "0627", "0002", ""),
                           "New Name (Adomax Technology Co., Ltd)");
    CU_ASSERT_STRING_EQUAL(describe(ids, "0627", "0003", ""),
                           "Unknown (Adomax Technology Co., Ltd)");
    CU_ASSERT_STRING_EQUAL(describe(ids, "0627", "0000", ""),
                           "Unknown (Adomax Technology Co., Ltd)");
    CU_ASSERT_STRING_EQUAL(describe(ids, "46f4", "0001", "x"), "Unknown (QEMU) [x]");
    CU_ASSERT_STRING_EQUAL(describe(ids, "0bad", "0001", ""), "Unknown 0bad:0001");
    CU_ASSERT_STRING_EQUAL(describe(ids, "1111", "2222", ""), "Unknown 1111:2222");
    /* a vendor given twice is the last one, with its own products only */
    CU_ASSERT_STRING_EQUAL(describe(ids, "abcd", "0001", ""),
                           "Product of the second (Second ABCD)");
    CU_ASSERT_STRING_EQUAL(describe(ids, "ABCD", "FFFF", ""), "Unknown (Second ABCD)");
    /* nothing after the first section line */
    CU_ASSERT_STRING_EQUAL(describe(ids, "9999", "0001", ""), "Unknown 9999:0001");
    /* control characters become spaces; "\r\n" ends a line */
    CU_ASSERT_STRING_EQUAL(describe(ids, "1234", "5678", "a\nb\x7f"),
                           "Bell Product (Ctrl Vendor) [a b ]");
    /* ids that are not 4 hex digits are described as given */
    CU_ASSERT_STRING_EQUAL(describe(ids, "627", "1", ""), "Unknown 627:1");
    CU_ASSERT_STRING_EQUAL(describe(ids, "06270", "0001", ""), "Unknown 06270:0001");
    CU_ASSERT_STRING_EQUAL(describe(NULL, "0627", "0001", "P"), "Unknown 0627:0001 [P]");
    CU_ASSERT_STRING_EQUAL(describe(NULL, "0627", "0001", NULL), "Unknown 0627:0001");
    node_usbids_free(ids);
}

static void test_truncated(void)
{
    /* the file ends inside lines: vendor without name, product without newline */
    static const char *const files[] = {
            "0627  Adomax\n\t0001  QEMU Tablet", /* no trailing newline */
            "0627  Adomax\n\t0001  QEMU Tablet\r",
            "0627  Adomax\n\t0001 ",
            "0627  Adomax\n\t00",
            "0627  Adomax\n\t",
            "0627  ",
            "0627",
            "C ",
            "\t0001  product before any vendor\n0627  Adomax",
            "",
    };
    static const char *const want[] = {
            "QEMU Tablet (Adomax)", "QEMU Tablet (Adomax)", "Unknown (Adomax)",
            "Unknown (Adomax)",     "Unknown (Adomax)",     "Unknown ()",
            "Unknown 0627:0001",    "Unknown 0627:0001",    "Unknown (Adomax)",
            "Unknown 0627:0001",
    };
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        struct node_usbids *ids = load_text(files[i], strlen(files[i]));
        CU_ASSERT_PTR_NOT_NULL_FATAL(ids);
        describe(ids, "0627", "0001", NULL);
        if (strcmp(out, want[i]) != 0)
            fprintf(stderr, "\nfile %zu: \"%s\"\n", i, out);
        CU_ASSERT_STRING_EQUAL(out, want[i]);
        node_usbids_free(ids);
    }
}

static void test_cut(void)
{
    char buf[32];
    /* cut to size - 1, never inside a UTF-8 character */
    CU_ASSERT_EQUAL(node_usbids_describe(NULL, "0627", "0001", NULL, buf, 12), 11);
    CU_ASSERT_STRING_EQUAL(buf, "Unknown 062");
    CU_ASSERT_EQUAL(node_usbids_describe(NULL, "0627", "0001", "\xc3\xa9", buf, 20), 19);
    CU_ASSERT_EQUAL(node_usbids_describe(NULL, "0627", "0001", "\xc3\xa9", buf, 21), 19);
    CU_ASSERT_STRING_EQUAL(buf, "Unknown 0627:0001 [");
    CU_ASSERT_EQUAL(node_usbids_describe(NULL, "0627", "0001", "\xc3\xa9", buf, 0), 0);
    CU_ASSERT_EQUAL(node_usbids_describe(NULL, "0627", "0001", "\xc3\xa9", buf, 1), 0);
    CU_ASSERT_STRING_EQUAL(buf, "");
}

static void test_load_errors(void)
{
    struct node_usbids *ids = (struct node_usbids *)(void *)out;
    struct err err = {""};
    CU_ASSERT_EQUAL(node_usbids_load("/nonexistent/usb.ids", &ids, &err), -ENOENT);
    CU_ASSERT_PTR_EQUAL(ids, (void *)out);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "/nonexistent/usb.ids"));
    CU_ASSERT_EQUAL(node_usbids_load("/tmp", &ids, &err), -EINVAL);
    CU_ASSERT_PTR_NULL(node_usbids_free(NULL));
}

static void test_class_names(void)
{
    char buf[32];
    static const char *const known[][2] = {
            {"01", "Audio"},
            {"02", "Communications"},
            {"03", "HID"},
            {"05", "Physical"},
            {"06", "Image"},
            {"07", "Printer"},
            {"08", "Mass Storage"},
            {"09", "Hub"},
            {"0a", "CDC-Data"},
            {"0b", "Smart Card"},
            {"0d", "Content Security"},
            {"0e", "Video"},
            {"0f", "Personal Healthcare"},
            {"10", "Audio/Video"},
            {"11", "Billboard"},
            {"12", "USB Type-C Bridge"},
            {"13", "USB Bulk Display Protocol"},
            {"14", "MCTP over USB"},
            {"3c", "I3C Device"},
            {"dc", "Diagnostic"},
            {"e0", "Wireless Controller"},
            {"ef", "Miscellaneous"},
            {"fe", "Application Specific"},
            {"ff", "Vendor Specific"},
    };
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        CU_ASSERT_STRING_EQUAL(node_usb_class_name(known[i][0], buf, sizeof(buf)), known[i][1]);
    CU_ASSERT_STRING_EQUAL(node_usb_class_name("0A", buf, sizeof(buf)), "CDC-Data");
    CU_ASSERT_STRING_EQUAL(node_usb_class_name("00", buf, sizeof(buf)), "Unknown (0x00)");
    CU_ASSERT_STRING_EQUAL(node_usb_class_name("04", buf, sizeof(buf)), "Unknown (0x04)");
    CU_ASSERT_STRING_EQUAL(node_usb_class_name("E1", buf, sizeof(buf)), "Unknown (0xe1)");
    CU_ASSERT_STRING_EQUAL(node_usb_class_name("", buf, sizeof(buf)), "");
    CU_ASSERT_STRING_EQUAL(node_usb_class_name(NULL, buf, sizeof(buf)), "");
    CU_ASSERT_STRING_EQUAL(node_usb_class_name("04", buf, 8), "Unknown");
}

static void test_real_file(void)
{
    struct node_usbids *ids = NULL;
    struct err err = {""};
    if (access(REAL_IDS, R_OK) != 0)
        return; /* the usb.ids package is a test dependency; hack/deps.sh installs it */
    CU_ASSERT_EQUAL_FATAL(node_usbids_load(NULL, &ids, &err), 0);
    CU_ASSERT_STRING_EQUAL(describe(ids, "0627", "0001", "QEMU USB Tablet"),
                           "QEMU Tablet (Adomax Technology Co., Ltd) [QEMU USB Tablet]");
    CU_ASSERT_STRING_EQUAL(describe(ids, "46f4", "0001", "QEMU USB HARDDRIVE"),
                           "Unknown (QEMU) [QEMU USB HARDDRIVE]");
    CU_ASSERT_STRING_EQUAL(describe(ids, "1d6b", "0002", ""), "2.0 root hub (Linux Foundation)");
    CU_ASSERT_STRING_EQUAL(describe(ids, "0001", "7778", ""),
                           "Counterfeit flash drive [Kingston] (Fry's Electronics)");
    CU_ASSERT_STRING_EQUAL(describe(ids, "ffee", "0001", ""), "Unknown (FNK Tech)");
    node_usbids_free(ids);
}

static CU_TestInfo tests[] = {
        {"small usb.ids", test_small},
        {"truncated files", test_truncated},
        {"cut descriptions", test_cut},
        {"load errors", test_load_errors},
        {"class names", test_class_names},
        {"real usb.ids", test_real_file},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo usbname_suites[] = {
        {"usbname", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
