# shellcheck shell=bash
# tests/integration/lib.sh - shared harness for the smuxfs integration tests.
#
# Source it first thing in a test script. It gives the test:
#   - strict mode (set -Eeuo pipefail) and an ERR trap that names the failing
#     line, so any unchecked failure fails the test;
#   - a private temp root $T (mktemp -d) removed at exit;
#   - a config writer (new_config, cfg_mux, cfg_file, cfg_faulty, cfg_raw);
#   - mount_smux / mount_smux_bg / unmount_smux, which track every mount and
#     daemon they start;
#   - a trap on EXIT/INT/TERM that always unmounts (fusermount3 -u, then
#     umount -l as the last resort), kills leftover daemons by pid, fails the
#     test if a daemon crashed, did not exit at unmount or wrote a sanitizer
#     report (ASan/LSan/UBSan), and removes the temp root.
#
# Environment:
#   SMUXFS          the daemon binary (default build/smuxfs, relative to the
#                   repository root)
#   SMUX_IT_BIG_MB  size of the large dd file in MiB (default 256)
#   SMUX_IT_KEEP=1  keep the temp root on failure (mounts are still undone)

set -Eeuo pipefail
export LC_ALL=C

SMUX_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SMUXFS=${SMUXFS:-build/smuxfs}
case $SMUXFS in
/*) ;;
*) SMUXFS=$SMUX_REPO/$SMUXFS ;;
esac
export SMUXFS

T=$(mktemp -d "${TMPDIR:-/tmp}/smux-it.XXXXXX")
chmod 755 "$T" # other users (test_ro_perms) must be able to reach mounts
SMUX_TEST=$(basename "$0" .sh)${1:+-$1}

# Daemon environment: sanitizer reports of every daemon (foreground or
# daemonised) land in $T/san.PID besides the daemon's stderr log.
SMUX_SAN_ENV=(
	"ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:halt_on_error=1}:log_path=$T/san"
	"UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}:log_path=$T/san"
)

_SMUX_MOUNTS=()	   # mountpoints we mounted and have not unmounted yet
_SMUX_FG_PIDS=()   # foreground daemons we started (pid:mountpoint:log)
_SMUX_BAD=0	   # set when the harness itself finds a failure at cleanup
_SMUX_CLEANED=0
_SMUX_NLOG=0

log() { printf '[%s %3ss] %s\n' "$SMUX_TEST" "$SECONDS" "$*" >&2; }

fail() {
	printf '[%s] FAIL: %s\n' "$SMUX_TEST" "$*" >&2
	exit 1
}

_smux_on_err() {
	local rc=$? line=$1 cmd=$2
	printf '[%s] FAIL: line %s: exit %s: %s\n' "$SMUX_TEST" "$line" "$rc" \
		"$cmd" >&2
}
trap '_smux_on_err "$LINENO" "$BASH_COMMAND"' ERR

# ---------------------------------------------------------------------------
# Config writer. new_config FILE ROOT [MOUNTKEY=VALUE...] starts a file whose
# [mount] section names ROOT and puts cache_dir/state_dir under $T; the
# other writers append sections to the current file ($CFG).

CFG=
new_config() {
	CFG=$1
	local root=$2 kv
	shift 2
	mkdir -p "$T/cache" "$T/state"
	{
		echo "[mount]"
		echo "root = $root"
		echo "cache_dir = $T/cache/$(basename "$CFG" .conf)"
		echo "state_dir = $T/state/$(basename "$CFG" .conf)"
		for kv in "$@"; do
			echo "${kv%%=*} = ${kv#*=}"
		done
		echo
	} >"$CFG"
}

_cfg_section() {
	local header=$1 kv
	shift
	{
		echo "[$header]"
		for kv in "$@"; do
			echo "${kv%%=*} = ${kv#*=}"
		done
		echo
	} >>"$CFG"
}

# cfg_mux NAME MODE "MEMBER..." [KEY=VALUE...]
cfg_mux() {
	local name=$1 mode=$2 members=$3
	shift 3
	_cfg_section "mux $name" "mode=$mode" "backends=$members" "$@"
}

# cfg_file NAME DIR [KEY=VALUE...] (creates DIR)
cfg_file() {
	local name=$1 dir=$2
	shift 2
	mkdir -p "$dir"
	_cfg_section "backend $name" "type=file" "path=$dir" "$@"
}

# cfg_faulty NAME WRAPS [KEY=VALUE...]
cfg_faulty() {
	local name=$1 wraps=$2
	shift 2
	_cfg_section "backend $name" "type=faulty" "wraps=$wraps" "$@"
}

# cfg_raw TEXT: appends TEXT verbatim.
cfg_raw() { printf '%s\n' "$1" >>"$CFG"; }

# ---------------------------------------------------------------------------
# Mounting.

# _smux_newlog: sets $logf to a new daemon log file name.
_smux_newlog() {
	_SMUX_NLOG=$((_SMUX_NLOG + 1))
	logf=$T/smuxfs.$_SMUX_NLOG.log
}

# mount_smux CONFIG MNT [OPTS]: runs the daemon in the foreground (-f) in the
# background, stderr to a log, and waits until MNT is a mountpoint. The
# daemon's exit status at unmount is checked by unmount_smux.
mount_smux() {
	local cfg=$1 mnt=$2 opts=${3:-} logf pid i
	[ -x "$SMUXFS" ] || fail "no daemon binary at $SMUXFS (make $SMUXFS)"
	mkdir -p "$mnt"
	_smux_newlog
	local args=("$cfg" "$mnt" -f)
	[ -n "$opts" ] && args+=(-o "$opts")
	env "${SMUX_SAN_ENV[@]}" "$SMUXFS" "${args[@]}" </dev/null \
		>"$logf" 2>&1 &
	pid=$!
	_SMUX_FG_PIDS+=("$pid:$mnt:$logf")
	_SMUX_MOUNTS+=("$mnt")
	for ((i = 0; i < 200; i++)); do
		if mountpoint -q "$mnt"; then
			log "mounted $mnt (pid $pid${opts:+, -o $opts})"
			return 0
		fi
		if ! kill -0 "$pid" 2>/dev/null; then
			sed 's/^/  | /' "$logf" >&2
			fail "smuxfs $cfg $mnt exited before the mount was ready"
		fi
		sleep 0.1
	done
	sed 's/^/  | /' "$logf" >&2
	fail "smuxfs $cfg $mnt: no mount after 20 s"
}

# mount_smux_bg CONFIG MNT [OPTS]: the daemon's own background mode; it must
# return 0 only once the mount is ready (no waiting here).
mount_smux_bg() {
	local cfg=$1 mnt=$2 opts=${3:-} logf rc=0
	[ -x "$SMUXFS" ] || fail "no daemon binary at $SMUXFS (make $SMUXFS)"
	mkdir -p "$mnt"
	_smux_newlog
	_SMUX_MOUNTS+=("$mnt")
	local args=("$cfg" "$mnt")
	[ -n "$opts" ] && args+=(-o "$opts")
	env "${SMUX_SAN_ENV[@]}" "$SMUXFS" "${args[@]}" </dev/null >"$logf" 2>&1 ||
		rc=$?
	[ "$rc" -eq 0 ] || { sed 's/^/  | /' "$logf" >&2; fail "smuxfs (background mode) exited $rc"; }
	mountpoint -q "$mnt" || fail "smuxfs returned before $mnt was mounted"
	log "mounted $mnt (daemonised${opts:+, -o $opts})"
}

# _smux_cmdline PID: the process's arguments joined by spaces ("" if gone).
_smux_cmdline() { tr '\0' ' ' 2>/dev/null </proc/"$1"/cmdline || true; }

# daemon_pids_for MNT: pids of processes whose command line names MNT (the
# daemonised smuxfs, found by its unique temp path; never by name).
daemon_pids_for() {
	local mnt=$1 p cmd
	for p in /proc/[0-9]*; do
		cmd=$(_smux_cmdline "${p#/proc/}")
		case " $cmd " in
		*" $mnt "*) [ "${p#/proc/}" != $$ ] && echo "${p#/proc/}" ;;
		esac
	done
	return 0
}

_smux_forget_mount() {
	local mnt=$1 m keep=()
	for m in "${_SMUX_MOUNTS[@]}"; do
		[ "$m" = "$mnt" ] || keep+=("$m")
	done
	_SMUX_MOUNTS=("${keep[@]}")
}

# _smux_umount MNT: fusermount3 -u with retries while busy, then umount -l.
_smux_umount() {
	local mnt=$1 i
	for ((i = 0; i < 40; i++)); do
		grep -qs " $mnt " /proc/mounts || return 0
		fusermount3 -u "$mnt" 2>/dev/null && return 0
		sleep 0.25
	done
	log "fusermount3 -u $mnt kept failing; umount -l"
	umount -l "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" 2>/dev/null || true
	return 1
}

# _smux_wait_pid PID SECONDS: waits for a process to end.
_smux_wait_pid() {
	local pid=$1 n=$(($2 * 10)) i
	for ((i = 0; i < n; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	return 1
}

# unmount_smux MNT: unmounts; for a foreground daemon also checks it exits
# with status 0 within 60 s (a crash, hang or sanitizer abort fails the test).
unmount_smux() {
	local mnt=$1 e pid m logf rc keep=() bg
	bg=$(daemon_pids_for "$mnt")
	_smux_umount "$mnt" || fail "could not unmount $mnt cleanly"
	_smux_forget_mount "$mnt"
	mountpoint -q "$mnt" 2>/dev/null && fail "$mnt still mounted after unmount"
	for e in "${_SMUX_FG_PIDS[@]}"; do
		IFS=: read -r pid m logf <<<"$e"
		if [ "$m" != "$mnt" ]; then
			keep+=("$e")
			continue
		fi
		if ! _smux_wait_pid "$pid" 60; then
			kill -KILL "$pid" 2>/dev/null || true
			fail "daemon $pid did not exit within 60 s of unmounting $mnt"
		fi
		rc=0
		wait "$pid" || rc=$?
		if [ "$rc" -ne 0 ]; then
			sed 's/^/  | /' "$logf" >&2
			fail "daemon for $mnt exited with status $rc after unmount"
		fi
	done
	_SMUX_FG_PIDS=("${keep[@]}")
	for pid in $bg; do
		_smux_wait_pid "$pid" 60 ||
			fail "daemonised smuxfs $pid did not exit after unmount"
	done
	check_sanitizers
	log "unmounted $mnt"
}

# crash_smux MNT: kill -9 of the foreground daemon serving MNT (a crash:
# no unmount, no cleanup of its own), then the dead mount is taken down
# (fusermount3 -u, umount -l as the last resort). The daemon is forgotten:
# its exit status is the kill's.
crash_smux() {
	local mnt=$1
	take_fg_daemon "$mnt"
	kill -KILL "$FG_PID"
	wait "$FG_PID" 2>/dev/null || true
	log "killed daemon $FG_PID of $mnt with SIGKILL"
	_smux_umount "$mnt" || true
	_smux_forget_mount "$mnt"
	if grep -qs " $mnt " /proc/mounts; then
		fail "$mnt still mounted after the crash"
	fi
	return 0
}

# take_fg_daemon MNT: sets FG_PID to the foreground daemon serving MNT and
# forgets it (the caller stops it and reaps its exit status itself).
take_fg_daemon() {
	local mnt=$1 e pid m logf keep=()
	FG_PID=
	for e in "${_SMUX_FG_PIDS[@]}"; do
		IFS=: read -r pid m logf <<<"$e"
		if [ "$m" = "$mnt" ] && [ -z "$FG_PID" ]; then
			FG_PID=$pid
		else
			keep+=("$e")
		fi
	done
	[ -n "$FG_PID" ] || fail "no foreground daemon for $mnt"
	_SMUX_FG_PIDS=("${keep[@]}")
}

# kill_between MNT HELD CALLS CMD...: runs CMD on the mount MNT (its daemon
# taken to the foreground) with the CALLS system calls on the replica root
# HELD delayed 3 s by strace (-P: calls naming that directory, so keys in
# the mount's root), waits until the other replica made the change
# ($DONE_ON_C1, 2 s at most), checks HELD did not yet ($NOT_ON_C2), and
# kills the daemon: a crash between the two replicas' calls.
kill_between() {
	local mnt=$1 held=$2 calls=$3 spid cpid opid i
	shift 3
	take_fg_daemon "$mnt"
	opid=$FG_PID
	strace -f -qq -p "$opid" -P "$held" -e trace="$calls" \
		-e inject="$calls":delay_enter=3000000 -o /dev/null &
	spid=$!
	sleep 1
	"$@" 2>/dev/null &
	cpid=$!
	for ((i = 0; i < 100; i++)); do eval "$DONE_ON_C1" && break; sleep 0.02; done
	eval "$DONE_ON_C1" || fail "the first replica did not make the change within 2 s: $*"
	eval "$NOT_ON_C2" || fail "$held made the change before the kill (no window): $*"
	kill -KILL "$opid"
	wait "$opid" 2>/dev/null || true
	kill "$spid" 2>/dev/null || true
	wait "$spid" 2>/dev/null || true
	wait "$cpid" 2>/dev/null || true
	_smux_umount "$mnt" || true
	_smux_forget_mount "$mnt"
	log "killed $opid between the replicas: $*"
}

# check_sanitizers: fails if any daemon log or sanitizer file has a report.
check_sanitizers() {
	local f found=0
	for f in "$T"/smuxfs.*.log "$T"/san.*; do
		[ -f "$f" ] || continue
		if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:|SUMMARY: (Address|Leak|Undefined)|ThreadSanitizer' "$f"; then
			printf '[%s] sanitizer report in %s:\n' "$SMUX_TEST" "$f" >&2
			sed -n '1,80s/^/  | /p' "$f" >&2
			found=1
		fi
	done
	if [ "$found" -ne 0 ]; then
		_SMUX_BAD=1
		fail "sanitizer findings"
	fi
}

_smux_cleanup() {
	local rc=$1 e pid m logf p
	[ "$_SMUX_CLEANED" -eq 1 ] && return 0
	_SMUX_CLEANED=1
	trap - ERR
	set +e
	cd / || true
	# 1. unmount everything still mounted under our temp root
	for m in "${_SMUX_MOUNTS[@]}"; do
		_smux_umount "$m"
	done
	# (a test's own tmpfs too: umount, not fusermount3's 10 s of tries;
	# the list read before anything is unmounted)
	while read -r _ m t _; do
		case $m in
		"$T"/*)
			log "leftover mount $m ($t)"
			case $t in
			fuse*) _smux_umount "$m" ;;
			*) umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null ;;
			esac
			;;
		esac
	done < <(cat /proc/mounts)
	# 2. foreground daemons: give them time to exit, then kill by pid
	for e in "${_SMUX_FG_PIDS[@]}"; do
		IFS=: read -r pid m logf <<<"$e"
		if ! _smux_wait_pid "$pid" 30; then
			log "killing daemon $pid (did not exit)"
			kill -TERM "$pid" 2>/dev/null
			_smux_wait_pid "$pid" 5 || kill -KILL "$pid" 2>/dev/null
		fi
	done
	# 3. anything else whose command line names our temp root (a daemon
	#    that outlived its mount, a program stuck on a dead mount)
	for p in /proc/[0-9]*; do
		p=${p#/proc/}
		[ "$p" = $$ ] && continue
		case " $(_smux_cmdline "$p") " in
		*" $T/"*) log "killing leftover process $p: $(_smux_cmdline "$p")"
			kill -KILL "$p" 2>/dev/null ;;
		esac
	done
	# 4. sanitizer reports fail the test even when it was passing
	if [ "$rc" -eq 0 ]; then
		(check_sanitizers) || rc=1
	else
		(check_sanitizers) 2>&1 | grep -v FAIL >&2
		for f in "$T"/smuxfs.*.log; do
			[ -s "$f" ] || continue
			printf '[%s] daemon log %s (last %s lines):\n' "$SMUX_TEST" "$f" "${SMUX_IT_LOG_LINES:-30}" >&2
			tail -n "${SMUX_IT_LOG_LINES:-30}" "$f" | sed 's/^/  | /' >&2
		done
	fi
	# 5. the temp root
	if grep -qs " $T/" /proc/mounts; then
		log "a mount under $T is still present; not removing it"
		rc=1
	elif [ "$rc" -ne 0 ] && [ "${SMUX_IT_KEEP:-0}" = 1 ]; then
		log "keeping $T"
	else
		rm -rf "$T"
	fi
	return "$rc"
}

_smux_exit() {
	local rc=$1
	_smux_cleanup "$rc"
	rc=$?
	if [ "$rc" -eq 0 ]; then
		printf '[%s] PASS\n' "$SMUX_TEST" >&2
	fi
	exit "$rc"
}
trap '_smux_exit $?' EXIT
trap 'log "interrupted"; exit 130' INT
trap 'log "terminated"; exit 143' TERM

# ---------------------------------------------------------------------------
# Helpers for tests.

# start_receiver DIR: runs tests/tools/otlp_receiver.py (JSON POSTs: OTLP
# traces to DIR/traces.jsonl, anything else to DIR/posts.jsonl) on a free
# loopback port and prints the port once it listens. The cleanup kills it
# (its command line names $T). Its output goes to DIR/log (not to the
# caller's $(...), which would wait for it).
start_receiver() {
	local dir=$1 i
	mkdir -p "$dir"
	python3 "$SMUX_REPO/tests/tools/otlp_receiver.py" "$dir" \
		>"$dir/log" 2>&1 </dev/null &
	for ((i = 0; i < 200; i++)); do
		[ -s "$dir/port" ] && break
		sleep 0.05
	done
	[ -s "$dir/port" ] || fail "the receiver in $dir did not start"
	cat "$dir/port"
}

# start_script_server NAME: starts tests/servers/NAME (a scripted server
# taking a port file; it exits with this test's shell), waits for its
# port and sets SCRIPT_PORT and SCRIPT_PID.
start_script_server() {
	local pf=$T/$1.port i
	python3 "$SMUX_REPO/tests/servers/$1" "$pf" >"$T/$1.log" 2>&1 </dev/null &
	SCRIPT_PID=$!
	for ((i = 0; i < 100; i++)); do
		[ -s "$pf" ] && break
		sleep 0.1
	done
	[ -s "$pf" ] || fail "$1 did not start: $(cat "$T/$1.log")"
	SCRIPT_PORT=$(cat "$pf")
}

# stats MNT JQ-FILTER: applies a jq filter to MNT/.smux/stats (raw output).
stats() { jq -r "$2" "$1/.smux/stats"; }

# repair_settled MNT SECONDS: asks MNT's mux for repairs until no hint is
# pending; fails when some still are after SECONDS.
repair_settled() {
	local m=$1 end=$((SECONDS + $2))
	until [ "$(stats "$m" .pendingHints)" = 0 ]; do
		[ "$SECONDS" -lt "$end" ] ||
			fail "hints still pending after ${2}s: $(stats "$m" .pendingHints)"
		echo repair >"$m/.smux/ctl" 2>/dev/null || true
		sleep 0.2
	done
}

# backend_stat MNT NAME FIELD: one field of one member of the root mux.
backend_stat() {
	jq -r --arg n "$2" --arg f "$3" \
		'.backends[] | select(.name == $n) | .[$f]' "$1/.smux/stats"
}

# make_tree DIR NDIRS NFILES: NDIRS directories with NFILES files each, of
# random sizes 0..8 KiB, plus an empty file and an empty directory.
make_tree() {
	local dir=$1 nd=$2 nf=$3 d f
	mkdir -p "$dir/empty-dir"
	: >"$dir/empty-file"
	for ((d = 0; d < nd; d++)); do
		mkdir -p "$dir/d$d/sub"
		for ((f = 0; f < nf; f++)); do
			head -c $(((RANDOM * 7 + d * 131 + f) % 8193)) /dev/urandom \
				>"$dir/d$d/f$f.dat"
		done
		echo "leaf $d" >"$dir/d$d/sub/leaf.txt"
	done
}

# expect_fail ERRNO-TEXT CMD...: CMD must fail and its stderr must contain
# ERRNO-TEXT (e.g. "Read-only file system"); ERRNO-TEXT may be empty.
expect_fail() {
	local want=$1 out rc=0
	shift
	out=$("$@" 2>&1) || rc=$?
	[ "$rc" -ne 0 ] || fail "expected failure, succeeded: $*"
	if [ -n "$want" ] && ! grep -qF "$want" <<<"$out"; then
		fail "expected '$want' from: $* ; got: $out"
	fi
	return 0
}

# count_files DIR: regular files under DIR.
count_files() { find "$1" -type f | wc -l; }

# snapshot MNT DIR: copies the mount's tree (without .smux) to DIR.
snapshot() {
	mkdir -p "$2"
	rsync -a --exclude=/.smux "$1/" "$2/"
}

# ---------------------------------------------------------------------------
# The standard configuration of each mode over local file backends, shared
# by test_programs.sh and test_model.sh. The root mux is "m".
#   failover       a b                  ($T/a $T/b)
#   round-robin    r1 r2 over ONE directory $T/shared (identical replicas)
#   weighted       w1 (3) w2 (1) over $T/shared
#   sticky-by-key  s0 s1 s2             ($T/s0 ...)
#   shield         origin m1 m2         ($T/origin ...)
#   mirror         r1 r2                ($T/r1 $T/r2)
mode_config() {
	local mode=$1 conf=$2
	new_config "$conf" m
	case $mode in
	failover)
		cfg_mux m failover "a b" backend_timeout=10s
		cfg_file a "$T/a"
		cfg_file b "$T/b"
		;;
	round-robin)
		cfg_mux m round-robin "r1 r2" backend_timeout=10s
		cfg_file r1 "$T/shared"
		cfg_file r2 "$T/shared"
		;;
	weighted)
		cfg_mux m weighted "w1 w2" backend_timeout=10s
		cfg_file w1 "$T/shared" weight=3
		cfg_file w2 "$T/shared" weight=1
		;;
	sticky-by-key)
		cfg_mux m sticky-by-key "s0 s1 s2" backend_timeout=10s
		cfg_file s0 "$T/s0"
		cfg_file s1 "$T/s1"
		cfg_file s2 "$T/s2"
		;;
	shield)
		cfg_mux m shield "origin m1 m2" backend_timeout=10s
		cfg_file origin "$T/origin"
		cfg_file m1 "$T/m1"
		cfg_file m2 "$T/m2"
		;;
	mirror)
		cfg_mux m mirror "r1 r2" backend_timeout=10s
		cfg_file r1 "$T/r1"
		cfg_file r2 "$T/r2"
		;;
	*) fail "unknown mode $mode" ;;
	esac
}

# tree_config SETUP CONF: a config of a local-semantics test on SETUP:
# "file" (the file backend b0), "mirror" or "failover" (a mux "top" of the
# file backends b0 and b1) or "memory" (an object store). Sets REPLICAS to
# the directories that hold every file (none on memory).
tree_config() {
	local setup=$1 conf=$2
	case $setup in
	file)
		new_config "$conf" b0
		cfg_file b0 "$T/b0"
		REPLICAS="$T/b0"
		;;
	mirror | failover)
		new_config "$conf" top
		cfg_file b0 "$T/b0"
		cfg_file b1 "$T/b1"
		cfg_mux top "$setup" "b0 b1"
		REPLICAS="$T/b0"
		if [ "$setup" = mirror ]; then REPLICAS="$T/b0 $T/b1"; fi
		;;
	memory)
		new_config "$conf" root
		_cfg_section "backend root" "type=memory"
		REPLICAS=""
		;;
	*) fail "unknown setup $setup" ;;
	esac
}

# mode_backing_dirs CONF: every file backend directory of a config.
mode_backing_dirs() { sed -n 's/^path = //p' "$1" | sort -u; }

# mode_full_copies MODE: the directories that must hold every file.
mode_full_copies() {
	case $1 in
	failover) echo "$T/a" ;;
	round-robin | weighted) echo "$T/shared" ;;
	sticky-by-key) ;;
	shield) echo "$T/origin $T/m1 $T/m2" ;;
	mirror) echo "$T/r1 $T/r2" ;;
	esac
}

# 32-bit FNV-1a of a key (ASCII), as smux_fnv1a computes it.
fnv1a() {
	local s=$1 h=2166136261 i c
	for ((i = 0; i < ${#s}; i++)); do
		printf -v c '%d' "'${s:i:1}"
		h=$((((h ^ c) * 16777619) & 0xffffffff))
	done
	echo "$h"
}

# mode_check_file MODE REL LOCALFILE: the backing directories hold REL where
# MODE puts it (sticky: on shard fnv1a(REL) % 3 and no other; failover:
# on a and not on b; otherwise on every full copy), equal to LOCALFILE.
mode_check_file() {
	local mode=$1 rel=$2 want=$3 d n
	if [ "$mode" = sticky-by-key ]; then
		n=$(($(fnv1a "$rel") % 3))
		cmp "$want" "$T/s$n/$rel" || fail "$rel not on shard s$n"
		for d in 0 1 2; do
			[ "$d" = "$n" ] && continue
			[ ! -e "$T/s$d/$rel" ] || fail "$rel also on shard s$d"
		done
		return 0
	fi
	for d in $(mode_full_copies "$mode"); do
		cmp "$want" "$d/$rel" || fail "$rel missing or different in $d"
	done
	if [ "$mode" = failover ] && [ -e "$T/b/$rel" ]; then
		fail "$rel is on the standby b while a is healthy"
	fi
	return 0
}

# ---------------------------------------------------------------------------
# Network test servers on loopback, for mounts of network backends. Each
# runs with its files under a directory of $T (its command line names $T,
# so the cleanup stops it even when the test fails) unless it is the one
# `make check` shares (tests/servers/shared.sh: SMUX_TEST_SERVERS).

# free_port: prints a free TCP port on 127.0.0.1.
free_port() {
	/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_nginx_dav DIR: nginx with WebDAV (tests/servers/nginx-dav.conf)
# serving DIR/root; sets DAV_URL (http://127.0.0.1:PORT, no slash) and
# NGINX_PID once it answers. Fails the test when nginx or its dav-ext
# module is missing.
start_nginx_dav() {
	local dir=$1 nginx port
	nginx=$(command -v nginx || echo /usr/sbin/nginx)
	if [ ! -x "$nginx" ] || [ ! -f /usr/lib/nginx/modules/ngx_http_dav_ext_module.so ]; then
		fail "nginx or libnginx-mod-http-dav-ext missing (scripts/install-deps.sh installs them)"
	fi
	mkdir -p "$dir/root"
	port=$(free_port)
	sed -e "s#@DIR@#$dir#g; s#@ROOT@#$dir/root#g; s#@PORT@#$port#g" \
		-e "s#@USER@#$([ "$(id -u)" = 0 ] && echo 'user root;')#" \
		"$SMUX_REPO/tests/servers/nginx-dav.conf" >"$dir/nginx.conf"
	"$nginx" -e "$dir/server.log" -p "$dir" -c "$dir/nginx.conf" \
		>"$dir/server.log" 2>&1 </dev/null &
	NGINX_PID=$!
	DAV_URL=http://127.0.0.1:$port
	_dav_wait nginx "$NGINX_PID" "$dir/server.log"
}

# _dav_wait NAME PID LOG: waits until the server at DAV_URL answers; fails
# the test (with LOG) when PID exits first or 20 s pass.
_dav_wait() {
	local i
	for ((i = 0; i < 200; i++)); do
		curl -s -o /dev/null "$DAV_URL/" && break
		kill -0 "$2" 2>/dev/null || { cat "$3" >&2; fail "$1 exited"; }
		sleep 0.1
	done
	curl -s -o /dev/null "$DAV_URL/" || fail "$1 on $DAV_URL did not answer"
	log "$1 WebDAV on $DAV_URL (pid $2)"
}

# start_lighttpd_dav DIR: starts lighttpd's mod_webdav on a free port with
# its files under DIR (documents in DIR/root); sets DAV_URL and
# LIGHTTPD_PID once it answers.
start_lighttpd_dav() {
	local dir=$1 port
	[ -x /usr/sbin/lighttpd ] && [ -f /usr/lib/lighttpd/mod_webdav.so ] ||
		fail "lighttpd or lighttpd-mod-webdav missing (scripts/install-deps.sh installs them)"
	mkdir -p "$dir/root" "$dir/tmp"
	port=$(free_port)
	sed -e "s#@DIR@#$dir#g; s#@ROOT@#$dir/root#g; s#@PORT@#$port#g" \
		"$SMUX_REPO/tests/servers/lighttpd-dav.conf" >"$dir/lighttpd.conf"
	/usr/sbin/lighttpd -D -f "$dir/lighttpd.conf" >"$dir/server.log" 2>&1 </dev/null &
	LIGHTTPD_PID=$!
	DAV_URL=http://127.0.0.1:$port
	_dav_wait lighttpd "$LIGHTTPD_PID" "$dir/server.log"
}

# use_s3rver: sets S3_EP to the endpoint of the s3rver `make check` shares,
# or of one of its own under $T/s3rver; then makes a bucket of this run's
# own (smux-it-PID-RANDOM) and sets S3_BUCKET. s3rver checks the access key
# only: credentials_env names a prefix whose _ACCESS_KEY_ID and
# _SECRET_ACCESS_KEY are both S3RVER (S3RV_ here, exported).
use_s3rver() {
	local d
	if [ -n "${SMUX_TEST_SERVERS:-}" ] && [ -s "$SMUX_TEST_SERVERS/s3rver/env" ]; then
		d=$SMUX_TEST_SERVERS/s3rver
	else
		d=$T/s3rver
		"$SMUX_REPO/tests/servers/s3rver.sh" start "$d" >/dev/null ||
			fail "s3rver did not start"
		S3_OWN=$d
	fi
	S3_EP=$(sed -n 's/^S3_ENDPOINT=//p' "$d/env")
	S3_BUCKET=smux-it-$$-$RANDOM
	curl -sf -X PUT "$S3_EP/$S3_BUCKET" >/dev/null ||
		fail "cannot create bucket $S3_BUCKET on $S3_EP"
	export S3RV_ACCESS_KEY_ID=S3RVER S3RV_SECRET_ACCESS_KEY=S3RVER
	log "s3rver at $S3_EP, bucket $S3_BUCKET"
}

# s3rver_fetch DIR: every object of $S3_BUCKET into DIR (tests/tools/
# s3_fetch.py), the key as the relative path.
s3rver_fetch() {
	S3_ACCESS_KEY=S3RVER S3_SECRET_KEY=S3RVER /usr/bin/python3 \
		"$SMUX_REPO/tests/tools/s3_fetch.py" "$S3_EP" "$S3_BUCKET" "$1" ||
		fail "cannot fetch bucket $S3_BUCKET"
}

# swift_server: sets SWIFT_DIR to the OpenStack Swift (tempauth, s3api)
# `make check` shares (SMUX_TEST_SERVERS/swift or SMUX_TEST_SWIFT_DIR, left
# running), or starts one (seconds to minutes on a busy machine) outside
# $T, since the harness deletes $T before a stopper could read the pids in
# it (memcached was left running): a watcher stops it when this shell
# ends, stop_net_servers sooner. SWIFT_DIR/env has its addresses and keys.
swift_server() {
	if [ -n "${SMUX_TEST_SERVERS:-}" ] && [ -s "$SMUX_TEST_SERVERS/swift/env" ]; then
		SWIFT_DIR=$SMUX_TEST_SERVERS/swift
	elif [ -n "${SMUX_TEST_SWIFT_DIR:-}" ] && [ -s "$SMUX_TEST_SWIFT_DIR/env" ]; then
		SWIFT_DIR=$SMUX_TEST_SWIFT_DIR
	else
		SWIFT_DIR=$(mktemp -d /tmp/smux-swift.XXXXXX)
		"$SMUX_REPO/tests/servers/swift.sh" start "$SWIFT_DIR" >/dev/null ||
			fail "Swift did not start"
		(tail --pid=$$ -f /dev/null 2>/dev/null
			"$SMUX_REPO/tests/servers/swift.sh" stop "$SWIFT_DIR" >/dev/null 2>&1
			rm -rf "$SWIFT_DIR") &
		SWIFT_OWN=$SWIFT_DIR
	fi
}

# use_swift: swift_server, then sources its env (SWIFT_AUTH_URL...), sets
# SWIFT (the swift CLI as test:tester) and SWIFT_CONTAINER (a name of this
# run's own), and exports SMUX_IT_SWIFT_CRED for credentials_env.
use_swift() {
	command -v swift >/dev/null ||
		fail "python3-swiftclient missing (scripts/install-deps.sh)"
	swift_server
	# shellcheck disable=SC1091
	. "$SWIFT_DIR/env"
	# shellcheck disable=SC2034 # the caller's
	SWIFT=(swift -q -A "$SWIFT_AUTH_URL" -U test:tester -K testing)
	SWIFT_CONTAINER=it-$$-$RANDOM
	export SMUX_IT_SWIFT_CRED=test:tester:testing
	log "Swift at $SWIFT_AUTH_URL, container $SWIFT_CONTAINER"
}

# start_bunny_emu DIR ZONE KEY: the Bunny Storage emulator (tests/servers/
# bunny_emu.py) with zone ZONE, password KEY, its files under
# DIR/store/ZONE; sets BUNNY_URL and BUNNY_PID once it listens, and writes
# KEY to DIR/key (mode 600) for credentials_file.
start_bunny_emu() {
	local dir=$1 zone=$2 key=$3 i
	mkdir -p "$dir"
	python3 "$SMUX_REPO/tests/servers/bunny_emu.py" "$dir/port" \
		"$dir/store" "$zone" "$key" >"$dir/server.log" 2>&1 </dev/null &
	BUNNY_PID=$!
	for ((i = 0; i < 200; i++)); do
		[ -s "$dir/port" ] && break
		kill -0 "$BUNNY_PID" 2>/dev/null ||
			{ cat "$dir/server.log" >&2; fail "bunny emulator exited"; }
		sleep 0.1
	done
	[ -s "$dir/port" ] || fail "bunny emulator did not start"
	BUNNY_URL=http://127.0.0.1:$(cat "$dir/port")
	printf '%s\n' "$key" >"$dir/key"
	chmod 600 "$dir/key"
	log "bunny emulator on $BUNNY_URL (pid $BUNNY_PID)"
}

# start_swift_identity DIR [-]: the identity v2.0 emulator (tests/servers/
# swift_identity.py, regions DFW and ORD) in front of the Swift of
# use_swift, forwarding to its tempauth account $SWIFT_RACK_USER
# (MossoCloudFS_rack, as Rackspace names accounts; read it with
# SWIFT_RACK, the swift CLI as that user), or with "-" in front of no
# Swift (it answers storage requests itself: authentication and the
# catalog alone, no Swift to start); user rackuser, API key
# $IDN_APIKEY written to DIR/cred (mode 600) as credentials_file wants
# it. Sets IDN_URL (the emulator, no slash: auth_url is $IDN_URL/v2.0)
# and IDN_PID once it listens (its command line names $T: the cleanup
# stops it even when the test fails).
start_swift_identity() {
	local dir=$1 i up=(- - -)
	IDN_APIKEY=0123456789abcdef0123456789abcdef
	mkdir -p "$dir"
	[ "${2:-}" = - ] || up=("$SWIFT_AUTH_URL" "$SWIFT_RACK_USER" "$SWIFT_RACK_KEY")
	python3 "$SMUX_REPO/tests/servers/swift_identity.py" "$dir/port" \
		"${up[@]}" rackuser "$IDN_APIKEY" rackpass \
		>"$dir/server.log" 2>&1 </dev/null &
	IDN_PID=$!
	for ((i = 0; i < 300; i++)); do
		[ -s "$dir/port" ] && break
		kill -0 "$IDN_PID" 2>/dev/null ||
			{ cat "$dir/server.log" >&2; fail "identity emulator exited"; }
		sleep 0.1
	done
	[ -s "$dir/port" ] || fail "identity emulator did not start"
	IDN_URL=http://127.0.0.1:$(cat "$dir/port")
	printf 'rackuser:%s\n' "$IDN_APIKEY" >"$dir/cred"
	chmod 600 "$dir/cred"
	# shellcheck disable=SC2034 # the caller's
	[ "${2:-}" = - ] ||
		SWIFT_RACK=(swift -q -A "$SWIFT_AUTH_URL" -U "$SWIFT_RACK_USER" -K "$SWIFT_RACK_KEY")
	log "identity v2.0 emulator on $IDN_URL (pid $IDN_PID)"
}

# net_config MODE CONF: writes the config of the network MODE (s3: one s3
# backend; http: one nginx WebDAV backend; s3-mirror, s3-shield, bunny,
# swift: test_model.sh's header says what each mounts; cdn-shield: a
# shield of a file origin and two mirrors, swift through the identity
# v2.0 emulator (region DFW, large objects above 32M) and bunny on its
# emulator, test_programs.sh cdn-shield) on loopback servers
# it starts or shares, and sets COPIES to the directories that hold (after
# unmount, s3rver_fetch / swift download) what each replica stores. Used
# by test_model.sh and test_dbench.sh.
net_config() {
	local mode=$1 conf=$2
	new_config "$conf" m
	case $mode in
	s3-mirror)
		use_s3rver
		start_nginx_dav "$T/ng"
		cfg_mux m mirror "s d" backend_timeout=10s
		COPIES="$T/s3copy $T/ng/root"
		;;
	s3)
		use_s3rver
		cfg_raw "[backend m]
type = s3
endpoint = $S3_EP
bucket = $S3_BUCKET
credentials_env = S3RV
"
		COPIES="$T/s3copy"
		return 0
		;;
	http)
		start_nginx_dav "$T/ng"
		cfg_raw "[backend m]
type = http
url = $DAV_URL/
"
		COPIES="$T/ng/root"
		return 0
		;;
	s3-shield)
		use_s3rver
		cfg_mux m shield "origin s" backend_timeout=10s
		cfg_file origin "$T/origin"
		COPIES="$T/origin $T/s3copy"
		;;
	bunny)
		start_bunny_emu "$T/bn" edge emu-secret
		cfg_raw "[backend m]
type = bunny
zone = edge
region = uk
endpoint = $BUNNY_URL
credentials_file = $T/bn/key
"
		COPIES="$T/bn/store/edge"
		;;
	cdn-shield)
		use_swift
		start_swift_identity "$T/idn"
		start_bunny_emu "$T/bn" edge emu-secret
		cfg_mux m shield "origin sw bn" backend_timeout=30s
		cfg_file origin "$T/origin"
		cfg_raw "[backend sw]
type = swift
auth_url = $IDN_URL/v2.0
auth_version = 2
region = DFW
container = $SWIFT_CONTAINER
credentials_file = $T/idn/cred
segment_threshold = 32M
segment_size = 16M

[backend bn]
type = bunny
zone = edge
region = uk
endpoint = $BUNNY_URL
credentials_file = $T/bn/key
"
		# the container is in the rack account: fetched with SWIFT_RACK
		COPIES="$T/origin $T/swcopy $T/bn/store/edge"
		;;
	swift)
		use_swift
		cfg_raw "[backend m]
type = swift
auth_url = $SWIFT_AUTH_URL
container = $SWIFT_CONTAINER
credentials_env = SMUX_IT_SWIFT_CRED
"
		COPIES="$T/swcopy"
		;;
	*) fail "unknown network mode $mode" ;;
	esac
	if [ -n "${S3_BUCKET:-}" ]; then
		cfg_raw "[backend s]
type = s3
endpoint = $S3_EP
bucket = $S3_BUCKET
credentials_env = S3RV
"
	fi
	if [ -n "${DAV_URL:-}" ]; then
		cfg_raw "[backend d]
type = http
url = $DAV_URL/
"
	fi
}

# stop_net_servers: stops the nginx, the emulators and the s3rver or Swift
# of its own that the helpers above started (the cleanup would kill them
# anyway, noisily; Swift's watcher stops it when the test's shell ends).
stop_net_servers() {
	local pid
	for pid in ${NGINX_PID:-} ${LIGHTTPD_PID:-} ${BUNNY_PID:-} ${IDN_PID:-}; do
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	if [ -n "${S3_OWN:-}" ]; then
		"$SMUX_REPO/tests/servers/s3rver.sh" stop "$S3_OWN" >/dev/null 2>&1 || true
	fi
	if [ -n "${SWIFT_OWN:-}" ]; then
		"$SMUX_REPO/tests/servers/swift.sh" stop "$SWIFT_OWN" >/dev/null 2>&1 || true
	fi
	NGINX_PID='' LIGHTTPD_PID='' BUNNY_PID='' IDN_PID='' S3_OWN='' SWIFT_OWN=''
}
