#!/bin/bash
# SPDX-License-Identifier: MIT
#
# cdn_bench.sh - `make bench-cdn`: smuxfs on OpenStack Swift (its swift
# backend, and its s3 backend on the same Swift's S3 API), rclone mount on
# the same Swift, and smuxfs on the Bunny Storage emulator: the workloads
# of s3_bench.sh, time to durability and the requests each workload sent
# (issue 12, "Done when"). Same output shape as s3_bench.sh.
#
# Servers, started here on loopback and stopped on exit (also on failure):
# ONE Swift (tests/servers/swift.sh: Debian's Swift 2.30, tempauth, s3api)
# and the Bunny emulator (tests/servers/bunny.sh, bunny_emu.py).
#
# Systems (columns), each with a container (bucket, zone) of its own:
#   smuxfs-swift  one `type = swift` backend (tempauth v1.0), its defaults:
#                 read cache in cache_dir, read_ahead = 64M
#   smuxfs-s3     one `type = s3` backend on the SAME Swift's S3 API
#                 (SigV4, path style, account test:tester), its defaults
#   rclone        rclone mount 1.60 (Debian), swift backend (v1 auth),
#                 --vfs-cache-mode off (its default)
#   rclone-tuned  --vfs-cache-mode writes --vfs-write-back 0s
#                 --use-server-modtime --swift-no-large-objects
#                 (no HEAD per file for its mtime or for the DLO/SLO check)
#   smuxfs-bunny  one `type = bunny` backend on the emulator (region de,
#                 `endpoint` pointing at the emulator), its defaults
# rclone 1.60 has no Bunny backend (rclone PR #9261 is still open), so
# smuxfs-bunny has no peer column.
#
# Workloads (rows), seconds (lower is better), as in s3_bench.sh:
#   write     dd of a precomputed random file of BENCH_SIZE_MB MiB, bs=1M,
#             conv=fsync; stops when a HEAD shows the object whole
#   cold-read dd of that file to /dev/null after a remount and drop_caches
#   untar     tar -xf of BENCH_FILES random 4 KiB files (20 dirs); stops
#             when a listing shows every file with its 4096 bytes
#   ls-lR     ls -lR of that tree, after a remount
#   cat       cat of every file, after a remount
#   rm-r      rm -r of the tree; stops when nothing is listed under it
# Durability probes: tests/bench/cdn_bench_probe.py (Swift: HEAD and
# container listings through the Swift API, which also sees the S3 API's
# buckets; Bunny: the emulator's zone directory, which is what it serves).
#
# Requests: Swift - the proxy's access log lines (proxy-logging, in the
# proxy's log of swift.sh's log dir) with a client address, so one line per
# request a client sent (the lines of the proxy's own subrequests have
# none), from the workload's start until its probe succeeds, minus the
# probes (tagged `smux-bench-probe` in their query and User-Agent). Token
# requests (GET /auth/v1.0) are counted: the system sent them. Bunny - the
# delta of the emulator's /_emu/stats by_method (the probes send none).
#
# Order: per repetition, per workload, the systems run round-robin, each
# repetition starting one system further. Reported: medians, requests, the
# ratio of the better rclone configuration's seconds over smuxfs-swift's
# (>1.00 = smuxfs faster) and the requests by method of each system.
#
# Environment:
#   BENCH_REPS=3, BENCH_SIZE_MB=512, BENCH_FILES=2000
#   BENCH_SYSTEMS="smuxfs-swift smuxfs-s3 rclone rclone-tuned smuxfs-bunny"
#   BENCH_SMUXFS=build/smuxfs, BENCH_DIR=/var/tmp (ext4/xfs: Swift keeps
#   metadata in user xattrs), BENCH_KEEP=1
#   BENCH_RAW=FILE           every sample as TSV (also the requests by method)
#   BENCH_PROBE_TIMEOUT=300  bound of every durability probe, seconds
#
# rclone is installed here with apt-get when missing (a bench-only peer, as
# in s3_bench.sh); Swift comes from scripts/install-deps.sh. Needs root.
# Runs in a private mount namespace, unmounts what it mounted (trap), every
# mount and unmount under a timeout.
set -euo pipefail
shopt -s inherit_errexit

