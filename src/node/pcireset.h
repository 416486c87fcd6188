/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node/pcireset.h - reset and verify a PCI device when a VM lets it go: the kernel's reset
 * methods (reset_method), the reset itself (a write of 1 to reset), the ids the device answers
 * with (the first 4 bytes of config, against what the kernel read at probe in vendor and
 * device), and a pure verdict on what was done and seen: healthy, or NotResponding, IdChanged,
 * ResetFailed, DriverFailed, with a message that says what was seen and what to do.
 *
 * The files (Linux drivers/pci/pci-sysfs.c): reset_method lists the enabled methods in order,
 * space separated ("flr pm", "" when the admin disabled all); it and reset exist only when the
 * kernel knows a method (kernels before 5.15 have reset without reset_method). Writing 1 to
 * reset runs pci_reset_function(): -ENOTTY when no method worked or the device was not ready
 * after it, another -errno from the method (-EINVAL: pm and the device not in D0). The kernel
 * saves and restores the config space around it; a bus reset is listed only when the device is
 * alone on its bus, so a reset through this file never touches a sibling.
 *
 * Crash safety: a reset is idempotent for the device (it leaves it as a fresh probe finds it);
 * a release that crashed after the reset resets it again when it runs again, which is harmless.
 *
 * Paths are relative to a sysfs root fd (node/sysfs.h). Blocking: a reset can take a second or
 * more (FLR waits 100 ms, a device not ready up to 60 s); run it on the worker thread. No
 * logging.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The verdicts' reasons: those of controllers/health/health.h (checked by a unit test). */
#define NODE_PCIRESET_NOT_RESPONDING "NotResponding"
#define NODE_PCIRESET_ID_CHANGED     "IdChanged"
#define NODE_PCIRESET_RESET_FAILED   "ResetFailed"
#define NODE_PCIRESET_DRIVER_FAILED  "DriverFailed"

#define NODE_PCIRESET_MESSAGE_SIZE 1024

/* Reads the kernel's reset methods of `address` into `buf` ("flr pm"; "" none enabled).
 * Returns 0, -ENOENT when the file is absent (no method, or a kernel before 5.15: see
 * node_pcireset_can_reset()), or another -errno. */
int node_pcireset_methods(int root_fd, const char *address, char *buf, size_t size);

/* Whether the device has a reset file (the kernel knows a method for it). */
bool node_pcireset_can_reset(int root_fd, const char *address);

/* Resets the device now (writes 1 to its reset). Returns 0 or the kernel's -errno. */
int node_pcireset_reset(int root_fd, const char *address);

/* The ids the device answers with now: the first 4 bytes of its config (little endian), 0xffff
 * each when it does not answer. Returns 0 or -errno (-ENOENT: no such device). */
int node_pcireset_live_ids(int root_fd, const char *address, uint16_t *ret_vendor,
                           uint16_t *ret_device);

/* The ids the kernel read at probe (vendor, device). Returns 0 or -errno. */
int node_pcireset_probe_ids(int root_fd, const char *address, uint16_t *ret_vendor,
                            uint16_t *ret_device);

/* What a release did and saw, for the verdict. */
struct node_pcireset_facts {
    const char *address;
    bool present;        /* the device exists after the release (else nothing is judged) */
    bool reset_tried;    /* a reset was written */
    const char *methods; /* reset_method: the list, "" none enabled, NULL the file is absent */
    int reset_error;     /* the reset's -errno, 0 done */
    const char *skipped; /* why no reset was tried (a sentence), NULL when one was */
    int ids_error;       /* reading the ids: 0, or -errno (then the ids are not judged) */
    uint16_t vendor, device, live_vendor, live_device;
    int restore_error;    /* the restore's -errno, 0 done; -EIO: the driver did not take it */
    const char *driver;   /* the driver after the release ("" none) */
    const char *original; /* the driver it was to go back to ("" none) */
};

struct node_pcireset_verdict {
    const char *reason; /* NULL healthy, else one of NODE_PCIRESET_* */
    char method[32];    /* the method the kernel tries first ("flr"), "" when not reset */
    char message[NODE_PCIRESET_MESSAGE_SIZE]; /* what was done and seen; when unhealthy, what to
                                                 do */
    char summary[640]; /* the reset and the ids only: "reset by the kernel (reset_method: flr pm);
                          it answers as 8086:10d3" */
};

/* The verdict on a release: NotResponding (config reads all ones) before IdChanged (other ids)
 * before ResetFailed before DriverFailed (the original driver did not take it: -EIO); healthy
 * otherwise, also when the ids cannot be read (not judged: said in the message) or the device is
 * gone (the scan reports that). Pure. */
void node_pcireset_judge(const struct node_pcireset_facts *f, struct node_pcireset_verdict *ret);
