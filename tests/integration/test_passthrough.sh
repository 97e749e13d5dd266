#!/usr/bin/env bash
# test_passthrough.sh - FUSE passthrough (src/fs/passthrough.c): on a tree
# of one file backend the kernel reads and writes files written in place
# itself, and everything a program sees stays as on a local disk.
#
# Counted from .smux/metrics (smux_fuse_requests_total{op="write"}), so
# the test fails where the writes still reach the daemon:
#   - 300 x `echo >> log`: no WRITE request, the log registered with the
#     kernel once, not per append (smux_fuse_passthrough_backings_total),
#     the content on the mount and in the backend directory, and the size
#     `stat` shows, as written;
#   - a file written by dd (64 MiB, conv=fsync) and through mmap (python
#     mmap of an open file): no WRITE request, identical in the backend;
#   - fsync(2) after writes made by the kernel still syncs the file (the
#     daemon's fdatasync, seen by strace, once per fsync);
#   - a descriptor open for writing, then `cat` of the same name, more
#     writes, `cat` again: the reader sees each write; an O_TRUNC open
#     (`echo new > f`) while both are open empties the file for both;
#   - a reader open first (its pages cached by the kernel): the writes
#     after it go through the daemon (the kernel forbids mixing the two
#     on one file) and the reader reads them;
#   - a hard link read while the other name is written: sees the writes;
#   - a file unlinked while open keeps taking writes through its
#     descriptor; a set-uid file is not passed through (its writes reach
#     the daemon, which clears set-id bits as the kernel would), nor is a
#     log appended in a loop once it is made set-uid (through the mount or
#     behind it); no file stays registered with the kernel once closed;
#   - `passthrough = off`: every write reaches the daemon again;
#   - a mirror of two file backends (no writer of it can hand over one
#     file): passthrough is not asked for, and every write reaches the
#     daemon.
. "$(dirname "$0")/lib.sh"

M=$T/mnt
A=$T/a
CONF=$T/pt.conf

new_config "$CONF" root
cfg_file root "$A"
mount_smux "$CONF" "$M"
grep -q "FUSE passthrough" "$T/smuxfs.$_SMUX_NLOG.log" ||
	fail "the daemon did not get FUSE passthrough (kernel >= 6.9 with CONFIG_FUSE_PASSTHROUGH, as root)"

