/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/cli/vfiotool.h - `hostdevd vfio show|bind|restore ADDRESS`: the agent's bind and
 * restore sequences by hand, without Kubernetes: for recovery when no agent runs, and to time
 * the raw sysfs sequence (it prints the steps and how long they took). Logs.
 */
#pragma once

/* argv[0] is "vfio". Returns the process exit code. */
int vfiotool_run(int argc, char **argv);
