#!/bin/bash
# SPDX-License-Identifier: MIT
#
# fs_bench.sh - `make bench`: the same file workloads on smuxfs and its peers
# in one run, with medians and speed ratios (DESIGN section 7: "every claim
# is a benchmark that runs the same workload on smuxfs and its peers").
#
# Systems (columns), all over directories of ONE filesystem (BENCH_DIR):
#   plain           the directory itself, no FUSE
#   smuxfs-1        smuxfs with one file backend, its default mount options
#   smuxfs-mirror2  smuxfs, mode=mirror over two file backends
#   mergerfs        mergerfs over ONE directory: the fair peer of smuxfs-1
#                   (a one-branch union is a plain passthrough, as is a
#                   one-backend smuxfs; mergerfs has no mirror mode, so there
#                   is no mergerfs peer for smuxfs-mirror2). Options are its
#                   man page's "BASIC SETUP" performance set (see MERGERFS_OPTS
#                   below); override with BENCH_MERGERFS_OPTS.
#   unionfs         unionfs-fuse over one directory, -o cow (its usual use),
#                   otherwise defaults; override with BENCH_UNIONFS_OPTS.
# Peers run as they ship: the bench does not raise their read-ahead; set
# BENCH_PEER_READAHEAD_KB to give every FUSE peer that read-ahead (the mount's
# /sys/class/bdi/*/read_ahead_kb) if you want to compare the daemons alone.
#
# Workloads (rows); throughput rows in MB/s (1 MB = 2^20 bytes, higher is
# better), file-tree rows in seconds (lower is better):
#   seq-write-fsync  dd a precomputed random file (page-cache warm, so only
#                    the destination is measured) into the mount, bs=1M,
#                    conv=fsync
#   seq-read-cold    dd that file back to /dev/null, bs=1M, after an
#                    unmount/remount of the FUSE system and sync+drop_caches
#   untar            tar -xf of 2,000 random 4 KiB files (20 dirs x 100)
#   ls-lR            ls -lR of that tree
#   cat-all          cat every file of the tree to /dev/null
#   rm-r             rm -r of the tree
#   append-loop      BENCH_APPENDS (1000) x `echo line >> big` (the shell's
#                    open O_APPEND, write, close) to a 100 MiB file made
#                    untimed from the random file: what a log costs
#   sqlite-inserts   BENCH_INSERTS (1000) autocommit INSERTs with sqlite3 in
#                    rollback-journal mode (journal_mode=DELETE, the default;
#                    every commit creates, fsyncs and deletes a journal)
#   sqlite-wal       the same in WAL mode (journal_mode=WAL: a shared-memory
#                    index mapped from the -shm file, fsyncs of the WAL); a
#                    system that cannot run it is reported "fail", the run
#                    goes on
#   git-clone        git clone --no-hardlinks of a real repository (this
#                    project's own, copied once to a bare repository in the
#                    scratch area) into the mount
# Every timed step starts after a sync. The program rows (append-loop,
# sqlite-*, git-clone) run on the mounted system as is, after a sync; their
# set-up and clean-up are untimed. seq-write-fsync first reads its
# source into the page cache; seq-read-cold unmounts and remounts the FUSE
# system and drops the page cache (sync; echo 3 > /proc/sys/vm/drop_caches),
# so the file comes from the disk through the system. The file-tree rows
# remount the FUSE system (its dentries, attributes and pages are gone) and
# warm the BACKING directories (ls -lR, plus the file data for cat-all), so
# they measure what each layer costs over warm storage (for plain: the warm
# kernel path) with the disk out of the picture. Cold-disk metadata and the
# fresh pages after a drop_caches vary by seconds on this guest and would
# drown the per-request costs these rows are meant to show.
#
# Order: for each repetition, for each workload, the systems run round-robin,
# each repetition starting one system further (A B C D E, B C D E A, ...),
# so background noise of this guest (notes/fuse-performance-here.md item 7)
# and the after-effects of one system's run (a 512 MiB fsync still settling
# in the host) spread over all of them.
# Reported: the median of the repetitions and speed ratios of smuxfs-1
# against plain, mergerfs and unionfs, where >1.00 means smuxfs-1 is FASTER
# (MB/s over MB/s, or the peer's seconds over smuxfs-1's seconds).
#
# Environment:
#   BENCH_REPS=5           repetitions
#   BENCH_SIZE_MB=512      size of the sequential file
#   BENCH_FILES=2000       files in the tree (4 KiB each)
#   BENCH_APPENDS=1000     appends of append-loop
#   BENCH_INSERTS=1000     inserts of sqlite-inserts and sqlite-wal
#   BENCH_GIT_REPO=<this repository>  what git-clone clones
#   BENCH_DIR=/var/tmp     where the scratch directory is made (one fs)
#   BENCH_SYSTEMS="plain smuxfs-1 smuxfs-mirror2 mergerfs unionfs"
#   BENCH_WORKLOADS="seq-write-fsync seq-read-cold untar ls-lR cat-all rm-r
#                    append-loop sqlite-inserts sqlite-wal git-clone"
#                          (a subset runs in this order; seq-read-cold reads
#                          what seq-write-fsync wrote, ls-lR, cat-all and
#                          rm-r need the tree untar made)
#   BENCH_SMUXFS=build/smuxfs (of this tree), BENCH_SMUXFS_OPTS (extra -o,
#                          default none: smuxfs runs with its defaults)
#   BENCH_MERGERFS_OPTS, BENCH_UNIONFS_OPTS, BENCH_PEER_READAHEAD_KB
#   BENCH_KEEP=1           keep the scratch directory
#   BENCH_RAW=FILE         also write every sample as TSV to FILE
#
# Dependencies: mergerfs and unionfs-fuse are installed here, with apt-get,
# when missing. They are bench-only dependencies on purpose: `make check`
# and scripts/install-deps.sh do not install them.
#
# Needs root (drop_caches, apt-get). Runs in a private mount namespace (see
# below). Always unmounts what it mounted (trap); every mount and unmount
# runs under a timeout.
set -euo pipefail
shopt -s inherit_errexit

