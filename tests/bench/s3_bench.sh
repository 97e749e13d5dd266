#!/bin/bash
# SPDX-License-Identifier: MIT
#
# s3_bench.sh - `make bench-s3`: smuxfs, s3fs and rclone mount side by side
# on ONE s3rver (tests/servers/s3rver.sh, started here on loopback, stopped
# on exit), the file workloads of fs_bench.sh, time to durability and the
# requests each workload sent (issue 10, "Done when").
#
# Systems (columns), each with a bucket of its own on the same s3rver:
#   smuxfs        one `type = s3` backend, path style, smuxfs's defaults:
#                 read cache in cache_dir, read_ahead = 64M (the default)
#   s3fs          s3fs 1.90 (Debian) defaults: url=EP,use_path_request_style
#   s3fs-tuned    + enable_noobj_cache,notsup_compat_dir,parallel_count=8,
#                 multipart_size=16
#   rclone        rclone mount 1.60 (Debian), --vfs-cache-mode off
#   rclone-tuned  --vfs-cache-mode writes --use-server-modtime --s3-no-head
#                 --vfs-write-back 0s
# (the configurations of ../shared/notes/s3-peers-measured.md).
#
# Workloads (rows), seconds (lower is better):
#   write     dd of a precomputed random file of BENCH_SIZE_MB MiB, bs=1M,
#             conv=fsync; stops when a HEAD shows the object whole
#   cold-read dd of that file to /dev/null after a remount and drop_caches
#   untar     tar -xf of BENCH_FILES random 4 KiB files (20 dirs); stops
#             when a listing shows every file with its 4096 bytes
#   ls-lR     ls -lR of that tree, after a remount
#   cat       cat of every file, after a remount
#   rm-r      rm -r of the tree; stops when the listing under it is empty
# The durability probes (tests/bench/s3_bench_probe.py) mark their requests
# with `smux-bench-probe=1` and are not counted.
#
# Requests: s3rver's log lines of the responses sent during the workload
# (from its start until its probe succeeds), minus the probes. s3rver's
# logger cuts the first 16 bytes of each line, meant for colour codes;
# FORCE_COLOR=1 makes them colour codes, so the method and URL survive.
#
# Order: per repetition, per workload, the systems run round-robin, each
# repetition starting one system further. Reported: medians, and the speed
# ratio of smuxfs against the better configuration of each peer (the peer's
# seconds over smuxfs's: >1.00 = smuxfs faster).
#
# Environment:
#   BENCH_REPS=3, BENCH_SIZE_MB=512, BENCH_FILES=2000
#   BENCH_SYSTEMS="smuxfs s3fs s3fs-tuned rclone rclone-tuned"
#   BENCH_WORKLOADS="write cold-read untar ls-lR cat rm-r" (a subset in
#                      this order; cold-read reads what write wrote, ls-lR,
#                      cat and rm-r the tree untar made)
#   BENCH_SMUXFS=build/smuxfs, BENCH_DIR=/var/tmp, BENCH_KEEP=1
#   BENCH_RAW=FILE         every sample as TSV (also the requests by method)
#   BENCH_SMUX_BACKEND="part_parallel = 8"  lines added to smuxfs's
#                          [backend s] (to try an option against the peers)
#   BENCH_SMUX_MOUNT="read_ahead = 128M"  lines added to its [mount]
#   BENCH_PROBE_TIMEOUT=300  bound of every durability probe, seconds
#
# s3fs comes from scripts/install-deps.sh (the interop test needs it);
# rclone, a bench-only peer like fs_bench's, is installed here with apt-get
# when missing. Needs root. Runs in a
# private mount namespace, unmounts what it mounted (trap), every mount and
# unmount under a timeout.
set -euo pipefail
shopt -s inherit_errexit

