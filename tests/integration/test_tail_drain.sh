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

# A reader opened while the file's writer was still open but had nothing
# left to commit (tail -f started while the release of the last `echo >`
# was on its way): it shared the writer's open file, which kept the
# writer - and its hold on the key - open for as long as the reader was;
# a replica's hint for the file then waited for the reader's close
# (s45-t3: pendingHints 1 for good while tail ran). The reader now reads
# the stored file, and the hint replays while it is open.
timeout 60 python3 - "$M" <<'PY' || fail "a hint waited for a reader of the log (pendingHints $(stats "$M" .pendingHints))"
import json, os, sys, time
m = sys.argv[1]
p = m + "/log3"
def ctl(c):
    with open(m + "/.smux/ctl", "w") as f:
        f.write(c + "\n")
w = open(p, "a")
w.write("A\n"); w.flush(); os.fsync(w.fileno())  # committed, still open
r = os.open(p, os.O_RDONLY)  # the reader, opened now
w.close()
ctl("drain r1")
with open(p, "a") as a:
    a.write("B\n")
ctl("undrain r1")
for _ in range(50):
    ctl("repair")
    if json.load(open(m + "/.smux/stats"))["pendingHints"] == 0:
        break
    time.sleep(0.2)
else:
    sys.exit("the hint of log3 is still pending with its reader open")
got = os.read(r, 100)
os.close(r)
assert got == b"A\nB\n", got
PY
cmp -s "$T/r1/log3" "$T/r2/log3" || fail "the replicas of log3 differ"

# A reader opened with both up, reading r1's file; r1 drained, a line
# appended, r1 undrained and its copy replayed (a new file there): the
# reader's next read got the old copy's size from the GETATTR the kernel
# sends with the handle first (its own file, taken for one renamed over
# the name behind the mount) and read "A" alone, the appended line lost
# to it (old).
timeout 60 python3 - "$M" <<'PY' || fail "a reader across a drain, an append and the replay"
import json, os, sys, time
m = sys.argv[1]
p = m + "/log4"
def ctl(c):
    with open(m + "/.smux/ctl", "w") as f:
        f.write(c + "\n")
with open(p, "w") as w:
    w.write("A\n")
time.sleep(0.3)
r = os.open(p, os.O_RDONLY)
ctl("drain r1")
with open(p, "a") as a:
    a.write("B\n")
ctl("undrain r1")
for _ in range(50):
    ctl("repair")
    if json.load(open(m + "/.smux/stats"))["pendingHints"] == 0:
        break
    time.sleep(0.2)
got = os.read(r, 100)
os.close(r)
assert got == b"A\nB\n", got
PY

# The same, with r1's copy not replayed yet (its file made immutable:
# the replay's rename fails and its hint stays): the reader's file is
# still named but misses the line; it read "A" alone and took that for
# the end. The reader now reads where the key is as it is (mux_reader.c
# mr_rebase).
echo A >"$M/log5"
exec 8<"$M/log5"
echo "drain r1" >"$M/.smux/ctl"
echo B >>"$M/log5"
chattr +i "$T/r1/log5" || fail "chattr +i on $T/r1"
echo "undrain r1" >"$M/.smux/ctl"
echo repair >"$M/.smux/ctl" || true
got=$(timeout 10 cat <&8 | tr '\n' ' ')
exec 8<&-
h=$(stats "$M" .pendingHints)
chattr -i "$T/r1/log5"
[ "$h" != 0 ] || fail "r1's hint for log5 replayed (the case needs it pending)"
[ "$got" = "A B " ] || fail "a reader of log5 read '$got' with r1's copy not replayed, want 'A B '"
repair_settled "$M" 30
unmount_smux "$M"
cmp -s "$T/r1/log" "$T/r2/log" || fail "the replicas of log differ"