# The mounts live in a mount namespace of their own (private propagation):
# a process that makes a new mount namespace while the bench runs (another
# test's `unshare -m`) would otherwise get a copy of every FUSE mount of
# the bench, which keeps each daemon alive after its unmount here until
# that process exits (seen: smuxfs, mergerfs and unionfs daemons still
# running 120 s after their unmount, and a remount finding smuxfs's state
# locked). Leaving the namespace drops whatever is still mounted in it.
if [ -z "${BENCH_IN_NS:-}" ] && [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null; then
	BENCH_IN_NS=1 exec unshare --mount --propagation private "$BASH" "$0" "$@"
fi
# The new namespace got a copy of every FUSE mount of the machine (other
# programs' tests): let them go here, or their daemons would wait for the
# bench to end after their own unmount.
if [ -n "${BENCH_IN_NS:-}" ]; then
	awk '$3 ~ /^fuse/ { print $2 }' /proc/self/mounts | while read -r m; do
		umount -l "$(printf '%b' "$m")" 2>/dev/null || true
	done
fi

REPS=${BENCH_REPS:-5}
SIZE_MB=${BENCH_SIZE_MB:-512}
NFILES=${BENCH_FILES:-2000}
NAPPENDS=${BENCH_APPENDS:-1000}
NINSERTS=${BENCH_INSERTS:-1000}
GIT_REPO=${BENCH_GIT_REPO:-$(cd "$(dirname "$0")/../.." && pwd)}
read -r -a SYSTEMS <<<"${BENCH_SYSTEMS:-plain smuxfs-1 smuxfs-mirror2 mergerfs unionfs}"
SMUXFS=${BENCH_SMUXFS:-$(dirname "$0")/../../build/smuxfs}
SMUXFS_OPTS=${BENCH_SMUXFS_OPTS:-}
MERGERFS_OPTS=${BENCH_MERGERFS_OPTS:-use_ino,cache.files=off,dropcacheonclose=true,category.create=mfs}
UNIONFS_OPTS=${BENCH_UNIONFS_OPTS:-cow}
PEER_RA_KB=${BENCH_PEER_READAHEAD_KB:-}
MOUNT_TIMEOUT=30
read -r -a WORKLOADS <<<"${BENCH_WORKLOADS:-seq-write-fsync seq-read-cold untar ls-lR cat-all rm-r append-loop sqlite-inserts sqlite-wal git-clone}"

die() {
	echo "fs_bench: $*" >&2
	exit 1
}

[ "$(id -u)" -eq 0 ] || die "needs root (drop_caches, apt-get, mounts)"
[[ "$REPS" =~ ^[1-9][0-9]*$ ]] || die "BENCH_REPS=$REPS: not a positive integer"
[[ "$SIZE_MB" =~ ^[1-9][0-9]*$ ]] || die "BENCH_SIZE_MB=$SIZE_MB: not a positive integer"
[[ "$NFILES" =~ ^[1-9][0-9]*$ ]] || die "BENCH_FILES=$NFILES: not a positive integer"
[[ "$NAPPENDS" =~ ^[1-9][0-9]*$ ]] || die "BENCH_APPENDS=$NAPPENDS: not a positive integer"
[[ "$NINSERTS" =~ ^[1-9][0-9]*$ ]] || die "BENCH_INSERTS=$NINSERTS: not a positive integer"
[ -e /dev/fuse ] || die "/dev/fuse is missing"

has_system() {
	local s
	for s in "${SYSTEMS[@]}"; do [ "$s" = "$1" ] && return 0; done
	return 1
}

for s in "${SYSTEMS[@]}"; do
	case $s in
	plain | smuxfs-1 | smuxfs-mirror2 | mergerfs | unionfs) ;;
	*) die "BENCH_SYSTEMS: unknown system \"$s\"" ;;
	esac
