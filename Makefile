# smuxfs - one entry point. See README.md.
#
#   make            build build/libsmux.a and the test binaries
#   make check      install missing deps, run every test normally and under
#                   ASan+UBSan (fails on any finding), then the package test
#   make deb        the Debian package in build/deb (deb-check: lintian,
#                   install, man pages, unit, an fstab mount)
#   make rpm        the RPM package in build/rpm (rpm-check: its files,
#                   requires, unpacked binaries run)
#   make asan       the test suite under AddressSanitizer + UBSan only
#   make tsan       the concurrent tests under ThreadSanitizer
#   make soak       the lose-nothing storm for SOAK_SECONDS (all modes)
#   make format     clang-format the tree in place
#   make lint       clang-format --dry-run, clang-tidy, cppcheck (clean = pass)
#   make clean
#
# VARIANT=normal|asan|tsan selects the build flavour; each has its own
# output directory so they never mix objects.

VARIANT ?= normal
CC ?= cc
ifeq ($(CC),cc)
CC := gcc
endif

PKGS := fuse3 libcurl inih cmocka libcrypto expat jansson sqlite3
LIB_PKGS := libcurl libcrypto expat jansson inih sqlite3
TEST_PKGS := cmocka

ifeq ($(VARIANT),normal)
OUT := build
SAN :=
OPT := -O2
else ifeq ($(VARIANT),asan)
OUT := build/asan
SAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
OPT := -O1
else ifeq ($(VARIANT),tsan)
OUT := build/tsan
SAN := -fsanitize=thread -fno-omit-frame-pointer
OPT := -O1
else
$(error VARIANT must be normal, asan or tsan)
endif

pc_cflags = $(shell pkg-config --cflags $(1) 2>/dev/null)
pc_libs = $(shell pkg-config --libs $(1) 2>/dev/null)

WARN := -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wvla -Wstrict-prototypes \
	-Wmissing-prototypes -Wno-unused-parameter
CFLAGS_BASE := -std=c11 -D_GNU_SOURCE -g $(OPT) $(WARN) $(SAN) -Iinclude -Isrc \
	-MMD -MP -pthread
CFLAGS_LIB := $(CFLAGS_BASE) $(call pc_cflags,$(LIB_PKGS))
CFLAGS_TEST := $(CFLAGS_LIB) $(call pc_cflags,$(TEST_PKGS) fuse3 inih) -Itests
LDLIBS_LIB := $(call pc_libs,$(LIB_PKGS)) -lm -pthread
LDLIBS_TEST := $(call pc_libs,$(TEST_PKGS)) $(LDLIBS_LIB)
LDFLAGS := $(SAN)

