#!/usr/bin/env bash
# test_inplace_fail.sh - a failover mount written in place (file backends,
# the primary behind a faulty backend) whose primary fails in the middle of
# a writer's life, switched on and off through .smux/ctl fault (issue 8:
# "nothing acknowledged is lost"; an error to the writer is acceptable
# where its data could not be stored, silent loss is not):
#   - an in-place writer of an existing file (an appender: no spool, it
#     cannot move) whose primary fails after an acknowledged fsync: the
#     acknowledged bytes stay, and every later write, fsync or close that
#     returns success has its bytes in the file once the primary is back;
#     one that could not be stored returns an error;
#   - an append (`echo >>`) while the primary is failing never lands on
#     the standby's older copy: it fails, and the file is whole after;
#   - a file created in place (its spool moves) whose primary fails
#     mid-write: every write and the close succeed, the content is whole
#     through the mount during the outage and on both directories after
#     the replay.
# FAULT: "error" (every call of the primary fails: error_rate=1) or "hang"
# (every call hangs past backend_timeout: latency=3s; a write abandoned
# that way may still land later, so only "nothing acknowledged is lost"
# is checked, not "nothing refused is there").
. "$(dirname "$0")/lib.sh"

FAULT=${1:-error}
case $FAULT in
error) FAULT_KV="error_rate=1" ;;
hang) FAULT_KV="latency=3s" ;;
*) fail "unknown fault $FAULT" ;;
esac

m=$T/mnt
P=$T/p
S=$T/s
new_config "$T/if.conf" fo
cfg_mux fo failover "pf s" backend_timeout=1s cooldown=200ms max_cooldown=400ms
cfg_faulty pf p
cfg_file p "$P"
cfg_file s "$S"
mount_smux "$T/if.conf" "$m" attr_timeout=0,entry_timeout=0,negative_timeout=0
CTL=$m/.smux/ctl

# py SCRIPT ARGS...: python3; any exception fails the test
py() {
	local script=$1
	shift
	python3 -c "$script" "$@" || fail "python: $script"
}

# wait_hints SECONDS: repair until the primary is up again and the mux
# has no pending hint (a failover standby serves its own, older version
# while the primary is down: read only after)
wait_hints() {
	local end=$((SECONDS + $1))
	while [ "$(backend_stat "$m" pf status)" != up ] ||
		[ "$(stats "$m" .pendingHints)" -ne 0 ]; do
		[ "$SECONDS" -lt "$end" ] || fail "pf $(backend_stat "$m" pf status), pendingHints $(stats "$m" .pendingHints) after ${1}s"
		echo repair >"$CTL" || true
		sleep 0.1
	done
}

log "an appender of an existing file; the primary fails after an fsync"
printf 'an older copy on the standby\n' >"$S/log"
printf 'line 0\n' >"$m/log"
[ "$(cat "$P/log")" = "line 0" ] || fail "log is not on the primary"
py '
import os, sys
p, ctl, out = sys.argv[1], sys.argv[2], sys.argv[3]
fd = os.open(p, os.O_WRONLY | os.O_APPEND)
os.write(fd, b"line 1\n")
os.fsync(fd)  # acknowledged
os.write(fd, b"line 2\n")  # told stored, not yet synced
ok = [2]  # what the writer was told is stored
with open(ctl, "w") as c:
    c.write("fault pf %s\n" % sys.argv[4])
for i in range(3, 6):
    try:
        os.write(fd, b"line %d\n" % i)
        ok.append(i)
    except OSError as e:
        print("write %d: %s" % (i, e), file=sys.stderr)
synced = True
try:
    os.fsync(fd)
except OSError as e:
    synced = False
    print("fsync: %s" % e, file=sys.stderr)
closed = True
try:
    os.close(fd)
except OSError as e:
    closed = False
    print("close: %s" % e, file=sys.stderr)
with open(out, "w") as f:
    f.write("%s %d %d\n" % (",".join(map(str, ok)) or "-", synced, closed))
' "$m/log" "$CTL" "$T/told" "$FAULT_KV"
read -r ok synced closed <"$T/told"
log "writes told stored: $ok, fsync ok: $synced, close ok: $closed"
echo "fault pf off" >"$CTL"
wait_hints 30
got=$(cat "$m/log")
case $got in "line 0"$'\n'"line 1"*) ;; *) fail "the acknowledged lines are gone: '$got'" ;; esac
# nothing the writer was told failed is in the file (a hung write may
# land after it was abandoned)
[ "$FAULT" = hang ] || for i in 3 4 5; do
	case ",$ok," in *",$i,"*) continue ;; esac
	! grep -qx "line $i" <<<"$got" || fail "line $i failed to write and is in the file: '$got'"
done
[ "$(cat "$P/log")" = "$got" ] || fail "the primary holds '$(cat "$P/log")', the mount shows '$got'"
if [ "$synced" = 1 ] || [ "$closed" = 1 ]; then
	# acknowledged: every write told stored must be there
	for i in ${ok//,/ }; do
		[ "$i" = - ] && continue
		grep -qx "line $i" <<<"$got" || fail "line $i was acknowledged (fsync $synced, close $closed) and is lost: '$got'"
	done
fi

log "an append while the primary fails never lands on the standby's old copy"
printf 'old standby copy\n' >"$S/log2"
printf 'a\n' >"$m/log2"
[ "$(cat "$P/log2")" = a ] || fail "log2 is not on the primary"
echo "fault pf $FAULT_KV" >"$CTL"
rc=0
if ! { echo b >>"$m/log2"; } 2>"$T/append.err"; then rc=1; fi
echo "fault pf off" >"$CTL"
wait_hints 30
got=$(tr '\n' ' ' <"$m/log2")
if [ "$rc" -eq 0 ]; then
	[ "$got" = "a b " ] || fail "append acknowledged during the outage, log2 is now '$got'"
else
	log "append during the outage failed: $(cat "$T/append.err")"
	[ "$got" = "a " ] || fail "a failed append changed log2: '$got'"
fi
[ "$(tr '\n' ' ' <"$P/log2")" = "$got" ] || fail "the primary's log2 differs from the mount's"

log "a file created in place moves with its spool when the primary fails"
head -c 3000000 /dev/urandom >"$T/blob"
py '
import os, sys
p, ctl, src = sys.argv[1], sys.argv[2], sys.argv[3]
data = open(src, "rb").read()
fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
half = len(data) // 2
os.write(fd, data[:half])
with open(ctl, "w") as c:
    c.write("fault pf %s\n" % sys.argv[4])
os.write(fd, data[half:])
os.fsync(fd)
os.close(fd)
with open(p, "rb") as f:
    assert f.read() == data, "new differs through the mount during the outage"
' "$m/new" "$CTL" "$T/blob" "$FAULT_KV"
log "new written"
echo "fault pf off" >"$CTL"
wait_hints 30
log "replayed"
cmp "$T/blob" "$m/new" || fail "new differs through the mount"
cmp "$T/blob" "$S/new" || fail "new differs on the standby"
cmp "$T/blob" "$P/new" || fail "new differs on the primary after the replay"

unmount_smux "$m"
log "ok"