if [ -z "${BENCH_IN_NS:-}" ] && [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null; then
	BENCH_IN_NS=1 exec unshare --mount --propagation private "$BASH" "$0" "$@"
fi
if [ -n "${BENCH_IN_NS:-}" ]; then
	# the namespace's copies of other FUSE mounts would pin their daemons
	awk '$3 ~ /^fuse/ { print $2 }' /proc/self/mounts | while read -r m; do
		umount -l "$(printf '%b' "$m")" 2>/dev/null || true
	done
fi

HERE=$(cd "$(dirname "$0")" && pwd)
BENCH_NAME=cdn_bench
# shellcheck source=tests/bench/bench_lib.sh
. "$HERE/bench_lib.sh"
REPO=$(cd "$HERE/../.." && pwd)
REPS=${BENCH_REPS:-3}
SIZE_MB=${BENCH_SIZE_MB:-512}
NFILES=${BENCH_FILES:-2000}
PROBE_TMO=${BENCH_PROBE_TIMEOUT:-300}
read -r -a SYSTEMS <<<"${BENCH_SYSTEMS:-smuxfs-swift smuxfs-s3 rclone rclone-tuned smuxfs-bunny}"
SMUXFS=${BENCH_SMUXFS:-$REPO/build/smuxfs}
WORKLOADS=(write cold-read untar ls-lR cat rm-r)
MOUNT_TIMEOUT=60

die() {
	echo "cdn_bench: $*" >&2
	exit 1
}

[ "$(id -u)" -eq 0 ] || die "needs root (drop_caches, apt-get, mounts)"
[[ "$REPS" =~ ^[1-9][0-9]*$ ]] || die "BENCH_REPS=$REPS: not a positive integer"
[[ "$SIZE_MB" =~ ^[1-9][0-9]*$ ]] || die "BENCH_SIZE_MB=$SIZE_MB: not a positive integer"
[[ "$NFILES" =~ ^[1-9][0-9]*$ ]] || die "BENCH_FILES=$NFILES: not a positive integer"
[[ "$PROBE_TMO" =~ ^[1-9][0-9]*$ ]] || die "BENCH_PROBE_TIMEOUT=$PROBE_TMO: not a positive integer"
[ "${#SYSTEMS[@]}" -gt 0 ] || die "BENCH_SYSTEMS is empty"
for s in "${SYSTEMS[@]}"; do
	case $s in
	smuxfs-swift | smuxfs-s3 | rclone | rclone-tuned | smuxfs-bunny) ;;
	*) die "BENCH_SYSTEMS: unknown system '$s'" ;;
	esac
done
[ -e /dev/fuse ] || die "/dev/fuse is missing"
[ -x "$SMUXFS" ] || die "$SMUXFS is not built (make build/smuxfs)"
SMUXFS=$(realpath "$SMUXFS")


# which server a system runs on
server_of() {
	case $1 in
	smuxfs-bunny) echo bunny ;;
	*) echo swift ;;
	esac
}

need_swift=0 need_bunny=0
for s in "${SYSTEMS[@]}"; do
	if [ "$(server_of "$s")" = swift ]; then need_swift=1; else need_bunny=1; fi
done

if { has_system rclone || has_system rclone-tuned; } && ! command -v rclone >/dev/null; then
	echo "cdn_bench: installing rclone (a bench-only peer)" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q rclone >/dev/null ||
		die "apt-get install rclone failed"
fi
for t in tar dd timeout mountpoint python3 curl bc; do
	command -v $t >/dev/null || die "$t missing"
done

BASE=$(mktemp -d "${BENCH_DIR:-/var/tmp}/smuxfs-cdnbench.XXXXXX")
SWD=$BASE/swift
BND=$BASE/bunny
MOUNTED=()
declare -A DAEMON_PID




