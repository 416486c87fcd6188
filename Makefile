# hostdevd - one Makefile: build, test, demo, lint, clean.
#
#   make          bin/hostdevd (release flags, warnings are errors)
#   make test     deps + sanitizer build (ASan+UBSan) + every test suite that exists
#   make test-long  the long checks in test/long/ (minutes each; not part of make test)
#   make demo     demo deps + the real install: local control plane, kubelet with containerd,
#                 KubeVirt's CRDs, `helm install` of the chart (pods), a qemu node with a claimed
#                 e1000e, teams; prints what to try. make demo-down [PURGE=1] stops it all
#   make lint     clang-format, cppcheck, clang-tidy, shellcheck (qemu node), dependency rules
#   make bench    every benchmark (hack/bench/*.sh), side by side with its reference, written
#                 to docs/benchmarks.md; make bench-quick: the same table, smaller, in minutes
#   make fuzz     libFuzzer runs of every parser (FUZZ_RUNS, FUZZ_TARGETS)
#   make image    build/image/hostdevd-<version>.tar, the OCI image index (linux/amd64, linux/arm64;
#                 ARCH=amd64 or ARCH=arm64 for one), reproducible (docs/image.md)
#   make deps     installs the Debian packages the build and the tests need, and Go 1.26 for the
#                 test infrastructure (hack/go.sh: from the Go module proxy when it is missing)
#   make deps-arm64  Debian's cross compiler, a private :arm64 sysroot and qemu-aarch64 (make image's
#                 linux/arm64, make test-long; never make deps); make arm64: build/arm64/ (hack/arm64.mk)
#   make k8s      builds the pinned Kubernetes test binaries (kubelet too), the fake CRI
#                 runtime (test/fakecri), kubelet's device manager for the qemu node
#                 (test/kubeletpeer) and KubeVirt's env reader (test/kubevirtenv) into caches
#                 outside the repo; Helm for test_helm.sh (hack/helm-build.sh), Toxiproxy for
#                 test_faults.sh (hack/toxiproxy-build.sh), prometheus-operator's CRDs for the
#                 chart's monitoring objects (hack/prometheus-operator-crds.sh); KubeVirt v1.9.0's
#                 virt-controller for test_kvrender.sh (hack/kubevirt-build.sh)
#   make clean

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := all
.DELETE_ON_ERROR:

# One version (the file VERSION) names the image, the manifests' and the chart's image tag, the
# chart's appVersion and `hostdevd version`; the commit (git describe) is printed beside it.
VERSION := $(shell cat VERSION)
COMMIT := $(shell git describe --always --dirty 2>/dev/null || echo unknown)
CC ?= gcc
# make test builds its binaries with one job per core.
NPROC := $(shell nproc 2>/dev/null || echo 1)
ifeq ($(origin CC),default)
CC := gcc
endif

PKGS := libcurl libcjson libpci libudev libkmod libnghttp2 libprotobuf-c yaml-0.1 libmnl
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS = $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lev -lpthread

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 \
        -Wpointer-arith -Wvla -Wwrite-strings -Wundef -Wcast-align \
        -Werror=implicit-function-declaration
BASE_CFLAGS := -std=gnu11 $(WARN) -Isrc -Ibuild/gen -D_GNU_SOURCE -DHOSTDEVD_VERSION='"$(VERSION)"' \
        -fno-common -MMD -MP
RELEASE_CFLAGS := $(BASE_CFLAGS) -O2 -g -D_FORTIFY_SOURCE=2 -fstack-protector-strong
ASAN_CFLAGS := $(BASE_CFLAGS) -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
        -fno-sanitize-recover=all -DUNIT_TESTING
ASAN_LDFLAGS := -fsanitize=address,undefined

# Compiles go through ccache when it is installed (hack/deps.sh installs it): a clean clone then
# compiles only what no earlier build compiled. The commit goes to main.c alone, so a new commit
# changes one file's command line, not every file's.
# Nothing on a library file's command line names the clone's directory: the fixtures' path goes
# to test files only, and ccache leaves the directory out of its hash (so -g's compilation
# directory in a cached object can name the clone that compiled it first).
CCACHE := $(shell command -v ccache 2>/dev/null)
COMPILE = $(CCACHE) $(CC)
export CCACHE_NOHASHDIR := true
FIXTURES_FLAG = $(if $(filter build/asan/test/% build/plain/test/%,$@),-DFIXTURES='"$(CURDIR)/test/fixtures"')
COMMIT_FLAG := -DHOSTDEVD_COMMIT='"$(COMMIT)"'
build/release/src/controllers/main.o: RELEASE_CFLAGS += $(COMMIT_FLAG)
build/asan/src/controllers/main.o: ASAN_CFLAGS += $(COMMIT_FLAG)
build/plain/src/controllers/main.o: PLAIN_CFLAGS += $(COMMIT_FLAG)

