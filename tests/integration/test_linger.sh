#!/usr/bin/env bash
# test_linger.sh - writers kept between opens (src/fs/linger.c): on a tree
# of one file backend, the writer of `echo >> log` stays open a moment
# after its close and the next open of the name takes it back, but only
# while the name still holds that file. What a program sees must be what a
# local disk shows:
#   - the daemon holds the file open right after an append (the writer is
#     kept), and lets it go by itself shortly after (it expires);
#   - behind the mount, the log moved away and a new one made (logrotate's
#     way) between two appends, or while a descriptor of it is open for
#     appending: the next append lands in the new file, never in the
#     moved one (20 and 10 rounds; each waits for the RELEASE of the
#     close before it: an open that comes before that RELEASE shares the
#     open file, as said in docs/architecture.md);
#   - behind the mount, the log renamed over (10 rounds) or removed
#     between two appends: the append is not written into the file that
#     went;
#   - through the mount: unlink, rename over, rename of the directory, a
#     hard link, between two appends: each append lands where ext4 puts it;
#   - fsync(2) through a writer taken back still syncs (the daemon's
#     fdatasync, seen by strace);
#   - a file backend whose directory is on a FUSE filesystem (another
#     smuxfs here; NFS, SMB and the like alike): no writer is kept, and
#     the log says why;
#   - `.smux/ctl add` of a second member to a mux of one: the writer kept
#     from before (of the one member) is let go at once, not taken back;
#     a member on a FUSE filesystem added (then the local ones removed),
#     or made the one member by a reload: no writer kept from then on;
#   - unmount right after an append (a writer kept): clean.
. "$(dirname "$0")/lib.sh"

M=$T/mnt
A=$T/a
CONF=$T/linger.conf

new_config "$CONF" root
cfg_file root "$A"
mount_smux "$CONF" "$M"
pid=$(daemon_pids_for "$M" | head -1)
[ -n "$pid" ] || fail "no daemon pid"

