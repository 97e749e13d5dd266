#!/usr/bin/env bash
# test_sync.sh - directory durability on demand, on a mirror of two file
# backends, counting the daemon's fsync/fdatasync calls with strace:
#   - renames and mkdirs through the mount pay no fsync at all (before:
#     one per directory per replica per call);
#   - fsync(2) of a directory through the mount (coreutils `sync DIR`, FUSE
#     fsyncdir) reaches every replica: at least one fsync each, and
#     succeeds on the root and a subdirectory;
#   - fsync of a file still syncs it (the program asked).
. "$(dirname "$0")/lib.sh"

command -v strace >/dev/null || fail "strace is missing (scripts/install-deps.sh)"

M=$T/mnt
new_config "$T/sync.conf" m
cfg_mux m mirror "r1 r2" backend_timeout=10s
cfg_file r1 "$T/r1"
cfg_file r2 "$T/r2"
mount_smux "$T/sync.conf" "$M"
pid=${_SMUX_FG_PIDS[0]%%:*}

STRACE_PID=
# trace_start FILE: strace every thread of the daemon (and the bulkhead
# workers it starts) for fsync and fdatasync calls, into FILE.
trace_start() {
	local out=$1 i
	strace -f -qq -y -e trace=fsync,fdatasync,syncfs -p "$pid" -o "$out" \
		2>"$out.err" &
	STRACE_PID=$!
	# attached once the daemon shows as traced
	for ((i = 0; i < 100; i++)); do
		grep -q '^TracerPid:[[:space:]]*[1-9]' /proc/"$pid"/status && break
		sleep 0.05
	done
	grep -q '^TracerPid:[[:space:]]*[1-9]' /proc/"$pid"/status ||
		fail "strace did not attach: $(cat "$out.err")"
	sleep 0.3 # the other threads
}
trace_stop() {
	kill -INT "$STRACE_PID" 2>/dev/null || true
	wait "$STRACE_PID" 2>/dev/null || true
	STRACE_PID=
}
trap 'rc=$?; [ -z "$STRACE_PID" ] || kill -KILL "$STRACE_PID" 2>/dev/null; _smux_exit $rc' EXIT

# nsyncs TRACE: the calls on the replicas' files and directories (strace
# -y names each descriptor's path). The hint journal in state_dir is left
# out: the creates above end intents there, and its compaction (fsync,
# fdatasync, fsync of state_dir) may run late, inside the trace (an ASan
# lane of make check counted 6 such calls as the renames').
nsyncs() {
	grep -E '(fsync|fdatasync|syncfs)\(' "$1" |
		grep -cF -e "<$T/r1/" -e "<$T/r1>" -e "<$T/r2/" -e "<$T/r2>" || true
}

mkdir "$M/d"
for i in $(seq 1 100); do echo "$i" >"$M/d/f$i"; done
sync "$M/d" # settle what the creates left

log "100 renames and 20 mkdirs, traced"
trace_start "$T/t1"
for i in $(seq 1 100); do mv "$M/d/f$i" "$M/d/g$i"; done
for i in $(seq 1 20); do mkdir "$M/d/sub$i"; done
mv "$M/d/g1" "$M/d/sub1/g1" # across directories
trace_stop
n=$(nsyncs "$T/t1")
log "fsync calls: $n"
[ "$n" -eq 0 ] || { sed -n 1,10p "$T/t1" >&2; fail "$n fsync calls for renames and mkdirs (want 0)"; }
[ "$(cat "$M/d/g50")" = 50 ] || fail "renamed content"
[ "$(cat "$M/d/sub1/g1")" = 1 ] || fail "renamed across directories"
for r in r1 r2; do
	[ -f "$T/$r/d/g100" ] && [ -d "$T/$r/d/sub20" ] || fail "$r missed a rename or mkdir"
done

log "fsyncdir of d and of the root, traced"
trace_start "$T/t2"
sync "$M/d"
sync "$M/d/sub1"
sync "$M"
trace_stop
n=$(nsyncs "$T/t2")
log "fsync calls: $n"
# three directories on two replicas
[ "$n" -ge 6 ] || { cat "$T/t2" >&2; fail "fsyncdir made $n fsync calls (want >= 6)"; }

log "fsync of a file, traced"
trace_start "$T/t3"
dd if=/dev/zero of="$M/d/durable" bs=64k count=4 conv=fsync status=none
trace_stop
n=$(nsyncs "$T/t3")
log "fsync calls: $n"
[ "$n" -ge 2 ] || { cat "$T/t3" >&2; fail "fsync of a file made $n fsync calls (want >= 2)"; }

unmount_smux "$M"
