#!/usr/bin/env bash
# test_events.sh - .smux/events (issue 11 item 2): the mux's recent events
# as JSON lines with a sequence number and a timestamp, on a mirror whose
# second replica fails every call (so writes emit backend.down,
# hint.recorded and fanout-partial):
#   - every line is JSON with topic, at and seq; seq counts up by one;
#   - `[mount] event_webhook` POSTs each event as JSON to a receiver this
#     test runs (tests/tools/otlp_receiver.py);
#   - `tail -f` follows it: an event of a write made after tail started
#     reaches tail's output;
#   - a reader that keeps the file open and reads again gets only newer
#     events, and poll(2) blocks until there is one, then says POLLIN;
#   - the daemon's log takes at most 50 routine events a second and counts
#     the ones it left out;
#   - the ring is bounded: after thousands of events `cat` shows the last
#     1024, seq contiguous up to the newest; the file's size is the length
#     of every line since the mount (what tail needs), never less than cat
#     reads.
. "$(dirname "$0")/lib.sh"

M=$T/mnt
port=$(start_receiver "$T/rx") # the event_webhook's receiver
new_config "$T/ev.conf" m "event_webhook=http://127.0.0.1:$port/hook"
# f stays down once it fails (an hour's cooldown): no probe or replay
# of f's hints emits events in the background while the poll below
# waits for silence (make check once saw a hint.replayed land in it)
cfg_mux m mirror "a f" backend_timeout=5s cooldown=1h max_cooldown=1h
cfg_file a "$T/a"
cfg_faulty f b error_rate=1.0
cfg_file b "$T/b"
mount_smux "$T/ev.conf" "$M"
EV=$M/.smux/events

log "--- lines are JSON with topic, at and seq"
echo one >"$M/first"
for ((i = 0; i < 100; i++)); do
	grep -q '"key":"first"' "$EV" && break
	sleep 0.05
done
grep -q '"topic":"storage-mux.hint.recorded".*"key":"first"' "$EV" ||
	fail "no hint.recorded event for first: $(cat "$EV")"
jq -e -s 'length > 0 and all(has("topic") and has("at") and has("seq"))
	and ([.[].seq] == [range(.[0].seq; .[0].seq + length)])' "$EV" >/dev/null ||
	fail ".smux/events is not JSON lines with contiguous seq: $(head -c 500 "$EV")"

log "--- event_webhook gets each event as JSON"
for ((i = 0; i < 100; i++)); do
	grep -q '"key":"first"' "$T/rx/posts.jsonl" 2>/dev/null && break
	sleep 0.05
done
grep -q '"topic":"storage-mux.hint.recorded".*"key":"first"' "$T/rx/posts.jsonl" ||
	fail "the webhook did not get first's hint.recorded: $(head -c 400 "$T/rx/posts.jsonl" 2>/dev/null)"
[ ! -e "$T/rx/bad" ] || fail "the webhook posted a body that is not JSON"

log "--- tail -f follows it"
timeout 20 tail -n 0 -f "$EV" >"$T/tail.out" 2>&1 &
tpid=$!
sleep 1.5 # tail has read to the end and polls the size (the pace of tail)
echo two >"$M/second"
for ((i = 0; i < 200; i++)); do
	grep -q '"key":"second"' "$T/tail.out" && break
	sleep 0.05
done
kill "$tpid" 2>/dev/null || true
wait "$tpid" 2>/dev/null || true
grep -q '"key":"second"' "$T/tail.out" ||
	fail "tail -f did not see the event of second: $(cat "$T/tail.out")"
grep -q '"key":"first"' "$T/tail.out" && fail "tail -n 0 -f showed an old event"

log "--- an open reader gets only newer events; poll waits for one"
python3 - "$EV" "$M/third" <<'EOF' || fail "open reader / poll (above)"
import os, select, sys, json
ev, path = sys.argv[1], sys.argv[2]
# a reader that waits, then goes away before any event (its poll handle
# must be forgotten at close: the next event must not wake a freed reader)
gone = os.open(ev, os.O_RDONLY)
while os.read(gone, 65536):
    pass
q = select.poll()
q.register(gone, select.POLLIN)
q.poll(100)
os.close(gone)
fd = os.open(ev, os.O_RDONLY)
while os.read(fd, 65536):
    pass
p = select.poll()
p.register(fd, select.POLLIN)
if p.poll(300):
    sys.exit("poll says POLLIN with nothing new")
with open(path, "w") as f:
    f.write("3\n")
if not p.poll(10000):
    sys.exit("poll did not wake up for a new event")
new = b""
while True:
    b = os.read(fd, 65536)
    if not b:
        break
    new += b
lines = [json.loads(l) for l in new.decode().splitlines()]
if not lines or not any(l.get("key") == "third" for l in lines):
    sys.exit("the new read lacks third's event: %r" % new[:300])
if any(l.get("key") in ("first", "second") for l in lines):
    sys.exit("the new read repeats old events")
EOF

log "--- the ring is bounded"
for ((i = 0; i < 700; i++)); do echo "$i" >"$M/f$i"; done
# the dispatcher delivers asynchronously: wait for the last file's event
for ((i = 0; i < 200; i++)); do
	tail -n 5 "$EV" | grep -q '"key":"f699"' && break
	sleep 0.05
done
cat "$EV" >"$T/all"
n=$(wc -l <"$T/all")
[ "$n" -eq 1024 ] || fail "cat shows $n lines, not the 1024 kept"
jq -e -s '[.[].seq] == [range(.[0].seq; .[0].seq + length)]' "$T/all" >/dev/null ||
	fail "seq not contiguous in the ring"
last=$(tail -n 1 "$T/all" | jq .seq)
first=$(head -n 1 "$T/all" | jq .seq)
[ "$first" -gt 1 ] || fail "nothing was dropped from the ring (first seq $first)"
size=$(stat -c %s "$EV")
[ "$size" -ge "$(stat -c %s "$T/all")" ] ||
	fail "st_size $size is less than what cat read ($(stat -c %s "$T/all"))"
log "ring: seq $first..$last, file size $size"
# the log takes at most 50 routine events a second and says how many it
# left out (the next second's first event brings the count)
sleep 1.1
echo after >"$M/after-burst"
for ((i = 0; i < 100; i++)); do
	grep -q "event(s) not logged" "$T"/smuxfs.*.log && break
	sleep 0.05
done
grep -q "event(s) not logged" "$T"/smuxfs.*.log || fail "no log line counts the events left out"
n=$(grep -c '"topic":"storage-mux.hint.recorded"' "$T"/smuxfs.*.log || true)
[ "$n" -lt 1000 ] || fail "$n hint.recorded lines in the log: not rate-limited"
unmount_smux "$M"
log "ok"
