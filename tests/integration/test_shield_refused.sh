#!/usr/bin/env bash
# test_shield_refused.sh - a shield whose origin fails every call: writes
# are refused (EIO, as documented), and a refused write changes nothing
# anywhere. An `echo new > existing` (O_TRUNC) opened the copies
# truncating, was refused by the origin, and the repair then reconciled
# the empty copy onto the origin: the acknowledged "before" was gone from
# every replica; a refused create left an empty 0600 file that the repair
# brought to the origin too (s43-t4). The origin's open comes first now,
# and a reconcile in shield takes the origin's copy, never a copy's.
. "$(dirname "$0")/lib.sh"

new_config "$T/c.conf" m
cfg_mux m shield "fo c1 c2" backend_timeout=3s cooldown=300ms max_cooldown=600ms
cfg_faulty fo o
cfg_file o "$T/o"
cfg_file c1 "$T/c1"
cfg_file c2 "$T/c2"
M=$T/mnt
mount_smux "$T/c.conf" "$M"
echo before >"$M/existing"
echo "fault fo error_rate=1" >"$M/.smux/ctl" || fail "fault fo"
timeout 20 cat "$M/existing" >/dev/null || true # the origin marked down
rc=0
timeout 20 sh -c "echo new >'$M/existing'" 2>/dev/null || rc=$?
[ "$rc" != 0 ] || fail "echo new > existing succeeded with the origin failing"
rc=0
timeout 20 python3 -c 'import os, sys; os.close(os.open(sys.argv[1], os.O_WRONLY | os.O_TRUNC))' \
	"$M/existing" 2>/dev/null || rc=$?
[ "$rc" != 0 ] || fail "open(O_TRUNC) of existing succeeded with the origin failing"
rc=0
timeout 20 sh -c "echo new >'$M/during'" 2>/dev/null || rc=$?
[ "$rc" != 0 ] || fail "echo new > during succeeded with the origin failing"
echo "fault fo off" >"$M/.smux/ctl" || fail "fault fo off"
for ((i = 0; i < 50; i++)); do
	echo repair >"$M/.smux/ctl" 2>/dev/null || true
	[ "$(backend_stat "$M" fo status)" = up ] &&
		[ "$(stats "$M" .pendingHints)" = 0 ] && break
	sleep 0.2
done
echo repair >"$M/.smux/ctl" || true
for r in o c1 c2; do
	[ "$(cat "$T/$r/existing")" = before ] ||
		fail "existing on $r after the refused writes and the repair: '$(cat "$T/$r/existing")'"
	[ ! -e "$T/$r/during" ] || fail "the refused create left during on $r"
done
[ "$(cat "$M/existing")" = before ] || fail "existing through the mount: $(cat "$M/existing")"
[ ! -e "$M/during" ] || fail "the refused create left during in the mount"
unmount_smux "$M"
log "refused writes with the origin failing changed nothing"
