#!/usr/bin/env bash
# test/long/test_node_reboot.sh - test/e2e/test_node.sh whole (E2E_NODE_ALL=1): after `reboot -f`
# the agent is supervised again (start #1), with its hostname, address and PCIDevices as before.
# In make test-long, not make test: make test reboots a node with a claim (test_claims.sh) and
# one with VFs (test_sriov.sh), and a TCG boot is seconds of its 2 cores (docs/testing.md).
E2E_NODE_ALL=1 exec bash "$(dirname "$0")/../e2e/test_node.sh"
