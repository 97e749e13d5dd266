#!/usr/bin/env bash
# test_shield_list.sh - a shield's listing right after its origin's
# undrain shows the files made while the origin was out (s45-t4). The
# first member up answers a shield's listing; the origin, back but not
# caught up yet (its hints pending), listed 2 to 14 of 100 such files,
# and `rsync -aH MNT/ copy/` right after the undrain left files out. The
# listing is now corrected by the answering member's pending hints, as
# failover's is.
. "$(dirname "$0")/lib.sh"

new_config "$T/c.conf" m
cfg_mux m shield "r1 r2"
cfg_file r1 "$T/r1"
cfg_file r2 "$T/r2"
M=$T/mnt
mount_smux "$T/c.conf" "$M"
mkdir "$M/d"
echo "drain r1" >"$M/.smux/ctl"
made=0
for i in $(seq 1 100); do
	echo "$i" >"$M/d/f$i" 2>/dev/null && made=$((made + 1))
done
[ "$made" -gt 0 ] || fail "no file could be made while the origin was drained"
echo "undrain r1" >"$M/.smux/ctl"
n=$(timeout -k 5 20 ls "$M/d" | grep -c '^f') || true
log "made $made files while r1 was drained; ls right after the undrain lists $n"
[ "$n" = "$made" ] || fail "ls right after the undrain lists $n of the $made files"
repair_settled "$M" 30
n=$(ls "$T/r1/d" | grep -c '^f') || true
[ "$n" = "$made" ] || fail "the origin holds $n of the $made files after the repair"
unmount_smux "$M"
