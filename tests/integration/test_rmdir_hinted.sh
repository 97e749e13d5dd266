#!/usr/bin/env bash
# test_rmdir_hinted.sh - a mirror of two file backends [a, b]: rm -r of a
# tree during a rolling drain (drain a; rm files and directories; undrain
# a; drain b; rmdir) removes it, also when a still holds names under the
# directory whose deletes it missed: their hints are replayed first, then
# the removal is tried again (s46-t4: "rm: cannot remove 't1': Directory
# not empty" - a replayed the removal of t1/d10/ before the deletes of
# its files, that failed, and the hint waited; the rmdir of t1 went to a
# alone, which still held t1/d10/).
. "$(dirname "$0")/lib.sh"

command -v chattr >/dev/null || fail "chattr missing (e2fsprogs)"
new_config "$T/c.conf" m
cfg_mux m mirror "a b"
cfg_file a "$T/a"
cfg_file b "$T/b"
M=$T/mnt
CTL=$M/.smux/ctl
mount_smux "$T/c.conf" "$M"

# replays_failed R KEY N: R's replay of KEY failed N times
replays_failed() {
	[ "$(grep -F "\"name\":\"$1\",\"key\":\"$2\",\"cause\"" "$M/.smux/events" |
		wc -l)" -ge "$3" ]
}

# wait_failed DIR R KEY...: until R's replays of each KEY failed twice
# (DIR, made immutable for it, is made mutable again on a timeout)
wait_failed() {
	local dir=$1 r=$2 k end=$((SECONDS + 20))
	shift 2
	for k in "$@"; do
		until replays_failed "$r" "$k" 2; do
			[ "$SECONDS" -lt "$end" ] || {
				chattr -i "$dir"
				fail "no failed replays of $k on $r"
			}
			echo repair >"$CTL" 2>/dev/null || true
			sleep 0.2
		done
	done
}

mkdir -p "$M/t/d"
echo 1 >"$M/t/d/f"
echo "drain a" >"$CTL"
rm "$M/t/d/f"
rmdir "$M/t/d"
[ "$(stats "$M" .pendingHints)" = 2 ] || fail "hints: $(stats "$M" .pendingHints)"
# a's replays fail (an immutable directory) and wait: a keeps t/d/ and f
chattr +i "$T/a/t/d" || fail "chattr +i (a filesystem without it?)"
echo "undrain a" >"$CTL"
wait_failed "$T/a/t/d" a t/d/f t/d/
# b's drain replays them first, and they fail again: the rmdir goes to
# a alone, which still holds t/d/f and t/d/ (their next try is seconds
# away)
echo "drain b" >"$CTL"
chattr -i "$T/a/t/d"
[ -e "$T/a/t/d/f" ] || fail "a's hints were replayed before the rmdir"
timeout 20 rmdir "$M/t" || fail "rmdir t while a held t/d/ (hinted)"
[ ! -e "$T/a/t" ] || fail "t still on a: $(find "$T/a/t")"
[ ! -e "$M/t" ] || fail "t still shows"
echo "undrain b" >"$CTL"
repair_settled "$M" 30
[ ! -e "$T/b/t" ] || fail "t still on b: $(find "$T/b/t")"
log "rmdir with a's deletes under it pending: removed on a and b"

# A drain first replays the other replicas' hints, also those waiting
# after a failed try: b's delete of g failed (immutable directory) and
# waited; a's drain left b, behind on g, alone - and the create of g
# failed EIO until a's undrain (s47: sqlite's journal, a random
# drain/undrain loop)
mkdir "$M/u"
echo 1 >"$M/u/g"
echo "drain b" >"$CTL"
rm "$M/u/g"
chattr +i "$T/b/u" || fail "chattr +i"
echo "undrain b" >"$CTL"
wait_failed "$T/b/u" b u/g
chattr -i "$T/b/u"
echo "drain a" >"$CTL"
[ ! -e "$T/b/u/g" ] || fail "a's drain left b's delete of u/g waiting"
timeout 20 sh -c "echo 2 >'$M/u/g'" || fail "create u/g with a drained"
[ "$(cat "$T/b/u/g")" = 2 ] || fail "u/g on b: $(cat "$T/b/u/g")"
echo "undrain a" >"$CTL"
repair_settled "$M" 30
log "a drain replays the others' hints that wait after a failed try"
unmount_smux "$M"

# A shield [a (origin), b]: the origin lists what the mirror answers for
# while it is drained, corrected by its hints - a directory rm -r removed
# then (a's delete of its marker pending) showed there after a's undrain
# and b's drain, and rmdir of the one above failed "Directory not empty"
# (s47-t1, rm -r under a rolling drain of the origin)
new_config "$T/s.conf" s
cfg_mux s shield "a b"
cfg_file a "$T/sa"
cfg_file b "$T/sb"
mount_smux "$T/s.conf" "$M"
mkdir -p "$M/t/d"
echo 1 >"$M/t/d/f"
echo "drain a" >"$CTL"
rm -r "$M/t/d" || fail "rm -r t/d with the origin drained"
chattr +i "$T/sa/t/d" || fail "chattr +i"
echo "undrain a" >"$CTL"
echo "drain b" >"$CTL" # its replays of a's hints fail: a keeps t/d
chattr -i "$T/sa/t/d"
[ -d "$T/sa/t/d" ] || fail "a's hints were replayed before the listing"
[ -z "$(ls -A "$M/t")" ] || fail "t lists $(ls -A "$M/t") with b drained"
timeout 20 rmdir "$M/t" || fail "rmdir t (shield) while a held t/d/ (hinted)"
echo "undrain b" >"$CTL"
repair_settled "$M" 30
[ ! -e "$T/sa/t" ] && [ ! -e "$T/sb/t" ] || fail "t left on a or b"
log "shield: a directory removed while the origin was drained is not listed"
unmount_smux "$M"
