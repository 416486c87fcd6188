#!/usr/bin/env bash
# test/long/test_sriov_all.sh - test/e2e/test_sriov.sh whole (E2E_SRIOV_ALL=1): numVFs written
# -> every VF's PCIDevice published, five samples (make test takes two, from its own checks). In
# make test-long, not make test: each count made and taken back is seconds of VF probes in the
# TCG guest, and make test's 15 minutes on 2 cores are CPU-bound (docs/testing.md).
E2E_SRIOV_ALL=1 exec bash "$(dirname "$0")/../e2e/test_sriov.sh"