# Build lines: "  CC      src/x.c" and "  LD      bin/hostdevd" by default; `make V=1` prints each
# whole command (compiler flags and all).
V ?= 0
Q := $(if $(filter 1,$(V)),,@)
quiet = $(if $(filter 1,$(V)),,printf '  %-7s %s\n' '$(1)' '$(2)';)

# Protocol buffers: protoc-c generates build/gen/<dir>/<name>.pb-c.[ch] from src/<dir>/<name>.proto.
PROTOS := $(wildcard src/*/*.proto)
GEN_SRCS := $(PROTOS:src/%.proto=build/gen/%.pb-c.c)
GEN_HDRS := $(GEN_SRCS:.c=.h)
LIB_SRCS := $(filter-out src/controllers/main.c,$(wildcard src/*/*.c src/*/*/*.c)) $(GEN_SRCS)
MAIN_SRC := src/controllers/main.c
UNIT_SRCS := $(wildcard test/unit/*.c)
FUZZ_NAMES := $(patsubst test/fuzz/fuzz_%.c,%,$(wildcard test/fuzz/fuzz_*.c))
FUZZ_REPLAYS := $(FUZZ_NAMES:%=build/asan/fuzz-replay-%)
FUZZ_BINS := $(FUZZ_NAMES:%=build/fuzz/fuzz_%)

REL_OBJS := $(LIB_SRCS:%.c=build/release/%.o) build/release/$(MAIN_SRC:.c=.o)
ASAN_LIB_OBJS := $(LIB_SRCS:%.c=build/asan/%.o)
UNIT_OBJS := $(UNIT_SRCS:%.c=build/asan/%.o)

.PHONY: mutate mutate-flags all deps deps-demo deps-image test test-unit test-integration test-e2e test-long fuzz bench bench-quick deps-bench demo demo-down lint clean k8s format

all: bin/hostdevd

bin/hostdevd: $(REL_OBJS)
	@mkdir -p $(@D)
	$(Q)$(call quiet,LD,$@)$(CC) -o $@ $^ $(PKG_LIBS)

build/gen/%.pb-c.c build/gen/%.pb-c.h &: src/%.proto
	@mkdir -p build/gen
	$(Q)$(call quiet,PROTOC,$<)protoc-c --proto_path=src --c_out=build/gen $<

build/release/%.o: %.c | $(GEN_HDRS)
	@mkdir -p $(@D)
	$(Q)$(call quiet,CC,$<)$(COMPILE) $(RELEASE_CFLAGS) $(PKG_CFLAGS) -c -o $@ $<

build/asan/%.o: %.c | $(GEN_HDRS)
	@mkdir -p $(@D)
	$(Q)$(call quiet,CC,$<)$(COMPILE) $(ASAN_CFLAGS) $(PKG_CFLAGS) $(FIXTURES_FLAG) -c -o $@ $<

# The unit runner's suite list is generated from the suites the test files define.
build/gen/suites.gen.h: $(filter test/unit/test_%.c,$(UNIT_SRCS)) hack/gen-suites.sh
	@mkdir -p $(@D)
	$(Q)$(call quiet,GEN,$@)hack/gen-suites.sh $(filter test/unit/test_%.c,$(UNIT_SRCS)) >$@

build/asan/test/unit/main.o: build/gen/suites.gen.h
build/asan/test/unit/main.o: ASAN_CFLAGS += -Ibuild/gen

# The unit runner's sysfs writes go through the fake tree's fault table (sysfs_tree.h).
UNIT_LDFLAGS := -Wl,--wrap=node_sysfs_write
build/asan/unit-tests: $(UNIT_OBJS) $(ASAN_LIB_OBJS)
	$(Q)$(call quiet,LD,$@)$(CC) $(ASAN_LDFLAGS) $(UNIT_LDFLAGS) -o $@ $^ $(PKG_LIBS) -lcunit

# Drives src/kube against the real API server in test/integration/test_kube.sh.
build/asan/kubetool: build/asan/test/integration/kubetool.o $(ASAN_LIB_OBJS)
	$(Q)$(call quiet,LD,$@)$(CC) $(ASAN_LDFLAGS) -o $@ $^ $(PKG_LIBS)

# Drives src/kubelet/grpc against grpc-go (test/grpcpeer) in test/integration/test_grpc.sh; the
# release build gives the round-trip figure.
build/asan/grpctool: build/asan/test/integration/grpctool.o $(ASAN_LIB_OBJS)
	$(Q)$(call quiet,LD,$@)$(CC) $(ASAN_LDFLAGS) -o $@ $^ $(PKG_LIBS)

build/release/grpctool: build/release/test/integration/grpctool.o $(LIB_SRCS:%.c=build/release/%.o)
	$(Q)$(call quiet,LD,$@)$(CC) -o $@ $^ $(PKG_LIBS)

# Drives src/node/vflink against the kernel: a dummy interface, the qemu node's igb VFs.
build/asan/vflinktool: build/asan/test/integration/vflinktool.o $(ASAN_LIB_OBJS)
	$(Q)$(call quiet,LD,$@)$(CC) $(ASAN_LDFLAGS) -o $@ $^ $(PKG_LIBS)

build/release/vflinktool: build/release/test/integration/vflinktool.o $(LIB_SRCS:%.c=build/release/%.o)
	$(Q)$(call quiet,LD,$@)$(CC) -o $@ $^ $(PKG_LIBS)

build/release/kubebench: build/release/test/integration/kubebench.o $(LIB_SRCS:%.c=build/release/%.o)
	$(Q)$(call quiet,LD,$@)$(CC) -o $@ $^ $(PKG_LIBS)

build/release/pcibench: build/release/test/integration/pcibench.o $(LIB_SRCS:%.c=build/release/%.o)
	$(Q)$(call quiet,LD,$@)$(CC) -o $@ $^ $(PKG_LIBS)

# make bench: figures printed, not asserted (a private control plane, release build).
# BENCH_IDLE_SECONDS (default 600) is how long the idle-traffic figure watches an idle agent.
BENCH_BINS = build/release/kubebench build/release/pcibench bin/hostdevd
bench: deps-bench k8s
	@$(MAKE) --no-print-directory $(BENCH_BINS)
	@hack/bench.sh
bench-quick: deps-bench k8s
	@$(MAKE) --no-print-directory $(BENCH_BINS)
	@hack/bench.sh --quick

# Fuzz targets: test/fuzz/fuzz_<name>.c defines LLVMFuzzerTestOneInput. `make fuzz` builds them
# with libFuzzer (clang); make test replays each corpus (test/fuzz/corpus/<name>/) through a
# plain driver in the sanitizer build, so crashes found once stay fixed.
build/asan/fuzz-replay-%: build/asan/test/fuzz/fuzz_%.o build/asan/test/fuzz/replay.o $(ASAN_LIB_OBJS)
	$(Q)$(call quiet,LD,$@)$(CC) $(ASAN_LDFLAGS) -o $@ $^ $(PKG_LIBS)

# ASan and UBSan, every UBSan finding fatal (-fno-sanitize-recover=all covers undefined). The
# library is compiled once (build/fuzz/obj, coverage-instrumented with fuzzer-no-link) and
# linked into every target.
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_CFLAGS = -std=gnu11 -g -O1 -Isrc -Ibuild/gen -D_GNU_SOURCE -DFUZZING -DHOSTDEVD_VERSION='"fuzz"' \
        $(FUZZ_SAN) $(PKG_CFLAGS)
FUZZ_LIB_OBJS := $(LIB_SRCS:%.c=build/fuzz/obj/%.o)
.SECONDARY: $(FUZZ_LIB_OBJS) $(GEN_SRCS) $(GEN_HDRS)
build/fuzz/obj/%.o: %.c | $(GEN_HDRS)
	@mkdir -p $(@D)
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c -o $@ $<
build/fuzz/fuzz_%: test/fuzz/fuzz_%.c $(FUZZ_LIB_OBJS)
	@mkdir -p $(@D)
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer -MMD -MP -MF $@.d -o $@ $< $(FUZZ_LIB_OBJS) $(PKG_LIBS)

build/asan/hostdevd: $(ASAN_LIB_OBJS) build/asan/$(MAIN_SRC:.c=.o)
	$(Q)$(call quiet,LD,$@)$(CC) $(ASAN_LDFLAGS) -o $@ $^ $(PKG_LIBS)

# The plain test build, build/plain: the sanitizer build's flags without the sanitizers. Valgrind
# memcheck runs it in make test-long (it cannot run sanitized binaries), and make mutate links
# each mutant's object into its unit runner or kubetool in place of the original's.
PLAIN_CFLAGS := $(filter-out -fsanitize=% -fno-sanitize-recover=%,$(ASAN_CFLAGS))
PLAIN_LIB_OBJS := $(LIB_SRCS:%.c=build/plain/%.o)
PLAIN_UNIT_OBJS := $(UNIT_SRCS:%.c=build/plain/%.o)
PLAIN_BINS := build/plain/unit-tests build/plain/hostdevd build/plain/kubetool build/plain/grpctool
build/plain/%.o: %.c | $(GEN_HDRS)
	@mkdir -p $(@D)
	$(Q)$(call quiet,CC,$<)$(COMPILE) $(PLAIN_CFLAGS) $(PKG_CFLAGS) $(FIXTURES_FLAG) -c -o $@ $<
build/plain/test/unit/main.o: build/gen/suites.gen.h
build/plain/test/unit/main.o: PLAIN_CFLAGS += -Ibuild/gen
build/plain/unit-tests: $(PLAIN_UNIT_OBJS) $(PLAIN_LIB_OBJS)
	$(Q)$(call quiet,LD,$@)$(CC) $(UNIT_LDFLAGS) -o $@ $^ $(PKG_LIBS) -lcunit
build/plain/hostdevd: $(PLAIN_LIB_OBJS) build/plain/$(MAIN_SRC:.c=.o)
	$(Q)$(call quiet,LD,$@)$(CC) -o $@ $^ $(PKG_LIBS)
build/plain/kubetool build/plain/grpctool: build/plain/%: build/plain/test/integration/%.o $(PLAIN_LIB_OBJS)
	$(Q)$(call quiet,LD,$@)$(CC) -o $@ $^ $(PKG_LIBS)

# make image: the OCI image hostdevd:<version>, built offline from bin/hostdevd and Debian's
# files (hack/image.sh, Containerfile, docs/image.md). The release build leaves the build
# directory out of the binary, and recompiles what embeds the version when `git describe`
# changes, so the same commit gives the same image digest.
.PHONY: image FORCE
RELEASE_CFLAGS += -ffile-prefix-map=$(CURDIR)=.
# ARCH: the platforms of the image index, amd64 and arm64 (the default: both, arm64 through
# make deps-arm64's cross compiler), or one of them alone. make test's test_image builds
# ARCH=amd64 only, test-long's test_arm64 both.
ARCH ?= amd64 arm64
image: deps-image $(if $(filter arm64,$(ARCH)),deps-arm64)
	@[ -n "$(strip $(ARCH))" ] && [ -z "$(filter-out amd64 arm64,$(ARCH))" ] || \
		{ echo "make image: ARCH=\"$(ARCH)\": amd64, arm64 or both" >&2; exit 2; }
	@$(MAKE) --no-print-directory $(if $(filter amd64,$(ARCH)),bin/hostdevd) $(if $(filter arm64,$(ARCH)),build/arm64/hostdevd)
	@ARCH="$(ARCH)" hack/image.sh build

include hack/arm64.mk

build/version: FORCE
	@mkdir -p $(@D)
	@[ "$$(cat $@ 2>/dev/null)" = '$(VERSION) $(COMMIT)' ] || echo '$(VERSION) $(COMMIT)' >$@
$(patsubst %.c,build/release/%.o,$(shell grep -l HOSTDEVD_VERSION src/*/*.c src/*/*/*.c)): build/version