done
for w in "${WORKLOADS[@]}"; do
	case $w in
	seq-write-fsync | seq-read-cold | untar | ls-lR | cat-all | rm-r) ;;
	append-loop | sqlite-inserts | sqlite-wal | git-clone) ;;
	*) die "BENCH_WORKLOADS: unknown workload \"$w\"" ;;
	esac
done
has_workload() {
	local w
	for w in "${WORKLOADS[@]}"; do [ "$w" = "$1" ] && return 0; done
	return 1
}

# --- bench-only dependencies -------------------------------------------------

install_peers() {
	local missing=()
	has_system mergerfs && ! command -v mergerfs >/dev/null && missing+=(mergerfs)
	has_system unionfs && ! command -v unionfs >/dev/null && missing+=(unionfs-fuse)
	[ ${#missing[@]} -eq 0 ] && return 0
	echo "fs_bench: installing ${missing[*]} (bench-only dependencies)" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get -o DPkg::Lock::Timeout=300 install -y -qq "${missing[@]}" >/dev/null ||
		{ apt-get -o DPkg::Lock::Timeout=300 update -qq &&
			apt-get -o DPkg::Lock::Timeout=300 install -y -qq "${missing[@]}" >/dev/null; } ||
		die "apt-get install ${missing[*]} failed"
}
install_peers
for t in tar dd timeout mountpoint; do
	command -v $t >/dev/null || die "$t is missing"
done
if has_workload sqlite-inserts || has_workload sqlite-wal; then
	command -v sqlite3 >/dev/null || die "sqlite3 is missing (scripts/install-deps.sh)"
fi
if has_workload git-clone; then
	command -v git >/dev/null || die "git is missing (scripts/install-deps.sh)"
	git -C "$GIT_REPO" rev-parse HEAD >/dev/null 2>&1 ||
		die "BENCH_GIT_REPO=$GIT_REPO is not a git repository"
fi
if has_system smuxfs-1 || has_system smuxfs-mirror2; then
	[ -x "$SMUXFS" ] || die "$SMUXFS is not built (make build/smuxfs)"
	SMUXFS=$(realpath "$SMUXFS")
fi

# --- scratch area and mounts -------------------------------------------------

BASE=$(mktemp -d "${BENCH_DIR:-/var/tmp}/smuxfs-bench.XXXXXX")
MOUNTED=()

# The daemon serving each mount point, to wait for its exit on unmount:
# umount(8) returns before the daemon has exited, and a daemon that is
# still shutting down may hold state that a remount needs (smuxfs's hint
# journal lock, for one).
declare -A DAEMON_PID

daemon_pid_of() {
	ps -eo pid=,args= | awk -v m="$1" '{ for (i = 2; i <= NF; i++)
		if ($i == m) { print $1; exit } }'
}

# On a busy machine (the page cache of a 512 MiB file still being written
# back) every FUSE daemon, the peers too, was seen taking over 20 s to exit
# after its unmount; a remount before then finds smuxfs's journal locked.
wait_daemon_exit() {
	local pid=${DAEMON_PID[$1]:-} i
	[ -n "$pid" ] || return 0
	for ((i = 0; i < 1200; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$pid" 2>/dev/null &&
		echo "fs_bench: daemon $pid of $1 still running 120s after unmount" >&2
	unset "DAEMON_PID[$1]"
	return 0
}

unmount_one() {
	local mnt=$1 i
	mountpoint -q "$mnt" || { wait_daemon_exit "$mnt"; return 0; }
	for i in 1 2 3; do
		timeout 20 umount "$mnt" 2>/dev/null && break
		sleep 1
	done
	if mountpoint -q "$mnt"; then
		echo "fs_bench: $mnt busy, lazy unmount" >&2
		timeout 20 umount -l "$mnt" || true
	fi
	wait_daemon_exit "$mnt"
	return 0
}

cleanup() {
	local rc=$? m
	for m in "${MOUNTED[@]}"; do unmount_one "$m"; done
	if [ "${BENCH_KEEP:-0}" = 1 ]; then
		echo "fs_bench: kept $BASE" >&2
	else
		# Never delete below a directory that is still a mount point.
		if ! grep -q " $BASE/" /proc/mounts; then rm -rf "$BASE"; fi
	fi
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mnt_of() { echo "$BASE/mnt/$1"; }

# The directories that hold a system's files (the FUSE system's branches).
backing_of() {
	case $1 in
	plain) echo "$BASE/plain" ;;
	smuxfs-1) echo "$BASE/smux1/a" ;;
	smuxfs-mirror2) echo "$BASE/smux2/a $BASE/smux2/b" ;;
	mergerfs) echo "$BASE/merger/a" ;;
	unionfs) echo "$BASE/union/a" ;;
	esac
}

