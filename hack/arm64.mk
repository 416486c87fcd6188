# hack/arm64.mk (included by the Makefile) - the linux/arm64 build: Debian's cross compiler
# (aarch64-linux-gnu-gcc, make deps-arm64) against the :arm64 libraries of a private sysroot
# (hack/arm64-sysroot.sh: no dpkg --add-architecture, nothing of the host's apt state changes).
# Everything goes to build/arm64/, and compiles through ccache with a cache of its own, so the
# amd64 objects and the amd64 ccache are untouched. Nothing here is expanded unless an arm64
# target is built.
#
#   build/arm64/hostdevd         the release build, for make image ARCH=arm64
#   build/arm64/unit-tests       the unit runner, the plain build's flags (no sanitizers: they
#   build/arm64/fuzz-replay-*    and the corpus replays do not run well under qemu-user), run
#                                under emulation by test/long/test_arm64.sh

ARM64_CC := aarch64-linux-gnu-gcc
# Expanded once, when first used (the script prints the sysroot, fetching it on first use).
ARM64_SYSROOT = $(eval ARM64_SYSROOT := $(shell hack/arm64-sysroot.sh))$(ARM64_SYSROOT)
ARM64_PKG_CONFIG = PKG_CONFIG_SYSROOT_DIR=$(ARM64_SYSROOT) \
        PKG_CONFIG_LIBDIR=$(ARM64_SYSROOT)/usr/lib/aarch64-linux-gnu/pkgconfig:$(ARM64_SYSROOT)/usr/share/pkgconfig \
        pkg-config
ARM64_PKG_CFLAGS = $(eval ARM64_PKG_CFLAGS := $(shell $(ARM64_PKG_CONFIG) --cflags $(PKGS)))$(ARM64_PKG_CFLAGS)
ARM64_PKG_LIBS = $(eval ARM64_PKG_LIBS := $(shell $(ARM64_PKG_CONFIG) --libs $(PKGS)) -lev -lpthread)$(ARM64_PKG_LIBS)
ARM64_CCACHE_DIR := $(or $(HOSTDEVD_TOOLS_CACHE),$(XDG_CACHE_HOME),$(HOME)/.cache)/hostdevd-tools/ccache-arm64
ARM64_COMPILE = $(if $(CCACHE),CCACHE_DIR=$(ARM64_CCACHE_DIR) $(CCACHE)) $(ARM64_CC) --sysroot=$(ARM64_SYSROOT)
ARM64_LINK = $(ARM64_CC) --sysroot=$(ARM64_SYSROOT)

ARM64_REL_OBJS := $(REL_OBJS:build/release/%=build/arm64/release/%)
ARM64_PLAIN_LIB_OBJS := $(LIB_SRCS:%.c=build/arm64/plain/%.o)
ARM64_FUZZ_REPLAYS := $(FUZZ_NAMES:%=build/arm64/fuzz-replay-%)
ARM64_BINS := build/arm64/hostdevd build/arm64/unit-tests $(ARM64_FUZZ_REPLAYS)
.PHONY: arm64 deps-arm64
.SECONDARY: $(ARM64_REL_OBJS) $(ARM64_PLAIN_LIB_OBJS) build/arm64/plain/test/fuzz/replay.o \
        $(FUZZ_NAMES:%=build/arm64/plain/test/fuzz/fuzz_%.o)

# make arm64: the arm64 binaries above (make test-long builds them for its arm64 suite).
arm64: deps-arm64
	@$(MAKE) --no-print-directory $(ARM64_BINS)

deps-arm64:
	@hack/deps.sh arm64

build/arm64/release/%.o: %.c | $(GEN_HDRS)
	@mkdir -p $(@D)
	$(Q)$(call quiet,CC64,$<)$(ARM64_COMPILE) $(RELEASE_CFLAGS) $(ARM64_PKG_CFLAGS) -c -o $@ $<
build/arm64/release/src/controllers/main.o: RELEASE_CFLAGS += $(COMMIT_FLAG)
$(patsubst %.c,build/arm64/release/%.o,$(shell grep -l HOSTDEVD_VERSION src/*/*.c src/*/*/*.c)): build/version

build/arm64/hostdevd: $(ARM64_REL_OBJS)
	$(Q)$(call quiet,LD64,$@)$(ARM64_LINK) -o $@ $^ $(ARM64_PKG_LIBS)

# test_grpc.c's <valgrind/valgrind.h>: the host's (make deps installs valgrind), one header for
# every platform (its client requests have an aarch64 branch), so the sysroot needs no valgrind.
build/arm64/include/valgrind/valgrind.h: /usr/include/valgrind/valgrind.h
	@mkdir -p $(@D)
	@cp $< $@
build/arm64/plain/%.o: %.c | $(GEN_HDRS) build/arm64/include/valgrind/valgrind.h
	@mkdir -p $(@D)
	$(Q)$(call quiet,CC64,$<)$(ARM64_COMPILE) $(PLAIN_CFLAGS) $(ARM64_PKG_CFLAGS) -isystem build/arm64/include \
		$(if $(filter build/arm64/plain/test/%,$@),-DFIXTURES='"$(CURDIR)/test/fixtures"') -c -o $@ $<
build/arm64/plain/test/unit/main.o: build/gen/suites.gen.h
build/arm64/plain/test/unit/main.o: PLAIN_CFLAGS += -Ibuild/gen

build/arm64/unit-tests: $(UNIT_SRCS:%.c=build/arm64/plain/%.o) $(ARM64_PLAIN_LIB_OBJS)
	$(Q)$(call quiet,LD64,$@)$(ARM64_LINK) $(UNIT_LDFLAGS) -o $@ $^ $(ARM64_PKG_LIBS) -lcunit

build/arm64/fuzz-replay-%: build/arm64/plain/test/fuzz/fuzz_%.o build/arm64/plain/test/fuzz/replay.o $(ARM64_PLAIN_LIB_OBJS)
	$(Q)$(call quiet,LD64,$@)$(ARM64_LINK) -o $@ $^ $(ARM64_PKG_LIBS)
