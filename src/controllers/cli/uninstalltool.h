/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/cli/uninstalltool.h - `hostdevd uninstall-check`: whether hostdevd can be removed
 * without leaving a device behind. Lists every PCIDeviceClaim and USBDeviceClaim (in-cluster
 * configuration, else a kubeconfig); with none it says so and exits 0; otherwise it names each
 * claim (node, device, Ready and its reason, being deleted or not), says what to do, writes the
 * same to the pod's termination message (/dev/termination-log when it exists) and exits 1. The
 * chart's pre-delete hook runs it, so `helm uninstall` refuses while claims remain
 * (docs/install.md#uninstall).
 */
#pragma once

/* argv[0] is "uninstall-check". Returns the process exit code. */
int uninstalltool_run(int argc, char **argv);
