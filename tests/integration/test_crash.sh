#!/usr/bin/env bash
# test_crash.sh - what a crash of the daemon (kill -9) leaves behind, on a
# mirror of two file backends:
#   - a 256 MiB dd through the mount killed mid-way (written in place or
#     into a temp file, whichever the daemon does): no temp file is left
#     beside the user's files in either backend directory (find -name
#     '.smux-tmp*' outside the work folder .smuxfs-tmp is empty), so rm of
#     the files then rmdir of their directory works through the mount and
#     leaves nothing in the backends;
#   - the remount removes the leftovers from the work folder (the crash's
#     own, plus one planted in each as a cut-short put would leave it):
#     empty after the mount, the daemon logs how many it removed;
#   - a user file whose name starts like a temp file (.smux-tmp.user) is
#     listed and removed like any other; the work folder is never listed
#     and cannot be made through the mount;
#   - the write intent the dead daemon left is reconciled at the remount:
#     the replicas of the file being written (one made to differ behind
#     the mount, as if it had got further) end identical, from the copy
#     that got furthest, and the log has a storage-mux.reconciled event
#     naming the key;
#   - the same for an append loop (echo >> log) killed mid-way: no line
#     lost or reordered, the replicas identical.
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

# in_flight: some file in a backend is past 16 MiB: the write is under way
# (in place, or into a temp file not yet published).
in_flight() {
	find $DIRS -type f -size +16M -print | grep -q .
}

# cut_short NAME: no backend holds the whole big file (the kill came first).
cut_short() {
	local d f
	for d in $DIRS; do
		f=$d/$1/big.bin
		[ -f "$f" ] || continue
		[ "$(stat -c %s "$f")" -lt $((BIG_MB * 1048576)) ] || return 1
	done
	return 0
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
	in_flight || fail "$writer: nothing written past 16 MiB after 30 s"
	crash_smux "$M"
	wait "$wpid" 2>/dev/null || true # it fails: the mount went away
	cut_short "$name" || fail "$writer finished before the kill: nothing was crashed"

	log "behind the dead mount (work folder: $(work_entries | wc -l) temp file(s)):"
	find $DIRS \( -name '.smux-tmp*' -o -name big.bin \) -printf '  %p %s\n' >&2
	n=$(hidden_leftovers | wc -l)
	[ "$n" -eq 0 ] || fail "$n temp file(s) left beside user files: $(hidden_leftovers)"
	# what a put or a temp-file writer that the kill cut short leaves (an
	# in-place write leaves none): one more in each work folder, so the
	# sweep is seen whichever way the dd was written
	for d in $DIRS; do
		head -c 1M /dev/zero >"$d/.smuxfs-tmp/.smux-tmp.00000000deadbeef"
	done

	work_entries >"$T/leftovers"
	# one replica got further than the other before the kill
	echo "further" >>"$T/r2/$name/big.bin"

	mount_smux "$T/crash.conf" "$M"
	reconciled "$name/big.bin"
	# (the new daemon may be at work in the folder already: a repair
	# copying a replica; only the dead run's files must be gone)
	while read -r f; do
		[ ! -e "$f" ] || fail "leftover $f not swept at mount"
	done <"$T/leftovers"
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
	n=$(work_entries | wc -l)
	[ "$n" -eq 0 ] || fail "temp files left after a clean unmount: $(work_entries)"
}

# reconciled KEY: the replicas of KEY become identical after the remount
# and an event names KEY.
reconciled() {
	local key=$1 i
	for ((i = 0; i < 200; i++)); do
		grep -q "storage-mux.reconciled.*\"key\":\"$key\"" \
			"$T"/smuxfs.*.log && cmp -s "$T/r1/$key" "$T/r2/$key" && break
		sleep 0.1
	done
	grep -q "storage-mux.reconciled.*\"key\":\"$key\"" "$T"/smuxfs.*.log ||
		fail "no reconciled event names $key"
	cmp -s "$T/r1/$key" "$T/r2/$key" || fail "$key differs on the replicas"
	[ "$(tail -c 8 "$T/r1/$key")" = further ] ||
		fail "$key: not reconciled from the copy that got furthest"
}

crash_case dd-dir writer_dd

log "--- crash during an append loop"
mount_smux "$T/crash.conf" "$M"
mkdir "$M/ap"
(for i in $(seq 1 200000); do echo "line $i" >>"$M/ap/log" || exit 0; done) &
wpid=$!
for ((i = 0; i < 600; i++)); do
	[ -f "$T/r1/ap/log" ] && [ "$(wc -l <"$T/r1/ap/log")" -gt 300 ] && break
	sleep 0.05
done
crash_smux "$M"
wait "$wpid" 2>/dev/null || true
n=$(wc -l <"$T/r1/ap/log")
[ "$n" -gt 300 ] || fail "append loop: only $n lines before the kill"
echo "further" >>"$T/r2/ap/log"
mount_smux "$T/crash.conf" "$M"
reconciled ap/log
# every line that landed, in order, none lost in between
head -n -1 "$T/r1/ap/log" >"$T/ap-got"
seq 1 "$(wc -l <"$T/ap-got")" | sed 's/^/line /' >"$T/ap-want"
cmp -s "$T/ap-got" "$T/ap-want" || fail "append loop: lines lost or reordered"
rm -r "$M/ap"

# files created 0644 and still open at the crash keep 0644: the create made
# them 0600 and the mode came at the commit, so after the kill they were
# 0600 on every replica (an sqlite journal left by a crash, s41-t2)
python3 - "$M" "$T/opened" <<'PY' &
import os, sys, time
m = sys.argv[1]
os.umask(0o022)
a = os.open(m + "/open-log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
os.write(a, b"line 1\n")
b = os.open(m + "/open-empty", os.O_RDWR | os.O_CREAT, 0o644)
open(sys.argv[2], "w").close()
time.sleep(60)
PY
opener=$!
for ((i = 0; i < 100; i++)); do [ -e "$T/opened" ] && break; sleep 0.1; done
[ -e "$T/opened" ] || fail "the files were not created"
crash_smux "$M"
kill "$opener" 2>/dev/null || true
wait "$opener" 2>/dev/null || true
mount_smux "$T/crash.conf" "$M"
for f in open-log open-empty; do
	for d in "$M" $DIRS; do
		[ "$(stat -c %a "$d/$f")" = 644 ] || fail "$d/$f after the crash: mode $(stat -c %a "$d/$f"), want 644"
	done
	rm "$M/$f"
done
unmount_smux "$M"
[ -z "$(ls -A "$T/r1" | grep -v '^.smuxfs-tmp$')" ] || fail "r1 not empty: $(ls -A "$T/r1")"