# warm_backing SYSTEM [data]: loads the backing tree's metadata (and file
# data with "data") into the page cache, without touching the mount.
warm_backing() {
	local d
	for d in $(backing_of "$1"); do
		[ -d "$d/tree" ] || continue
		ls -lR "$d/tree" >/dev/null
		if [ "${2:-}" = data ]; then
			find "$d/tree" -type f -exec cat {} + >/dev/null
		fi
	done
}

# The directory each workload runs in.
dir_of() {
	case $1 in
	plain) echo "$BASE/plain" ;;
	*) mnt_of "$1" ;;
	esac
}

write_configs() {
	mkdir -p "$BASE"/{plain,smux1/a,smux2/a,smux2/b,merger/a,union/a}
	mkdir -p "$BASE"/smux1/{cache,state} "$BASE"/smux2/{cache,state}
	cat >"$BASE/smux1/smuxfs.conf" <<EOF
[mount]
root = a
cache_dir = $BASE/smux1/cache
state_dir = $BASE/smux1/state

[backend a]
type = file
path = $BASE/smux1/a
EOF
	cat >"$BASE/smux2/smuxfs.conf" <<EOF
[mount]
root = m
cache_dir = $BASE/smux2/cache
state_dir = $BASE/smux2/state

[mux m]
mode = mirror
backends = a b

[backend a]
type = file
path = $BASE/smux2/a

[backend b]
type = file
path = $BASE/smux2/b
EOF
}

