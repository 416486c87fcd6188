#!/usr/bin/env bash
# test/long/test_claims_all.sh - test/e2e/test_claims.sh whole (E2E_CLAIMS_ALL=1): the agent
# aborted after every step of a bind and of a restore (eight cases; make test runs the two
# unbinds), and ten claims timed next to the raw sysfs bind in the same guest (make bench has the
# latency). In make test-long, not make test: each abort case is an agent start and an abort in
# the TCG guest, and make test's 15 minutes on 2 cores are CPU-bound (docs/testing.md).
E2E_CLAIMS_ALL=1 exec bash "$(dirname "$0")/../e2e/test_claims.sh"
