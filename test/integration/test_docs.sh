#!/usr/bin/env bash
# test/integration/test_docs.sh - the install docs agree with each other and with what is tested
# (issue 31's first-install findings): no "not verified" for the tested chart, no Helm install
# that skips the Pod Security label the privileged agent needs, no "not yet" for what README says
# works, and uninstalling names the user's own grants. No cluster.
SUITE=docs
# shellcheck source=test/integration/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1

OUT=$(grep -n -i "not verified" docs/install.md docs/helm.md README.md || true)
[ -z "$OUT" ] && pass "the chart is not called unverified (test_helm.sh, test_chart_node.sh test it)" ||
    fail "no 'not verified' for the tested chart" "$OUT"
OUT=$(grep -n -E '(^|# or:? )helm install [^`]*--create-namespace' README.md docs/*.md || true)
[ -z "$OUT" ] && pass "no helm install command with --create-namespace (the namespace needs the privileged label)" ||
    fail "helm install commands label the namespace first" "$OUT"
OUT=$(grep -n -B2 -E '^helm install hostdevd charts/hostdevd -n hostdevd-system' docs/helm.md docs/install.md |
    grep -c 'pod-security.kubernetes.io/enforce=privileged')
[ "$OUT" -ge 2 ] && pass "docs/helm.md and docs/install.md label the namespace before helm install" ||
    fail "the namespace labelled before helm install, in both" "$OUT"
OUT=$(grep -n "The end-to-end check in the qemu node" docs/kubevirt.md || true)
[ -z "$OUT" ] && pass "docs/kubevirt.md does not list as missing the qemu-node check README says is done" ||
    fail "kubevirt.md's stale 'not yet'" "$OUT"
OUT=$(sed -n '/^## Uninstall/,/^## /p' docs/install.md)
expect_contains "uninstalling says to remove the user's own grants" "$OUT" "hostdevd-device-user" "Remove your own grants"
OUT=$(sed -n '/^## Two commands/,/^## /p' README.md)
expect_contains "README warns that make demo's agent pod runs privileged on this machine's /sys" "$OUT" \
    "its agent pod runs privileged on this" "would really" "unbind that device"
finish