cleanup() {
	local rc=$? m
	for m in "${MOUNTED[@]}"; do unmount_one "$m"; done
	"$REPO/tests/servers/swift.sh" stop "$SWD" >/dev/null 2>&1 || true
	"$REPO/tests/servers/bunny.sh" stop "$BND" >/dev/null 2>&1 || true
	if [ "${BENCH_KEEP:-0}" = 1 ]; then
		echo "cdn_bench: kept $BASE" >&2
	elif ! grep -q " $BASE/" /proc/mounts; then
		rm -rf "$BASE"
	fi
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The servers, both at once (Swift takes most of a minute to start here)
pids=()
if [ $need_swift = 1 ]; then
	mkdir -p "$SWD"
	"$REPO/tests/servers/swift.sh" start "$SWD" >/dev/null &
	pids+=($!)
fi
if [ $need_bunny = 1 ]; then
	mkdir -p "$BND"
	"$REPO/tests/servers/bunny.sh" start "$BND" >/dev/null &
	pids+=($!)
fi
for p in "${pids[@]}"; do wait "$p" || die "a server did not start (its log is above)"; done

if [ $need_swift = 1 ]; then
	AUTH_URL=$(sed -n 's/^SWIFT_AUTH_URL=//p' "$SWD/env")
	S3_EP=$(sed -n 's/^S3_ENDPOINT=//p' "$SWD/env")
	{ [ -n "$AUTH_URL" ] && [ -n "$S3_EP" ]; } || die "no endpoints in $SWD/env"
	SWLOG=$SWD/log/proxy.log
	[ -f "$SWLOG" ] || die "no proxy log $SWLOG"
fi
if [ $need_bunny = 1 ]; then
	BN_EP=$(sed -n 's/^BUNNY_ENDPOINT=//p' "$BND/env")
	BN_ZONE=$(sed -n 's/^BUNNY_ZONE=//p' "$BND/env")
	{ [ -n "$BN_EP" ] && [ -n "$BN_ZONE" ]; } || die "no endpoint in $BND/env"
	BN_STORE=$BND/store/$BN_ZONE
fi

# tempauth's test account (tests/servers/swift.sh): the Swift user and the
# S3 API's access key at once
export CDN_PROBE_USER=test:tester CDN_PROBE_KEY=testing
export CDN_PROBE_LOG=${SWLOG:-}
export CDNB_SWIFT_CRED=test:tester:testing
export CDNB_S3_ACCESS_KEY_ID=test:tester CDNB_S3_SECRET_ACCESS_KEY=testing
export CDNB_BUNNY_KEY=emu-secret
export RCLONE_CONFIG_SWB_TYPE=swift RCLONE_CONFIG_SWB_AUTH=${AUTH_URL:-} \
	RCLONE_CONFIG_SWB_USER=test:tester RCLONE_CONFIG_SWB_KEY=testing \
	RCLONE_CONFIG_SWB_AUTH_VERSION=1 RCLONE_CONFIG=/dev/null

container_of() { echo "bench-${1}"; }
mnt_of() { echo "$BASE/$1/mnt"; }

probe_swift() { python3 "$HERE/cdn_bench_probe.py" swift "$AUTH_URL" "$@"; }

for s in "${SYSTEMS[@]}"; do
	mkdir -p "$BASE/$s/mnt" "$BASE/$s/cache" "$BASE/$s/state"
	[ "$(server_of "$s")" = swift ] || continue
	probe_swift "$(container_of "$s")" mkcontainer ||
		die "cannot make container $(container_of "$s")"
done

smux_conf() { # system -> its smuxfs.conf
	local s=$1
	cat <<EOF
[mount]
root = b
cache_dir = $BASE/$s/cache
state_dir = $BASE/$s/state

[backend b]
EOF
	case $s in
	smuxfs-swift)
		cat <<EOF
type = swift
auth_url = $AUTH_URL
container = $(container_of "$s")
credentials_env = CDNB_SWIFT_CRED
EOF
		;;
	smuxfs-s3)
		cat <<EOF
type = s3
endpoint = $S3_EP
bucket = $(container_of "$s")
credentials_env = CDNB_S3
EOF
		;;
	smuxfs-bunny)
		cat <<EOF
type = bunny
zone = $BN_ZONE
endpoint = $BN_EP
credentials_env = CDNB_BUNNY_KEY
EOF
		;;
	esac
}
for s in "${SYSTEMS[@]}"; do
	case $s in smuxfs-*) smux_conf "$s" >"$BASE/$s/smuxfs.conf" ;; esac
done

mount_sys() {
	local s=$1 mnt i
	mnt=$(mnt_of "$s")
	case $s in
	smuxfs-*)
		timeout $MOUNT_TIMEOUT "$SMUXFS" "$BASE/$s/smuxfs.conf" "$mnt" ||
			die "$s mount failed"
		;;
	rclone | rclone-tuned)
		local -a o=(--vfs-cache-mode off)
		[ "$s" = rclone-tuned ] && o=(--vfs-cache-mode writes --vfs-write-back 0s
			--use-server-modtime --swift-no-large-objects)
		rclone mount "swb:$(container_of "$s")" "$mnt" "${o[@]}" \
			--cache-dir "$BASE/$s/cache" --daemon --daemon-timeout 60s ||
			die "$s mount failed"
		;;
	esac
	for ((i = 0; i < 600; i++)); do
		mountpoint -q "$mnt" && break
		sleep 0.1
	done
	mountpoint -q "$mnt" || die "$s: $mnt not mounted after 60 s"
	MOUNTED+=("$mnt")
	DAEMON_PID[$mnt]=$(daemon_pid_of "$mnt")
}