deps:
	@hack/deps.sh test

# What make demo needs of make deps (no clang, cppcheck, valgrind; Kubernetes is built by the
# demo's control plane).
deps-demo:
	@hack/deps.sh demo

# What make image needs: the build's libraries, buildah and skopeo (not the test toolchain).
deps-image:
	@hack/deps.sh image

# make bench's references and profilers besides (hyperfine, usbutils, heaptrack).
deps-bench:
	@hack/deps.sh bench

k8s: deps
	@hack/k8s-build.sh >/dev/null
	@hack/fakecri-build.sh >/dev/null
	@hack/kubeletpeer-build.sh >/dev/null
	@hack/kubevirtenv-build.sh >/dev/null
	@hack/kubevirt-crds.sh >/dev/null
	@hack/kubevirt-build.sh virt-controller >/dev/null
	@hack/prometheus-operator-crds.sh >/dev/null
	@hack/helm-build.sh >/dev/null
	@hack/toxiproxy-build.sh >/dev/null

# What hack/mutate.py compiles and links a mutant with (docs/mutation.md), as bash arrays it
# sources: the plain build's (where it is judged first) and the sanitizer build's (where a
# survivor is judged again, as make test would run it).
build/mutate:
	@mkdir -p $@
mutate-flags: | build/mutate
	$(file >build/mutate/flags.sh,CC=$(CC))
	$(file >>build/mutate/flags.sh,CFLAGS=($(PLAIN_CFLAGS) $(PKG_CFLAGS) -DFIXTURES='"$(CURDIR)/test/fixtures"'))
	$(file >>build/mutate/flags.sh,LIBS=($(PKG_LIBS)))
	$(file >>build/mutate/flags.sh,UNIT_LDFLAGS=($(UNIT_LDFLAGS)))
	$(file >>build/mutate/flags.sh,UNIT_OBJS=($(PLAIN_UNIT_OBJS) $(PLAIN_LIB_OBJS)))
	$(file >>build/mutate/flags.sh,KUBETOOL_OBJS=(build/plain/test/integration/kubetool.o $(PLAIN_LIB_OBJS)))
	$(file >>build/mutate/flags.sh,ASAN_CFLAGS=($(ASAN_CFLAGS) $(PKG_CFLAGS) -DFIXTURES='"$(CURDIR)/test/fixtures"'))
	$(file >>build/mutate/flags.sh,ASAN_LDFLAGS=($(ASAN_LDFLAGS)))
	$(file >>build/mutate/flags.sh,ASAN_UNIT_OBJS=($(UNIT_OBJS) $(ASAN_LIB_OBJS)))
	$(file >>build/mutate/flags.sh,ASAN_KUBETOOL_OBJS=(build/asan/test/integration/kubetool.o $(ASAN_LIB_OBJS)))
	$(file >>build/mutate/flags.sh,HOSTDEVD_OBJS=(build/plain/$(MAIN_SRC:.c=.o) $(PLAIN_LIB_OBJS)))
	$(file >>build/mutate/flags.sh,ASAN_HOSTDEVD_OBJS=(build/asan/$(MAIN_SRC:.c=.o) $(ASAN_LIB_OBJS)))
	@:

# make mutate [MUTATE_FILES="src/node/vfio.c ..."] [MUTATE_MAX=N] [MUTATE_SEED=S]: the mutation
# campaign over the safety-critical files (not part of make test).
mutate: deps k8s
	@$(MAKE) --no-print-directory mutate-flags build/plain/unit-tests build/plain/kubetool \
		build/plain/hostdevd $(TEST_BINS)
	@hack/mutate.sh

# The test build is separate (build/asan) so `make` and `make test` never share objects.
TEST_BINS := build/asan/unit-tests build/asan/hostdevd build/asan/kubetool bin/hostdevd \
        build/asan/grpctool build/release/grpctool build/asan/vflinktool build/release/vflinktool \
        $(FUZZ_REPLAYS)

test: deps k8s
	@$(MAKE) --no-print-directory -j$(NPROC) $(TEST_BINS)
	@hack/run-tests.sh all

test-unit: deps
	@$(MAKE) --no-print-directory -j$(NPROC) $(TEST_BINS)
	@hack/run-tests.sh unit

test-integration: deps k8s
	@$(MAKE) --no-print-directory -j$(NPROC) $(TEST_BINS)
	@hack/run-tests.sh integration

test-e2e: deps k8s
	@$(MAKE) --no-print-directory -j$(NPROC) $(TEST_BINS)
	@hack/run-tests.sh e2e