set_readahead() {
	local mnt=$1 kb=$2 dev
	dev=$(mountpoint -d "$mnt")
	echo "$kb" >"/sys/class/bdi/$dev/read_ahead_kb" 2>/dev/null ||
		echo "fs_bench: cannot set read_ahead_kb of $mnt" >&2
}

mount_system() {
	local s=$1 mnt i
	[ "$s" = plain ] && return 0
	mnt=$(mnt_of "$s")
	mkdir -p "$mnt"
	mountpoint -q "$mnt" && return 0
	MOUNTED+=("$mnt")
	case $s in
	smuxfs-1 | smuxfs-mirror2)
		local cfg=$BASE/smux1/smuxfs.conf
		[ "$s" = smuxfs-mirror2 ] && cfg=$BASE/smux2/smuxfs.conf
		timeout $MOUNT_TIMEOUT "$SMUXFS" "$cfg" "$mnt" \
			${SMUXFS_OPTS:+-o "$SMUXFS_OPTS"} ||
			die "mounting $s failed (rc $?)"
		;;
	mergerfs)
		timeout $MOUNT_TIMEOUT mergerfs -o "$MERGERFS_OPTS" \
			"$BASE/merger/a" "$mnt" || die "mounting mergerfs failed"
		;;
	unionfs)
		timeout $MOUNT_TIMEOUT unionfs -o "$UNIONFS_OPTS" \
			"$BASE/union/a=RW" "$mnt" || die "mounting unionfs failed"
		;;
	esac
	for i in $(seq 1 $((MOUNT_TIMEOUT * 10))); do
		mountpoint -q "$mnt" && break
		sleep 0.1
	done
	mountpoint -q "$mnt" || die "$s: $mnt is not mounted after ${MOUNT_TIMEOUT}s"
	DAEMON_PID[$mnt]=$(daemon_pid_of "$mnt")
	if [ -n "$PEER_RA_KB" ] && [[ "$s" != smuxfs-* ]]; then
		set_readahead "$mnt" "$PEER_RA_KB"
	fi
}

remount_system() {
	[ "$1" = plain ] && return 0
	unmount_one "$(mnt_of "$1")"
	mount_system "$1"
}

drop_caches() {
	sync
	echo 3 >/proc/sys/vm/drop_caches
}

# --- inputs, made once --------------------------------------------------------

make_inputs() {
	echo "fs_bench: making a ${SIZE_MB} MiB random file and a tar of $NFILES x 4 KiB" >&2
	dd if=/dev/urandom of="$BASE/src.bin" bs=1M count="$SIZE_MB" status=none
	local t=$BASE/treesrc i d
	mkdir -p "$t/tree"
	for ((i = 0; i < NFILES; i++)); do
		d=$t/tree/d$((i / 100))
		[ -d "$d" ] || mkdir "$d"
		head -c 4096 /dev/urandom >"$d/f$i"
	done
	tar -C "$t" -cf "$BASE/tree.tar" tree
	rm -rf "$t"
	if has_workload sqlite-inserts || has_workload sqlite-wal; then
		for ((i = 0; i < NINSERTS; i++)); do
			printf "INSERT INTO t(n, s) VALUES (%d, '%s');\n" "$i" \
				"row $i of the smuxfs bench, some text to store"
		done >"$BASE/inserts.sql"
	fi
	if has_workload git-clone; then
		git clone -q --bare --no-hardlinks "$GIT_REPO" "$BASE/repo.git"
		GIT_HEAD=$(git -C "$BASE/repo.git" rev-parse HEAD)
	fi
}

# --- workloads ----------------------------------------------------------------

now() { echo "$EPOCHREALTIME"; }