umount_sys() { unmount_one "$(mnt_of "$1")"; }

# Remount so that no system's kernel or daemon caches carry over
mount_cycle() {
	umount_sys "$1"
	mount_sys "$1"
}


probe() { # system cmd args... (the durability probe of the system's server)
	local s=$1
	shift
	if [ "$(server_of "$s")" = swift ]; then
		probe_swift "$(container_of "$s")" "$@"
	else
		python3 "$HERE/cdn_bench_probe.py" dir "$BN_STORE" "$@"
	fi
}

now() { date +%s.%N; }

# --- request counts ---------------------------------------------------------
# A mark of where a workload starts: Swift's log line count, or the
# emulator's counters as "METHOD=N ..." (its /_emu/stats by_method)
bunny_counts() {
	curl -sf --max-time 30 "$BN_EP/_emu/stats" | python3 -c '
import json, sys
bm = json.load(sys.stdin).get("by_method", {})
if not isinstance(bm, dict):
    sys.exit("by_method is not an object")
print(" ".join("%s=%d" % (k, v) for k, v in sorted(bm.items())
               if isinstance(v, int) and k.isalpha()))'
}

req_mark() {
	if [ "$(server_of "$1")" = swift ]; then
		wc -l <"$SWLOG"
	else
		bunny_counts
	fi
}

# requests by method since the mark, "GET 12, PUT 3" (404s apart for
# Swift), and their sum: "TOTAL|BY-METHOD"
req_since() { # system mark
	if [ "$(server_of "$1")" = swift ]; then
		# proxy: CLIENT REMOTE DATE METHOD PATH PROTO STATUS REFERER AGENT ...
		tail -n +"$(($2 + 1))" "$SWLOG" |
			awk '$1 == "proxy:" && $2 != "-" && $5 ~ /^[A-Z]+$/ &&
				$8 ~ /^[0-9][0-9][0-9]$/ && $6 !~ /smux-bench-probe/ &&
				$10 !~ /smux-bench-probe/ {
					k = $5; if ($8 == "404") k = k " 404"; n[k]++; t++ }
				END { s = ""; for (k in n) s = s sprintf("%s %d, ", k, n[k])
					sub(/, $/, "", s); printf "%d|%s\n", t, s }'
	else
		bunny_counts | python3 -c '
import sys
def parse(s):
    return {k: int(v) for k, v in (w.split("=", 1) for w in s.split())}
a, b = parse(sys.argv[1]), parse(sys.stdin.read())
d = {k: b.get(k, 0) - a.get(k, 0) for k in b}
d = {k: v for k, v in sorted(d.items()) if v}
print("%d|%s" % (sum(d.values()), ", ".join("%s %d" % kv for kv in d.items())))' "$2"
	fi
}

# --- inputs, made once, untimed --------------------------------------------
SRC=$BASE/src.bin
head -c $((SIZE_MB << 20)) /dev/urandom >"$SRC"
mkdir -p "$BASE/tree"
# f0 sits at the top of the tree, as in s3_bench.sh (a top directory that
# holds only sub-prefixes and no marker is invisible to rclone)
for ((i = 0; i < NFILES; i++)); do
	d=$BASE/tree/d$((i % 20))
	[ $i -eq 0 ] && d=$BASE/tree
	mkdir -p "$d"
	head -c 4096 /dev/urandom >"$d/f$i"
done
(cd "$BASE/tree" && tar cf "$BASE/tree.tar" .)
rm -rf "$BASE/tree"