if [ -z "${BENCH_IN_NS:-}" ] && [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null; then
	BENCH_IN_NS=1 exec unshare --mount --propagation private "$BASH" "$0" "$@"
fi
if [ -n "${BENCH_IN_NS:-}" ]; then
	awk '$3 ~ /^fuse/ { print $2 }' /proc/self/mounts | while read -r m; do
		umount -l "$(printf '%b' "$m")" 2>/dev/null || true
	done
fi

HERE=$(cd "$(dirname "$0")" && pwd)
BENCH_NAME=s3_bench
# shellcheck source=tests/bench/bench_lib.sh
. "$HERE/bench_lib.sh"
REPO=$(cd "$HERE/../.." && pwd)
REPS=${BENCH_REPS:-3}
SIZE_MB=${BENCH_SIZE_MB:-512}
NFILES=${BENCH_FILES:-2000}
PROBE_TMO=${BENCH_PROBE_TIMEOUT:-300}
read -r -a SYSTEMS <<<"${BENCH_SYSTEMS:-smuxfs s3fs s3fs-tuned rclone rclone-tuned}"
SMUXFS=${BENCH_SMUXFS:-$REPO/build/smuxfs}
read -r -a WORKLOADS <<<"${BENCH_WORKLOADS:-write cold-read untar ls-lR cat rm-r}"
for w in "${WORKLOADS[@]}"; do
	case $w in
	write | cold-read | untar | ls-lR | cat | rm-r) ;;
	*) echo "s3_bench: unknown workload '$w' in BENCH_WORKLOADS" >&2 && exit 2 ;;
	esac
done
MOUNT_TIMEOUT=30

die() {
	echo "s3_bench: $*" >&2
	exit 1
}

[ "$(id -u)" -eq 0 ] || die "needs root (drop_caches, apt-get, mounts)"
[[ "$REPS" =~ ^[1-9][0-9]*$ ]] || die "BENCH_REPS=$REPS: not a positive integer"
[[ "$SIZE_MB" =~ ^[1-9][0-9]*$ ]] || die "BENCH_SIZE_MB=$SIZE_MB: not a positive integer"
[[ "$NFILES" =~ ^[1-9][0-9]*$ ]] || die "BENCH_FILES=$NFILES: not a positive integer"
[[ "$PROBE_TMO" =~ ^[1-9][0-9]*$ ]] || die "BENCH_PROBE_TIMEOUT=$PROBE_TMO: not a positive integer"
for s in "${SYSTEMS[@]}"; do
	case $s in
	smuxfs | s3fs | s3fs-tuned | rclone | rclone-tuned) ;;
	*) die "BENCH_SYSTEMS: unknown system '$s'" ;;
	esac
done
[ -e /dev/fuse ] || die "/dev/fuse is missing"
[ -x "$SMUXFS" ] || die "$SMUXFS is not built (make build/smuxfs)"
SMUXFS=$(realpath "$SMUXFS")


need_pkg() { # command package
	command -v "$1" >/dev/null && return 0
	echo "s3_bench: installing $2 (a bench-only peer)" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$2" >/dev/null ||
		die "apt-get install $2 failed"
}
{ has_system s3fs || has_system s3fs-tuned; } && need_pkg s3fs s3fs
{ has_system rclone || has_system rclone-tuned; } && need_pkg rclone rclone
for t in tar dd timeout mountpoint python3 curl; do
	command -v $t >/dev/null || die "$t missing"
done

BASE=$(mktemp -d "${BENCH_DIR:-/var/tmp}/smuxfs-s3bench.XXXXXX")
S3D=$BASE/s3rver
MOUNTED=()
declare -A DAEMON_PID