# Untimed set-up when a subset of the workloads runs (BENCH_WORKLOADS).
need_big() { [ -f "$1/big" ] || dd if="$BASE/src.bin" of="$1/big" bs=1M conv=fsync status=none; }
need_tree() { [ -d "$1/tree" ] || tar -C "$1" -xf "$BASE/tree.tar"; }

# run_workload SYSTEM WORKLOAD REP: prints the sample (MB/s or seconds).
run_workload() {
	local s=$1 w=$2 rep=$3 dir t0 t1 n
	dir=$(dir_of "$s")
	case $w in
	seq-write-fsync)
		rm -f "$dir/big"
		sync
		cat "$BASE/src.bin" >/dev/null
		t0=$(now)
		dd if="$BASE/src.bin" of="$dir/big" bs=1M conv=fsync status=none
		t1=$(now)
		echo "$SIZE_MB $t0 $t1" | awk '{ printf "%.1f\n", $1 / ($3 - $2) }'
		;;
	seq-read-cold)
		need_big "$dir"
		remount_system "$s"
		drop_caches
		t0=$(now)
		dd if="$dir/big" of=/dev/null bs=1M status=none
		t1=$(now)
		echo "$SIZE_MB $t0 $t1" | awk '{ printf "%.1f\n", $1 / ($3 - $2) }'
		# Check the bytes once, untimed: a fast wrong read is no result.
		if [ "$rep" = 1 ]; then
			cmp -s "$BASE/src.bin" "$dir/big" ||
				die "$s: $dir/big differs from what was written"
		fi
		rm -f "$dir/big"
		;;
	untar)
		rm -rf "$dir/tree"
		sync
		remount_system "$s"
		cat "$BASE/tree.tar" >/dev/null
		t0=$(now)
		tar -C "$dir" -xf "$BASE/tree.tar"
		t1=$(now)
		echo "$t0 $t1" | awk '{ printf "%.3f\n", $2 - $1 }'
		n=$(find "$dir/tree" -type f | wc -l)
		[ "$n" -eq "$NFILES" ] || die "$s: untar left $n files, not $NFILES"
		;;
	ls-lR)
		need_tree "$dir"
		sync
		remount_system "$s"
		warm_backing "$s"
		t0=$(now)
		ls -lR "$dir/tree" >/dev/null
		t1=$(now)
		echo "$t0 $t1" | awk '{ printf "%.3f\n", $2 - $1 }'
		;;
	cat-all)
		need_tree "$dir"
		sync
		remount_system "$s"
		warm_backing "$s" data
		t0=$(now)
		find "$dir/tree" -type f -exec cat {} + >/dev/null
		t1=$(now)
		echo "$t0 $t1" | awk '{ printf "%.3f\n", $2 - $1 }'
		;;
	rm-r)
		need_tree "$dir"
		sync
		remount_system "$s"
		warm_backing "$s"
		t0=$(now)
		rm -r "$dir/tree"
		t1=$(now)
		echo "$t0 $t1" | awk '{ printf "%.3f\n", $2 - $1 }'
		[ ! -e "$dir/tree" ] || die "$s: tree still there after rm -r"
		;;
	append-loop)
		rm -f "$dir/log"
		{ head -c 100M "$BASE/src.bin"; echo; } >"$dir/log"
		sync
		t0=$(now)
		for ((n = 0; n < NAPPENDS; n++)); do
			echo "line $n of an append loop" >>"$dir/log"
		done
		t1=$(now)
		echo "$t0 $t1" | awk '{ printf "%.3f\n", $2 - $1 }'
		# every append landed, at the end
		n=$(tail -n "$NAPPENDS" "$dir/log" | grep -c '^line [0-9]* of an append loop$' || true)
		[ "$n" -eq "$NAPPENDS" ] || die "$s: append-loop: $n of $NAPPENDS lines at the end of the file"
		rm -f "$dir/log"
		;;
	sqlite-inserts)
		sqlite_run "$dir" DELETE
		;;
	sqlite-wal)
		sqlite_run "$dir" WAL
		;;
	git-clone)
		rm -rf "$dir/clone"
		sync
		t0=$(now)
		git clone -q --no-hardlinks "$BASE/repo.git" "$dir/clone"
		t1=$(now)
		echo "$t0 $t1" | awk '{ printf "%.3f\n", $2 - $1 }'
		[ "$(git -C "$dir/clone" rev-parse HEAD)" = "$GIT_HEAD" ] ||
			die "$s: the clone's HEAD is not $GIT_HEAD"
		if [ "$rep" = 1 ]; then
			git -C "$dir/clone" fsck --no-dangling --no-progress >/dev/null 2>&1 ||
				die "$s: git fsck of the clone failed"
		fi
		rm -rf "$dir/clone"
		;;
	esac
}

