#!/usr/bin/env bash
# hack/mutate.sh - make mutate: mutation testing of the safety-critical code (docs/mutation.md).
# Not part of make test.
#
#   C: universalmutator (hack/universalmutator-build.sh: pinned, in a venv outside the repo)
#   writes the mutants of each file; hack/mutate.py judges a seeded random sample of them one at
#   a time: compiled at -O2 to drop those the compiler cannot tell from the original (TCE), then
#   at -O0 without sanitizers, linked into the plain build's unit runner (or kubetool:
#   build/plain/) in place of the original object, and run against the file's killer (the unit
#   suites that exercise it; for src/kube/informer.c, hack/mutate-informer.sh against one
#   control plane started here for the whole campaign; for the daemon's reconcilers and kubelet
#   plugins, their integration suite with the mutant's hostdevd); a mutant that survives is
#   judged again with the sanitizer build of make test (build/asan/), which sees leaks and bad
#   accesses.
#   Prints the score per file and overall and lists the survivors; build/mutate/report.md and
#   results.tsv keep them.
#   Admission policies (manifests/policies-*.yaml, CEL): hack/mutate-policies.py makes mutants
#   of the expressions (== and != swapped, && and || swapped, a negation dropped, a clause
#   dropped, a verb or operation changed) and test/integration/test_access.sh judges them, each
#   on a fresh control plane (about 70 s each, so MUTATE_POLICY_MAX of them).
#
# Environment:
#   MUTATE_FILES       the C files (default: the list below); each needs a killer here
#   MUTATE_MAX         mutants judged (killed or survived) per C file (default 40)
#   MUTATE_SEED        the sample's seed (default 1: the same seed draws the same mutants)
#   MUTATE_TIMEOUT     seconds a killer may take per mutant before it counts as killed (60)
#   MUTATE_SLOW_MAX    mutants judged per file whose killer is a whole integration suite run
#                      with the mutant's hostdevd (hack/mutate-bin.sh: kubevirt.c, plugins.c,
#                      draplugin.c; default 10, each suite given 600 s)
#   MUTATE_POLICY_MAX  policy mutants judged (default 12; 0 skips the policies)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
MUTATE_MAX=${MUTATE_MAX:-40}
MUTATE_SEED=${MUTATE_SEED:-1}
MUTATE_TIMEOUT=${MUTATE_TIMEOUT:-60}
MUTATE_POLICY_MAX=${MUTATE_POLICY_MAX:-12}
declare -A KILLER=(
    [src/node/vfio.c]="unit:vfio,pcibind,blockers,draprep"
    [src/node/hostuse.c]="unit:hostuse,blockers,vfio,pcibind"
    [src/node/blockers.c]="unit:blockers"
    [src/controllers/claims/pciclaim.c]="unit:pciclaim,pciclaim_decide,pcibind,usbclaim"
    [src/controllers/binding/pcibind.c]="unit:pcibind"
    [src/controllers/binding/bindplan.c]="unit:pciclaim,pciclaim_decide,pcibind"
    [src/controllers/binding/ledger.c]="unit:ledger,sriovpf"
    [src/controllers/runtime/manager.c]="unit:manager,ledger"
    [src/controllers/objects/pciobj.c]="unit:objects,pciclaim,pciclaim_decide,nodeclaims,devplugin,kubevirt,permitted,draslices"
    [src/controllers/objects/usbobj.c]="unit:objects,usbclaim,usbdevice,kubevirt,permitted"
    [src/kube/informer.c]="cmd:bash hack/mutate-informer.sh KUBETOOL"
    [src/kube/leader.c]="unit:leader"
    [src/controllers/kubevirt/permitted.c]="unit:permitted"
    [src/controllers/claims/nodeclaims.c]="unit:nodeclaims"
    [src/controllers/kubevirt/kubevirt.c]="unit:kubevirt,permitted;cmd:hack/mutate-bin.sh HOSTDEVD test/integration/test_controller.sh"
    [src/controllers/deviceplugin/plugins.c]="cmd:hack/mutate-bin.sh HOSTDEVD test/integration/test_plugins.sh"
    [src/controllers/dra/draplugin.c]="cmd:hack/mutate-bin.sh HOSTDEVD test/integration/test_drakubelet.sh"
)
# Lines a file's mutants are limited to: pciclaim.c's pure planning and decisions (its
# reconciler half is I/O on the runner, exercised by test_claims.sh, test_agent.sh and the qemu
# node, which no unit suite can drive).
reconciler() { grep -m1 -n '^/\* --- the reconciler' "$1" | cut -d: -f1; }
declare -A SPAN=(
    [src/controllers/claims/pciclaim.c]="1-$(reconciler src/controllers/claims/pciclaim.c)"
    [src/controllers/claims/nodeclaims.c]="1-$(reconciler src/controllers/claims/nodeclaims.c)"
)
# Files whose killer is a whole integration suite (a control plane, a kubelet, the daemon with
# the mutant): a smaller sample, and the time the suite may take per mutant.
MUTATE_SLOW_MAX=${MUTATE_SLOW_MAX:-10}
declare -A LIMIT=(
    [src/controllers/kubevirt/kubevirt.c]="$MUTATE_SLOW_MAX,600"
    [src/controllers/deviceplugin/plugins.c]="$MUTATE_SLOW_MAX,600"
    [src/controllers/dra/draplugin.c]="$MUTATE_SLOW_MAX,600"
)
MUTATE_FILES=${MUTATE_FILES:-src/node/vfio.c src/node/hostuse.c src/node/blockers.c \
src/controllers/claims/pciclaim.c src/controllers/binding/pcibind.c \
src/controllers/binding/bindplan.c src/controllers/binding/ledger.c src/controllers/runtime/manager.c \
src/controllers/objects/pciobj.c src/controllers/objects/usbobj.c \
src/kube/informer.c src/kube/leader.c \
src/controllers/kubevirt/permitted.c src/controllers/claims/nodeclaims.c src/controllers/kubevirt/kubevirt.c \
src/controllers/deviceplugin/plugins.c src/controllers/dra/draplugin.c}