run_one() { # system workload -> "seconds total|by-method" on stdout
	local s=$1 w=$2 mnt t0 t1 m0 r
	mnt=$(mnt_of "$s")
	case $w in
	write)
		cat "$SRC" >/dev/null
		rm -f "$mnt/big"
		probe "$s" gone big "$PROBE_TMO" >&2 || return 1
		mount_cycle "$s"
		;;
	cold-read | ls-lR | cat)
		mount_cycle "$s"
		drop_caches
		;;
	untar)
		rm -rf "$mnt/t"
		probe "$s" gone t/ "$PROBE_TMO" >&2 || return 1
		mount_cycle "$s"
		mkdir "$mnt/t"
		;;
	rm-r) mount_cycle "$s" ;;
	esac
	sync
	m0=$(req_mark "$s")
	t0=$(now)
	case $w in
	write)
		dd if="$SRC" of="$mnt/big" bs=1M conv=fsync status=none || return 1
		probe "$s" head big $((SIZE_MB << 20)) "$PROBE_TMO" >&2 || return 1
		;;
	cold-read)
		dd if="$mnt/big" of=/dev/null bs=1M status=none || return 1
		;;
	untar)
		tar -xf "$BASE/tree.tar" -C "$mnt/t" || return 1
		probe "$s" count t/ "$NFILES" 4096 "$PROBE_TMO" >&2 || return 1
		;;
	ls-lR) ls -lR "$mnt/t" >/dev/null || return 1 ;;
	cat) find "$mnt/t" -type f -exec cat {} + >/dev/null || return 1 ;;
	rm-r)
		rm -r "$mnt/t" || return 1
		probe "$s" gone t/ "$PROBE_TMO" >&2 || return 1
		;;
	esac
	t1=$(now)
	# the Swift proxy logs a request after its response: let the last
	# lines land (a tagged request, waited for in the log; untimed)
	case $w in
	cold-read | ls-lR | cat)
		if [ "$(server_of "$s")" = swift ]; then
			probe "$s" sync 60 >&2 || return 1
		fi
		;;
	esac
	r=$(req_since "$s" "$m0")
	echo "$(echo "$t1 - $t0" | bc -l) $r"
}

declare -A SAMPLES REQS METHODS
RAW=${BENCH_RAW:-}
[ -z "$RAW" ] || printf 'rep\tworkload\tsystem\tseconds\trequests\tby_method\n' >"$RAW"
nsys=${#SYSTEMS[@]}
for s in "${SYSTEMS[@]}"; do mount_sys "$s"; done
for ((r = 0; r < REPS; r++)); do
	for w in "${WORKLOADS[@]}"; do
		for ((k = 0; k < nsys; k++)); do
			s=${SYSTEMS[$(((k + r) % nsys))]}
			out=$(run_one "$s" "$w") || die "$s $w failed"
			sec=${out%% *}
			rq=${out#* }
			req=${rq%%|*}
			methods=${rq#*|}
			SAMPLES[$w,$s]+="$sec "
			REQS[$w,$s]+="$req "
			METHODS[$w,$s]=$methods
			echo "cdn_bench: rep $((r + 1)) $w $s: ${sec}s, $req requests ($methods)" >&2
			[ -z "$RAW" ] || printf '%d\t%s\t%s\t%s\t%s\t%s\n' \
				$((r + 1)) "$w" "$s" "$sec" "$req" "$methods" >>"$RAW"
		done
	done
	# the next repetition starts from an empty container: the big file goes
	for s in "${SYSTEMS[@]}"; do rm -f "$(mnt_of "$s")/big"; done
done


declare -A MED MREQ
for w in "${WORKLOADS[@]}"; do
	for s in "${SYSTEMS[@]}"; do
		MED[$w,$s]=$(echo "${SAMPLES[$w,$s]:-}" | median)
		MREQ[$w,$s]=$(echo "${REQS[$w,$s]:-}" | median)
	done
done



echo
echo "smuxfs Swift/Bunny bench: Swift 2.30 (tempauth, s3api) at ${S3_EP:--},"
echo "Bunny emulator at ${BN_EP:--}; $REPS repetition(s), medians, seconds to"
echo "durability (lower is better) and requests the servers saw (probes"
echo "excluded). ${SIZE_MB} MiB file, $NFILES x 4 KiB files. smuxfs-s3 is the"
echo "s3 backend on the same Swift's S3 API. vs-rclone = best rclone"
echo "configuration's seconds / smuxfs-swift's (>1.00 = smuxfs faster)."
echo "rclone 1.60 has no Bunny backend: smuxfs-bunny has no peer."
printf '%-10s' workload
for s in "${SYSTEMS[@]}"; do printf ' %20s' "$s"; done
printf ' %9s\n' vs-rclone
for w in "${WORKLOADS[@]}"; do
	printf '%-10s' "$w"
	for s in "${SYSTEMS[@]}"; do
		v=${MED[$w,$s]}
		[ "$v" = - ] || v=$(printf '%.2f' "$v")
		printf ' %20s' "${v}s ${MREQ[$w,$s]}req"
	done
	sm=-
	has_system smuxfs-swift && sm=${MED[$w,smuxfs-swift]}
	printf ' %9s\n' "$(ratio "$(best_of "$w" rclone rclone-tuned)" "$sm")"
done
echo
echo "Requests by method (last repetition):"
for w in "${WORKLOADS[@]}"; do
	for s in "${SYSTEMS[@]}"; do
		printf '  %-10s %-14s %s\n' "$w" "$s" "${METHODS[$w,$s]:--}"
	done
done
