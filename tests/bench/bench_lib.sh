# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# bench_lib.sh - helpers shared by the network benches (s3_bench.sh,
# cdn_bench.sh), sourced after they set BENCH_NAME (the prefix of their
# messages) and declare the arrays these use: SYSTEMS (the systems of the
# run), DAEMON_PID (mountpoint -> its daemon's pid) and MED (workload,
# system -> median seconds).

# has_system NAME: NAME is one of the run's systems.
has_system() {
	local s
	for s in "${SYSTEMS[@]}"; do [ "$s" = "$1" ] && return 0; done
	return 1
}

# daemon_pid_of MNT: the pid of the process whose arguments name MNT.
daemon_pid_of() {
	ps -eo pid=,args= | awk -v m="$1" '{ for (i = 2; i <= NF; i++)
		if ($i == m) { print $1; exit } }'
}

# wait_daemon_exit MNT: waits (at most 120 s) for MNT's daemon to exit.
wait_daemon_exit() {
	local pid=${DAEMON_PID[$1]:-} i
	[ -n "$pid" ] || return 0
	for ((i = 0; i < 1200; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$pid" 2>/dev/null &&
		echo "$BENCH_NAME: daemon $pid of $1 still running 120s after unmount" >&2
	unset "DAEMON_PID[$1]"
	return 0
}

# unmount_one MNT: unmounts (a lazy unmount as the last resort), every
# attempt under a timeout, and waits for the daemon.
unmount_one() {
	local mnt=$1 i
	mountpoint -q "$mnt" || {
		wait_daemon_exit "$mnt"
		return 0
	}
	for i in 1 2 3; do
		timeout 20 umount "$mnt" 2>/dev/null && break
		sleep 1
	done
	if mountpoint -q "$mnt"; then
		echo "$BENCH_NAME: $mnt busy, lazy unmount" >&2
		timeout 20 umount -l "$mnt" || true
	fi
	wait_daemon_exit "$mnt"
	return 0
}

drop_caches() {
	sync
	echo 3 >/proc/sys/vm/drop_caches
}

# median: the median of the numbers on stdin ("-" for none).
median() {
	tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ a[NR] = $1 }
		END { if (NR == 0) print "-"; else if (NR % 2) print a[(NR + 1) / 2];
		else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

# best_of WORKLOAD SYSTEM...: the better (lower) median of the given
# configurations of a peer
best_of() {
	local w=$1 best=- s
	shift
	for s in "$@"; do
		has_system "$s" || continue
		local v=${MED[$w,$s]}
		[ "$v" = - ] && continue
		if [ "$best" = - ] || [ "$(echo "$v < $best" | bc -l)" = 1 ]; then best=$v; fi
	done
	echo "$best"
}

ratio() { # peer-seconds smuxfs-seconds
	if [ "$1" = - ] || [ "$2" = - ]; then echo -; else
		printf '%.2f' "$(echo "$1 / $2" | bc -l)"
	fi
}
