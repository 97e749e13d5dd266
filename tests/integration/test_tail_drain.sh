#!/usr/bin/env bash
# test_tail_drain.sh - `tail -f` of a mirror's log keeps following it
# through a drain and an undrain of each replica (s45-t2). A reader reads
# one replica; when that one is drained it moves to another, which must
# hold the version it reads - but the log was appended through the mount
# since, in place, so the version it opened is no replica's any more, and
# the first read after the drain answered "Stale file handle": tail died.
# A reader of a file written in place through the mount now moves to the
# replica that holds what the file is now.
. "$(dirname "$0")/lib.sh"

new_config "$T/c.conf" m
cfg_mux m mirror "r1 r2"
cfg_file r1 "$T/r1"
cfg_file r2 "$T/r2"
M=$T/mnt
mount_smux "$T/c.conf" "$M"

echo "line 0" >"$M/log"
tail -f "$M/log" >"$T/tail.out" 2>"$T/tail.err" &
tailpid=$!
sleep 0.5
n=0
append() {
	local i
	for i in $(seq 1 5); do
		n=$((n + 1))
		echo "line $n" >>"$M/log"
		sleep 0.1
	done
}
append
for step in "drain r1" "undrain r1" "drain r2" "undrain r2"; do
	echo "$step" >"$M/.smux/ctl"
	append
done
for _ in $(seq 1 40); do
	grep -qx "line $n" "$T/tail.out" && break
	sleep 0.25
done
alive=yes
kill -0 "$tailpid" 2>/dev/null || alive=no
kill "$tailpid" 2>/dev/null
wait "$tailpid" 2>/dev/null || true
[ "$alive" = yes ] || fail "tail -f died: $(cat "$T/tail.err")"
seq 0 "$n" | sed 's/^/line /' >"$T/tail.want"
cmp -s "$T/tail.out" "$T/tail.want" ||
	fail "tail -f saw: $(tr '\n' '|' <"$T/tail.out") err: $(cat "$T/tail.err")"
[ ! -s "$T/tail.err" ] || fail "tail -f said: $(cat "$T/tail.err")"
log "tail -f followed $n appends through two drains"

# a reader that stays open (no reopen by tail): read, drain, append, read
timeout 60 python3 - "$M" >"$T/py.out" 2>&1 <<'PY' || fail "reader: $(cat "$T/py.out")"
import os, sys
m = sys.argv[1]
p = m + "/log2"
open(p, "w").write("A\n")
fd = os.open(p, os.O_RDONLY)
assert os.read(fd, 100) == b"A\n"
open(m + "/.smux/ctl", "w").write("drain r1\n")
open(p, "a").write("B\n")
got = os.read(fd, 100)
open(m + "/.smux/ctl", "w").write("undrain r1\n")
assert got == b"B\n", got
PY
repair_settled "$M" 30
unmount_smux "$M"
cmp -s "$T/r1/log" "$T/r2/log" || fail "the replicas of log differ"
