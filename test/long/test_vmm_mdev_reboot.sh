#!/usr/bin/env bash
# test/long/test_vmm_mdev_reboot.sh - test/e2e/test_vmm.sh whole, with its mdev reboot section
# (E2E_MDEV_REBOOT=1, issue 45): an enabled VGPUDevice's instance made again with the same UUID
# after a reboot of the qemu node, and opened by a VMM. In make test-long, not make test: the
# --vmm node's initramfs carries the nested VMM (82 MB unpacked), so its reboot under TCG is a
# minute of make test's 2 cores (9.6 s alone, 33-82 s beside the other suites). Also the
# negative control of the VMM checks (E2E_VMM_ALL=1): a VMM started without the hostdev lists no
# e1000e and its SeaBIOS finds none.
E2E_MDEV_REBOOT=1 E2E_VMM_ALL=1 exec bash "$(dirname "$0")/../e2e/test_vmm.sh"
