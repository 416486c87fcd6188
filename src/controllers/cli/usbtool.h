/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/cli/usbtool.h - `hostdevd usb list`: the USB devices node/usb finds, one per line, as
 * the agent would publish them; with --udev, libudev's list of USB devices instead, so a test
 * on a real kernel can compare the two. Logs errors (stderr).
 */
#pragma once

/* argv[0] is "usb". Returns the process exit code. */
int usbtool_run(int argc, char **argv);