# sqlite_run DIR MODE: NINSERTS autocommit inserts into a fresh database in
# journal mode MODE; prints the seconds, or "fail" (with the error on
# stderr) when the system cannot run it.
sqlite_run() {
	local dir=$1 mode=$2 t0 t1 n
	rm -f "$dir/bench.db" "$dir/bench.db-journal" "$dir/bench.db-wal" "$dir/bench.db-shm"
	if ! sqlite3 "$dir/bench.db" "PRAGMA journal_mode=$mode;" \
		"CREATE TABLE t(n INTEGER PRIMARY KEY, s TEXT);" >/dev/null 2>"$BASE/sqlite.err"; then
		echo "fs_bench: sqlite3 ($mode) on $dir: $(head -c 300 "$BASE/sqlite.err")" >&2
		echo fail
		return 0
	fi
	sync
	t0=$(now)
	if ! sqlite3 "$dir/bench.db" <"$BASE/inserts.sql" 2>"$BASE/sqlite.err"; then
		echo "fs_bench: sqlite3 inserts ($mode) on $dir: $(head -c 300 "$BASE/sqlite.err")" >&2
		echo fail
		return 0
	fi
	t1=$(now)
	n=$(sqlite3 "$dir/bench.db" "SELECT count(*) FROM t;")
	[ "$n" -eq "$NINSERTS" ] || die "$dir: sqlite3 ($mode) holds $n rows, not $NINSERTS"
	rm -f "$dir/bench.db" "$dir/bench.db-journal" "$dir/bench.db-wal" "$dir/bench.db-shm"
	echo "$t0 $t1" | awk '{ printf "%.3f\n", $2 - $1 }'
}

is_throughput() { [[ "$1" == seq-* ]]; }

# "fail" samples (a system that could not run the workload) are left out;
# the median of nothing but failures is "fail".
median() {
	local all nums
	all=$(tr ' ' '\n')
	nums=$(awk '$1 != "" && $1 != "fail"' <<<"$all" | sort -g)
	if [ -z "$nums" ]; then
		if grep -qx fail <<<"$all"; then echo fail; else echo -; fi
		return 0
	fi
	awk '{ v[NR] = $1 }
	END { if (NR % 2) print v[(NR + 1) / 2];
	      else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }' <<<"$nums"
}

# Speed ratio of smuxfs-1 against PEER for workload W: >1 = smuxfs faster.
ratio() {
	local w=$1 smux=$2 peer=$3
	case "$smux $peer" in *-* | *fail*) echo -; return ;; esac
	if is_throughput "$w"; then
		awk -v a="$smux" -v b="$peer" 'BEGIN { printf "%.2f\n", (b > 0 ? a / b : 0) }'
	else
		awk -v a="$smux" -v b="$peer" 'BEGIN { printf "%.2f\n", (a > 0 ? b / a : 0) }'
	fi
}

# --- main -------------------------------------------------------------------

# A busy machine makes every number here noise: say so next to the table.
LOAD_BEFORE=$(cut -d' ' -f1 /proc/loadavg)
busy_note() {
	local after
	after=$(cut -d' ' -f1 /proc/loadavg)
	awk -v a="$LOAD_BEFORE" -v b="$after" -v n="$(nproc)" 'BEGIN {
		if (a > n / 2 || b > n / 2)
			printf "WARNING: load average %s before, %s after, on %d CPUs: " \
			       "other work ran during this bench; treat the numbers as noise.\n",
			       a, b, n }'
}