cleanup() {
	local rc=$? m
	for m in "${MOUNTED[@]}"; do unmount_one "$m"; done
	"$REPO/tests/servers/s3rver.sh" stop "$S3D" >/dev/null 2>&1 || true
	if [ "${BENCH_KEEP:-0}" = 1 ]; then
		echo "s3_bench: kept $BASE" >&2
	elif ! grep -q " $BASE/" /proc/mounts; then
		rm -rf "$BASE"
	fi
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# s3rver with whole request lines in its log (see the header)
FORCE_COLOR=1 "$REPO/tests/servers/s3rver.sh" start "$S3D" >/dev/null ||
	die "s3rver did not start"
EP=$(sed -n 's/^S3_ENDPOINT=//p' "$S3D/env")
SLOG=$S3D/log/s3rver.log
[ -n "$EP" ] || die "no endpoint in $S3D/env"

bucket_of() { echo "bench-${1}"; }
for s in "${SYSTEMS[@]}"; do
	curl -sf -X PUT "$EP/$(bucket_of "$s")" >/dev/null ||
		die "cannot create bucket $(bucket_of "$s")"
	mkdir -p "$BASE/$s/mnt" "$BASE/$s/cache" "$BASE/$s/state"
done

# smuxfs: a single s3 backend, its defaults otherwise
export S3B_ACCESS_KEY_ID=S3RVER S3B_SECRET_ACCESS_KEY=S3RVER
cat >"$BASE/smuxfs/smuxfs.conf" <<EOF
[mount]
root = s
cache_dir = $BASE/smuxfs/cache
state_dir = $BASE/smuxfs/state
${BENCH_SMUX_MOUNT:-}

[backend s]
type = s3
endpoint = $EP
bucket = $(bucket_of smuxfs)
credentials_env = S3B
${BENCH_SMUX_BACKEND:-}
EOF
printf 'S3RVER:S3RVER\n' >"$BASE/passwd-s3fs"
chmod 600 "$BASE/passwd-s3fs"
export RCLONE_CONFIG_S3R_TYPE=s3 RCLONE_CONFIG_S3R_PROVIDER=Other \
	RCLONE_CONFIG_S3R_ENDPOINT=$EP RCLONE_CONFIG_S3R_REGION=us-east-1 \
	RCLONE_CONFIG_S3R_ACCESS_KEY_ID=S3RVER \
	RCLONE_CONFIG_S3R_SECRET_ACCESS_KEY=S3RVER \
	RCLONE_CONFIG=/dev/null

mnt_of() { echo "$BASE/$1/mnt"; }

mount_sys() {
	local s=$1 mnt i b
	mnt=$(mnt_of "$s")
	b=$(bucket_of "$s")
	case $s in
	smuxfs)
		timeout $MOUNT_TIMEOUT "$SMUXFS" "$BASE/smuxfs/smuxfs.conf" "$mnt" ||
			die "smuxfs mount failed"
		;;
	s3fs | s3fs-tuned)
		local o="url=$EP,use_path_request_style,passwd_file=$BASE/passwd-s3fs"
		[ "$s" = s3fs-tuned ] &&
			o+=",enable_noobj_cache,notsup_compat_dir,parallel_count=8,multipart_size=16"
		timeout $MOUNT_TIMEOUT s3fs "$b" "$mnt" -o "$o" || die "$s mount failed"
		;;
	rclone | rclone-tuned)
		local -a o=(--vfs-cache-mode off)
		[ "$s" = rclone-tuned ] && o=(--vfs-cache-mode writes --use-server-modtime
			--s3-no-head --vfs-write-back 0s)
		# the AWS SDK of rclone 1.60 fails on AWS_CA_BUNDLE
		# ("unsupported transport"); the endpoint is plain http
		env -u AWS_CA_BUNDLE rclone mount "s3r:$b" "$mnt" "${o[@]}" \
			--cache-dir "$BASE/$s/cache" --daemon --daemon-timeout 30s ||
			die "$s mount failed"
		;;
	esac
	for ((i = 0; i < 300; i++)); do
		mountpoint -q "$mnt" && break
		sleep 0.1
	done
	mountpoint -q "$mnt" || die "$s: $mnt not mounted after 30 s"
	MOUNTED+=("$mnt")
	DAEMON_PID[$mnt]=$(daemon_pid_of "$mnt")
}

umount_sys() { unmount_one "$(mnt_of "$1")"; }


probe() { python3 "$HERE/s3_bench_probe.py" "$EP" "$@"; }

now() { date +%s.%N; }

# Requests in the log between line $1 (exclusive) and the end, without probes
count_reqs() {
	tail -n +"$(($1 + 1))" "$SLOG" | sed 's/\x1b\[[0-9;]*m//g' |
		awk '$1 == "info:" && $2 ~ /^[A-Z]+$/ && $4 ~ /^[0-9][0-9][0-9]$/ &&
			$3 !~ /smux-bench-probe=1/ { n++ } END { print n + 0 }'
}

# The same by method (and 404s), for BENCH_RAW
reqs_by_method() {
	tail -n +"$(($1 + 1))" "$SLOG" | sed 's/\x1b\[[0-9;]*m//g' |
		awk '$1 == "info:" && $2 ~ /^[A-Z]+$/ && $4 ~ /^[0-9][0-9][0-9]$/ &&
			$3 !~ /smux-bench-probe=1/ { k = $2; if ($4 == "404") k = k " 404"; n[k]++ }
			END { for (k in n) printf "%s %d, ", k, n[k] }' | sed 's/, $//'
}

# Inputs, made once, untimed
SRC=$BASE/src.bin
head -c $((SIZE_MB << 20)) /dev/urandom >"$SRC"
mkdir -p "$BASE/tree"
# f0 sits at the top of the tree: s3rver 3.7.1 leaves a prefix that holds
# only sub-prefixes out of CommonPrefixes, so without a file of its own the
# tree's top directory is invisible to rclone (it writes no dir markers)
for ((i = 0; i < NFILES; i++)); do
	d=$BASE/tree/d$((i % 20))
	[ $i -eq 0 ] && d=$BASE/tree
	mkdir -p "$d"
	head -c 4096 /dev/urandom >"$d/f$i"