expect() { [ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"; }
# RELEASE requests the daemon answered so far (.smux/metrics)
releases() {
	sed -n 's/^smux_fuse_requests_total{op="release"} //p' "$M/.smux/metrics" |
		grep . || echo 0
}
# waits until the daemon answered $1 RELEASEs in all (a close's RELEASE
# comes after close(2) returned)
released() {
	local i
	for ((i = 0; i < 500; i++)); do
		[ "$(releases)" -ge "$1" ] && return 0
		sleep 0.01
	done
	fail "no RELEASE $1 after 5 s (at $(releases))"
}
# the daemon has a descriptor of the backend file $1
holds() { find "/proc/$pid/fd" -lname "$1" 2>/dev/null | grep -q .; }

log "kept after an append, let go after"
seen=0
for i in $(seq 1 20); do
	echo "line $i" >>"$M/log"
	for _ in 1 2 3 4 5; do
		if holds "$A/log"; then
			seen=1
			break
		fi
		sleep 0.01
	done
	[ "$seen" = 1 ] && break
done
[ "$seen" = 1 ] || fail "the daemon never held the log open after an append"
gone=0
for _ in $(seq 1 50); do
	if ! holds "$A/log"; then
		gone=1
		break
	fi
	sleep 0.1
done
[ "$gone" = 1 ] || fail "the daemon still holds the log 5 s after the last append"
rm -f "$M/log"

# (a name per round: one removed behind the mount stays in the kernel's
# cache of names for entry_timeout, and an open of it then fails ENOENT)
log "behind the mount: moved away and made anew between two appends"
for r in $(seq 1 20); do
	n=$(releases)
	echo "old $r" >>"$M/log$r"
	echo "old $r again" >>"$M/log$r"
	released $((n + 2))
	mv "$A/log$r" "$A/log$r.1"
	echo "new $r" >"$A/log$r"
	echo "appended $r" >>"$M/log$r"
	expect "round $r: the moved log" "$(cat "$A/log$r.1")" "$(printf 'old %s\nold %s again' "$r" "$r")"
	expect "round $r: the new log" "$(cat "$A/log$r")" "$(printf 'new %s\nappended %s' "$r" "$r")"
	rm -f "$A/log$r" "$A/log$r.1"
done

log "behind the mount: moved away while the appender has it open"
for r in $(seq 1 10); do
	echo "old $r" >>"$M/open$r"
	exec 8>>"$M/open$r"
	echo "old $r again" >&8
	mv "$A/open$r" "$A/open$r.1"
	echo "new $r" >"$A/open$r"
	n=$(releases)
	exec 8>&- # its release: the writer may be kept
	released $((n + 1))
	echo "appended $r" >>"$M/open$r"
	expect "round $r: the moved log" "$(cat "$A/open$r.1")" "$(printf 'old %s\nold %s again' "$r" "$r")"
	expect "round $r: the new log" "$(cat "$A/open$r")" "$(printf 'new %s\nappended %s' "$r" "$r")"
	rm -f "$A/open$r" "$A/open$r.1"
done

log "behind the mount: renamed over between two appends"
for r in $(seq 1 10); do
	n=$(releases)
	echo "old $r" >>"$M/over$r"
	echo "old $r again" >>"$M/over$r"
	released $((n + 2))
	exec 7<"$A/over$r"
	echo "new $r" >"$A/tmp"
	mv "$A/tmp" "$A/over$r"
	echo "appended $r" >>"$M/over$r"
	expect "round $r: the replaced file" "$(cat <&7)" "$(printf 'old %s\nold %s again' "$r" "$r")"
	expect "round $r: the new file" "$(cat "$A/over$r")" "$(printf 'new %s\nappended %s' "$r" "$r")"
	exec 7<&-
	rm -f "$A/over$r"
done

log "behind the mount: removed between two appends"
for r in $(seq 1 10); do
	n=$(releases)
	echo "old $r" >>"$M/rm$r"
	echo "old $r again" >>"$M/rm$r"
	released $((n + 2))
	exec 7<"$A/rm$r" # what a writer kept would still write into
	rm -f "$A/rm$r"
	if echo "appended $r" >>"$M/rm$r" 2>/dev/null; then
		expect "round $r: the log made again" "$(cat "$A/rm$r")" "appended $r"
	fi
	expect "round $r: the removed file" "$(cat <&7)" "$(printf 'old %s\nold %s again' "$r" "$r")"
	exec 7<&-
	rm -f "$A/rm$r"
done

log "through the mount: unlink, rename over, hard link"
echo a >>"$M/log"
echo a2 >>"$M/log"
rm "$M/log"
echo b >>"$M/log"
expect "an append after rm" "$(cat "$M/log")" "b"
expect "an append after rm (backend)" "$(cat "$A/log")" "b"
echo c >>"$M/log"
echo x >"$M/new"
mv "$M/new" "$M/log"
echo d >>"$M/log"
expect "an append after mv over" "$(cat "$M/log")" "$(printf 'x\nd')"
expect "an append after mv over (backend)" "$(cat "$A/log")" "$(printf 'x\nd')"
echo e >>"$M/log"
ln "$M/log" "$M/log2"
echo f >>"$M/log"
expect "the other name of the log" "$(cat "$M/log2")" "$(printf 'x\nd\ne\nf')"
rm -f "$M/log" "$M/log2"

log "through the mount: the directory renamed between two appends"
mkdir "$M/d"
echo a >>"$M/d/log"
echo a2 >>"$M/d/log"
mv "$M/d" "$M/e"
if echo b >>"$M/d/log" 2>/dev/null; then
	fail "an append to d/log after mv d e succeeded"
fi
echo c >>"$M/e/log"
expect "the moved log" "$(cat "$M/e/log")" "$(printf 'a\na2\nc')"
mkdir "$M/d"
echo z >>"$M/d/log"
expect "a new d/log" "$(cat "$A/d/log")" "z"
expect "the moved log (backend)" "$(cat "$A/e/log")" "$(printf 'a\na2\nc')"

log "fsync through a writer taken back"
for i in 1 2 3; do echo "pre $i" >>"$M/synced"; done
strace -f -qq -e trace=fdatasync,fsync -p "$pid" -o "$T/strace" &
spid=$!
sleep 1
echo "pre 4" >>"$M/synced"
python3 - "$M/synced" <<'EOF'
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
os.write(fd, b"synced\n")
os.fsync(fd)
os.close(fd)
EOF
sleep 0.5
kill "$spid"
wait "$spid" 2>/dev/null || true
n=$(grep -c 'sync(' "$T/strace" || true)
[ "$n" -ge 1 ] || fail "fsync of a file appended to just before: no fdatasync in the daemon"
expect "the synced file" "$(tail -n 1 "$A/synced")" "synced"

# RELEASE requests the daemon of mount $1 answered so far
releases_of() {
	sed -n 's/^smux_fuse_requests_total{op="release"} //p' "$1/.smux/metrics" |
		grep . || echo 0
}
# kept_after_appends MNT PID FILE MNTFILE [WORD]: appends to MNTFILE five
# times, each time waiting for the RELEASE of its close (it comes after
# close(2) returned: until then the daemon holds the file whether it
# keeps writers or not); true when the daemon PID holds the backend file
# FILE after one
kept_after_appends() {
	local i k n
	for i in 1 2 3 4 5; do
		n=$(releases_of "$1")
		echo "${5:-more} $i" >>"$4"
		for ((k = 0; k < 500; k++)); do
			[ "$(releases_of "$1")" -gt "$n" ] && break
			sleep 0.01
		done
		find "/proc/$2/fd" -lname "$3" 2>/dev/null | grep -q . && return 0
	done
	return 1
}

log "a file backend on a FUSE filesystem: no writer kept"
# (another host's or daemon's renames there never reach inotify)
mkdir -p "$M/inner"
new_config "$T/inner.conf" root
cfg_file root "$M/inner"
mount_smux "$T/inner.conf" "$T/mnt2"
grep -q "writers are not kept between opens: $M/inner is not on a local disk" \
	"$T/smuxfs.$_SMUX_NLOG.log" || fail "no word of the writers not kept"
pid2=$(daemon_pids_for "$T/mnt2" | head -1)
if kept_after_appends "$T/mnt2" "$pid2" "$M/inner/log" "$T/mnt2/log" inner; then
	fail "a writer of a file on a FUSE filesystem was kept"
fi
expect "the inner log" "$(tail -n 1 "$M/inner/log")" "inner 5"
unmount_smux "$T/mnt2"

log "a member added: no writer of the mux before is kept"
# a failover mux of one member keeps writers (one copy in place); once
# `add` made it two, a writer kept from before (of the one member only)
# must not be taken back by the next open: the add lets every kept writer
# go at once, as a reload does
new_config "$T/one.conf" m
cfg_mux m failover "a1"
cfg_file a1 "$T/a1"
cfg_file b1 "$T/b1"
mount_smux "$T/one.conf" "$T/mnt3"
pid3=$(daemon_pids_for "$T/mnt3" | head -1)
# held right after an append (retried: a loaded machine may let the
# kept writer expire before the check)
added=0
for i in $(seq 1 20); do
	n=$(sed -n 's/^smux_fuse_requests_total{op="release"} //p' "$T/mnt3/.smux/metrics")
	echo "one $i" >>"$T/mnt3/log"
	for _ in $(seq 1 100); do
		[ "$(sed -n 's/^smux_fuse_requests_total{op="release"} //p' "$T/mnt3/.smux/metrics")" -gt "${n:-0}" ] && break
		sleep 0.005
	done
	find "/proc/$pid3/fd" -lname "$T/a1/log" 2>/dev/null | grep -q . || continue
	echo "add b1" >"$T/mnt3/.smux/ctl" || fail "add b1 failed"
	added=1
	break
done
[ "$added" = 1 ] || fail "the daemon never held the log open after an append (one member)"
if find "/proc/$pid3/fd" -lname "$T/a1/log" 2>/dev/null | grep -q .; then
	fail "a writer kept before add b1 is still held after it"
fi
echo "two" >>"$T/mnt3/log"
expect "the log after the add" "$(tail -n 1 "$T/mnt3/log")" "two"

# held_after_appends PID FILE MNTFILE: appends to MNTFILE a few times;
# true when the daemon PID then holds the backend file FILE
held_after_appends() {
	local i
	for i in 1 2 3 4 5; do
		echo "more $i" >>"$3"
		find "/proc/$1/fd" -lname "$2" 2>/dev/null | grep -q . && return 0
		sleep 0.01
	done
	return 1
}

log "a member on a FUSE filesystem added, the local ones removed: no writer kept"
mkdir -p "$M/r1"
cfg_file r1 "$M/r1"
echo "add r1" >"$T/mnt3/.smux/ctl" || fail "add r1 failed"
# r1 is filled from the others first (its resync hint), then they go
for _ in $(seq 1 100); do
	[ "$(stats "$T/mnt3" .pendingHints)" = 0 ] && break
	sleep 0.1
done
[ "$(stats "$T/mnt3" .pendingHints)" = 0 ] || fail "r1 not filled 10 s after add r1"
echo "remove a1" >"$T/mnt3/.smux/ctl" || fail "remove a1 failed"
echo "remove b1" >"$T/mnt3/.smux/ctl" || fail "remove b1 failed"
if kept_after_appends "$T/mnt3" "$pid3" "$M/r1/rlog" "$T/mnt3/rlog"; then
	fail "a writer of a file on a FUSE filesystem was kept (member added)"
fi
expect "the log on r1" "$(tail -n 1 "$M/r1/rlog")" "more 5"
grep -q "writers are not kept between opens any more: $M/r1 is not on a local disk" \
	"$T/smuxfs.$_SMUX_NLOG.log" || fail "no word of the writers not kept after add r1"
unmount_smux "$T/mnt3"

log "a reload that makes the one member a FUSE filesystem's: no writer kept"
new_config "$T/two.conf" m
cfg_mux m failover "a2"
cfg_file a2 "$T/a2"
mount_smux "$T/two.conf" "$T/mnt4"
pid4=$(daemon_pids_for "$T/mnt4" | head -1)
held_after_appends "$pid4" "$T/a2/log" "$T/mnt4/log" ||
	fail "the daemon never held the log open after an append (a2)"
mkdir -p "$M/r2"
new_config "$T/two.conf" m
cfg_mux m failover "r2"
cfg_file r2 "$M/r2"
echo "reload" >"$T/mnt4/.smux/ctl" || fail "reload to r2 failed"
# (a new name: the old log's latest write is on a2, which went)
if kept_after_appends "$T/mnt4" "$pid4" "$M/r2/log2" "$T/mnt4/log2"; then
	fail "a writer of a file on a FUSE filesystem was kept (reload)"
fi
expect "the log on r2" "$(tail -n 1 "$M/r2/log2")" "more 5"
unmount_smux "$T/mnt4"

log "unmount right after an append"
echo last >>"$M/synced"
unmount_smux "$M"
expect "the last append" "$(tail -n 1 "$A/synced")" "last"
log "ok"