write_configs
make_inputs
for s in "${SYSTEMS[@]}"; do mount_system "$s"; done

declare -A SAMPLES
RAW=${BENCH_RAW:-}
[ -n "$RAW" ] && printf 'rep\tworkload\tsystem\tvalue\n' >"$RAW"
for ((rep = 1; rep <= REPS; rep++)); do
	echo "fs_bench: repetition $rep/$REPS" >&2
	# each repetition starts with the next system, so no system always
	# runs right after the same one (e.g. after plain's 512 MiB fsync)
	n_sys=${#SYSTEMS[@]}
	order=()
	for ((k = 0; k < n_sys; k++)); do
		order+=("${SYSTEMS[$(((rep - 1 + k) % n_sys))]}")
	done
	for w in "${WORKLOADS[@]}"; do
		for s in "${order[@]}"; do
			# Not in $(...): errexit must stop the run on any failure.
			run_workload "$s" "$w" "$rep" >"$BASE/sample"
			v=$(<"$BASE/sample")
			SAMPLES[$w,$s]="${SAMPLES[$w,$s]:-} $v"
			[ -n "$RAW" ] && printf '%s\t%s\t%s\t%s\n' "$rep" "$w" "$s" "$v" >>"$RAW"
		done
	done
done

echo
echo "smuxfs bench: $REPS repetitions, medians; seq-* in MB/s (higher is better),"
echo "file-tree rows in seconds (lower is better); ratios are speed ratios of"
echo "smuxfs-1 (>1.00 = smuxfs-1 faster). ${SIZE_MB} MiB file, $NFILES x 4 KiB files."
echo "fs under test: $(df --output=fstype "$BASE" | tail -1) at $BASE; mergerfs -o $MERGERFS_OPTS;"
echo "unionfs -o $UNIONFS_OPTS${PEER_RA_KB:+; peers read_ahead_kb=$PEER_RA_KB}."
busy_note
echo
printf '%-17s' workload
for s in "${SYSTEMS[@]}"; do printf ' %15s' "$s"; done
printf ' %11s %14s %13s\n' smux/plain smux/mergerfs smux/unionfs
declare -A MED
for w in "${WORKLOADS[@]}"; do
	printf '%-17s' "$w"
	for s in "${SYSTEMS[@]}"; do
		MED[$w,$s]=$(echo "${SAMPLES[$w,$s]}" | median)
		printf ' %15s' "${MED[$w,$s]}"
	done
	sm=${MED[$w,smuxfs-1]:--}
	printf ' %11s %14s %13s\n' "$(ratio "$w" "$sm" "${MED[$w,plain]:--}")" \
		"$(ratio "$w" "$sm" "${MED[$w,mergerfs]:--}")" \
		"$(ratio "$w" "$sm" "${MED[$w,unionfs]:--}")"
done
echo
for w in "${WORKLOADS[@]}"; do
	sm=${MED[$w,smuxfs-1]:--}
	rm_=$(ratio "$w" "$sm" "${MED[$w,mergerfs]:--}")
	ru=$(ratio "$w" "$sm" "${MED[$w,unionfs]:--}")
	if [ "$rm_" = - ] || [ "$ru" = - ]; then
		verdict="n/a (needs smuxfs-1, mergerfs and unionfs)"
	elif awk -v a="$rm_" -v b="$ru" 'BEGIN { exit !(a > 1 && b > 1) }'; then
		verdict="AHEAD of both peers"
	else
		verdict="BEHIND"
		awk -v a="$rm_" 'BEGIN { exit !(a <= 1) }' && verdict="$verdict mergerfs"
		awk -v a="$ru" 'BEGIN { exit !(a <= 1) }' && verdict="$verdict unionfs"
	fi
	printf 'smuxfs-1 %-17s %s\n' "$w:" "$verdict"
done
