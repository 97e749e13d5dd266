#!/usr/bin/env bash
# test_rolling_drain.sh - a rolling drain (drain a, undrain a, drain b) on
# a mirror of two file backends while a program keeps one file open and
# appends to it (a log): no append fails, the file reads back whole
# through the mount, and once b is undrained and the hints replayed both
# replicas hold every line. Twice: appending all along, and with the
# appender idle from before a's undrain until after b's drain (a reader
# of the log meanwhile), so the writer's first call after it meets b
# draining and a back. The open writer dropped a at its drain and
# never took it back while open, so at b's drain it had no replica left
# and every append failed (EIO) until the file was reopened.
. "$(dirname "$0")/lib.sh"

new_config "$T/c.conf" root
cfg_mux root mirror "a b"
cfg_file a "$T/a"
cfg_file b "$T/b"
M=$T/mnt
mount_smux "$T/c.conf" "$M"
CTL=$M/.smux/ctl

# the appender: one descriptor, a line every 20 ms, until told to stop;
# each line is written with one write(2), and a failed one is reported
python3 - "$M/log" "$T/stop" >"$T/appender.out" 2>&1 <<'PY' &
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
i, failed = 0, 0
while not os.path.exists(sys.argv[2]):
    if os.path.exists(sys.argv[2] + ".pause"):
        time.sleep(0.01)
        continue
    try:
        os.write(fd, b"line %06d\n" % i)
        i += 1
    except OSError as e:
        failed += 1
        print("append %d: %s" % (i, e), flush=True)
        if failed > 20:
            break
    time.sleep(0.02)
try:
    os.close(fd)
    print("close: ok", flush=True)
except OSError as e:
    print("close: %s" % e, flush=True)
print("lines %d failed %d" % (i, failed), flush=True)
PY
apid=$!

