#!/usr/bin/env bash
# test/integration/test_example.sh - docs/runtime.md's example reconciler is what the docs say: one
# file and one line. The block is written as src/controllers/claims/orphanclaims.c in a copy of
# the tree, the one line goes into controller.c's list of parts (a diff of one added line), the
# copy's release binary is built (only those two files compile: the objects are the tree's) and
# its controller runs against a real API server: a PCIDeviceClaim whose PCIDevice does not exist
# is warned about, one whose PCIDevice exists is not until that PCIDevice is deleted (the
# example's watch on PCIDevices queues the claim of the same name).
SUITE=example
# shellcheck source=test/integration/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1

cluster_start # (and $TEST_DIR)
W=$TEST_DIR/tree
mkdir -p "$W/build"
mkdir -p "$W/hack" && cp -a hack/arm64.mk "$W/hack/" && # (the Makefile includes it)
    cp -a Makefile VERSION src "$W/" && cp -a build/release build/gen "$W/build/" ||
    fail "a copy of the tree with its release objects"
hack/doc-blocks.py docs/runtime.md "Adding a reconciler" 1 >"$W/src/controllers/claims/orphanclaims.c" &&
    LINE=$(hack/doc-blocks.py docs/runtime.md "Adding a reconciler" 2) ||
    fail "docs/runtime.md has the example's file and its line"
python3 - "$W/src/controllers/controller.c" "$LINE" <<'PY' || fail "the line goes into controller.c's list"
import sys
path, line = sys.argv[1], sys.argv[2]
src = open(path).read().split("\n")
i = next(n for n, l in enumerate(src) if l.startswith("#define CONTROLLER_PARTS(X)"))
src.insert(i + 1, line)
open(path, "w").write("\n".join(src))
PY
ADDED=$(diff src/controllers/controller.c "$W/src/controllers/controller.c" | grep -c '^>')
REMOVED=$(diff src/controllers/controller.c "$W/src/controllers/controller.c" | grep -c '^<')
[ "$ADDED" = 1 ] && [ "$REMOVED" = 0 ] && pass "the role changes by one added line" ||
    fail "one line added to controller.c" "added $ADDED, removed $REMOVED"
NEW=$(diff -rq src "$W/src" | sed "s|$W/||")
[ "$NEW" = "Only in src/controllers/claims: orphanclaims.c
Files src/controllers/controller.c and src/controllers/controller.c differ" ] &&
    pass "... and one new file, nothing else" || fail "one new file and the role's line" "$NEW"
OUT=$(make -C "$W" --no-print-directory bin/hostdevd 2>&1)
# compiled: the new file, and those that embed the version (the copy has no git: another commit)
OTHER=$(sed -n 's/^  CC      //p' <<<"$OUT" | grep -vxF -f <(echo src/controllers/claims/orphanclaims.c; grep -l HOSTDEVD_VERSION src/*/*.c src/*/*/*.c))
if [ -x "$W/bin/hostdevd" ] && grep -q '^  CC .*orphanclaims.c' <<<"$OUT" && [ -z "$OTHER" ]; then
    pass "the copy builds: the new file compiled, nothing else but what embeds the version"; else
    fail "the copy builds with the example" "others compiled: $OTHER; $(tail -5 <<<"$OUT")"; fi

ADMIN=$TEST_DIR/cluster/admin.kubeconfig
install_crds
create_node n1
D1=$(agent_device pci n1 1 8086 10d3 intel.com/A)
agent_claim pci "$D1" n1
agent_claim pci n1-000000020 n1 # its PCIDevice never existed
LOG=$TEST_DIR/controller.log
PORT=$(free_port)
"$W/bin/hostdevd" controller --kubeconfig "$ADMIN" --listen "127.0.0.1:$PORT" --id example -v 0 >"$LOG" 2>&1 &
track $!
warned() { grep -q "PCIDeviceClaim without a PCIDevice.*claim=\"\?$1\"\?\( \|$\)" "$LOG"; }
if eventually 30 warned n1-000000020; then pass "the claim without its PCIDevice is warned about"; else
    fail "a warning for the orphaned claim" "$(tail -5 "$LOG")"; fi
warned "$D1" && fail "no warning for the claim whose PCIDevice exists" "$(grep orphan "$LOG")" ||
    pass "... not the claim whose PCIDevice exists"
kubectl delete pcidevice "$D1" >/dev/null
if eventually 30 warned "$D1"; then pass "its PCIDevice deleted: the watch queues the claim, warned"; else
    fail "a warning once the PCIDevice is gone" "$(tail -5 "$LOG")"; fi
finish