# writes: WRITE requests the kernel sent so far
writes() {
	sed -n 's/^smux_fuse_requests_total{op="write"} //p' "$M/.smux/metrics" |
		grep . || echo 0
}
expect() { [ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"; }

# backings: files registered with the kernel for passthrough so far
backings() {
	sed -n 's/^smux_fuse_passthrough_backings_total //p' "$M/.smux/metrics" |
		grep . || echo 0
}

log "append loop"
w0=$(writes)
b0=$(backings)
for i in $(seq 1 300); do echo "line $i" >>"$M/log"; done
expect "WRITE requests of 300 appends" "$(($(writes) - w0))" 0
# the writer kept between the appends keeps its file registered: a
# registration per open would be a dup, fstat and two ioctls per append
# (a loop that pauses past the time a writer is kept registers again)
b=$(($(backings) - b0))
log "300 appends: $b registrations of the log"
[ "$b" -ge 1 ] && [ "$b" -le 30 ] ||
	fail "300 appends registered the log $b times (1 to 30 wanted)"
# and none stays registered (a registration holds its file open) once the
# log is closed and its writer no longer kept
registered() {
	sed -n 's/^smux_fuse_passthrough_backings //p' "$M/.smux/metrics"
}
for i in $(seq 1 100); do
	[ "$(registered)" = 0 ] && break
	sleep 0.1
done
expect "files registered 10 s after the appends" "$(registered)" 0
seq 1 300 | sed 's/^/line /' >"$T/want"
cmp "$M/log" "$T/want" || fail "the log through the mount"
cmp "$A/log" "$T/want" || fail "the log in the backend directory"
expect "size of the log" "$(stat -c %s "$M/log")" "$(stat -c %s "$T/want")"

log "dd and mmap"
w0=$(writes)
dd if=/dev/urandom of="$T/big" bs=1M count=64 status=none
dd if="$T/big" of="$M/big" bs=1M conv=fsync status=none
cmp "$A/big" "$T/big" || fail "dd's file in the backend directory"
cmp "$M/big" "$T/big" || fail "dd's file through the mount"
python3 - "$M/big" <<'EOF'
import mmap, sys
with open(sys.argv[1], "r+b") as f:
    m = mmap.mmap(f.fileno(), 0)
    m[4096:4096 + 11] = b"hello, mmap"
    m.flush()
    m.close()
EOF
printf 'hello, mmap' | dd of="$T/big" bs=1 seek=4096 conv=notrunc status=none
cmp "$A/big" "$T/big" || fail "the mmap write in the backend directory"
expect "WRITE requests of dd and mmap" "$(($(writes) - w0))" 0

log "fsync syncs what the kernel wrote"
pid=$(daemon_pids_for "$M" | head -1)
[ -n "$pid" ] || fail "no daemon pid"
strace -f -qq -e trace=fdatasync,fsync -p "$pid" -o "$T/strace" &
spid=$!
sleep 1
python3 - "$M/synced" <<'EOF'
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
for part in (b"first\n", b"second\n"):
    os.write(fd, part)
    os.fsync(fd)
os.close(fd)
EOF
sleep 0.5
kill "$spid"
wait "$spid" 2>/dev/null || true
n=$(grep -c 'fdatasync(' "$T/strace" || true)
[ "$n" -ge 2 ] || fail "two fsyncs of passed-through writes made $n fdatasync(s) in the daemon"
expect "synced file" "$(cat "$A/synced")" "$(printf 'first\nsecond')"

log "writer then readers of the same name"
w0=$(writes)
exec 4>>"$M/shared"
echo one >&4
expect "cat after one write" "$(cat "$M/shared")" one
echo two >&4
expect "cat after two" "$(cat "$M/shared")" "$(printf 'one\ntwo')"
exec 3<"$M/shared"
echo new >"$M/shared"
expect "cat after O_TRUNC" "$(cat "$M/shared")" new
expect "the reader after O_TRUNC" "$(cat <&3)" new
exec 3<&- 4>&-
expect "WRITE requests of the shared file" "$(($(writes) - w0))" 0
expect "the shared file in the backend" "$(cat "$A/shared")" new

log "a reader first: writes through the daemon"
echo start >"$M/cached"
exec 3<"$M/cached"
expect "first read" "$(head -c 6 <&3)" start
w0=$(writes)
echo more >>"$M/cached"
[ "$(($(writes) - w0))" -ge 1 ] ||
	fail "a write while a cached reader is open did not reach the daemon"
expect "the reader reads on" "$(cat <&3)" more
exec 3<&-

log "hard link, unlinked file, set-uid file"
echo a >"$M/l1"
ln "$M/l1" "$M/l2"
exec 4>>"$M/l1"
echo b >&4
expect "the other name" "$(cat "$M/l2")" "$(printf 'a\nb')"
exec 4>&-
exec 4>"$M/gone"
rm "$M/gone"
echo still >&4 || fail "write to an unlinked file"
exec 4>&-
echo x >"$M/suid"
chmod 4755 "$M/suid"
w0=$(writes)
echo y >>"$M/suid"
[ "$(($(writes) - w0))" -ge 1 ] || fail "a set-uid file was passed through"
# a log appended in a loop (its writer kept with its file registered),
# then made set-uid through the mount or behind it: its next append is
# not passed through on the registration kept
for how in mount backend; do
	for i in $(seq 1 20); do echo "$i" >>"$M/suid-$how"; done
	sleep 0.1 # the last close's release is in
	if [ $how = mount ]; then
		chmod 4755 "$M/suid-$how"
	else
		chmod 4755 "$A/suid-$how"
	fi
	w0=$(writes)
	echo z >>"$M/suid-$how"
	[ "$(($(writes) - w0))" -ge 1 ] ||
		fail "a log made set-uid ($how) was passed through"
done
# nothing stays registered once every file is closed
for i in $(seq 1 100); do
	[ "$(registered)" = 0 ] && break
	sleep 0.1
done
expect "files registered at the end" "$(registered)" 0

unmount_smux "$M"

log "passthrough = off"
new_config "$CONF" root "passthrough=off"
cfg_file root "$A"
mount_smux "$CONF" "$M"
w0=$(writes)
for i in $(seq 1 20); do echo "off $i" >>"$M/log"; done
[ "$(($(writes) - w0))" -ge 20 ] ||
	fail "passthrough = off: $(($(writes) - w0)) WRITE requests for 20 appends"
expect "lines after both mounts" "$(wc -l <"$A/log")" 320
unmount_smux "$M"

log "a mirror"
new_config "$CONF" root
cfg_mux root mirror "a b"
cfg_file a "$A"
cfg_file b "$T/b"
mount_smux "$CONF" "$M"
grep -q "FUSE passthrough" "$T/smuxfs.$_SMUX_NLOG.log" &&
	fail "a mirror's daemon says it passes files through"
w0=$(writes)
for i in $(seq 1 20); do echo "mirror $i" >>"$M/mlog"; done
[ "$(($(writes) - w0))" -ge 20 ] ||
	fail "mirror: $(($(writes) - w0)) WRITE requests for 20 appends"
expect "passthrough opens on a mirror" \
	"$(sed -n 's/^smux_fuse_passthrough_opens_total //p' "$M/.smux/metrics")" 0
cmp "$A/mlog" "$T/b/mlog" || fail "mirror: the replicas differ"
unmount_smux "$M"
log "ok"
