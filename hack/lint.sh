#!/usr/bin/env bash
# make lint: clang-format, cppcheck, clang-tidy, shellcheck (the qemu node's scripts), and the
# project's own rules (module dependencies, one place per library, banned calls, O_CLOEXEC). Any
# finding fails.
set -uo pipefail
shopt -s globstar
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rc=0
step() { printf '=== lint: %s\n' "$1"; }
bad() { printf '%s\n' "$1"; rc=1; }

mapfile -t files < <(git ls-files --cached --others --exclude-standard -- '*.c' '*.h' | sort -u)
mapfile -t csrc < <(printf '%s\n' "${files[@]}" | grep -E '\.c$' | grep -v '\.pb-c\.c$')
[ ${#files[@]} -gt 0 ] || { echo "lint: no C files"; exit 1; }
PKGS="libcurl libcjson libpci libudev libkmod libnghttp2 libprotobuf-c yaml-0.1 libmnl"
CFLAGS=(-std=gnu11 -Isrc -Itest/unit -Ibuild/gen -D_GNU_SOURCE -DUNIT_TESTING -DHOSTDEVD_VERSION='"lint"'
    $(pkg-config --cflags $PKGS))
mkdir -p build/gen
hack/gen-suites.sh test/unit/test_*.c >build/gen/suites.gen.h
for proto in src/**/*.proto; do protoc-c --proto_path=src --c_out=build/gen "$proto"; done

step "clang-format ($(clang-format --version | awk '{print $4}'))"
clang-format --dry-run -Werror "${files[@]}" || rc=1

step "cppcheck"
cppcheck --quiet --std=c11 --enable=warning,style,performance,portability --error-exitcode=1 \
    --inline-suppr --suppress=missingIncludeSystem --suppress=unusedFunction \
    --suppress=constParameterCallback -D__GNUC__ -D__CPPCHECK__ -Isrc -Ibuild/gen \
    -DPROTOBUF_C_VERSION_NUMBER=1004001 -DPROTOBUF_C_MIN_COMPILER_VERSION=1000000 \
    "${csrc[@]}" || rc=1

step "clang-tidy"
tidy_out=$(mktemp)
if ! clang-tidy --quiet "${csrc[@]}" -- "${CFLAGS[@]}" >"$tidy_out" 2>/dev/null; then
    bad "clang-tidy found problems:"
fi
grep -v '^[0-9]* warnings generated' "$tidy_out"
rm -f "$tidy_out"

# The qemu node's scripts: hack/qemu-node.sh and the guest's shell files in hack/qemu-guest/ and
# hack/qemu-nested/ (those starting with #!/bin/sh or a shellcheck shell directive; inittab,
# passwd are not); the kubelet harness (hack/kubelet.sh, hack/fakecri-build.sh); the Go test
# programs' builds and the Go they are built with (hack/go.sh); make deps and make demo.
step "shellcheck ($(shellcheck --version | awk '/^version:/{print $2}'))"
is_sh() { head -1 "$1" | grep -qE '^(#!/bin/sh|# shellcheck shell=)'; }
mapfile -t guest < <(git ls-files --cached --others --exclude-standard -- hack/qemu-guest hack/qemu-nested | sort -u)
shfiles=(hack/qemu-node.sh hack/kubelet.sh hack/go.sh hack/k8s-build.sh hack/fakecri-build.sh
    hack/grpcpeer-build.sh hack/kubeletpeer-build.sh hack/kubevirtenv-build.sh hack/kubevirt-crds.sh
    hack/kubevirt-build.sh
    hack/deps.sh hack/demo.sh)
shfiles+=(hack/image.sh test/integration/test_image.sh) # make image and its test
shfiles+=(hack/helm-build.sh hack/anchor-build.sh) # Helm; the anchor for make bench
shfiles+=(hack/cluster.sh) # the tests' control plane
shfiles+=(hack/launcher-rootfs.sh hack/debian-apt.sh test/e2e/launcher-lib.sh) # KubeVirt's launcher in the qemu node
shfiles+=(hack/mtty-build.sh) # the mdev sample in the qemu node
shfiles+=(hack/launcher-image.sh hack/kvhandler-build.sh test/integration/kubevirt-lib.sh
    test/long/test_kvchain.sh test/fixtures/kvchain/podip) # the chain from a VMI
shfiles+=(hack/toxiproxy-build.sh test/integration/faults-lib.sh test/integration/test_faults.sh
    test/long/test_faults_long.sh) # API faults
shfiles+=(hack/mutate.sh hack/mutate-informer.sh hack/universalmutator-build.sh) # make mutate
shfiles+=(hack/fuzz.sh) # make fuzz
shfiles+=(hack/run-tests.sh) # make test's runner
shfiles+=(test/long/test_drapartition.sh) # DRA partitionable devices
shfiles+=(test/long/test_health_soak.sh) # issue 46: no false alarm in 200 releases
shfiles+=(test/long/test_usb_all.sh) # ten USB hotplug rounds (make test runs three)
shfiles+=(hack/image-at.sh test/long/test_upgrade.sh) # the upgrade from an earlier version
shfiles+=(hack/prometheus-operator-crds.sh) # the monitoring objects' CRDs
shfiles+=(hack/arm64-sysroot.sh hack/qemu-user.sh test/long/test_arm64.sh) # linux/arm64
mapfile -t bench < <(git ls-files --cached --others --exclude-standard -- 'hack/bench/*.sh' | sort -u)
shfiles+=(hack/bench.sh "${bench[@]}") # make bench
for f in "${guest[@]}"; do is_sh "$f" && shfiles+=("$f"); done
shellcheck "${shfiles[@]}" || rc=1

step "module dependencies (docs/layout.md: which room may include which)"
# Each room (a folder of src/) may include its own headers and those of the rooms listed after
# it here, no other: the allowed edges, one line a room. A new room gets a line; a new arrow is
# a change of this list (and of docs/layout.md's table).
declare -A ALLOW=(
    [base]=""
    [kube]="base"
    [kubelet]="base"
    [node]="base"
    [controllers/runtime]="base kube kubelet node"
    [controllers/objects]="base kube node controllers/runtime"
    [controllers/binding]="base kube node controllers/runtime controllers/objects"
    [controllers/devices]="base kube kubelet node controllers/runtime controllers/objects controllers/binding controllers/health"
    [controllers/health]="base kube node controllers/runtime controllers/objects controllers/binding"
    [controllers/claims]="base kube node controllers/runtime controllers/objects controllers/devices controllers/binding controllers/health"
    [controllers/deviceplugin]="base kube kubelet node controllers/runtime controllers/objects controllers/devices controllers/binding controllers/health"
    [controllers/dra]="base kube kubelet node controllers/runtime controllers/objects controllers/devices controllers/binding controllers/health"
    [controllers/kubevirt]="base kube node controllers/runtime controllers/objects"
    [controllers/sriov]="base kube node controllers/runtime controllers/objects controllers/devices controllers/binding"
    [controllers/mdev]="base kube node controllers/runtime controllers/objects controllers/devices controllers/binding"
    [controllers/cli]="base kube kubelet node controllers/runtime controllers/objects controllers/devices controllers/binding controllers/claims"
    [controllers]="base kube kubelet node controllers/runtime controllers/objects controllers/binding controllers/devices controllers/claims controllers/deviceplugin controllers/dra controllers/kubevirt controllers/sriov controllers/mdev controllers/cli"
)
declare -A arrows=() rooms=()
for f in src/**/*.[ch]; do
    dir=$(dirname "${f#src/}")
    rooms["$dir"]=1
    [ -n "${ALLOW[$dir]+x}" ] || { bad "$f: folder $dir has no line in hack/lint.sh ALLOW"; continue; }
    while IFS=: read -r line inc; do
        idir=$(dirname "$inc")
        [ "$idir" = "$dir" ] && continue
        arrows["$dir>$idir"]=1
        [[ " ${ALLOW[$dir]} " == *" $idir "* ]] || bad "forbidden include in $f:$line: $inc ($dir may include ${ALLOW[$dir]:-nothing of ours})"
    done < <(grep -nE '^#include "[a-z_/]+\.h"' "$f" | grep -v '\.pb-c\.h' | sed -E 's/^([0-9]+):#include "([^"]+)"/\1:\2/')
done
echo "${#rooms[@]} rooms, ${#arrows[@]} arrows (room to room, one per pair)"
# No two modules include each other: module a (a.c and a.h) and module b, each naming the other.
declare -A uses=()
for f in src/**/*.c; do
    m=${f#src/}
    m=${m%.c}
    while read -r inc; do
        [ "$inc" = "$m" ] || uses["$m>$inc"]=1
    done < <(grep -ohE '^#include "[a-z_/]+\.h"' "$f" "src/$m.h" 2>/dev/null | sed -E 's/.*"([^"]+)\.h"/\1/')
done
for k in "${!uses[@]}"; do
    a=${k%%>*} b=${k#*>}
    [[ "$a" < "$b" ]] && [ -n "${uses["$b>$a"]:-}" ] && bad "circle: $a and $b include each other"
done

step "rooms (docs/layout.md: no setter called, no field written across rooms)"
python3 hack/lint-rooms.py || rc=1

step "one place per library"
only_in() { # header allowed-files...
    local h=$1 hits
    shift
    hits=$(grep -lF "#include <$h>" src/**/*.[ch] 2>/dev/null | grep -vxF -f <(printf '%s\n' "$@"))
    [ -z "$hits" ] || bad "<$h> included outside $*: $hits"
}
only_in curl/curl.h src/kube/http.c
only_in pci/pci.h src/node/pci.c
only_in libudev.h src/node/udev.c
only_in libkmod.h src/node/kmod.c
only_in yaml.h src/base/yaml.c
only_in nghttp2/nghttp2.h src/kubelet/grpcconn.c
only_in libmnl/libmnl.h src/node/vflink.c
# protobuf-c and its generated code are used by kubelet's message files only, one per API
# (kubelet/dpapi.c, draapi.c, regapi.c).
pbc=$(grep -lE '#include [<"](protobuf-c/protobuf-c\.h|[a-z/]*\.pb-c\.h)[>"]' src/**/*.[ch] 2>/dev/null | grep -vE '^src/kubelet/([a-z]+api\.c|pbmsg\.h)$')
[ -z "$pbc" ] || bad "protobuf-c or generated .pb-c.h included outside src/kubelet/*api.c and pbmsg.h: $pbc"

step "function length (STYLE.md: none over 60 lines in src/)"
long=$(hack/funclen.sh src/**/*.c)
[ -z "$long" ] || bad "functions over 60 lines:"$'\n'"$long"

step "banned calls and O_CLOEXEC"
banned=$(grep -nE '\b(sprintf|vsprintf|strcpy|strcat|strtok|atoi|atol|atoll|gets|system|popen|cJSON_GetObjectItem)[[:space:]]*\(' \
    src/**/*.[ch] test/unit/*.c 2>/dev/null)
[ -z "$banned" ] || bad "banned calls (STYLE.md):"$'\n'"$banned"
exits=$(grep -nE '\bexit[[:space:]]*\(' src/**/*.c 2>/dev/null | grep -v '^src/controllers/main\.c:')
[ -z "$exits" ] || bad "exit() outside main:"$'\n'"$exits"
opens=$(grep -nE '\b(open|openat)[[:space:]]*\(' src/**/*.c 2>/dev/null | grep -v O_CLOEXEC)
[ -z "$opens" ] || bad "open without O_CLOEXEC:"$'\n'"$opens"
fopens=$(grep -nE '\bfopen[[:space:]]*\(' src/**/*.c test/unit/*.c 2>/dev/null | grep -vE '"[rwa]\+?e"')
[ -z "$fopens" ] || bad "fopen without \"e\":"$'\n'"$fopens"

if [ $rc -eq 0 ]; then echo "lint: clean"; else echo "lint: FAILED"; fi
exit $rc
