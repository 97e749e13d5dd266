#!/usr/bin/env bash
# test_stop_open.sh - the daemon stopped (SIGTERM) while programs still
# have files open on the mount: the kernel never releases those handles,
# so the daemon's teardown frees them itself and commits what is still
# open. It must exit 0 (no crash: under ASan a use of a freed handle is a
# report) and leave the replicas with what was written.
#
# On a mirror of two file backends (writes go through the daemon): a
# clean reader open (on the readers' list that renames and commits walk),
# a writer with written, unclosed data, then SIGTERM to the daemon.
# Found by the test harness: a test killed at its time limit left the
# daemon of a posix_diff run with open handles, and its teardown died in
# readers_written on a handle freed just before (heap-use-after-free).
. "$(dirname "$0")/lib.sh"

M=$T/mnt
A=$T/a
B=$T/b
new_config "$T/stop.conf" root
cfg_mux root mirror "a b"
cfg_file a "$A"
cfg_file b "$B"
mount_smux "$T/stop.conf" "$M"

echo hello >"$M/r"
# one program holds both: a reader that read, and a writer whose data
# no close(2) has flushed yet (a close of a dup would commit it)
python3 -c '
import os, sys, time
r = os.open(sys.argv[1] + "/r", os.O_RDONLY)
assert os.read(r, 100) == b"hello\n"
w = os.open(sys.argv[1] + "/w", os.O_WRONLY | os.O_CREAT, 0o644)
os.write(w, b"data\n")
open(sys.argv[2], "w").close()
time.sleep(120)
' "$M" "$T/holding" &
holder=$!
for ((i = 0; i < 100; i++)); do
	[ -e "$T/holding" ] && break
	sleep 0.1
done
[ -e "$T/holding" ] || fail "the holder did not open its files"

take_fg_daemon "$M"
pid=$FG_PID
kill -TERM "$pid"
_smux_wait_pid "$pid" 60 || fail "the daemon did not exit within 60 s of SIGTERM"
rc=0
wait "$pid" || rc=$?
kill -KILL "$holder" 2>/dev/null
wait "$holder" 2>/dev/null || true
[ "$rc" -eq 0 ] || fail "the daemon stopped under open files exited with status $rc"
_smux_umount "$M" || true
_smux_forget_mount "$M"
check_sanitizers
for d in "$A" "$B"; do
	[ "$(cat "$d/w")" = data ] || fail "$d/w: '$(cat "$d/w")' after the stop"
	[ "$(cat "$d/r")" = hello ] || fail "$d/r: '$(cat "$d/r")' after the stop"
done
log "ok"