done
(cd "$BASE/tree" && tar cf "$BASE/tree.tar" .)
rm -rf "$BASE/tree"

run_one() { # system workload -> "seconds requests by-method" on stdout
	local s=$1 w=$2 mnt b t0 t1 l0
	mnt=$(mnt_of "$s")
	b=$(bucket_of "$s")
	case $w in
	write)
		cat "$SRC" >/dev/null
		rm -f "$mnt/big"
		probe "$b" gone big "$PROBE_TMO" >&2 || return 1
		mount_cycle "$s"
		;;
	cold-read | ls-lR | cat)
		mount_cycle "$s"
		drop_caches
		;;
	untar)
		rm -rf "$mnt/t"
		probe "$b" gone t/ "$PROBE_TMO" >&2 || return 1
		mount_cycle "$s"
		mkdir "$mnt/t"
		;;
	rm-r) mount_cycle "$s" ;;
	esac
	sync
	l0=$(wc -l <"$SLOG")
	t0=$(now)
	case $w in
	write)
		dd if="$SRC" of="$mnt/big" bs=1M conv=fsync status=none || return 1
		probe "$b" head big $((SIZE_MB << 20)) "$PROBE_TMO" >&2 || return 1
		;;
	cold-read) dd if="$mnt/big" of=/dev/null bs=1M status=none || return 1 ;;
	untar)
		tar -xf "$BASE/tree.tar" -C "$mnt/t" || return 1
		probe "$b" count t/ "$NFILES" 4096 "$PROBE_TMO" >&2 || return 1
		;;
	ls-lR) ls -lR "$mnt/t" >/dev/null || return 1 ;;
	cat) find "$mnt/t" -type f -exec cat {} + >/dev/null || return 1 ;;
	rm-r)
		rm -r "$mnt/t" || return 1
		probe "$b" gone t/ "$PROBE_TMO" >&2 || return 1
		;;
	esac
	t1=$(now)
	echo "$(echo "$t1 - $t0" | bc -l) $(count_reqs "$l0") $(reqs_by_method "$l0")"
}

# Remount so that no system's kernel or daemon caches carry over
mount_cycle() {
	umount_sys "$1"
	mount_sys "$1"
}

declare -A SAMPLES REQS
RAW=${BENCH_RAW:-}
[ -z "$RAW" ] || printf 'rep\tworkload\tsystem\tseconds\trequests\tby_method\n' >"$RAW"
nsys=${#SYSTEMS[@]}
for s in "${SYSTEMS[@]}"; do mount_sys "$s"; done
for ((r = 0; r < REPS; r++)); do
	for w in "${WORKLOADS[@]}"; do
		for ((k = 0; k < nsys; k++)); do
			s=${SYSTEMS[$(((k + r) % nsys))]}
			out=$(run_one "$s" "$w") || die "$s $w failed"
			read -r sec req methods <<<"$out"
			SAMPLES[$w,$s]+="$sec "
			REQS[$w,$s]+="$req "
			echo "s3_bench: rep $((r + 1)) $w $s: ${sec}s, $req requests" >&2
			[ -z "$RAW" ] || printf '%d\t%s\t%s\t%s\t%s\t%s\n' \
				$((r + 1)) "$w" "$s" "$sec" "$req" "$methods" >>"$RAW"
		done
	done
	# the next repetition starts from an empty bucket: the big file goes
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
echo "smuxfs S3 bench on s3rver ($EP): $REPS repetition(s), medians, seconds to"
echo "durability (lower is better) and requests s3rver logged (probes excluded)."
echo "${SIZE_MB} MiB file, $NFILES x 4 KiB files. vs-X = best X configuration's"
echo "seconds / smuxfs's seconds (>1.00 = smuxfs faster)."
printf '%-10s' workload
for s in "${SYSTEMS[@]}"; do printf ' %20s' "$s"; done
printf ' %9s %9s\n' vs-s3fs vs-rclone
for w in "${WORKLOADS[@]}"; do
	printf '%-10s' "$w"
	for s in "${SYSTEMS[@]}"; do
		v=${MED[$w,$s]}
		[ "$v" = - ] || v=$(printf '%.2f' "$v")
		printf ' %20s' "${v}s ${MREQ[$w,$s]}req"
	done
	sm=-
	has_system smuxfs && sm=${MED[$w,smuxfs]}
	printf ' %9s %9s\n' "$(ratio "$(best_of "$w" s3fs s3fs-tuned)" "$sm")" \
		"$(ratio "$(best_of "$w" rclone rclone-tuned)" "$sm")"
done
