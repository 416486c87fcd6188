#!/usr/bin/env bash
# test/long/test_restarts.sh - test/integration/test_plugins.sh with LONG_KUBELET_RESTARTS
# (default 100) kubelet restarts instead of make test's 20 (`make test-long`): after each one the
# device plugins and the DRA plugin register again and the Node's allocatable, written after the
# restart, has every resource's count; the agent (sanitizer build) ends with the fds and threads
# it had before the restarts, and exits 0 with no leak.
PLUGIN_RESTARTS=${LONG_KUBELET_RESTARTS:-100} exec "$(dirname "$0")/../integration/test_plugins.sh"
