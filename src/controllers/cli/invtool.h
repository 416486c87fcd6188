/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/cli/invtool.h - `hostdevd inventory`: what the agent would publish for this node,
 * printed instead of written (the PCIDevices and USBDevices with their status, blockers
 * included), from one scan of the same code the agent runs (controllers/devices/inventory.c). For a
 * person debugging a node, and for timing discovery as a whole process next to lspci and lsusb
 * (make bench). Formats: table (default; one line per device), json (a v1 List of the
 * objects), yaml (the same List). Logs problems (stderr); the output is on stdout.
 */
#pragma once

/* argv[0] is "inventory". Returns the process exit code. */
int invtool_run(int argc, char **argv);