LIB_SRCS := $(sort $(wildcard src/core/*.c src/backends/*.c))
LIB_OBJS := $(LIB_SRCS:%.c=$(OUT)/obj/%.o)
LIB := $(OUT)/libsmux.a

# The daemon: src/fs/*.c; everything but main.c also goes into
# libsmuxfs.a so unit tests can link the daemon's modules.
FS_PKGS := fuse3 inih
CFLAGS_FS := $(CFLAGS_LIB) $(call pc_cflags,$(FS_PKGS))
LDLIBS_FS := $(call pc_libs,$(FS_PKGS)) $(LDLIBS_LIB)
FS_SRCS := $(sort $(filter-out src/fs/main.c,$(wildcard src/fs/*.c)))
FS_OBJS := $(FS_SRCS:%.c=$(OUT)/obj/%.o)
FS_LIB := $(OUT)/libsmuxfs.a
SMUXFS := $(OUT)/smuxfs

# The operator's command line (src/ctl/): talks to a mount only through
# its .smux/ files, so it links jansson and nothing of the daemon.
CTL_SRCS := $(sort $(wildcard src/ctl/*.c))
CTL_OBJS := $(CTL_SRCS:%.c=$(OUT)/obj/%.o)
SMUXCTL := $(OUT)/smuxctl

UNIT_SRCS := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(OUT)/tests/%)
# Shared test helpers (tests/support/*.c) link into every test binary.
SUPPORT_SRCS := $(sort $(wildcard tests/support/*.c))
SUPPORT_OBJS := $(SUPPORT_SRCS:%.c=$(OUT)/obj/%.o)
CONF_SRCS := $(sort $(wildcard tests/conformance/*.c))
CONF_OBJS := $(CONF_SRCS:%.c=$(OUT)/obj/%.o)
CONF_BIN := $(OUT)/tests/test_conformance
# The randomized lose-nothing storm (test_lose_nothing) runs last, so a
# failure there never hides the other tests' results.
STORM_BIN := $(filter %/test_lose_nothing,$(UNIT_BINS))
# test_swift_live needs a real Swift: under `make check` it uses the one
# tests/servers/shared.sh started for every pass (SMUX_TEST_SWIFT_DIR);
# alone it starts its own (a minute on a loaded machine).
TEST_BINS := $(filter-out $(STORM_BIN),$(UNIT_BINS)) \
	$(if $(CONF_SRCS),$(CONF_BIN)) $(STORM_BIN)

.PHONY: bench-s3 bench-cdn check-s3 check-swift check-posix test-servers man deb deb-check rpm rpm-check soak install demo-stop bench all lib tests check test test-tsan test-tsan-build test-integration asan tsan deps format lint clean demo bench-core bench-hints conformance-large check-passes test-run test-tsan-run test-integration-run
# Objects stay after a build (they were deleted as intermediates, and a
# later make could decide to remake a binary from them).
.SECONDARY:
all: lib tests $(if $(wildcard src/fs/main.c),$(SMUXFS)) $(SMUXCTL)
lib: $(LIB)
tests: $(TEST_BINS)

$(OUT)/obj/src/fs/%.o: src/fs/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_FS) -c $< -o $@

$(OUT)/obj/src/%.o: src/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_LIB) -c $< -o $@

$(OUT)/obj/tests/%.o: tests/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_TEST) -c $< -o $@

$(LIB): $(LIB_OBJS)
	@mkdir -p $(@D)
	rm -f $@
	ar rcs $@ $^

$(FS_LIB): $(FS_OBJS)
	@mkdir -p $(@D)
	rm -f $@
	ar rcs $@ $^

$(SMUXFS): $(OUT)/obj/src/fs/main.o $(FS_LIB) $(LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS_FS)

$(SMUXCTL): $(CTL_OBJS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) $^ -o $@ $(call pc_libs,jansson)

$(OUT)/tests/test_%: $(OUT)/obj/tests/unit/test_%.o $(SUPPORT_OBJS) $(FS_LIB) $(LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS_TEST) $(LDLIBS_FS)

$(CONF_BIN): $(CONF_OBJS) $(SUPPORT_OBJS) $(LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS_TEST)

BENCH_CORE := $(OUT)/bench/bench_core
$(BENCH_CORE): $(OUT)/obj/tests/bench/bench_core.o $(LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS_LIB)

BENCH_HINTS := $(OUT)/bench/bench_hints
$(BENCH_HINTS): $(OUT)/obj/tests/bench/bench_hints.o $(LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS_LIB)

# smuxfs against a plain directory, mergerfs and unionfs-fuse, side by
# side in one run (tests/bench/fs_bench.sh; it installs the peers itself),
# then the S3 rows (bench-s3), then the Swift and Bunny rows (bench-cdn).
bench: deps
	$(MAKE) VARIANT=normal all
	BENCH_SMUXFS=$(abspath build/smuxfs) tests/bench/fs_bench.sh
	BENCH_SMUXFS=$(abspath build/smuxfs) tests/bench/s3_bench.sh
	BENCH_SMUXFS=$(abspath build/smuxfs) tests/bench/cdn_bench.sh

# smuxfs with one s3 backend against s3fs and rclone mount on one s3rver,
# time to durability and requests per workload (tests/bench/s3_bench.sh; it
# installs s3fs and rclone itself). BENCH_SIZE_MB, BENCH_FILES, BENCH_REPS.
bench-s3: deps
	$(MAKE) VARIANT=normal all
	BENCH_SMUXFS=$(abspath build/smuxfs) tests/bench/s3_bench.sh

# smuxfs with one swift backend against rclone mount (swift backend) on one
# Swift, smuxfs's s3 backend on the same Swift's S3 API, and smuxfs with one
# bunny backend on the Bunny emulator: time to durability and requests per
# workload (tests/bench/cdn_bench.sh; it installs rclone itself).
# BENCH_SIZE_MB, BENCH_FILES, BENCH_REPS.
bench-cdn: deps
	$(MAKE) VARIANT=normal all
	BENCH_SMUXFS=$(abspath build/smuxfs) tests/bench/cdn_bench.sh

# The whole conformance suite on OpenStack Swift (tempauth, and through the
# identity v2.0 emulator) and a shield mount of file + swift
# (tests/integration/test_swift.sh), normally and under ASan: minutes (a
# Swift PUT costs ~100-250 ms here), so not in `make check` (test_swift_auth
# is). One Swift serves them all (SMUX_TEST_SWIFT_DIR).
check-swift: deps
	$(MAKE) VARIANT=normal $(CONF_BIN) build/tests/test_swift_live build/smuxfs
	$(MAKE) VARIANT=asan build/asan/tests/test_conformance \
		build/asan/tests/test_swift_live build/asan/smuxfs
	@d=$$(mktemp -d /tmp/smux-check-swift.XXXXXX); \
	trap 'tests/servers/swift.sh stop "$$d" >/dev/null 2>&1; rm -rf "$$d"' EXIT; \
	tests/servers/swift.sh start "$$d" >/dev/null && \
	export SMUX_TEST_SWIFT_DIR=$$d && set -x && \
	build/tests/test_swift_live && build/asan/tests/test_swift_live && \
	SMUX_CONF_FIXTURE=swift build/tests/test_conformance && \
	SMUX_CONF_FIXTURE=swift-identity build/tests/test_conformance && \
	SMUX_CONF_FIXTURE=swift build/asan/tests/test_conformance && \
	SMUX_CONF_FIXTURE=swift-identity build/asan/tests/test_conformance && \
	timeout 900 tests/integration/test_swift.sh && \
	SMUXFS=build/asan/smuxfs timeout 900 tests/integration/test_swift.sh

# Selection cost per mode and mux throughput (see tests/bench/bench_core.c).
bench-core: deps
	$(MAKE) VARIANT=normal $(BENCH_CORE)
	$(BENCH_CORE)

# A mirror over file backends through an outage: puts per second while a
# member is down, then the replay of their hints (tests/bench/bench_hints.c).
bench-hints: deps
	$(MAKE) VARIANT=normal $(BENCH_HINTS)
	$(BENCH_HINTS)

# Sanitizer settings for test runs: stop at the first finding.
export ASAN_OPTIONS ?= abort_on_error=1:detect_leaks=1:halt_on_error=1
export UBSAN_OPTIONS ?= print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS ?= halt_on_error=1:second_deadlock_stack=1

# The modes whose storm runs in `make check` (seeds 1 and 2, 1 s storms):
# every mode since session 6 (failover and sticky-by-key passed every soak
# run, normally and under TSan). `make soak` runs longer storms with new
# seeds. Empty (the default) means every mode; a list such as
# STORM_MODES=mirror,shield runs only those.
STORM_MODES ?=

# Runs every test binary of this variant; stops at the first failure.
# The *-run targets run what is built and build nothing: make check's lanes
# run side by side, and two makes deciding to build one file at once
# race (a lane linked a half-written object: "undefined reference to main").
test: all
	$(MAKE) --no-print-directory test-run

test-run:
	@set -e; for t in $(TEST_BINS); do \
		echo "== $$t"; \
		SMUX_TEST_VARIANT=$(VARIANT) \
			SMUX_LOSE_NOTHING_MODE=$(STORM_MODES) $$t; \
	done; echo "== $(VARIANT): all test binaries passed"

deps:
	@scripts/install-deps.sh

# The concurrent modules, also run under ThreadSanitizer by `make check`.
TSAN_TESTS := test_bulkhead test_events test_health test_hints test_memory \
	test_mux_deadline test_mux_failover test_mux_fanout test_mux_health test_mux_change test_mux_hints test_mux_intent test_mux_local test_mux_reader test_mux_sticky \
	test_mux_threads test_mux_writer_failover test_mux_zombie test_rcache \
	test_stats test_sendq test_eventlog test_swift_auth test_dirnames test_linger \
	test_mux_rejoin_fence test_mux_shield_drain test_mux_zombie_handoff test_mux_departed test_mux_notes_restart \
	test_lose_nothing test_attrstore test_s3 test_mux_fallocate test_mux_del_many \
	test_mux_replay_types

test-tsan: test-tsan-build
	$(MAKE) --no-print-directory test-tsan-run

test-tsan-build: $(addprefix $(OUT)/tests/,$(TSAN_TESTS))

test-tsan-run:
	@set -e; for t in $(TSAN_TESTS); do \
		echo "== $(OUT)/tests/$$t"; \
		SMUX_TEST_VARIANT=tsan SMUX_LOSE_NOTHING_MODE=$(STORM_MODES) \
			setarch -R $(OUT)/tests/$$t; \
	done; echo "== tsan: concurrent test binaries passed"

# The lose-nothing storm (tests/unit/test_lose_nothing.c) for as long as
# asked: SOAK_SECONDS in all, shared by the modes, a new seed (printed) for
# every run, each storm SOAK_STORM seconds long. SOAK_MODE=mirror runs one
# mode only; VARIANT=tsan or asan runs it under a sanitizer.
SOAK_SECONDS ?= 60
SOAK_STORM ?= 5
soak: $(OUT)/tests/test_lose_nothing
	SMUX_TEST_VARIANT=$(VARIANT) SMUX_LOSE_NOTHING_SOAK=$(SOAK_SECONDS) \
		SMUX_LOSE_NOTHING_SECONDS=$(SOAK_STORM) \
		SMUX_LOSE_NOTHING_MODE=$(SOAK_MODE) \
		$(if $(filter tsan,$(VARIANT)),setarch -R) $(OUT)/tests/test_lose_nothing

# The differential POSIX exerciser (tests/integration/posix_diff.c) on a
# file, mirror and failover mount against the local disk, with more seeds
# than `make check` (1-2): POSIX_SEEDS (default 1-20), SMUX_IT_STEPS. Some
# still find divergences test_posix_diff.sh lists as open.
POSIX_SEEDS ?= $(shell seq 1 20)
check-posix: build/smuxfs
	SMUX_IT_SEEDS="$(POSIX_SEEDS)" SMUXFS=$(abspath build/smuxfs) \
		tests/integration/run.sh test_posix_diff

# The conformance suite with the 1 GiB streaming case (make check runs it
# at 256 MiB; SMUX_CONF_LARGE_MB sets the size).
conformance-large: $(CONF_BIN)
	SMUX_TEST_VARIANT=$(VARIANT) SMUX_CONF_LARGE_MB=1024 $(CONF_BIN)

# Real mounts with real programs (tests/integration/run.sh), with the
# daemon of this variant.
test-integration: all
	$(MAKE) --no-print-directory test-integration-run

test-integration-run:
	SMUXFS=$(abspath $(SMUXFS)) tests/integration/run.sh

# Issue 10's fault runs with the slower ones make check leaves out
# (test_s3_faults freeze: s3rver frozen mid-run; about 3 minutes in all).
.PHONY: check-s3-faults
check-s3-faults: all
	SMUX_IT_SLOW=1 SMUXFS=$(abspath $(SMUXFS)) tests/integration/run.sh test_s3_faults

# The S3 test servers (tests/servers/: Swift with s3api, s3rver) proven
# with the aws CLI: bucket, awkward key, multipart (about 3 minutes).
test-servers: deps
	tests/servers/smoke.sh all

# The conformance suite on the s3 backend against Swift's s3api and
# s3rver, each server started and stopped by the test (about 10 minutes:
# not part of `make check`; VARIANT=asan for ASan+UBSan).
check-s3: deps
	$(MAKE) VARIANT=$(VARIANT) $(OUT)/tests/test_conformance
	SMUX_TEST_VARIANT=$(VARIANT) SMUX_CONF_FIXTURE=s3-swift \
		$(OUT)/tests/test_conformance
	SMUX_TEST_VARIANT=$(VARIANT) SMUX_CONF_FIXTURE=s3-s3rver \
		$(OUT)/tests/test_conformance

# The S3 test servers (Swift, s3rver) start once for all the passes
# (tests/servers/shared.sh), not once per test binary and pass.
# Builds the normal and ASan variants first (the unit lane builds the TSan
# tests), then runs the unit lane (normal, asan, tsan) and the two
# integration lanes (normal, asan) side by side
# (scripts/check-lanes.sh says why), with the S3 test servers started once
# for all of it.
check: deps
	$(MAKE) -j2 VARIANT=normal all
	$(MAKE) -j2 VARIANT=asan all
	tests/servers/shared.sh run scripts/check-lanes.sh
	$(MAKE) deb-check
	$(MAKE) rpm-check

# The same passes one after the other (what `make check` ran before).
check-passes:
	$(MAKE) VARIANT=normal test
	$(MAKE) VARIANT=normal test-integration
	$(MAKE) VARIANT=asan test
	$(MAKE) VARIANT=asan test-integration
	$(MAKE) VARIANT=tsan test-tsan

asan: deps
	$(MAKE) VARIANT=asan test

tsan: deps
	$(MAKE) VARIANT=tsan test-tsan

FORMAT_FILES = $(shell git ls-files '*.c' '*.h' 2>/dev/null)
format:
	clang-format -i $(FORMAT_FILES)

lint: lib
	clang-format --dry-run --Werror $(FORMAT_FILES)
	printf '%s\n' $(filter %.c,$(FORMAT_FILES)) | \
		xargs -P 2 -n 4 sh -c 'clang-tidy --quiet "$$@" -- $(CFLAGS_TEST) 2>/dev/null' tidy
	cppcheck --quiet --error-exitcode=1 --enable=warning,portability,performance \
		--inline-suppr --std=c11 -D_GNU_SOURCE -Iinclude -Isrc -Itests \
		--suppress=missingIncludeSystem src tests

# The demo mounts config/demo.conf (a mirror over two directories under
# build/demo/) and leaves it up; demo-stop unmounts it.
demo: deps
	$(MAKE) VARIANT=normal build/smuxfs
	scripts/demo.sh

demo-stop:
	scripts/demo-stop.sh

# Installs the daemon (mount.fuse3 finds it in PATH), smuxctl and the
# systemd unit.
PREFIX ?= /usr/local
install: deps
	$(MAKE) VARIANT=normal build/smuxfs build/smuxctl
	install -D -m 0755 build/smuxfs $(DESTDIR)$(PREFIX)/bin/smuxfs
	install -D -m 0755 build/smuxctl $(DESTDIR)$(PREFIX)/bin/smuxctl
	install -D -m 0644 packaging/systemd/smuxfs@.service \
		$(DESTDIR)/etc/systemd/system/smuxfs@.service

# Man pages (go-md2man): smuxfs(8) and smuxctl(8) from packaging/man,
# smuxfs.conf(5) from docs/configuration.md (scripts/conf-man.py).
MAN_PAGES := build/man/smuxfs.8 build/man/smuxctl.8 build/man/smuxfs.conf.5
man: $(MAN_PAGES)
build/man/%.8: packaging/man/%.8.md
	@mkdir -p $(@D)
	go-md2man -in $< -out $@
build/man/smuxfs.conf.5: packaging/man/smuxfs.conf.5.head.md docs/configuration.md scripts/conf-man.py
	@mkdir -p $(@D)
	scripts/conf-man.py $< docs/configuration.md >$@.md
	go-md2man -in $@.md -out $@

# The Debian package (scripts/make-deb.sh) in build/deb; deb-check
# builds it, runs lintian (no error allowed) and installs it here.
deb: deps
	$(MAKE) VARIANT=normal build/smuxfs build/smuxctl man
	scripts/make-deb.sh build/deb

deb-check: deb
	tests/package/test_deb.sh build/deb/smuxfs_*.deb

# The RPM package (packaging/rpm/smuxfs.spec, rpmbuild -bb through
# scripts/make-rpm.sh) in build/rpm; rpm-check lists and unpacks it.
rpm: deps
	$(MAKE) VARIANT=normal build/smuxfs build/smuxctl man
	scripts/make-rpm.sh build/rpm

rpm-check: rpm
	tests/package/test_rpm.sh build/rpm/smuxfs-*.rpm

clean:
	rm -rf build

-include $(shell find build -name '*.d' 2>/dev/null)