lines_now() { if [ -e "$M/log" ]; then wc -l <"$M/log"; else echo 0; fi; }
wait_lines() { # wait until N more lines than now are in the log
	local want=$(($(lines_now) + $1)) k
	for ((k = 0; k < 200; k++)); do
		[ "$(lines_now)" -ge "$want" ] && return 0
		kill -0 "$apid" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

wait_lines 10 || fail "the appender does not append"
rolling() { # $1: idle: the appender pauses across a's undrain and b's drain
	echo "drain $2" >"$CTL" || fail "drain $2"
	wait_lines 10 || fail "no appends while $2 is drained: $(cat "$T/appender.out")"
	[ "$1" = idle ] && { touch "$T/stop.pause"; sleep 0.2; }
	echo "undrain $2" >"$CTL" || fail "undrain $2"
	[ "$1" = idle ] || wait_lines 10 || fail "no appends after $2 is undrained: $(cat "$T/appender.out")"
	echo "drain $3" >"$CTL" || fail "drain $3"
	if [ "$1" = idle ]; then
		cat "$M/log" >/dev/null || fail "cat of the log with $3 drained"
		rm "$T/stop.pause"
	fi
	wait_lines 10 || fail "no appends while $3 is drained: $(cat "$T/appender.out")"
}
rolling busy a b
echo "undrain b" >"$CTL" || fail "undrain b"
rolling idle b a
echo "undrain a" >"$CTL" || fail "undrain a"
touch "$T/stop"
wait "$apid" || fail "the appender exited $?"
out=$(cat "$T/appender.out")
log "appender: $(echo "$out" | tr '\n' ';')"
echo "$out" | grep -q "^lines [0-9]* failed 0$" || fail "appends failed in the rolling drain: $out"
echo "$out" | grep -q "^close: ok$" || fail "close after the rolling drain: $out"
n=$(echo "$out" | sed -n 's/^lines \([0-9]*\) .*/\1/p')
python3 - "$M/log" "$n" <<'PY' || fail "the log through the mount is not whole"
import sys
want = b"".join(b"line %06d\n" % i for i in range(int(sys.argv[2])))
got = open(sys.argv[1], "rb").read()
if got != want:
    sys.exit("%d bytes, want %d" % (len(got), len(want)))
PY
repair_settled "$M" 20
cmp "$M/log" "$T/a/log" || fail "replica a differs from the mount"
cmp "$M/log" "$T/b/log" || fail "replica b differs from the mount"
unmount_smux "$M"
log "ok: $n lines"

# Three replicas, each drained, undrained and repaired in turn while a
# shell keeps a log open and appends a line every 5 ms (an operator's
# rolling maintenance, s41-t1): each rejoined replica kept the hint of
# the writes it had missed while drained, the copy that took it back
# into the writer notwithstanding, so after c's turn every replica had a
# hint for the log and none counted as holding its latest write: reads
# of it EIO and 3 hints pending, for good (also after a remount).
new_config "$T/c3.conf" root
cfg_mux root mirror "a3 b3 c3" cooldown=1s healthcheck_interval=1s
cfg_file a3 "$T/a3"
cfg_file b3 "$T/b3"
cfg_file c3 "$T/c3"
mount_smux "$T/c3.conf" "$M"
rm -f "$T/stop3"
(
	exec 3>>"$M/log3"
	i=0
	while [ ! -e "$T/stop3" ] && [ $i -lt 5000 ]; do
		echo "line $i" >&3 || echo "append $i failed"
		i=$((i + 1))
		sleep 0.005
	done
	exec 3>&-
	echo "lines $i"
) >"$T/writer3.out" 2>&1 &
wpid=$!
for r in a3 b3 c3; do
	sleep 1
	echo "drain $r" >"$CTL" || fail "drain $r"
	sleep 1
	echo "undrain $r" >"$CTL" || fail "undrain $r"
	echo repair >"$CTL" || fail "repair"
done
sleep 0.5
touch "$T/stop3"
wait "$wpid" || fail "the writer exited $?"
grep -q failed "$T/writer3.out" && fail "appends failed: $(grep failed "$T/writer3.out" | head -3)"
n=$(sed -n 's/^lines //p' "$T/writer3.out")
[ "$(wc -l <"$M/log3")" = "$n" ] ||
	fail "log3 through the mount: $(wc -l <"$M/log3" 2>&1), want $n lines ($(stats "$M" .pendingHints) hints pending)"
repair_settled "$M" 20
for r in a3 b3 c3; do
	cmp "$M/log3" "$T/$r/log3" || fail "replica $r differs from the mount"
done
unmount_smux "$M"
log "three replicas drained in turn: log3 ($n lines) whole on every replica, no hint left"

# A loop of `echo >> log4`, each append its own open (s44-t1): after a's
# undrain every open left a out (its hint for log4 pending) and the
# repair never found a moment without a writer, so at b's drain every
# append failed (EIO) until the loop stopped. The open of an in-place
# writer now replays the key's pending hint first.
new_config "$T/c4.conf" root
cfg_mux root mirror "a4 b4"
cfg_file a4 "$T/a4"
cfg_file b4 "$T/b4"
mount_smux "$T/c4.conf" "$M"
rm -f "$T/stop4"
(
	i=0 failed=0
	while [ ! -e "$T/stop4" ] && [ $i -lt 100000 ]; do
		echo "line $i" >>"$M/log4" 2>/dev/null || failed=$((failed + 1))
		i=$((i + 1))
	done
	echo "lines $i failed $failed"
) >"$T/writer4.out" 2>&1 &
wpid=$!
sleep 0.5
echo "drain a4" >"$CTL" || fail "drain a4"
sleep 1
echo "undrain a4" >"$CTL" || fail "undrain a4"
sleep 3
h=$(stats "$M" .pendingHints)
echo "drain b4" >"$CTL" || fail "drain b4"
sleep 1.5
echo "undrain b4" >"$CTL" || fail "undrain b4"
sleep 0.5
touch "$T/stop4"
wait "$wpid" || fail "the appending loop exited $?"
out=$(cat "$T/writer4.out")
log "appending loop: $out; $h hints pending 3 s after a4's undrain"
case $out in
*" failed 0") ;;
*) fail "appends failed at b4's drain: $out ($h hints pending before it)" ;;
esac
repair_settled "$M" 20
cmp "$T/a4/log4" "$T/b4/log4" || fail "a4 and b4 differ"
unmount_smux "$M"
log "a loop of appends through a rolling drain: none failed"

