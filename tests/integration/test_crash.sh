#!/usr/bin/env bash
# test_crash.sh - what a crash of the daemon (kill -9) leaves behind, on a
# mirror of two file backends:
#   - a 256 MiB dd through the mount killed mid-way: no temp file is left
#     beside the user's files in either backend directory (find -name
#     '.smux-tmp*' outside the work folder .smuxfs-tmp is empty), so rm of
#     the files then rmdir of their directory works through the mount and
#     leaves nothing in the backends;
#   - the remount removes the leftovers from the work folder (empty after
#     the mount, the daemon logs how many it removed);
#   - a user file whose name starts like a temp file (.smux-tmp.user) is
#     listed and removed like any other; the work folder is never listed
#     and cannot be made through the mount.
# Each scenario is one function over a fresh mount (crash_case NAME WRITER):
# a new crash scenario (an append loop, in-place writes) is one more call.
. "$(dirname "$0")/lib.sh"

BIG_MB=${SMUX_IT_BIG_MB:-256}
M=$T/mnt
DIRS="$T/r1 $T/r2"

new_config "$T/crash.conf" m
cfg_mux m mirror "r1 r2" backend_timeout=10s
cfg_file r1 "$T/r1"
cfg_file r2 "$T/r2"

# hidden_leftovers: temp files anywhere in the backends but the work folder
# (the user's own .smux-tmp.user is no temp file).
hidden_leftovers() {
	find $DIRS -name .smuxfs-tmp -prune -o -name '.smux-tmp*' \
		! -name .smux-tmp.user -print
}

# work_entries: what the work folders hold.
work_entries() { find $DIRS -path '*/.smuxfs-tmp/*' -print; }

# writer_dd NAME: the big write, in the background; prints its pid.
writer_dd() {
	dd if=/dev/zero of="$M/$1/big.bin" bs=1M count="$BIG_MB" \
		status=none 2>/dev/null &
	echo $!
}

# in_flight DIR: some temp file in a backend is past 16 MiB (the write is
# under way and has not been published).
in_flight() {
	find $DIRS -name '.smux-tmp*' -size +16M -print | grep -q .
}

# crash_case NAME WRITER: mounts, makes directory NAME with a finished file
# and a user's .smux-tmp.user, starts WRITER NAME, kills the daemon while
# the write is in flight, remounts and checks what is left.
crash_case() {
	local name=$1 writer=$2 wpid i d n
	log "--- crash during $writer"
	mount_smux "$T/crash.conf" "$M"
	mkdir "$M/$name"
	echo done >"$M/$name/finished.txt"
	echo user >"$M/$name/.smux-tmp.user"
	wpid=$($writer "$name")
	for ((i = 0; i < 600; i++)); do
		in_flight && break
		kill -0 "$wpid" 2>/dev/null || fail "$writer ended before the crash"
		sleep 0.05
	done
	in_flight || fail "$writer: no temp file past 16 MiB after 30 s"
	crash_smux "$M"
	wait "$wpid" 2>/dev/null || true # it fails: the mount went away

	log "behind the dead mount:"
	find $DIRS -name '.smux-tmp*' -printf '  %p %s\n' >&2
	n=$(hidden_leftovers | wc -l)
	[ "$n" -eq 0 ] || fail "$n temp file(s) left beside user files: $(hidden_leftovers)"
	work_entries | grep -q . || fail "the crash left no temp file in the work folder (the test did not crash a write)"

	mount_smux "$T/crash.conf" "$M"
	n=$(work_entries | wc -l)
	[ "$n" -eq 0 ] || fail "work folder not swept at mount: $(work_entries)"
	grep -q "removed [0-9]* leftover temp" "$T"/smuxfs.*.log ||
		fail "no log line names the sweep"
	[ "$(cat "$M/$name/finished.txt")" = done ] || fail "finished.txt lost"
	ls -A "$M/$name" | grep -qx '.smux-tmp.user' ||
		fail ".smux-tmp.user is not listed: $(ls -A "$M/$name")"
	[ "$(cat "$M/$name/.smux-tmp.user")" = user ] || fail ".smux-tmp.user content"
	if ls -A "$M" | grep -qx .smuxfs-tmp; then
		fail "the work folder is listed at the mount root"
	fi
	expect_fail "" mkdir "$M/.smuxfs-tmp"
	rm -f "$M/$name"/* "$M/$name"/.smux-tmp.user
	rmdir "$M/$name" || fail "rmdir $name after the crash: $(ls -A "$M/$name" 2>&1)"
	for d in $DIRS; do
		[ ! -e "$d/$name" ] || fail "$d/$name still there: $(ls -A "$d/$name")"
	done
	unmount_smux "$M"
}

crash_case dd-dir writer_dd