UM=$(hack/universalmutator-build.sh)
nice -n 10 make -s -j2 mutate-flags build/plain/unit-tests build/plain/kubetool build/plain/hostdevd \
    build/asan/unit-tests build/asan/kubetool build/asan/hostdevd build/asan/grpctool
specs=()
for f in $MUTATE_FILES; do
    [ -n "${KILLER[$f]:-}" ] || { echo "mutate: no killer for $f (see hack/mutate.sh)" >&2; exit 2; }
    specs+=("$f${SPAN[$f]:+:${SPAN[$f]}}${LIMIT[$f]:+@${LIMIT[$f]}}=${KILLER[$f]}")
done
# shellcheck disable=SC2034 # lib.sh names its files after it
SUITE=mutate
# shellcheck source=test/integration/lib.sh disable=SC1091 # (the tests' helpers, not linted)
. test/integration/lib.sh
if [[ " $MUTATE_FILES " == *" src/kube/informer.c "* ]]; then
    cluster_start
    install_crds
    export TEST_DIR
fi
echo "mutate: $(git rev-parse --short HEAD), $(date -u +%Y-%m-%dT%H:%MZ), MUTATE_MAX=$MUTATE_MAX MUTATE_SEED=$MUTATE_SEED"
python3 hack/mutate.py --um "$UM" --flags build/mutate/flags.sh --out build/mutate \
    --max "$MUTATE_MAX" --seed "$MUTATE_SEED" --timeout "$MUTATE_TIMEOUT" "${specs[@]}"
if [ "$MUTATE_POLICY_MAX" -gt 0 ]; then
    python3 hack/mutate-policies.py --out build/mutate/policies --max "$MUTATE_POLICY_MAX" \
        --seed "$MUTATE_SEED"
fi
