#!/usr/bin/env bash
# test_notes_restart.sh - the mux's "departed" note survives a crash of the
# daemon (issue 9; test_mux_notes_restart is the unit test of both notes).
#
# A mirror of fa (a faulty backend over A), b and c, all holding k = "v1":
#   - c is removed; fa misses the write of "v2" (its faults on, a hint);
#     b, the only holder of "v2", is removed too (the mux notes that k's
#     latest write left with b); fa's faults off;
#   - kill -9 of the daemon; the operator's config now lists fa alone;
#     the remount, then `add c to m` and repairs: c rejoins while "v2" is
#     out of the mux - a read of k must not give the old "v1" (before the
#     note was journaled, c kept "v1", fa's hint was replayed from it and
#     reads served it);
#   - `add b to m` and repairs: every backing directory holds "v2".
. "$(dirname "$0")/lib.sh"

M=$T/mnt
CONF=$T/notes.conf
CTL=$M/.smux/ctl

# write_config "MEMBERS": the config (one file, so one state directory).
write_config() {
	new_config "$CONF" m
	cfg_mux m mirror "$1" backend_timeout=5s cooldown=200ms
	cfg_faulty fa A
	cfg_file A "$T/A"
	cfg_file b "$T/b"
	cfg_file c "$T/c"
}

# repair_until_settled: repairs until no hint is pending (bounded).
repair_until_settled() {
	local i
	for ((i = 0; i < 100; i++)); do
		echo repair >"$CTL" 2>/dev/null || true
		[ "$(stats "$M" .pendingHints)" -eq 0 ] && return 0
		sleep 0.1
	done
	fail "hints still pending after the repairs ($(stats "$M" .pendingHints))"
}

write_config "fa b c"
mount_smux "$CONF" "$M"
echo v1 >"$M/k"
for d in A b c; do
	[ "$(cat "$T/$d/k")" = v1 ] || fail "$d does not hold v1"
done
echo "remove c" >"$CTL" || fail "remove c failed"
echo "fault fa error_rate=1" >"$CTL" || fail "fault fa failed"
echo v2 >"$M/k" || fail "the write of v2 failed"
[ "$(cat "$T/b/k")" = v2 ] || fail "b does not hold v2"
[ "$(cat "$T/A/k")" = v1 ] || fail "fa took v2 despite its faults"
echo "remove b" >"$CTL" || fail "remove b failed"
echo "fault fa off" >"$CTL" || fail "fault fa off failed"

log "--- kill -9, remount with fa alone, c added back"
crash_smux "$M"
write_config "fa"
mount_smux "$CONF" "$M"
echo "add c to m" >"$CTL" || fail "add c failed"
for ((i = 0; i < 20; i++)); do
	echo repair >"$CTL" 2>/dev/null || true
	sleep 0.1
done
if got=$(cat "$M/k" 2>/dev/null); then
	[ "$got" = v2 ] || fail "read k: \"$got\" while the only copy of v2 is out of the mux"
fi
[ "$(cat "$T/c/k")" = v1 ] || fail "c's copy of k changed: $(cat "$T/c/k")"

log "--- b added back"
echo "add b to m" >"$CTL" || fail "add b failed"
repair_until_settled
for d in A b c; do
	[ "$(cat "$T/$d/k")" = v2 ] || fail "$d holds \"$(cat "$T/$d/k")\", not v2"
done
[ "$(cat "$M/k")" = v2 ] || fail "read k: $(cat "$M/k")"
unmount_smux "$M"
log "ok"