# make test-long: test/long/ (an idle cluster's writes over 5 minutes, LONG_IDLE_SECONDS); the
# arm64 build for test_arm64 (make deps-arm64's cross compiler and qemu-user).
test-long: deps k8s deps-arm64
	@$(MAKE) --no-print-directory -j$(NPROC) $(TEST_BINS) $(PLAIN_BINS) $(ARM64_BINS)
	@hack/run-tests.sh long

# make fuzz [FUZZ_RUNS=1000000] [FUZZ_TARGETS="watch status"]: runs each target from its corpus
# and prints the executions; new inputs go to build/fuzz/corpus-<name>, crashes to build/fuzz/.
FUZZ_RUNS ?= 1000000
FUZZ_TARGETS ?= $(FUZZ_NAMES)
fuzz: deps
	@$(MAKE) --no-print-directory $(FUZZ_TARGETS:%=build/fuzz/fuzz_%)
	@hack/fuzz.sh $(FUZZ_RUNS) $(FUZZ_TARGETS)

demo: deps-demo bin/hostdevd
	@hack/demo.sh up

# make demo-down PURGE=1 also removes .demo/ (about 200 MB).
demo-down:
	@hack/demo.sh down $(if $(PURGE),--purge)

lint: deps
	@hack/lint.sh

format:
	@clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf build bin

-include $(shell find build -name '*.d' 2>/dev/null)
